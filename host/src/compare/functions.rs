//! `mtex compare A B --by function`: for each phase met on both sides, one counter (checked
//! kernel reads by default) function by function: A, B, the delta and the change, largest
//! change first, so a patch's effect is placed in the code it changed. A function on one side
//! only counts 0 on the other (its rows leave zeros out). With repeats a value is their mean,
//! shown with a decimal unless every repeat gave the same count.

use super::render::heading;
use super::{Select, Stats, compare, gather, stats};
use crate::model::results::{PhaseOut, Results};
use crate::output::text::{Lines, clean, signed_thousands, thousands, thousands_f64};
use crate::profile::text::fit;
use std::collections::BTreeSet;

/// Functions listed per phase; the rest are summed on one line.
pub const LISTED: usize = 30;

/// One phase's counter by function.
#[derive(Clone, Debug, PartialEq)]
pub struct FunctionCmp {
    /// Which phase (as the counter comparison heads it).
    pub heading: String,
    pub run: String,
    pub phase: String,
    pub occurrence: usize,
    /// Repeats with a profile on each side: 0 when a side has none (then no rows).
    pub profiled: (usize, usize),
    /// Every function with the counter non-zero on a side, largest change first.
    pub rows: Vec<FunctionDiff>,
    /// The counter summed over the functions, per side: the phase's own figure.
    pub total: Option<(Stats, Stats)>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct FunctionDiff {
    /// `name`, or `name (uaccess)`.
    pub function: String,
    pub el: u8,
    pub a: Stats,
    pub b: Stats,
}

impl FunctionDiff {
    pub fn delta(&self) -> f64 {
        self.b.mean - self.a.mean
    }
}

/// The repeats of a phase that were profiled.
fn profiled<'a>(all: &[&'a PhaseOut]) -> Vec<&'a PhaseOut> {
    all.iter()
        .copied()
        .filter(|p| !p.functions.is_empty())
        .collect()
}

/// `counter` of function (`el`, `label`) in each of `phases`.
fn samples(phases: &[&PhaseOut], el: u8, label: &str, counter: &str) -> Stats {
    let v: Vec<u64> = phases
        .iter()
        .map(|p| {
            p.functions
                .iter()
                .filter(|r| r.el == el && r.label() == label)
                .map(|r| r.get(counter))
                .sum()
        })
        .collect();
    stats(&v).unwrap_or(ZERO)
}

const ZERO: Stats = Stats {
    n: 0,
    mean: 0.0,
    sd: 0.0,
    ci95: None,
    exact: Some(0),
};

fn totals(phases: &[&PhaseOut], counter: &str) -> Option<Stats> {
    let v: Vec<u64> = phases
        .iter()
        .map(|p| p.functions.iter().map(|r| r.get(counter)).sum())
        .collect();
    stats(&v)
}

/// `counter` by function in every phase the two selections meet in.
pub fn by_function(
    a: &Results,
    sa: &Select,
    b: &Results,
    sb: &Select,
    counter: &str,
) -> Vec<FunctionCmp> {
    let keep_run_name = sa.run.is_none() || sb.run.is_none();
    let (ga, gb) = (gather(a, sa, keep_run_name), gather(b, sb, keep_run_name));
    compare(a, sa, b, sb)
        .phases
        .iter()
        .map(|p| {
            let key = (p.run.clone(), p.phase.clone(), p.occurrence);
            let pa = profiled(&ga.phases[&key].all);
            let pb = profiled(&gb.phases[&key].all);
            let both = !pa.is_empty() && !pb.is_empty();
            let names: BTreeSet<(u8, String)> = pa
                .iter()
                .chain(&pb)
                .flat_map(|p| &p.functions)
                .filter(|r| both && r.get(counter) != 0)
                .map(|r| (r.el, r.label()))
                .collect();
            let mut rows: Vec<FunctionDiff> = names
                .into_iter()
                .map(|(el, function)| FunctionDiff {
                    a: samples(&pa, el, &function, counter),
                    b: samples(&pb, el, &function, counter),
                    function,
                    el,
                })
                .collect();
            rows.sort_by(|x, y| {
                y.delta()
                    .abs()
                    .total_cmp(&x.delta().abs())
                    .then_with(|| x.function.cmp(&y.function))
            });
            FunctionCmp {
                heading: heading(p),
                run: p.run.clone(),
                phase: p.phase.clone(),
                occurrence: p.occurrence,
                profiled: (pa.len(), pb.len()),
                rows,
                total: totals(&pa, counter)
                    .zip(totals(&pb, counter))
                    .filter(|_| both),
            }
        })
        .collect()
}

/// A value: the count when every repeat gave it, else the mean with a decimal.
fn value(s: &Stats) -> String {
    match s.exact {
        Some(v) => thousands(v),
        None => thousands_f64(s.mean, 1),
    }
}

fn delta(a: &Stats, b: &Stats) -> String {
    match (a.exact, b.exact) {
        (Some(x), Some(y)) => signed_thousands(i128::from(y) - i128::from(x)),
        _ => {
            let d = b.mean - a.mean;
            format!("{}{}", if d > 0.0 { "+" } else { "" }, thousands_f64(d, 1))
        }
    }
}

fn change(a: &Stats, b: &Stats) -> String {
    if a.mean == b.mean {
        return "0%".into();
    }
    if a.mean == 0.0 {
        return "new".into();
    }
    format!("{:+.1}%", 100.0 * (b.mean - a.mean) / a.mean)
}

/// Sums of exact values stay exact; any mean makes the sum a mean.
fn sum(stats: impl Iterator<Item = Stats>) -> Stats {
    stats.fold(ZERO, |acc, s| Stats {
        n: acc.n.max(s.n),
        mean: acc.mean + s.mean,
        sd: 0.0,
        ci95: None,
        exact: acc.exact.zip(s.exact).map(|(x, y)| x + y),
    })
}

/// Columns of the function's name.
const NAME: usize = 44;

fn line(name: &str, a: &Stats, b: &Stats) -> String {
    format!(
        "  {:<NAME$} {:>13} {:>13} {:>12} {:>8}",
        fit(&clean(name), NAME),
        value(a),
        value(b),
        delta(a, b),
        change(a, b)
    )
}

/// The text: per phase its [`LISTED`] largest changes, the rest summed, and the total.
pub fn render_functions_text(cmps: &[FunctionCmp], counter: &str) -> String {
    let mut out = Lines::default();
    out.push(&format!(
        "{} by function, largest change first. A function on one side only counts 0 on the \
         other; with repeats a value is their mean (a decimal shows where they differ).",
        clean(counter)
    ));
    for c in cmps {
        out.blank();
        out.push(&c.heading);
        let Some((ta, tb)) = &c.total else {
            let side = if c.profiled.0 == 0 { "A" } else { "B" };
            out.push(&format!(
                "  no profile by function on side {side} (run it with mtex.profile=1)"
            ));
            continue;
        };
        out.push(&format!(
            "  {:<NAME$} {:>13} {:>13} {:>12} {:>8}",
            "function", "A", "B", "delta", "change"
        ));
        for r in c.rows.iter().take(LISTED) {
            out.push(&line(&r.function, &r.a, &r.b));
        }
        if c.rows.len() > LISTED {
            let rest = &c.rows[LISTED..];
            let (a, b) = (
                sum(rest.iter().map(|r| r.a.clone())),
                sum(rest.iter().map(|r| r.b.clone())),
            );
            out.push(&line(&format!("({} more functions)", rest.len()), &a, &b));
        }
        out.push(&line(&format!("total {counter}"), ta, tb));
    }
    out.into_string()
}

/// One row per phase and function: `run,phase,occurrence,counter,function,el,a,b,delta`
/// (means where repeats differ).
pub fn render_functions_csv(cmps: &[FunctionCmp], counter: &str) -> String {
    let mut out = String::from("run,phase,occurrence,counter,function,el,a,b,delta\n");
    let q = |s: &str| format!("\"{}\"", s.replace('"', "\"\""));
    let num = |s: &Stats| {
        s.exact
            .map_or_else(|| format!("{}", s.mean), |v| v.to_string())
    };
    for c in cmps {
        for r in &c.rows {
            let d = match (r.a.exact, r.b.exact) {
                (Some(x), Some(y)) => (i128::from(y) - i128::from(x)).to_string(),
                _ => format!("{}", r.delta()),
            };
            out.push_str(&format!(
                "{},{},{},{},{},{},{},{},{d}\n",
                q(&c.run),
                q(&c.phase),
                c.occurrence,
                q(counter),
                q(&r.function),
                r.el,
                num(&r.a),
                num(&r.b),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use mtex_trace::profile::PcEntry;

    /// The fixture's run as a results directory's report.json, after `change` to its profile.
    fn results_json(name: &str, change: impl Fn(&mut Vec<PcEntry>)) -> std::path::PathBuf {
        let (mut r, symbols) = crate::profile::fixture::report();
        let phase = &mut r.phases[0];
        let profile = phase.profile.as_mut().unwrap();
        change(&mut profile.pcs);
        profile.end.as_mut().unwrap().records = (profile.pcs.len() + profile.other.len()) as u32;
        phase.trace = Some(profile.sum());
        let mut doc = Results::single(&r);
        doc.symbolize(&symbols);
        let dir = std::env::temp_dir().join(format!("mtex-cmp-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("report.json");
        std::fs::write(&file, serde_json::to_string(&doc).unwrap()).unwrap();
        dir
    }

    #[test]
    fn functions_are_compared_by_largest_change_with_zero_for_the_missing() {
        let a = results_json("a", |_| {});
        let b = results_json("b", |pcs| {
            // kfunc_24 reads 20 fewer; kfunc_00 is gone; kfunc_01's PC moves to an address no
            // symbol covers, so `[no symbol]` appears.
            pcs[24].rd[1] = 5;
            pcs.remove(0);
            pcs[0].pc = 0x9_0000;
        });
        let (da, db) = (
            super::super::load(&a).unwrap(),
            super::super::load(&b).unwrap(),
        );
        let counter = "mem_access_checked_rd:k";
        let f = by_function(&da, &Select::default(), &db, &Select::default(), counter);
        assert_eq!(f.len(), 1);
        let rows = &f[0].rows;
        let top: Vec<_> = rows
            .iter()
            .take(4)
            .map(|r| (r.function.as_str(), r.a.exact, r.b.exact))
            .collect();
        assert_eq!(
            top,
            [
                ("kfunc_24", Some(25), Some(5)),
                ("[no symbol]", Some(0), Some(2)),
                ("kfunc_01", Some(2), Some(0)),
                ("kfunc_00", Some(1), Some(0)),
            ]
        );
        // The functions add up to the phase's counter on each side.
        let (ta, tb) = f[0].total.clone().unwrap();
        let phase = |d: &Results| d.runs[0].phases[0].counters[counter];
        assert_eq!((ta.exact, tb.exact), (Some(phase(&da)), Some(phase(&db))));
        let text = render_functions_text(&f, counter);
        for l in text.lines() {
            assert!(l.chars().count() <= crate::output::text::WIDTH, "{l}");
        }
        insta::assert_snapshot!(text);
        let csv = render_functions_csv(&f, counter);
        assert!(
            csv.contains(
                "\"run\",\"futex-hash\",0,\"mem_access_checked_rd:k\",\"kfunc_24\",1,25,5,-20\n"
            ),
            "{csv}"
        );
        for d in [a, b] {
            std::fs::remove_dir_all(d).unwrap();
        }
    }

    #[test]
    fn a_side_without_a_profile_is_said_to_have_none() {
        let a = crate::profile::fixture::results();
        let mut b = a.clone();
        b.runs[0].phases[0].functions.clear();
        let f = by_function(
            &a,
            &Select::default(),
            &b,
            &Select::default(),
            "mem_access_checked_rd:k",
        );
        assert!(f[0].rows.is_empty() && f[0].total.is_none());
        let text = render_functions_text(&f, "mem_access_checked_rd:k");
        assert!(text.contains("no profile by function on side B"), "{text}");
    }
}
