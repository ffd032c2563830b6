//! `cargo mtex bench sample`: how often a sampled phase's 95% intervals hold the exact count,
//! and what sampling costs. Each workload runs once traced whole (the exact counts) and then
//! sampled under as many seeds as asked, its gap sized so that a phase gets about
//! [`UNITS`] units; every trace counter that the whole trace counted and that has an
//! interval is checked, and one judged not estimable is tallied as such. Without the kernel's
//! tick the workload runs the same instructions traced or not, so the exact counts are those
//! of the very execution sampled. The bench fails when a counter's intervals held less often
//! than [`FLOOR`].

use crate::cli::bench::Boots;
use crate::model::report::Phase;
use anyhow::{Context, Result, bail};
use std::collections::BTreeMap;
use std::time::Duration;

/// The workloads sampled: long enough for a few hundred units, and different in what their
/// kernel does (hashing, a client/server pair, a minimal syscall, copies to and from user).
pub const WORKLOADS: [&str; 4] = [
    "futex-hash:iters=4096",
    "memcached:iters=2048",
    "getpid:iters=20000",
    "uaccess-heavy:iters=2048",
];

/// Units a phase gets, about.
pub const UNITS: u64 = 200;
/// Instructions per unit, on average.
pub const UNIT: u64 = 1000;

fn line(workload: &str) -> String {
    format!(
        "mtex.guest=kernel mtex.watchdog_ms=600000 mtex.hz=0 mtex.trace=only \
         mtex.policies=entry-tco mtex.workloads={workload}"
    )
}

/// The share of a counter's intervals that must hold the exact count, over the runs.
pub const FLOOR: f64 = 0.93;

/// One counter's coverage over the runs.
#[derive(Clone, Debug, Default)]
pub struct CounterCoverage {
    /// Runs where it had an interval, and of those, the ones whose interval held the count.
    pub runs: usize,
    pub covered: usize,
    /// Runs where it was judged not estimable (no interval: nothing claimed).
    pub not_estimable: usize,
    /// Sums of |estimate − exact| / exact and of (estimate − exact) / exact over the runs
    /// with an interval.
    pub abs_error: f64,
    pub error: f64,
}

impl CounterCoverage {
    /// Tallies one run's estimate against the exact count `want` (> 0).
    pub fn note(&mut self, e: &crate::model::sample::Estimate, want: u64) {
        if !e.has_interval() {
            self.not_estimable += 1;
            return;
        }
        self.runs += 1;
        self.covered += e.contains(want) as usize;
        self.abs_error += (e.value - want as f64).abs() / want as f64;
        self.error += (e.value - want as f64) / want as f64;
    }

    pub fn share(&self) -> f64 {
        self.covered as f64 / self.runs.max(1) as f64
    }

    /// `  name  runs  coverage  mean |err|  mean err  not estimable`, without a line end; the
    /// figures are dashes when no run gave it an interval.
    pub fn row(&self, name: &str) -> String {
        if self.runs == 0 {
            return format!(
                "  {name:<44} {:>5} {:>9} {:>10} {:>9} {:>6}",
                0, "-", "-", "-", self.not_estimable
            );
        }
        let n = self.runs as f64;
        format!(
            "  {name:<44} {:>5} {:>8.1}% {:>9.2}% {:>+8.2}% {:>6}",
            self.runs,
            100.0 * self.share(),
            100.0 * self.abs_error / n,
            100.0 * self.error / n,
            self.not_estimable
        )
    }
}

/// The header of [`CounterCoverage::row`]s.
pub fn header() -> String {
    format!(
        "  {:<44} {:>5} {:>9} {:>10} {:>9} {:>6}",
        "counter", "runs", "coverage", "mean |err|", "mean err", "n/e"
    )
}

/// The counter whose intervals held least often (of those that had one), if any had one.
pub fn worst<'a>(
    all: impl IntoIterator<Item = (&'a str, &'a CounterCoverage)>,
) -> Option<(&'a str, &'a CounterCoverage)> {
    all.into_iter()
        .filter(|(_, c)| c.runs > 0)
        .min_by(|a, b| a.1.share().total_cmp(&b.1.share()))
}

/// The verdict line on the worst counter, and whether it is at least [`FLOOR`].
pub fn verdict(worst: Option<(&str, &CounterCoverage)>) -> (String, bool) {
    use statrs::distribution::{Binomial, DiscreteCDF};
    let Some((name, c)) = worst else {
        return ("  worst counter: none had an interval\n".to_string(), false);
    };
    let holds = c.share() >= FLOOR;
    // How often intervals that hold 95% of the time would do this badly or worse.
    let chance = Binomial::new(0.95, c.runs as u64).map_or(f64::NAN, |b| b.cdf(c.covered as u64));
    (
        format!(
            "  worst counter: {name}, {} of {} intervals held ({:.1}%; {} {:.0}%): {} \
             (95% intervals do as badly in {:.2}% of such sets of runs)\n",
            c.covered,
            c.runs,
            100.0 * c.share(),
            if holds { "at least" } else { "below" },
            100.0 * FLOOR,
            if holds { "holds" } else { "FAILS" },
            100.0 * chance
        ),
        holds,
    )
}

/// The figures of the benchmark.
pub struct SampleFigures {
    pub seeds: u64,
    pub by_counter: BTreeMap<&'static str, CounterCoverage>,
    /// Wall time of the whole traces and of the sampled runs, and their guest instructions.
    pub whole_wall: Duration,
    pub sampled_wall: Duration,
    pub untraced_wall: Duration,
    pub instructions: u64,
    pub units: u64,
    pub traced_in_units: u64,
}

fn only_phase(b: &crate::cli::bench::Booted, what: &str) -> Result<Phase> {
    let r = &b.report;
    if !r.succeeded() || !r.problems.is_empty() {
        bail!(
            "{what} failed or has problems:\n{}",
            crate::output::matrix::text(r)
        );
    }
    r.phases
        .first()
        .cloned()
        .with_context(|| format!("{what}: no phase"))
}

/// Whether every counter's intervals held at least [`FLOOR`] of the time.
pub fn holds(f: &SampleFigures) -> bool {
    verdict(worst(f.by_counter.iter().map(|(n, c)| (*n, c)))).1
}

/// Runs the benchmark: `seeds` sampled runs of each workload.
pub fn coverage(boots: &Boots, seeds: u64) -> Result<SampleFigures> {
    let mut f = SampleFigures {
        seeds,
        by_counter: BTreeMap::new(),
        whole_wall: Duration::ZERO,
        sampled_wall: Duration::ZERO,
        untraced_wall: Duration::ZERO,
        instructions: 0,
        units: 0,
        traced_in_units: 0,
    };
    for w in WORKLOADS {
        let base = line(w);
        let whole = boots.get(&base, true)?;
        let exact = only_phase(&whole, w)?;
        let t = exact.trace.context("the whole trace")?;
        let n = t.instructions_el0 + t.instructions_el1;
        // The same work at full speed, in one pass (no TCO watch passes).
        let untraced = boots.get(&format!("{base} mtex.trace=0 mtex.tco_watch=0"), true)?;
        // Under -icount a tick of the 1 GHz counter is an instruction: gaps of the phase's
        // length over the units it should get.
        let gap_us = (n / UNITS).saturating_sub(UNIT) / 1000;
        let lines: Vec<(String, bool)> = (1..=seeds)
            .map(|s| {
                (
                    format!(
                        "{base} mtex.sample={UNIT}:{} mtex.sample_seed={s}",
                        gap_us.max(1)
                    ),
                    true,
                )
            })
            .collect();
        boots.prefetch(&lines, 2)?;
        f.whole_wall += whole.wall;
        f.untraced_wall += untraced.wall;
        for (l, _) in &lines {
            let b = boots.get(l, true)?;
            f.sampled_wall += b.wall;
            let p = only_phase(&b, l)?;
            f.instructions += n;
            if let Some(s) = &p.sampled {
                f.units += s.units().count() as u64;
                f.traced_in_units += s
                    .stretches
                    .iter()
                    .map(|u| u.counts.instructions_el0 + u.counts.instructions_el1)
                    .sum::<u64>();
            }
            for (c, e) in crate::model::report::sampled::estimates(&p, true) {
                let Some(want) = c.of_trace(&t).filter(|&v| v > 0) else {
                    continue;
                };
                if e.exact {
                    continue;
                }
                f.by_counter.entry(c.name).or_default().note(&e, want);
            }
        }
    }
    Ok(f)
}

/// The figures as text: per counter, then overall, then the cost.
pub fn render(f: &SampleFigures) -> String {
    let mut out = format!(
        "bench sample: {} workloads × {} seeds, units of {UNIT} instructions (about {UNITS} \
         a phase), 95% intervals against the whole trace's exact counts\n",
        WORKLOADS.len(),
        f.seeds
    );
    out.push_str(&header());
    out.push('\n');
    let (mut runs, mut covered, mut not_estimable) = (0, 0, 0);
    for (name, c) in &f.by_counter {
        runs += c.runs;
        covered += c.covered;
        not_estimable += c.not_estimable;
        out.push_str(&c.row(name));
        out.push('\n');
    }
    if runs > 0 {
        out.push_str(&format!(
            "  all counters: {covered} of {runs} intervals hold the exact count ({:.1}%); \
             {not_estimable} estimates not estimable (n/e: no interval claimed)\n",
            100.0 * covered as f64 / runs as f64
        ));
    }
    out.push_str(&verdict(worst(f.by_counter.iter().map(|(n, c)| (*n, c)))).0);
    let secs = |d: Duration| d.as_secs_f64();
    let per_run = |d: Duration, n: u64| secs(d) / n.max(1) as f64;
    let runs_n = WORKLOADS.len() as u64 * f.seeds;
    out.push_str(&format!(
        "  cost per run (QEMU wall, boot included): untraced {:.2} s, sampled {:.2} s, \
         traced whole {:.2} s; {:.2}% of the instructions traced in {} units\n",
        per_run(f.untraced_wall, WORKLOADS.len() as u64),
        per_run(f.sampled_wall, runs_n),
        per_run(f.whole_wall, WORKLOADS.len() as u64),
        100.0 * f.traced_in_units as f64 / f.instructions.max(1) as f64,
        f.units
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::sample::{Estimate, NotEstimable};

    fn est(value: f64, half_width: f64) -> Estimate {
        Estimate::example(value, half_width, 200)
    }

    #[test]
    fn the_worst_counter_decides_and_one_without_an_interval_claims_nothing() {
        let mut good = CounterCoverage::default();
        let mut bad = CounterCoverage::default();
        let mut never = CounterCoverage::default();
        for i in 0..25 {
            // 24 of 25 hold 100 ± 5.
            good.note(&est(if i == 0 { 110.0 } else { 101.0 }, 5.0), 100);
            // 22 of 25.
            bad.note(&est(if i < 3 { 90.0 } else { 99.0 }, 5.0), 100);
            never.note(
                &Estimate {
                    half_width: f64::INFINITY,
                    not_estimable: Some(NotEstimable::TooFewMet { met: 2, need: 10 }),
                    ..est(1000.0, 0.0)
                },
                100,
            );
        }
        assert_eq!((good.runs, good.covered, good.not_estimable), (25, 24, 0));
        assert_eq!((never.runs, never.not_estimable), (0, 25));
        assert!(never.row("dsb").contains(" - "), "{}", never.row("dsb"));
        let (line, holds) = verdict(worst([("a", &good), ("dsb", &never)]));
        assert!(holds, "{line}");
        assert!(line.contains("a, 24 of 25 intervals held (96.0%"), "{line}");
        let (line, holds) = verdict(worst([("a", &good), ("b", &bad), ("dsb", &never)]));
        assert!(
            !holds && line.contains("b, 22 of 25") && line.contains("FAILS"),
            "{line}"
        );
        // No interval anywhere: nothing holds.
        assert!(!verdict(worst([("dsb", &never)])).1);
    }
}
