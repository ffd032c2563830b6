//! Sampled phases (`mtex.sample`): the schedule is `mtex_vm::sample`'s; here the EL2 timer
//! begins each unit, due on the guest's own execution time (`watchdog::sample_in`), the step
//! engine traces it, and its counts go out as a SampleUnit record when it has retired its
//! instructions. A sampled phase sends no PhaseTrace: nothing exact is claimed for what the
//! units did not trace.
//!
//! In a window on several CPUs (`window.rs`) each member samples its own share: its own
//! sampler and schedule, its own EL2 timer (each CPU has one, and in Linux mode its own
//! redistributor's routing), its own PMU for its instruction totals. It begins as it joins
//! ([`join`]) and ends as it leaves ([`leave`]), whose record (`CpuSampled`) carries its
//! share's PMU figures; its SampleUnit records are its own by the `OnCpu` that precedes them.

use crate::context::GuestContext;
use crate::state::Hyp;
use mtex_abi::Record;
use mtex_abi::report::{CpuSampled, PhaseSampled, SampleUnit, StepEngine};
use mtex_vm::sample::{Next, OwnFired};

/// Whether phase `id`, opened traced, is sampled instead: it then starts on this CPU (its
/// first unit at once, or the timer for it). Other CPUs on join it as they join the window
/// (`window.rs`), each sampling its own share.
pub fn open(hyp: &mut Hyp, id: u32) -> bool {
    if hyp.sample.is_none() || hyp.window.is_some() {
        return false;
    }
    // On several CPUs each CPU's share rests on its own PMU's instructions, which count
    // its gaps too: without them the window is traced whole.
    let several = hyp.cpus.on() > 1;
    if several && hyp.pmu.is_none() {
        log::warn!(
            "window {id}: no PMU instruction counters to sample on several CPUs; traced whole"
        );
        return false;
    }
    // Linux mode: the timer reaches EL2 only as an FIQ routed for the window, which needs a
    // GIC whose non-secure side may use Group 0: then every CPU's may.
    if hyp.linux && !crate::fiq::route(true) {
        log::warn!("window {id}: the GIC keeps Group 0 for the secure side; traced whole");
        return false;
    }
    begin_here(hyp, id, several);
    true
}

/// This CPU joins sampled window `id` (open on several CPUs): it samples its own share.
pub fn join(hyp: &mut Hyp, id: u32) {
    if hyp.linux && !crate::fiq::route(true) {
        // Its redistributor was not found: its timer cannot reach EL2, and its share will
        // say so (`timer_stopped`), never be estimated from no units.
        log::warn!(
            "window {id}: CPU {} cannot route its sampling timer",
            hyp.this_cpu()
        );
    }
    begin_here(hyp, id, true);
}

/// This CPU's own instructions so far, at EL0 and EL1 (its PMU's).
fn own_instructions(hyp: &Hyp) -> Option<u64> {
    hyp.pmu.map(|p| {
        let [_, el1, el0] = p.read();
        el1 + el0
    })
}

/// This CPU counts its gaps on its own instructions (`mtex_vm::sample::own_due`).
fn counts_own() -> bool {
    crate::fast_step::this_cpu().sample_own != 0
}

/// `own`: the gaps are counted on this CPU's own instructions (a window on several CPUs).
fn begin_here(hyp: &mut Hyp, id: u32, own: bool) {
    crate::fast_step::this_cpu().sample_own = u64::from(own);
    // Linux's idle WFI traps, and the CPU halts for it in EL2 (`guest_clock`), where the
    // next unit's time stands still: units are spread over what the guest executes, not
    // over the time it sleeps.
    if hyp.linux {
        crate::traps::trap_guest_wfi(true);
    }
    // The PMU's instructions as this CPU begins (its share's figures are differences); a
    // CPU whose counters were never set up (a secondary's) has them programmed here.
    let pmu = hyp.pmu.map(|p| {
        p.check_and_repair();
        p.read()
    });
    let hz = crate::watchdog::counter_hz();
    let cpu = hyp.this_cpu();
    let Some(s) = hyp.sampler() else { return };
    if own {
        crate::oracle_mark::share_open(id, cpu);
    }
    s.pmu_at_begin = pmu;
    let next = s.begin(id, hz);
    act(hyp, next);
}

/// An ID- or debug-register access trapped: outside a sampled phase's units, the phase's
/// record says how many (`PhaseSampled::untraced_id_debug_traps`).
pub fn note_id_debug_trap(hyp: &mut Hyp) {
    if !sampling(hyp) || hyp.vcpu().tracer.active() {
        return;
    }
    if let Some(s) = hyp.sampler() {
        s.untraced_id_debug_traps = s.untraced_id_debug_traps.saturating_add(1);
    }
}

/// This CPU samples the open phase (or its share of a window).
pub fn sampling(hyp: &mut Hyp) -> bool {
    hyp.sampler().is_some_and(|s| s.phase != 0)
}

fn act(hyp: &mut Hyp, next: Next) {
    match next {
        Next::UnitNow => {
            if hyp.sampler().is_some_and(|s| s.trigger()) {
                begin_unit(hyp);
            }
        }
        Next::TimerIn(ticks) if counts_own() => {
            if let Some(own) = own_instructions(hyp)
                && let Some(s) = hyp.sampler()
            {
                s.due_after(own, ticks);
            }
            crate::watchdog::sample_own_in(ticks);
        }
        Next::TimerIn(ticks) => crate::watchdog::sample_in(Some(ticks)),
    }
}

/// Counted on this CPU's own instructions, and no unit being traced: what is left of the gap
/// (`mtex_vm::sample::own_due`), or None when none is due.
fn own_rest(hyp: &mut Hyp) -> Option<Next> {
    // The PMU is read only while a gap runs: not at a unit's step exits, a hot path.
    if !counts_own() || !hyp.sampler()?.own_gap_running() {
        return None;
    }
    let own = own_instructions(hyp)?;
    hyp.sampler()?.own_next(own)
}

/// The EL2 timer fired for a unit.
pub fn trigger(hyp: &mut Hyp, _ctx: &mut GuestContext) {
    // Counted on its own instructions, the CPU may not have executed the gap yet (another
    // CPU ran meanwhile): the timer is armed again for the rest.
    if counts_own() {
        let Some(own) = own_instructions(hyp) else {
            return;
        };
        match hyp.sampler().and_then(|s| s.own_fired(own)) {
            Some(OwnFired::Rearm(rest)) => crate::watchdog::sample_own_in(rest),
            Some(OwnFired::Unit { first })
                if hyp.sampler().is_some_and(|s| s.trigger_after(first)) =>
            {
                begin_unit(hyp);
            }
            _ => {}
        }
        return;
    }
    if hyp.sampler().is_some_and(|s| s.trigger()) {
        begin_unit(hyp);
    }
}

fn begin_unit(hyp: &mut Hyp) {
    let Some(s) = hyp.sampler() else { return };
    let (id, stretch) = (s.phase, s.stretch());
    s.unit_clock = crate::phase::guest_clock();
    hyp.vcpu().tracer.set_unit(Some(stretch));
    if !hyp.start_trace_here(id, false) {
        log::warn!("an OS lock was set at the start of a unit of sampled phase {id}; cleared");
    }
}

/// At an exit, after the step engine retired what ran: a unit that has retired its
/// instructions ends here, and the next is scheduled (or, tracing whole, begins). Not at the
/// step exit taken at an exception handler's first instruction (`exception_entry`): QEMU has
/// begun that instruction once already there, only to raise the step (its step stub), and
/// an emulator's count of the stretches would find the two halves in two stretches. The
/// stretch ends at the next exit instead, an instruction later.
pub fn at_exit(hyp: &mut Hyp, ctx: &mut GuestContext, exception_entry: bool) {
    // Counted on its own instructions: the timer is set again at every exit for what is
    // left of the gap, since the exit tail would otherwise move it on by every other CPU's
    // hypervisor time since it was armed. A unit found due begins at the next instruction's
    // tick, never at this exit.
    match own_rest(hyp) {
        Some(Next::TimerIn(rest)) => crate::watchdog::sample_own_in(rest),
        Some(Next::UnitNow) => crate::watchdog::sample_own_in(1),
        None => {}
    }
    if exception_entry || !hyp.sampler().is_some_and(|s| s.in_unit) {
        return;
    }
    let v = hyp.vcpu();
    if !v.tracer.active() {
        return;
    }
    let done = v.tracer.retired();
    if hyp.sampler().is_some_and(|s| s.lead_over(done)) {
        // The lead is stepped: the unit counts from this instruction on. The lead's counts
        // go out as a lead's, for the phase's totals only.
        send_stretch(hyp, ctx, true);
        begin_unit(hyp);
    } else if hyp.sampler().is_some_and(|s| s.unit_over(done)) {
        let next = end_unit(hyp, ctx);
        act(hyp, next);
    }
}

/// Stops tracing the stretch being traced (a unit, or with `lead` a unit's lead) and sends
/// its record; what the engine did in it goes to the phase's.
fn send_stretch(hyp: &mut Hyp, ctx: &mut GuestContext, lead: bool) {
    let (counts, _sites) = hyp.stop_trace(ctx);
    let v = hyp.vcpu();
    v.tracer.set_unit(None);
    let engine = v.tracer.engine();
    let Some(s) = hyp.sampler() else { return };
    let record = SampleUnit {
        id: s.phase,
        lead,
        guest_clock: s.unit_clock,
        counts,
    };
    if !lead {
        s.in_unit = false;
    }
    s.add_engine(engine);
    hyp.report.send(&Record::SampleUnit(record));
    // The counts SampleUnit's encoding leaves out (instructions abandoned to an exception,
    // such as the doorbell store that closes a window inside a unit) follow it in their own
    // record, as a traced phase's do.
    crate::phase::send_trace_more(&mut hyp.report, record.id, &counts, false);
}

/// Ends the unit being traced (or, in its lead, abandons it): its record goes out.
fn end_unit(hyp: &mut Hyp, ctx: &mut GuestContext) -> Next {
    let in_lead = hyp.sampler().is_some_and(|s| s.lead != 0);
    if in_lead {
        send_stretch(hyp, ctx, true);
        if let Some(s) = hyp.sampler() {
            s.abandon_lead();
        }
        return Next::TimerIn(0);
    }
    send_stretch(hyp, ctx, false);
    let hz = crate::watchdog::counter_hz();
    match hyp.sampler() {
        Some(s) => s.end_unit(StepEngine::default(), hz),
        None => Next::TimerIn(0),
    }
}

/// The sampled phase closes (on one CPU): a unit still traced ends here, and the record of
/// how the phase was sampled goes out (before its PhasePmu and PhaseEnd).
pub fn close(hyp: &mut Hyp, ctx: &mut GuestContext) {
    if let Some(record) = stop_here(hyp, ctx) {
        hyp.report.send(&Record::PhaseSampled(record));
    }
}

/// This CPU leaves a sampled window on several CPUs: it stops sampling, and its share goes
/// out (`CpuSampled`, after its last unit's record). Returns the share (None if this CPU
/// was not sampling).
pub fn leave(
    hyp: &mut Hyp,
    ctx: &mut GuestContext,
    exits: &crate::state::Counters,
) -> Option<CpuSampled> {
    let at_begin = hyp.sampler().and_then(|s| s.pmu_at_begin);
    let sampled = stop_here(hyp, ctx)?;
    // The PMU's instructions over the share: none if its counters were disturbed meanwhile.
    let at_end = hyp.pmu.and_then(|p| p.check_and_repair().then(|| p.read()));
    crate::oracle_mark::share_close(sampled.id, hyp.this_cpu());
    let share = CpuSampled {
        id: sampled.id,
        cpu: hyp.this_cpu() as u32,
        sampled,
        pmu_instructions: mtex_vm::sample::share_instructions(at_begin, at_end),
        emulated: exits.emulated,
        step_exits: exits.step_exits,
    };
    hyp.report.send(&Record::CpuSampled(share));
    Some(share)
}

/// This CPU stops sampling: a unit still traced ends here; the record of how it sampled.
fn stop_here(hyp: &mut Hyp, ctx: &mut GuestContext) -> Option<PhaseSampled> {
    if !sampling(hyp) {
        return None;
    }
    let hz = crate::watchdog::counter_hz();
    let stopped = if counts_own() {
        // Due on its own instructions: overdue by more than a hundredth of a second's worth
        // of them (a tick's each).
        let due = hyp.sampler().and_then(|s| s.due_instructions);
        match (due, own_instructions(hyp)) {
            (Some(due), Some(now)) => mtex_vm::sample::overdue(due, now, hz),
            _ => false,
        }
    } else {
        mtex_vm::sample::overdue(
            crate::watchdog::sample_due(),
            arm_sysregs::el0::accessors::read_cntpct_el0().bits(),
            hz,
        )
    };
    crate::watchdog::sample_in(None);
    crate::fast_step::this_cpu().sample_own = 0;
    if hyp.linux {
        crate::fiq::route(false);
        crate::traps::trap_guest_wfi(false);
    }
    if hyp.sampler().is_some_and(|s| s.in_unit) {
        end_unit(hyp, ctx);
    }
    hyp.sampler().map(|s| s.end(stopped))
}

/// The run ends inside a sampled phase: a unit being traced goes out as the unit it is, cut
/// short (true), never as the phase's counts.
pub fn unit_cut_short(hyp: &mut Hyp) -> bool {
    if !sampling(hyp) {
        return false;
    }
    let Some((id, guest_clock, lead)) = hyp.sampler().map(|s| (s.phase, s.unit_clock, s.lead != 0))
    else {
        return false;
    };
    let (v, report) = hyp.vcpu_and_report();
    if let Some((_, counts)) = v.tracer.partial() {
        report.send(&Record::SampleUnit(SampleUnit {
            id,
            lead,
            guest_clock,
            counts,
        }));
    }
    true
}
