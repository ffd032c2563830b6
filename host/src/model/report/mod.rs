//! Reading the report stream out of console text into a report a person or a script can use.
//! Damaged, missing and out-of-order records are listed as problems, never skipped silently.
//!
//! This module holds the report's types, what a run reported as the host keeps it. Reading
//! the console into them is `parse`; listing the figures the run cannot vouch for is
//! `checks`; the words for calls, PMU figures and endings, which the problems and every
//! renderer share, are `describe`; the PSCI calls the hypervisor refused are `power`. Each
//! can be read without the others' detail.

use mtex_abi::report::{
    Boot, GuestState, PhasePmu, PhaseStats, PmuCount, PmuValue, Summary, TcoSite, TcoWatch,
    UnknownCall,
};
use mtex_trace::counts::TraceCounts;
use serde::Serialize;

mod checks;
mod describe;
mod parse;
pub mod power;
pub mod sampled;
#[cfg(test)]
mod test_stream;

pub use checks::pmu_expected;
pub use describe::{call_name, describe_exit, describe_power_call, pmu_count_name};
pub use parse::{LOADER_ERROR, console_without_records, parse, parse_bytes};

/// One decoded MTE field change of a trapped write.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FieldChange {
    pub field: &'static str,
    pub old: &'static str,
    pub new: &'static str,
}

/// A trapped system-register write.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Write {
    pub seq: u32,
    /// The CPU that wrote it (its index among the machine's).
    pub cpu: u32,
    pub register: &'static str,
    pub old: u64,
    pub new: u64,
    pub changes: Vec<FieldChange>,
    pub at: GuestState,
    pub ts: u64,
    /// Name of the phase it happened in, if any.
    pub phase: Option<String>,
}

/// A phase as begun and (if it was) ended.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Phase {
    pub id: u32,
    pub name: String,
    /// The (policy, workload) run of the kernel scenario this phase measured.
    pub params: Option<mtex_abi::scenario::PhaseParams>,
    pub begin_ts: u64,
    pub begin: GuestState,
    pub end_ts: Option<u64>,
    pub end: Option<GuestState>,
    /// The guest's own clock (its virtual counter: the hypervisor's time left out) at the
    /// phase's begin and end, where the hypervisor recorded it.
    pub begin_guest_clock: Option<u64>,
    pub end_guest_clock: Option<u64>,
    pub stats: Option<PhaseStats>,
    /// Counts of the trace counter, for a traced phase.
    pub trace: Option<TraceCounts>,
    /// Where the guest wrote PSTATE.TCO in a traced phase.
    pub tco_sites: Vec<TcoSite>,
    /// The PMU backend's record of the phase: its run, its pass and what it counted.
    pub pmu_record: Option<PhasePmu>,
    /// How the phase (an untraced pass) watched the guest's MSR TCO sites.
    pub tco_watch: Option<TcoWatch>,
    /// The untraced passes of the phase's run (a run of several phases is shown as its last:
    /// the traced one, or the first pass of a run that is not traced).
    pub untraced: Option<Untraced>,
    /// The oracle's check of its trace, for a run with the oracle (`crate::oracle_check`).
    pub oracle: Option<crate::oracle_check::Check>,
    /// Its counts by PC, for a traced phase of a run with `mtex.profile=1`.
    pub profile: Option<crate::profile::PhaseProfile>,
    /// A window that every CPU counted: each CPU's share, in the order they left (`trace`
    /// is their sum). Empty for a phase counted on one CPU.
    pub cpus: Vec<mtex_abi::report::CpuTrace>,
    /// The counter ticks each of its CPUs waited at EL2 for the hypervisor's lock while
    /// another CPU held it (`LockWait`), in the order they came; empty from a hypervisor
    /// that did not send them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub lock_waits: Vec<mtex_abi::report::LockWait>,
    /// The oracle's check of each CPU's share, by CPU (`crate::oracle_check`).
    pub cpu_oracle: Vec<(u32, crate::oracle_check::Check)>,
    /// A sampled phase (`mtex.sample`): its units and how it was sampled. Its `trace` is
    /// None: only estimates are made of it (`crate::model::report::sampled`).
    pub sampled: Option<Sampled>,
    /// A guarded phase (`mtex snippet`'s): the iterations its harness said it makes and
    /// those the hypervisor counted.
    pub iterations: Option<mtex_abi::report::PhaseIterations>,
    /// What the guest's own PMU counters of the MTE events counted in it, per CPU that
    /// traced it (`GuestPmuCounted`): empty where the guest did not program them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub guest_pmu: Vec<mtex_abi::report::GuestPmuCounted>,
}

/// A sampled phase's units, as traced, and the record of its schedule (None until its end).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Sampled {
    /// Every stretch traced, in order: the units, and the leads stepped before them.
    pub stretches: Vec<mtex_abi::report::SampleUnit>,
    /// The CPU that traced each stretch (`OnCpu`), stretch by stretch.
    pub stretch_cpus: Vec<u32>,
    pub how: Option<mtex_abi::report::PhaseSampled>,
    /// A window sampled on several CPUs: each CPU's share (`CpuSampled`), by CPU number.
    /// Empty for a phase sampled on one CPU.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub shares: Vec<mtex_abi::report::CpuSampled>,
    /// On an emulator: each CPU's share as the emulator counted its instructions (the
    /// `mtex-oracle` plugin's `shares=on`), which the shares' totals then rest on.
    #[serde(skip)]
    pub counted: Vec<mtex_abi::oracle::OracleShare>,
}

impl Sampled {
    /// The units: the sample.
    pub fn units(&self) -> impl Iterator<Item = &mtex_abi::report::SampleUnit> {
        self.stretches.iter().filter(|u| !u.lead)
    }

    /// The stretches CPU `cpu` traced, units and leads.
    pub fn stretches_on(&self, cpu: u32) -> impl Iterator<Item = &mtex_abi::report::SampleUnit> {
        self.stretches
            .iter()
            .zip(&self.stretch_cpus)
            .filter(move |(_, c)| **c == cpu)
            .map(|(u, _)| u)
    }
}

/// A run's untraced passes: what the PMU backend counted at full speed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Untraced {
    /// Passes the run's events needed.
    pub passes: u8,
    /// The passes that ran, in order.
    pub runs: Vec<UntracedPass>,
}

/// One untraced pass.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct UntracedPass {
    pub id: u32,
    pub begin_ts: u64,
    pub end_ts: Option<u64>,
    pub stats: Option<PhaseStats>,
    pub counts: Vec<PmuCount>,
    /// A pass of the TCO watch: its record and the sites it saw written.
    pub tco_watch: Option<TcoWatch>,
    pub tco_sites: Vec<TcoSite>,
}

/// What the TCO watch passes of a run saw together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcoTotal {
    /// MSR TCO executions at the watched sites, EL0 and EL1.
    pub writes_el0: u64,
    pub writes_el1: u64,
    /// Sites the scan found, and how many the passes watched.
    pub sites: u32,
    pub watched: u32,
    /// Sites never watched (past the scan's limits), and passes whose watch was lost (a
    /// watched site rewritten, or the sites moved since the first pass).
    pub unwatched: u32,
    pub lost: u32,
}

impl TcoTotal {
    /// Every site was watched to the end: the writes are the run's total.
    pub fn complete(&self) -> bool {
        self.watched == self.sites && self.unwatched == 0 && self.lost == 0
    }
}

impl Untraced {
    /// The figure of `event` at `el` (raw: named by the run), from whichever pass counted it.
    pub fn get(&self, event: u16, el: u8, raw: bool) -> Option<PmuValue> {
        self.runs
            .iter()
            .flat_map(|p| &p.counts)
            .find(|c| c.event == event && c.el == el && c.raw == raw)
            .map(|c| c.value)
    }

    /// What the run's TCO watch passes saw, if it had any.
    pub fn tco(&self) -> Option<TcoTotal> {
        let mut watches = self.runs.iter().filter_map(|p| p.tco_watch).peekable();
        let first = *watches.peek()?;
        let mut t = TcoTotal {
            writes_el0: 0,
            writes_el1: 0,
            sites: first.sites,
            watched: 0,
            unwatched: first.unwatched,
            lost: 0,
        };
        for w in watches {
            t.writes_el0 += w.writes_el0;
            t.writes_el1 += w.writes_el1;
            t.watched += w.watched;
            t.lost += (w.lost || w.moved) as u32;
        }
        Some(t)
    }

    /// Instructions at EL2, EL1, EL0 of the first pass (the hypervisor's fixed counters).
    pub fn instructions(&self) -> [Option<u64>; 3] {
        let s = self.runs.first().and_then(|p| p.stats);
        [
            s.and_then(|s| s.el2_instructions),
            s.and_then(|s| s.el1_instructions),
            s.and_then(|s| s.el0_instructions),
        ]
    }
}

impl Phase {
    /// What the PMU backend counted of `event` at `el` (1 kernel, 0 user) in the phase's run
    /// at full speed; None when it was never asked.
    pub fn pmu(&self, event: u16, el: u8) -> Option<PmuValue> {
        let u = self.untraced.as_ref()?;
        u.get(event, el, false).or_else(|| u.get(event, el, true))
    }
}

/// Everything one run reported.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Report {
    pub boot: Option<Boot>,
    pub phases: Vec<Phase>,
    pub writes: Vec<Write>,
    pub console: Vec<String>,
    pub unknown_calls: Vec<UnknownCall>,
    /// Snapshots of the records the guest took (`mtex-work results`), by sequence number.
    pub results_taken: Vec<(u32, mtex_abi::report::ResultsTaken)>,
    /// The stream is such a snapshot, whole: it ends with the snapshot's own record, after
    /// every record it counts, and has no Summary because the run went on.
    pub is_results_snapshot: bool,
    /// The guest's PSCI CPU_ON and CPU_OFF calls, with their answers.
    pub power_calls: Vec<mtex_abi::report::PowerCall>,
    /// For each of `power_calls`, how many phases had begun when it was made, and how many
    /// began in all (whether a phase ran after a refused call: `power`).
    #[serde(skip)]
    pub power_call_phases_begun: Vec<usize>,
    #[serde(skip)]
    pub phases_begun: usize,
    /// The guest's debug-register writes, kept in its shadow (never reaching the hardware).
    pub debug_writes: Vec<mtex_abi::report::DebugWrite>,
    /// How the step engine ran each traced phase (by phase id).
    pub engines: Vec<mtex_abi::report::StepEngine>,
    pub summary: Option<Summary>,
    /// Records that were damaged, missing or unexpected, and a missing summary.
    pub problems: Vec<String>,
    /// Damage that touched no record (bytes that were not UTF-8 in text outside records):
    /// shown, but the run still counts.
    pub notes: Vec<String>,
    /// Console text that was not a record (firmware, QEMU messages).
    pub other_output: Vec<String>,
}

impl Report {
    /// True when the guest ended the run on purpose, said it succeeded, and every record
    /// arrived intact.
    pub fn succeeded(&self) -> bool {
        self.problems.is_empty()
            && (self.summary.is_some_and(|s| s.exit.is_success()) || self.is_results_snapshot)
    }

    /// How the run ended, in words: its Summary's exit, or that the guest took these records
    /// while it went on.
    pub fn end(&self) -> String {
        match self.summary {
            Some(s) => describe_exit(&s.exit),
            None if self.is_results_snapshot => {
                "results taken by the guest (the run went on after them)".to_string()
            }
            None => "no summary record".to_string(),
        }
    }

    /// The phase with this name.
    pub fn phase(&self, name: &str) -> Option<&Phase> {
        self.phases.iter().find(|p| p.name == name)
    }

    fn phase_name(&self, id: u32) -> Option<String> {
        self.phases
            .iter()
            .rev()
            .find(|p| p.id == id)
            .map(|p| p.name.clone())
    }
}
