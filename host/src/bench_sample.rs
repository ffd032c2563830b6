//! `cargo mtex bench sample`: how often a sampled phase's 95% intervals hold the exact count,
//! and what sampling costs. Each workload runs once traced whole (the exact counts) and then
//! sampled under as many seeds as asked, its gap sized so that a phase gets about
//! [`UNITS`] units; every trace counter that the whole trace counted and that has an
//! interval is checked. Without the kernel's tick the workload runs the same instructions
//! traced or not, so the exact counts are those of the very execution sampled.

use crate::bench::Boots;
use crate::report::Phase;
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

/// One counter's coverage over the runs.
#[derive(Clone, Debug, Default)]
pub struct CounterCoverage {
    pub runs: usize,
    pub covered: usize,
    /// Sums of |estimate − exact| / exact and of (estimate − exact) / exact over the runs.
    pub abs_error: f64,
    pub error: f64,
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

fn only_phase(b: &crate::bench::Booted, what: &str) -> Result<Phase> {
    let r = &b.report;
    if !r.succeeded() || !r.problems.is_empty() {
        bail!("{what} failed or has problems:\n{}", crate::render::text(r));
    }
    r.phases
        .first()
        .cloned()
        .with_context(|| format!("{what}: no phase"))
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
            for (c, e) in crate::report::sampled::estimates(&p, true) {
                let Some(want) = c.of_trace(&t).filter(|&v| v > 0) else {
                    continue;
                };
                if !e.half_width.is_finite() || e.exact {
                    continue;
                }
                let cov = f.by_counter.entry(c.name).or_default();
                cov.runs += 1;
                cov.covered += e.contains(want) as usize;
                cov.abs_error += (e.value - want as f64).abs() / want as f64;
                cov.error += (e.value - want as f64) / want as f64;
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
    out.push_str(&format!(
        "  {:<44} {:>5} {:>9} {:>10} {:>9}\n",
        "counter", "runs", "coverage", "mean |err|", "mean err"
    ));
    let (mut runs, mut covered) = (0, 0);
    for (name, c) in &f.by_counter {
        runs += c.runs;
        covered += c.covered;
        out.push_str(&format!(
            "  {name:<44} {:>5} {:>8.1}% {:>9.2}% {:>+8.2}%\n",
            c.runs,
            100.0 * c.covered as f64 / c.runs as f64,
            100.0 * c.abs_error / c.runs as f64,
            100.0 * c.error / c.runs as f64
        ));
    }
    if runs > 0 {
        out.push_str(&format!(
            "  all counters: {covered} of {runs} intervals hold the exact count ({:.1}%)\n",
            100.0 * covered as f64 / runs as f64
        ));
    }
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
