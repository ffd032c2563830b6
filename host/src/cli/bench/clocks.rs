//! `cargo mtex bench clocks`: whether the guest's clocks hold together on several CPUs. The
//! same Linux window (two futex-hash threads, every instruction of every CPU stepped) is
//! booted again and again, on 2 and 4 CPUs, directly and through the UEFI firmware with the
//! hypervisor installed under it; a run is clean when its window closes and Linux's console
//! reports no stall, lockup or clock trouble (`linux::console_checks`). The stepping makes
//! the CPUs' exits interleave differently from run to run (QEMU's turns fall elsewhere), so
//! one clean run says little: the bench counts many.

use crate::linux::interrupt_rate as rate;
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
    /// The most interrupts a run's window took per CPU and second of its guest time, and
    /// that run's interrupts.
    pub irq_rate: f64,
    pub irqs: u64,
}

/// What one boot did: its first problem (None when clean), and its window's interrupts with
/// their rate per CPU-second of guest time.
struct Outcome {
    failure: Option<String>,
    irqs: u64,
    irq_rate: f64,
}

#[derive(clap::Parser)]
struct Cli {
    #[command(flatten)]
    args: Args,
}

fn args(cpus: u32, uefi: bool, timeout: u64, out: &Path) -> Result<Args> {
    use clap::Parser;
    let mut words = vec![
        "linux".to_string(),
        "--cpus".into(),
        cpus.to_string(),
        "--workload".into(),
        WORKLOAD.into(),
        "--out".into(),
        out.display().to_string(),
        "--timeout".into(),
        timeout.to_string(),
    ];
    if uefi {
        words.push("--uefi".into());
    }
    Ok(Cli::try_parse_from(words)?.args)
}

/// One boot: clean when its window closed, nothing was wrong, and its interrupts were not
/// far above the kernel's tick (a storm: the guest's clock ran ahead of its work).
/// A run that is not clean leaves its consoles in `keep` (`….linux.log`, `….hyp.log`) and
/// every reason it was not (`….why.txt`: a host kill names where each CPU was): what Linux
/// and the hypervisor said is what tells one stall from another.
fn run_once(a: &Args, p: &linux::Prepared, keep: &Path) -> Outcome {
    let booted = match linux::boot(a, p, Boot::Measured) {
        Ok(b) => b,
        Err(e) => {
            return Outcome {
                failure: Some(format!("{e:#}")),
                irqs: 0,
                irq_rate: 0.0,
            };
        }
    };
    let r = booted.console.report();
    let mut problems = linux::console_checks::clock_problems(&booted.linux);
    problems.extend(r.problems.iter().cloned());
    let hz = r.boot.map_or(1, |b| b.counter_hz.max(1)) as f64;
    let window = r
        .phases
        .iter()
        .find(|p| p.name == "window 1" && p.end.is_some());
    let (mut irqs, mut irq_rate) = (0, 0.0);
    match window {
        None => problems.push("window 1 never closed".into()),
        Some(w) => {
            let entries = w.trace.map(|t| t.entries).unwrap_or_default();
            irqs = entries.irq_el0 + entries.irq_el1;
            if let (Some(b), Some(e)) = (w.begin_guest_clock, w.end_guest_clock) {
                let ms = e.saturating_sub(b) as f64 * 1000.0 / hz;
                irq_rate = rate::per_cpu_second(irqs, ms, w.cpus.len());
            }
            // The kernel's own tick, as its report judges it (the highest Linux offers when
            // its configuration cannot be read).
            let tick = std::fs::read_to_string(&p.kernel.config)
                .ok()
                .and_then(|c| rate::config_hz(&c))
                .unwrap_or(rate::HIGHEST_TICK);
            if rate::far_above(irqs, irq_rate, tick) {
                problems.push(format!(
                    "{irqs} interrupts in the window, {irq_rate:.0} per CPU-second of guest \
                     time: more than {} times the kernel's tick of {tick} a second",
                    rate::TICKS_FAR_ABOVE
                ));
            }
        }
    }
    let failure = problems.first().cloned();
    if failure.is_some() {
        if let Some(dir) = keep.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let _ = std::fs::write(keep.with_extension("linux.log"), &booted.linux);
        let _ = std::fs::write(keep.with_extension("hyp.log"), &booted.console.text);
        // Every reason, the host's kill and where each CPU was among them.
        let _ = std::fs::write(keep.with_extension("why.txt"), problems.join("\n") + "\n");
    }
    Outcome {
        failure,
        irqs,
        irq_rate,
    }
}

/// Runs `runs` boots of each configuration (`cpus` × `uefi`).
pub fn runs(
    cpus: &[u32],
    uefi: &[bool],
    runs: u32,
    timeout: u64,
    out: &Path,
) -> Result<Vec<ClockRuns>> {
    let mut all = Vec::new();
    for &u in uefi {
        for &c in cpus {
            let a = args(c, u, timeout, out)?;
            let p = linux::prepare(&a)?;
            let mut r = ClockRuns {
                cpus: c,
                uefi: u,
                runs,
                clean: 0,
                failures: Vec::new(),
                wall: Duration::ZERO,
                slowest: Duration::ZERO,
                irq_rate: 0.0,
                irqs: 0,
            };
            for i in 1..=runs {
                let how = if u { " through UEFI" } else { "" };
                eprintln!("mtex: bench clocks: {c} CPUs{how}, run {i} of {runs}");
                let start = Instant::now();
                let keep = out.join(format!(
                    "unclean-{c}-cpus{}-run-{i}",
                    if u { "-uefi" } else { "" }
                ));
                let outcome = run_once(&a, &p, &keep);
                let wall = start.elapsed();
                r.wall += wall;
                r.slowest = r.slowest.max(wall);
                if outcome.irq_rate > r.irq_rate {
                    (r.irq_rate, r.irqs) = (outcome.irq_rate, outcome.irqs);
                }
                if let Some(f) = &outcome.failure {
                    // Said at once: a batch of runs takes long, and a hang shows here first.
                    eprintln!("mtex: bench clocks: run {i} unclean: {f}");
                }
                match outcome.failure {
                    None => r.clean += 1,
                    Some(f) => r.failures.push(format!(
                        "run {i}: {f} (consoles: {})",
                        keep.with_extension("*.log").display()
                    )),
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
         window closes, Linux reports no stall, lockup or clock trouble, and the window's \
         interrupts stay within 4 times the kernel's tick (its CONFIG_HZ, per CPU-second of \
         guest time)\n  {:<22} {:>5} {:>6} {:>11} {:>11} {:>22}\n",
        "machine", "runs", "clean", "mean wall", "slowest", "most IRQ/CPU-s (IRQs)"
    );
    for r in all {
        let machine = format!(
            "{} CPUs{}",
            r.cpus,
            if r.uefi { ", through UEFI" } else { "" }
        );
        out.push_str(&format!(
            "  {machine:<22} {:>5} {:>6} {:>10.1}s {:>10.1}s {:>22}\n",
            r.runs,
            r.clean,
            r.wall.as_secs_f64() / r.runs.max(1) as f64,
            r.slowest.as_secs_f64(),
            format!("{:.0} ({})", r.irq_rate, r.irqs)
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
