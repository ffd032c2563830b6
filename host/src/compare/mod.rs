//! `mtex compare A B`: what changed from A to B, per phase and counter — A, B, the delta and
//! the change in per cent, in the MTE threads' terms ("97.5% of the kernel-space tag-checked reads
//! are eliminated").
//!
//! A phase of A meets the phase of B with the same run name, phase name and occurrence (the
//! kernel scenario names a phase after its workload, so one run holds `getpid` once per
//! policy). The repeats of a run are samples of its counters: with two or more on both sides
//! the change is judged by Welch's t-test (p < 0.05), and marked as fastpath does, (I) for a
//! significant improvement and (R) for a significant regression — lower is better for every
//! counter mtex has (checked accesses, instructions, TCO writes, TFSR reads, barriers…).
//!
//! Counts under QEMU with `-icount` are exact: repeats are identical (sd 0), and then any
//! difference is significant by construction ("exact"). The test matters for what varies
//! between repeats — cycles, interrupts, anything measured on silicon. A side with a single
//! run has no spread to test against: its differences are shown, `(?)`, and never called an
//! improvement or a regression.
//!
//! Here: what a comparison is (its types) and how the phases of the two sides meet. The
//! command's arguments and input are `command`; the statistics that judge a change,
//! `significance`; the text and CSV, `render`. The statistics are apart so that the test
//! can be read and checked on its own, the rendering so that wording and layout change
//! without touching what is judged.

use crate::model::results::{PhaseOut, Results};
use crate::output::full::workload_label;
use crate::output::text::clean;
use std::collections::BTreeMap;

mod command;
mod functions;
mod render;
mod significance;

pub use command::{Args, By, Format, RESULTS_JSON, check_selection, load, run};
pub use functions::{FunctionCmp, by_function, render_functions_csv, render_functions_text};
pub use render::{HEADLINE, headline, render_csv, render_text};
pub use significance::{ALPHA, stats, welch};

use significance::judge;

/// Which runs and phases of a document take part.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Select {
    pub run: Option<String>,
    pub policy: Option<String>,
}

/// One side's samples of a counter, summarised.
#[derive(Clone, Debug, PartialEq)]
pub struct Stats {
    pub n: usize,
    pub mean: f64,
    /// Sample standard deviation (n − 1); 0 for a single sample.
    pub sd: f64,
    /// The mean's 95% confidence interval (Student's t, n − 1 degrees of freedom), n ≥ 2.
    pub ci95: Option<(f64, f64)>,
    /// The value, when every sample has it: shown and subtracted as an integer.
    pub exact: Option<u64>,
}

/// How the change was judged.
#[derive(Clone, Debug, PartialEq)]
pub enum Test {
    /// Two or more repeats on both sides, all identical on each: no noise to test against.
    Exact,
    /// Welch's unequal-variances t-test, two-sided.
    Welch { t: f64, df: f64, p: f64 },
    /// No test: fewer than two samples on a side (or a spread past f64's range).
    Untested,
    /// A sampled phase's estimate on a side: a change only where the two 95% intervals are
    /// disjoint (an exact count is an interval of one point); an overlap is never one.
    Intervals,
}

/// The change from A to B.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// B lower, significantly (or exactly, from identical repeats).
    Improvement,
    Regression,
    Unchanged,
    /// B differs from A with a single run on a side: no spread to test it against, so it is
    /// shown, `(?)`, and counted apart, never as an improvement or a regression.
    Changed,
    /// The counter is on one side only.
    OnlyA,
    OnlyB,
    /// The counter describes the instrument's own work (exits, the step engine, the
    /// hypervisor's instructions), not the guest: listed apart, never a mark.
    Instrument,
}

/// One counter of one phase.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub counter: String,
    pub a: Option<Stats>,
    pub b: Option<Stats>,
    pub test: Test,
    pub verdict: Verdict,
}

/// One phase met on both sides.
#[derive(Clone, Debug, PartialEq)]
pub struct PhaseCmp {
    /// The run's name (empty when both sides selected a run by name).
    pub run: String,
    pub phase: String,
    /// 0-based: which of the run's phases of that name.
    pub occurrence: usize,
    /// `futex-hash i=32 s=16 t=16 tcf0=sync`, or the phase's name.
    pub label: String,
    pub policy_a: Option<String>,
    pub policy_b: Option<String>,
    pub rows: Vec<Row>,
}

/// The whole comparison.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Comparison {
    pub phases: Vec<PhaseCmp>,
    /// Phases found on one side only, described.
    pub only_a: Vec<String>,
    pub only_b: Vec<String>,
}

/// The counts of the summary line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    pub results: usize,
    pub improvements: usize,
    pub regressions: usize,
    pub unchanged: usize,
    /// Differences from single runs, untested (among `results`).
    pub changed: usize,
    /// Counters on one side only (not among `results`).
    pub one_sided: usize,
    /// Counters of the instrument's own work (not among `results`).
    pub instrument: usize,
    /// How the marks were judged.
    pub exact: usize,
    pub welch: usize,
    pub intervals: usize,
}

/// A side's phases gathered by (run, phase name, occurrence): the samples of each counter
/// across the run's repeats, in the order first seen.
struct Side<'a> {
    keys: Vec<(String, String, usize)>,
    phases: BTreeMap<(String, String, usize), Gathered<'a>>,
}

struct Gathered<'a> {
    first: &'a PhaseOut,
    /// The phase in each repeat, in order.
    all: Vec<&'a PhaseOut>,
    counters: BTreeMap<&'a str, Vec<u64>>,
    /// A sampled phase's estimates (its first repeat's: each is a whole run's).
    estimates: BTreeMap<&'a str, crate::model::results::EstimateOut>,
}

fn gather<'a>(doc: &'a Results, sel: &Select, keep_run_name: bool) -> Side<'a> {
    let mut side = Side {
        keys: Vec::new(),
        phases: BTreeMap::new(),
    };
    for run in &doc.runs {
        if sel.run.as_ref().is_some_and(|r| *r != run.name) {
            continue;
        }
        let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
        for p in &run.phases {
            if sel.policy.is_some() && p.policy != sel.policy {
                continue;
            }
            let n = seen.entry(&p.name).or_default();
            let key = (
                if keep_run_name {
                    run.name.clone()
                } else {
                    String::new()
                },
                p.name.clone(),
                *n,
            );
            *n += 1;
            let g = side.phases.entry(key.clone()).or_insert_with(|| {
                side.keys.push(key);
                Gathered {
                    first: p,
                    all: Vec::new(),
                    counters: BTreeMap::new(),
                    estimates: BTreeMap::new(),
                }
            });
            g.all.push(p);
            for (c, &v) in &p.counters {
                g.counters.entry(c).or_default().push(v);
            }
            for (c, &e) in &p.estimates {
                g.estimates.entry(c).or_insert(e);
            }
        }
    }
    side
}

/// `getpid #2 (run baseline)`: a phase found on one side only (the second of its name in
/// run `baseline`).
fn describe_key((run, phase, occurrence): &(String, String, usize)) -> String {
    let mut s = clean(phase).into_owned();
    if *occurrence > 0 {
        s.push_str(&format!(" #{}", occurrence + 1));
    }
    // `run` is a plain `mtex run`'s name: worth no words.
    if !run.is_empty() && run != "run" {
        s.push_str(&format!(" (run {})", clean(run)));
    }
    s
}

/// Compares the phases `sa` selects in `a` with those `sb` selects in `b`.
pub fn compare(a: &Results, sa: &Select, b: &Results, sb: &Select) -> Comparison {
    // Runs of different names meet only when both sides chose theirs.
    let keep_run_name = sa.run.is_none() || sb.run.is_none();
    let ga = gather(a, sa, keep_run_name);
    let gb = gather(b, sb, keep_run_name);
    let mut c = Comparison::default();
    for key in &ga.keys {
        let pa = &ga.phases[key];
        let Some(pb) = gb.phases.get(key) else {
            c.only_a.push(describe_key(key));
            continue;
        };
        let mut names: Vec<&str> = pa.counters.keys().copied().collect();
        names.extend(pa.estimates.keys().copied());
        names.extend(pb.counters.keys().copied());
        names.extend(pb.estimates.keys().copied());
        names.sort_unstable();
        names.dedup();
        let rows = names
            .into_iter()
            .map(|name| {
                let (ea, eb) = (pa.estimates.get(name), pb.estimates.get(name));
                let (sa, sb, (test, verdict)) = if ea.is_some() || eb.is_some() {
                    let side = |e: Option<&crate::model::results::EstimateOut>, g: &Gathered| {
                        e.map(significance::estimate_stats)
                            .or_else(|| g.counters.get(name).and_then(|s| stats(s)))
                    };
                    let (sa, sb) = (side(ea, pa), side(eb, pb));
                    let judged = significance::judge_intervals(&sa, &sb);
                    (sa, sb, judged)
                } else {
                    let sa = pa.counters.get(name).and_then(|s| stats(s));
                    let sb = pb.counters.get(name).and_then(|s| stats(s));
                    let judged = judge(&sa, &sb);
                    (sa, sb, judged)
                };
                // Only what describes the guest is judged; how the instrument worked
                // (`mtex_abi::counters::Describes`) is shown apart.
                let verdict = if mtex_abi::counters::describes_guest(name) {
                    verdict
                } else {
                    Verdict::Instrument
                };
                Row {
                    counter: name.to_string(),
                    a: sa,
                    b: sb,
                    test,
                    verdict,
                }
            })
            .collect();
        c.phases.push(PhaseCmp {
            run: key.0.clone(),
            phase: key.1.clone(),
            occurrence: key.2,
            label: workload_label(pa.first).unwrap_or_else(|| clean(&key.1).into_owned()),
            policy_a: pa.first.policy.clone(),
            policy_b: pb.first.policy.clone(),
            rows,
        });
    }
    for key in &gb.keys {
        if !ga.phases.contains_key(key) {
            c.only_b.push(describe_key(key));
        }
    }
    c
}

impl Comparison {
    /// The counts of the summary line.
    pub fn summary(&self) -> Summary {
        let mut s = Summary::default();
        for r in self.phases.iter().flat_map(|p| &p.rows) {
            match r.verdict {
                Verdict::OnlyA | Verdict::OnlyB => {
                    s.one_sided += 1;
                    continue;
                }
                Verdict::Instrument => {
                    s.instrument += 1;
                    continue;
                }
                Verdict::Improvement => s.improvements += 1,
                Verdict::Regression => s.regressions += 1,
                Verdict::Unchanged => s.unchanged += 1,
                Verdict::Changed => s.changed += 1,
            }
            s.results += 1;
            if matches!(r.verdict, Verdict::Improvement | Verdict::Regression) {
                match r.test {
                    Test::Exact => s.exact += 1,
                    Test::Welch { .. } => s.welch += 1,
                    Test::Untested => {}
                    Test::Intervals => s.intervals += 1,
                }
            }
        }
        s
    }
}
