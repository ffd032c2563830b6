//! The QEMU side: registering the hooks and feeding [`Counter`]. Kept thin: what each hook
//! means is decided in `count` and `classify`, which are tested on the host.

use crate::classify::{Class, classify};
use crate::count::Counter;
use crate::share::Share;
use mtex_abi::oracle::{
    CLOSE_ID_REG, CPU_REG, OPEN_ID_REG, OracleShare, SHARE_CLOSE_ID_REG, SHARE_OPEN_ID_REG,
};
use mtex_arch::{Esr, ExceptionClass};
use qemu_plugin::install::{Args, Info, Value};
use qemu_plugin::plugin::{HasCallbacks, Register};
use qemu_plugin::sys::{qemu_plugin_cond, qemu_plugin_u64};
use qemu_plugin::{
    CallbackFlags, MemRW, PluginId, RegisterDescriptor, TranslationBlock, VCPUIndex,
    qemu_plugin_get_registers, qemu_plugin_register_atexit_cb, qemu_plugin_u64_set, register,
};
use std::io::Write;
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// The registers the hooks read: PSTATE (gdb's "cpsr", EL in bits 3:2), VBAR_EL1 (QEMU's
/// "VBAR"), TPIDR_EL2 (which CPU runs: the hypervisor points it at a block of its own on
/// each), ELR_EL2 (where EL2 last returned to, or will return to), ESR_EL2 (the exit a
/// marker is executed in) and the markers' registers.
struct Regs {
    cpsr: RegisterDescriptor<'static>,
    vbar_el1: RegisterDescriptor<'static>,
    tpidr_el2: RegisterDescriptor<'static>,
    elr_el2: RegisterDescriptor<'static>,
    esr_el2: RegisterDescriptor<'static>,
    open_id: RegisterDescriptor<'static>,
    close_id: RegisterDescriptor<'static>,
    share_open_id: RegisterDescriptor<'static>,
    share_close_id: RegisterDescriptor<'static>,
    cpu: RegisterDescriptor<'static>,
}

impl Regs {
    fn find() -> Option<Self> {
        let mut all = qemu_plugin_get_registers().ok()?;
        let mut take = |name: &str| {
            let i = all.iter().position(|r| r.name == name)?;
            Some(all.swap_remove(i))
        };
        Some(Self {
            cpsr: take("cpsr")?,
            vbar_el1: take("VBAR")?,
            tpidr_el2: take("TPIDR_EL2")?,
            elr_el2: take("ELR_EL2")?,
            esr_el2: take("ESR_EL2")?,
            open_id: take(&format!("x{OPEN_ID_REG}"))?,
            close_id: take(&format!("x{CLOSE_ID_REG}"))?,
            share_open_id: take(&format!("x{SHARE_OPEN_ID_REG}"))?,
            share_close_id: take(&format!("x{SHARE_CLOSE_ID_REG}"))?,
            cpu: take(&format!("x{CPU_REG}"))?,
        })
    }
}

fn read_u64(r: &RegisterDescriptor<'static>) -> Option<u64> {
    let bytes = r.read().ok()?;
    let mut b = [0u8; 8];
    let n = bytes.len().min(8);
    b[..n].copy_from_slice(&bytes[..n]);
    Some(u64::from_le_bytes(b))
}

/// Two flags QEMU tests inline before each hook, so that a hook that has nothing to do costs
/// a compare, not a call: at offset 0 "a window is open" (translation blocks' hooks, which
/// read the EL), at offset 8 "a window is open and the guest is running" (the instructions'
/// hooks). EL2's instructions, thousands per step, then cost no instruction hook (their
/// memory hooks, which QEMU cannot make conditional, still run, and return at once). One
/// vCPU only: see [`State::several`].
#[derive(Clone, Copy)]
struct Flags {
    open: qemu_plugin_u64,
    guest: qemu_plugin_u64,
}
// SAFETY: the scoreboard pointer is QEMU's, valid for the plugin's life and only used through
// QEMU's scoreboard API.
unsafe impl Send for Flags {}
// SAFETY: as above.
unsafe impl Sync for Flags {}

/// One CPU's count: each CPU has its windows (a window on every CPU opens and closes on each
/// CPU as the hypervisor's markers there say: at that CPU's join and leave).
struct Cpu {
    /// Its TPIDR_EL2, by which a hook knows it.
    tpidr_el2: u64,
    /// Its index among the machine's CPUs (the markers' X2).
    index: u32,
    counter: Counter,
    /// Its sampled shares (`shares=on`).
    share: Share,
    /// The EL the running translation block executes at (a block never spans an EL change:
    /// exceptions and exception returns end blocks), read once per block.
    el: u8,
    /// The running block starts at one of VBAR_EL1's entries, at this pc.
    vector: Option<u64>,
    /// The running block is the guest's (EL0 or EL1), in a window.
    guest: bool,
}

struct State {
    cpus: Vec<Cpu>,
    /// The CPU the running block is on (an index into `cpus`).
    current: usize,
    /// Every window opened, in the order opened: (CPU, its window number on that CPU).
    order: Vec<(usize, usize)>,
    regs: Option<Regs>,
    out: Option<PathBuf>,
    flags: Option<Flags>,
    detail: bool,
    missing_regs: bool,
    /// More than one vCPU. QEMU 10.0 gives every hook vCPU index 0 and aborts in
    /// `arm_mmu_idx_el` when a conditional hook runs on such a machine (both measured with
    /// this plugin on `-smp 2`): the hooks are then unconditional, each block's hook reads
    /// TPIDR_EL2 to know the CPU, and the instructions' hooks count for that CPU (under
    /// `-icount` one vCPU runs at a time, and only between blocks does another take over).
    /// The hypervisor's own blocks then get no hook either (it must be known: `hyp`): that EL2
    /// ran before a guest block at a vector entry, what the step-stub rule needs, is seen
    /// from ELR_EL2, which holds that block's address when EL2 has just returned there.
    /// Several times slower than one vCPU all the same.
    several: bool,
    /// `shares=on`: only the CPUs' sampled shares are counted ([`crate::share`]).
    shares: bool,
    /// The guest block running last (`shares=on`): its CPU, start address, EL, and the
    /// machine's instructions begun as it started.
    pending: Option<(usize, u64, u8, u64)>,
    /// The hypervisor's code (`hyp_start`, `hyp_end`, when the host knows it): its
    /// instructions get no instruction or memory hook, only their block's (EL2 runs
    /// thousands of instructions per step, none of which the windows count).
    hyp: Option<core::ops::Range<u64>>,
}

/// Every guest instruction begun on the machine (`shares=on`), by a hook of its own at each.
/// Not QEMU's inline add: on `-smp 2` QEMU 10.0's translated code for an inline add to a
/// scoreboard read freed memory and QEMU died of SIGSEGV (measured with this plugin); a
/// hook that adds to this costs more, and works.
static BEGUN: AtomicU64 = AtomicU64::new(0);

static STATE: Mutex<State> = Mutex::new(State {
    cpus: Vec::new(),
    current: 0,
    order: Vec::new(),
    regs: None,
    out: None,
    flags: None,
    detail: false,
    missing_regs: false,
    several: false,
    shares: false,
    pending: None,
    hyp: None,
});

impl State {
    /// The CPU whose TPIDR_EL2 is `id`, made on first sight.
    fn cpu_by_id(&mut self, id: u64) -> usize {
        if let Some(i) = self.cpus.iter().position(|c| c.tpidr_el2 == id) {
            return i;
        }
        let mut counter = Counter::new();
        if self.detail {
            counter.detail = Some(Default::default());
        }
        self.cpus.push(Cpu {
            tpidr_el2: id,
            index: 0,
            counter,
            share: Share::default(),
            el: 0,
            vector: None,
            guest: false,
        });
        self.cpus.len() - 1
    }

    /// The CPU the running code is on: from TPIDR_EL2 (in a hook with registers).
    fn running(&mut self) -> Option<usize> {
        let id = self.regs.as_ref().and_then(|r| read_u64(&r.tpidr_el2))?;
        let i = self.cpu_by_id(id);
        self.current = i;
        Some(i)
    }

    /// The CPU the running code is on, and its EL (in a hook with registers).
    fn running_at(&mut self) -> Option<(usize, u8)> {
        let i = self.running()?;
        let el = self.regs.as_ref().and_then(el_of)?;
        Some((i, el))
    }

    fn any_open(&self) -> bool {
        self.cpus.iter().any(|c| c.counter.is_open())
    }

    /// The machine's guest instructions begun so far (`shares=on`).
    fn begun(&self) -> u64 {
        BEGUN.load(Ordering::Relaxed)
    }

    /// The block running last has ended: what it began goes to its CPU's share.
    fn settle(&mut self, begun_now: u64) {
        if let Some((i, pc, el, at)) = self.pending.take() {
            self.cpus[i].share.ran(pc, el, begun_now.wrapping_sub(at));
        }
    }
}

fn el_of(regs: &Regs) -> Option<u8> {
    read_u64(&regs.cpsr).map(|p| ((p >> 2) & 3) as u8)
}

/// A marker executed: only at EL2 is it the hypervisor's.
fn on_marker(vcpu: VCPUIndex, open: bool) {
    let mut s = STATE.lock().unwrap();
    let Some(regs) = &s.regs else { return };
    if el_of(regs) != Some(2) {
        return;
    }
    let id = read_u64(if open { &regs.open_id } else { &regs.close_id }).unwrap_or(0);
    let index = read_u64(&regs.cpu).unwrap_or(0) as u32;
    // A close during a step exception taken before the instruction at ELR_EL2 began: the
    // stub's start there is undone (`count` module rules).
    let stub_at = (!open)
        .then(|| Some((Esr(read_u64(&regs.esr_el2)?), read_u64(&regs.elr_el2)?)))
        .flatten()
        .filter(|(esr, _)| {
            esr.ec() == ExceptionClass::SoftwareStepLower && !esr.step_completed_an_instruction()
        })
        .map(|(_, elr)| elr);
    let Some(i) = s.running() else { return };
    let c = &mut s.cpus[i];
    c.index = index;
    c.guest = false;
    let is_open = if open {
        c.counter.open(id);
        let n = c.counter.windows().count() - 1;
        s.order.push((i, n));
        true
    } else {
        if let Some(pc) = stub_at {
            c.counter.step_pending_at(pc);
        }
        c.counter.close(id);
        c.counter.is_open()
    };
    if let Some(f) = s.flags.filter(|_| !s.several) {
        qemu_plugin_u64_set(f.open, vcpu, is_open as u64);
        // Still at EL2: the next block's hook says when the guest runs.
        qemu_plugin_u64_set(f.guest, vcpu, 0);
    }
}

/// A share marker executed (`shares=on`): only at EL2 is it the hypervisor's.
fn on_share_marker(open: bool) {
    let mut s = STATE.lock().unwrap();
    let Some(regs) = &s.regs else { return };
    if el_of(regs) != Some(2) {
        return;
    }
    let id = read_u64(if open {
        &regs.share_open_id
    } else {
        &regs.share_close_id
    })
    .unwrap_or(0);
    let index = read_u64(&regs.cpu).unwrap_or(0) as u32;
    let now = s.begun();
    s.settle(now);
    let Some(i) = s.running() else {
        s.missing_regs = true;
        return;
    };
    let c = &mut s.cpus[i];
    c.index = index;
    if open {
        c.share.open(id, index);
    } else {
        c.share.close(id);
    }
}

/// A guest block starts (`shares=on`, while some CPU's share is open): what the block
/// before it began is settled, and this one's CPU, EL and start are noted.
fn on_share_block(pc: u64) {
    let mut s = STATE.lock().unwrap();
    if s.pending.is_none() && !s.cpus.iter().any(|c| c.share.is_open()) {
        return;
    }
    let now = s.begun();
    s.settle(now);
    let Some((i, el)) = s.running_at() else {
        s.missing_regs = true;
        return;
    };
    // The step-stub rule (`share` module): only at a vector entry where EL2 just returned.
    let el2_returned_here = el == 1
        && pc & 0x7f == 0
        && s.regs.as_ref().is_some_and(|r| {
            read_u64(&r.vbar_el1).is_some_and(|vbar| pc.wrapping_sub(vbar) < 0x800)
                && read_u64(&r.elr_el2) == Some(pc)
        });
    s.cpus[i].share.starts(pc, el, el2_returned_here);
    s.pending = Some((i, pc, el, now));
}

/// A translation block starts (while a window is open, with one vCPU): the CPU and the EL
/// it runs at.
fn on_block(vcpu: VCPUIndex, pc: u64) {
    let mut s = STATE.lock().unwrap();
    if s.several && !s.any_open() {
        return;
    }
    let Some((i, el)) = s.running_at() else {
        s.missing_regs = true;
        return;
    };
    // Vector entries are 128-byte aligned: VBAR_EL1 is read only for such a block.
    let mut vector = None;
    if el == 1
        && pc & 0x7f == 0
        && let Some(vbar) = s.regs.as_ref().and_then(|r| read_u64(&r.vbar_el1))
        && pc.wrapping_sub(vbar) < 0x800
    {
        vector = Some(pc);
    }
    let el2_returned_here = s.several
        && vector.is_some()
        && s.regs.as_ref().and_then(|r| read_u64(&r.elr_el2)) == Some(pc);
    let c = &mut s.cpus[i];
    c.el = el;
    c.vector = vector;
    c.guest = el < 2 && c.counter.is_open();
    if el2_returned_here {
        c.counter.el2_ran();
    }
    if el > 1 {
        // EL2 code ran (what `Counter::start` needs to know of it).
        c.counter.start(pc, el, Class::Plain, 0, false);
    }
    if let Some(f) = s.flags.filter(|_| !s.several) {
        qemu_plugin_u64_set(f.guest, vcpu, (el < 2) as u64);
    }
}

fn on_start(pc: u64, class: Class, word: u32) {
    let mut s = STATE.lock().unwrap();
    let i = s.current;
    let Some(c) = s.cpus.get_mut(i).filter(|c| c.guest) else {
        return;
    };
    let (el, at_vector) = (c.el, c.vector == Some(pc));
    c.counter.start(pc, el, class, word, at_vector);
}

fn on_access(store: bool) {
    let mut s = STATE.lock().unwrap();
    let i = s.current;
    if let Some(c) = s.cpus.get_mut(i)
        && c.counter.is_open()
    {
        c.counter.access(store);
    }
}

fn write_results(s: &State) {
    let Some(path) = &s.out else { return };
    let mut text = String::new();
    for &(i, n) in &s.order {
        let c = &s.cpus[i];
        if let Some(w) = c.counter.windows().nth(n) {
            let w = mtex_abi::oracle::OracleWindow { cpu: c.index, ..*w };
            let _ = w.write_line(&mut text);
        }
    }
    let shares = || s.cpus.iter().flat_map(|c| c.share.shares());
    for share in shares().collect::<Vec<OracleShare>>() {
        let _ = share.write_line(&mut text);
    }
    for c in &s.cpus {
        for a in &c.share.anomalies {
            text.push_str(&format!("anomaly CPU {}: {a}\n", c.index));
        }
        for a in &c.counter.anomalies {
            text.push_str(&format!("anomaly CPU {}: {a}\n", c.index));
        }
        for ((el, word), [n, r, w]) in c.counter.detail.iter().flatten() {
            text.push_str(&format!("insn {el} {word:08x} {n} {r} {w}\n"));
        }
    }
    if s.shares && s.hyp.is_none() {
        text.push_str("anomaly the hypervisor's code was not given: no share counted\n");
    }
    if s.missing_regs || s.regs.is_none() {
        text.push_str("anomaly PSTATE could not be read\n");
    }
    if let Err(e) = std::fs::File::create(path).and_then(|mut f| f.write_all(text.as_bytes())) {
        eprintln!("mtex-oracle: cannot write {}: {e}", path.display());
    }
}

#[derive(Default)]
struct Oracle;

impl Register for Oracle {
    fn register(&mut self, id: PluginId, args: &Args, info: &Info) -> qemu_plugin::Result<()> {
        let mut s = STATE.lock().unwrap();
        s.several = info.system.as_ref().is_some_and(|v| v.smp_vcpus > 1);
        if let Some(Value::String(p)) = args.parsed.get("out") {
            s.out = Some(PathBuf::from(p));
        }
        if let Some(Value::Bool(true)) = args.parsed.get("detail") {
            s.detail = true;
        }
        if let Some(Value::Bool(true)) = args.parsed.get("shares") {
            s.shares = true;
        }
        if let (Some(Value::Integer(a)), Some(Value::Integer(b))) =
            (args.parsed.get("hyp_start"), args.parsed.get("hyp_end"))
        {
            s.hyp = Some(*a as u64..*b as u64);
        }
        // SAFETY: QEMU's scoreboard API; the scoreboard lives as long as the plugin.
        let score = unsafe { qemu_plugin::sys::qemu_plugin_scoreboard_new(16) };
        s.flags = Some(Flags {
            open: qemu_plugin_u64 { score, offset: 0 },
            guest: qemu_plugin_u64 { score, offset: 8 },
        });
        drop(s);
        qemu_plugin_register_atexit_cb(id, |_| write_results(&STATE.lock().unwrap()))
    }
}

impl HasCallbacks for Oracle {
    fn on_vcpu_init(&mut self, _id: PluginId, vcpu: VCPUIndex) -> qemu_plugin::Result<()> {
        let _ = vcpu;
        let mut s = STATE.lock().unwrap();
        if s.regs.is_none() {
            s.regs = Regs::find();
        }
        Ok(())
    }

    fn on_translation_block_translate(
        &mut self,
        _id: PluginId,
        tb: TranslationBlock,
    ) -> qemu_plugin::Result<()> {
        let (flags, several, shares, hyp) = {
            let s = STATE.lock().unwrap();
            (s.flags, s.several, s.shares, s.hyp.clone())
        };
        let Some(flags) = flags else {
            return Ok(());
        };
        let tb_pc = tb.vaddr();
        let hyp_block = hyp.as_ref().is_some_and(|h| h.contains(&tb_pc));
        if shares {
            translate_for_shares(&tb, hyp.as_ref());
            return Ok(());
        }
        if several && hyp_block {
            // No hook on the hypervisor's blocks but its markers' (see `State::several`).
        } else if several {
            tb.register_execute_callback_flags(
                move |vcpu| on_block(vcpu, tb_pc),
                CallbackFlags::QEMU_PLUGIN_CB_R_REGS,
            );
        } else {
            tb.register_conditional_execute_callback_flags(
                move |vcpu| on_block(vcpu, tb_pc),
                CallbackFlags::QEMU_PLUGIN_CB_R_REGS,
                qemu_plugin_cond::QEMU_PLUGIN_COND_NE,
                flags.open,
                0,
            );
        }
        for insn in tb.instructions() {
            let data = insn.data();
            let Ok(word) = <[u8; 4]>::try_from(data.as_slice()).map(u32::from_le_bytes) else {
                continue;
            };
            let class = classify(word);
            let pc = insn.vaddr();
            let in_hyp = hyp.as_ref().is_some_and(|h| h.contains(&pc));
            if matches!(class, Class::OpenMarker | Class::CloseMarker) {
                let open = class == Class::OpenMarker;
                insn.register_execute_callback_flags(
                    move |vcpu| on_marker(vcpu, open),
                    CallbackFlags::QEMU_PLUGIN_CB_R_REGS,
                );
            }
            if in_hyp {
                continue;
            }
            if several {
                insn.register_execute_callback_flags(
                    move |_| on_start(pc, class, word),
                    CallbackFlags::QEMU_PLUGIN_CB_NO_REGS,
                );
            } else {
                insn.register_conditional_execute_callback_flags(
                    move |_| on_start(pc, class, word),
                    CallbackFlags::QEMU_PLUGIN_CB_NO_REGS,
                    qemu_plugin_cond::QEMU_PLUGIN_COND_NE,
                    flags.guest,
                    0,
                );
            }
            if class.instrumented() {
                insn.register_memory_access_callback(
                    |_, info, _| on_access(info.is_store()),
                    MemRW::QEMU_PLUGIN_MEM_RW,
                );
            }
        }
        Ok(())
    }
}

/// `shares=on`: a hook at each guest block's start, a count at each guest instruction
/// ([`BEGUN`]), and the share markers' hooks; nothing else (the `share` module says why that
/// suffices).
fn translate_for_shares(tb: &TranslationBlock, hyp: Option<&core::ops::Range<u64>>) {
    let tb_pc = tb.vaddr();
    if !hyp.is_some_and(|h| h.contains(&tb_pc)) {
        tb.register_execute_callback_flags(
            move |_| on_share_block(tb_pc),
            CallbackFlags::QEMU_PLUGIN_CB_R_REGS,
        );
    }
    // Without the hypervisor's bounds its instructions would count as the guest's: the host
    // always passes them with `shares=on` (and the results say when it did not).
    let Some(hyp) = hyp else { return };
    for insn in tb.instructions() {
        if hyp.contains(&insn.vaddr()) {
            let data = insn.data();
            let Ok(word) = <[u8; 4]>::try_from(data.as_slice()).map(u32::from_le_bytes) else {
                continue;
            };
            let class = classify(word);
            if matches!(class, Class::ShareOpenMarker | Class::ShareCloseMarker) {
                let open = class == Class::ShareOpenMarker;
                insn.register_execute_callback_flags(
                    move |_| on_share_marker(open),
                    CallbackFlags::QEMU_PLUGIN_CB_R_REGS,
                );
            }
            continue;
        }
        insn.register_execute_callback_flags(
            |_| {
                BEGUN.fetch_add(1, Ordering::Relaxed);
            },
            CallbackFlags::QEMU_PLUGIN_CB_NO_REGS,
        );
    }
}

register!(Oracle);
