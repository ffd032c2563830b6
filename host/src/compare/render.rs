//! The comparison as a person reads it (text, at most 100 columns, with the per-phase
//! sentence in the MTE threads' terms) and as a script reads it (CSV, every counter). Only
//! wording and layout live here: what changed and how it was judged come from the
//! comparison.

use super::{Comparison, PhaseCmp, Row, Stats, Summary, Test, Verdict};
use crate::output::csv::field;
use crate::output::text::{Lines, WIDTH, clean, signed_thousands, thousands, thousands_f64};

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
        if self.changed > 0 {
            s.push_str(&format!(
                ", {} changed from single runs, untested (?)",
                self.changed
            ));
        }
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
        Verdict::Changed => "(?)",
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
        Test::Intervals => {
            let ci = |s: &Stats| {
                s.ci95.map_or("not estimable".into(), |(lo, hi)| {
                    format!("{} to {}", thousands_f64(lo, 0), thousands_f64(hi, 0))
                })
            };
            format!(
                "95% intervals {} / {} (sampled; units {} / {}): a change only where they are disjoint",
                ci(a),
                ci(b),
                a.n,
                b.n
            )
        }
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
    // An estimate without an interval (too few units met it) bounds nothing: no verdict,
    // rather than "no significant change".
    let unbounded = |s: &super::Stats| {
        matches!(r.test, Test::Intervals) && s.exact.is_none() && s.ci95.is_none()
    };
    if unbounded(a) || unbounded(b) {
        return Some((
            format!(
                "{name}: {what} cannot be compared: an estimate has no interval (too few of its \
                 units met the counter)"
            ),
            figures,
        ));
    }
    let sentence = match r.verdict {
        Verdict::Improvement => match percent(a, b) {
            Some(pc) => format!("{name}: {:.1}% of {what} are eliminated", -pc),
            None => format!("{name}: {what} fall"),
        },
        Verdict::Regression => match percent(a, b) {
            Some(pc) => format!("{name}: {what} rise by {pc:.1}%"),
            None => format!("{name}: {what} appear"),
        },
        Verdict::Changed => match percent(a, b) {
            Some(pc) => format!(
                "{name}: {what} change by {pc:+.1}% (single runs: untested, repeat to test)"
            ),
            None => format!("{name}: {what} change (single runs: untested, repeat to test)"),
        },
        _ if a.mean == b.mean => {
            return Some((format!("{name}: {what} are unchanged"), value(&r.a)));
        }
        _ => format!("{name}: no significant change in {what}"),
    };
    Some((sentence, figures))
}

/// `policy entry-tco → tcma1`, `policy tcma1`, or nothing.
/// `futex-hash i=32 tcf0=sync (#2) under entry-tco → tcma1, run baseline`: which phase.
pub(super) fn heading(p: &PhaseCmp) -> String {
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
    format!("{}{nth}{}{run}", p.label, policies(p))
}

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
    out.push(
        "Welch's t-test, p < 0.05. (?) B differs with a single run on a side: untested, never",
    );
    out.push("called better or worse; repeat the runs to test it.");
    for p in &c.phases {
        out.blank();
        out.push(&heading(p));
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
                && (r.verdict != Verdict::Unchanged
                    || matches!(r.test, Test::Welch { .. } | Test::Intervals));
            if (repeats || matches!(r.test, Test::Intervals))
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
        if s.intervals > 0 {
            how.push(format!(
                "{} between sampled estimates whose 95% intervals are disjoint",
                s.intervals
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
                Test::Intervals => ("intervals", String::new()),
            };
            let mark = match r.verdict {
                Verdict::Improvement => "I",
                Verdict::Regression => "R",
                Verdict::Unchanged => "",
                Verdict::Changed => "?",
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

#[cfg(test)]
mod headline_tests {
    use super::*;
    use crate::compare::{Row, Stats, Test, Verdict};

    fn phase(b_interval: Option<(f64, f64)>) -> PhaseCmp {
        let stats = |mean: f64, ci95| Stats {
            n: 1000,
            mean,
            sd: 0.0,
            ci95,
            exact: None,
        };
        PhaseCmp {
            run: String::new(),
            phase: "window 1".into(),
            occurrence: 0,
            label: "window 1".into(),
            policy_a: None,
            policy_b: None,
            rows: vec![Row {
                counter: HEADLINE.into(),
                a: Some(stats(28_000_000.0, Some((27_000_000.0, 29_000_000.0)))),
                b: Some(stats(349.0, b_interval)),
                test: Test::Intervals,
                verdict: Verdict::Unchanged,
            }],
        }
    }

    /// An estimate too rare to have an interval bounds nothing: the headline says the two
    /// cannot be compared, never "no significant change".
    #[test]
    fn an_estimate_without_an_interval_is_not_compared() {
        let h = headline(&phase(None)).unwrap();
        assert!(h.contains("cannot be compared"), "{h}");
        assert!(!h.contains("no significant change"), "{h}");
        let h = headline(&phase(Some((300.0, 400.0)))).unwrap();
        assert!(!h.contains("cannot be compared"), "{h}");
    }
}
