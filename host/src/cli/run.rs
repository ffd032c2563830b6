//! `mtex run`: a scenario file, or one guest program, booted and judged; the report printed
//! in the form asked for and a results directory written.

use crate::cli::{esp, write_stdout};
use crate::images;
use crate::output::{self, Form};
use crate::qemu;
use crate::scenario;
use anyhow::Result;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// What `mtex run --help` lists after the options: the scenario file's keys, the policies
/// and the workloads, in the spellings the scenario file and --opt take (from the parsers'
/// own tables, so the list cannot go stale).
pub fn help() -> String {
    use mtex_abi::scenario::{TOKENS, Tcf, Workload};
    let workloads: Vec<&str> = Workload::ALL.iter().map(|(n, _)| *n).collect();
    let modes: Vec<&str> = Tcf::ALL.iter().map(|(n, _)| *n).collect();
    format!(
        "Scenario file (TOML, version 1; docs/scenarios.md):\n  \
         version, name, description\n  \
         [[run]] of the built-in guest: name, policies, workloads, tcf0, hz, cpus, repeat, \
         backend, trace, breakpoint_runs, watchdog_ms, pmu_events, pmu_require, sample\n  \
         [[run]] that boots kernels: name, kernels, workloads, tcf0, append, repeat \
         ([kernels] names them; run with `mtex linux`'s defaults)\n  \
         [[expect]]: counter, workload, tcf0, run, from_run, to_run, from and to | policy | \
         kernel, drop_at_least | rise_at_most | fewer_by_at_least | equal | at_least | \
         at_most\n\n\
         Policies (tokens joined by +): {}\n\n\
         Workloads (with :iters=N :size=N :tasks=N :tcf0=MODE): {}\n\n\
         User modes (tcf0): {}",
        TOKENS.join(", "),
        workloads.join(", "),
        modes.join(", ")
    )
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogLevel {
    Off,
    Error,
    Warn,
    Info,
    Debug,
    Trace,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum OnOff {
    On,
    Off,
}

#[derive(clap::Args)]
pub struct Args {
    /// A scenario file (TOML, docs/scenarios.md): runs, repeats, expectations.
    pub scenario: Option<PathBuf>,
    /// Guest program instead of a scenario: kernel (policies x workloads from --opt),
    /// controls, trace, differential, el0, unknown-hvc, touch-hyp, spin, bench-traps,
    /// bench-trace, exclusive-loop, hostile-*.
    #[arg(long)]
    pub guest: Option<String>,
    /// More `mtex.<key>=<value>` options for --guest (e.g. --opt policies=entry-tco,tcma1
    /// --opt workloads=futex-hash:iters=64; keys: policies, workloads, tcf0, hz,
    /// watchdog_ms, traps, runs, step, guest_time, bench_n, sample, sample_seed).
    #[arg(long = "opt", value_name = "KEY=VALUE")]
    pub opts: Vec<String>,
    /// Also write report.json (schema mtex-report v2) to this file (checked for writing
    /// before the run).
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// The report's form on stdout: text (the summary: per workload, policies x the
    /// headline counters; 100 columns), full (the summary, then every phase's counters in
    /// perf stat's manner, the trapped writes and the guest console: report.txt), matrix
    /// (the wide tables), csv, json, html (the results page).
    #[arg(long, value_enum, default_value = "text")]
    pub format: Form,
    /// Print the full report (--format full).
    #[arg(long, short, conflicts_with = "format")]
    pub verbose: bool,
    /// Where results directories go (each run makes NAME-N inside).
    #[arg(long, default_value = "mtex-results")]
    pub out: PathBuf,
    /// Diagnostics of the hypervisor and the guest (the log crate) shown as console lines,
    /// up to this level (mtex.log; default warn). The guest logs only between phases.
    #[arg(long, value_enum)]
    pub log: Option<LogLevel>,
    /// Host time limit in seconds, at least 1. Default: long enough for the guest's
    /// watchdog to end the run first (30 s + 200 x the budget under -icount, 2 x without);
    /// a run whose guest clock stops, or passes the budget, is ended at once either way.
    #[arg(long, allow_negative_numbers = true,
        value_parser = crate::input::number_in(1u64, u64::MAX))]
    pub timeout: Option<u64>,
    /// Run without -icount (faster, no instruction counts, not deterministic).
    #[arg(long)]
    pub no_icount: bool,
    /// Print the raw console too.
    #[arg(long)]
    pub raw: bool,
    /// Boot through UEFI: Debian's edk2 firmware runs the ESP tree `mtex esp` writes (in
    /// a temporary directory), whose loader chain-loads the hypervisor, as on a server.
    #[arg(long)]
    pub uefi: bool,
    /// With --uefi: firmware describes the machine with ACPI only (on, as servers do) or
    /// with a device tree (off).
    #[arg(long, value_enum, default_value = "on", requires = "uefi")]
    pub acpi: OnOff,
    /// Machine RAM in MiB (QEMU -m). Default 512, or 1024 with --uefi (firmware's share).
    #[arg(long, allow_negative_numbers = true,
        value_parser = crate::input::number_in(512u32, 65536))]
    pub memory: Option<u32>,
    /// Also count every traced phase with the oracle, a QEMU plugin (oracle/) counting
    /// from QEMU's own hooks, and check the trace against it: any difference is a problem.
    /// QEMU 10.0 checks no tags on the accesses it hooks, so no tag-check fault happens.
    #[arg(long)]
    pub oracle: bool,
    /// With sampled phases (--opt sample=UNIT:GAP_US, a scenario's sample key): run the
    /// same again traced whole, and print each estimate beside the exact count, its error,
    /// and whether its 95% interval holds it (docs/sampling.md). Needs -icount.
    #[arg(long, conflicts_with = "no_icount")]
    pub check_exact: bool,
    /// With sampled phases: the precision asked of each one's estimate of the kernel's
    /// checked reads (1%, 0.5): says whether it was reached and, where not, how many
    /// units (and what gap) would reach it. The units stay spread over the whole phase.
    #[arg(long, value_parser = crate::cli::bench::precision::parse)]
    pub precision: Option<f64>,
    /// Also count every traced phase by PC, and report where its checks are: the
    /// functions that make them, a folded-stacks file and a flame graph per counter
    /// (docs/profile.md). Costs the trace about a sixth more EL2 time.
    #[arg(long)]
    pub profile: bool,
    /// With --profile, follow the kernel's call stacks too: folded stacks and flame graphs
    /// by stack, and each function's system call or exception entry (docs/profile.md).
    /// Steps every instruction (no runs, no fast path): the trace costs more.
    #[arg(long)]
    pub stacks: bool,
}

pub fn run(args: Args) -> Result<ExitCode> {
    let args_given = given(&args);
    let Args {
        scenario,
        guest,
        opts,
        json,
        format,
        verbose,
        out,
        log,
        timeout,
        no_icount,
        raw,
        uefi,
        acpi,
        memory,
        oracle,
        check_exact,
        precision,
        profile,
        stacks,
    } = args;
    // Bad input is found here, before anything is built or booted.
    let plan = match (scenario, guest.is_some() || !opts.is_empty()) {
        (Some(_), true) => anyhow::bail!(
            "give a scenario file or --guest/--opt, not both (a scenario file says \
             everything in its [[run]] tables)"
        ),
        (Some(path), false) => {
            let plan = scenario::file::load(&path)?;
            if plan.boots_kernels() {
                return kernels_file(&path, &out, &args_given);
            }
            plan
        }
        (None, true) => {
            let g = guest.unwrap_or_else(|| "kernel".to_string());
            scenario::file::ScenarioFile::single(&g, qemu::cmdline(&g, &opts)?)
        }
        (None, false) => {
            scenario::file::load(&images::workspace_root().join("scripts/scenarios/default.toml"))?
        }
    };
    // A per-PC profile follows one CPU: the kernel on several would have every phase
    // refused.
    if profile || stacks {
        for r in plan.runs.iter().filter_map(|r| r.guest()) {
            if let Ok(s) = mtex_abi::scenario::Scenario::parse(&r.cmdline)
                && s.cpus > 1
                && r.cmdline.contains("mtex.guest=kernel")
            {
                anyhow::bail!(
                    "--profile/--stacks with the kernel on {} CPUs (mtex.cpus): a per-PC \
                     profile follows one CPU; profile the kernel on one CPU",
                    s.cpus
                );
            }
        }
    }
    if (check_exact || precision.is_some())
        && !plan
            .runs
            .iter()
            .filter_map(|r| r.guest())
            .any(|r| r.cmdline.contains("mtex.sample="))
    {
        anyhow::bail!(
            "--check-exact and --precision are about sampled phases: give --opt \
             sample=UNIT:GAP_US (or a scenario whose runs set sample)"
        );
    }
    let mut json = crate::output::json::JsonOut::open(json.as_deref())?;
    let images = images::build()?;
    let loader = uefi.then(images::build_loader).transpose()?;
    let dir = scenario::run::results_dir(&out, &plan.name)?;
    let oracle_plugin = oracle.then(images::build_oracle).transpose()?;
    let boots = std::cell::Cell::new(0u32);
    let configure = |mut cfg: qemu::RunConfig| -> Result<(qemu::RunConfig, scenario::run::Keep)> {
        cfg.icount = !no_icount;
        if profile || stacks {
            cfg.cmdline.push_str(" mtex.profile=1");
        }
        if stacks {
            cfg.cmdline.push_str(" mtex.stacks=1");
        }
        if let Some(level) = log {
            let name = format!("{level:?}").to_lowercase();
            cfg.cmdline = format!("{} mtex.log={name}", cfg.cmdline);
        }
        if no_icount {
            cfg.timeout = qemu::default_timeout(
                cfg.watch_budget_ms.unwrap_or(qemu::KERNEL_WATCHDOG_MS),
                false,
            );
        }
        if let Some(s) = timeout {
            cfg.timeout = Duration::from_secs(s);
        }
        // Kept until the boot ends: QEMU reads the ESP from it.
        let mut keep = None;
        if let Some(loader) = &loader {
            let esp_dir = qemu::TempDir::new("esp")?;
            esp::write(
                esp_dir.path(),
                &images,
                loader,
                &cfg.cmdline,
                esp::OnError::Shutdown,
            )?;
            cfg = cfg.through_uefi(esp_dir.path(), acpi == OnOff::On);
            keep = Some(esp_dir);
        }
        if let Some(m) = memory {
            cfg.memory_mib = m;
        }

        if let Some(plugin) = &oracle_plugin {
            boots.set(boots.get() + 1);
            cfg.oracle = Some(crate::oracle_check::OracleRun {
                plugin: plugin.clone(),
                out: dir.join(format!("oracle-{}.txt", boots.get())),
                shares: false,
            });
        }
        Ok((cfg, keep))
    };
    let (doc, reports) = scenario::run::run(&plan, &images, &dir, &configure)?;
    if raw {
        for spec in &plan.runs {
            for k in 0..spec.repeat {
                let log = dir.join(format!("{}-{}.log", spec.name, k + 1));
                println!("{}", String::from_utf8_lossy(&std::fs::read(&log)?));
            }
        }
    }
    let form = if verbose { Form::Full } else { format };
    write_stdout(&output::render(
        &doc,
        form,
        || Ok(reports.clone()),
        Some(&output::rest(&dir)),
    )?);
    let files = scenario::run::write_outputs(&doc, &dir)?;
    if let Some(json) = &mut json {
        json.write(&doc)?;
    }
    if let Some(target) = precision {
        let lines = crate::cli::bench::precision::lines(&doc, target);
        if !lines.is_empty() {
            println!();
        }
        for l in lines {
            println!("{l}");
        }
    }
    if check_exact {
        let mut whole = plan.clone();
        for r in &mut whole.runs {
            if let scenario::file::Boots::Guest(g) = &mut r.boots {
                g.cmdline = crate::cli::bench::check_exact::whole(&g.cmdline);
            }
        }
        let exact_dir = scenario::run::results_dir(&dir, "whole-trace")?;
        eprintln!(
            "mtex: --check-exact: the same runs traced whole, in {}",
            exact_dir.display()
        );
        let (exact, _) = scenario::run::run(&whole, &images, &exact_dir, &configure)?;
        scenario::run::write_outputs(&exact, &exact_dir)?;
        println!();
        for l in crate::cli::bench::check_exact::lines(&doc, &exact) {
            println!("{l}");
        }
    }
    eprintln!(
        "mtex: results in {} ({} files: report.json, report.txt, report.csv, plots, logs)",
        dir.display(),
        files.len() + doc.runs.len()
    );
    Ok(if doc.success {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The options of `mtex run` given on this command line, by name: those a file whose runs
/// boot kernels cannot take (their boot options are `mtex linux`'s).
fn given(a: &Args) -> Vec<&'static str> {
    [
        ("--json", a.json.is_some()),
        ("--format", a.format != Form::Text),
        ("--verbose", a.verbose),
        ("--log", a.log.is_some()),
        ("--timeout", a.timeout.is_some()),
        ("--no-icount", a.no_icount),
        ("--raw", a.raw),
        ("--uefi", a.uefi),
        ("--memory", a.memory.is_some()),
        ("--oracle", a.oracle),
        ("--check-exact", a.check_exact),
        ("--precision", a.precision.is_some()),
        ("--profile", a.profile),
        ("--stacks", a.stacks),
    ]
    .into_iter()
    .filter_map(|(name, set)| set.then_some(name))
    .collect()
}

/// A scenario whose runs boot kernels, run as `mtex linux --scenario FILE --out OUT` runs it
/// (one runner for both commands); an option of `mtex run` it would leave unused is refused
/// by name, before anything is built or booted.
fn kernels_file(path: &std::path::Path, out: &std::path::Path, given: &[&str]) -> Result<ExitCode> {
    if let Some(option) = given.first() {
        anyhow::bail!(
            "{}: its runs boot kernels, whose boot options are `mtex linux`'s: {option} is \
             not taken here (`mtex linux --scenario {}` takes the boot options)",
            path.display(),
            path.display()
        );
    }
    let args = crate::linux::Args {
        out: out.to_path_buf(),
        ..crate::linux::Args::defaults()
    };
    crate::linux::scenario_run::run(&args, path)
}
