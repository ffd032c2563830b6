//! Linux mode's windows on every CPU: a window opened while other CPUs are on counts what
//! each of them executes too. `mtex_vm::window` decides who counts; this applies it.
//!
//! - Open: the opener traces from its next instruction, as for one CPU, and makes every
//!   other CPU exit (`stage2_roots::kick`).
//! - Join: each other CPU, at that exit (or any exit before it), starts its own step engine;
//!   it counts from its next instruction. In Linux mode each member's WFI traps while it
//!   counts: it halts in EL2, where its clock keeps to the machine's (`guest_clock.rs`).
//! - Close: on any CPU. The closer hands in its share; each other CPU still counting is woken
//!   (Linux's reschedule IPI, SGI 0: a CPU asleep in WFI would otherwise count on until its
//!   next interrupt) and hands in its share at its next exit. A CPU that goes off hands its
//!   share in as it goes.
//! - Each share is a `CpuTrace` record. When the last is in, the window's records go out as
//!   for one CPU, with the sum: its PhaseTrace, and its PhaseEnd with every CPU's exits. Its
//!   PMU figures are withheld (the PMU counts the CPU it is on), as is the per-PC profile,
//!   which follows one CPU: a window with one asked for opens on one CPU only.
//!
//! A sampled window (`mtex.sample`) goes the same way, but each member samples its share
//! instead of tracing it (`sample::join`, `sample::leave`): its share is a `CpuSampled`
//! record, and the window's records are its PhaseSampled (the members' summed) with no
//! PhaseTrace. Its members keep no stepped clock: they run at full speed between units.
//!
//! An OPEN that comes while the last window's CPUs are still handing in their shares is
//! retried (the store is not skipped), so windows never overlap.

use crate::context::GuestContext;
use crate::phase::Watched;
use crate::state::{Counters, Hyp};
use mtex_abi::Record;
use mtex_abi::report::{
    CpuTrace, GuestState, LockWait, PhaseClock, PhaseEnd, PhasePmu, PhaseSampled, PhaseTrace,
    StepEngine,
};
use mtex_trace::counts::TraceCounts;
use mtex_vm::counters::PmuFigures;
use mtex_vm::window::Window;

/// A window that every CPU counts, and the sums of the shares handed in.
pub struct AllCpus {
    members: Window<Counters>,
    total: TraceCounts,
    engine: StepEngine,
    exits: Counters,
    /// Sampled: the members' records summed as they leave (None: traced whole).
    sampled: Option<PhaseSampled>,
    /// Kept at the close for the records that end the window.
    closing: Option<Closing>,
}

struct Closing {
    pmu: PhasePmu,
    watch: Option<Watched>,
    guest_clock: u64,
    ts: u64,
    at: GuestState,
}

impl AllCpus {
    /// The window's CPUs are still handing in their shares (it closed).
    pub fn closing(&self) -> bool {
        self.members.closed()
    }
}

/// Opens window `id` on every CPU, after `open_phase` started this CPU's trace.
pub fn open(hyp: &mut Hyp, id: u32) {
    let me = hyp.this_cpu();
    let at_open = hyp.counters_here();
    let cpus = hyp.machine_cpus.len();
    let mut roots = alloc::vec::Vec::new();
    for c in (0..cpus).filter(|&c| c != me) {
        if hyp.cpus.power(c) != mtex_vm::power::Power::On {
            continue;
        }
        if let Some(root) = hyp.kick_vcpu(c) {
            roots.push(root);
        }
    }
    if hyp.linux && cpus > 1 {
        crate::traps::trap_guest_wfi(true);
    }
    crate::stage2_roots::kick(roots.into_iter());
    hyp.window = Some(AllCpus {
        members: Window::open(id, cpus, me, at_open),
        total: TraceCounts::default(),
        engine: StepEngine {
            id,
            ..StepEngine::default()
        },
        exits: Counters::default(),
        sampled: crate::phase::sample::sampling(hyp)
            .then_some(hyp.sample)
            .flatten()
            .map(|s| PhaseSampled {
                id,
                unit_instructions: s.unit,
                gap_us: s.gap_us,
                seed: s.seed,
                whole: s.gap_us == 0,
                engine: StepEngine {
                    id,
                    ..StepEngine::default()
                },
                ..PhaseSampled::default()
            }),
        closing: None,
    });
}

/// This CPU counts in a window traced whole on a machine of several CPUs (it keeps the
/// window's guest time, `stepped_clock.rs`). A sampled window's members do not: they run at
/// full speed between their units, and keep the guest's clock by the rules of exits.
pub fn stepped_member(hyp: &Hyp) -> bool {
    hyp.machine_cpus.len() > 1
        && hyp
            .window
            .as_ref()
            .is_some_and(|w| w.sampled.is_none() && w.members.counting(hyp.this_cpu()))
}

/// A stage-2 fault taken because another CPU cleared this one's root: the root is restored
/// and the instruction runs again (True: the exit was that).
pub fn kicked_here(hyp: &mut Hyp) -> bool {
    let v = hyp.vcpu();
    if !v.kicked {
        return false;
    }
    crate::stage2_roots::refill(v.s2_root);
    v.kicked = false;
    true
}

/// At the end of every exit of this CPU (holding the state, before the step engine prepares
/// the next instruction): it joins the open window, or leaves one that closed, or that it
/// leaves by going off (`going_off`).
pub fn at_exit(hyp: &mut Hyp, ctx: &mut GuestContext, going_off: bool) {
    let Some(w) = &hyp.window else { return };
    let me = hyp.this_cpu();
    if w.members.counting(me) {
        if going_off || w.members.must_leave(me) {
            leave(hyp, ctx, me);
        }
        return;
    }
    if going_off || w.members.closed() {
        return;
    }
    let id = w.members.id;
    let at_join = hyp.counters_here();
    let Some(w) = &mut hyp.window else { return };
    if w.members.join(me, || at_join) {
        kicked_here(hyp);
        if hyp.linux {
            crate::traps::trap_guest_wfi(true);
        }
        // This CPU's trapped writes belong to the window from here to its leaving.
        hyp.report.set_phase(id);
        if hyp.window.as_ref().is_some_and(|w| w.sampled.is_some()) {
            crate::phase::sample::join(hyp, id);
            return;
        }
        // The per-PC table stays where it is: such a window has none.
        if !hyp.start_trace_here(id, false) {
            log::warn!("an OS lock was set on CPU {me} as it joined window {id}; cleared");
        }
    }
}

/// This CPU hands in its share.
fn leave(hyp: &mut Hyp, ctx: &mut GuestContext, me: usize) {
    if hyp.window.as_ref().is_some_and(|w| w.sampled.is_some()) {
        leave_sampled(hyp, ctx, me);
        return;
    }
    if hyp.linux {
        crate::traps::trap_guest_wfi(false);
    }
    let now = hyp.counters_here();
    let (counts, sites) = hyp.stop_trace(ctx);
    // The share's last instructions (a run the stop retired) are in the window's time too.
    crate::stepped_clock::note_retired(|_| counts.instructions_el0 + counts.instructions_el1);
    let engine = hyp.vcpu().tracer.engine();
    for site in sites.into_iter().flatten() {
        hyp.report.send(&Record::TcoSite(site));
    }
    hyp.report.set_phase(0);
    let Some(w) = &mut hyp.window else { return };
    let Some(at_join) = w.members.leave(me) else {
        return;
    };
    let exits = now.since(&at_join);
    w.total.add(&counts);
    w.exits.add(&exits);
    w.engine.add(&engine);
    let share = CpuTrace {
        id: w.members.id,
        cpu: me as u32,
        instructions: [counts.instructions_el0, counts.instructions_el1],
        abandoned: [counts.abandoned_el0, counts.abandoned_el1],
        trapped: [counts.trapped_el0, counts.trapped_el1],
        hyp_branches: [engine.branches_el0, engine.branches_el1],
        checked: counts.architectural,
        accesses: counts.accesses,
        tag_check_faults: counts.tag_check_faults,
        unknown_mem: counts.unknown_mem,
        step_exits: exits.step_exits,
    };
    hyp.report.send(&Record::LockWait(LockWait {
        id: w.members.id,
        cpu: me as u32,
        ticks: exits.lock_wait_ticks,
    }));
    let done = w.members.done() && w.closing.is_some();
    hyp.report.send(&Record::CpuTrace(share));
    if done {
        finish(hyp);
    }
}

/// This CPU hands in its share of a sampled window: its units went out as it traced them,
/// its `CpuSampled` goes out now (`sample::leave`).
fn leave_sampled(hyp: &mut Hyp, ctx: &mut GuestContext, me: usize) {
    let now = hyp.counters_here();
    let Some(at_join) = hyp.window.as_mut().and_then(|w| w.members.leave(me)) else {
        return;
    };
    let exits = now.since(&at_join);
    let share = crate::phase::sample::leave(hyp, ctx, &exits);
    hyp.report.set_phase(0);
    let Some(w) = &mut hyp.window else { return };
    w.exits.add(&exits);
    if let (Some(sum), Some(share)) = (&mut w.sampled, share) {
        let s = share.sampled;
        sum.units += s.units;
        sum.engine.add(&s.engine);
        sum.late_triggers += s.late_triggers;
        sum.untraced_id_debug_traps += s.untraced_id_debug_traps;
        sum.timer_stopped |= s.timer_stopped;
    }
    hyp.report.send(&Record::LockWait(LockWait {
        id: w.members.id,
        cpu: me as u32,
        ticks: exits.lock_wait_ticks,
    }));
    if w.members.done() && w.closing.is_some() {
        finish(hyp);
    }
}

/// Closes the window (from `close_phase`, with the phase's PMU record and TCO watch as the
/// closer has them; its own counters are its share only, so the window's are summed):
/// the closer hands in its share and wakes the CPUs still counting. Its records go out when
/// the last share is in.
pub fn close(hyp: &mut Hyp, ctx: &mut GuestContext, pmu: PhasePmu, watch: Option<Watched>) {
    let me = hyp.this_cpu();
    let Some(w) = &mut hyp.window else { return };
    w.closing = Some(Closing {
        pmu,
        watch,
        guest_clock: crate::phase::guest_clock(),
        ts: arm_sysregs::el0::accessors::read_cntpct_el0().bits(),
        at: ctx.state(),
    });
    let counting = w.members.close();
    for &c in counting.iter().filter(|&&c| c != me) {
        wake(hyp.machine_cpus[c]);
    }
    if counting.contains(&me) {
        leave(hyp, ctx, me);
    } else if hyp.window.as_ref().is_some_and(|w| w.members.done()) {
        finish(hyp);
    }
}

/// Sends Linux's reschedule IPI (SGI 0, Group 1) to the CPU `mpidr`, which may be asleep in
/// WFI: it wakes, takes an exit at its next instruction, and leaves the window. A CPU with
/// nothing to schedule returns from it at once.
fn wake(mpidr: u64) {
    use arm_gic::IntId;
    use arm_gic::gicv3::{GicCpuInterface, SgiTarget, SgiTargetGroup};
    let aff = |n: u32| (mpidr >> n) as u8;
    let aff0 = aff(0);
    // A target list holds Aff0 0..15; higher ones need the range selector, which the
    // crate's SGI target does not express. Such a CPU leaves at its next own exit.
    if aff0 >= 16 {
        log::warn!("CPU {mpidr:#x}: Aff0 above 15, not woken");
        return;
    }
    let target = SgiTarget::List {
        affinity3: aff(32),
        affinity2: aff(16),
        affinity1: aff(8),
        target_list: 1 << aff0,
    };
    if let Err(e) = GicCpuInterface::send_sgi(IntId::sgi(0), target, SgiTargetGroup::CurrentGroup1)
    {
        log::warn!("CPU {mpidr:#x}: wake-up SGI refused: {e:?}");
    }
}

/// The window's records, now that every share is in: as a one-CPU window's, with the sums.
fn finish(hyp: &mut Hyp) {
    let Some(w) = hyp.window.take() else { return };
    let Some(c) = w.closing else { return };
    // On several CPUs the window ends, on the guest's clock, as its last share is in: its
    // instructions are counted to each CPU's first exit after the close.
    let end_time = crate::stepped_clock::guest_time(&crate::fast_step::this_cpu());
    let id = w.members.id;
    let total = w.total;
    let r = &mut hyp.report;
    if let Some(sampled) = w.sampled {
        // Sampled: the members' units and shares went out as they left; nothing exact is
        // claimed for what their units did not trace.
        r.send(&Record::PhaseSampled(sampled));
    } else {
        r.send(&Record::PhaseTrace(PhaseTrace { id, counts: total }));
        crate::phase::send_trace_more(r, id, &total, true);
        r.send(&Record::StepEngine(w.engine));
    }
    if let Some((record, sites)) = c.watch {
        for site in sites.into_iter().flatten() {
            r.send(&Record::TcoSite(site));
        }
        r.send(&Record::TcoWatch(record));
    }
    // The PMU counts the CPU it is on: nothing of it stands for the whole machine.
    r.send(&Record::PhasePmu(PhasePmu {
        counts: [None; mtex_abi::report::PMU_COUNTS],
        ..c.pmu
    }));
    r.send(&Record::PhaseClock(PhaseClock {
        id,
        end: true,
        guest_clock: end_time.unwrap_or(c.guest_clock),
    }));
    r.send(&Record::PhaseEnd(PhaseEnd {
        id,
        ts: c.ts,
        at: c.at,
        stats: w.exits.stats(PmuFigures::NONE),
    }));
}
