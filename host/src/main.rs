//! `mtex`: build, boot, report.

use anyhow::Result;
use clap::{Parser, Subcommand};
use std::process::ExitCode;

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

#[derive(Subcommand)]
enum Cmd {
    /// Run a scenario file (default: scripts/scenarios/default.toml, every policy × every workload), or one
    /// guest program given by --guest/--opt; print the report and write a results directory.
    #[command(after_help = mtex::cli::run::help())]
    Run(mtex::cli::run::Args),
    /// Write an ESP tree (EFI/BOOT/BOOTAA64.EFI, the images, the options) for a USB stick or
    /// an EFI partition: copy DIR's contents to the root of a FAT file system.
    Esp(mtex::cli::esp::Args),
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
    Linux(Box<mtex::linux::Args>),
    /// Kernels for Linux mode: `mtex kernel build` makes an arm64 Image from Debian's
    /// linux-source-X or your tree, with KASAN and your patches, for `mtex linux --kernel`.
    Kernel {
        #[command(subcommand)]
        which: KernelCmd,
    },
    /// Parse a saved console log and print its report.
    Parse(mtex::cli::parse::Args),
    /// Show a results directory (or its report.json) again in any form, without running
    /// anything: text, full, matrix, csv, json, html.
    Report(mtex::cli::report::Args),
    /// Build the images only.
    Build,
    /// Benchmarks that print figures. Without a subcommand: the three cost figures (EL2
    /// instructions per trapped write; EL2 instructions and exits per traced instruction on
    /// the trace program and the kernel matrix; the kernel matrix's traced vs untraced
    /// slowdown) for mtex.step=fast and plain, the count-equality verdict, then both
    /// benchmarks' details. Exit 1 when a count differs or a run has a problem.
    Bench(mtex::cli::bench::command::Args),
}

#[derive(Subcommand)]
enum KernelCmd {
    /// Build an arm64 Image with a configuration made for mtex's machine (PL011, GICv3,
    /// PSCI, initramfs, ARM64_MTE), optionally KASAN_HW_TAGS and your patches. Kept under
    /// target/kernels/ by a hash of every input: asked again, it is there at once. Prints
    /// where the Image and its System.map are.
    Build(mtex::kernel_build::Args),
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
        Cmd::Run(args) => mtex::cli::run::run(args),
        Cmd::Parse(args) => mtex::cli::parse::run(args),
        Cmd::Report(args) => mtex::cli::report::run(args),
        Cmd::Compare(args) => mtex::compare::run(args),
        Cmd::Snippet(args) => mtex::cli::snippet::run(args),
        Cmd::Probe(args) => mtex::cli::probe::run(args),
        Cmd::Linux(args) => mtex::linux::run(*args),
        Cmd::Kernel {
            which: KernelCmd::Build(args),
        } => mtex::kernel_build::run(args),
        Cmd::Esp(args) => mtex::cli::esp::run(args),
        Cmd::Build => {
            let i = mtex::images::build()?;
            println!("{}\n{}", i.hyp_elf.display(), i.guest_image.display());
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Bench(args) => mtex::cli::bench::command::run(args),
    }
}
