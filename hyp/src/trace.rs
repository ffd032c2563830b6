//! The trace counter's step engine: within a traced phase the guest runs one instruction per
//! EL2 entry (software step: MDCR_EL2.TDE routes the step exception here, MDSCR_EL1.SS and
//! SPSR_EL2.SS arm it). At every guest exit the instruction about to run is decoded and its
//! access judged (`Pending`); at the next exit it is retired into the counts, unless the
//! guest took an exception instead of completing it.
//!
//! Here: the engine's state and its step path (`start`/`stop`, `prepare` before each step,
//! `retire` after it). Apart, each with its own reason to change: `runs`, the breakpoint runs
//! that replace steps; `code`, reading guest code through the code-page cache the fast path
//! shares, and forgetting it when code or mappings may change; `exclusive`, catching
//! LDXR/STXR retry loops, which stepping can never let succeed; `cpu`, what the engine asks
//! the CPU directly (breakpoints, MTE block sizes, AT).

use crate::context::GuestContext;
use crate::fast_step::{FastStep, this_cpu as this_block};
use arm_sysregs::el1::accessors::{
    read_elr_el1, read_esr_el1, read_mdscr_el1, read_sp_el1, read_spsr_el1, read_ttbr0_el1,
    read_ttbr1_el1, read_vbar_el1, write_mdscr_el1,
};
use arm_sysregs::el1::registers::MdscrEl1;
use arm_sysregs::el2::accessors::{read_hcr_el2, read_mdcr_el2, write_hcr_el2, write_mdcr_el2};
use arm_sysregs::el2::registers::{HcrEl2, MdcrEl2};
use mtex_abi::report::{StepEngine, TcoSite};
use mtex_arch::el2_bits::{mdscr, spsr};
use mtex_arch::esr::ExceptionClass;
use mtex_arch::mte_bits::par;
use mtex_platform::guest_vm::GuestRam;
use mtex_trace::callstack::{CallStack, ROOT, StackFrame};
use mtex_trace::counts::{BlockGranules, Effect, Pending, Tally, TraceCounts};
use mtex_trace::decode::Flow;
use mtex_trace::decode::{self, Insn};
use mtex_trace::predicate::{Controls, tagged_is_impdef};
use mtex_trace::profile::{PcTable, user_space};
use mtex_trace::run::{MAX_LEAVES, Plan};

mod code;
mod cpu;
mod exclusive;
mod impdef;
mod runs;

use code::cached_page_words;
use cpu::guest_sp;
pub(crate) use cpu::translate;
pub use cpu::{block_granules, breakpoints};

/// Stage-1 MAIR attribute of Tagged Normal memory.
const ATTR_TAGGED: u8 = 0xf0;
/// Distinct TCO-writing sites kept per phase.
const SITES: usize = 16;
/// Breakpoints a run uses: one per exit, plus the EL1 synchronous vectors (current EL, lower
/// EL) so that a fault inside the run cannot slip by untraced.
const RUN_BREAKPOINTS: usize = MAX_LEAVES + 2;
/// Cached run plans (every stop is the start of a run, so a kernel's hot code needs a few
/// dozen).
const PLAN_SLOTS: usize = 256;
/// Start addresses remembered as not worth a run.
const NO_RUN_SLOTS: usize = 1024;

pub struct Tracer {
    active: bool,
    /// Store-exclusive retry loops, which stepping never lets succeed (`exclusive.rs`).
    exclusive: mtex_trace::exclusive::RetryGuard,
    /// What the Arm ARM leaves to the CPU about the pending instruction (`impdef.rs`).
    impdef: impdef::Watch,
    /// Runs were asked for (`mtex.runs=1`) and the CPU has the breakpoints they need.
    runs_enabled: bool,
    /// The step fast path may retire inert instructions (`mtex.step=fast`); off, every step
    /// goes through the full path (the reference the fast paths are proven against).
    fast_enabled: bool,
    /// Planned runs, direct-mapped by start address, with the exact key each was planned
    /// under (start, TTBR0, TTBR1): a loop re-enters the same runs, and planning costs more
    /// than looking here. The run in progress is `plans[run_slot]` while `run_armed`.
    /// On the heap: they are too big to be built on the EL2 stack.
    plans: alloc::boxed::Box<[Plan]>,
    plan_keys: alloc::boxed::Box<[[u64; 3]]>,
    /// `code_gen` when each plan was last checked word by word against the code.
    plan_gens: alloc::boxed::Box<[u64]>,
    run_slot: usize,
    run_armed: bool,
    run_el: u8,
    /// Start addresses (xor TTBR0) from which no run is worth making, direct-mapped: loops
    /// come back to the same places, and planning is costlier than looking here.
    no_run: alloc::boxed::Box<[u64]>,
    /// Bumped when a traced store may have rewritten planned code (it hit a page in
    /// `plan_pages`): plans are then checked word by word before their next use. (Stores
    /// inside runs are caught after the fact: `Plan::path` checks the words the run
    /// executed.)
    code_gen: u64,
    /// One bit per page of guest RAM, by host page number modulo its bits: plans were made
    /// from code in a page with that bit. RAM of at most as many pages as bits (every guest
    /// but a large installed one) has a bit of its own per page; beyond that pages share
    /// bits, and a store to one rechecks the plans of all (never misses one).
    plan_pages: alloc::boxed::Box<[u64]>,
    any_plan_page: bool,
    /// The breakpoints as last written: only changes are written (each write costs EL2
    /// instructions, and QEMU rebuilds its breakpoint list).
    bp_armed: [u64; RUN_BREAKPOINTS],
    /// The armed run's predicted accesses, judged when it was armed (`Plan::predicted`).
    predicted: [Pending; mtex_trace::run::MAX_PREDICTED],
    /// What the engine did in this phase (sent at its end).
    engine: StepEngine,
    /// The run that just ended stopped at one of its leaves, on code it executed: if that
    /// leaf is a direct branch, the engine may execute it (`emulate_branch`).
    stopped_at_leaf: bool,
    tally: Tally,
    /// The instruction about to run; valid when `armed`. Kept in place (not an Option that
    /// is moved out and back) because this is the step path.
    pending: Pending,
    armed: bool,
    pending_tco: bool,
    /// The pending instruction may look at the guest's clock (`mtex_trace::clock_read`),
    /// or it is not known.
    pending_sees_clock: bool,
    sites: [Option<TcoSite>; SITES],
    phase: u32,
    saved_mdscr: u64,
    guest_ram: GuestRam,
    block_granules: BlockGranules,
    /// A virtual interrupt was injected and the guest has not acknowledged it yet: it may be
    /// taken before any instruction, so neither the fast path nor a run may assume the next
    /// instruction completes.
    virq_pending: bool,
    /// Linux mode: physical interrupts go to the guest (HCR_EL2.IMO clear), except during a
    /// run, when they come here (`irqs_at_el2`, `runs.rs`).
    irqs_to_guest: bool,
    irqs_at_el2: bool,
    /// A physical interrupt stopped the last run: the next instruction is stepped, so that
    /// the guest takes the interrupt (a run would stop again at once).
    irq_stopped_run: bool,
    /// The kernel's call stacks (`mtex.stacks=1`), followed at every retired instruction.
    stacks: Option<CallStack>,
    /// The phase just began: the stacks start from where the guest is at its first step.
    stacks_fresh: bool,
    /// TTBR0_EL1's table address when the phase began (the opener's address space), to
    /// tell the profile which EL0 PCs ran there (`profile::user_space`).
    opener_ttbr0: u64,
    /// How the pending instruction moves between functions (with stacks only).
    pending_flow: Flow,
    /// In a sampled phase's unit: its size in instructions. The unit ends after exactly
    /// that many (`mtex_vm::sample`): runs only where one fits, no step fast path.
    unit: Option<u64>,
}

impl Tracer {
    /// An idle step engine for a guest whose RAM is `guest_ram` (the instruction reader
    /// refuses anything else).
    pub fn new(
        guest_ram: GuestRam,
        block_granules: BlockGranules,
        runs: bool,
        step: mtex_abi::options::StepMode,
    ) -> Self {
        let fast = step == mtex_abi::options::StepMode::Fast;
        Self {
            active: false,
            exclusive: Default::default(),
            impdef: impdef::Watch::default(),
            runs_enabled: fast && runs && breakpoints() >= RUN_BREAKPOINTS,
            fast_enabled: fast,
            // The run tables are made when the CPU is set up (`make_tables`), where running
            // out of memory can still be answered (a CPU_ON refused).
            plans: alloc::boxed::Box::new([]),
            plan_keys: alloc::boxed::Box::new([]),
            plan_gens: alloc::boxed::Box::new([]),
            run_slot: 0,
            run_armed: false,
            run_el: 0,
            no_run: alloc::boxed::Box::new([]),
            code_gen: 0,
            plan_pages: alloc::boxed::Box::new([]),
            any_plan_page: false,
            bp_armed: [0; RUN_BREAKPOINTS],
            predicted: [Pending::default(); mtex_trace::run::MAX_PREDICTED],
            engine: StepEngine::default(),
            stopped_at_leaf: false,
            tally: Tally::default(),
            pending: Pending::default(),
            armed: false,
            pending_tco: false,
            pending_sees_clock: true,
            sites: [None; SITES],
            phase: 0,
            saved_mdscr: 0,
            guest_ram,
            block_granules,
            virq_pending: false,
            irqs_to_guest: false,
            irqs_at_el2: false,
            irq_stopped_run: false,
            stacks: None,
            stacks_fresh: false,
            opener_ttbr0: 0,
            pending_flow: Flow::Other,
            unit: None,
        }
    }

    /// Traces the next `start` as a sampled unit of `size` instructions (None: a phase).
    pub fn set_unit(&mut self, size: Option<u64>) {
        self.unit = size;
    }

    /// Instructions retired since `start`, at EL0 and EL1.
    pub fn retired(&mut self) -> u64 {
        self.retired_with(&this_block())
    }

    /// [`Tracer::retired`], for a caller that holds this CPU's block `f`.
    pub fn retired_with(&mut self, f: &FastStep) -> u64 {
        let c = self.tally.counts_mut();
        c.instructions_el0 + c.instructions_el1 + f.inert_el0 + f.inert_el1
    }

    /// The run plans' tables, once (about 450 KiB of heap): at boot for the boot CPU, so that
    /// no phase's EL2 figures carry the cost, else at a CPU's first traced phase.
    /// Makes the run tables; false without the memory for them (nothing is made then).
    pub fn make_tables(&mut self) -> bool {
        if !self.plans.is_empty() {
            return true;
        }
        let pages = plan_page_words(self.guest_ram.ipa.size);
        let (Some(plans), Some(keys), Some(gens), Some(no_run), Some(plan_pages)) = (
            filled(Plan::default(), PLAN_SLOTS),
            filled([u64::MAX; 3], PLAN_SLOTS),
            filled(0, PLAN_SLOTS),
            filled(u64::MAX, NO_RUN_SLOTS),
            filled(0, pages),
        ) else {
            return false;
        };
        self.plans = plans;
        self.plan_keys = keys;
        self.plan_gens = gens;
        self.no_run = no_run;
        self.plan_pages = plan_pages;
        true
    }

    /// The allocations `make_tables` makes, for a guest of `ram_size` bytes of RAM.
    pub fn table_allocs(ram_size: u64) -> [mtex_vm::heap::Alloc; 5] {
        fn of<T>(n: usize) -> mtex_vm::heap::Alloc {
            mtex_vm::heap::Alloc {
                size: n * size_of::<T>(),
                align: align_of::<T>(),
            }
        }
        [
            of::<Plan>(PLAN_SLOTS),
            of::<[u64; 3]>(PLAN_SLOTS),
            of::<u64>(PLAN_SLOTS),
            of::<u64>(NO_RUN_SLOTS),
            of::<u64>(plan_page_words(ram_size)),
        ]
    }

    /// Keeps the kernel's call stacks as well (`mtex.stacks=1`, after `enable_profile`): every
    /// instruction is then stepped and retired through the full path, which sees every call
    /// and return (the asm fast path would retire branches unseen). Runs remain at EL0, whose
    /// stack is not followed, and in the kernel from a load-exclusive with no call or return
    /// in them (stepping can never let such a sequence succeed). Once, at boot.
    pub fn enable_stacks(&mut self) {
        if !self.tally.profiling() {
            return;
        }
        if let Some((nodes, saved)) = crate::profile_table::stacks::take() {
            self.stacks = Some(CallStack::new(nodes, saved));
            self.fast_enabled = false;
        }
    }

    /// Hands this engine's per-PC table and call stacks (the hypervisor has one of each) to
    /// `to`, whose CPU is about to trace: `to` then steps as `enable_stacks` makes it.
    pub fn hand_instruments_to(&mut self, to: &mut Tracer) {
        if let Some(t) = self.tally.take_profile() {
            to.tally.set_profile(t);
        }
        if let Some(s) = self.stacks.take() {
            to.stacks = Some(s);
            to.fast_enabled = false;
        }
    }

    /// Keeps every traced phase's counts by PC as well (`mtex.profile=1`), in a table of
    /// `slots` PCs (`mtex.profile_slots`, a power of two the options checked). Once, at boot.
    pub fn enable_profile(&mut self, slots: usize) {
        if let Some(table) = crate::profile_table::take() {
            let n = slots.min(table.len());
            self.tally.set_profile(PcTable::new(&mut table[..n]));
        }
    }

    /// Sends the phase's per-PC records, then their end; nothing if not profiling. After
    /// `stop` or `partial` (the counts are taken; the table is cleared at the next `start`).
    pub fn send_profile(&mut self, id: u32, report: &mut crate::report::Reporter) {
        use mtex_abi::report::{PcProfile, PcProfileEnd};
        let Some(t) = self.tally.profile_mut() else {
            return;
        };
        let (pcs, other_notes) = (t.used(), t.other_notes());
        let others: [Option<_>; 3] = {
            let mut o = t.others();
            [o.next(), o.next(), o.next()]
        };
        let mut records = 0;
        for entry in t.sorted_entries() {
            report.send(&mtex_abi::Record::PcProfile(PcProfile {
                id,
                other: false,
                entry,
            }));
            records += 1;
        }
        for entry in others.into_iter().flatten() {
            report.send(&mtex_abi::Record::PcProfile(PcProfile {
                id,
                other: true,
                entry,
            }));
            records += 1;
        }
        report.send(&mtex_abi::Record::PcProfileEnd(PcProfileEnd {
            id,
            records,
            pcs,
            other_notes,
        }));
        if let Some(cs) = &self.stacks {
            use mtex_abi::report::{StackEnd, StackNode};
            let mut nodes = 0;
            for (node, parent, frame) in cs.nodes() {
                report.send(&mtex_abi::Record::StackNode(StackNode {
                    id,
                    node,
                    parent,
                    frame,
                }));
                nodes += 1;
            }
            report.send(&mtex_abi::Record::StackEnd(StackEnd {
                id,
                nodes,
                stats: cs.stats(),
            }));
        }
    }

    /// Linux mode: the guest owns its interrupts (see `irqs_to_guest`).
    pub fn set_irqs_to_guest(&mut self) {
        self.irqs_to_guest = true;
    }

    /// A physical interrupt came to EL2 (Linux mode, during a run): it stays pending for the
    /// guest, which takes it at the next stepped instruction.
    pub fn note_irq_exit(&mut self) {
        self.irq_stopped_run = true;
    }

    /// The hypervisor made a virtual interrupt pending for the guest.
    pub fn note_virq(&mut self) {
        self.virq_pending = true;
    }

    /// True while a traced phase is open.
    #[inline(always)]
    pub fn active(&self) -> bool {
        self.active
    }

    /// The traced phase's counts up to the last exit, while it traces (the inert
    /// instructions the fast path retired aside: they access no memory).
    pub fn counts_so_far(&self) -> Option<TraceCounts> {
        self.active.then(|| self.tally.finish())
    }

    /// The phase it traces (or last traced).
    pub fn phase(&self) -> u32 {
        self.phase
    }

    /// It traces a sampled unit (`set_unit`), not a phase whole.
    pub fn in_unit(&self) -> bool {
        self.unit.is_some()
    }

    /// Arms single-step for the phase `phase`. Resets in place: the tally is not copied.
    /// Returns false if an OS lock had to be cleared first (the guest cannot set them: its
    /// debug-register accesses trap; the caller reports it).
    pub fn start(&mut self, phase: u32) -> bool {
        // Made when the CPU was set up (`Hyp::new`, `Hyp::prepare_vcpu`): nothing to fail.
        assert!(self.make_tables(), "run tables made at set-up");
        let was_locked = crate::debug::unlock_for_step();
        // Between phases the guest ran untraced: whatever it did to its code or its mappings
        // (IC, TLBI) went unseen, so nothing cached about its code is trusted. Between a
        // sampled phase's units the plans are kept but each is checked word by word against
        // the code before its next use, as after a traced store to its page: planning anew
        // at every unit would cost more than the unit.
        if self.unit.is_some() {
            self.recheck_code();
        } else {
            self.forget_code();
        }
        self.clear_breakpoints();
        self.saved_mdscr = read_mdscr_el1().bits();
        write_mdscr_el1(MdscrEl1::from_bits_retain(self.saved_mdscr | mdscr::SS));
        write_mdcr_el2(read_mdcr_el2() | MdcrEl2::TDE);
        aarch64_cpu::asm::barrier::isb(aarch64_cpu::asm::barrier::SY);
        {
            let mut f = this_block();
            f.pending_inert = 0;
            f.inert_el0 = 0;
            f.inert_el1 = 0;
        }
        self.tally.reset();
        self.stacks_fresh = self.stacks.is_some();
        self.opener_ttbr0 = read_ttbr0_el1().baddr_47_1();
        self.engine = StepEngine {
            id: phase,
            ..StepEngine::default()
        };
        self.stopped_at_leaf = false;
        self.armed = false;
        self.run_armed = false;
        self.sites = [None; SITES];
        self.phase = phase;
        self.active = true;
        crate::oracle_mark::open(phase, this_cpu());
        !was_locked
    }

    /// Disarms single-step; returns the counts and the TCO sites.
    pub fn stop(&mut self, ctx: &mut GuestContext) -> (TraceCounts, [Option<TcoSite>; SITES]) {
        this_block().pending_inert = 0;
        crate::oracle_mark::close(self.phase, this_cpu());
        let counts = self.finish_counts();
        ctx.spsr &= !spsr::SS;
        if self.run_armed {
            self.disarm_run();
        }
        self.clear_breakpoints();
        write_mdcr_el2(read_mdcr_el2() - MdcrEl2::TDE);
        write_mdscr_el1(MdscrEl1::from_bits_retain(self.saved_mdscr));
        aarch64_cpu::asm::barrier::isb(aarch64_cpu::asm::barrier::SY);
        self.active = false;
        self.armed = false;
        (counts, self.sites)
    }

    /// What the engine did in the phase that `stop` ended.
    pub fn engine(&self) -> StepEngine {
        self.engine
    }

    /// The phase's counts: the tally with the inert instructions the fast path retired.
    fn finish_counts(&mut self) -> TraceCounts {
        let f = this_block();
        let counts = self.tally.counts_mut();
        counts.instructions_el0 += f.inert_el0;
        counts.instructions_el1 += f.inert_el1;
        self.tally.finish()
    }

    /// The counts so far of a traced phase that will never end (the run is ending), with its
    /// id; None when no traced phase is open.
    pub fn partial(&mut self) -> Option<(u32, TraceCounts)> {
        if !self.active {
            return None;
        }
        self.active = false;
        crate::oracle_mark::close(self.phase, this_cpu());
        Some((self.phase, self.finish_counts()))
    }

    /// At a guest exit: retires the instruction that was about to run at the previous exit.
    /// `exception_entry`: this exit is the step taken at the first instruction of an EL1
    /// exception handler (ESR_EL2.ISS.ISV = 0), so an exception was taken. Out of line, so the
    /// other exits' path keeps a small frame.
    #[inline(never)]
    /// `stage2_abort`: this exit is a stage-2 data abort on the pending instruction (Linux
    /// mode's doorbell): the instruction took the abort and never executed — the hypervisor
    /// acts on it and skips it — so it is not counted, as QEMU's PMU does not count it either
    /// (measured: counting it made every window's EL0 one more than the PMU's), but it began
    /// (`abandoned_el*`).
    pub fn retire(
        &mut self,
        ctx: &GuestContext,
        exception_entry: bool,
        stage2_abort: bool,
        controls: &Controls,
    ) {
        if self.run_armed {
            let entry = self.retire_run(ctx, stage2_abort, controls);
            if self.stacks.is_some() {
                // An exception taken in the run starts or grows the kernel's stack; nothing
                // else in a run moves it (`arm_run`).
                self.follow_stack(ctx, false, entry);
            }
            return;
        }
        if !self.armed {
            return;
        }
        self.armed = false;
        let mut f = this_block();
        let inert = f.pending_inert != 0;
        let completed = self.retire_step(&mut f, ctx, exception_entry, stage2_abort);
        if completed && !exception_entry && (inert || !self.pending_sees_clock) {
            // One instruction ran, and it did not look at the clock: this CPU's clock may
            // come back to the machine's (`guest_clock.rs`).
            crate::guest_clock::note_clock_unseen(&mut f);
        }
        drop(f);
        if self.stacks.is_some() {
            self.follow_stack(ctx, completed, exception_entry);
        }
    }

    /// `retire` of a stepped instruction; false if it did not complete (an exception was
    /// taken instead, or the hypervisor acts on its stage-2 abort).
    #[inline(always)]
    fn retire_step(
        &mut self,
        f: &mut FastStep,
        ctx: &GuestContext,
        exception_entry: bool,
        stage2_abort: bool,
    ) -> bool {
        if f.pending_inert != 0 {
            // The fast path may have moved on since `pending` was written: it keeps the PC.
            f.pending_inert = 0;
            self.pending.pc = f.pending_pc;
        }
        let p = &self.pending;
        let now = ctx.state();
        if now.tco != self.pending_tco {
            self.tally.counts_mut().tco_changes += 1;
        }
        if exception_entry {
            // Where the handler starts says which kind of entry this was (VBAR_EL1 is what
            // the CPU just used, so the offset is honest).
            let off = now.pc.wrapping_sub(read_vbar_el1().bits());
            if off < 0x800 && off & 0x7f == 0 {
                self.tally.counts_mut().entries.note(off);
            }
            // The exception was taken instead of completing `p` when ELR_EL1 is `p` itself
            // (a synchronous exception on it, or an interrupt before it); an SVC, or an
            // interrupt after `p`, leaves ELR_EL1 past it and `p` completed.
            if read_elr_el1().bits() == p.pc {
                let esr = mtex_arch::Esr(read_esr_el1().bits());
                let sync = off & 0x180 == 0;
                let class = esr.ec();
                if sync && mtex_trace::counts::began(class) {
                    self.tally.counts_mut().note_abandoned(p.el, class);
                }
                if sync && esr.is_tag_check_fault() {
                    // The access was made and its check failed: it counts as checked, and
                    // as a fault; the instruction did not complete.
                    self.tally.retire_faulted_access(p);
                    // The CPU checked what the predicate judged unchecked: a cross-check
                    // that costs nothing and catches a wrong term or a wrong address.
                    if !(p.read.views().architectural || p.write.views().architectural) {
                        self.tally.counts_mut().unexpected_tag_check_faults += 1;
                    }
                }
                return false;
            }
        }
        if stage2_abort && ctx.elr == p.pc {
            self.tally
                .counts_mut()
                .note_abandoned(p.el, ExceptionClass::DataAbortLower);
            return false;
        }
        if self.impdef.after(ctx, p, self.tally.counts_mut()) == impdef::Outcome::Unknown {
            // A CAS/CASP that discarded what it read (Rs = XZR): whether its compare failed
            // cannot be known, so its access is not judged (`unknown_mem`).
            self.tally.retire(&Pending {
                effect: Effect::UnknownMem,
                ..*p
            });
            return true;
        }
        let stxr_status = self.exclusive.store_exclusive_at(p.pc);
        if stxr_status == Some(31) {
            // Status discarded (Ws = WZR): whether it wrote cannot be known, so its access is
            // not judged, and the report says so (`unknown_mem`), never a guess.
            self.tally.retire(&Pending {
                effect: Effect::UnknownMem,
                ..*p
            });
            return true;
        }
        if let Some(rs) = stxr_status
            && ctx.reg(rs) != 0
        {
            // A store-exclusive that failed makes no access (the pseudocode writes memory
            // only when the monitors pass), so it is counted as executed but not as a write,
            // checked or not. (Whether a failing one is Tag Checked anyway is IMPLEMENTATION
            // DEFINED; QEMU checks it. Taken here: no access, no check.)
            self.exclusive.failed_at(p.pc, rs);
            self.tally.counts_mut().failed_store_exclusives += 1;
            self.tally.retire(&Pending {
                effect: Effect::None,
                ..*p
            });
            return true;
        }
        self.tally.retire(p);
        let value = match p.effect {
            Effect::TcoImm(v) => v,
            Effect::TcoReg(t) => ctx.reg(t) & spsr::TCO != 0,
            _ => return true,
        };
        let pc = p.pc;
        self.note_tco_site(pc, value);
        true
    }

    /// Moves the call stack by what the retired instruction did (a call, a return, an
    /// exception return, if it `completed` at EL1) and by the exception entry this exit may
    /// be, then files what retires next under the stack's node.
    #[inline(never)]
    fn follow_stack(&mut self, ctx: &GuestContext, completed: bool, exception_entry: bool) {
        let Some(cs) = &mut self.stacks else {
            return;
        };
        let p = &self.pending;
        // PSTATE as the retired instruction left it: an exception entry since saved it in
        // SPSR_EL1 and its destination in ELR_EL1.
        let (spsr, next) = if exception_entry {
            (read_spsr_el1().bits(), read_elr_el1().bits())
        } else {
            (ctx.spsr, ctx.elr)
        };
        if completed && p.el == 1 {
            match self.pending_flow {
                Flow::Call => cs.call(p.pc.wrapping_add(4), guest_sp(spsr)),
                Flow::Return => cs.ret(next, guest_sp(spsr)),
                // BR and its authenticated forms: a jump or a tail call where the stacks can
                // vouch for it, a return (matched or not) otherwise (`callstack::judge_jump`).
                Flow::Jump => cs.jump(next, guest_sp(spsr), ctx.x[30]),
                Flow::ExceptionReturn => cs.eret((spsr >> 2) & 3 == 0),
                // A direct branch (or anything else) that lands on the top call's return
                // address with its SP has returned to the caller.
                Flow::Other => cs.arrive(next, || guest_sp(spsr)),
            }
        }
        if exception_entry {
            let off = ctx.elr.wrapping_sub(read_vbar_el1().bits());
            if off < 0x800 && off & 0x7f == 0 {
                let ec = mtex_arch::Esr(read_esr_el1().bits()).ec_bits();
                let frame = StackFrame::entry(off, ec, ctx.x[8], next);
                cs.exception(frame, read_sp_el1().bits());
            }
        }
        let node = cs.node();
        if let Some(t) = self.tally.profile_mut() {
            t.set_stack(node);
        }
    }

    fn note_tco_site(&mut self, pc: u64, value: bool) {
        note_tco_site(&mut self.sites, &mut self.tally, self.phase, pc, value);
    }

    /// Before returning to the guest: decodes and judges the instruction at ELR, and arms
    /// the step so the guest runs exactly that one.
    #[inline(never)]
    pub fn prepare(&mut self, ctx: &mut GuestContext, controls: &Controls) {
        if core::mem::take(&mut self.stopped_at_leaf) {
            self.emulate_branch(ctx, controls);
        }
        let st = ctx.state();
        let word = self.fetch(st.pc, st.el == 0, controls.sctlr_el1);
        self.pending_sees_clock = word.is_none_or(mtex_trace::clock_read::observes_guest_clock);
        if let Some(cs) = &mut self.stacks {
            if core::mem::take(&mut self.stacks_fresh) {
                cs.reset(st.el == 0);
                let node = cs.node();
                if let Some(t) = self.tally.profile_mut() {
                    t.set_stack(node);
                }
            }
            self.pending_flow = word.map_or(Flow::Other, decode::flow);
        }
        if self.tally.profiling() {
            // What retires next is filed under its call stack (EL1) or its address space
            // (EL0): a user PC names a function only in the program mapped there.
            let context = if st.el == 0 {
                if read_ttbr0_el1().baddr_47_1() == self.opener_ttbr0 {
                    user_space::OPENER
                } else {
                    user_space::OTHER
                }
            } else {
                self.stacks.as_ref().map_or(ROOT, CallStack::node)
            };
            if let Some(t) = self.tally.profile_mut() {
                t.set_stack(context);
            }
        }
        if word.is_some_and(mtex_trace::maintenance::invalidates_code) {
            // A TLBI may change which page a code address maps to (the code-page cache is
            // keyed on the TTBRs, not on the tables' contents); an IC announces rewritten
            // code. Either way, look again after it.
            self.forget_code();
        }
        let insn = word.map_or(Insn::UnknownMem, decode::decode);
        // SP matters only to SP-based forms the architecture checks (writeback or register
        // offset); read the guest's SP for its current EL and SPSel only then.
        let sp = match insn {
            Insn::Mem(m) if m.base == 31 => guest_sp(ctx.spsr),
            _ => 0,
        };
        if self.virq_pending && !crate::vtimer::virq_still_pending() {
            self.virq_pending = false;
        }
        self.note_exclusive(ctx, st.pc, word, &insn);
        self.impdef.before(ctx, st.pc, &insn);
        let (pending, pages) = judge(
            (st.pc, st.el),
            (st.tco, ctx.spsr & spsr::UAO != 0),
            insn,
            controls,
            (&ctx.x, sp),
            self.block_granules,
        );
        self.pending = pending;
        self.note_store(pages[0]);
        self.note_store(pages[1]);
        if pages == [None; 2]
            && let Insn::Mem(m) = &insn
            && m.dir != decode::Dir::Read
        {
            // The judge translates only checkable accesses: the stores it never checks
            // (SP-based, STGP, the zeroing tag stores) may rewrite planned code as well.
            self.note_unchecked_store(ctx, &insn, sp);
        }
        self.pending_tco = st.tco;
        let run_fits = match self.unit {
            Some(unit) => {
                let done = self.retired();
                mtex_vm::sample::run_fits(unit, done, mtex_trace::run::is_exclusive_root_of(&insn))
            }
            None => true,
        };
        if let Some(w) = word
            && self.runs_enabled
            && run_fits
            && !self.virq_pending
            && !core::mem::take(&mut self.irq_stopped_run)
            && mtex_trace::run::may_start_run(w, &insn)
            && (self.stacks.is_none() || st.el == 0 || mtex_trace::run::is_exclusive_root_of(&insn))
            && self.arm_run(ctx, controls, (st.pc, st.el, w))
        {
            self.armed = false;
            return;
        }
        if self.fast_enabled
            // A unit ends at its size: the fast path would retire inert instructions past it.
            && self.unit.is_none()
            // With the profile kept, every instruction is retired with its PC: the asm fast
            // path, which retires inert ones by number, stands aside.
            && !self.tally.profiling()
            && !self.virq_pending
            && word.is_some_and(decode::is_inert)
        {
            let mut f = this_block();
            // Inert: the fast path may retire it (and those after it) on its own.
            f.pending_inert = 1;
            f.pending_pc = st.pc;
        }
        self.armed = true;
        ctx.spsr |= spsr::SS;
    }
}

/// Judges `insn` at `pc` (EL `el`) as the guest runs it with PSTATE (TCO, UAO), its
/// registers and SP: `Pending::new`, with stage 1 translated by AT. Also returns the IPA
/// pages a store writes (both parts of one that crosses pages; None for a load), for
/// `Tracer::note_store`. One judge for the step path, a run's predicted accesses and an
/// exclusive sequence's store.
#[inline(always)]
fn judge(
    (pc, el): (u64, u8),
    pstate: (bool, bool),
    insn: Insn,
    controls: &Controls,
    (x, sp): (&[u64; 31], u64),
    blocks: BlockGranules,
) -> (Pending, [Option<u64>; 2]) {
    let mut pages = [None; 2];
    let mut impdef = false;
    let mut p = Pending::new(
        pc,
        el,
        pstate,
        insn,
        controls,
        x,
        sp,
        blocks,
        |va, as_el0| {
            let t = translate(va, as_el0);
            pages = [pages[1], t.map(|(ipa, _)| ipa & !0xfff)];
            let tagged = t.is_some_and(|(_, par)| (par >> par::ATTR_SHIFT) as u8 == ATTR_TAGGED);
            impdef |= tagged && t.is_some_and(|(_, par)| tagged_is_impdef(controls, par));
            tagged
        },
    );
    // Checked only because such a page is Tagged (a CPU may take it as Untagged).
    p.tagged_impdef = impdef && (p.read.views().architectural || p.write.views().architectural);
    let pages = if p.write.present() { pages } else { [None; 2] };
    (p, pages)
}

/// Counts a TCO write at `pc` of `value` in its site (the first `SITES` distinct ones kept,
/// the rest counted as an overflow).
fn note_tco_site(
    sites: &mut [Option<TcoSite>; SITES],
    tally: &mut Tally,
    phase: u32,
    pc: u64,
    value: bool,
) {
    for slot in sites.iter_mut() {
        match slot {
            Some(s) if s.pc == pc && s.value == value => {
                s.count += 1;
                return;
            }
            None => {
                *slot = Some(TcoSite {
                    phase,
                    pc,
                    value,
                    count: 1,
                });
                return;
            }
            _ => {}
        }
    }
    tally.counts_mut().tco_site_overflow += 1;
}

/// This CPU's index among the machine's (for the oracle's markers).
fn this_cpu() -> usize {
    crate::fast_step::this_cpu_index()
}

/// Words of the bitmap of guest pages that hold a plan's code: a bit per page of RAM, up to
/// 4 GiB's worth (128 KiB per CPU), whatever the RAM of a server the hypervisor is installed
/// on (`plan_pages`).
fn plan_page_words(ram_size: u64) -> usize {
    const MAX_WORDS: u64 = (4 << 30 >> 12) / 64;
    (ram_size >> 12).div_ceil(64).min(MAX_WORDS) as usize
}

/// `n` copies of `v` in a boxed slice, or None without the memory (where `vec!` would end
/// the run).
fn filled<T: Clone>(v: T, n: usize) -> Option<alloc::boxed::Box<[T]>> {
    let mut b = alloc::vec::Vec::new();
    b.try_reserve_exact(n).ok()?;
    b.resize(n, v);
    Some(b.into_boxed_slice())
}
