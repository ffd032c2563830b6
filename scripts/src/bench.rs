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

/// What tracing costs.
pub struct TraceFigures {
    /// EL2 instructions per stepped guest instruction over the trace program's workloads
    /// (framing of report records excluded), under -icount shift=0.
    pub el2_per_step: f64,
    /// EL2 exits (steps and others) per traced guest instruction.
    pub exits_per_instruction: f64,
    /// The same two figures with breakpoint runs (`mtex.runs=1`), over the trace program and
    /// over the default program (compiled code).
    pub with_runs_trace: (f64, f64),
    pub default_program: (f64, f64),
    pub default_program_with_runs: (f64, f64),
    /// EL2 instructions per stepped instruction in a long traced loop of tagged loads (the
    /// steady state: phase set-up and reporting amortised away), under -icount shift=0.
    pub el2_per_step_steady: f64,
    pub traced_instructions: u64,
    /// Wall-clock time of the traced phase over the same phase untraced (no -icount).
    pub slowdown: f64,
    /// Guest instructions stepped per second of wall-clock time.
    pub steps_per_second: f64,
    pub n: u64,
}

fn run_ok(images: &Images, cmdline: String, icount: bool) -> Result<Report> {
    let cfg = RunConfig {
        cmdline,
        icount,
        timeout: Duration::from_secs(300),
        ..RunConfig::default()
    };
    let console = qemu::run(images, &cfg)?;
    let r = report::parse(&console.text);
    if !r.succeeded() {
        bail!("bench run failed:\n{}", crate::render::text(&r));
    }
    Ok(r)
}

/// (EL2 instructions per traced instruction, exits per traced instruction, traced
/// instructions) over the traced phases of a run under -icount.
fn per_instruction(images: &Images, cmdline: &str) -> Result<(f64, f64, u64)> {
    let r = run_ok(images, cmdline.into(), true)?;
    let (mut el2, mut instructions, mut exits) = (0u64, 0u64, 0u64);
    for p in &r.phases {
        let (Some(s), Some(t)) = (p.stats, p.trace) else {
            continue;
        };
        let (Some(total), Some(framing)) = (s.el2_instructions, s.el2_report_instructions) else {
            bail!("the PMU did not count EL2 instructions");
        };
        el2 += total - framing;
        instructions += t.instructions_el1 + t.instructions_el0;
        exits += s.step_exits + s.exits;
    }
    let n = instructions.max(1) as f64;
    Ok((el2 as f64 / n, exits as f64 / n, instructions))
}

/// Runs the trace and default programs under -icount for instruction figures (with and
/// without breakpoint runs), and `bench-trace` (n tagged loads untraced, then traced)
/// without it for wall-clock figures.
pub fn trace(images: &Images, n: u64) -> Result<TraceFigures> {
    let (el2_per_step, exits_per_instruction, instructions) =
        per_instruction(images, "mtex.guest=trace")?;
    let with_runs_trace = per_instruction(images, "mtex.guest=trace mtex.runs=1")?;
    let default_program = per_instruction(images, "mtex.guest=controls")?;
    let default_program_with_runs = per_instruction(images, "mtex.guest=controls mtex.runs=1")?;
    let cmdline = format!("mtex.guest=bench-trace mtex.bench_n={n} mtex.watchdog_ms=600000");
    let steady = run_ok(images, cmdline.clone(), true)?;
    let traced_phase = steady.phase("traced").context("phase traced missing")?;
    let (Some(s), Some(t)) = (traced_phase.stats, traced_phase.trace) else {
        bail!("traced phase without figures");
    };
    let el2_per_step_steady = (s.el2_instructions.unwrap_or(0)
        - s.el2_report_instructions.unwrap_or(0)) as f64
        / (t.instructions_el1 + t.instructions_el0) as f64;
    let w = run_ok(images, cmdline, false)?;
    let span = |name: &str| -> Result<u64> {
        let p = w
            .phase(name)
            .with_context(|| format!("phase {name} missing"))?;
        Ok(p.end_ts.context("phase not ended")? - p.begin_ts)
    };
    let (untraced, traced) = (span("untraced")?, span("traced")?);
    let hz = w.boot.map_or(1_000_000_000, |b| b.counter_hz) as f64;
    let stepped = w
        .phase("traced")
        .and_then(|p| p.trace)
        .map_or(0, |t| t.instructions_el1 + t.instructions_el0);
    Ok(TraceFigures {
        el2_per_step,
        exits_per_instruction,
        with_runs_trace: (with_runs_trace.0, with_runs_trace.1),
        default_program: (default_program.0, default_program.1),
        default_program_with_runs: (default_program_with_runs.0, default_program_with_runs.1),
        el2_per_step_steady,
        traced_instructions: instructions,
        slowdown: traced as f64 / untraced.max(1) as f64,
        steps_per_second: stepped as f64 / (traced as f64 / hz),
        n,
    })
}
