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
//! run has no spread to test against: its differences are marked, as untested.

use crate::csv_out::field;
use crate::perf_text::{
    Lines, WIDTH, clean, signed_thousands, thousands, thousands_f64, workload_label,
};
use crate::results::{PhaseOut, Results};
use anyhow::Context as _;
use statrs::distribution::{ContinuousCDF, StudentsT};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The significance level of the marks.
pub const ALPHA: f64 = 0.05;

/// The counter the per-phase sentence is about: the MTE threads' kernel-space tag-checked reads.
pub const HEADLINE: &str = "mem_access_checked_rd:k";

/// Shown in the text even when unchanged: the checked accesses in both views.
const ALWAYS_SHOWN: [&str; 8] = [
    "mem_access_checked_rd:k",
    "mem_access_checked_wr:k",
    "mem_access_checked_rd:u",
    "mem_access_checked_wr:u",
    "tcf_elided.mem_access_checked_rd:k",
    "tcf_elided.mem_access_checked_wr:k",
    "tcf_elided.mem_access_checked_rd:u",
    "tcf_elided.mem_access_checked_wr:u",
];

/// Its command-line arguments.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The baseline: a results directory (holding report.json, or for `mtex linux` results.json)
    /// or such a file.
    pub a: PathBuf,
    /// What is compared with it, the same way.
    pub b: PathBuf,
    /// Output: text (100 columns) or CSV (one row per phase and counter, every counter).
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
    /// Only A's runs of this name; with --b-run too, the two meet whatever their names.
    #[arg(long, value_name = "RUN")]
    pub a_run: Option<String>,
    /// Only B's runs of this name.
    #[arg(long, value_name = "RUN")]
    pub b_run: Option<String>,
    /// Only A's phases under this policy: `mtex compare r.json r.json --a-policy entry-tco
    /// --b-policy tcma1` compares two policies of one run.
    #[arg(long, value_name = "POLICY")]
    pub a_policy: Option<String>,
    /// Only B's phases under this policy.
    #[arg(long, value_name = "POLICY")]
    pub b_policy: Option<String>,
    /// List unchanged counters too (the text lists the changed ones and the checked accesses).
    #[arg(long)]
    pub all: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    Csv,
}

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
}

/// The change from A to B.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// B lower, significantly (or exactly, or untested from single runs).
    Improvement,
    Regression,
    Unchanged,
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
    /// Counters on one side only (not among `results`).
    pub one_sided: usize,
    /// Counters of the instrument's own work (not among `results`).
    pub instrument: usize,
    /// How the marks were judged.
    pub exact: usize,
    pub welch: usize,
    pub untested: usize,
}

/// The results document of a directory whose report.json is another report (`mtex linux`).
pub const RESULTS_JSON: &str = "results.json";

/// Reads a document: for a directory its `results.json` (`mtex linux` writes its windows
/// there, its report.json being Linux mode's own report) or else its `report.json`; else the
/// file itself.
pub fn load(path: &Path) -> anyhow::Result<Results> {
    let file = if path.is_dir() {
        Some(path.join(RESULTS_JSON))
            .filter(|f| f.exists())
            .unwrap_or_else(|| path.join("report.json"))
    } else {
        path.to_path_buf()
    };
    let text = crate::input::read_text(&file, "results document", crate::input::DOCUMENT_LIMIT)?;
    Results::from_json(&text).with_context(|| format!("reading {}", file.display()))
}

/// A selection must name a run, and a policy of the runs selected, that the document has:
/// selecting nothing would compare nothing and look like "no change".
pub fn check_selection(
    doc: &Results,
    run_option: &str,
    policy_option: &str,
    run: &Option<String>,
    policy: &Option<String>,
) -> anyhow::Result<()> {
    let names = |list: Vec<&str>| {
        let mut list: Vec<String> = list.iter().map(|n| format!("{n:?}")).collect();
        list.sort();
        list.dedup();
        if list.is_empty() {
            "none".to_string()
        } else {
            list.join(", ")
        }
    };
    if let Some(r) = run
        && !doc.runs.iter().any(|x| x.name == *r)
    {
        anyhow::bail!(
            "{run_option} {r:?}: no run of that name (the document's runs: {})",
            names(doc.runs.iter().map(|x| x.name.as_str()).collect())
        );
    }
    let selected = || {
        doc.runs
            .iter()
            .filter(|x| run.as_ref().is_none_or(|r| *r == x.name))
    };
    if let Some(p) = policy
        && !selected().any(|x| x.phases.iter().any(|ph| ph.policy.as_ref() == Some(p)))
    {
        anyhow::bail!(
            "{policy_option} {p:?}: no phase under that policy{} (its policies: {})",
            run.as_ref()
                .map_or(String::new(), |r| format!(" in run {r:?}")),
            names(
                selected()
                    .flat_map(|x| x.phases.iter().filter_map(|ph| ph.policy.as_deref()))
                    .collect()
            )
        );
    }
    Ok(())
}

/// Mean, standard deviation and confidence interval of `samples`; None for no sample.
pub fn stats(samples: &[u64]) -> Option<Stats> {
    let n = samples.len();
    let first = *samples.first()?;
    let exact = samples.iter().all(|&s| s == first).then_some(first);
    let xs: Vec<f64> = samples.iter().map(|&s| s as f64).collect();
    let mean = xs.iter().sum::<f64>() / n as f64;
    let sd = if n < 2 || exact.is_some() {
        0.0
    } else {
        (xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
    };
    let ci95 = (n >= 2)
        .then(|| {
            let t = StudentsT::new(0.0, 1.0, (n - 1) as f64).ok()?;
            let half = t.inverse_cdf(0.975) * sd / (n as f64).sqrt();
            half.is_finite().then_some((mean - half, mean + half))
        })
        .flatten();
    Some(Stats {
        n,
        mean,
        sd,
        ci95,
        exact,
    })
}

/// Welch's t-test of B against A: t (positive when B's mean is higher), the
/// Welch–Satterthwaite degrees of freedom and the two-sided p-value. None with fewer than two
/// samples on a side, no spread on either, or figures past f64's range.
pub fn welch(a: &Stats, b: &Stats) -> Option<(f64, f64, f64)> {
    if a.n < 2 || b.n < 2 {
        return None;
    }
    let (va, vb) = (a.sd.powi(2) / a.n as f64, b.sd.powi(2) / b.n as f64);
    let se2 = va + vb;
    if se2 <= 0.0 {
        return None;
    }
    let t = (b.mean - a.mean) / se2.sqrt();
    let df = se2.powi(2) / (va.powi(2) / (a.n - 1) as f64 + vb.powi(2) / (b.n - 1) as f64);
    // statrs panics on a NaN argument: only finite figures reach it.
    if !t.is_finite() || !df.is_finite() || df <= 0.0 {
        return None;
    }
    let p = 2.0 * StudentsT::new(0.0, 1.0, df).ok()?.sf(t.abs());
    Some((t, df, p.min(1.0)))
}

/// Judges one counter: how, and what changed.
fn judge(a: &Option<Stats>, b: &Option<Stats>) -> (Test, Verdict) {
    let (a, b) = match (a, b) {
        (Some(a), Some(b)) => (a, b),
        (Some(_), None) => return (Test::Untested, Verdict::OnlyA),
        _ => return (Test::Untested, Verdict::OnlyB),
    };
    let exact_both = a.n >= 2 && b.n >= 2 && a.exact.is_some() && b.exact.is_some();
    let test = if exact_both {
        Test::Exact
    } else {
        match welch(a, b) {
            Some((t, df, p)) => Test::Welch { t, df, p },
            None => Test::Untested,
        }
    };
    // Integers when both sides are exact, so that 2^53 + 1 against 2^53 is still a change.
    let order = match (a.exact, b.exact) {
        (Some(x), Some(y)) => y.cmp(&x),
        _ => b
            .mean
            .partial_cmp(&a.mean)
            .unwrap_or(std::cmp::Ordering::Equal),
    };
    // Exact: no noise, any difference is real. Untested: a single run has no spread to judge
    // by, so its difference is marked all the same, and the summary counts such marks apart.
    let significant = match test {
        Test::Welch { p, .. } => p < ALPHA,
        Test::Exact | Test::Untested => true,
    };
    let verdict = match order {
        std::cmp::Ordering::Less if significant => Verdict::Improvement,
        std::cmp::Ordering::Greater if significant => Verdict::Regression,
        _ => Verdict::Unchanged,
    };
    (test, verdict)
}

/// A side's phases gathered by (run, phase name, occurrence): the samples of each counter
/// across the run's repeats, in the order first seen.
struct Side<'a> {
    keys: Vec<(String, String, usize)>,
    phases: BTreeMap<(String, String, usize), Gathered<'a>>,
}

struct Gathered<'a> {
    first: &'a PhaseOut,
    counters: BTreeMap<&'a str, Vec<u64>>,
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
                    counters: BTreeMap::new(),
                }
            });
            for (c, &v) in &p.counters {
                g.counters.entry(c).or_default().push(v);
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
        names.extend(pb.counters.keys().filter(|k| !pa.counters.contains_key(*k)));
        names.sort_unstable();
        let rows = names
            .into_iter()
            .map(|name| {
                let sa = pa.counters.get(name).and_then(|s| stats(s));
                let sb = pb.counters.get(name).and_then(|s| stats(s));
                let (test, verdict) = judge(&sa, &sb);
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
            }
            s.results += 1;
            if matches!(r.verdict, Verdict::Improvement | Verdict::Regression) {
                match r.test {
                    Test::Exact => s.exact += 1,
                    Test::Welch { .. } => s.welch += 1,
                    Test::Untested => s.untested += 1,
                }
            }
        }
        s
    }
}

/// `1 improvement`, `2 improvements`.
fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

impl Summary {
    /// `N results: W improvements, R regressions, T unchanged`.
    pub fn line(&self) -> String {
        let mut s = format!(
            "{}: {}, {}, {} unchanged",
            plural(self.results, "result", "results"),
            plural(self.improvements, "improvement", "improvements"),
            plural(self.regressions, "regression", "regressions"),
            self.unchanged
        );
        if self.one_sided > 0 {
            s.push_str(&format!(
                "; {} on one side only",
                plural(self.one_sided, "counter", "counters")
            ));
        }
        if self.instrument > 0 {
            s.push_str(&format!(
                "; {} of the instrument's own work, not judged",
                plural(self.instrument, "counter", "counters")
            ));
        }
        s
    }
}

/// A side's value: the integer when every sample has it, else the mean to one decimal.
fn value(s: &Option<Stats>) -> String {
    match s {
        None => "-".into(),
        Some(Stats { exact: Some(v), .. }) => thousands(*v),
        Some(s) => thousands_f64(s.mean, 1),
    }
}

/// B − A: an integer when both sides are exact.
fn delta(a: &Stats, b: &Stats) -> String {
    match (a.exact, b.exact) {
        (Some(x), Some(y)) => signed_thousands(i128::from(y) - i128::from(x)),
        _ => {
            let d = b.mean - a.mean;
            let s = thousands_f64(d, 1);
            if d > 0.0 { format!("+{s}") } else { s }
        }
    }
}

/// The change in per cent, as perf prints it (`-97.5%`); `n/a` from zero.
fn pct(a: &Stats, b: &Stats) -> String {
    match percent(a, b) {
        Some(p) => format!("{p:+.1}%"),
        None if b.mean == 0.0 => "+0.0%".into(),
        None => "n/a".into(),
    }
}

fn percent(a: &Stats, b: &Stats) -> Option<f64> {
    let p = (b.mean - a.mean) * 100.0 / a.mean;
    (a.mean != 0.0 && p.is_finite()).then_some(p)
}

fn mark(v: Verdict) -> &'static str {
    match v {
        Verdict::Improvement => "(I)",
        Verdict::Regression => "(R)",
        _ => "",
    }
}

/// `p 0.0004`, `p < 1e-9`.
fn p_text(p: f64) -> String {
    if p < 1e-9 {
        "p < 1e-9".into()
    } else if p < 0.001 {
        format!("p {p:.1e}")
    } else {
        format!("p {p:.3}")
    }
}

/// The statistics line under a row: `95% CI ± 2.5 / ± 2.5, sd 1.0 / 1.0, n 3 / 3: Welch p
/// 3.9e-4` (A / B), or `n 3 / 3: exact (sd 0)`.
fn spread(a: &Stats, b: &Stats, test: &Test) -> String {
    let n = format!("n {} / {}", a.n, b.n);
    match test {
        Test::Exact => format!("{n}: exact (sd 0)"),
        Test::Welch { p, .. } => {
            let half = |s: &Stats| {
                s.ci95.map_or("-".into(), |(lo, hi)| {
                    format!("± {}", thousands_f64((hi - lo) / 2.0, 1))
                })
            };
            format!(
                "95% CI {} / {}, sd {} / {}, {n}: Welch {}",
                half(a),
                half(b),
                thousands_f64(a.sd, 1),
                thousands_f64(b.sd, 1),
                p_text(*p)
            )
        }
        Test::Untested if a.n < 2 || b.n < 2 => format!("{n}: untested (a single run on a side)"),
        Test::Untested => format!("{n}: untested (figures past f64's range)"),
    }
}

/// The phase's sentence in the MTE threads' terms, about [`HEADLINE`]: `futex-hash: 97.5% of the
/// kernel-space tag-checked reads (mem_access_checked_rd:k) are eliminated (1,272 → 32)`.
pub fn headline(p: &PhaseCmp) -> Option<String> {
    headline_parts(p).map(|(s, figures)| format!("{s} ({figures})"))
}

/// The sentence and its figures apart, so that the text can put the figures on a line of
/// their own rather than break them.
fn headline_parts(p: &PhaseCmp) -> Option<(String, String)> {
    let r = p.rows.iter().find(|r| r.counter == HEADLINE)?;
    let (a, b) = (r.a.as_ref()?, r.b.as_ref()?);
    let what = format!("the kernel-space tag-checked reads ({HEADLINE})");
    let mut figures = format!("{} → {}", value(&r.a), value(&r.b));
    if let Test::Welch { p, .. } = r.test {
        figures.push_str(&format!(", {}", p_text(p)));
    }
    let name = clean(&p.phase);
    let sentence = match r.verdict {
        Verdict::Improvement => match percent(a, b) {
            Some(pc) => format!("{name}: {:.1}% of {what} are eliminated", -pc),
            None => format!("{name}: {what} fall"),
        },
        Verdict::Regression => match percent(a, b) {
            Some(pc) => format!("{name}: {what} rise by {pc:.1}%"),
            None => format!("{name}: {what} appear"),
        },
        _ if a.mean == b.mean => {
            return Some((format!("{name}: {what} are unchanged"), value(&r.a)));
        }
        _ => format!("{name}: no significant change in {what}"),
    };
    Some((sentence, figures))
}

/// `policy entry-tco → tcma1`, `policy tcma1`, or nothing.
fn policies(p: &PhaseCmp) -> String {
    match (&p.policy_a, &p.policy_b) {
        (Some(a), Some(b)) if a == b => format!(" under {}", clean(a)),
        (a, b) => {
            let name = |x: &Option<String>| {
                x.as_deref()
                    .map_or("-".to_string(), |s| clean(s).into_owned())
            };
            if a.is_none() && b.is_none() {
                String::new()
            } else {
                format!(" under {} → {}", name(a), name(b))
            }
        }
    }
}

/// The comparison as text, every line at most 100 columns. `all`: unchanged counters too.
pub fn render_text(c: &Comparison, all: bool) -> String {
    let mut out = Lines::default();
    out.push("(I) B significantly lower (better), (R) B significantly higher (worse), for every");
    out.push(
        "counter here. Counts on QEMU under -icount repeat exactly (sd 0): any difference between",
    );
    out.push("such repeats is real. What varies between repeats (cycles on silicon) is judged by");
    out.push("Welch's t-test, p < 0.05; a single run on a side gives untested marks.");
    for p in &c.phases {
        out.blank();
        // `run` is a plain `mtex run`'s name: worth no words.
        let run = if p.run.is_empty() || p.run == "run" {
            String::new()
        } else {
            format!(", run {}", clean(&p.run))
        };
        let nth = if p.occurrence > 0 {
            format!(" (#{})", p.occurrence + 1)
        } else {
            String::new()
        };
        out.push(&format!("{}{nth}{}{run}", p.label, policies(p)));
        if let Some((sentence, figures)) = headline_parts(p) {
            let line = format!("  {sentence} ({figures})");
            if line.chars().count() <= WIDTH {
                out.push(&line);
            } else {
                out.push(&format!("  {sentence}"));
                out.push(&format!("      ({figures})"));
            }
        }
        out.blank();
        out.push(&format!(
            "  {:<37} {:>13} {:>13} {:>12} {:>8}",
            "counter", "A", "B", "delta", "change"
        ));
        let mut hidden = 0;
        let (guest, instrument): (Vec<&Row>, Vec<&Row>) = p
            .rows
            .iter()
            .partition(|r| r.verdict != Verdict::Instrument);
        let changed = |r: &Row| {
            r.a.as_ref()
                .zip(r.b.as_ref())
                .is_none_or(|(a, b)| a.mean != b.mean)
        };
        let instrument_shown: Vec<&Row> = instrument
            .into_iter()
            .filter(|r| all || changed(r))
            .collect();
        let heading = instrument_shown.first().map(|r| &r.counter);
        for r in guest.into_iter().chain(instrument_shown.iter().copied()) {
            if heading == Some(&r.counter) {
                out.push("  the instrument's own work (how mtex measured; not judged):");
            }
            let shown = all
                || r.verdict != Verdict::Unchanged
                || ALWAYS_SHOWN.contains(&r.counter.as_str())
                || r.a
                    .as_ref()
                    .zip(r.b.as_ref())
                    .is_some_and(|(a, b)| a.mean != b.mean);
            if !shown {
                hidden += 1;
                continue;
            }
            let (d, pc) = match (&r.a, &r.b) {
                (Some(a), Some(b)) => (delta(a, b), pct(a, b)),
                (Some(_), None) => ("only in A".into(), String::new()),
                _ => ("only in B".into(), String::new()),
            };
            out.push(&format!(
                "  {:<37} {:>13} {:>13} {:>12} {:>8}  {}",
                clean(&r.counter),
                value(&r.a),
                value(&r.b),
                d,
                pc,
                mark(r.verdict)
            ));
            // How it was judged, when there are repeats to judge by and it is worth a line: a
            // mark, or a difference found to be noise.
            let repeats =
                r.a.as_ref().is_some_and(|s| s.n > 1) || r.b.as_ref().is_some_and(|s| s.n > 1);
            let worth = r.verdict != Verdict::Instrument
                && (r.verdict != Verdict::Unchanged || matches!(r.test, Test::Welch { .. }));
            if repeats
                && worth
                && let (Some(a), Some(b)) = (&r.a, &r.b)
            {
                out.push(&format!("      {}", spread(a, b, &r.test)));
            }
        }
        if hidden > 0 {
            out.push(&format!(
                "  … {} unchanged (--all lists them)",
                plural(hidden, "more counter", "more counters")
            ));
        }
    }
    if !c.only_a.is_empty() {
        out.blank();
        let list: Vec<&str> = c.only_a.iter().map(String::as_str).collect();
        out.push(&format!("Only in A: {}", list.join(", ")));
    }
    if !c.only_b.is_empty() {
        if c.only_a.is_empty() {
            out.blank();
        }
        let list: Vec<&str> = c.only_b.iter().map(String::as_str).collect();
        out.push(&format!("Only in B: {}", list.join(", ")));
    }
    let s = c.summary();
    out.blank();
    out.push(&s.line());
    if s.improvements + s.regressions > 0 {
        let mut how = Vec::new();
        if s.exact > 0 {
            how.push(format!("{} exact (identical repeats, sd 0)", s.exact));
        }
        if s.welch > 0 {
            how.push(format!("{} by Welch's t-test", s.welch));
        }
        if s.untested > 0 {
            how.push(format!(
                "{} from single runs, untested (repeat the runs to test them)",
                s.untested
            ));
        }
        out.push(&format!("  marks: {}", how.join("; ")));
    }
    out.into_string()
}

/// A float for CSV: empty when absent, Rust's shortest round-trip form otherwise.
fn num(v: Option<f64>) -> String {
    v.map_or(String::new(), |v| v.to_string())
}

/// The comparison as CSV: one row per phase and counter, every counter.
pub fn render_csv(c: &Comparison) -> String {
    let mut out = String::from(
        "run,phase,occurrence,label,policy_a,policy_b,counter,\
         a_n,a_mean,a_sd,a_ci95_low,a_ci95_high,b_n,b_mean,b_sd,b_ci95_low,b_ci95_high,\
         delta,change_pct,test,p_value,mark\n",
    );
    for p in &c.phases {
        for r in &p.rows {
            let side = |s: &Option<Stats>| {
                let n = s.as_ref().map_or(String::new(), |s| s.n.to_string());
                let mean = s.as_ref().map_or(String::new(), |s| {
                    s.exact.map_or(s.mean.to_string(), |v| v.to_string())
                });
                let sd = num(s.as_ref().map(|s| s.sd));
                let ci = s.as_ref().and_then(|s| s.ci95);
                [n, mean, sd, num(ci.map(|c| c.0)), num(ci.map(|c| c.1))]
            };
            let (d, pc) = match (&r.a, &r.b) {
                (Some(a), Some(b)) => (
                    match (a.exact, b.exact) {
                        (Some(x), Some(y)) => (i128::from(y) - i128::from(x)).to_string(),
                        _ => (b.mean - a.mean).to_string(),
                    },
                    num(percent(a, b)),
                ),
                _ => (String::new(), String::new()),
            };
            let (test, pv) = match r.test {
                Test::Exact => ("exact", String::new()),
                Test::Welch { p, .. } => ("welch", p.to_string()),
                Test::Untested => ("untested", String::new()),
            };
            let mark = match r.verdict {
                Verdict::Improvement => "I",
                Verdict::Regression => "R",
                Verdict::Unchanged => "",
                Verdict::OnlyA => "only A",
                Verdict::OnlyB => "only B",
                Verdict::Instrument => "instrument",
            };
            let mut fields = vec![
                field(&p.run),
                field(&p.phase),
                p.occurrence.to_string(),
                field(&p.label),
                field(p.policy_a.as_deref().unwrap_or("")),
                field(p.policy_b.as_deref().unwrap_or("")),
                field(&r.counter),
            ];
            fields.extend(side(&r.a));
            fields.extend(side(&r.b));
            fields.extend([d, pc, test.to_string(), pv, mark.to_string()]);
            out.push_str(&fields.join(","));
            out.push('\n');
        }
    }
    out
}

/// Runs it: exit 0 for any comparison made, even of nothing; unreadable input is an error
/// (`main` prints it, exit 2).
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let a = load(&args.a)?;
    let b = load(&args.b)?;
    check_selection(&a, "--a-run", "--a-policy", &args.a_run, &args.a_policy)?;
    check_selection(&b, "--b-run", "--b-policy", &args.b_run, &args.b_policy)?;
    let c = compare(
        &a,
        &Select {
            run: args.a_run,
            policy: args.a_policy,
        },
        &b,
        &Select {
            run: args.b_run,
            policy: args.b_policy,
        },
    );
    if c.phases.is_empty() {
        // Still a comparison (of nothing): the output lists what is on each side.
        eprintln!(
            "mtex compare: no phase of {} meets one of {} (phases meet by run name, phase name and \
             occurrence; --a-run/--b-run and --a-policy/--b-policy select them)",
            args.a.display(),
            args.b.display()
        );
    }
    match args.format {
        Format::Text => print!("{}", render_text(&c, args.all)),
        Format::Csv => print!("{}", render_csv(&c)),
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(x: f64, y: f64, eps: f64) -> bool {
        (x - y).abs() <= eps
    }

    #[test]
    fn stats_of_one_sample_and_of_identical_samples() {
        let s = stats(&[5]).unwrap();
        assert_eq!(
            (s.n, s.mean, s.sd, s.ci95, s.exact),
            (1, 5.0, 0.0, None, Some(5))
        );
        let s = stats(&[7, 7, 7]).unwrap();
        assert_eq!((s.sd, s.ci95, s.exact), (0.0, Some((7.0, 7.0)), Some(7)));
        assert!(stats(&[]).is_none());
        // Past 2^53 and at u64::MAX: no panic.
        assert!(stats(&[u64::MAX, 0, u64::MAX]).is_some());
    }

    #[test]
    fn identical_repeats_are_exact_and_any_difference_significant() {
        let (a, b) = (stats(&[100, 100]), stats(&[99, 99]));
        assert_eq!(judge(&a, &b), (Test::Exact, Verdict::Improvement));
        assert_eq!(judge(&b, &a), (Test::Exact, Verdict::Regression));
        assert_eq!(judge(&a, &a), (Test::Exact, Verdict::Unchanged));
    }

    #[test]
    fn noise_is_not_a_change() {
        let (a, b) = (stats(&[10, 20, 15]), stats(&[11, 19, 16]));
        let (test, verdict) = judge(&a, &b);
        assert!(matches!(test, Test::Welch { p, .. } if p > 0.5), "{test:?}");
        assert_eq!(verdict, Verdict::Unchanged);
    }

    #[test]
    fn confidence_interval_uses_students_t() {
        // t(0.975, 2) = 4.302653; sd 1, n 3: half-width 4.302653 / sqrt(3) = 2.484138.
        let s = stats(&[10, 12, 11]).unwrap();
        let (lo, hi) = s.ci95.unwrap();
        assert!(
            close(lo, 11.0 - 2.484138, 1e-5) && close(hi, 11.0 + 2.484138, 1e-5),
            "{s:?}"
        );
    }
}
