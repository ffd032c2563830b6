//! A phase's life in one place: it opens (a PHASE_BEGIN, or Linux mode's doorbell), its
//! counting begins (`counting`), it is traced whole, or sampled unit by unit (`sample`), on
//! its CPU or on every CPU (`window`), and it closes, its figures taken first and its records
//! sent after them.

mod counting;
pub mod sample;
pub mod window;

pub use counting::{OpenPhase, Watched};

use crate::context::GuestContext;
use crate::state::Hyp;
use arm_sysregs::el0::accessors::read_cntpct_el0;
use mtex_abi::Record;
use mtex_abi::hypercall as hc;
use mtex_abi::report::{PhaseBegin, PhaseClock, PhaseEnd, PhaseName, PhaseTrace};
use mtex_abi::scenario::PhaseParams;

/// A phase about to open: what PHASE_BEGIN (or Linux mode's doorbell) asked for.
pub struct Opening {
    pub id: u32,
    pub name: PhaseName,
    pub params: Option<PhaseParams>,
    pub flags: u64,
    /// The run and pass `mtex_abi::runs::next_phase` gave.
    pub run: u32,
    pub pass: u8,
    pub regs8: [u64; 8],
}

/// Opens a phase: its record, then the counting (and the trace, if traced).
pub fn open(hyp: &mut Hyp, ctx: &GuestContext, o: Opening) {
    let Opening {
        id,
        params,
        flags,
        run,
        pass,
        regs8,
        ..
    } = o;
    let traced = flags & hc::PHASE_TRACED != 0;
    hyp.report.send(&Record::PhaseBegin(PhaseBegin {
        id,
        name: o.name,
        params,
        ts: read_cntpct_el0().bits(),
        at: ctx.state(),
    }));
    hyp.report.send(&Record::PhaseClock(PhaseClock {
        id,
        end: false,
        guest_clock: guest_clock(),
    }));
    // Counting starts after the record went out, so a phase's EL2 figures hold its own
    // exits and not the cost of announcing it.
    if run == hyp.next_run {
        hyp.next_run += 1;
    }
    hyp.last_run = Some(mtex_abi::runs::LastRun {
        run,
        pass,
        passes: hyp
            .last_run
            .filter(|l| l.run == run)
            .map_or(0, |l| l.passes),
        flags,
        regs: regs8,
    });
    let repeatable = flags & hc::PHASE_REPEATABLE != 0;
    hyp.begin_phase(
        id,
        run,
        pass,
        repeatable,
        repeatable && flags & hc::PHASE_WATCH_TCO != 0,
    );
    log::debug!(
        "phase {id} begins at pc {:#x}, traced: {traced}, guest clock {}",
        ctx.elr,
        guest_clock()
    );
    // A sampled phase traces units of itself instead (`mtex.sample`).
    if traced && !sample::open(hyp, id) && !hyp.start_trace(id) {
        log::warn!("an OS lock was set at the start of traced phase {id}; cleared");
    }
    // With other CPUs on, each counts too (`window`).
    if hyp.cpus.on() > 1 {
        window::open(hyp, id);
    }
}

/// Closes the open phase: its figures first (so its EL2 count excludes the framing of its own
/// records), then its records. Returns the passes its run still wants.
pub fn close(hyp: &mut Hyp, ctx: &mut GuestContext) -> Option<u8> {
    hyp.phase.as_ref()?;
    // In a window on several CPUs each member's sampling ends as it leaves (`window`).
    if hyp.window.is_none() {
        sample::close(hyp, ctx);
    }
    let (id, stats, pmu, more, watch) = hyp.end_phase()?;
    if let Some(g) = hyp.call_guard.take() {
        crate::mmu::protect(g.read_only, false);
        hyp.report.send(&Record::PhaseIterations(g.iterations()));
    }
    if let Some(l) = &mut hyp.last_run {
        l.passes = pmu.passes;
    }
    if hyp.window.is_some() {
        // Counted on every CPU: its records go out when the last CPU has left it.
        window::close(hyp, ctx, pmu, watch);
        return Some(more);
    }
    log::debug!(
        "phase {id} ends: {} exits, {} steps, guest clock {}",
        stats.exits,
        stats.step_exits,
        guest_clock()
    );
    if hyp.vcpu().tracer.active() {
        let (counts, sites) = hyp.stop_trace(ctx);
        for site in sites.into_iter().flatten() {
            hyp.report.send(&Record::TcoSite(site));
        }
        hyp.report
            .send(&Record::PhaseTrace(PhaseTrace { id, counts }));
        send_trace_more(&mut hyp.report, id, &counts, true);
        let engine = hyp.vcpu().tracer.engine();
        hyp.report.send(&Record::StepEngine(engine));
        let (v, report) = hyp.vcpu_and_report();
        v.tracer.send_profile(id, report);
    }
    if let Some((record, sites)) = watch {
        for site in sites.into_iter().flatten() {
            hyp.report.send(&Record::TcoSite(site));
        }
        hyp.report.send(&Record::TcoWatch(record));
    }
    hyp.report.send(&Record::PhasePmu(pmu));
    hyp.report.send(&Record::PhaseClock(PhaseClock {
        id,
        end: true,
        guest_clock: guest_clock(),
    }));
    hyp.report.send(&Record::PhaseEnd(PhaseEnd {
        id,
        ts: read_cntpct_el0().bits(),
        at: ctx.state(),
        stats,
    }));
    Some(more)
}

/// The machine's guest time when this exit entered EL2 (its EL2 time is not yet taken out):
/// under `-icount` it advances with the guest's own instructions only, whatever path its
/// exits took (a test compares it across `mtex.step` modes). Not this CPU's own counter,
/// which may run ahead of the machine's while QEMU runs another CPU (`mtex_vm::guest_clock`):
/// a window opened on one CPU and closed on another is timed on the one clock.
pub fn guest_clock() -> u64 {
    let f = crate::fast_step::this_cpu();
    crate::stepped_clock::guest_time(&f).unwrap_or_else(|| {
        f.exit_ts
            .saturating_sub(crate::guest_clock::machine_offset())
    })
}

/// Sends a traced phase's (or sampled unit's) counts that PhaseTrace does not carry: its
/// TraceMore (if `always`, or when not zero) and its TraceImpdef when not zero.
pub fn send_trace_more(
    report: &mut crate::report::Reporter,
    id: u32,
    c: &mtex_trace::counts::TraceCounts,
    always: bool,
) {
    let more = trace_more(id, c);
    if always
        || more
            != (mtex_abi::report::TraceMore {
                id,
                ..Default::default()
            })
    {
        report.send(&Record::TraceMore(more));
    }
    let impdef = mtex_abi::report::TraceImpdef {
        id,
        failed_cas: c.failed_cas,
        exclusive_pairs_mixed: c.exclusive_pairs_mixed,
        tagged_impdef: c.tagged_impdef,
    };
    if !impdef.is_zero() {
        report.send(&Record::TraceImpdef(impdef));
    }
}

/// A traced phase's counts that PhaseTrace does not carry, as their record does.
fn trace_more(id: u32, c: &mtex_trace::counts::TraceCounts) -> mtex_abi::report::TraceMore {
    mtex_abi::report::TraceMore {
        id,
        abandoned_el0: c.abandoned_el0,
        abandoned_el1: c.abandoned_el1,
        trapped_el0: c.trapped_el0,
        trapped_el1: c.trapped_el1,
    }
}
