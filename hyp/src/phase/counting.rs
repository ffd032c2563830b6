//! A phase's counting: what the hypervisor's counters and the PMU read at its begin, and
//! its figures at its end, with the passes its run still needs.

use crate::pmu::Pmu;
use crate::state::{Counters, Hyp};
use mtex_abi::report::{PhasePmu, PhaseStats};
use mtex_vm::counters::PmuFigures;

/// The phase the guest has open.
pub struct OpenPhase {
    pub id: u32,
    /// Its run (the id of the run's first phase) and pass (1-based untraced pass, 0 traced).
    pub run: u32,
    pub pass: u8,
    /// The guest runs the passes asked for (PHASE_REPEATABLE).
    pub repeatable: bool,
    pub at_begin: Counters,
    pub pmu_at_begin: Option<[u64; 3]>,
    pub flush_at_begin: u64,
}

/// A TCO watch pass's record and its sites.
pub type Watched = (
    mtex_abi::report::TcoWatch,
    [Option<mtex_abi::report::TcoSite>; 2 * crate::debug::BREAKPOINTS_USED],
);

impl Hyp {
    /// The run's counters, with the single-step exits and the trapped writes the fast paths
    /// handled. Frames the queued writes first: that is where the fast path's are counted (a
    /// cost measured as framing, so callers take their PMU figures after this).
    pub(super) fn counters_now(&mut self) -> Counters {
        self.report.flush();
        let (writes, with_tco) = {
            let f = crate::fast_step::this_cpu();
            (f.framed_fast_writes, f.framed_fast_writes_with_tco)
        };
        let c = self.counters_here();
        Counters {
            exits: c.exits + writes,
            exits_with_tco: c.exits_with_tco + with_tco,
            sysreg_writes: c.sysreg_writes + writes,
            emulated: c.emulated + writes,
            ..c
        }
    }

    /// The run's passes: those the PMU's events need (one for a guest that does not repeat
    /// its work), then those of the TCO watch.
    pub fn run_passes(&self, repeatable: bool) -> mtex_vm::phase::Passes {
        let pmu = match &self.pmu {
            Some(p) if repeatable => p.plan().passes(),
            _ => 1,
        };
        mtex_vm::phase::Passes {
            pmu,
            tco: self.run_tco_passes,
        }
    }

    /// Opens phase `id`, pass `pass` of run `run`, at this point of the run. With
    /// `repeatable`, the guest runs as many passes as asked; with `watch_tco` too, the first
    /// one scans for the TCO watch's sites, and the passes after the PMU's watch them.
    pub fn begin_phase(&mut self, id: u32, run: u32, pass: u8, repeatable: bool, watch_tco: bool) {
        if pass == 1 {
            self.run_tco_passes = if watch_tco { self.tco.scan() } else { 0 };
        }
        let watch = self.run_passes(repeatable).watch_index(pass);
        // Writes so far are framed, counted and attributed before the phase starts.
        let at_begin = self.counters_now();
        self.report.set_phase(id);
        if let Some(p) = &mut self.pmu {
            // Counters disturbed between phases are set up again; this phase starts clean.
            p.check_and_repair();
            // A pass of the TCO watch counts nothing on the slots; a traced phase counts the
            // MTE events the CPU has, beside the trace, on the same execution.
            p.start_pass(if watch.is_some() { u8::MAX } else { pass });
        }
        if let Some(i) = watch {
            self.tco.arm(id, i);
        }
        let pmu_at_begin = self.pmu.as_ref().map(Pmu::read);
        self.phase = Some(OpenPhase {
            id,
            run,
            pass,
            repeatable,
            at_begin,
            pmu_at_begin,
            flush_at_begin: self.report.flush_instructions,
        });
    }

    /// Closes the open phase and returns its figures: the hypervisor's, and the PMU
    /// backend's with the untraced passes its run still needs.
    #[allow(
        clippy::type_complexity,
        reason = "the figures of one phase, each sent as a record"
    )]
    pub fn end_phase(&mut self) -> Option<(u32, PhaseStats, PhasePmu, u8, Option<Watched>)> {
        self.phase.as_ref()?;
        // The slots count EL0 and EL1 only: read them first, as they are.
        let (pass, run, repeatable) = self.phase.as_ref().map(|p| (p.pass, p.run, p.repeatable))?;
        let counts = match &mut self.pmu {
            Some(pmu) => pmu.finish_pass(pass, repeatable),
            None => [None; mtex_abi::report::PMU_COUNTS],
        };
        let passes = self.run_passes(repeatable);
        let watch = passes
            .watch_index(pass)
            .is_some()
            .then(|| self.tco.finish());
        // The phase's writes are framed (as this phase's, inside its measured framing cost)
        // and counted before its figures are taken.
        let c = self.counters_now();
        let p = self.phase.take()?;
        self.report.set_phase(0);
        // A window's CPUs each send theirs with their share (`window::leave`).
        if self.window.is_none() {
            let cpu = self.this_cpu() as u32;
            self.report
                .send(&mtex_abi::Record::LockWait(mtex_abi::report::LockWait {
                    id: p.id,
                    cpu,
                    ticks: c.since(&p.at_begin).lock_wait_ticks,
                }));
        }
        let now = self.pmu.as_ref().map(Pmu::read);
        // A counter that was stopped, reprogrammed, overflowed or went backwards gives no
        // figure: the phase says so instead.
        let intact = self.pmu.as_ref().is_none_or(Pmu::check_and_repair)
            && match (p.pmu_at_begin, now) {
                (Some(a), Some(b)) => (0..3).all(|i| b[i] >= a[i]),
                _ => true,
            };
        let pmu = PhasePmu {
            id: p.id,
            run,
            pass,
            passes: passes.total(),
            counts,
        };
        let more = passes.more_after(pass);
        Some((
            p.id,
            c.since(&p.at_begin).stats(PmuFigures {
                instructions: match (p.pmu_at_begin, now) {
                    (Some(a), Some(b)) if intact => Some([b[0] - a[0], b[1] - a[1], b[2] - a[2]]),
                    _ => None,
                },
                report: self
                    .pmu
                    .filter(|_| intact)
                    .map(|_| self.report.flush_instructions - p.flush_at_begin),
                disturbed: !intact,
            }),
            pmu,
            more,
            watch,
        ))
    }
}
