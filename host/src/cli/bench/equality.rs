//! The proof that the optimised paths count what the reference path counts: the
//! same guest program booted with `mtex.step=plain` (every exit through the full path, every
//! traced instruction stepped) and with the fast paths, compared phase by phase, field by
//! field. Used by `cargo mtex bench` (its verdict) and by `host/tests/qemu/equality.rs`.

use crate::model::report::{Phase, Report, Write};
use serde::Serialize;
use serde_json::Value;

/// A way of running traced phases: its command-line options.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mode {
    pub opts: &'static str,
    /// Every traced instruction is single-stepped (no breakpoint runs). Only then are the
    /// PMU's guest instruction counts comparable with the reference path's: QEMU's PMU counts
    /// one EL1 instruction more per exception entry taken while a step is pending (a kernel
    /// entry inside a breakpoint run has none), and the branches the hypervisor executes for
    /// the guest at the end of a run are in the trace's count, never in the PMU's. (Each run
    /// still holds its PMU to its trace: the report lists any mismatch as a problem.)
    pub steps_every_instruction: bool,
}

/// The reference path.
pub const PLAIN: Mode = Mode {
    opts: "mtex.step=plain",
    steps_every_instruction: true,
};
/// The step fast path, every instruction stepped.
pub const FAST: Mode = Mode {
    opts: "mtex.step=fast mtex.runs=0",
    steps_every_instruction: true,
};
/// The fast paths with breakpoint runs.
pub const FAST_RUNS: Mode = Mode {
    opts: "mtex.step=fast mtex.runs=1",
    steps_every_instruction: false,
};
/// Every way of stepping, the reference first. Both `mtex.runs` settings are given
/// explicitly, so both are covered whichever is the default.
pub const MODES: [Mode; 3] = [PLAIN, FAST, FAST_RUNS];

/// The default kernel matrix (every policy × every workload), as `mtex run --guest kernel`
/// boots it.
pub const KERNEL: &str = "mtex.guest=kernel mtex.watchdog_ms=600000";

/// The programs whose traced phases the equality is checked on: (name, command line).
pub const PROGRAMS: [(&str, &str); 12] = [
    ("trace", "mtex.guest=trace"),
    ("controls", "mtex.guest=controls"),
    ("el0", "mtex.guest=el0 mtex.bench_n=64"),
    ("differential", "mtex.guest=differential"),
    ("kernel", KERNEL),
    ("hostile-patch", "mtex.guest=hostile-patch"),
    ("hostile-remap", "mtex.guest=hostile-remap"),
    ("hostile-vector", "mtex.guest=hostile-vector"),
    ("hostile-exclusive", "mtex.guest=hostile-exclusive"),
    ("hostile-debug", "mtex.guest=hostile-debug"),
    ("hostile-cpu", "mtex.guest=hostile-cpu"),
    ("addresses", "mtex.guest=addresses"),
];

/// Programs compared only in some modes, and why: where the way of stepping changes what the
/// guest itself does, its counts differ by design, and the modes that differ are not
/// evidence either way (`hostile.rs` checks each mode's counts against the program's own
/// arithmetic instead).
pub const RESTRICTED: [(&str, &[Mode], &str); 1] = [(
    "hostile-exclusive",
    &[PLAIN, FAST],
    "a breakpoint run carries each LDXR/STXR pair unstepped, so its store-exclusives \
     succeed, while every step's exception return clears the monitor and makes them fail",
)];

/// The modes `program` is compared in (the first is the reference), and why it is not
/// compared in the others.
pub fn modes_of(program: &str) -> (&'static [Mode], Option<&'static str>) {
    RESTRICTED
        .iter()
        .find(|(name, _, _)| *name == program)
        .map_or((&MODES, None), |(_, modes, why)| (*modes, Some(*why)))
}

/// Trace counts only the fast paths use (how many breakpoint runs, how many were lost):
/// left out of the comparison. A lost run is a problem of its own (the counts are short).
const FAST_ONLY: [&str; 2] = ["runs", "runs_lost"];

/// The outcome of comparing one run against the reference run of the same program.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Comparison {
    /// Phases compared (present in both runs).
    pub phases: usize,
    /// One line per difference found: for each phase the first differing field (and how many
    /// more), then anything outside the phases (trapped writes, phase lists). Empty: equal.
    pub differences: Vec<String>,
}

impl Comparison {
    pub fn equal(&self) -> bool {
        self.differences.is_empty()
    }
}

/// Leaf values of `v` by dotted path (`architectural.rd_k`), in the order of the paths.
fn leaves(prefix: &str, v: &Value, out: &mut Vec<(String, Value)>) {
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                let path = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                leaves(&path, v, out);
            }
        }
        _ => out.push((prefix.to_string(), v.clone())),
    }
}

fn fields<T: Serialize>(prefix: &str, t: &T) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    leaves(
        prefix,
        &serde_json::to_value(t).expect("counts serialize"),
        &mut out,
    );
    out
}

/// Everything of a phase that must not depend on how it was stepped, by field: the trace
/// counts (but the fast paths' own), the PMU's guest instruction counts (with `pmu`), the
/// guest's counts the hypervisor took (trapped writes, emulated instructions), and where
/// TCO was written how often.
fn phase_fields(p: &Phase, pmu: bool) -> Vec<(String, Value)> {
    let mut out = fields("params", &p.params);
    match &p.trace {
        Some(t) => out.extend(
            fields("trace", t)
                .into_iter()
                .filter(|(k, _)| !FAST_ONLY.iter().any(|f| k == &format!("trace.{f}"))),
        ),
        None => out.push(("trace".into(), Value::Null)),
    }
    if let Some(s) = &p.stats {
        if pmu {
            out.extend(fields("pmu.el1_instructions", &s.el1_instructions));
            out.extend(fields("pmu.el0_instructions", &s.el0_instructions));
        }
        out.extend(fields("stats.sysreg_writes", &s.sysreg_writes));
        out.extend(fields("stats.emulated", &s.emulated));
    } else {
        out.push(("stats".into(), Value::Null));
    }
    // The sites as a set: their order is the order the engine met them in, which a
    // breakpoint run that plans past a site may change; the count at each is the figure.
    let mut sites: Vec<_> = p
        .tco_sites
        .iter()
        .map(|t| (t.pc, t.value, t.count))
        .collect();
    sites.sort_unstable();
    out.extend(fields("tco_sites", &sites));
    out
}

/// A trapped write as the guest made it (its timestamp and record number are the
/// hypervisor's, which may differ).
fn write_key(w: &Write) -> impl PartialEq + std::fmt::Debug + '_ {
    (w.register, w.old, w.new, &w.changes, w.at, &w.phase)
}

/// Compares `other`, run in `mode`, against `reference` (run in [`PLAIN`]), phase by phase
/// and field by field.
pub fn compare(reference: &Report, other: &Report, mode: Mode) -> Comparison {
    let pmu = mode.steps_every_instruction;
    let mut c = Comparison::default();
    if reference.phases.len() != other.phases.len() {
        c.differences.push(format!(
            "{} phases in the reference run, {} in this one",
            reference.phases.len(),
            other.phases.len()
        ));
    }
    for (a, b) in reference.phases.iter().zip(&other.phases) {
        c.phases += 1;
        let name = format!("phase {} ({})", a.id, a.name);
        if a.name != b.name {
            c.differences
                .push(format!("{name}: named {:?} in this run", b.name));
            continue;
        }
        let (fa, fb) = (phase_fields(a, pmu), phase_fields(b, pmu));
        let mut diff = fa
            .iter()
            .zip(&fb)
            .filter(|(x, y)| x != y)
            .map(|((k, va), (kb, vb))| {
                if k == kb {
                    format!("{k} = {va} (plain) vs {vb}")
                } else {
                    format!("{k} = {va} (plain) vs {kb} = {vb}")
                }
            });
        if let Some(first) = diff.next() {
            let more = diff.count() + fa.len().abs_diff(fb.len());
            let more = match more {
                0 => String::new(),
                n => format!(" (and {n} more fields)"),
            };
            c.differences.push(format!("{name}: {first}{more}"));
        } else if fa.len() != fb.len() {
            c.differences
                .push(format!("{name}: {} fields vs {}", fa.len(), fb.len()));
        }
    }
    let (wa, wb) = (&reference.writes, &other.writes);
    if let Some(i) =
        (0..wa.len().max(wb.len())).find(|&i| wa.get(i).map(write_key) != wb.get(i).map(write_key))
    {
        c.differences.push(format!(
            "trapped write {i} of {} (plain) / {}: {:?} (plain) vs {:?}",
            wa.len(),
            wb.len(),
            wa.get(i).map(write_key),
            wb.get(i).map(write_key)
        ));
    }
    c
}

/// What makes a run unusable as evidence: it did not succeed, or lost breakpoint runs.
pub fn run_problems(r: &Report) -> Vec<String> {
    let mut out: Vec<String> = r.problems.clone();
    if !r.succeeded() {
        out.push(format!(
            "the run did not succeed (ended {:?})",
            r.summary.map(|s| s.exit)
        ));
    }
    for p in &r.phases {
        if let Some(t) = p.trace.filter(|t| t.runs_lost > 0) {
            out.push(format!(
                "phase {} ({}): {} breakpoint runs lost",
                p.id, p.name, t.runs_lost
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::report::Phase;
    use mtex_abi::report::{GuestState, PhaseStats};
    use mtex_trace::counts::TraceCounts;

    fn phase(id: u32, t: TraceCounts, el1: u64) -> Phase {
        let at = GuestState {
            pc: 0,
            el: 1,
            tco: false,
        };
        Phase {
            id,
            name: format!("p{id}"),
            params: None,
            begin_ts: 0,
            begin: at,
            end_ts: Some(1),
            end: Some(at),
            stats: Some(PhaseStats {
                el1_instructions: Some(el1),
                el2_instructions: Some(id as u64 * 1000),
                step_exits: 7,
                ..PhaseStats::default()
            }),
            trace: Some(t),
            ..Phase::default()
        }
    }

    fn report(phases: Vec<Phase>) -> Report {
        Report {
            phases,
            ..Report::default()
        }
    }

    #[test]
    fn runs_and_hypervisor_costs_are_not_compared_everything_else_is() {
        let t = TraceCounts {
            instructions_el1: 10,
            ..TraceCounts::default()
        };
        let a = report(vec![phase(1, t, 10), phase(2, t, 10)]);
        let mut b = a.clone();
        let bt = b.phases[0].trace.as_mut().unwrap();
        bt.runs = 3;
        bt.runs_lost = 1;
        let bs = b.phases[1].stats.as_mut().unwrap();
        bs.el2_instructions = Some(5);
        bs.step_exits = 1;
        let c = compare(&a, &b, FAST);
        assert!(c.equal(), "{:?}", c.differences);
        assert_eq!(c.phases, 2);
        b.phases[1].trace.as_mut().unwrap().architectural.wr_k = 1;
        b.phases[1].trace.as_mut().unwrap().dsb = 1;
        b.phases[0].stats.as_mut().unwrap().el1_instructions = Some(11);
        // With breakpoint runs the PMU's counts differ from the reference path's.
        assert_eq!(compare(&a, &b, FAST_RUNS).differences.len(), 1);
        let c = compare(&a, &b, FAST);
        assert_eq!(
            c.differences,
            [
                "phase 1 (p1): pmu.el1_instructions = 10 (plain) vs 11",
                "phase 2 (p2): trace.architectural.wr_k = 0 (plain) vs 1 (and 1 more fields)",
            ]
        );
    }

    #[test]
    fn a_missing_phase_is_a_difference() {
        let t = TraceCounts::default();
        let a = report(vec![phase(1, t, 0), phase(2, t, 0)]);
        let b = report(vec![phase(1, t, 0)]);
        let c = compare(&a, &b, FAST);
        assert_eq!(c.phases, 1);
        assert_eq!(
            c.differences,
            ["2 phases in the reference run, 1 in this one"]
        );
    }
}
