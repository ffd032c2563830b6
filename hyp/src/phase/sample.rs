//! Sampled phases (`mtex.sample`): the schedule is `mtex_vm::sample`'s; here the EL2 timer
//! begins each unit, due on the guest's own execution time (`watchdog::sample_in`), the step
//! engine traces it, and its counts go out as a SampleUnit record when it has retired its
//! instructions. A sampled phase sends no PhaseTrace: nothing exact is claimed for what the
//! units did not trace.

use crate::context::GuestContext;
use crate::state::Hyp;
use mtex_abi::Record;
use mtex_abi::report::{SampleUnit, StepEngine};
use mtex_vm::sample::Next;

/// Whether phase `id`, opened traced, is sampled instead: it then starts (its first unit at
/// once, or the timer for it).
pub fn open(hyp: &mut Hyp, id: u32) -> bool {
    // One CPU: the timer and the units are this CPU's.
    if hyp.cpus.on() > 1 || hyp.window.is_some() {
        return false;
    }
    if hyp.sampler.is_none() {
        return false;
    }
    // Linux mode: the timer reaches EL2 only as an FIQ routed for the window.
    if hyp.linux && !crate::fiq::route(true) {
        log::warn!("window {id}: the GIC keeps Group 0 for the secure side; traced whole");
        return false;
    }
    let Some(s) = &mut hyp.sampler else {
        return false;
    };
    // Linux's idle WFI traps, and the CPU halts for it in EL2 (`guest_clock`), where the
    // next unit's time stands still: units are spread over what the guest executes, not
    // over the time it sleeps.
    if hyp.linux {
        crate::traps::trap_guest_wfi(true);
    }
    let next = s.begin(id, crate::watchdog::counter_hz());
    act(hyp, next);
    true
}

/// An ID- or debug-register access trapped: outside a sampled phase's units, the phase's
/// record says how many (`PhaseSampled::untraced_id_debug_traps`).
pub fn note_id_debug_trap(hyp: &mut Hyp) {
    if !sampling(hyp) || hyp.vcpu().tracer.active() {
        return;
    }
    if let Some(s) = &mut hyp.sampler {
        s.untraced_id_debug_traps = s.untraced_id_debug_traps.saturating_add(1);
    }
}

/// The open phase is sampled.
pub fn sampling(hyp: &Hyp) -> bool {
    hyp.sampler.as_ref().is_some_and(|s| s.phase != 0)
}

fn act(hyp: &mut Hyp, next: Next) {
    match next {
        Next::UnitNow => {
            if hyp.sampler.as_mut().is_some_and(|s| s.trigger()) {
                begin_unit(hyp);
            }
        }
        Next::TimerIn(ticks) => crate::watchdog::sample_in(Some(ticks)),
    }
}

/// The EL2 timer fired for a unit.
pub fn trigger(hyp: &mut Hyp, _ctx: &mut GuestContext) {
    if hyp.sampler.as_mut().is_some_and(|s| s.trigger()) {
        begin_unit(hyp);
    }
}

fn begin_unit(hyp: &mut Hyp) {
    let Some(s) = &mut hyp.sampler else { return };
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
    let Some(s) = &hyp.sampler else { return };
    if !s.in_unit || exception_entry {
        return;
    }
    let v = hyp.vcpu();
    if !v.tracer.active() {
        return;
    }
    let done = v.tracer.retired();
    if hyp.sampler.as_mut().is_some_and(|s| s.lead_over(done)) {
        // The lead is stepped: the unit counts from this instruction on. The lead's counts
        // go out as a lead's, for the phase's totals only.
        send_stretch(hyp, ctx, true);
        begin_unit(hyp);
    } else if hyp.sampler.as_ref().is_some_and(|s| s.unit_over(done)) {
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
    let Some(s) = &mut hyp.sampler else { return };
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
    let in_lead = hyp.sampler.as_ref().is_some_and(|s| s.lead != 0);
    if in_lead {
        send_stretch(hyp, ctx, true);
        if let Some(s) = &mut hyp.sampler {
            s.abandon_lead();
        }
        return Next::TimerIn(0);
    }
    send_stretch(hyp, ctx, false);
    let hz = crate::watchdog::counter_hz();
    match &mut hyp.sampler {
        Some(s) => s.end_unit(StepEngine::default(), hz),
        None => Next::TimerIn(0),
    }
}

/// The sampled phase closes: a unit still traced ends here, and the record of how the phase
/// was sampled goes out (before its PhasePmu and PhaseEnd).
pub fn close(hyp: &mut Hyp, ctx: &mut GuestContext) {
    if !sampling(hyp) {
        return;
    }
    let stopped = mtex_vm::sample::overdue(
        crate::watchdog::sample_due(),
        arm_sysregs::el0::accessors::read_cntpct_el0().bits(),
        crate::watchdog::counter_hz(),
    );
    crate::watchdog::sample_in(None);
    if hyp.linux {
        crate::fiq::route(false);
        crate::traps::trap_guest_wfi(false);
    }
    if hyp.sampler.as_ref().is_some_and(|s| s.in_unit) {
        end_unit(hyp, ctx);
    }
    if let Some(s) = &mut hyp.sampler {
        let record = s.end(stopped);
        hyp.report.send(&Record::PhaseSampled(record));
    }
}

/// The run ends inside a sampled phase: a unit being traced goes out as the unit it is, cut
/// short (true), never as the phase's counts.
pub fn unit_cut_short(hyp: &mut Hyp) -> bool {
    if !sampling(hyp) {
        return false;
    }
    let Some((id, guest_clock, lead)) = hyp
        .sampler
        .as_ref()
        .map(|s| (s.phase, s.unit_clock, s.lead != 0))
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
