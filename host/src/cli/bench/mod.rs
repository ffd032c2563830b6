//! Benchmarks that print figures (never asserted by tests), and the count-equality verdict
//! that the optimised paths count what the reference path counts, next to them.

pub mod check_exact;
pub mod clocks;
pub mod command;
pub mod cpus;
pub mod equality;
pub mod precision;
pub mod sample;
pub mod sample_cost;
pub mod sample_linux;

use crate::images::Images;
use crate::model::report::{self, Report};
use crate::qemu::{self, RunConfig};
use equality::{FAST, FAST_RUNS, KERNEL, MODES, Mode, PLAIN, PROGRAMS};

use anyhow::{Context, Result, bail};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One boot's report and wall time.
pub struct Booted {
    pub report: Report,
    pub wall: Duration,
}

/// Boots the benchmarks share: each (command line, -icount) at most once, so that the
/// figures and the equality verdict come from the same runs.
pub struct Boots<'a> {
    images: &'a Images,
    done: Mutex<HashMap<(String, bool), Arc<Booted>>>,
}

impl<'a> Boots<'a> {
    pub fn new(images: &'a Images) -> Self {
        Self {
            images,
            done: Mutex::default(),
        }
    }

    /// The run of `cmdline` (with or without `-icount shift=0`), booted now unless it was.
    pub fn get(&self, cmdline: &str, icount: bool) -> Result<Arc<Booted>> {
        let key = (cmdline.to_string(), icount);
        if let Some(b) = self.done.lock().unwrap().get(&key) {
            return Ok(b.clone());
        }
        let cfg = RunConfig {
            cmdline: cmdline.to_string(),
            icount,
            timeout: Duration::from_secs(600),
            // The kernel's scenario on several CPUs (`mtex.cpus`) needs them.
            cpus: mtex_abi::scenario::Scenario::parse(cmdline).map_or(1, |s| s.cpus),
            ..RunConfig::default()
        };
        let console = qemu::run(self.images, &cfg)?;
        if console.timed_out {
            bail!("{cmdline}: host time limit hit");
        }
        let b = Arc::new(Booted {
            report: report::parse(&console.text),
            wall: console.wall,
        });
        self.done.lock().unwrap().insert(key, b.clone());
        Ok(b)
    }

    /// Boots every run of `list` not booted yet, `threads` at a time (for runs under
    /// -icount, whose figures do not depend on what else the host runs).
    pub fn prefetch(&self, list: &[(String, bool)], threads: usize) -> Result<()> {
        let next = Mutex::new(list.iter());
        std::thread::scope(|s| {
            let workers: Vec<_> = (0..threads.max(1))
                .map(|_| {
                    s.spawn(|| -> Result<()> {
                        loop {
                            let Some((line, icount)) = next.lock().unwrap().next() else {
                                return Ok(());
                            };
                            self.get(line, *icount)?;
                        }
                    })
                })
                .collect();
            workers
                .into_iter()
                .try_for_each(|w| w.join().expect("a bench thread panicked"))
        })
    }

    /// A run that must have succeeded.
    pub(crate) fn ok(&self, cmdline: &str, icount: bool) -> Result<Arc<Booted>> {
        let b = self.get(cmdline, icount)?;
        if !b.report.succeeded() {
            bail!(
                "bench run {cmdline} failed:\n{}",
                crate::output::matrix::text(&b.report)
            );
        }
        Ok(b)
    }
}

/// The fast paths as a run gets them by default: with or without breakpoint runs, as
/// `mtex.runs` defaults.
pub fn default_fast() -> Mode {
    let defaults = mtex_abi::options::HypOptions::parse("").expect("the defaults parse");
    if defaults.runs { FAST_RUNS } else { FAST }
}

/// `line` in `mode`.
fn with(line: &str, mode: Mode) -> String {
    format!("{line} {}", mode.opts)
}

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

fn traps_line(n: u64, mode: Mode) -> String {
    with(&format!("mtex.guest=bench-traps mtex.bench_n={n}"), mode)
}

/// Runs the bench in `mode`: phase `bench-n` makes n trapped writes, `bench-2n` 2n;
/// everything else in the two phases is the same, so the difference over n is the cost of
/// one write.
pub fn traps(boots: &Boots, n: u64, mode: Mode) -> Result<TrapFigures> {
    let b = boots.ok(&traps_line(n, mode), true)?;
    let r = &b.report;
    let (t1, r1) = el2(r, "bench-n")?;
    let (t2, r2) = el2(r, "bench-2n")?;
    Ok(TrapFigures {
        n,
        trap_path: ((t2 - r2) as f64 - (t1 - r1) as f64) / n as f64,
        with_reporting: (t2 as f64 - t1 as f64) / n as f64,
        wall: b.wall,
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

/// EL2 instructions and exits per traced guest instruction over the traced phases of a run
/// under -icount, framing of report records excluded.
#[derive(Clone, Copy, Debug, Default)]
pub struct PerInstruction {
    pub el2: f64,
    pub exits: f64,
    /// Traced guest instructions (EL1 and EL0).
    pub instructions: u64,
}

fn per_instruction(r: &Report) -> Result<PerInstruction> {
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
    Ok(PerInstruction {
        el2: el2 as f64 / n,
        exits: exits as f64 / n,
        instructions,
    })
}

fn per_instruction_of(boots: &Boots, cmdline: &str) -> Result<PerInstruction> {
    per_instruction(&boots.ok(cmdline, true)?.report)
}

/// Runs the trace and default programs under -icount for instruction figures (with and
/// without breakpoint runs), and `bench-trace` (n tagged loads untraced, then traced)
/// without it for wall-clock figures.
pub fn trace(boots: &Boots, n: u64) -> Result<TraceFigures> {
    let trace = per_instruction_of(boots, &with("mtex.guest=trace", default_fast()))?;
    let with_runs_trace = per_instruction_of(boots, &with("mtex.guest=trace", FAST_RUNS))?;
    let default_program = per_instruction_of(boots, &with("mtex.guest=controls", default_fast()))?;
    let default_program_with_runs =
        per_instruction_of(boots, &with("mtex.guest=controls", FAST_RUNS))?;
    let cmdline = format!("mtex.guest=bench-trace mtex.bench_n={n} mtex.watchdog_ms=600000");
    let steady = boots.ok(&cmdline, true)?;
    let traced_phase = steady
        .report
        .phase("traced")
        .context("phase traced missing")?;
    let (Some(s), Some(t)) = (traced_phase.stats, traced_phase.trace) else {
        bail!("traced phase without figures");
    };
    let el2_per_step_steady = (s.el2_instructions.unwrap_or(0)
        - s.el2_report_instructions.unwrap_or(0)) as f64
        / (t.instructions_el1 + t.instructions_el0) as f64;
    let w = &boots.ok(&cmdline, false)?.report;
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
        el2_per_step: trace.el2,
        exits_per_instruction: trace.exits,
        with_runs_trace: (with_runs_trace.el2, with_runs_trace.exits),
        default_program: (default_program.el2, default_program.exits),
        default_program_with_runs: (
            default_program_with_runs.el2,
            default_program_with_runs.exits,
        ),
        el2_per_step_steady,
        traced_instructions: trace.instructions,
        slowdown: traced as f64 / untraced.max(1) as f64,
        steps_per_second: stepped as f64 / (traced as f64 / hz),
        n,
    })
}

/// Wall-clock time of the kernel matrix's phases traced over the same phases untraced, from
/// the phases' begin and end timestamps (counter ticks), without -icount, in one boot:
/// `mtex.trace=both` runs each (policy, workload) untraced, then traced.
pub struct Slowdown {
    pub traced_s: f64,
    pub untraced_s: f64,
    pub phases: usize,
    /// Wall time of the boot, whole.
    pub traced_boot: Duration,
}

impl Slowdown {
    pub fn ratio(&self) -> f64 {
        self.traced_s / self.untraced_s.max(f64::MIN_POSITIVE)
    }
}

/// (seconds inside the traced phases, inside their runs' first untraced passes, traced
/// phases) of a run, by the guest's counter.
fn phase_seconds(r: &Report) -> Result<(f64, f64, usize)> {
    let hz = r.boot.map_or(1_000_000_000, |b| b.counter_hz) as f64;
    let (mut traced, mut untraced, mut n) = (0, 0, 0);
    for p in &r.phases {
        let end = p
            .end_ts
            .with_context(|| format!("phase {} never ended", p.name))?;
        let pass = p
            .untraced
            .as_ref()
            .and_then(|u| u.runs.first())
            .filter(|_| p.trace.is_some())
            .with_context(|| format!("phase {}: expected an untraced pass, then traced", p.name))?;
        let pass_end = pass
            .end_ts
            .with_context(|| format!("phase {}: its untraced pass never ended", p.name))?;
        traced += end - p.begin_ts;
        untraced += pass_end - pass.begin_ts;
        n += 1;
    }
    Ok((traced as f64 / hz, untraced as f64 / hz, n))
}

pub fn slowdown(boots: &Boots, mode: Mode) -> Result<Slowdown> {
    let both = boots.ok(&format!("{} mtex.trace=both", with(KERNEL, mode)), false)?;
    let (traced_s, untraced_s, phases) = phase_seconds(&both.report)?;
    Ok(Slowdown {
        traced_s,
        untraced_s,
        phases,
        traced_boot: both.wall,
    })
}

/// The count-equality check: every program of [`PROGRAMS`] in every mode against
/// [`PLAIN`].
pub struct Verdict {
    pub phases: usize,
    pub programs: usize,
    /// Counts that differ (the first field of each phase, the first few phases of a run):
    /// empty when every count is equal.
    pub differences: Vec<String>,
    /// What makes a run unusable as evidence (a report problem, a lost breakpoint run).
    pub problems: Vec<String>,
    /// Programs left out in a mode, and why (`equality::RESTRICTED`).
    pub not_compared: Vec<String>,
}

impl Verdict {
    pub fn holds(&self) -> bool {
        self.differences.is_empty() && self.problems.is_empty()
    }
}

/// The first few `lines` of a run, each prefixed with `what`: a systematic fault repeats on
/// every phase.
fn first_few(what: &str, mut lines: Vec<String>) -> Vec<String> {
    let more = lines.len().saturating_sub(SHOWN_PER_RUN);
    lines.truncate(SHOWN_PER_RUN);
    if more > 0 {
        lines.push(format!("... and {more} more"));
    }
    lines.into_iter().map(|l| format!("{what}: {l}")).collect()
}

/// Differences and problems printed per run.
const SHOWN_PER_RUN: usize = 4;

fn equality_lines() -> Vec<(String, bool)> {
    PROGRAMS
        .iter()
        .flat_map(|(name, line)| {
            let (modes, _) = equality::modes_of(name);
            modes.iter().map(move |&m| (with(line, m), true))
        })
        .collect()
}

pub fn equality(boots: &Boots) -> Result<Verdict> {
    let mut v = Verdict {
        phases: 0,
        programs: PROGRAMS.len(),
        differences: Vec::new(),
        problems: Vec::new(),
        not_compared: Vec::new(),
    };
    for (name, line) in PROGRAMS {
        let reference = boots.get(&with(line, PLAIN), true)?;
        let (modes, why) = equality::modes_of(name);
        if let Some(why) = why {
            for mode in MODES.iter().filter(|m| !modes.contains(m)) {
                v.not_compared
                    .push(format!("{name}, {}: by design ({why})", mode.opts));
            }
        }
        for &mode in modes {
            let b = boots.get(&with(line, mode), true)?;
            let what = format!("{name}, {}", mode.opts);
            let problems = equality::run_problems(&b.report);
            v.problems.extend(first_few(&what, problems));
            if mode != PLAIN {
                let c = equality::compare(&reference.report, &b.report, mode);
                v.phases += c.phases;
                v.differences.extend(first_few(&what, c.differences));
            }
        }
    }
    Ok(v)
}

/// The cost figures in one place.
pub struct Headline {
    pub traps: Vec<(Mode, TrapFigures)>,
    /// (program, mode, figures) on the trace program and the kernel matrix.
    pub per_instruction: Vec<(&'static str, Mode, PerInstruction)>,
    pub slowdown: Vec<(Mode, Slowdown)>,
    pub verdict: Verdict,
}

/// Boots everything under -icount first (two at a time: exact figures whatever else runs),
/// then the wall-clock runs one at a time.
pub fn headline(boots: &Boots, traps_n: u64) -> Result<Headline> {
    let mut icount: Vec<(String, bool)> = [default_fast(), PLAIN]
        .iter()
        .map(|&m| (traps_line(traps_n, m), true))
        .collect();
    icount.extend(equality_lines());
    boots.prefetch(&icount, 2)?;
    let mut h = Headline {
        traps: Vec::new(),
        per_instruction: Vec::new(),
        slowdown: Vec::new(),
        verdict: equality(boots)?,
    };
    for mode in [default_fast(), PLAIN] {
        h.traps.push((mode, traps(boots, traps_n, mode)?));
    }
    for (what, line) in [
        ("trace program", "mtex.guest=trace"),
        ("kernel matrix", KERNEL),
    ] {
        for mode in [FAST, FAST_RUNS, PLAIN] {
            let f = per_instruction(&boots.get(&with(line, mode), true)?.report)?;
            h.per_instruction.push((what, mode, f));
        }
    }
    for mode in [FAST, FAST_RUNS, PLAIN] {
        h.slowdown.push((mode, slowdown(boots, mode)?));
    }
    Ok(h)
}

/// `step=fast runs=1` for `mtex.step=fast mtex.runs=1`, `*` marking the default.
pub fn mode_name(mode: Mode) -> String {
    let name = mode.opts.replace("mtex.", "");
    if mode == default_fast() {
        name + "*"
    } else {
        name
    }
}

fn goal(met: bool) -> &'static str {
    if met { "met" } else { "not met" }
}

/// The cost goals.
pub const GOAL_TRAP: f64 = 50.0;
pub const GOAL_EL2_PER_INSTRUCTION: f64 = 60.0;
pub const GOAL_EXITS_PER_INSTRUCTION: f64 = 0.25;
pub const STRETCH_EXITS_PER_INSTRUCTION: f64 = 0.05;
pub const GOAL_SLOWDOWN: f64 = 40.0;

/// The figures and the verdict as `cargo mtex bench` prints them first (within 100 columns).
pub fn render_headline(h: &Headline, traps_n: u64) -> String {
    use std::fmt::Write;
    let mut o = String::new();
    let _ = writeln!(
        o,
        "mtex bench: the hypervisor's cost on QEMU (instruction counts under -icount shift=0: exact)"
    );
    let _ = writeln!(
        o,
        "\nEL2 instructions per trapped SCTLR_EL1 write, entry to ERET ({traps_n} + {} writes)",
        2 * traps_n
    );
    for (mode, f) in &h.traps {
        let _ = writeln!(
            o,
            "  {:<18} {:>8.1}    goal ≤ {GOAL_TRAP}: {}",
            mode_name(*mode),
            f.trap_path,
            goal(f.trap_path <= GOAL_TRAP)
        );
    }
    let _ = writeln!(
        o,
        "\nPer traced guest instruction, framing of records excluded (goals: EL2 instructions \
         ≤ {GOAL_EL2_PER_INSTRUCTION},\n  exits ≤ {GOAL_EXITS_PER_INSTRUCTION}, \
         stretch ≤ {STRETCH_EXITS_PER_INSTRUCTION})"
    );
    let _ = writeln!(
        o,
        "  {:<15}{:<18}{:>9}{:>9}{:>13}   goals (EL2, exits)",
        "", "", "EL2 instr", "exits", "traced instr"
    );
    let mut last = "";
    for (what, mode, f) in &h.per_instruction {
        let exits = if f.exits <= STRETCH_EXITS_PER_INSTRUCTION {
            "stretch met"
        } else {
            goal(f.exits <= GOAL_EXITS_PER_INSTRUCTION)
        };
        let _ = writeln!(
            o,
            "  {:<15}{:<18}{:>9.1}{:>9.3}{:>13}   {}, {exits}",
            if *what == last { "" } else { what },
            mode_name(*mode),
            f.el2,
            f.exits,
            f.instructions,
            goal(f.el2 <= GOAL_EL2_PER_INSTRUCTION),
        );
        last = what;
    }
    let _ = writeln!(
        o,
        "\nWall-clock slowdown of traced vs untraced phases, kernel matrix, no -icount \
         (goal ≤ {GOAL_SLOWDOWN}x)"
    );
    let _ = writeln!(
        o,
        "  one boot, `mtex.trace=both` (each run untraced, then traced); phase begin/end timestamps"
    );
    for (mode, s) in &h.slowdown {
        let _ = writeln!(
            o,
            "  {:<18} {} phases: traced {:.2} s, untraced {:.3} s: {:.0}x {} (boot {:.1} s)",
            mode_name(*mode),
            s.phases,
            s.traced_s,
            s.untraced_s,
            s.ratio(),
            goal(s.ratio() <= GOAL_SLOWDOWN),
            s.traced_boot.as_secs_f64()
        );
    }
    let _ = writeln!(
        o,
        "  (* the default: mtex.step=fast, mtex.runs as it defaults)"
    );
    let v = &h.verdict;
    let modes: Vec<String> = MODES[1..].iter().map(|&m| mode_name(m)).collect();
    let _ = writeln!(
        o,
        "\nCount equality, {} programs, {} against {}:\n  trace counts (not runs, \
         runs_lost), PMU EL1 (where both step everything) and EL0 instructions,\n  \
         trapped writes in order, TCO sites; no run may lose a run or report a problem",
        v.programs,
        modes.join(" and "),
        mode_name(PLAIN)
    );
    if v.differences.is_empty() {
        let _ = writeln!(o, "counts equal: yes ({} phases compared)", v.phases);
    } else {
        let _ = writeln!(o, "counts equal: NO ({} phases compared)", v.phases);
        for d in &v.differences {
            let _ = writeln!(o, "  {d}");
        }
    }
    if !v.not_compared.is_empty() {
        let _ = writeln!(
            o,
            "not compared, as the equality tests do not compare them:"
        );
        for n in &v.not_compared {
            let _ = writeln!(o, "  {n}");
        }
    }
    if !v.problems.is_empty() {
        let _ = writeln!(o, "runs with problems (not evidence until fixed):");
        for p in &v.problems {
            let _ = writeln!(o, "  {p}");
        }
    }
    o
}

/// What the per-PC profile (`mtex.profile=1`) costs, on one program in one mode: EL2
/// instructions and exits per traced instruction without it and with it, its records, and
/// the wall time of the boot (under -icount, the same guest work both ways).
pub struct ProfileCost {
    pub what: &'static str,
    pub mode: Mode,
    /// "on" follows call stacks too (`mtex.stacks=1`, which steps every instruction whatever
    /// the mode): its cost against the default mode without either.
    pub stacks: bool,
    pub off: PerInstruction,
    pub on: PerInstruction,
    /// PcProfile records sent, and distinct PCs, over the run's traced phases.
    pub records: u64,
    pub pcs: u64,
    pub wall: (Duration, Duration),
}

impl ProfileCost {
    /// EL2 instructions per traced instruction, with the profile over without.
    pub fn ratio(&self) -> f64 {
        self.on.el2 / self.off.el2.max(f64::MIN_POSITIVE)
    }
}

/// The profile's cost on the trace program and the kernel matrix, with runs (the default)
/// and stepping every instruction.
pub fn profile_cost(boots: &Boots) -> Result<Vec<ProfileCost>> {
    let mut out = Vec::new();
    let programs = [
        ("trace program", "mtex.guest=trace"),
        ("kernel matrix", KERNEL),
    ];
    // (mode, what "on" adds)
    let variants = [
        (FAST_RUNS, "mtex.profile=1"),
        (FAST, "mtex.profile=1"),
        (FAST_RUNS, "mtex.stacks=1"),
    ];
    let mut lines = Vec::new();
    for (_, line) in programs {
        for (mode, extra) in variants {
            lines.push((with(line, mode), true));
            lines.push((format!("{} {extra}", with(line, mode)), true));
        }
    }
    boots.prefetch(&lines, 2)?;
    for (what, line) in programs {
        for (mode, extra) in variants {
            let off = boots.ok(&with(line, mode), true)?;
            let on = boots.ok(&format!("{} {extra}", with(line, mode)), true)?;
            let (mut records, mut pcs) = (0, 0);
            for e in on
                .report
                .phases
                .iter()
                .filter_map(|p| p.profile.as_ref()?.end)
            {
                records += e.records as u64;
                pcs += e.pcs as u64;
            }
            out.push(ProfileCost {
                what,
                mode,
                stacks: extra == "mtex.stacks=1",
                off: per_instruction(&off.report)?,
                on: per_instruction(&on.report)?,
                records,
                pcs,
                wall: (off.wall, on.wall),
            });
        }
    }
    Ok(out)
}

/// The profile's cost as `cargo mtex bench profile` prints it.
pub fn render_profile_cost(costs: &[ProfileCost]) -> String {
    use std::fmt::Write;
    let mut o = String::from(
        "mtex bench profile: what mtex.profile=1 and mtex.stacks=1 cost (EL2 instructions per \
         traced instruction under -icount shift=0: exact)\n\n",
    );
    let _ = writeln!(
        o,
        "{:<14} {:<26} {:>8} {:>8} {:>6} {:>9} {:>9} {:>7} {:>7} {:>8}",
        "program",
        "mode",
        "EL2 off",
        "EL2 on",
        "ratio",
        "exits off",
        "exits on",
        "PCs",
        "records",
        "wall on"
    );
    for c in costs {
        let _ = writeln!(
            o,
            "{:<14} {:<26} {:>8.1} {:>8.1} {:>5.2}x {:>9.3} {:>9.3} {:>7} {:>7} {:>7.1}s",
            c.what,
            if c.stacks {
                format!("{} +stacks", mode_name(c.mode))
            } else {
                mode_name(c.mode)
            },
            c.off.el2,
            c.on.el2,
            c.ratio(),
            c.off.exits,
            c.on.exits,
            c.pcs,
            c.records,
            c.wall.1.as_secs_f64()
        );
    }
    o
}
