//! Run options, passed from the host to the hypervisor and the guest on the kernel command
//! line (`/chosen/bootargs` of the device tree), as `mtex.<key>=<value>` words. The host
//! checks them with these same parsers before it boots anything.

use crate::ShortStr;

/// An option that could not be read; names the field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OptionError {
    pub key: &'static str,
    pub problem: &'static str,
}

/// The value of `mtex.<key>` in `cmdline`, if present (the last one wins, as in Linux).
pub fn value<'a>(cmdline: &'a str, key: &str) -> Option<&'a str> {
    cmdline
        .split_ascii_whitespace()
        .filter_map(|w| w.strip_prefix("mtex."))
        .filter_map(|w| w.split_once('='))
        .filter(|(k, _)| *k == key)
        .map(|(_, v)| v)
        .next_back()
}

/// The words of `cmdline` that are the guest's: all but the hypervisor's own `mtex.*`
/// options, which Linux would only copy and keep (a longer command line moves what the
/// kernel allocates after it, and a window's counts with it: the same workload with and
/// without `mtex.profile=1` then ran different kernel code). `mtex.doorbell=` stays: it is
/// the guest's, for the workload to find the doorbell.
pub fn guest_words(cmdline: &str) -> impl Iterator<Item = &str> {
    cmdline
        .split_ascii_whitespace()
        .filter(|w| !w.starts_with("mtex.") || w.starts_with("mtex.doorbell="))
}

fn parse_u64(cmdline: &str, key: &'static str, default: u64) -> Result<u64, OptionError> {
    match value(cmdline, key) {
        None => Ok(default),
        Some(v) => v.parse().map_err(|_| OptionError {
            key,
            problem: "expected a decimal integer",
        }),
    }
}

/// The value of `mtex.<key>` in `cmdline` as one of `choices` (its spelling, its value), or
/// `default` when absent; any other spelling is an error saying `problem`.
fn parse_choice<T: Copy>(
    cmdline: &str,
    key: &'static str,
    default: T,
    choices: &[(&str, T)],
    problem: &'static str,
) -> Result<T, OptionError> {
    match value(cmdline, key) {
        None => Ok(default),
        Some(v) => choices
            .iter()
            .find(|(name, _)| *name == v)
            .map(|&(_, t)| t)
            .ok_or(OptionError { key, problem }),
    }
}

/// How to trap SCTLR_EL1/TCR_EL1 writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TrapChoice {
    /// FEAT_FGT when the CPU has it, else HCR_EL2.TVM.
    Auto,
    /// HCR_EL2.TVM even when FEAT_FGT is present (tests the fallback path).
    Tvm,
}

/// Which step engine a traced phase uses (`mtex.step`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepMode {
    /// Every short path on: the step fast path, breakpoint runs (if `mtex.runs` allows) and
    /// the SCTLR_EL1/TCR_EL1 trap fast path.
    Fast,
    /// The reference: every exit through the full Rust path, every traced instruction
    /// stepped. The optimised paths are proven against it (same counts, field by field).
    Plain,
}

/// How the guest's clock leaves out the hypervisor's time (`mtex.guest_time`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GuestTime {
    /// Every exit's EL2 time comes off CNTVOFF_EL2 before the guest runs again: under
    /// `-icount shift=0` the guest's timer fires at the same instruction whatever the
    /// hypervisor did (the default).
    Exact,
    /// Added up and taken off every 100 µs: what the host asks for when QEMU runs without
    /// `-icount`, where each CNTVOFF_EL2 write costs QEMU a timer re-arm and a thread wake-up.
    Coarse,
}

/// Which of the trace's counts the guest's own PMU counts as its MTE events
/// (`mtex.guest_pmu_events`; `crate::report::GuestPmuCounted` says which a figure is).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum GuestEventsView {
    /// The architecture's, with the guest's own controls: what a CPU that checks every
    /// access the architecture calls Tag Checked counts (AmpereOne's PMU).
    Architectural,
    /// Only the accesses whose check can report (TCF/TCF0 not NONE), as the Arm cores count.
    TcfElided,
}

/// The hypervisor's options.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HypOptions {
    /// `mtex.watchdog_ms`: guest run budget in milliseconds of counter time.
    pub watchdog_ms: u64,
    /// `mtex.traps`: `auto` or `tvm`.
    pub traps: TrapChoice,
    /// `mtex.runs`: `1` (default) lets traced phases run at full speed between hardware
    /// breakpoints from one instruction that matters to the next (fewer exits, same counts;
    /// `mtex.step=plain` turns runs off too); `0` steps every instruction.
    pub runs: bool,
    /// `mtex.step`: `fast` (default) or `plain` (the reference path: no fast paths, no runs).
    pub step: StepMode,
    /// `mtex.guest_time`: `exact` (default) or `coarse`.
    pub guest_time: GuestTime,
    /// `mtex.selftest`: make the hypervisor fail on purpose after boot, to test that such
    /// failures end the run with a record: `hyp-fault` (an exception at EL2) or `hyp-panic`.
    pub selftest: Option<SelfTest>,
    /// `mtex.log`: the most detailed diagnostics sent as console records.
    pub log: log::LevelFilter,
    /// `mtex.pmu_events=0x13,0x4024`: raw PMU events each untraced phase also counts, at EL1
    /// and EL0 (up to [`crate::report::PMU_RAW_EVENTS`]).
    pub pmu_events: EventList,
    /// `mtex.pmu_require=0x4025,0x4026`: events the run needs; a CPU without one of them ends
    /// the run at boot with a record naming it, instead of reporting a phase without it.
    pub pmu_require: EventList,
    /// `mtex.tco_watch`: `1` (default) watches the guest's MSR TCO sites with breakpoints in
    /// extra untraced passes (of phases whose guest runs the passes asked for); `0` does not.
    pub tco_watch: bool,
    /// `mtex.profile`: `1` keeps every traced phase's counts by PC as well and sends them
    /// with its counts (`PcProfile` records); `0` (default) does not.
    pub profile: bool,
    /// `mtex.profile_slots`: PCs the profile's table holds, a power of two from 2 to
    /// [`HypOptions::STACK_PROFILE_SLOTS`] (the default with `mtex.stacks=1`;
    /// [`HypOptions::PROFILE_SLOTS`] without); fewer make it overflow into `[other]` sooner
    /// (the tests' way of reaching that path with real code).
    pub profile_slots: u32,
    /// `mtex.stacks`: `1` keeps the kernel's call stacks as well (`mtex_trace::callstack`):
    /// the profile keys each PC by the stack it ran on, every instruction is stepped (no
    /// runs, no fast path), and the stacks' nodes are sent with the profile. Implies
    /// `mtex.profile=1`. `0` (default) does not.
    pub stacks: bool,
    /// `mtex.sample=UNIT:GAP_US` (`mtex.sample_seed=N` seeds its random generator): traced phases are sampled
    /// instead of traced whole ([`SampleOptions`]).
    pub sample: Option<SampleOptions>,
    /// `mtex.guest_pmu_events`: the guest's PMU has MEM_ACCESS_CHECKED, _RD and _WR, counted
    /// from the trace in this view: `architectural` (default) or `tcf-elided`; `0`: it has
    /// only the hardware's events.
    pub guest_pmu_events: Option<GuestEventsView>,
}

/// How a sampled phase is sampled: it runs at full speed, and units of consecutive
/// instructions are traced exactly, `unit` long on average (each drawn uniformly from half to
/// one and a half times it: `mtex_vm::sample`), each begun after a gap of counter time drawn uniformly
/// from 0 to twice `gap_us` microseconds (a random schedule: a fixed period would alias with
/// the guest's own periodic work), from a generator seeded with `seed`. `gap_us` 0 traces
/// the phase whole, unit after unit from its begin (the estimate is then the exact count).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SampleOptions {
    pub unit: u32,
    pub gap_us: u32,
    pub seed: u64,
}

impl SampleOptions {
    /// The largest unit and gap.
    pub const MAX: u32 = 100_000_000;

    /// `mtex.sample`, and `mtex.sample_seed` (the random generator's); None without `mtex.sample`.
    pub fn parse(cmdline: &str) -> Result<Option<Self>, OptionError> {
        let seed = parse_u64(cmdline, "sample_seed", 1)?; // the random generator's
        let Some(v) = value(cmdline, "sample") else {
            return Ok(None);
        };
        let problem = "expected UNIT:GAP_US, instructions per unit (1-100000000) and the mean \
                       gap between units in microseconds (0-100000000)";
        let (unit, gap) = v.split_once(':').ok_or(OptionError {
            key: "sample",
            problem,
        })?;
        let (Ok(unit), Ok(gap_us)) = (unit.parse::<u32>(), gap.parse::<u32>()) else {
            return Err(OptionError {
                key: "sample",
                problem,
            });
        };
        if unit == 0 || unit > Self::MAX || gap_us > Self::MAX {
            return Err(OptionError {
                key: "sample",
                problem,
            });
        }
        Ok(Some(Self { unit, gap_us, seed }))
    }
}

/// A short list of PMU event numbers (`0x4025,0x11`, hex with `0x` or decimal).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EventList {
    events: [u16; crate::report::PMU_RAW_EVENTS],
    len: u8,
}

impl EventList {
    pub fn as_slice(&self) -> &[u16] {
        &self.events[..self.len as usize]
    }

    fn parse(cmdline: &str, key: &'static str) -> Result<Self, OptionError> {
        let mut list = Self::default();
        let Some(v) = value(cmdline, key) else {
            return Ok(list);
        };
        for word in v.split(',').filter(|w| !w.is_empty()) {
            let n = match word.strip_prefix("0x") {
                Some(hex) => u16::from_str_radix(hex, 16),
                None => word.parse(),
            }
            .map_err(|_| OptionError {
                key,
                problem: "expected PMU event numbers (0x0000-0xffff), comma-separated",
            })?;
            if list.len as usize == list.events.len() {
                return Err(OptionError {
                    key,
                    problem: "at most 3 events",
                });
            }
            list.events[list.len as usize] = n;
            list.len += 1;
        }
        Ok(list)
    }
}

/// `mtex.log=off|error|warn|info|debug|trace` (default `warn`): how much of the hypervisor's
/// and the guest's diagnostics (the `log` crate) reach the report as console lines.
pub fn parse_log(cmdline: &str) -> Result<log::LevelFilter, OptionError> {
    match value(cmdline, "log") {
        None => Ok(log::LevelFilter::Warn),
        Some(v) => v.parse().map_err(|_| OptionError {
            key: "log",
            problem: "expected off, error, warn, info, debug or trace",
        }),
    }
}

/// A deliberate hypervisor failure (`mtex.selftest`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SelfTest {
    HypFault,
    HypPanic,
}

impl HypOptions {
    pub const DEFAULT_WATCHDOG_MS: u64 = 10_000;
    /// The profile table's size in the hypervisor (PCs) by default.
    pub const PROFILE_SLOTS: u32 = 65536;
    /// ... and with call stacks, where a PC takes a slot per stack it runs on: the largest.
    pub const STACK_PROFILE_SLOTS: u32 = 262_144;

    pub fn parse(cmdline: &str) -> Result<Self, OptionError> {
        let watchdog_ms = parse_u64(cmdline, "watchdog_ms", Self::DEFAULT_WATCHDOG_MS)?;
        if watchdog_ms == 0 || watchdog_ms > 3_600_000 {
            return Err(OptionError {
                key: "watchdog_ms",
                problem: "must be between 1 and 3600000",
            });
        }
        let traps = parse_choice(
            cmdline,
            "traps",
            TrapChoice::Auto,
            &[("auto", TrapChoice::Auto), ("tvm", TrapChoice::Tvm)],
            "expected `auto` or `tvm`",
        )?;
        let runs = parse_choice(
            cmdline,
            "runs",
            true,
            &[("0", false), ("1", true)],
            "expected 0 or 1",
        )?;
        let step = parse_choice(
            cmdline,
            "step",
            StepMode::Fast,
            &[("fast", StepMode::Fast), ("plain", StepMode::Plain)],
            "expected fast or plain",
        )?;
        let guest_time = parse_choice(
            cmdline,
            "guest_time",
            GuestTime::Exact,
            &[("exact", GuestTime::Exact), ("coarse", GuestTime::Coarse)],
            "expected exact or coarse",
        )?;
        let selftest = parse_choice(
            cmdline,
            "selftest",
            None,
            &[
                ("hyp-fault", Some(SelfTest::HypFault)),
                ("hyp-panic", Some(SelfTest::HypPanic)),
            ],
            "expected hyp-fault or hyp-panic",
        )?;
        let log = parse_log(cmdline)?;
        let pmu_events = EventList::parse(cmdline, "pmu_events")?;
        let pmu_require = EventList::parse(cmdline, "pmu_require")?;
        let tco_watch = parse_choice(
            cmdline,
            "tco_watch",
            true,
            &[("0", false), ("1", true)],
            "expected 0 or 1",
        )?;
        let profile = parse_choice(
            cmdline,
            "profile",
            false,
            &[("0", false), ("1", true)],
            "expected 0 or 1",
        )?;
        let stacks = parse_choice(
            cmdline,
            "stacks",
            false,
            &[("0", false), ("1", true)],
            "expected 0 or 1",
        )?;
        let profile = profile || stacks;
        let default_slots = if stacks {
            Self::STACK_PROFILE_SLOTS
        } else {
            Self::PROFILE_SLOTS
        };
        let profile_slots = parse_u64(cmdline, "profile_slots", default_slots as u64)?;
        if !(2..=Self::STACK_PROFILE_SLOTS as u64).contains(&profile_slots)
            || !profile_slots.is_power_of_two()
        {
            return Err(OptionError {
                key: "profile_slots",
                problem: "must be a power of two from 2 to 262144",
            });
        }
        let sample = SampleOptions::parse(cmdline)?;
        if sample.is_some() && (profile || stacks) {
            return Err(OptionError {
                key: "sample",
                problem: "a sampled phase keeps no per-PC profile or call stacks",
            });
        }
        let guest_pmu_events = parse_choice(
            cmdline,
            "guest_pmu_events",
            Some(GuestEventsView::Architectural),
            &[
                ("architectural", Some(GuestEventsView::Architectural)),
                ("tcf-elided", Some(GuestEventsView::TcfElided)),
                ("0", None),
            ],
            "expected architectural, tcf-elided or 0",
        )?;
        Ok(Self {
            guest_pmu_events,
            sample,
            profile,
            stacks,
            profile_slots: profile_slots as u32,
            tco_watch,
            log,
            pmu_events,
            pmu_require,
            watchdog_ms,
            traps,
            runs,
            step,
            guest_time,
            selftest,
        })
    }
}

/// What the guest runs (`mtex.guest`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GuestProgram {
    /// The guest kernel runs the scenario (`mtex.policies`, `mtex.workloads`, `mtex.tcf0`):
    /// every policy × workload as a traced phase.
    Kernel,
    /// Walks through the MTE configurations in named phases.
    Default,
    /// Issues a hypercall the hypervisor does not know, then exits with its result.
    UnknownHvc,
    /// Loads from the hypervisor's memory (must end the run with a stage-2 fault).
    TouchHyp,
    /// Spins forever (must end the run by the watchdog).
    Spin,
    /// Writes SCTLR_EL1 `mtex.bench_n` times in one phase and twice as often in another, to
    /// measure EL2 instructions per trapped write.
    BenchTraps,
    /// Runs `program::TRACE`: traced phases whose tag-checked access counts are known.
    Trace,
    /// Runs the `program::diff_case` cases, one traced phase each, and reports which of them
    /// took a tag-check fault.
    Differential,
    /// The same workload (`mtex.bench_n` tagged loads) untraced, then traced, to measure what
    /// tracing costs.
    BenchTrace,
    /// An LDXR/STXR loop in a traced phase, which single-stepping cannot carry through.
    ExclusiveLoop,
    /// A traced phase that enters EL0 (ERET), loads `mtex.bench_n` times there through a
    /// tagged pointer, and comes back by SVC.
    El0,
    /// Sets the OS locks and its own breakpoint around traced phases (guest/src/selftest).
    HostileDebug,
    /// Resets and reprograms the PMU inside a traced phase; reads the ID registers.
    HostileCpu,
    /// WFI inside a traced phase, then a WFE spin that only the watchdog ends.
    HostileWfx,
    /// Writes the report UART directly (must end the run with a stage-2 fault).
    HostileUart,
    /// Aliases its exception vector onto a traced load's fall-through.
    HostileVector,
    /// Corrupts its frame pointers, returns elsewhere than its caller and recurses past the
    /// stacks' depth in a traced phase (`mtex.stacks=1`).
    HostileFrames,
    /// Rewrites its own code in place inside a traced phase.
    HostilePatch,
    /// Rewrites the code a run is executing with an SP-based store inside the run.
    HostileStackPatch,
    /// Rewrites an MSR TCO the TCO watch is watching, in untraced repeatable phases.
    HostileTcoPatch,
    /// One LDXR/STXR pair per loop iteration, status ignored (not a retry loop).
    HostileExclusive,
    /// What the Arm ARM leaves to the CPU: CAS/CASP whose compare fails, exclusive pairs
    /// Tag Checked otherwise, Tagged memory mapped Non-shareable or with SCTLR_EL1.C = 0.
    HostileImpdef,
    /// Points a live code page's entry at another page under trace (TLBI).
    HostileRemap,
    /// Behaves differently traced: an exclusive store no run carries fails when stepped,
    /// and only a successful one is followed by a tagged load (for sampled phases).
    HostileSample,
    /// A YIELD spin (must meet the watchdog).
    HostileYield,
    /// An exception loop at EL1 that retires nothing (only the host limit ends it).
    HostileAbortLoop,
    /// PSCI CPU_ON with bad entry points, twice, inside a phase, and a phase opened with a
    /// second CPU on, then a CPU turned off and on again (QEMU with two CPUs).
    HostileSmp,
    /// Starts every CPU the machine has, each of which turns itself off at once, and checks
    /// that every start succeeded: the hypervisor's memory for CPUs scales with the machine.
    EveryCpu,
    /// Loads through pointer-authenticated pointers (LDRAA/LDRAB) and across an Untagged and
    /// a Tagged page.
    Addresses,
    /// Runs the user's code (`mtex.snippet`, assembled by `mtex snippet`) as one traced phase
    /// in a fixed environment ([`SnippetOptions`], guest/src/snippet.rs).
    Snippet,
    /// `mtex probe`: one untraced phase per cell of the CPU's MTE choices (EL × TCF × TCO ×
    /// TCMA × pointer tag × page), each access's fault reported on the console, then the
    /// cost phases (TCO write, TFSR_EL1 read, STG/ST2G/DC GZVA) (guest/src/probe.rs).
    Probe,
}

impl GuestProgram {
    pub const ALL: [(&'static str, GuestProgram); 31] = [
        ("kernel", Self::Kernel),
        ("controls", Self::Default),
        ("unknown-hvc", Self::UnknownHvc),
        ("touch-hyp", Self::TouchHyp),
        ("spin", Self::Spin),
        ("bench-traps", Self::BenchTraps),
        ("trace", Self::Trace),
        ("differential", Self::Differential),
        ("bench-trace", Self::BenchTrace),
        ("exclusive-loop", Self::ExclusiveLoop),
        ("el0", Self::El0),
        ("hostile-debug", Self::HostileDebug),
        ("hostile-cpu", Self::HostileCpu),
        ("hostile-wfx", Self::HostileWfx),
        ("hostile-uart", Self::HostileUart),
        ("hostile-vector", Self::HostileVector),
        ("hostile-frames", Self::HostileFrames),
        ("hostile-patch", Self::HostilePatch),
        ("hostile-stack-patch", Self::HostileStackPatch),
        ("hostile-tco-patch", Self::HostileTcoPatch),
        ("hostile-exclusive", Self::HostileExclusive),
        ("hostile-impdef", Self::HostileImpdef),
        ("hostile-remap", Self::HostileRemap),
        ("hostile-sample", Self::HostileSample),
        ("hostile-yield", Self::HostileYield),
        ("hostile-abort-loop", Self::HostileAbortLoop),
        ("hostile-smp", Self::HostileSmp),
        ("every-cpu", Self::EveryCpu),
        ("addresses", Self::Addresses),
        ("snippet", Self::Snippet),
        ("probe", Self::Probe),
    ];

    pub fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(_, p)| *p == self)
            .map_or("?", |(n, _)| n)
    }

    /// Whether this program reads `mtex.<key>` (a key of [`KNOWN_KEYS`]). The hypervisor's
    /// options and `mtex.guest` apply whatever the program; the kernel scenario's keys only to
    /// `kernel`, `mtex.bench_n` to the programs whose loops it sizes, `mtex.snippet*` only to
    /// `snippet`. Any other program would boot with the option left unread: the host refuses
    /// it, naming the key and the program.
    pub fn reads(self, key: &str) -> bool {
        match key {
            "policies" | "workloads" | "tcf0" | "hz" | "trace" | "cpus" => self == Self::Kernel,
            "bench_n" => matches!(self, Self::BenchTraps | Self::BenchTrace | Self::El0),
            "snippet" | "snippet_tcf" | "snippet_tcf0" | "snippet_tcma1" | "snippet_el"
            | "snippet_iters" => self == Self::Snippet,
            _ => true,
        }
    }
}

/// The guest's options.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GuestOptions {
    /// `mtex.guest`
    pub program: GuestProgram,
    /// `mtex.bench_n`: trapped writes per benchmark round.
    pub bench_n: u64,
    /// The `snippet` program's environment (`mtex.snippet_*`).
    pub snippet: SnippetOptions,
    /// `mtex.log` ([`parse_log`]).
    pub log: log::LevelFilter,
}

impl GuestOptions {
    pub fn parse(cmdline: &str) -> Result<Self, OptionError> {
        let program = match value(cmdline, "guest") {
            None => GuestProgram::Kernel,
            Some(v) => GuestProgram::ALL
                .iter()
                .find(|(n, _)| *n == v)
                .map(|(_, p)| *p)
                .ok_or(OptionError {
                    key: "guest",
                    problem: "unknown program (kernel, controls, trace, differential, el0, unknown-hvc, touch-hyp, spin, bench-traps, bench-trace, exclusive-loop, hostile-debug, hostile-cpu, hostile-wfx, hostile-uart, hostile-vector, hostile-patch, hostile-stack-patch, hostile-tco-patch, hostile-exclusive, hostile-impdef, hostile-remap, hostile-yield, hostile-abort-loop, hostile-smp, every-cpu, addresses, snippet, probe)",
                })?,
        };
        let bench_n = parse_u64(cmdline, "bench_n", 1000)?;
        if bench_n == 0 || bench_n > 1_000_000 {
            return Err(OptionError {
                key: "bench_n",
                problem: "must be between 1 and 1000000",
            });
        }
        let snippet = SnippetOptions::parse(cmdline)?;
        if program == GuestProgram::Snippet && value(cmdline, "snippet").is_none() {
            return Err(OptionError {
                key: "snippet",
                problem: "missing: the code to run (hex bytes, from `mtex snippet`)",
            });
        }
        Ok(Self {
            program,
            bench_n,
            snippet,
            log: parse_log(cmdline)?,
        })
    }
}

/// The `snippet` program's code and environment. The code itself (`mtex.snippet`: the
/// instruction bytes in hex, two digits a byte, in memory order) is checked here and read by
/// the guest with [`snippet_code`]; the rest are the controls it runs under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SnippetOptions {
    /// `mtex.snippet_tcf`: SCTLR_EL1.TCF (`none|sync|async|asymm`, default sync).
    pub tcf: u64,
    /// `mtex.snippet_tcf0`: SCTLR_EL1.TCF0 (default sync).
    pub tcf0: u64,
    /// `mtex.snippet_tcma1`: `1` sets TCR_EL1.TCMA1 (default 0).
    pub tcma1: bool,
    /// `mtex.snippet_el`: the exception level the snippet runs at, 0 or 1 (default 1).
    pub el: u8,
    /// `mtex.snippet_iters`: how many times the snippet runs inside its one phase.
    pub iters: u64,
}

impl SnippetOptions {
    /// Largest snippet: two 4 KiB pages.
    pub const MAX_BYTES: usize = 8192;
    pub const MAX_ITERS: u64 = 1_000_000;

    pub fn parse(cmdline: &str) -> Result<Self, OptionError> {
        if let Some(hex) = value(cmdline, "snippet") {
            check_snippet_hex(hex)?;
        }
        let tcf = |key: &'static str| match value(cmdline, key) {
            None | Some("sync") => Ok(1),
            Some("none") => Ok(0),
            Some("async") => Ok(2),
            Some("asymm") => Ok(3),
            Some(_) => Err(OptionError {
                key,
                problem: "expected none, sync, async or asymm",
            }),
        };
        let tcma1 = match value(cmdline, "snippet_tcma1") {
            None | Some("0") => false,
            Some("1") => true,
            Some(_) => {
                return Err(OptionError {
                    key: "snippet_tcma1",
                    problem: "expected 0 or 1",
                });
            }
        };
        let el = match value(cmdline, "snippet_el") {
            None | Some("1") => 1,
            Some("0") => 0,
            Some(_) => {
                return Err(OptionError {
                    key: "snippet_el",
                    problem: "expected 0 or 1",
                });
            }
        };
        let iters = parse_u64(cmdline, "snippet_iters", 1)?;
        if iters == 0 || iters > Self::MAX_ITERS {
            return Err(OptionError {
                key: "snippet_iters",
                problem: "must be between 1 and 1000000",
            });
        }
        Ok(Self {
            tcf: tcf("snippet_tcf")?,
            tcf0: tcf("snippet_tcf0")?,
            tcma1,
            el,
            iters,
        })
    }
}

fn check_snippet_hex(hex: &str) -> Result<(), OptionError> {
    let problem = if hex.is_empty() || !hex.len().is_multiple_of(8) {
        "expected whole instructions: hex digits, a multiple of 8"
    } else if hex.len() / 2 > SnippetOptions::MAX_BYTES {
        "longer than 8192 bytes"
    } else if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        "expected hex digits"
    } else {
        return Ok(());
    };
    Err(OptionError {
        key: "snippet",
        problem,
    })
}

/// The snippet's bytes, decoded from `mtex.snippet` into `out`; their number, or None when
/// there is none or it does not fit.
pub fn snippet_code(cmdline: &str, out: &mut [u8]) -> Option<usize> {
    let hex = value(cmdline, "snippet")?;
    check_snippet_hex(hex).ok()?;
    let n = hex.len() / 2;
    let digit = |b: u8| (b as char).to_digit(16).unwrap_or(0) as u8;
    for (o, pair) in out.get_mut(..n)?.iter_mut().zip(hex.as_bytes().chunks(2)) {
        *o = digit(pair[0]) << 4 | digit(pair[1]);
    }
    Some(n)
}

/// Formats an option error for a console.
pub fn describe(e: OptionError) -> ShortStr<96> {
    let mut s = ShortStr::new();
    s.push_str_truncating("bad option mtex.");
    s.push_str_truncating(e.key);
    s.push_str_truncating(": ");
    s.push_str_truncating(e.problem);
    s
}

/// Every `mtex.<key>` that the hypervisor ([`HypOptions`]), the guest ([`GuestOptions`]) and
/// the kernel scenario ([`crate::scenario::Scenario`]) read. Any other `mtex.` key is a mistake
/// that would leave a default silently in force (`mtex.policy=` for `mtex.policies=`), so the
/// host rejects it before it boots. A test (`crates/abi/tests/option_keys.rs`) checks this list
/// against the parsers both ways.
pub const KNOWN_KEYS: &[&str] = &[
    "guest",
    "watchdog_ms",
    "traps",
    "runs",
    "step",
    "guest_time",
    "selftest",
    "log",
    "bench_n",
    "policies",
    "workloads",
    "tcf0",
    "hz",
    "trace",
    "cpus",
    "snippet",
    "snippet_tcf",
    "snippet_tcf0",
    "snippet_tcma1",
    "snippet_el",
    "snippet_iters",
    "pmu_events",
    "pmu_require",
    "tco_watch",
    "profile",
    "profile_slots",
    "stacks",
    "sample",
    "sample_seed", // the random generator's
    "guest_pmu_events",
];

/// The key of the first `mtex.` word of `cmdline` that is not in [`KNOWN_KEYS`] (the text
/// before its `=`, or the whole word without one). Words without the `mtex.` prefix belong to
/// others and are not looked at.
pub fn unknown_key(cmdline: &str) -> Option<&str> {
    cmdline
        .split_ascii_whitespace()
        .filter_map(|w| w.strip_prefix("mtex."))
        .map(|w| w.split_once('=').map_or(w, |(k, _)| k))
        .find(|k| !KNOWN_KEYS.contains(k))
}

#[cfg(test)]
mod tests {

    use super::*;

    #[test]
    fn the_guest_gets_its_own_words_and_the_doorbell_only() {
        let line = "console=ttyAMA0 mtex.profile=1 rdinit=/init mtex.stacks=1 \
                    mtex.doorbell=0x9fe0000 mtex_kallsyms mtex.sample=1000:30";
        let words: std::vec::Vec<&str> = guest_words(line).collect();
        assert_eq!(
            words,
            [
                "console=ttyAMA0",
                "rdinit=/init",
                "mtex.doorbell=0x9fe0000",
                "mtex_kallsyms"
            ]
        );
    }

    #[test]
    fn reads_values_and_defaults() {
        let c = "console=ttyAMA0 mtex.guest=spin mtex.watchdog_ms=200 mtex.traps=tvm";
        assert_eq!(value(c, "guest"), Some("spin"));
        let h = HypOptions::parse(c).unwrap();
        assert_eq!((h.watchdog_ms, h.traps), (200, TrapChoice::Tvm));
        assert_eq!(GuestOptions::parse(c).unwrap().program, GuestProgram::Spin);
        let d = HypOptions::parse("").unwrap();
        assert_eq!(d.watchdog_ms, HypOptions::DEFAULT_WATCHDOG_MS);
        assert_eq!(
            GuestOptions::parse("").unwrap().program,
            GuestProgram::Kernel
        );
    }

    #[test]
    fn pmu_event_lists_parse_and_a_bad_one_is_named() {
        let h = HypOptions::parse("mtex.pmu_events=0x13,17 mtex.pmu_require=0x4025").unwrap();
        assert_eq!(h.pmu_events.as_slice(), &[0x13, 17]);
        assert_eq!(h.pmu_require.as_slice(), &[0x4025]);
        assert!(
            HypOptions::parse("")
                .unwrap()
                .pmu_events
                .as_slice()
                .is_empty()
        );
        for bad in [
            "mtex.pmu_events=0xg",
            "mtex.pmu_events=1,2,3,4",
            "mtex.pmu_events=70000",
        ] {
            assert_eq!(
                HypOptions::parse(bad).unwrap_err().key,
                "pmu_events",
                "{bad}"
            );
        }
    }

    #[test]
    fn a_sample_schedule_parses_and_a_bad_one_is_named() {
        let h = HypOptions::parse("mtex.sample=1000:250 mtex.sample_seed=7").unwrap(); // random
        assert_eq!(
            h.sample,
            Some(SampleOptions {
                unit: 1000,
                gap_us: 250,
                seed: 7
            })
        );
        assert_eq!(HypOptions::parse("").unwrap().sample, None);
        assert_eq!(
            HypOptions::parse("mtex.sample=5:0").unwrap().sample,
            Some(SampleOptions {
                unit: 5,
                gap_us: 0,
                seed: 1
            })
        );
        for bad in [
            "mtex.sample=1000",
            "mtex.sample=0:10",
            "mtex.sample=10:-1",
            "mtex.sample=100000001:1",
            "mtex.sample=10:10 mtex.profile=1",
        ] {
            assert_eq!(HypOptions::parse(bad).unwrap_err().key, "sample", "{bad}");
        }
        assert_eq!(
            HypOptions::parse("mtex.sample=1:1 mtex.sample_seed=x")
                .unwrap_err()
                .key,
            "sample_seed"
        );
    }

    #[test]
    fn log_levels_parse_and_a_bad_one_is_named() {
        assert_eq!(parse_log(""), Ok(log::LevelFilter::Warn));
        assert_eq!(parse_log("mtex.log=debug"), Ok(log::LevelFilter::Debug));
        assert_eq!(
            HypOptions::parse("mtex.log=off").unwrap().log,
            log::LevelFilter::Off
        );
        assert_eq!(parse_log("mtex.log=loud").unwrap_err().key, "log");
    }

    #[test]
    fn the_profile_table_size_is_a_power_of_two_within_the_table() {
        let slots = |line: &str| HypOptions::parse(line).map(|o| o.profile_slots);
        assert_eq!(slots(""), Ok(HypOptions::PROFILE_SLOTS));
        assert_eq!(slots("mtex.profile_slots=64"), Ok(64));
        assert_eq!(
            HypOptions::parse("mtex.stacks=1").map(|o| o.profile_slots),
            Ok(HypOptions::STACK_PROFILE_SLOTS)
        );
        for bad in ["0", "1", "48", "524288", "many"] {
            assert_eq!(
                slots(&std::format!("mtex.profile_slots={bad}"))
                    .unwrap_err()
                    .key,
                "profile_slots",
                "{bad}"
            );
        }
    }

    #[test]
    fn stacks_imply_the_profile() {
        let o = |line: &str| HypOptions::parse(line).map(|o| (o.profile, o.stacks));
        assert_eq!(o(""), Ok((false, false)));
        assert_eq!(o("mtex.profile=1"), Ok((true, false)));
        assert_eq!(o("mtex.stacks=1"), Ok((true, true)));
        assert_eq!(o("mtex.stacks=yes").unwrap_err().key, "stacks");
    }

    #[test]
    fn errors_name_the_field() {
        assert_eq!(
            HypOptions::parse("mtex.watchdog_ms=soon").unwrap_err().key,
            "watchdog_ms"
        );
        assert_eq!(
            HypOptions::parse("mtex.watchdog_ms=0").unwrap_err().key,
            "watchdog_ms"
        );
        assert_eq!(
            HypOptions::parse("mtex.traps=maybe").unwrap_err().key,
            "traps"
        );
        assert_eq!(HypOptions::parse("mtex.runs=yes").unwrap_err().key, "runs");
        assert!(HypOptions::parse("mtex.runs=1").unwrap().runs);
        assert_eq!(HypOptions::parse("mtex.step=slow").unwrap_err().key, "step");
        assert_eq!(
            HypOptions::parse("mtex.guest_time=fuzzy").unwrap_err().key,
            "guest_time"
        );
        assert_eq!(HypOptions::parse("").unwrap().guest_time, GuestTime::Exact);
        assert_eq!(HypOptions::parse("").unwrap().step, StepMode::Fast);
        assert_eq!(
            HypOptions::parse("mtex.step=plain").unwrap().step,
            StepMode::Plain
        );
        assert_eq!(
            GuestOptions::parse("mtex.guest=nope").unwrap_err().key,
            "guest"
        );
        assert_eq!(
            GuestOptions::parse("mtex.bench_n=-1").unwrap_err().key,
            "bench_n"
        );
    }

    #[test]
    fn each_program_reads_the_hypervisor_s_keys_and_only_its_own() {
        use GuestProgram as G;
        assert!(G::Kernel.reads("cpus") && G::Kernel.reads("sample"));
        assert!(!G::Default.reads("cpus") && !G::HostileSmp.reads("workloads"));
        assert!(G::Default.reads("sample") && G::Spin.reads("watchdog_ms"));
        assert!(G::Snippet.reads("snippet_el") && !G::Kernel.reads("snippet_el"));
        assert!(G::El0.reads("bench_n") && !G::Trace.reads("bench_n"));
        for k in KNOWN_KEYS {
            assert!(
                G::ALL.iter().any(|(_, p)| p.reads(k)),
                "no program reads mtex.{k}"
            );
        }
    }

    #[test]
    fn snippet_code_round_trips_and_is_checked() {
        let line = "mtex.guest=snippet mtex.snippet=1f2003d5c0035fd6 mtex.snippet_el=0";
        let o = GuestOptions::parse(line).unwrap();
        assert_eq!((o.snippet.el, o.snippet.iters, o.snippet.tcf), (0, 1, 1));
        let mut buf = [0u8; 16];
        assert_eq!(snippet_code(line, &mut buf), Some(8));
        assert_eq!(buf[..8], [0x1f, 0x20, 0x03, 0xd5, 0xc0, 0x03, 0x5f, 0xd6]);
        assert_eq!(snippet_code(line, &mut buf[..4]), None);
        for bad in ["1f2003", "1f2003dX", ""] {
            let e = GuestOptions::parse(&std::format!("mtex.snippet={bad}")).unwrap_err();
            assert_eq!(e.key, "snippet");
        }
        let e = GuestOptions::parse("mtex.guest=snippet").unwrap_err();
        assert_eq!(e.key, "snippet");
        let e = GuestOptions::parse("mtex.snippet_iters=0").unwrap_err();
        assert_eq!(e.key, "snippet_iters");
    }
}
