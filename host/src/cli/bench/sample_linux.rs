//! `cargo mtex bench sample --linux`: how often a sampled Linux window's 95% intervals hold
//! the count. One futex-hash window is traced whole, then sampled under each seed.
//!
//! With `--cpus N` the window runs on N CPUs, futex-hash with a thread on each (thread `t` on
//! CPU `t`), and every CPU samples its own share: the window's estimates and each CPU's are
//! tallied, each CPU's against its share of the whole trace and against its thread's waits.
//!
//! Linux does not run the very same instructions traced whole and sampled: under `-icount`
//! its clock runs against its instructions at another rate, so its timer interrupts and
//! what the scheduler does fall elsewhere. The whole trace is the truth only as nearly as
//! the two runs agree, and the bench prints how nearly (the windows' instruction totals).
//! One count is fixed by the workload's arithmetic whatever the timing: each wait makes one
//! checked kernel read of the futex word through the user's pointer, the one the TCMA1 view
//! keeps (`if_tcma1.mem_access_checked_rd:k`); it is checked against that number.

use crate::cli::bench::sample::CounterCoverage;
use crate::linux::{self, Args, Boot};
use crate::model::report::Phase;
use anyhow::{Context, Result, bail};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

/// `--schedule UNIT:GAP_US`: the instructions per unit, on average, and the mean gap in
/// microseconds (under `-icount` a thousand instructions each), as `--sample` takes them.
/// The default, 200:1, gives about 4,200 units in a futex-hash window of 5,000 waits: units
/// dense enough that the window's short stages of their own (the thread's creation at its
/// start, its exit and join at its end, some 7,000 instructions each) hold several units
/// under every schedule, which an interval needs (docs/sampling.md); 1000:30, 150 units a
/// window, leaves them unmet in most schedules.
pub fn parse_schedule(s: &str) -> Result<(u32, u32), String> {
    let o = mtex_abi::options::SampleOptions::parse(&format!("mtex.sample={s}"))
        .map_err(|e| e.problem.to_string())?
        .ok_or("expected UNIT:GAP_US")?;
    Ok((o.unit, o.gap_us))
}
/// The count the workload's arithmetic fixes: one per wait.
pub const PER_WAIT: &str = "if_tcma1.mem_access_checked_rd:k";

/// The figures of the benchmark.
pub struct LinuxFigures {
    pub seeds: u64,
    /// The schedule: mean instructions per unit, mean gap in microseconds.
    pub unit: u32,
    pub gap_us: u32,
    pub waits: u64,
    /// Per counter, against the whole trace, with the whole trace's count.
    pub by_counter: BTreeMap<&'static str, (CounterCoverage, u64)>,
    /// [`PER_WAIT`] against the number of waits (all threads').
    pub arithmetic: CounterCoverage,
    /// CPUs the window ran on (a futex-hash thread on each).
    pub cpus: u32,
    /// On several CPUs, named `CPU n counter`: each CPU's [`PER_WAIT`] against its thread's
    /// waits, and its counters against its share of the whole trace (with that share's
    /// count).
    pub cpu_arithmetic: BTreeMap<String, CounterCoverage>,
    pub by_cpu_counter: BTreeMap<String, (CounterCoverage, u64)>,
    /// The whole trace's window instructions, and the largest relative difference of a
    /// sampled run's (the PMU's exact total) from it.
    pub whole_instructions: u64,
    pub largest_instruction_gap: f64,
    pub units: u64,
    pub whole_wall: Duration,
    pub sampled_wall: Duration,
}

#[derive(clap::Parser)]
struct Cli {
    #[command(flatten)]
    args: Args,
}

fn args(waits: u64, cpus: u32, out: &Path, sample: Option<(u64, (u32, u32))>) -> Result<Args> {
    use clap::Parser;
    let mut words = vec![
        "linux".to_string(),
        "--cpus".into(),
        cpus.to_string(),
        "--workload".into(),
        format!("futex-hash {waits} {cpus}"),
        "--out".into(),
        out.display().to_string(),
    ];
    if let Some((seed, (unit, gap_us))) = sample {
        words.extend([
            "--sample".into(),
            format!("{unit}:{gap_us}"),
            "--sample-seed".into(),
            seed.to_string(),
        ]);
    }
    Ok(Cli::try_parse_from(words)?.args)
}

/// The window of one boot, which must have no problem, and the boot's wall time.
pub(crate) fn window(args: &Args, p: &linux::Prepared, what: &str) -> Result<(Phase, Duration)> {
    let start = Instant::now();
    let booted = linux::boot(args, p, Boot::Measured)?;
    let wall = start.elapsed();
    let r = booted.console.report();
    if !r.problems.is_empty() {
        bail!("{what}: {}", r.problems.join("; "));
    }
    let w = r
        .phases
        .into_iter()
        .find(|p| p.name == "window 1" && p.end.is_some())
        .with_context(|| format!("{what}: no closed window 1"))?;
    Ok((w, wall))
}

/// Runs the benchmark: the window traced whole, then sampled under `seeds` seeds.
pub fn coverage(
    seeds: u64,
    waits: u64,
    (unit, gap_us): (u32, u32),
    cpus: u32,
    out: &Path,
) -> Result<LinuxFigures> {
    let whole_args = args(waits, cpus, out, None)?;
    let p = linux::prepare(&whole_args)?;
    let (whole, whole_wall) = window(&whole_args, &p, "the whole trace")?;
    let t = whole.trace.context("the whole trace has no counts")?;
    let whole_instructions = t.instructions_el0 + t.instructions_el1;
    let mut f = LinuxFigures {
        seeds,
        unit,
        gap_us,
        waits,
        by_counter: BTreeMap::new(),
        arithmetic: CounterCoverage::default(),
        cpus,
        cpu_arithmetic: BTreeMap::new(),
        by_cpu_counter: BTreeMap::new(),
        whole_instructions,
        largest_instruction_gap: 0.0,
        units: 0,
        whole_wall,
        sampled_wall: Duration::ZERO,
    };
    for seed in 1..=seeds {
        eprintln!("mtex: bench sample --linux: seed {seed} of {seeds}");
        let a = args(waits, cpus, out, Some((seed, (unit, gap_us))))?;
        let (w, wall) = window(&a, &p, &format!("sampled run {seed}"))?;
        f.sampled_wall += wall;
        let problems = crate::model::report::sampled::problems(&w, true);
        if !problems.is_empty() {
            bail!("sampled run {seed}: {}", problems.join("; "));
        }
        if let Some([el0, el1]) = crate::model::report::sampled::population(&w, true) {
            let gap = (el0 + el1).abs_diff(whole_instructions) as f64 / whole_instructions as f64;
            f.largest_instruction_gap = f.largest_instruction_gap.max(gap);
        }
        f.units += w.sampled.as_ref().map_or(0, |s| s.units().count() as u64);
        for (c, e) in crate::model::report::sampled::estimates(&w, true) {
            if e.exact {
                continue;
            }
            if c.name == PER_WAIT {
                f.arithmetic.note(&e, waits * u64::from(cpus));
            }
            // The instruction totals are the PMU's for this run, not estimates: how near they
            // are to the whole trace's is the largest instruction gap.
            if c.name.starts_with("instructions:") {
                continue;
            }
            if let Some(want) = c.of_trace(&t).filter(|&v| v > 0) {
                let entry = f.by_counter.entry(c.name).or_default();
                entry.1 = want;
                entry.0.note(&e, want);
            }
        }
        for (cpu, es) in crate::model::report::sampled::cpu_estimates(&w, true) {
            let share = whole.cpus.iter().find(|s| s.cpu == cpu);
            let whole_share: BTreeMap<&str, u64> = share
                .map(|s| {
                    mtex_abi::counters::of_cpu_share(s)
                        .map(|(c, v)| (c.name, v))
                        .collect()
                })
                .unwrap_or_default();
            for (c, e) in es {
                if c.name == PER_WAIT && !e.exact {
                    f.cpu_arithmetic
                        .entry(format!("CPU {cpu} {ARITHMETIC}"))
                        .or_default()
                        .note(&e, waits);
                }
                if c.name.starts_with("instructions:") || e.exact {
                    continue;
                }
                if let Some(&want) = whole_share.get(c.name).filter(|&&v| v > 0) {
                    let entry = f
                        .by_cpu_counter
                        .entry(format!("CPU {cpu} {}", c.name))
                        .or_default();
                    entry.1 = want;
                    entry.0.note(&e, want);
                }
            }
        }
    }
    Ok(f)
}

/// Every counter's coverage, the workload's arithmetic first (named for what it is checked
/// against).
fn all_counters(f: &LinuxFigures) -> impl Iterator<Item = (&str, &CounterCoverage)> {
    std::iter::once((ARITHMETIC, &f.arithmetic))
        .chain(f.by_counter.iter().map(|(n, (c, _))| (*n, c)))
        .chain(f.cpu_arithmetic.iter().map(|(n, c)| (n.as_str(), c)))
        .chain(f.by_cpu_counter.iter().map(|(n, (c, _))| (n.as_str(), c)))
}

/// How [`PER_WAIT`] is named when checked against the number of waits.
const ARITHMETIC: &str = "if_tcma1.mem_access_checked_rd:k (waits)";

/// Whether every counter's intervals held at least [`crate::cli::bench::sample::FLOOR`] of the time.
pub fn holds(f: &LinuxFigures) -> bool {
    crate::cli::bench::sample::verdict(crate::cli::bench::sample::worst(all_counters(f))).1
}

/// The figures as text.
pub fn render(f: &LinuxFigures) -> String {
    let mut out = format!(
        "bench sample --linux: futex-hash {} {} in a window on {} CPU{}, traced whole once, then \
         sampled under {} random schedules (units of {} instructions, gaps of 0 to {} µs), 95% \
         intervals\n",
        f.waits,
        f.cpus,
        f.cpus,
        if f.cpus == 1 { "" } else { "s" },
        f.seeds,
        f.unit,
        2 * f.gap_us
    );
    out.push_str(&format!(
        "  against the workload's arithmetic ({} waits, one checked read each):\n",
        f.waits * u64::from(f.cpus)
    ));
    out.push_str(&crate::cli::bench::sample::header());
    out.push('\n');
    out.push_str(&f.arithmetic.row(PER_WAIT));
    out.push('\n');
    for (name, c) in &f.cpu_arithmetic {
        out.push_str(&c.row(name));
        out.push('\n');
    }
    out.push_str(&format!(
        "  against the whole trace (its window's instructions {}, a sampled run's within \
         {:.2}%):\n",
        f.whole_instructions,
        100.0 * f.largest_instruction_gap
    ));
    out.push_str(&format!(
        "{} {:>12}\n",
        crate::cli::bench::sample::header(),
        "whole trace"
    ));
    let (mut runs, mut covered, mut not_estimable) = (0, 0, 0);
    for (name, (c, whole)) in &f.by_counter {
        runs += c.runs;
        covered += c.covered;
        not_estimable += c.not_estimable;
        out.push_str(&format!("{} {whole:>12}\n", c.row(name)));
    }
    if !f.by_cpu_counter.is_empty() {
        out.push_str("  each CPU against its share of the whole trace (another run: Linux's own work on each CPU is not the same from run to run):\n");
        for (name, (c, whole)) in &f.by_cpu_counter {
            runs += c.runs;
            covered += c.covered;
            not_estimable += c.not_estimable;
            out.push_str(&format!("{} {whole:>12}\n", c.row(name)));
        }
    }
    if runs + not_estimable > 0 {
        out.push_str(&format!(
            "  all counters: {covered} of {runs} intervals hold the whole trace's count \
             ({:.1}%); {not_estimable} estimates not estimable (n/e: no interval claimed)\n",
            100.0 * covered as f64 / runs.max(1) as f64
        ));
    }
    out.push_str(
        &crate::cli::bench::sample::verdict(crate::cli::bench::sample::worst(all_counters(f))).0,
    );
    out.push_str(&format!(
        "  QEMU wall per boot: traced whole {:.1} s, sampled {:.1} s ({} units a run)\n",
        f.whole_wall.as_secs_f64(),
        f.sampled_wall.as_secs_f64() / f.seeds.max(1) as f64,
        f.units / f.seeds.max(1)
    ));
    out
}
