//! The report stream: records framed onto the PL011 (see `mtex_abi::frame`).
//!
//! Trapped register writes are the hot path, so they are queued raw in the trap ring
//! (`fast_step::RawWrite`: both trap paths push there, the fast one in assembly) and formatted
//! and framed when the ring fills or before any other record goes out; order is kept and
//! nothing is dropped. Every record takes the next sequence number; the closing Summary says
//! how many came before.

use crate::fast_step::{RAW_COUNTED, RawWrite};
use arm_pl011_uart::{PL011Registers, Uart};
use core::fmt::Write;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicU32, Ordering};
use mtex_abi::frame;
use mtex_abi::report::{
    CONSOLE_LINE_BYTES, ConsoleText, ExitReason, GuestState, Message, ResultsTaken, Summary,
    SysregWrite,
};
use mtex_abi::{Record, ShortStr};
use mtex_arch::{Esr, SysReg};
use mtex_vm::results::ResultsRing;
use safe_mmio::UniqueMmioPointer;

/// Sequence number of the next record. Global so that the panic path continues the count.
static NEXT_SEQ: AtomicU32 = AtomicU32::new(0);
/// Guest exits over the whole run, for the Summary (also read by the panic path).
pub static RUN_EXITS: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(0);

/// The console UART's address, from the discovered machine (`set_console`).
static UART_BASE: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);

/// Names the console, once, before the first record. Both kinds the machine description
/// allows are driven the same: only UARTDR and UARTFR are used (a PL011 is never
/// reprogrammed, which an SBSA generic UART would not allow), firmware's line settings stay.
pub fn set_console(console: mtex_platform::Console) {
    UART_BASE.store(console.base as usize, Ordering::Relaxed);
}

fn console_uart() -> Uart<'static> {
    let base = UART_BASE.load(Ordering::Relaxed);
    // SAFETY: `base` is the machine's console UART (set_console, before any record; the
    // machine was validated to have one), identity-mapped as device memory at EL2 and used
    // only by the hypervisor to write. Two instances exist only on the way to power-off (the
    // panic path), where interleaving output is the lesser evil.
    unsafe {
        Uart::new(UniqueMmioPointer::new(
            NonNull::new(base as *mut PL011Registers).expect("console named before use"),
        ))
    }
}

/// Where records go: the console UART, and in Linux modes a copy into the results ring the
/// guest can read back (`mtex_vm::results`).
struct Out {
    uart: Uart<'static>,
    ring: Option<ResultsRing<&'static mut [u8]>>,
}

/// Bytes of the results ring: some twenty thousand records.
const RESULTS_BYTES: usize = 2 << 20;

fn send_on(out: &mut Out, record: &Record) {
    let seq = NEXT_SEQ.load(Ordering::Relaxed);
    NEXT_SEQ.store(seq + 1, Ordering::Relaxed);
    let mut buf = [0u8; frame::MAX_TEXT];
    // Every record fits a frame (a host test encodes the largest of each kind).
    let line = frame::encode(seq, record, &mut buf).expect("record larger than a frame");
    if let Some(ring) = &mut out.ring {
        ring.append(line.as_bytes(), matches!(record, Record::ResultsTaken(_)));
    }
    write_bounded(&mut out.uart, line.as_bytes());
}

/// Set when the UART stopped taking bytes: nothing more is sent (the host then finds the
/// stream cut short, with no Summary, and fails the run).
static UART_DEAD: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);

/// Longest wait for room in the transmit FIFO, in ms of counter time: one byte takes under
/// 0.1 ms at 115200 baud. A UART that was disabled or wedged must not hang EL2, which runs
/// with interrupts masked (the watchdog cannot fire).
const UART_WAIT_MS: u64 = 100;

/// Writes `bytes`, waiting a bounded time for FIFO room (arm-pl011-uart's `write_str` waits
/// forever).
fn write_bounded(uart: &mut Uart<'static>, bytes: &[u8]) {
    use arm_sysregs::el0::accessors::read_cntpct_el0;
    if UART_DEAD.load(Ordering::Relaxed) {
        return;
    }
    let budget = UART_WAIT_MS * crate::watchdog::counter_hz() / 1000;
    for &b in bytes {
        if uart.is_tx_fifo_full() {
            let start = read_cntpct_el0().bits();
            while uart.is_tx_fifo_full() {
                if read_cntpct_el0().bits().wrapping_sub(start) > budget {
                    UART_DEAD.store(true, Ordering::Relaxed);
                    return;
                }
            }
        }
        uart.write_word(b);
    }
}

pub struct Reporter {
    out: Out,
    /// The CPU whose records went out last (`Record::OnCpu` marks a change).
    cpu: u32,
    line: [u8; CONSOLE_LINE_BYTES],
    line_len: usize,
    /// Counts EL2 instructions spent framing queued writes, so that phase figures can tell
    /// the trap path from the reporting cost.
    pmu: Option<crate::pmu::Pmu>,
    pub flush_instructions: u64,
}

impl Reporter {
    pub fn new() -> Self {
        let mut uart = console_uart();
        // A frame must start on a fresh line even if firmware left a partial one.
        write_bounded(&mut uart, b"\n");
        crate::fast_step::this_cpu().init_trap_ring();
        Self {
            out: Out { uart, ring: None },
            cpu: 0,
            line: [0; CONSOLE_LINE_BYTES],
            line_len: 0,
            pmu: None,
            flush_instructions: 0,
        }
    }

    /// Lets the reporter measure its own cost once the PMU is set up.
    pub fn set_pmu(&mut self, pmu: Option<crate::pmu::Pmu>) {
        self.pmu = pmu;
    }

    /// Keeps a copy of every record from now on for the guest to read back (Linux modes,
    /// before the first record).
    pub fn keep_results(&mut self) {
        let buf = alloc::vec![0u8; RESULTS_BYTES].leak();
        self.out.ring = Some(ResultsRing::new(buf));
    }

    /// The guest takes a snapshot of the records: it ends with a `ResultsTaken` record.
    /// Nothing without a results ring.
    pub fn take_results(&mut self) {
        if self.out.ring.is_none() {
            return;
        }
        // What is queued goes first, so that the record counts everything before it.
        self.flush();
        let records = NEXT_SEQ.load(Ordering::Relaxed);
        let lost = self.out.ring.as_ref().map_or(0, ResultsRing::lost);
        send_on(
            &mut self.out,
            &Record::ResultsTaken(ResultsTaken { records, lost }),
        );
        if let Some(r) = &mut self.out.ring {
            r.take();
        }
    }

    /// A 64-bit load of one of the snapshot's registers (all ones without a results ring).
    pub fn read_results(&mut self, reg: u64) -> u64 {
        self.out.ring.as_mut().map_or(u64::MAX, |r| r.read(reg))
    }

    /// Sends `record` after everything queued before it.
    pub fn send(&mut self, record: &Record) {
        self.flush();
        send_on(&mut self.out, record);
    }

    /// Marks the records that follow as CPU `cpu`'s, if the last ones were another's.
    fn on_cpu(&mut self, cpu: u32) {
        if cpu != self.cpu {
            self.cpu = cpu;
            send_on(
                &mut self.out,
                &Record::OnCpu(mtex_abi::report::OnCpu { cpu }),
            );
        }
    }

    /// Queues a trapped write (the full trap path: no formatting here).
    #[inline(always)]
    pub fn sysreg_write(&mut self, w: RawWrite) {
        let pushed = crate::fast_step::this_cpu().ring_push(w);
        if !pushed {
            self.flush();
            // The ring is empty now.
            let pushed = crate::fast_step::this_cpu().ring_push(w);
            debug_assert!(pushed);
        }
    }

    /// From now on, this CPU's trapped writes belong to phase `id` (0: none); the ones queued
    /// before are framed first, with the phase they happened in. Each CPU's ring has its own
    /// phase: in a window, each CPU's writes belong to it from its joining to its leaving.
    pub fn set_phase(&mut self, id: u32) {
        self.flush();
        crate::fast_step::this_cpu().ring_phase = id;
    }

    /// Formats and frames every queued write, counting those the fast path handled, then the
    /// hypervisor's queued log lines. On the trap path (a full ring) both fall inside the
    /// measured framing cost, not the trap's.
    pub fn flush(&mut self) {
        self.on_cpu(crate::fast_step::this_cpu_index() as u32);
        let mut f = crate::fast_step::this_cpu();
        let len = f.ring_len();
        if len == 0 {
            self.send_log();
            return;
        }
        let before = self.pmu.map(|p| p.el2());
        let (mut fast, mut fast_tco) = (0, 0);
        for i in 0..len {
            let raw = f.ring_entry(i);
            let w = sysreg_write_of(&raw, f.ring_phase);
            if raw.esr & RAW_COUNTED == 0 {
                fast += 1;
                fast_tco += w.at.tco as u64;
            }
            send_on(&mut self.out, &Record::SysregWrite(w));
        }
        f.ring_clear();
        f.framed_fast_writes += fast;
        f.framed_fast_writes_with_tco += fast_tco;
        RUN_EXITS.fetch_add(fast, Ordering::Relaxed);
        self.send_log();
        if let (Some(p), Some(b)) = (self.pmu, before) {
            self.flush_instructions += p.el2().wrapping_sub(b);
        }
    }

    fn send_log(&mut self) {
        let out = &mut self.out;
        crate::logger::drain(|line| send_on(out, &Record::Console(line)));
    }

    /// Takes guest console bytes; each completed line becomes a Console record.
    pub fn console(&mut self, bytes: &[u8]) {
        for &b in bytes {
            if b == b'\n' {
                self.flush_line();
            } else if b != b'\r' {
                if self.line_len == self.line.len() {
                    self.flush_line();
                }
                self.line[self.line_len] = b;
                self.line_len += 1;
            }
        }
    }

    fn flush_line(&mut self) {
        let text = ConsoleText::from_bytes_lossy(&self.line[..self.line_len]);
        self.line_len = 0;
        self.send(&Record::Console(text));
    }

    /// Frames the writes another CPU queued and never framed (the run ends), as that CPU's;
    /// returns how many of them the fast path handled (exits not counted yet). The CPU may
    /// still be running: what it publishes after this read is not seen.
    ///
    /// # Safety
    ///
    /// `block` is another CPU's live fast-path block (`fast_step::new_block`), and the
    /// caller holds the hypervisor state (so that CPU's full path is not pushing).
    pub unsafe fn drain_other(&mut self, block: *const crate::fast_step::FastStep) -> u64 {
        // SAFETY: per the contract the block is live; only its published entries, which its
        // CPU no longer writes, and two fields it does not change outside its exits' Rust
        // code (which waits for the state) are read.
        let f = unsafe { &*block };
        let len = f.published_len();
        if len == 0 {
            return 0;
        }
        self.on_cpu(crate::fast_step::cpu_index_of(block));
        let mut fast = 0;
        for i in 0..len {
            let raw = f.ring_entry(i);
            fast += (raw.esr & RAW_COUNTED == 0) as u64;
            send_on(
                &mut self.out,
                &Record::SysregWrite(sysreg_write_of(&raw, f.ring_phase)),
            );
        }
        fast
    }

    /// Ends the run: whatever is pending, the Summary, then power-off. `others` are the
    /// other CPUs' fast-path blocks, whose queued writes are framed too.
    pub fn finish(
        &mut self,
        exit: ExitReason,
        others: impl Iterator<Item = *const crate::fast_step::FastStep>,
    ) -> ! {
        if self.line_len > 0 {
            self.flush_line();
        }
        self.flush();
        let mut uncounted = 0;
        for block in others {
            // SAFETY: the caller (`Hyp::finish`) passes other CPUs' live blocks, holding the
            // state.
            uncounted += unsafe { self.drain_other(block) };
        }
        RUN_EXITS.fetch_add(uncounted, Ordering::Relaxed);
        finish_on(&mut self.out, exit)
    }
}

/// The record of a queued write. Entries are pushed only for trapped writes of `SysReg`
/// registers (the fast path: SCTLR_EL1/TCR_EL1; the full path checks).
fn sysreg_write_of(raw: &RawWrite, phase: u32) -> SysregWrite {
    let reg = SysReg::from_iss(Esr(raw.esr).iss()).expect("a queued write of a SysReg");
    SysregWrite {
        reg,
        old: raw.old,
        new: raw.new,
        // As `GuestContext::state` reads the same two registers.
        at: GuestState {
            pc: raw.pc,
            el: ((raw.spsr >> 2) & 3) as u8,
            tco: raw.spsr & mtex_arch::el2_bits::spsr::TCO != 0,
        },
        ts: raw.ts,
        phase,
    }
}

/// Sends the Summary and powers off. Exits the fast path handled and no flush counted yet
/// (only when the run ends with the state still borrowed: `die`) are counted here.
fn finish_on(out: &mut Out, exit: ExitReason) -> ! {
    let uncounted = if crate::fast_step::has_block() {
        let f = crate::fast_step::this_cpu();
        (0..f.ring_len())
            .filter(|&i| f.ring_entry(i).esr & RAW_COUNTED == 0)
            .count() as u64
    } else {
        0
    };
    let summary = Summary {
        records: NEXT_SEQ.load(Ordering::Relaxed),
        exit,
        ts: arm_sysregs::el0::accessors::read_cntpct_el0().bits(),
        exits: RUN_EXITS.load(Ordering::Relaxed) + uncounted,
    };
    send_on(out, &Record::Summary(summary));
    crate::psci::system_off()
}

/// Ends the run from anywhere (the panic handler, an EL2 exception), queued records first.
pub fn die(exit: ExitReason) -> ! {
    // SAFETY: this path powers off and never returns to a handler that may hold this CPU's
    // block or the state.
    unsafe { crate::fast_step::release_for_shutdown() };
    // SAFETY: as above.
    match unsafe { crate::global::HYP.take_for_shutdown() } {
        Some(hyp) => hyp.finish(exit),
        None => finish_on(
            &mut Out {
                uart: console_uart(),
                ring: None,
            },
            exit,
        ),
    }
}

/// Ends the run before the guest started.
pub fn fail_boot(r: &mut Reporter, why: &str) -> ! {
    fail_boot_msg(r, Message::truncated(why))
}

pub fn fail_boot_msg(r: &mut Reporter, reason: Message) -> ! {
    r.finish(ExitReason::BootFailed { reason }, core::iter::empty())
}

/// `fmt::Write` into a ShortStr, cutting what does not fit.
pub struct Truncating<'a, const N: usize>(pub &'a mut ShortStr<N>);

impl<const N: usize> Write for Truncating<'_, N> {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        self.0.push_str_truncating(s);
        Ok(())
    }
}
