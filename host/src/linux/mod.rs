//! `mtex linux`: a distribution kernel (Debian's arm64 package, unmodified) booted under the
//! hypervisor in Linux mode, with every SCTLR_EL1/TCR_EL1 write it makes trapped, decoded and
//! named by kernel function. The kernel, busybox and the initramfs come from apt and this
//! repository (`crate::debian`, `initramfs.rs`); the hypervisor passes Linux its GIC, timers and a
//! second UART (`hyp/src/linux_boot.rs`) and keeps the first for its records.

pub mod ab;
pub mod console_checks;
pub mod guest_files;
pub mod initramfs;
pub mod interrupt_rate;
pub mod local;
pub mod operations;
pub mod perf_stat;
pub mod report;
pub mod requirements;
pub mod scenario_run;
pub mod summary;
pub mod tagged_heap;

use crate::{images, qemu};
use anyhow::{Context, Result, bail};
use mtex_platform::linux_bundle;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

/// `mtex linux`'s command-line arguments.
#[derive(clap::Args, Clone, Debug)]
pub struct Args {
    /// The kernel: 6.12 (the newest 6.12 in bookworm-backports), a release such as
    /// 6.12.117+deb12 or 6.1.0-47, or Linux 7.x from Debian's newer suites (7.3,
    /// 7.3.4+deb13): Debian's arm64 packages, fetched with apt; or a path to a kernel .deb or
    /// to an arm64 Image (raw, Image.gz, or EFI zboot with a gzip or zstd payload), its
    /// symbols from a System.map beside it or a first boot. Give it more than once to boot each
    /// kernel in turn with the same workloads and compare them (A/B).
    #[arg(long, default_value = "6.12")]
    pub kernel: Vec<String>,
    /// What /init runs between boot and power-off: a workload by name, optionally with its
    /// arguments (getpid, futex-hash, memcached, thread-create, fork, switch, mte-fault, spin:
    /// run as `mtex-work --tcf0 T --window N NAME ARGS`, in trace window N), or any other
    /// busybox shell line, run as it is. Default: none (boot to /init and power off).
    #[arg(long)]
    pub workload: Option<String>,
    /// A command to measure, as the workload's shell would run it (a program of the
    /// initramfs, a package's, or one given by --add, with its arguments): a trace window
    /// opens just before it starts and closes once it has ended, with every child it waited
    /// for; its output is kept in the report, and a command that is not found, fails or is
    /// killed is a problem. Again for more, each in the next window (1, 2, ...), in order,
    /// until one fails.
    #[arg(long = "run", value_name = "COMMAND", conflicts_with = "workload")]
    pub run: Vec<String>,
    /// A command run before the first window, outside every window, as the shell runs it: a
    /// server the measured command talks to (`memcached -u root -d`, which goes on running in
    /// the windows and is counted there), a file it reads. Again for more, in order; each
    /// must succeed, or no window runs and the report says which failed. Its environment is
    /// the measured commands' (--env, --tagged-heap).
    #[arg(long, value_name = "COMMAND")]
    pub setup: Vec<String>,
    /// The operations a --run command makes, for its counts per operation: one number per
    /// command, in order (comma-separated, or the option again). Given, it takes the place of
    /// the count the program prints (memcaslap's, perf bench futex hash's).
    #[arg(long, value_delimiter = ',', value_name = "N", requires = "run",
          value_parser = clap::value_parser!(u64).range(1..))]
    pub operations: Vec<u64>,
    /// The named workload's user tag-check modes (prctl), comma-separated: none, sync, async,
    /// asymm. Each runs in its own window (1, 2, ...), in this order, and the report compares
    /// them.
    #[arg(long, default_value = "sync", value_delimiter = ',',
          value_parser = ["none", "sync", "async", "asymm"])]
    pub tcf0: Vec<String>,
    /// Debian arm64 packages for the guest's user space, with everything they depend on
    /// (comma-separated, or the option again; NAME, NAME/SUITE or NAME=VERSION): resolved by
    /// apt in mtex's own configuration, fetched, unpacked without their maintainer scripts,
    /// trimmed of documentation, manuals and locales, and put into the initramfs beside
    /// busybox (docs/linux.md#a-debian-user-space).
    #[arg(long, value_delimiter = ',', value_name = "NAME")]
    pub packages: Vec<String>,
    /// The Debian suite the packages come from, with its updates and backports: bookworm,
    /// trixie or sid. Default: the kernel's (trixie for Linux 7.x, bookworm for the others).
    #[arg(long, requires = "packages", value_parser = ["bookworm", "trixie", "sid"])]
    pub suite: Option<String>,
    /// Keep the packages' character-set converters (gconv), which are left out otherwise.
    #[arg(long, requires = "packages")]
    pub keep_gconv: bool,
    /// A file or directory of this machine put into the guest, at GUEST_PATH (default
    /// /usr/local/bin/NAME for a file, /opt/NAME for a directory). Again for more.
    #[arg(long, value_name = "HOST_PATH[:GUEST_PATH]")]
    pub add: Vec<String>,
    /// A variable of the workload's environment, NAME=VALUE (e.g. MALLOC_ARENA_MAX=1).
    /// Again for more.
    #[arg(long, value_name = "NAME=VALUE")]
    pub env: Vec<String>,
    /// glibc's tagged heap for the measured commands: malloc tags every block and the
    /// program runs with sync or async tag-check faults (GLIBC_TUNABLES=glibc.mem.tagging=3
    /// or 1). The report shows the tag-check modes the hypervisor saw each window's tasks
    /// set, and a window that never set this one is a problem.
    #[arg(long, value_enum, value_name = "MODE")]
    pub tagged_heap: Option<tagged_heap::TaggedHeap>,
    /// More words for the kernel command line, one word each (printable ASCII, no quotes):
    /// Linux's parameters, or the hypervisor's `mtex.KEY=VALUE` options. The words mtex sets
    /// itself (console=, rdinit=, panic=) are refused.
    #[arg(long = "append", value_name = "WORD")]
    pub append: Vec<String>,
    /// Guest RAM in MiB (RAM_MIB_MIN..3072; less and Debian's kernel runs out of memory
    /// before /init).
    #[arg(long, default_value_t = 512, value_parser = clap::value_parser!(u64).range(RAM_MIB_MIN..=3072))]
    pub ram_mib: u64,
    /// CPUs Linux is given (1..=8): QEMU's, each started by Linux through PSCI under the
    /// hypervisor. A trace window counts every CPU that is on, by CPU and in total
    /// (docs/linux.md#cpus)
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=8))]
    pub cpus: u32,
    /// Give Linux QEMU's `max` CPU whole, with SVE and SME. Without this they are off
    /// (`-cpu max,sve=off,sme=off`, as on AmpereOne, which has neither), and so are the
    /// kernel's and glibc's SVE paths, whose loads and stores the trace does not model (a
    /// window that makes one has a problem that says how many).
    #[arg(long)]
    pub sve: bool,
    /// Boot as a server does: QEMU's edk2 with ACPI, the UEFI loader installing the
    /// hypervisor under the firmware and starting the kernel's EFI stub with its initramfs
    /// (docs/uefi.md#install-mode). Linux and the records share the firmware's one UART.
    #[arg(long)]
    pub uefi: bool,
    /// Also write report.json (schema mtex-report v2: the windows as phases, and the Linux
    /// section) to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Print Linux's own console (the second UART) after the report.
    #[arg(long)]
    pub console: bool,
    /// Where results directories go: each run makes linux-N inside, with report.txt,
    /// report.json (the windows as phases, as `mtex run`'s, and the Linux section),
    /// report.csv, plots, the hypervisor's console (console.log), Linux's (linux-console.log) and, for a profiled
    /// run, profile/ (folded stacks and flame graphs by kernel function).
    #[arg(long, default_value = "mtex-results")]
    pub out: PathBuf,
    /// Host time limit in seconds.
    #[arg(long, default_value_t = 900, value_parser = clap::value_parser!(u64).range(1..))]
    pub timeout: u64,
    /// Run without -icount (faster; guest times not exact).
    #[arg(long)]
    pub no_icount: bool,
    /// Also count every window with the oracle, a QEMU plugin built from this repository
    /// (oracle/) that counts from QEMU's own hooks, and check the trace against it: any
    /// difference is a problem. It turns QEMU's MTE tag checks off for the instructions it
    /// watches (a QEMU 10.0 limit), so tag-check faults do not happen in such a run.
    #[arg(long)]
    pub oracle: bool,
    /// Also count every window by PC, and report where its checks are: the functions that
    /// make them, a folded-stacks file and a flame graph per counter (docs/profile.md).
    /// Costs the trace about a sixth more EL2 time.
    #[arg(long)]
    pub profile: bool,
    /// With --profile, follow the kernel's call stacks too: folded stacks and flame graphs by
    /// stack, and each function's system call or exception entry (docs/profile.md). Steps
    /// every instruction of a window (no runs, no fast path): the trace costs more.
    #[arg(long)]
    pub stacks: bool,
    /// Sample each window rather than trace it whole: units of about UNIT instructions
    /// traced after random gaps of 0 to 2 × GAP_US microseconds, every figure an estimate
    /// with its 95% confidence interval (docs/sampling.md). Needs --cpus 1.
    #[arg(long, value_name = "UNIT:GAP_US")]
    pub sample: Option<String>,
    /// The sampling schedule's random generator's seed (default 1): another seed, other units.
    #[arg(long, value_name = "N", requires = "sample")]
    pub sample_seed: Option<u64>,
    /// Print the full report (each window in every view, every trapped write): report.txt.
    #[arg(long, short)]
    pub verbose: bool,
    /// The kernel's symbols, for a kernel given by path: its System.map, a /proc/kallsyms
    /// dump, or its vmlinux (by default a System.map beside the Image, else a first boot
    /// reads them).
    #[arg(long, value_name = "FILE")]
    pub symbols: Option<PathBuf>,
    /// Run a scenario file whose runs boot kernels instead (docs/scenarios.md): its kernels
    /// (by release, path, or built by `mtex kernel build`), workloads, modes and
    /// expectations; `mtex run FILE` runs the same file with these options' defaults. The
    /// exit status is 1 when an expectation fails. The file says what --kernel, --workload,
    /// --tcf0 and --symbols would (they are refused with it), and prints its own tables (no
    /// --json, --verbose).
    #[arg(long, value_name = "FILE",
        conflicts_with_all = ["kernel", "workload", "run", "tcf0", "symbols", "json", "verbose"])]
    pub scenario: Option<PathBuf>,
    /// With --scenario: build the kernels it builds, and boot nothing.
    #[arg(long, requires = "scenario")]
    pub build_only: bool,
    /// Print nothing of each kernel's own report (a scenario prints its tables).
    #[arg(skip)]
    pub quiet: bool,
}

impl Args {
    /// The CPU QEMU gives Linux.
    pub fn cpu_model(&self) -> qemu::CpuModel {
        if self.sve {
            qemu::CpuModel::Max
        } else {
            qemu::CpuModel::MaxWithoutSve
        }
    }

    /// `mtex linux`'s defaults, as its command line with no option gives them.
    pub fn defaults() -> Self {
        use clap::{Args as _, FromArgMatches};
        let command = Self::augment_args(clap::Command::new("linux"));
        let matches = command.get_matches_from(["linux"]);
        Self::from_arg_matches(&matches).expect("the defaults parse")
    }
}

/// The least guest RAM `--ram-mib` takes, found by trying: Debian's 6.12 kernel with this
/// initramfs reaches /init in 144 MiB and panics out of memory in 128 ("System is
/// deadlocked on memory").
pub const RAM_MIB_MIN: u64 = 144;

/// The kernel command line's words that are mtex's own (see `cmdline`).
const OWN_WORDS: [&str; 5] = [
    "console=",
    "rdinit=",
    "panic=",
    "mtex_kallsyms",
    "mtex.guest=",
];

/// The hypervisor's options that Linux mode has an option of its own for, and that option:
/// given through `--append` they would skip its checks (a profile of a sampled window), so
/// they are refused there.
const FLAG_WORDS: [(&str, &str); 4] = [
    ("mtex.sample=", "--sample"),
    ("mtex.sample_seed=", "--sample-seed"),
    ("mtex.profile=", "--profile"),
    ("mtex.stacks=", "--stacks"),
];

/// Linux's limit on its command line (arm64's COMMAND_LINE_SIZE, with its NUL).
const CMDLINE_MAX: usize = 2047;

/// Checks every option that needs no tool: bad input is refused here, before dpkg, apt,
/// cargo or QEMU run, with the option named and what it takes.
pub fn check_args(args: &Args) -> Result<()> {
    if args.kernel.is_empty() {
        bail!("--kernel: at least one kernel");
    }
    for k in &args.kernel {
        if local::is_path(k) {
            // A path, not a version: it must be a file (a version is 6.12, 7.3.4+deb13 …).
            match std::fs::metadata(k) {
                Ok(m) if m.is_file() => {}
                Ok(_) => bail!("--kernel {k}: not a regular file"),
                Err(e) => bail!(
                    "--kernel {k}: no such file ({e}); a kernel is a Debian version such as \
                     6.12 or 7.3.4+deb13, or a path to a kernel .deb or an arm64 Image"
                ),
            }
        } else {
            crate::debian::kernel::package_for(k)?;
        }
    }
    if let Some(f) = &args.symbols {
        if args.kernel.len() != 1 || !local::is_path(&args.kernel[0]) {
            bail!(
                "--symbols {}: goes with one --kernel given by path",
                f.display()
            );
        }
        local::symbols_file(f)?;
    }
    if args.kernel.len() > 1 && args.json.is_some() {
        bail!(
            "--json takes one kernel's report: with several --kernel, each kernel's report.json \
             is in its own results directory"
        );
    }
    if let Some(w) = &args.workload
        && w.contains(|c: char| c.is_control())
    {
        bail!(
            "--workload {w:?}: one line only (a workload's name and arguments, or a busybox \
             shell line), without control characters"
        );
    }
    guest_files::check(args)?;
    tagged_heap::environment(&args.env, args.tagged_heap)?;
    if args.operations.len() > args.run.len() {
        bail!(
            "--operations: {} counts for {} --run command(s): one count per command, in order",
            args.operations.len(),
            args.run.len()
        );
    }
    for (option, commands) in [("--run", &args.run), ("--setup", &args.setup)] {
        for c in commands {
            if !is_one_line(c) {
                bail!(
                    "{option} {c:?}: a command of one line (a program and its arguments), \
                     without control characters"
                );
            }
        }
    }
    for w in &args.append {
        let word = !w.is_empty()
            && w.bytes()
                .all(|b| b.is_ascii_graphic() && !b"\"'\\".contains(&b));
        if !word {
            bail!(
                "--append {w:?}: expected one word of printable ASCII (no spaces, quotes or \
                 backslashes); give --append once per word"
            );
        }
        if let Some(own) = OWN_WORDS.iter().find(|o| w.starts_with(*o)) {
            bail!("--append {w:?}: mtex sets {own} itself (Linux mode needs its own value)");
        }
        if let Some((_, flag)) = FLAG_WORDS.iter().find(|(o, _)| w.starts_with(*o)) {
            bail!(
                "--append {w:?}: give {flag} instead, which Linux mode checks against its other \
                 options (the CPUs, the profile) before anything boots"
            );
        }
    }
    if let Some(sample) = &args.sample {
        mtex_abi::options::SampleOptions::parse(&format!("mtex.sample={sample}"))
            .map_err(|e| anyhow::anyhow!("--sample {sample}: {}", e.problem))?;
        if args.profile || args.stacks {
            bail!("--sample with --profile or --stacks: a profile is of a window traced whole");
        }
        if args.oracle && args.cpus > 1 {
            bail!(
                "--sample with --oracle and --cpus {}: the oracle checks the units of a window \
                 sampled on one CPU; on several, their units overlap in time",
                args.cpus
            );
        }
    }
    let line = cmdline(args, true, &[]);
    if line.len() > CMDLINE_MAX {
        bail!(
            "--append: the kernel command line would be {} bytes; Linux takes {CMDLINE_MAX}",
            line.len()
        );
    }
    // The hypervisor's options among them, checked with its own parser.
    if let Some(key) = mtex_abi::options::unknown_key(&line) {
        let word = args
            .append
            .iter()
            .find(|w| w.starts_with(&format!("mtex.{key}")))
            .map_or(key, |w| w);
        bail!("--append {word:?}: {}", qemu::unknown_key_message(key));
    }
    mtex_abi::options::HypOptions::parse(&line).map_err(|e| {
        anyhow::anyhow!(
            "--append: {:#}",
            qemu::option_error(&line, e, mtex_abi::options::HypOptions::parse)
        )
    })?;
    Ok(())
}

/// The workloads `--workload` knows by name (`mtex-work`'s), with the arguments used when
/// none are given.
pub const NAMED_WORKLOADS: [(&str, &str); 8] = [
    ("getpid", "1000"),
    ("futex-hash", "200 4"),
    ("memcached", "200"),
    ("thread-create", "20"),
    ("fork", "20"),
    ("switch", "100"),
    ("mte-fault", ""),
    ("spin", "100000"),
];

/// The shell line /init runs for `--workload spec`: a named workload once per TCF0 mode, in
/// windows 1, 2, ..., or the line itself.
pub fn workload_line(spec: &str, tcf0: &[String]) -> String {
    let mut words = spec.split_whitespace();
    let Some(name) = words.next() else {
        return String::new();
    };
    let Some((_, defaults)) = NAMED_WORKLOADS.iter().find(|(n, _)| *n == name) else {
        return spec.to_string();
    };
    let args: Vec<&str> = words.collect();
    let args = if args.is_empty() {
        defaults.to_string()
    } else {
        args.join(" ")
    };
    tcf0.iter()
        .enumerate()
        .map(|(i, mode)| {
            format!("mtex-work --tcf0 {mode} --window {} {name} {args}", i + 1)
                .trim_end()
                .to_string()
        })
        .collect::<Vec<_>>()
        .join(" && ")
}

/// The shell line of `--run` commands: each in its own window, in order from window
/// `first`, through `mtex-work exec` (which waits for the command, and fails when it does).
pub fn run_line(commands: &[String], first: usize) -> String {
    commands
        .iter()
        .enumerate()
        .map(|(i, c)| format!("mtex-work --window {} exec {c}", i + first))
        .collect::<Vec<_>>()
        .join(" && ")
}

/// Whether `command` is a command line /init can run as one line: not blank, no newline or
/// other control character.
pub fn is_one_line(command: &str) -> bool {
    !command.trim().is_empty() && !command.contains(|c: char| c.is_control())
}

/// The marker a failed `--setup` command prints on Linux's console, before its number
/// (1, 2, ...) and status.
pub const SETUP_FAILED: &str = "mtex-linux: setup-failed";

/// The shell line of `--setup` commands before `rest` (the windows' line): each in order, in
/// a shell of its own (a server it starts in the background goes on running; its directory
/// and variables do not reach the windows), each required to succeed; a failure prints its
/// marker and stops the line there.
pub fn with_setup(setup: &[String], rest: &str) -> String {
    let mut parts: Vec<String> = setup
        .iter()
        .enumerate()
        .map(|(i, c)| {
            format!(
                "{{ ( {c} ) || {{ echo \"{SETUP_FAILED} {} $?\"; false; }}; }}",
                i + 1
            )
        })
        .collect();
    if !rest.trim().is_empty() {
        parts.push(rest.to_string());
    }
    parts.join(" && ")
}

/// Where Linux mode keeps what it fetched and built.
pub fn work_dir() -> PathBuf {
    images::workspace_root().join("target/linux")
}

/// The kernel command line: Linux's console on the passed-through UART, the initramfs's
/// /init, fixed addresses (nokaslr) so that symbols read once stay right, and power-off
/// rather than reboot on panic (`-no-reboot` would otherwise end QEMU with no record).
/// `kernel_words` are the words the kernel itself needs (KASAN's mode, for a kernel mtex
/// built), before the user's.
pub fn cmdline(args: &Args, kallsyms: bool, kernel_words: &[String]) -> String {
    let mut words = vec![
        "console=ttyAMA0".to_string(),
        "rdinit=/init".into(),
        "nokaslr".into(),
        "panic=-1".into(),
    ];
    if kallsyms {
        words.push("mtex_kallsyms".into());
    }
    words.extend(kernel_words.iter().cloned());
    if let Some(sample) = &args.sample {
        words.push(format!("mtex.sample={sample}"));
        if let Some(seed) = args.sample_seed {
            words.push(format!("mtex.sample_seed={seed}"));
        }
    }
    words.extend(args.append.iter().cloned());
    words.join(" ")
}

/// Everything a run needs on disk.
pub struct Prepared {
    pub kernel: crate::debian::kernel::Kernel,
    /// This run's own directory (several runs may go at once): the bundle, Linux's console.
    pub run_dir: PathBuf,
    pub bundle: PathBuf,
    /// The initramfs alone (also inside the bundle), for a boot through firmware.
    pub initrd: PathBuf,
    /// Kernel symbols: a real System.map found beside a kernel given by path, or those an
    /// earlier symbol boot of this Image read; None: a symbol boot reads them.
    pub kallsyms: Option<PathBuf>,
    /// The workloads' program as it went into the initramfs (`mtex-work`, a static ELF at
    /// fixed addresses): the names of the user PCs of the process that opens the windows.
    pub workloads: PathBuf,
    /// Guest RAM: `--ram-mib`, or more for a large initramfs.
    pub ram_mib: u64,
    /// Notes for the report from preparing the guest (the packages' collisions).
    pub notes: Vec<String>,
}

impl Drop for Prepared {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.run_dir);
    }
}

/// Fetches the packages and writes the bundle (kernel Image + initramfs).
pub fn prepare(args: &Args) -> Result<Prepared> {
    let dir = work_dir();
    std::fs::create_dir_all(&dir)?;
    // One fetch at a time (apt's lists, the unpacked trees): a lock on the work directory.
    let lock = std::fs::File::create(dir.join(".lock"))?;
    lock.lock()?;
    let choice = &args.kernel[0];
    let (mut kernel, system_map) = if local::is_path(choice) {
        local::kernel(Path::new(choice), &dir)?
    } else {
        (crate::debian::kernel::kernel(choice, &dir)?, None)
    };
    let image = std::fs::read(&kernel.image)
        .with_context(|| format!("reading {}", kernel.image.display()))?;
    kernel.sha256 = {
        use sha2::Digest;
        crate::kernel_build::hex(&sha2::Sha256::digest(&image))
    };
    // A kernel that cannot be measured is refused now, naming what it lacks.
    let config = std::fs::read_to_string(&kernel.config)
        .ok()
        .or_else(|| requirements::ikconfig(&image));
    let given = args
        .symbols
        .as_deref()
        .map(local::symbols_file)
        .transpose()?;
    let map = given.clone().or_else(|| {
        system_map
            .as_ref()
            .and_then(|m| std::fs::read_to_string(m).ok())
    });
    if let Some(why) = requirements::refusal(&image, config.as_deref(), map.as_deref()) {
        bail!("--kernel {choice}: {why}; it was not booted");
    }
    let busybox = std::fs::read(crate::debian::kernel::busybox(&dir)?)?;
    drop(lock);
    static RUNS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let run_dir = dir.join(format!(
        "run-{}-{}",
        std::process::id(),
        RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&run_dir)?;
    let workload = if args.run.is_empty() {
        workload_line(args.workload.as_deref().unwrap_or(""), &args.tcf0)
    } else {
        run_line(&args.run, 1)
    };
    let workloads = images::build_workloads()?;
    let work = std::fs::read(&workloads)?;
    let mut programs = vec![("mtex-work".to_string(), work)];
    // Booted by UEFI, user space finds the doorbell in an EFI variable, and efivarfs is a
    // module in distribution kernels. Only then: the same kernel booted by path (no modules
    // beside it) and by release must boot the same initramfs.
    let efivarfs = kernel.package.root.join(format!(
        "lib/modules/{}/kernel/fs/efivarfs/efivarfs.ko.xz",
        kernel.release
    ));
    if args.uefi
        && let Ok(m) = std::fs::read(&efivarfs)
    {
        programs.push(("efivarfs.ko.xz".into(), m));
    }
    let workload = with_setup(&args.setup, &workload);
    let env = tagged_heap::environment(&args.env, args.tagged_heap)?;
    let workload = guest_files::exports(&env)? + &workload;
    // The user's files first: the kernel unpacks the archives in turn, so mtex's own win.
    let (mut archives, notes) = guest_files::archives(args, &dir)?;
    archives.push(initramfs::build(busybox, &workload, programs)?);
    let initrd = guest_files::concat(archives);
    let ram_mib = guest_files::ram_mib(args.ram_mib, initrd.len())?;
    let h = linux_bundle::Header::for_parts(image.len() as u64, initrd.len() as u64, ram_mib << 20);
    let mut bytes = h.encode().to_vec();
    bytes.extend_from_slice(&image);
    bytes.resize(h.initrd_offset as usize, 0);
    bytes.extend_from_slice(&initrd);
    let bundle = run_dir.join("bundle.bin");
    std::fs::write(&bundle, &bytes)?;
    let initrd_path = run_dir.join("initrd.img");
    std::fs::write(&initrd_path, &initrd)?;
    let kallsyms = kallsyms_path(&kernel.sha256);
    let given = match given {
        Some(text) => {
            let out = run_dir.join("symbols.txt");
            std::fs::write(&out, text)?;
            Some(out)
        }
        None => None,
    };
    Ok(Prepared {
        kallsyms: given
            .or(system_map)
            .or(kallsyms.exists().then_some(kallsyms)),
        kernel,
        run_dir,
        bundle,
        initrd: initrd_path,
        workloads,
        ram_mib,
        notes,
    })
}

/// Where a kernel's symbols are kept: by the Image's content, not its release string, so
/// that a rebuilt kernel with the same `uname -r` never takes another build's symbols.
fn kallsyms_path(sha256: &str) -> PathBuf {
    work_dir().join(format!("kallsyms-{sha256}.txt"))
}

/// The kernel's text symbols: kept from an earlier run of this release, or read by a boot
/// of their own (the package's System.map is a stub) that dumps /proc/kallsyms and powers
/// off before the workload. The measured boot never dumps them, so its counts are the same
/// on a kernel's first run as on every later one. Empty if the symbol boot gave none.
pub(crate) fn symbols(args: &Args, p: &Prepared) -> Result<String> {
    if let Some(path) = &p.kallsyms {
        return std::fs::read_to_string(path)
            .with_context(|| format!("reading {}", path.display()));
    }
    eprintln!(
        "mtex: a first boot of {} to read its symbols",
        p.kernel.release
    );
    let booted = boot(args, p, Boot::Symbols)?;
    let dump = report::kallsyms_section(&booted.linux).unwrap_or_default();
    // With no configuration to read before boot, the symbols tell what the kernel lacks.
    if !p.kernel.config.is_file() {
        let image = std::fs::read(&p.kernel.image)?;
        if let Some(why) = requirements::refusal(&image, None, Some(&dump)) {
            bail!(
                "--kernel {}: {why}; the measured boot was not run",
                p.kernel.package.name
            );
        }
    }
    if !dump.is_empty() {
        // Written whole, then renamed: a concurrent run reads all of it or none.
        let tmp = p.run_dir.join("kallsyms.txt");
        std::fs::write(&tmp, &dump)?;
        std::fs::rename(&tmp, kallsyms_path(&p.kernel.sha256))?;
    }
    Ok(dump)
}

/// Which boot: the measured one, or the short one that reads the kernel's symbols.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Boot {
    Measured,
    Symbols,
}

/// What a boot gives back: the hypervisor's console (with the oracle's output, if it ran),
/// and Linux's.
pub struct Booted {
    pub console: qemu::Console,
    pub linux: String,
}

/// Boots a prepared bundle.
pub fn boot(args: &Args, p: &Prepared, which: Boot) -> Result<Booted> {
    let built = images::build()?;
    let images = images::Images {
        guest_image: p.bundle.clone(),
        ..built
    };
    let linux_console = p.run_dir.join("linux-console.log");
    let icount = !args.no_icount;
    let mut line = cmdline(args, which == Boot::Symbols, &p.kernel.append);
    if (args.profile || args.stacks) && which == Boot::Measured {
        line.push_str(" mtex.profile=1");
    }
    if args.stacks && which == Boot::Measured {
        line.push_str(" mtex.stacks=1");
    }
    if args.uefi {
        return boot_through_uefi(args, p, &images, &line, which == Boot::Measured);
    }
    let cfg = qemu::RunConfig {
        cmdline: qemu::guest_time_for(&line, icount),
        icount,
        timeout: Duration::from_secs(args.timeout),
        // Guest RAM, plus the staged bundle and the hypervisor beside it.
        memory_mib: (p.ram_mib as u32) * 2 + 256,
        cpus: args.cpus,
        // The hypervisor takes no interrupt of its own in Linux mode (only, in a sampled
        // window, its unit timer), so no EL2 watchdog: the host watches the guest's clock (a
        // stopped clock ends the run at once, with where the CPU was) and holds the run to
        // the time limit.
        watch_budget_ms: Some(args.timeout * 1000),
        second_serial: Some(linux_console.clone()),
        oracle: oracle_run(args, p, which == Boot::Measured)?,
        cpu_model: args.cpu_model(),
        ..qemu::RunConfig::default()
    };
    let console = qemu::run(&images, &cfg)?;
    let linux = std::fs::read(&linux_console)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    Ok(Booted { console, linux })
}

/// The plugin for the measured boot: the oracle of a run with `--oracle`; for a run sampled
/// on several CPUs, its count of each CPU's share, which QEMU's PMU cannot give
/// (`model::report::sampled::share_population`).
fn oracle_run(
    args: &Args,
    p: &Prepared,
    measured: bool,
) -> Result<Option<crate::oracle_check::OracleRun>> {
    let shares = args.sample.is_some() && args.cpus > 1 && !args.oracle;
    ((args.oracle || shares) && measured)
        .then(|| -> Result<_> {
            Ok(crate::oracle_check::OracleRun {
                plugin: images::build_oracle()?,
                out: p
                    .run_dir
                    .join(if shares { "shares.txt" } else { "oracle.txt" }),
                shares,
            })
        })
        .transpose()
}

/// Boots through edk2 with ACPI in install mode: the loader, the hypervisor, the kernel and
/// its initramfs on an ESP of their own; the hypervisor's options are the command line's
/// `mtex.*` words, which it reads from the ESP, as Linux does the rest. One UART carries
/// the firmware's, Linux's and the hypervisor's output; the records are told apart.
fn boot_through_uefi(
    args: &Args,
    p: &Prepared,
    images: &images::Images,
    line: &str,
    measured: bool,
) -> Result<Booted> {
    let icount = !args.no_icount;
    let esp_dir = p.run_dir.join("esp");
    let _ = std::fs::remove_dir_all(&esp_dir);
    let line = qemu::guest_time_for(line, icount);
    crate::cli::esp::write_install(
        &esp_dir,
        &crate::cli::esp::Install {
            hyp_image: &images.hyp_image,
            loader: &images::build_loader()?,
            options: &line,
            kernel: Some(crate::cli::esp::Kernel {
                image: &p.kernel.image,
                initrd: &p.initrd,
                args: &line,
            }),
            on_error: crate::cli::esp::OnError::Shutdown,
        },
    )?;
    let mut cfg = qemu::RunConfig {
        icount,
        timeout: Duration::from_secs(args.timeout),
        cpus: args.cpus,
        watch_budget_ms: Some(args.timeout * 1000),
        oracle: oracle_run(args, p, measured)?,
        cpu_model: args.cpu_model(),
        ..qemu::RunConfig::default()
    }
    .through_uefi(&esp_dir, true);
    // Linux's RAM, plus the firmware's and the hypervisor's.
    cfg.memory_mib = p.ram_mib as u32 + 128;
    let console = qemu::run(images, &cfg)?;
    // Linux's own text: a line it printed while a record was being written is whole again.
    let linux = crate::model::report::console_without_records(&console.bytes);
    Ok(Booted { console, linux })
}

/// Runs `mtex linux`.
pub fn run(args: Args) -> Result<ExitCode> {
    if let Some(file) = &args.scenario {
        return scenario_run::run(&args, file);
    }
    check_args(&args)?;
    if args.kernel.len() == 1 {
        return Ok(run_one(&args)?.0);
    }
    // A/B: each kernel in turn, with the same workloads, modes and options.
    let mut runs = Vec::new();
    for (i, k) in args.kernel.iter().enumerate() {
        eprintln!("mtex: kernel {} of {}: {k}", i + 1, args.kernel.len());
        let one = Args {
            kernel: vec![k.clone()],
            ..args.clone()
        };
        runs.push(run_one(&one)?);
    }
    let docs: Vec<(String, crate::model::results::Results)> = args
        .kernel
        .iter()
        .zip(&runs)
        .map(|(k, (_, doc))| (k.clone(), doc.clone()))
        .collect();
    let side_by_side = ab::render(&docs);
    print!("{side_by_side}");
    // Kept beside the kernels' own results: the table and its verdicts are the answer.
    let dir = crate::scenario::run::results_dir(&args.out, "linux-ab")?;
    std::fs::write(dir.join("report.txt"), side_by_side.trim_start())?;
    eprintln!(
        "mtex: kernels side by side in {}",
        dir.join("report.txt").display()
    );
    Ok(if runs.iter().all(|(c, _)| *c == ExitCode::SUCCESS) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// One kernel's run: its exit status and its windows as a results document.
pub fn run_one(args: &Args) -> Result<(ExitCode, crate::model::results::Results)> {
    let mut json = crate::output::json::JsonOut::open(args.json.as_deref())?;
    // Made before the boot, as `mtex run` does: a place that cannot be written is found now,
    // not after the run.
    let dir = crate::scenario::run::results_dir(&args.out, "linux").with_context(|| {
        format!(
            "--out {}: cannot make a results directory there (it must be a directory that \
             can be created and written)",
            args.out.display()
        )
    })?;
    let p = match prepare(args) {
        Ok(p) => p,
        Err(e) => {
            // Nothing was run: no empty results directory is left behind.
            let _ = std::fs::remove_dir(&dir);
            return Err(e);
        }
    };
    let symbols = symbols(args, &p)?;
    let Booted {
        console,
        linux: linux_text,
    } = boot(args, &p, Boot::Measured)?;
    // The last run's console stays for reading after the run.
    let _ = std::fs::write(work_dir().join("last-linux-console.log"), &linux_text);
    let program = crate::symbols::Symbols::load(&p.workloads);
    let doc = report::document(
        &p.kernel,
        &console,
        &linux_text,
        (&symbols, program),
        report::Setup {
            icount: !args.no_icount,
            cpus: args.cpus,
            cpu_model: args.cpu_model(),
            tagged_heap: args.tagged_heap,
            operations: (1..).zip(args.operations.iter().copied()).collect(),
            notes: p.notes.clone(),
        },
    );
    let form = if args.verbose {
        crate::output::Form::Full
    } else {
        crate::output::Form::Text
    };
    let rest = crate::output::rest(&dir);
    if !args.quiet {
        print!(
            "{}",
            crate::output::render(&doc, form, || Ok(Vec::new()), Some(&rest))?
        );
    }
    // Every form as `mtex run` writes it, and the console logs: the hypervisor's under the
    // run's log name (`linux-1.log`, what `mtex parse` reads), Linux's own beside it.
    let files = crate::scenario::run::write_outputs(&doc, &dir)?;
    if let Some(log) = doc.runs[0].log_file() {
        std::fs::write(dir.join(log), &console.bytes)?;
    }
    std::fs::write(dir.join("linux-console.log"), &linux_text)?;
    if let Some(o) = &console.oracle {
        let name = if console.oracle_shares {
            "shares.txt"
        } else {
            "oracle.txt"
        };
        std::fs::write(dir.join(name), o)?;
    }
    if !args.quiet {
        println!(
            "mtex: results in {} ({} files: report.txt, index.html, report.json, report.csv, \
             plots, linux-1.log, linux-console.log)",
            dir.display(),
            files.len() + 2
        );
    }
    if args.console {
        println!("\nLinux console\n{linux_text}");
    }
    if let Some(json) = &mut json {
        json.write(&doc)?;
    }
    let code = if doc.success {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    };
    Ok((code, doc))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_workloads_run_in_window_1_and_other_lines_as_they_are() {
        let modes = |m: &[&str]| m.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            workload_line("futex-hash", &modes(&["sync"])),
            "mtex-work --tcf0 sync --window 1 futex-hash 200 4"
        );
        assert_eq!(
            workload_line("getpid 10", &modes(&["none", "async"])),
            "mtex-work --tcf0 none --window 1 getpid 10 && \
             mtex-work --tcf0 async --window 2 getpid 10"
        );
        assert_eq!(
            workload_line("mte-fault", &modes(&["asymm"])),
            "mtex-work --tcf0 asymm --window 1 mte-fault"
        );
        assert_eq!(
            workload_line("echo hi; true", &modes(&["sync"])),
            "echo hi; true"
        );
        assert_eq!(workload_line("", &modes(&["sync"])), "");
    }

    #[test]
    fn linux_gets_a_cpu_without_sve_unless_asked() {
        let mut args = Args::defaults();
        assert_eq!(args.cpu_model(), qemu::CpuModel::MaxWithoutSve);
        args.sve = true;
        assert_eq!(args.cpu_model(), qemu::CpuModel::Max);
    }

    #[test]
    fn setup_commands_run_in_turn_before_the_windows_and_stop_at_a_failure() {
        let line = with_setup(
            &["memcached -u root -d".into(), "echo x > /etc/a".into()],
            "mtex-work --window 1 exec true",
        );
        assert_eq!(
            line,
            "{ ( memcached -u root -d ) || { echo \"mtex-linux: setup-failed 1 $?\"; false; }; } && \
             { ( echo x > /etc/a ) || { echo \"mtex-linux: setup-failed 2 $?\"; false; }; } && \
             mtex-work --window 1 exec true"
        );
        assert_eq!(with_setup(&[], "true"), "true");
        // Run by a shell: a failure's marker, and nothing after it.
        let sh = |setup: [&str; 2]| {
            let setup: Vec<String> = setup.iter().map(|s| s.to_string()).collect();
            let out = std::process::Command::new("sh")
                .arg("-c")
                .arg(with_setup(&setup, "echo window"))
                .output()
                .unwrap();
            (
                String::from_utf8_lossy(&out.stdout).into_owned(),
                out.status.success(),
            )
        };
        assert_eq!(
            sh(["true", "exit 3"]),
            ("mtex-linux: setup-failed 2 3\n".into(), false)
        );
        assert_eq!(
            sh(["exit 4", "true"]),
            ("mtex-linux: setup-failed 1 4\n".into(), false)
        );
    }

    #[test]
    fn each_run_command_is_a_window_in_turn() {
        assert_eq!(
            run_line(&["perf bench futex hash -s".into(), "hello".into()], 1),
            "mtex-work --window 1 exec perf bench futex hash -s && \
             mtex-work --window 2 exec hello"
        );
    }
}
