//! `cargo mtex bench clocks`: whether the guest's clocks hold together on several CPUs. The
//! same Linux window (two futex-hash threads, every instruction of every CPU stepped) is
//! booted again and again, on 2 and 4 CPUs, directly and through the UEFI firmware with the
//! hypervisor installed under it; a run is clean when its window closes and Linux's console
//! reports no stall, lockup or clock trouble (`linux::console_checks`). The stepping makes
//! the CPUs' exits interleave differently from run to run (QEMU's turns fall elsewhere), so
//! one clean run says little: the bench counts many.

use crate::linux::{self, Args, Boot};
use anyhow::Result;
use std::path::Path;
use std::time::{Duration, Instant};

/// The window: two threads, so that both CPUs wait on each other in the kernel.
pub const WORKLOAD: &str = "mtex-work --tcf0 sync --window 1 futex-hash 10 2";

/// One configuration's runs.
pub struct ClockRuns {
    pub cpus: u32,
    pub uefi: bool,
    pub runs: u32,
    pub clean: u32,
    /// The first problem of each run that was not clean.
    pub failures: Vec<String>,
    pub wall: Duration,
    pub slowest: Duration,
}

#[derive(clap::Parser)]
struct Cli {
    #[command(flatten)]
    args: Args,
}

fn args(cpus: u32, uefi: bool, out: &Path) -> Result<Args> {
    use clap::Parser;
    let mut words = vec![
        "linux".to_string(),
        "--cpus".into(),
        cpus.to_string(),
        "--workload".into(),
        WORKLOAD.into(),
        "--out".into(),
        out.display().to_string(),
    ];
    if uefi {
        words.push("--uefi".into());
    }
    Ok(Cli::try_parse_from(words)?.args)
}

/// The first problem of one boot, None when it is clean.
fn run_once(a: &Args, p: &linux::Prepared) -> Option<String> {
    let booted = match linux::boot(a, p, Boot::Measured) {
        Ok(b) => b,
        Err(e) => return Some(format!("{e:#}")),
    };
    let r = booted.console.report();
    let mut problems = linux::console_checks::clock_problems(&booted.linux);
    problems.extend(r.problems.iter().cloned());
    if !r
        .phases
        .iter()
        .any(|p| p.name == "window 1" && p.end.is_some())
    {
        problems.push("window 1 never closed".into());
    }
    problems.into_iter().next()
}

/// Runs `runs` boots of each configuration (`cpus` × `uefi`).
pub fn runs(cpus: &[u32], uefi: &[bool], runs: u32, out: &Path) -> Result<Vec<ClockRuns>> {
    let mut all = Vec::new();
    for &u in uefi {
        for &c in cpus {
            let a = args(c, u, out)?;
            let p = linux::prepare(&a)?;
            let mut r = ClockRuns {
                cpus: c,
                uefi: u,
                runs,
                clean: 0,
                failures: Vec::new(),
                wall: Duration::ZERO,
                slowest: Duration::ZERO,
            };
            for i in 1..=runs {
                let how = if u { " through UEFI" } else { "" };
                eprintln!("mtex: bench clocks: {c} CPUs{how}, run {i} of {runs}");
                let start = Instant::now();
                let failure = run_once(&a, &p);
                let wall = start.elapsed();
                r.wall += wall;
                r.slowest = r.slowest.max(wall);
                match failure {
                    None => r.clean += 1,
                    Some(f) => r.failures.push(format!("run {i}: {f}")),
                }
            }
            all.push(r);
        }
    }
    Ok(all)
}

/// The figures as text.
pub fn render(all: &[ClockRuns]) -> String {
    let mut out = format!(
        "bench clocks: `{WORKLOAD}` in a window, every CPU stepped; a run is clean when the \
         window closes and Linux reports no stall, lockup or clock trouble\n  {:<22} {:>5} \
         {:>6} {:>11} {:>11}\n",
        "machine", "runs", "clean", "mean wall", "slowest"
    );
    for r in all {
        let machine = format!(
            "{} CPUs{}",
            r.cpus,
            if r.uefi { ", through UEFI" } else { "" }
        );
        out.push_str(&format!(
            "  {machine:<22} {:>5} {:>6} {:>10.1}s {:>10.1}s\n",
            r.runs,
            r.clean,
            r.wall.as_secs_f64() / r.runs.max(1) as f64,
            r.slowest.as_secs_f64()
        ));
        for f in &r.failures {
            out.push_str(&format!("    {f}\n"));
        }
    }
    out
}

/// Whether every run was clean.
pub fn all_clean(all: &[ClockRuns]) -> bool {
    all.iter().all(|r| r.clean == r.runs)
}
