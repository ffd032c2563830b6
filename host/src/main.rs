//! `mtex`: build, boot, report.

use anyhow::Result;
use clap::{Parser, Subcommand};
use mtex::cli::{bench, esp};
use mtex::model::report;
use mtex::model::results::Results;
use mtex::output::{self, Form};
use mtex::scenario::{file as scenario_file, run as scenario_run};
use mtex::{images, qemu};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Parser)]
#[command(
    name = "mtex",
    version,
    about = "MTE exerciser: measure what a guest's MTE policy costs",
    max_term_width = 100
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

/// What `mtex run --help` lists after the options: the scenario file's keys, the policies
/// and the workloads, in the spellings the scenario file and --opt take (from the parsers'
/// own tables, so the list cannot go stale).
fn run_help() -> String {
    use mtex_abi::scenario::{TOKENS, Tcf, Workload};
    let workloads: Vec<&str> = Workload::ALL.iter().map(|(n, _)| *n).collect();
    let modes: Vec<&str> = Tcf::ALL.iter().map(|(n, _)| *n).collect();
    format!(
        "Scenario file (TOML, version 1; docs/scenarios.md):\n  \
         version, name, description\n  \
         [[run]]: name, policies, workloads, tcf0, hz, repeat, backend, trace, \
         breakpoint_runs, watchdog_ms\n  \
         [[expect]]: counter, workload, from, to, run, from_run, to_run, \
         drop_at_least | rise_at_most | equal\n\n\
         Policies (tokens joined by +): {}\n\n\
         Workloads (with :iters=N :size=N :tasks=N :tcf0=MODE): {}\n\n\
         User modes (tcf0): {}",
        TOKENS.join(", "),
        workloads.join(", "),
        modes.join(", ")
    )
}

#[derive(Subcommand)]
enum Cmd {
    /// Run a scenario file (default: scripts/scenarios/default.toml, every policy × every workload), or one
    /// guest program given by --guest/--opt; print the report and write a results directory.
    #[command(after_help = run_help())]
    Run {
        /// A scenario file (TOML, docs/scenarios.md): runs, repeats, expectations.
        scenario: Option<PathBuf>,
        /// Guest program instead of a scenario: kernel (policies x workloads from --opt),
        /// controls, trace, differential, el0, unknown-hvc, touch-hyp, spin, bench-traps,
        /// bench-trace, exclusive-loop, hostile-*.
        #[arg(long)]
        guest: Option<String>,
        /// More `mtex.<key>=<value>` options for --guest (e.g. --opt policies=entry-tco,tcma1
        /// --opt workloads=futex-hash:iters=64; keys: policies, workloads, tcf0, hz,
        /// watchdog_ms, traps, runs, step, guest_time, bench_n, sample, sample_seed).
        #[arg(long = "opt", value_name = "KEY=VALUE")]
        opts: Vec<String>,
        /// Also write report.json (schema mtex-report v1) to this file (checked for writing
        /// before the run).
        #[arg(long)]
        json: Option<PathBuf>,
        /// The report's form on stdout: text (the summary: per workload, policies x the
        /// headline counters; 100 columns), full (the summary, then every phase's counters in
        /// perf stat's manner, the trapped writes and the guest console: report.txt), matrix
        /// (the wide tables), csv, json, html (the results page).
        #[arg(long, value_enum, default_value = "text")]
        format: Form,
        /// Print the full report (--format full).
        #[arg(long, short, conflicts_with = "format")]
        verbose: bool,
        /// Where results directories go (each run makes NAME-N inside).
        #[arg(long, default_value = "mtex-results")]
        out: PathBuf,
        /// Diagnostics of the hypervisor and the guest (the log crate) shown as console lines,
        /// up to this level (mtex.log; default warn). The guest logs only between phases.
        #[arg(long, value_enum)]
        log: Option<LogLevel>,
        /// Host time limit in seconds, at least 1. Default: long enough for the guest's
        /// watchdog to end the run first (30 s + 200 x the budget under -icount, 2 x without);
        /// a run whose guest clock stops, or passes the budget, is ended at once either way.
        #[arg(long, allow_negative_numbers = true,
            value_parser = mtex::input::number_in(1u64, u64::MAX))]
        timeout: Option<u64>,
        /// Run without -icount (faster, no instruction counts, not deterministic).
        #[arg(long)]
        no_icount: bool,
        /// Print the raw console too.
        #[arg(long)]
        raw: bool,
        /// Boot through UEFI: Debian's edk2 firmware runs the ESP tree `mtex esp` writes (in
        /// a temporary directory), whose loader chain-loads the hypervisor, as on a server.
        #[arg(long)]
        uefi: bool,
        /// With --uefi: firmware describes the machine with ACPI only (on, as servers do) or
        /// with a device tree (off).
        #[arg(long, value_enum, default_value = "on", requires = "uefi")]
        acpi: OnOff,
        /// Machine RAM in MiB (QEMU -m). Default 512, or 1024 with --uefi (firmware's share).
        #[arg(long, allow_negative_numbers = true,
            value_parser = mtex::input::number_in(512u32, 65536))]
        memory: Option<u32>,
        /// Also count every traced phase with the oracle, a QEMU plugin (oracle/) counting
        /// from QEMU's own hooks, and check the trace against it: any difference is a problem.
        /// QEMU 10.0 checks no tags on the accesses it hooks, so no tag-check fault happens.
        #[arg(long)]
        oracle: bool,
        /// With sampled phases (--opt sample=UNIT:GAP_US, a scenario's sample key): run the
        /// same again traced whole, and print each estimate beside the exact count, its error,
        /// and whether its 95% interval holds it (docs/sampling.md). Needs -icount.
        #[arg(long, conflicts_with = "no_icount")]
        check_exact: bool,
        /// With sampled phases: the precision asked of each one's estimate of the kernel's
        /// checked reads (1%, 0.5): says whether it was reached and, where not, how many
        /// units (and what gap) would reach it. The units stay spread over the whole phase.
        #[arg(long, value_parser = mtex::cli::bench::precision::parse)]
        precision: Option<f64>,
        /// Also count every traced phase by PC, and report where its checks are: the
        /// functions that make them, a folded-stacks file and a flame graph per counter
        /// (docs/profile.md). Costs the trace about a sixth more EL2 time.
        #[arg(long)]
        profile: bool,
        /// With --profile, follow the kernel's call stacks too: folded stacks and flame graphs
        /// by stack, and each function's system call or exception entry (docs/profile.md).
        /// Steps every instruction (no runs, no fast path): the trace costs more.
        #[arg(long)]
        stacks: bool,
    },
    /// Write an ESP tree (EFI/BOOT/BOOTAA64.EFI, the images, the options) for a USB stick or
    /// an EFI partition: copy DIR's contents to the root of a FAT file system.
    Esp {
        /// Directory to write (created if missing).
        dir: PathBuf,
        /// Guest program, as for `mtex run`.
        #[arg(long, default_value = "kernel")]
        guest: String,
        /// More `mtex.<key>=<value>` options, as for `mtex run`.
        #[arg(long = "opt", value_name = "KEY=VALUE")]
        opts: Vec<String>,
        /// What the loader does on an error: return to the firmware, or power off.
        #[arg(long, value_enum, default_value = "return")]
        on_error: esp::OnError,
        /// Install mode: the loader installs the hypervisor under the firmware and goes back
        /// to its boot manager, which boots its next option (the machine's own OS) at EL1
        /// under the hypervisor (docs/uefi.md#install-mode). No guest program runs: --guest is
        /// refused with it; --opt gives the hypervisor's options.
        #[arg(long, conflicts_with = "guest")]
        install: bool,
    },
    /// Compare two results (directories or report.json files): per counter A, B, delta, %.
    Compare(mtex::compare::Args),
    /// Assemble your own AArch64 code and run it as a traced phase in a documented
    /// environment.
    Snippet(mtex::cli::snippet::Args),
    /// Characterise this CPU's MTE choices: per EL, TCF, TCO, TCMA, pointer tag and page,
    /// is an access tag checked (PMU where the CPU has the MTE events, else tag-check
    /// faults), judged against the trace counter's predicate; and what a TCO write, a
    /// TFSR_EL1 read, STG, ST2G and DC GZVA cost. Exit 1 when a cell contradicts the
    /// predicate or the run failed.
    Probe(mtex::cli::probe::Args),
    /// Boot Debian's arm64 kernel (fetched with apt) under the hypervisor in Linux mode and
    /// report every MTE control write it makes, by kernel function.
    Linux(mtex::linux::Args),
    /// Kernels for Linux mode: `mtex kernel build` makes an arm64 Image from Debian's
    /// linux-source-X or your tree, with KASAN and your patches, for `mtex linux --kernel`.
    Kernel {
        #[command(subcommand)]
        which: KernelCmd,
    },
    /// Parse a saved console log and print its report.
    Parse {
        file: PathBuf,
        /// Print report.json (schema mtex-report v1) instead of text: a log captured on
        /// hardware becomes the same document a run writes (--format json).
        #[arg(long)]
        json: bool,
        /// The report's form, as for run: text, full, matrix, csv, json, html.
        #[arg(long, value_enum, default_value = "text", conflicts_with = "json")]
        format: Form,
        /// Print the full report (--format full).
        #[arg(long, short, conflicts_with_all = ["format", "json"])]
        verbose: bool,
        /// The kernel's symbols, to name its trapped writes and profiles by function: a dump of
        /// /proc/kallsyms taken as root on the machine measured (its addresses are the running
        /// kernel's, KASLR included), or a System.map for a kernel booted with nokaslr.
        /// Without it, the guest kernel of this tree names them.
        #[arg(long, value_name = "FILE")]
        symbols: Option<PathBuf>,
    },
    /// Show a results directory (or its report.json) again in any form, without running
    /// anything: text, full, matrix, csv, json, html.
    Report {
        /// A results directory (`mtex-results/NAME-N`) or a report.json.
        dir: PathBuf,
        /// The form, as for run.
        #[arg(long, value_enum, default_value = "text")]
        format: Form,
        /// Print the full report (--format full).
        #[arg(long, short, conflicts_with = "format")]
        verbose: bool,
    },
    /// Build the images only.
    Build,
    /// Benchmarks that print figures. Without a subcommand: the three cost figures (EL2
    /// instructions per trapped write; EL2 instructions and exits per traced instruction on
    /// the trace program and the kernel matrix; the kernel matrix's traced vs untraced
    /// slowdown) for mtex.step=fast and plain, the count-equality verdict, then both
    /// benchmarks' details. Exit 1 when a count differs or a run has a problem.
    Bench {
        #[command(subcommand)]
        which: Option<BenchCmd>,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum LogLevel {
    Off,
    Error,
    Warn,
    Info,
    Debug,
    Trace,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum OnOff {
    On,
    Off,
}

#[derive(Subcommand)]
enum KernelCmd {
    /// Build an arm64 Image with a configuration made for mtex's machine (PL011, GICv3,
    /// PSCI, initramfs, ARM64_MTE), optionally KASAN_HW_TAGS and your patches. Kept under
    /// target/kernels/ by a hash of every input: asked again, it is there at once. Prints
    /// where the Image and its System.map are.
    Build(mtex::kernel_build::Args),
}

#[derive(Subcommand)]
enum BenchCmd {
    /// Sampled phases: how often their 95% intervals hold the exact count, per counter, over
    /// seeded runs of several workloads each traced whole as well, and what sampling costs.
    /// Exit 1 when a counter's intervals held less than 93% of the time.
    Sample {
        /// Sampled runs per workload, each with its own seed.
        #[arg(long, default_value_t = 25,
            value_parser = mtex::input::number_in(1u64, 10_000))]
        seeds: u64,
        /// A Linux window instead (futex-hash, one thread): traced whole once, then sampled
        /// under each random schedule; its intervals against the whole trace and against the
        /// workload's arithmetic.
        #[arg(long)]
        linux: bool,
        /// With --linux, the futex waits in the window.
        #[arg(long, default_value_t = 5000, requires = "linux",
            value_parser = mtex::input::number_in(100u64, 10_000_000))]
        waits: u64,
        /// With --linux, the units' mean instructions and the gaps' mean microseconds.
        #[arg(long, value_name = "UNIT:GAP_US", default_value = "200:1", requires = "linux",
            value_parser = mtex::cli::bench::sample_linux::parse_schedule)]
        schedule: (u32, u32),
    },
    /// What tracing costs on one CPU and on several: EL2 instructions per traced guest
    /// instruction, all CPUs' included, from the machine's clock under -icount shift=0.
    Cpus {
        /// The CPU count set beside one CPU, 2 to 8.
        #[arg(long, default_value_t = 4, value_parser = mtex::input::number_in(2u32, 8))]
        cpus: u32,
        /// futex-hash iterations on each CPU, at least 1.
        #[arg(long, default_value_t = 1024, allow_negative_numbers = true,
            value_parser = mtex::input::number_in(1u64, 1_000_000))]
        iters: u64,
    },
    /// Whether the guest's clocks hold together on several CPUs: the same Linux window
    /// (two futex-hash threads, every CPU stepped) booted again and again, on each CPU count,
    /// directly and through UEFI; a run is clean when its window closes and Linux reports no
    /// stall or clock trouble. Exit 1 unless every run is clean.
    Clocks {
        /// Boots of each machine.
        #[arg(long, default_value_t = 20, value_parser = mtex::input::number_in(1u32, 1000))]
        runs: u32,
        /// The CPU counts, 2 to 8.
        #[arg(long, value_delimiter = ',', default_values_t = [2u32, 4],
            value_parser = mtex::input::number_in(2u32, 8))]
        cpus: Vec<u32>,
        /// Only booted directly (`no`), or only through UEFI (`only`); both by default.
        #[arg(long, default_value = "both", value_parser = ["both", "no", "only"])]
        uefi: String,
        /// Host time limit of each boot, in seconds (a clean boot takes about 10 s; a run
        /// past the limit is killed, and where each CPU was is kept with its consoles).
        #[arg(long, default_value_t = 900, value_parser = mtex::input::number_in(30u64, 3600))]
        timeout: u64,
    },
    /// EL2 instructions per trapped SCTLR_EL1 write.
    Traps {
        /// Trapped writes per batch, at least 1.
        #[arg(long, default_value_t = 1000, allow_negative_numbers = true,
            value_parser = mtex::input::number_in(1u64, u64::MAX))]
        n: u64,
    },
    /// What the trace counter costs: EL2 instructions per stepped instruction, exits per
    /// instruction, wall-clock slowdown of a traced phase.
    Trace {
        /// Iterations of the wall-clock workload, at least 1.
        #[arg(long, default_value_t = 200_000, allow_negative_numbers = true,
            value_parser = mtex::input::number_in(1u64, u64::MAX))]
        n: u64,
    },
    /// What the per-PC profile (mtex.profile=1) costs: EL2 instructions and exits per traced
    /// instruction without it and with it, on the trace program and the kernel matrix.
    Profile,
}

/// Writes a report to stdout. A reader that stops early (`mtex report DIR | head`) is not an
/// error of mtex's: the write ends quietly there.
fn write_stdout(text: &str) {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
        && e.kind() != std::io::ErrorKind::BrokenPipe
    {
        eprintln!("mtex: writing the report: {e}");
    }
}

fn main() -> ExitCode {
    match real_main() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("mtex: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn real_main() -> Result<ExitCode> {
    match Cli::parse().command {
        Cmd::Run {
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
        } => {
            // Bad input is found here, before anything is built or booted.
            let plan = match (scenario, guest.is_some() || !opts.is_empty()) {
                (Some(_), true) => anyhow::bail!(
                    "give a scenario file or --guest/--opt, not both (a scenario file says \
                     everything in its [[run]] tables)"
                ),
                (Some(path), false) => scenario_file::load(&path)?,
                (None, true) => {
                    let g = guest.unwrap_or_else(|| "kernel".to_string());
                    scenario_file::ScenarioFile::single(&g, qemu::cmdline(&g, &opts)?)
                }
                (None, false) => scenario_file::load(
                    &images::workspace_root().join("scripts/scenarios/default.toml"),
                )?,
            };
            // A per-PC profile follows one CPU: the kernel on several would have every phase
            // refused.
            if profile || stacks {
                for r in &plan.runs {
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
                && !plan.runs.iter().any(|r| r.cmdline.contains("mtex.sample="))
            {
                anyhow::bail!(
                    "--check-exact and --precision are about sampled phases: give --opt \
                     sample=UNIT:GAP_US (or a scenario whose runs set sample)"
                );
            }
            let mut json = mtex::output::json::JsonOut::open(json.as_deref())?;
            let images = images::build()?;
            let loader = uefi.then(images::build_loader).transpose()?;
            let dir = scenario_run::results_dir(&out, &plan.name)?;
            let oracle_plugin = oracle.then(images::build_oracle).transpose()?;
            let boots = std::cell::Cell::new(0u32);
            let configure =
                |mut cfg: qemu::RunConfig| -> Result<(qemu::RunConfig, scenario_run::Keep)> {
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
                        cfg.oracle = Some(mtex::oracle_check::OracleRun {
                            plugin: plugin.clone(),
                            out: dir.join(format!("oracle-{}.txt", boots.get())),
                        });
                    }
                    Ok((cfg, keep))
                };
            let (doc, reports) = scenario_run::run(&plan, &images, &dir, &configure)?;
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
            let files = scenario_run::write_outputs(&doc, &dir)?;
            if let Some(json) = &mut json {
                json.write(&doc)?;
            }
            if let Some(target) = precision {
                let lines = mtex::cli::bench::precision::lines(&doc, target);
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
                    r.cmdline = mtex::cli::bench::check_exact::whole(&r.cmdline);
                }
                let exact_dir = scenario_run::results_dir(&dir, "whole-trace")?;
                eprintln!(
                    "mtex: --check-exact: the same runs traced whole, in {}",
                    exact_dir.display()
                );
                let (exact, _) = scenario_run::run(&whole, &images, &exact_dir, &configure)?;
                scenario_run::write_outputs(&exact, &exact_dir)?;
                println!();
                for l in mtex::cli::bench::check_exact::lines(&doc, &exact) {
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
        Cmd::Parse {
            file,
            json,
            format,
            verbose,
            symbols,
        } => {
            let symbols = match &symbols {
                Some(path) => mtex::symbols::Symbols::from_symbol_file(path)?,
                // The log came from this tree's guest, when it has been built here.
                None => mtex::symbols::Symbols::load(&images::guest_elf_path()),
            };
            // Bytes, not text: one byte that is not UTF-8 must not cost the whole log.
            let bytes = mtex::input::read(&file, "console log", mtex::input::LOG_LIMIT)?;
            let r = report::parse_bytes(&bytes);
            let mut doc = Results::single(&r);
            doc.symbolize(&symbols);
            let form = match (json, verbose) {
                (true, _) => Form::Json,
                (_, true) => Form::Full,
                _ => format,
            };
            write_stdout(&output::render(
                &doc,
                form,
                || Ok(vec![r.clone()]),
                Some("all of it: add --verbose"),
            )?);
            Ok(if r.succeeded() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
        Cmd::Report {
            dir,
            format,
            verbose,
        } => {
            let output::Loaded { doc, linux, dir } = output::load(&dir)?;
            let form = if verbose { Form::Full } else { format };
            let rest = output::rest(&dir);
            let text = match &linux {
                Some(r) => output::render_linux(r, &doc, form, Some(&rest))?,
                None => output::render(&doc, form, || output::reports(&doc, &dir), Some(&rest))?,
            };
            write_stdout(&text);
            let success = linux
                .as_ref()
                .map_or(doc.success, |r| r.problems.is_empty());
            Ok(if success {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
        Cmd::Compare(args) => mtex::compare::run(args),
        Cmd::Snippet(args) => mtex::cli::snippet::run(args),
        Cmd::Probe(args) => mtex::cli::probe::run(args),
        Cmd::Linux(args) => mtex::linux::run(args),
        Cmd::Kernel {
            which: KernelCmd::Build(args),
        } => mtex::kernel_build::run(args),
        Cmd::Esp {
            dir,
            guest,
            opts,
            on_error,
            install,
        } => {
            let line = qemu::cmdline(&guest, &opts)?;
            let images = images::build()?;
            let loader = images::build_loader()?;
            if install {
                // The hypervisor's own options only: no guest program runs. They are checked
                // as for `spin`, a program with no options of its own, and its name dropped.
                let options = qemu::cmdline("spin", &opts)?
                    .split_whitespace()
                    .filter(|w| !w.starts_with("mtex.guest="))
                    .collect::<Vec<_>>()
                    .join(" ");
                let i = esp::Install {
                    hyp_image: &images.hyp_image,
                    loader: &loader,
                    options: &options,
                    kernel: None,
                    on_error,
                };
                esp::write_install(&dir, &i)?;
            } else {
                esp::write(&dir, &images, &loader, &line, on_error)?;
            }
            println!(
                "mtex: wrote {} (copy its contents to the root of a FAT-formatted ESP or USB stick)",
                esp::boot_dir(&dir).display()
            );
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Build => {
            let i = images::build()?;
            println!("{}\n{}", i.hyp_elf.display(), i.guest_image.display());
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Bench { which } => {
            let images = images::build()?;
            let boots = bench::Boots::new(&images);
            match which {
                None => {
                    let traps_n = 1000;
                    let h = bench::headline(&boots, traps_n)?;
                    print!("{}", bench::render_headline(&h, traps_n));
                    println!();
                    print_bench_traps(&h.traps[0].1);
                    print_bench_trace(&bench::trace(&boots, 200_000)?);
                    Ok(if h.verdict.holds() {
                        ExitCode::SUCCESS
                    } else {
                        ExitCode::FAILURE
                    })
                }
                Some(BenchCmd::Traps { n }) => {
                    print_bench_traps(&bench::traps(&boots, n, bench::default_fast())?);
                    Ok(ExitCode::SUCCESS)
                }
                Some(BenchCmd::Trace { n }) => {
                    print_bench_trace(&bench::trace(&boots, n)?);
                    Ok(ExitCode::SUCCESS)
                }
                Some(BenchCmd::Sample {
                    seeds,
                    linux: true,
                    waits,
                    schedule,
                }) => {
                    let out = mtex::linux::work_dir().join("bench-sample");
                    std::fs::create_dir_all(&out)?;
                    let f = mtex::cli::bench::sample_linux::coverage(seeds, waits, schedule, &out)?;
                    print!("{}", mtex::cli::bench::sample_linux::render(&f));
                    Ok(if mtex::cli::bench::sample_linux::holds(&f) {
                        ExitCode::SUCCESS
                    } else {
                        ExitCode::FAILURE
                    })
                }
                Some(BenchCmd::Sample { seeds, .. }) => {
                    let f = mtex::cli::bench::sample::coverage(&boots, seeds)?;
                    print!("{}", mtex::cli::bench::sample::render(&f));
                    Ok(if mtex::cli::bench::sample::holds(&f) {
                        ExitCode::SUCCESS
                    } else {
                        ExitCode::FAILURE
                    })
                }
                Some(BenchCmd::Clocks {
                    runs,
                    cpus,
                    uefi,
                    timeout,
                }) => {
                    let uefi: &[bool] = match uefi.as_str() {
                        "no" => &[false],
                        "only" => &[true],
                        _ => &[false, true],
                    };
                    let out = mtex::linux::work_dir().join("bench-clocks");
                    let all = mtex::cli::bench::clocks::runs(&cpus, uefi, runs, timeout, &out)?;
                    print!("{}", mtex::cli::bench::clocks::render(&all));
                    Ok(if mtex::cli::bench::clocks::all_clean(&all) {
                        ExitCode::SUCCESS
                    } else {
                        ExitCode::FAILURE
                    })
                }
                Some(BenchCmd::Cpus { cpus, iters }) => {
                    let costs = mtex::cli::bench::cpus::cost(&boots, &[1, cpus], iters)?;
                    print!("{}", mtex::cli::bench::cpus::render(&costs, iters));
                    Ok(ExitCode::SUCCESS)
                }
                Some(BenchCmd::Profile) => {
                    print!(
                        "{}",
                        bench::render_profile_cost(&bench::profile_cost(&boots)?)
                    );
                    Ok(ExitCode::SUCCESS)
                }
            }
        }
    }
}

fn print_bench_traps(f: &bench::TrapFigures) {
    println!(
        "bench traps: {} + {} trapped SCTLR_EL1 writes under -icount shift=0",
        f.n,
        2 * f.n
    );
    println!(
        "  EL2 instructions per trapped write, entry to ERET: {:.1}",
        f.trap_path
    );
    println!(
        "  including framing its report record:            {:.1}",
        f.with_reporting
    );
    println!("  wall time of the run: {:.2} s", f.wall.as_secs_f64());
}

fn print_bench_trace(f: &bench::TraceFigures) {
    println!(
        "bench trace: the trace program's {} stepped instructions under -icount shift=0",
        f.traced_instructions
    );
    println!(
        "  EL2 instructions per stepped guest instruction: {:.1}",
        f.el2_per_step
    );
    println!(
        "  EL2 exits per traced guest instruction:          {:.3}",
        f.exits_per_instruction
    );
    println!(
        "  EL2 instructions per step in a long loop of {} tagged loads: {:.1}",
        f.n, f.el2_per_step_steady
    );
    for (what, (el2, exits)) in [
        ("trace program, with runs (mtex.runs=1)", f.with_runs_trace),
        ("default program (compiled code)", f.default_program),
        ("default program, with runs", f.default_program_with_runs),
    ] {
        println!("  {what}: {el2:.1} EL2 instructions, {exits:.3} exits per instruction");
    }
    println!(
        "bench trace: {} tagged loads, untraced then traced, without -icount",
        f.n
    );
    println!(
        "  wall-clock slowdown of the traced phase: {:.0}x",
        f.slowdown
    );
    println!(
        "  stepped guest instructions per second:   {:.0}",
        f.steps_per_second
    );
}
