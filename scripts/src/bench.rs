//! Benchmarks that print figures (never asserted by tests).

use crate::images::Images;
use crate::qemu::{self, RunConfig};
use crate::report::{self, Report};
use anyhow::{Context, Result, bail};
use std::time::Duration;

/// EL2 instructions per trapped SCTLR_EL1 write, from the `bench-traps` guest program.
pub struct TrapFigures {
    pub n: u64,
    /// EL2 instructions per trapped write on the trap path (vector entry to ERET), framing
    /// of the queued records excluded.
    pub trap_path: f64,
    /// Including the amortised cost of framing the record onto the console.
    pub with_reporting: f64,
    pub wall: Duration,
}

fn el2(r: &Report, phase: &str) -> Result<(u64, u64)> {
    let s = r
        .phase(phase)
        .and_then(|p| p.stats)
        .with_context(|| format!("phase {phase} missing"))?;
    match (s.el2_instructions, s.el2_report_instructions) {
        (Some(total), Some(reporting)) => Ok((total, reporting)),
        _ => bail!("the PMU did not count EL2 instructions (run under -icount)"),
    }
}

/// Runs the bench: phase `bench-n` makes n trapped writes, `bench-2n` 2n; everything else in
/// the two phases is the same, so the difference over n is the cost of one write.
pub fn traps(images: &Images, n: u64) -> Result<TrapFigures> {
    let cfg = RunConfig {
        cmdline: format!("mtex.guest=bench-traps mtex.bench_n={n}"),
        timeout: Duration::from_secs(120),
        ..RunConfig::default()
    };
    let console = qemu::run(images, &cfg)?;
    let r = report::parse(&console.text);
    if !r.succeeded() {
        bail!("bench run failed:\n{}", crate::render::text(&r));
    }
    let (t1, r1) = el2(&r, "bench-n")?;
    let (t2, r2) = el2(&r, "bench-2n")?;
    Ok(TrapFigures {
        n,
        trap_path: ((t2 - r2) as f64 - (t1 - r1) as f64) / n as f64,
        with_reporting: (t2 as f64 - t1 as f64) / n as f64,
        wall: console.wall,
    })
}
