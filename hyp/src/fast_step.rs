//! The fast paths, in assembly, for the two exits that dominate: the step engine's and the
//! trapped MTE control write.
//!
//! - A single-step exit whose retiring instruction and next instruction are both inert
//!   (`mtex_trace::decode::is_inert`: data processing and direct branches) only adds one to the
//!   instruction count, so it is handled in a few dozen instructions without the full context
//!   save or the Rust dispatch.
//! - Outside traced phases, a trapped `MSR SCTLR_EL1/TCR_EL1, Xt` is emulated here and leaves
//!   a raw entry in the trap ring, which `report.rs` turns into its record (and counts) when it
//!   frames it.
//!
//! Everything else (a cache miss on the code page, a memory access, a system instruction, a
//! full ring, any other exit) falls through to the full path unchanged. The exactness tests
//! prove the counts and records identical either way (`mtex.step=plain` turns both off).

use arm_sysregs::el2::accessors::{read_tpidr_el2, write_tpidr_el2};
use arm_sysregs::el2::registers::TpidrEl2;
use core::arch::global_asm;
use core::cell::{RefCell, RefMut};
use core::mem::{offset_of, size_of};
use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, Ordering};
use mtex_arch::SysReg;
use mtex_arch::esr::ISS_RT_MASK;
use percore::{ExceptionFree, ExceptionLock};

/// One CPU's state shared by its fast paths and `trace.rs`, reached through TPIDR_EL2 (the
/// vectors need it before any register is free to find it otherwise). Rust reaches it only
/// through [`this_cpu`], inside that CPU's exits; its fast paths read and write it while no
/// Rust code of that CPU runs: one CPU's exits never run concurrently with each other, and
/// no CPU reaches another's (but for [`FastStep::published_len`] at the run's end).
#[repr(C)]
pub struct FastStep {
    /// 1 while the pending instruction is inert (the fast path may retire it).
    pub pending_inert: u64,
    /// PC of the pending instruction when it is inert.
    pub pending_pc: u64,
    /// The cached code page: VA page, the TTBRs and mode it was translated under, PA page.
    pub va_page: u64,
    pub ttbr0: u64,
    pub ttbr1: u64,
    /// SCTLR_EL1.M | (EL0 ? 2 : 0).
    pub mode: u64,
    /// 0 when the cache is empty.
    pub pa_page: u64,
    /// Single-step exits the fast path handled, over the run.
    pub steps: u64,
    /// Inert instructions it retired, by EL (reset per traced phase).
    pub inert_el0: u64,
    pub inert_el1: u64,
    /// CNTPCT_EL0 when the current exit entered EL2 (see `entry.rs`, guest time).
    pub exit_ts: u64,
    /// Where the trap fast path writes its next ring entry, with `TRAP_OFF` set while the
    /// path is off; `TRAP_FULL` set when the ring is full (see `TrapRing`). Rust changes it only
    /// through the functions below.
    trap_next: u64,
    /// ESR_EL2 of a trapped write of SCTLR_EL1 and of TCR_EL1, Rt cleared.
    trap_esr_sctlr: u64,
    trap_esr_tcr: u64,
    /// Nonzero in coarse guest time (`mtex.guest_time=coarse`): the period, in counter
    /// ticks, by which CNTVOFF_EL2 catches up with the machine's account (`guest_clock.rs`).
    pub coarse: u64,
    /// The highest clock value this CPU's guest may have seen (`mtex_vm::guest_clock::seen`).
    pub clock_seen: u64,
    /// Nonzero when the exit in progress proved that the guest interval it ended could not
    /// have looked at the clock (set by the step paths, cleared by the exit tail).
    pub clock_unseen: u64,
    /// When the sampled phase's next unit is due, as the counter value that, plus the
    /// machine's account of hypervisor time, the exit tail sets the EL2 timer to
    /// (`u64::MAX`: none is due). See `watchdog::sample_in`.
    pub sample_base: u64,
    /// This CPU's trap ring (`trap_next` points into it).
    ring: *mut TrapRing,
    /// Its trace's retired instructions as last handed to that window's account.
    pub stepped_retired: u64,
    /// The phase the writes in this CPU's ring belong to (0: none): the CPU's own, since in
    /// a window every CPU joins and leaves at its own exits (`Reporter::set_phase`).
    pub ring_phase: u32,
    /// Trapped writes of this CPU's that the fast path handled and `Reporter::flush` framed,
    /// over the run, and those of them made with PSTATE.TCO set: exits the CPU's own
    /// counters leave out (`Hyp::counters_now` adds them).
    pub framed_fast_writes: u64,
    pub framed_fast_writes_with_tco: u64,
    /// Nonzero while this CPU samples its share of a window on several CPUs, whose gaps are
    /// counted on its own instructions (`phase::sample`): the account of hypervisor time,
    /// which other CPUs' exits add to, must not move its due time while it halts.
    pub sample_own: u64,
}

const _: () = assert!(offset_of!(FastStep, pending_inert) == 0);
const _: () = assert!(offset_of!(FastStep, pending_pc) == 8);
const _: () = assert!(offset_of!(FastStep, va_page) == 16);
const _: () = assert!(offset_of!(FastStep, ttbr0) == 24);
const _: () = assert!(offset_of!(FastStep, ttbr1) == 32);
const _: () = assert!(offset_of!(FastStep, mode) == 40);
const _: () = assert!(offset_of!(FastStep, pa_page) == 48);
const _: () = assert!(offset_of!(FastStep, steps) == 56);
const _: () = assert!(offset_of!(FastStep, inert_el0) == 64);
const _: () = assert!(offset_of!(FastStep, inert_el1) == 72);
const _: () = assert!(offset_of!(FastStep, exit_ts) == 80);

/// Gives this CPU its fast-path state and trap ring, and points TPIDR_EL2 at them. Once,
/// first thing at EL2 on the boot CPU: before it, [`this_cpu`] has nothing to reach.
pub fn install_this_cpu() {
    install(new_block(0, core::ptr::null_mut()).expect("memory for the boot CPU's block"));
}

/// Points this CPU's TPIDR_EL2 at `block` (from [`new_block`], for this CPU alone).
pub fn install(block: *mut FastStep) {
    // SAFETY: EL2's own thread register, which only the hypervisor reads (the vectors and
    // `this_block` find this CPU's block there); `block` is this CPU's, made for it.
    unsafe { write_tpidr_el2(TpidrEl2::from_bits_retain(block as u64)) };
}

/// A CPU's [`FastStep`] in a cell that lends it to one borrower at a time, valid while
/// exceptions are masked (RF-A's pattern, through `percore`).
type BlockCell = ExceptionLock<RefCell<FastStep>>;

/// The words of a block read and written without borrowing it: whose it is, and what every
/// exit asks or decides at its end (a borrow at each would cost more than the question).
/// Atomics, relaxed: only the CPU itself writes them.
struct BlockWords {
    /// The CPU's index among the machine's; set before its guest first runs.
    cpu: AtomicU32,
    /// Its state in `Hyp` (`Hyp::vcpu`); null until the boot CPU's is made.
    vcpu: AtomicPtr<crate::state::Vcpu>,
    /// The guest's CPU_OFF was accepted on this CPU: once its exit has let go of the
    /// hypervisor's state, the CPU goes off through the firmware.
    power_off: AtomicBool,
    /// The guest's WFI, trapped in a window on several CPUs: once its exit has let go of the
    /// hypervisor's state, the CPU halts for it (`guest_clock::halt_for_guest_wfi`).
    halt_wfi: AtomicBool,
    /// This CPU counts in a window that steps several CPUs, and keeps that window's guest
    /// time (`stepped_clock.rs`): its counter reads trap to EL2 and are answered.
    stepped: AtomicBool,
    /// Counter ticks it waited for the hypervisor's lock while another CPU held it, over the
    /// run (`global.rs`).
    lock_wait_ticks: AtomicU64,
}

/// A CPU's block as allocated.
#[repr(C)]
struct Block {
    words: BlockWords,
    cell: BlockCell,
}

/// Where a [`FastStep`] sits in its [`Block`], in bytes: TPIDR_EL2 points at the FastStep
/// itself (the assembly's offsets are its fields'), and Rust steps back from it to the block.
/// A constant, so that the step folds into the loads that follow it (the hot paths reach the
/// block several times per exit): `RefCell`'s layout is the compiler's to choose, and today's
/// puts its borrow flag first, which [`new_block`] checks on the first block made (every run
/// would fail at boot if a compiler chose otherwise).
const FAST_IN_BLOCK: usize = offset_of!(Block, cell) + size_of::<isize>();

/// A block has been made (the boot CPU's, first thing at EL2).
static MADE: AtomicBool = AtomicBool::new(false);

/// The block whose FastStep is at `fast`.
///
/// # Safety
///
/// `fast` came from [`new_block`].
#[inline(always)]
unsafe fn block_at(fast: *const FastStep) -> &'static Block {
    let block = fast as usize - FAST_IN_BLOCK;
    // SAFETY: per the contract `fast` lies `FAST_IN_BLOCK` bytes into a block, which is
    // leaked (it lives as long as the hypervisor). Only a shared reference is made: the cell
    // lends the FastStep, and the words are atomics.
    unsafe { &*(block as *const Block) }
}

/// This CPU's block.
#[inline(always)]
fn this_block() -> &'static Block {
    // SAFETY: TPIDR_EL2 holds the FastStep of this CPU's block (`install`).
    unsafe { block_at(read_tpidr_el2().bits() as *const FastStep) }
}

/// A CPU's fast-path state and trap ring, from the heap (leaked: a CPU keeps them for the
/// run), with the trap fast path off. Returns the FastStep's address (for TPIDR_EL2).
pub fn new_block(cpu: usize, vcpu: *mut crate::state::Vcpu) -> Option<*mut FastStep> {
    use alloc::alloc::{Layout, alloc, alloc_zeroed};
    // SAFETY: a layout of non-zero size; all zeroes is a valid TrapRing (plain integers).
    let ring = unsafe { alloc_zeroed(Layout::new::<TrapRing>()) }.cast::<TrapRing>();
    // SAFETY: a layout of non-zero size; the block is written below before any use.
    let block = unsafe { alloc(Layout::new::<Block>()) }.cast::<Block>();
    if ring.is_null() || block.is_null() {
        return None;
    }
    let mut fast = fresh(ring);
    fast.init_trap_ring();
    // SAFETY: `block` is fresh memory for one Block, this CPU's alone.
    let f = unsafe {
        block.write(Block {
            words: BlockWords {
                cpu: AtomicU32::new(cpu as u32),
                vcpu: AtomicPtr::new(vcpu),
                power_off: AtomicBool::new(false),
                halt_wfi: AtomicBool::new(false),
                stepped: AtomicBool::new(false),
                lock_wait_ticks: AtomicU64::new(0),
            },
            cell: ExceptionLock::new(RefCell::new(fast)),
        });
        (*block).cell.as_ptr()
    };
    assert_eq!(
        f as usize - block as usize,
        FAST_IN_BLOCK,
        "a FastStep where its block's layout puts it"
    );
    MADE.store(true, Ordering::Relaxed);
    Some(f)
}

/// This CPU's index among the machine's.
#[inline(always)]
pub fn this_cpu_index() -> usize {
    this_block().words.cpu.load(Ordering::Relaxed) as usize
}

/// The index of the CPU whose block's FastStep is at `fast`, which came from [`new_block`].
pub fn cpu_index_of(fast: *const FastStep) -> u32 {
    // SAFETY: every FastStep is made in a block (`new_block`).
    unsafe { block_at(fast) }.words.cpu.load(Ordering::Relaxed)
}

/// This CPU's state in `Hyp` (null before the boot CPU's is made).
#[inline(always)]
pub fn this_vcpu() -> *mut crate::state::Vcpu {
    this_block().words.vcpu.load(Ordering::Relaxed)
}

/// Asks this exit's end to power the CPU off (the guest's CPU_OFF, accepted).
pub fn request_power_off() {
    this_block().words.power_off.store(true, Ordering::Relaxed);
}

/// Asks this exit's end to halt for the guest's WFI.
pub fn request_halt_wfi() {
    this_block().words.halt_wfi.store(true, Ordering::Relaxed);
}

/// What this exit's handlers asked its end to do: power the CPU off, halt for the guest's
/// WFI (and forgets it).
#[inline(always)]
pub fn take_exit_requests() -> (bool, bool) {
    // Only this CPU writes them: a load, and a store only when one was asked (no
    // read-modify-write at every exit).
    let take = |flag: &AtomicBool| {
        let asked = flag.load(Ordering::Relaxed);
        if asked {
            flag.store(false, Ordering::Relaxed);
        }
        asked
    };
    let w = &this_block().words;
    (take(&w.power_off), take(&w.halt_wfi))
}

/// This CPU keeps the guest time of a window that steps several CPUs (`stepped_clock.rs`).
#[inline(always)]
pub fn stepped() -> bool {
    this_block().words.stepped.load(Ordering::Relaxed)
}

/// Adds `ticks` to the time this CPU waited for the hypervisor's lock (none before its block
/// is made: the boot CPU's, first thing).
pub fn note_lock_wait(ticks: u64) {
    if has_block() {
        this_block()
            .words
            .lock_wait_ticks
            .fetch_add(ticks, Ordering::Relaxed);
    }
}

/// The counter ticks this CPU waited for the hypervisor's lock, over the run.
pub fn lock_wait_ticks() -> u64 {
    this_block().words.lock_wait_ticks.load(Ordering::Relaxed)
}

/// Sets [`stepped`].
pub fn set_stepped(on: bool) {
    this_block().words.stepped.store(on, Ordering::Relaxed);
}

/// Names this CPU's index and state: the boot CPU's, at boot (the others' blocks are made
/// with theirs).
pub fn set_this_cpu(cpu: usize, vcpu: *mut crate::state::Vcpu) {
    let words = &this_block().words;
    words.cpu.store(cpu as u32, Ordering::Relaxed);
    words.vcpu.store(vcpu, Ordering::Relaxed);
}

/// This CPU has its block: [`this_cpu`] may be called (false only in a panic before the boot
/// CPU's `install_this_cpu`).
pub fn has_block() -> bool {
    MADE.load(Ordering::Relaxed)
}

/// Borrows this CPU's fast-path state until the guard drops. Panics if this CPU has it
/// borrowed already (a caller up the stack holds it: a bug, never aliasing).
///
/// Only on a CPU that ran [`install_this_cpu`] or [`install`].
#[inline(always)]
pub fn this_cpu() -> RefMut<'static, FastStep> {
    this_block().cell.borrow_mut(el2_masked())
}

/// The proof that no exception can interrupt the code holding it: EL2 code runs with every
/// asynchronous exception masked, always. Its first instruction masks them (`entry.rs`,
/// `smp.rs`), an exception taken to EL2 masks them again, and nothing at EL2 unmasks them.
/// (A synchronous exception at EL2 is a bug that ends the run: `report::die`.)
#[inline(always)]
fn el2_masked() -> ExceptionFree<'static> {
    // SAFETY: as above, exceptions stay masked for as long as EL2 code runs.
    unsafe { ExceptionFree::new() }
}

/// The allocations of [`new_block`]: the ring and the block.
pub const BLOCK_ALLOCS: [mtex_vm::heap::Alloc; 2] = [
    mtex_vm::heap::Alloc {
        size: size_of::<TrapRing>(),
        align: core::mem::align_of::<TrapRing>(),
    },
    mtex_vm::heap::Alloc {
        size: size_of::<BlockCell>(),
        align: core::mem::align_of::<BlockCell>(),
    },
];

/// Makes `block` (from [`new_block`]) as new, for its CPU's next power-up.
pub fn reset_block(block: *mut FastStep) {
    // SAFETY: the block's CPU is off (the caller asked the firmware), so nothing else
    // references the block.
    let f = unsafe { &mut *block };
    // The exits its fast paths handled count over the run, as the CPU's other exits do.
    let (steps, writes, with_tco) = (f.steps, f.framed_fast_writes, f.framed_fast_writes_with_tco);
    *f = fresh(f.ring);
    f.steps = steps;
    f.framed_fast_writes = writes;
    f.framed_fast_writes_with_tco = with_tco;
    f.init_trap_ring();
    // SAFETY: as above; the block came from `new_block`.
    let words = &unsafe { block_at(block) }.words;
    for flag in [&words.power_off, &words.halt_wfi, &words.stepped] {
        flag.store(false, Ordering::Relaxed);
    }
}

/// `mtex.guest_time=coarse`'s settling period in counter ticks, 0 when off: the same on
/// every CPU.
static COARSE: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(0);

/// Sets coarse guest time for this CPU and every CPU started after it. At boot, before the
/// guest runs.
pub fn set_coarse(ticks: u64) {
    COARSE.store(ticks, Ordering::Relaxed);
    this_cpu().coarse = ticks;
}

/// A block for CPU `cpu` over `ring` with nothing in it, in the guest-time mode the boot
/// set (`set_coarse`).
fn fresh(ring: *mut TrapRing) -> FastStep {
    FastStep {
        pending_inert: 0,
        pending_pc: 0,
        va_page: 0,
        ttbr0: 0,
        ttbr1: 0,
        mode: 0,
        pa_page: 0,
        steps: 0,
        inert_el0: 0,
        inert_el1: 0,
        exit_ts: 0,
        trap_next: 0,
        trap_esr_sctlr: ESR_SCTLR,
        trap_esr_tcr: ESR_TCR,
        coarse: COARSE.load(Ordering::Relaxed),
        clock_seen: 0,
        clock_unseen: 0,
        sample_base: u64::MAX,
        ring,
        stepped_retired: 0,
        ring_phase: 0,
        framed_fast_writes: 0,
        framed_fast_writes_with_tco: 0,
        sample_own: 0,
    }
}

/// For the way to power-off: lets go of this CPU's block if a panic came while a caller had
/// it borrowed, so that the run's last records can be sent. False when this CPU has no block
/// yet (a panic before `install_this_cpu`): [`this_cpu`] must not be called then.
///
/// # Safety
///
/// The caller never returns to the code that may hold the other borrow: it powers the
/// machine off, so that borrow is never used again.
pub unsafe fn release_for_shutdown() -> bool {
    if !has_block() {
        return false;
    }
    let cell = (&raw const this_block().cell).cast_mut();
    // SAFETY: this CPU's cell; per the contract any borrow of it is dead, so its state is
    // moved into a cell that is not borrowed (FastStep has no drop).
    unsafe {
        let state = (*cell).as_ptr().read();
        cell.write(ExceptionLock::new(RefCell::new(state)));
    }
    true
}

/// ESR_EL2 of the two writes the trap fast path emulates, Rt cleared (`mtex_arch`'s encodings).
const ESR_SCTLR: u64 = SysReg::SctlrEl1.msr_esr();
const ESR_TCR: u64 = SysReg::TcrEl1.msr_esr();
/// All but ISS.Rt: the bits an ESR must share with one of the two to be handled here.
const NOT_RT: u64 = !(ISS_RT_MASK as u64);
/// A bit set in TCR_EL1's syndrome and clear in SCTLR_EL1's: which of the two was written.
const TCR_BIT: u32 = (ESR_TCR & !ESR_SCTLR).trailing_zeros();
const _: () = assert!((ESR_TCR >> TCR_BIT) & 1 == 1 && (ESR_SCTLR >> TCR_BIT) & 1 == 0);
// The Xt jump table is indexed by ESR bits 9:0 (Rt × 32): CRm and the direction, bits 4:0,
// are zero in both syndromes (CRm 0, a write).
const _: () = assert!(ESR_SCTLR & 0x1f == 0 && ESR_TCR & 0x1f == 0);
const _: () = assert!(ISS_RT_MASK == 0x1f << 5);

/// One trapped write as the trap paths queue it: raw register values, formatted into a
/// `Record::SysregWrite` (and counted, if `RAW_COUNTED` is clear) when `report.rs` frames it.
/// 64 bytes, so that entries never straddle the ring's end bits.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct RawWrite {
    /// ESR_EL2 of the trapped MSR (Rt included), `RAW_COUNTED` set by the full path.
    pub esr: u64,
    /// CNTPCT_EL0 at the trap.
    pub ts: u64,
    /// The value written, and the register's value before.
    pub new: u64,
    pub old: u64,
    /// ELR_EL2 (the MSR) and SPSR_EL2 (the guest's EL and PSTATE.TCO) at the trap.
    pub pc: u64,
    pub spsr: u64,
    _pad: [u64; 2],
}

impl RawWrite {
    pub fn new(esr: u64, ts: u64, new: u64, old: u64, pc: u64, spsr: u64) -> Self {
        Self {
            esr,
            ts,
            new,
            old,
            pc,
            spsr,
            _pad: [0; 2],
        }
    }
}

/// ESR bit 63 (RES0 in the syndrome) of an entry whose exit the full path already counted in
/// `Hyp::counters` and `RUN_EXITS`; entries without it are counted as they are framed.
pub const RAW_COUNTED: u64 = 1 << 63;

/// Entries in the trap ring.
pub const TRAP_RING: usize = 128;
const RING_BYTES: u64 = (TRAP_RING * size_of::<RawWrite>()) as u64;
/// `trap_next` with this bit set (the address just past the ring): the ring is full.
const TRAP_FULL: u64 = RING_BYTES;
/// `trap_next` with this bit set: the fast trap path is off.
const TRAP_OFF: u64 = 2 * RING_BYTES;

/// The trap ring: one queue for both trap paths, so records keep the order of the writes. It is
/// aligned to four times its size, so every entry's address has the `TRAP_FULL` and `TRAP_OFF`
/// bits clear and the address just past it has `TRAP_FULL` set: the fast path tests room and
/// permission in one `tst` of `trap_next`. (The image is loaded 2 MiB-aligned: link.ld.)
#[repr(C, align(32768))]
struct TrapRing([RawWrite; TRAP_RING]);

const _: () = assert!(size_of::<RawWrite>() == 64);
const _: () = assert!(RING_BYTES.is_power_of_two());
const _: () = assert!(core::mem::align_of::<TrapRing>() as u64 == 4 * RING_BYTES);

impl FastStep {
    fn ring_base(&self) -> u64 {
        self.ring as u64
    }

    /// Empties the ring (the fast trap path stays off until `set_fast_traps`). Once, at boot,
    /// before any other ring function.
    pub fn init_trap_ring(&mut self) {
        assert!(
            self.ring_base().is_multiple_of(4 * RING_BYTES),
            "trap ring misaligned"
        );
        self.trap_next = self.ring_base() | TRAP_OFF;
    }

    /// Lets the trap fast path run, or stops it.
    pub fn set_fast_traps(&mut self, on: bool) {
        self.trap_next = (self.trap_next & !TRAP_OFF) | if on { 0 } else { TRAP_OFF };
    }

    /// Entries in the ring.
    pub fn ring_len(&self) -> usize {
        if self.trap_next == 0 {
            return 0;
        }
        ((self.trap_next & !TRAP_OFF) - self.ring_base()) as usize / size_of::<RawWrite>()
    }

    /// Entries in the ring as its CPU last published them, read from another CPU: every one
    /// of them is whole (the fast path publishes an entry with a store-release once it is
    /// written; the full path pushes holding the state, which the reader holds).
    pub fn published_len(&self) -> usize {
        // SAFETY: a plain read of this live block's field; the CPU may be changing it.
        let next = unsafe { core::ptr::read_volatile(&raw const self.trap_next) };
        core::sync::atomic::fence(core::sync::atomic::Ordering::Acquire);
        if next == 0 {
            return 0;
        }
        ((next & !TRAP_OFF) - self.ring_base()) as usize / size_of::<RawWrite>()
    }

    /// Entry `i` (< `ring_len`).
    pub fn ring_entry(&self, i: usize) -> RawWrite {
        assert!(i < TRAP_RING);
        // SAFETY: the ring is this CPU's, reached only through its `FastStep`, which the fast
        // path does not change while Rust code holds it (`this_cpu`); `i` is in bounds; a
        // copy is taken.
        unsafe { (*self.ring).0[i] }
    }

    /// Appends `w`; false when the ring is full.
    pub fn ring_push(&mut self, w: RawWrite) -> bool {
        let len = self.ring_len();
        if len == TRAP_RING {
            return false;
        }
        // SAFETY: as in `ring_entry`; `len` is in bounds.
        unsafe { (*self.ring).0[len] = w };
        self.trap_next += size_of::<RawWrite>() as u64;
        true
    }

    /// Empties the ring.
    pub fn ring_clear(&mut self) {
        self.trap_next = self.ring_base() | (self.trap_next & TRAP_OFF);
    }
}

// Entered from the lower-EL synchronous vector with x0..x3 saved in a fresh context frame.
global_asm!(
    ".global mtex_fast_step",
    "mtex_fast_step:",
    "mrs x0, tpidr_el2",
    "mrs x1, cntpct_el0",
    "sub x1, x1, #{before_sync}",
    "str x1, [x0, #80]",
    "ldr x2, [x0, #0]",
    // Not tracing an inert instruction (every exit outside traced phases): the trap path.
    "cbz x2, 7f",
    "stp x4, x5, [sp, #32]",
    "mrs x2, esr_el2",
    "lsr x1, x2, #26",
    "cmp x1, #0x32",
    "b.ne 8f",
    // ISS.ISV clear: the step was taken at an EL1 exception handler's first instruction (an
    // exception instead of, or after, the pending one): the full path decides.
    "tbz x2, #24, 8f",
    // The code page must be the cached one, under the same TTBRs and mode.
    "mrs x1, elr_el2",
    "and x2, x1, #0xfffffffffffff000",
    "ldr x3, [x0, #16]",
    "cmp x2, x3",
    "b.ne 8f",
    "mrs x2, ttbr0_el1",
    "ldr x3, [x0, #24]",
    "cmp x2, x3",
    "b.ne 8f",
    "mrs x2, ttbr1_el1",
    "ldr x3, [x0, #32]",
    "cmp x2, x3",
    "b.ne 8f",
    "mrs x2, spsr_el2",
    "mrs x3, sctlr_el1",
    "and x3, x3, #1",
    "tst x2, #0xc",
    "b.ne 1f",
    "orr x3, x3, #2",
    "1: ldr x4, [x0, #40]",
    "cmp x3, x4",
    "b.ne 8f",
    "ldr x4, [x0, #48]",
    "cbz x4, 8f",
    "and x5, x1, #0xffc",
    "ldr w5, [x4, x5]",
    // is_inert(w5): the same masks as mtex_trace::decode::is_inert.
    "and w4, w5, #0x1c000000",
    "mov w3, #0x10000000",
    "cmp w4, w3",
    "b.eq 2f",
    "and w4, w5, #0x0e000000",
    "mov w3, #0x0a000000",
    "cmp w4, w3",
    "b.eq 2f",
    "and w4, w5, #0x7c000000",
    "mov w3, #0x14000000",
    "cmp w4, w3",
    "b.eq 2f",
    "mov w3, #0x34000000",
    "cmp w4, w3",
    "b.eq 2f",
    "lsr w4, w5, #24",
    "cmp w4, #0x54",
    "b.ne 8f",
    "tbnz w5, #4, 8f",
    // Retire the pending inert instruction at the current EL (inert ones never change it),
    // make the next one pending, re-arm the step, return.
    "2: ldr x4, [x0, #56]",
    "add x4, x4, #1",
    "str x4, [x0, #56]",
    "mov x3, #64",
    "tst x2, #0xc",
    "b.eq 3f",
    "mov x3, #72",
    "3: ldr x4, [x0, x3]",
    "add x4, x4, #1",
    "str x4, [x0, x3]",
    "str x1, [x0, #8]",
    "orr x2, x2, #(1 << 21)",
    "msr spsr_el2, x2",
    // An inert instruction cannot have looked at the clock. Guest time, and the ERET:
    // the exit tail (`guest_clock.rs`), with x0..x7 in the frame.
    "stp x6, x7, [sp, #48]",
    "mov x6, #1",
    "str x6, [x0, #{unseen}]",
    "b mtex_eret_with_guest_time",
    // The trap path: x0 = this CPU's FastStep, x1 = this exit's timestamp (as stored at [x0, #80]).
    // Only while the path is on and the ring has room (checked first: in traced phases every
    // other step exit comes here and leaves at once), and only a trapped MSR SCTLR_EL1/TCR_EL1
    // (the ESR but for Rt); anything else goes to the full path.
    "7: ldr x3, [x0, #{next}]",
    "tst x3, #{no_room}",
    "b.ne 9f",
    "mrs x2, esr_el2",
    "ldr x3, [x0, #{esr_sctlr}]",
    "eor x3, x3, x2",
    "tst x3, #{not_rt}",
    "b.eq 1f",
    "ldr x3, [x0, #{esr_tcr}]",
    "eor x3, x3, x2",
    "tst x3, #{not_rt}",
    "b.ne 9f",
    // Take the entry; x3 points just past it from here on.
    "1: ldr x3, [x0, #{next}]",
    "add x3, x3, #{entry}",
    "stp x2, x1, [x3, #{e_esr}]",
    // x0 = Xt, from a table of 32-byte entries indexed by ESR bits 9:0 (Rt × 32, see the
    // asserts): x0..x3 from the frame, x4..x30 live, XZR.
    "adr x0, 5f",
    "bfxil x0, x2, #0, #10",
    "br x0",
    ".balign 1024",
    "5: ldr x0, [sp, #0]",
    "b 6f",
    ".balign 32",
    "ldr x0, [sp, #8]",
    "b 6f",
    ".balign 32",
    "ldr x0, [sp, #16]",
    "b 6f",
    ".balign 32",
    "ldr x0, [sp, #24]",
    "b 6f",
    ".irp n, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30",
    ".balign 32",
    "mov x0, x\\n",
    "b 6f",
    ".endr",
    ".balign 32",
    "mov x0, xzr",
    // The write itself (old value first), then the rest of the entry. The ERET synchronises.
    "6: tbz x2, #{tcr_bit}, 2f",
    "mrs x2, tcr_el1",
    "msr tcr_el1, x0",
    "b 3f",
    "2: mrs x2, sctlr_el1",
    "msr sctlr_el1, x0",
    "3: stp x0, x2, [x3, #{e_new}]",
    "mrs x0, elr_el2",
    "mrs x2, spsr_el2",
    "stp x0, x2, [x3, #{e_pc}]",
    "add x0, x0, #4",
    "msr elr_el2, x0",
    // The entry is whole: publish it. A store-release, so that a CPU draining this ring at
    // the run's end (`Reporter::drain_other`) never sees a part-written entry.
    "mrs x0, tpidr_el2",
    "add x0, x0, #{next}",
    "stlr x3, [x0]",
    // Guest time, and the ERET: the exit tail (`guest_clock.rs`), with x0..x7 in the frame.
    "stp x4, x5, [sp, #32]",
    "stp x6, x7, [sp, #48]",
    "mrs x0, tpidr_el2",
    "b mtex_eret_with_guest_time",
    // Anything else: the full path, as if the vector had gone there directly.
    "8: ldp x4, x5, [sp, #32]",
    "9: ldp x2, x3, [sp, #16]",
    "mov x0, #0",
    "b mtex_save_and_dispatch",
    before_sync = const crate::entry::EL2_BEFORE_ENTRY_READ_SYNC,
    unseen = const offset_of!(FastStep, clock_unseen),
    esr_sctlr = const offset_of!(FastStep, trap_esr_sctlr),
    esr_tcr = const offset_of!(FastStep, trap_esr_tcr),
    next = const offset_of!(FastStep, trap_next),
    not_rt = const NOT_RT,
    no_room = const TRAP_FULL | TRAP_OFF,
    tcr_bit = const TCR_BIT,
    entry = const size_of::<RawWrite>(),
    e_esr = const offset_of!(RawWrite, esr) as i64 - size_of::<RawWrite>() as i64,
    e_new = const offset_of!(RawWrite, new) as i64 - size_of::<RawWrite>() as i64,
    e_pc = const offset_of!(RawWrite, pc) as i64 - size_of::<RawWrite>() as i64,
);

// The paired stores above: (esr, ts), (new, old), (pc, spsr).
const _: () = assert!(offset_of!(RawWrite, ts) == offset_of!(RawWrite, esr) + 8);
const _: () = assert!(offset_of!(RawWrite, old) == offset_of!(RawWrite, new) + 8);
const _: () = assert!(offset_of!(RawWrite, spsr) == offset_of!(RawWrite, pc) + 8);
// x1 holds the timestamp as the step path stores it, and the frame's x0..x3 are at 0..24.
const _: () = assert!(offset_of!(FastStep, exit_ts) == 80);
const _: () = assert!(offset_of!(crate::context::GuestContext, x) == 0);
