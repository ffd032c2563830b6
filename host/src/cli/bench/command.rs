//! `mtex bench`: each benchmark booted and its figures printed.

use crate::cli::bench;
use crate::images;
use anyhow::Result;
use clap::Subcommand;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub which: Option<BenchCmd>,
}

#[derive(Subcommand)]
pub enum BenchCmd {
    /// Sampled phases: how often their 95% intervals hold the exact count, per counter, over
    /// seeded runs of several workloads each traced whole as well, and what sampling costs.
    /// Exit 1 when a counter's intervals held less than 93% of the time.
    Sample {
        /// Sampled runs per workload, each with its own seed.
        #[arg(long, default_value_t = 25,
            value_parser = crate::input::number_in(1u64, 10_000))]
        seeds: u64,
        /// A Linux window instead (futex-hash, one thread): traced whole once, then sampled
        /// under each random schedule; its intervals against the whole trace and against the
        /// workload's arithmetic.
        #[arg(long)]
        linux: bool,
        /// With --linux, the futex waits in the window.
        #[arg(long, default_value_t = 5000, requires = "linux",
            value_parser = crate::input::number_in(100u64, 10_000_000))]
        waits: u64,
        /// With --linux, the units' mean instructions and the gaps' mean microseconds.
        #[arg(long, value_name = "UNIT:GAP_US", default_value = "200:1", requires = "linux",
            value_parser = crate::cli::bench::sample_linux::parse_schedule)]
        schedule: (u32, u32),
        /// With --linux, the CPUs: a futex-hash thread on each, every CPU sampling its own
        /// share; its estimates are tallied CPU by CPU too.
        #[arg(long, default_value_t = 1, requires = "linux",
            value_parser = crate::input::number_in(1u32, 8))]
        cpus: u32,
        /// With --linux: what sampling this program on --cpus CPUs costs instead, in one run
        /// of three boots (the boot alone, the program unmeasured, the program sampled at
        /// --schedule): its wall time measured over unmeasured, and the precision of its
        /// checked reads. Exit 1 above 3x.
        #[arg(long, value_name = "COMMAND", requires = "linux")]
        cost: Option<String>,
        /// With --cost: the kernel, as `mtex linux --kernel` takes it.
        #[arg(long, default_value = "7.3", requires = "cost")]
        kernel: String,
        /// With --cost: Debian packages the program needs, as `mtex linux --packages`.
        #[arg(long, requires = "cost")]
        packages: Vec<String>,
        /// With --cost: their suite, as `mtex linux --suite`.
        #[arg(long, requires = "cost")]
        suite: Option<String>,
        /// With --cost: glibc's tagged heap for the program, as `mtex linux --tagged-heap`.
        #[arg(long, requires = "cost")]
        tagged_heap: Option<String>,
    },
    /// What tracing costs on one CPU and on several: EL2 instructions per traced guest
    /// instruction, all CPUs' included, from the machine's clock under -icount shift=0.
    Cpus {
        /// The CPU count set beside one CPU, 2 to 8.
        #[arg(long, default_value_t = 4, value_parser = crate::input::number_in(2u32, 8))]
        cpus: u32,
        /// futex-hash iterations on each CPU, at least 1.
        #[arg(long, default_value_t = 1024, allow_negative_numbers = true,
            value_parser = crate::input::number_in(1u64, 1_000_000))]
        iters: u64,
    },
    /// Whether the guest's clocks hold together on several CPUs: the same Linux window
    /// (two futex-hash threads, every CPU stepped) booted again and again, on each CPU count,
    /// directly and through UEFI; a run is clean when its window closes and Linux reports no
    /// stall or clock trouble. Exit 1 unless every run is clean.
    Clocks {
        /// Boots of each machine.
        #[arg(long, default_value_t = 20, value_parser = crate::input::number_in(1u32, 1000))]
        runs: u32,
        /// The CPU counts, 2 to 8.
        #[arg(long, value_delimiter = ',', default_values_t = [2u32, 4],
            value_parser = crate::input::number_in(2u32, 8))]
        cpus: Vec<u32>,
        /// Only booted directly (`no`), or only through UEFI (`only`); both by default.
        #[arg(long, default_value = "both", value_parser = ["both", "no", "only"])]
        uefi: String,
        /// Host time limit of each boot, in seconds (a clean boot takes about 10 s; a run
        /// past the limit is killed, and where each CPU was is kept with its consoles).
        #[arg(long, default_value_t = 900, value_parser = crate::input::number_in(30u64, 3600))]
        timeout: u64,
    },
    /// EL2 instructions per trapped SCTLR_EL1 write.
    Traps {
        /// Trapped writes per batch, at least 1.
        #[arg(long, default_value_t = 1000, allow_negative_numbers = true,
            value_parser = crate::input::number_in(1u64, u64::MAX))]
        n: u64,
    },
    /// What the trace counter costs: EL2 instructions per stepped instruction, exits per
    /// instruction, wall-clock slowdown of a traced phase.
    Trace {
        /// Iterations of the wall-clock workload, at least 1.
        #[arg(long, default_value_t = 200_000, allow_negative_numbers = true,
            value_parser = crate::input::number_in(1u64, u64::MAX))]
        n: u64,
    },
    /// What the per-PC profile (mtex.profile=1) costs: EL2 instructions and exits per traced
    /// instruction without it and with it, on the trace program and the kernel matrix.
    Profile,
}

pub fn run(args: Args) -> Result<ExitCode> {
    let Args { which } = args;
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
            linux: true,
            cost: Some(command),
            cpus,
            schedule,
            kernel,
            packages,
            suite,
            tagged_heap,
            ..
        }) => {
            let out = crate::linux::work_dir().join("bench-sample");
            std::fs::create_dir_all(&out)?;
            let mut base = vec!["--kernel".to_string(), kernel];
            for p in packages {
                base.extend(["--packages".to_string(), p]);
            }
            if let Some(s) = suite {
                base.extend(["--suite".to_string(), s]);
            }
            if let Some(h) = tagged_heap {
                base.extend(["--tagged-heap".to_string(), h]);
            }
            let given = crate::cli::bench::sample_cost::Given {
                base: &base,
                cpus,
                command: &command,
                schedule,
            };
            let f = crate::cli::bench::sample_cost::cost(&given, &out)?;
            print!("{}", crate::cli::bench::sample_cost::render(&f));
            Ok(if f.ratio() <= 3.0 {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
        Some(BenchCmd::Sample {
            seeds,
            linux: true,
            waits,
            schedule,
            cpus,
            ..
        }) => {
            let out = crate::linux::work_dir().join("bench-sample");
            std::fs::create_dir_all(&out)?;
            let f = crate::cli::bench::sample_linux::coverage(seeds, waits, schedule, cpus, &out)?;
            print!("{}", crate::cli::bench::sample_linux::render(&f));
            Ok(if crate::cli::bench::sample_linux::holds(&f) {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
        Some(BenchCmd::Sample { seeds, .. }) => {
            let f = crate::cli::bench::sample::coverage(&boots, seeds)?;
            print!("{}", crate::cli::bench::sample::render(&f));
            Ok(if crate::cli::bench::sample::holds(&f) {
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
            let out = crate::linux::work_dir().join("bench-clocks");
            let all = crate::cli::bench::clocks::runs(&cpus, uefi, runs, timeout, &out)?;
            print!("{}", crate::cli::bench::clocks::render(&all));
            Ok(if crate::cli::bench::clocks::all_clean(&all) {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
        Some(BenchCmd::Cpus { cpus, iters }) => {
            let costs = crate::cli::bench::cpus::cost(&boots, &[1, cpus], iters)?;
            print!("{}", crate::cli::bench::cpus::render(&costs, iters));
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
