//! `report.json`, schema `mtex-report` version 2: what a run (or a scenario's runs) measured,
//! in a form meant for scripts rather than for Rust. Documented in docs/scenarios.md.
//!
//! - names in the CLI's spelling (`futex-hash`, `kasan-sync+tfsr-sync-skip`, `sync`);
//! - 64-bit values that are addresses or register values as hex strings (`"0x4100663c"`), so
//!   that jq and JavaScript, whose numbers are doubles, never round them; counts stay numbers
//!   (every count fits 2^53);
//! - per phase, one flat map of counters under perf-like names ([`counters`]), the input of
//!   the text report, CSV, comparisons and plots;
//! - a top-level `success`;
//! - for a Linux-mode run, the kernel (`kernel`) and a Linux section (`linux`): its windows
//!   are phases like any other, the section holds what is not a counter.
//!
//! Version 1 (before the Linux section) is still read.

use crate::model::report::{Phase, Report, Write};
use crate::profile::functions::by_function;
use crate::symbols::Symbols;
use mtex_trace::counts::TraceCounts;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub const SCHEMA: &str = "mtex-report";
pub const VERSION: u32 = 2;
/// The oldest version still read.
pub const OLDEST_VERSION: u32 = 1;

/// The whole document.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Results {
    pub schema: String,
    pub version: u32,
    /// The mtex that wrote it (`mtex --version`).
    pub mtex: String,
    /// Every run succeeded and every expectation held.
    pub success: bool,
    /// The scenario file's name, when the runs came from one.
    pub scenario: Option<String>,
    pub runs: Vec<Run>,
    /// The scenario's expectations, judged.
    pub expectations: Vec<Expectation>,
    /// The kernel measured, for a Linux-mode run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<KernelId>,
    /// What a Linux-mode run has beyond its phases (its windows).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub linux: Option<crate::model::linux::LinuxSection>,
    /// A scenario's runs booted at several CPU counts: their windows per operation, by kernel
    /// and CPU count.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub by_cpus: Vec<crate::model::cpu_counts::CpuSeries>,
}

/// Which kernel a Linux-mode run booted: enough to tell two builds with one release apart.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelId {
    /// `uname -r`: `6.12.117+deb12-arm64`.
    pub release: String,
    /// The Debian package and its version it came from, or the path it was given as.
    pub package: String,
    pub version: String,
    /// SHA-256 of the Image, hex.
    pub sha256: String,
}

impl KernelId {
    /// `6.12.117+deb12-arm64 (linux-image-… 6.12.117-1~deb12u1, Image sha256 3f2a…)`.
    pub fn describe(&self) -> String {
        format!(
            "{} ({} {}, Image sha256 {})",
            self.release,
            self.package,
            self.version,
            &self.sha256[..self.sha256.len().min(16)]
        )
    }
}

/// One boot of the guest.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Run {
    /// The scenario's name for it (`run` for a plain `mtex run`).
    pub name: String,
    /// 0-based index among the run's repeats.
    pub repeat: u32,
    pub success: bool,
    /// How the run ended, in words (`guest exited with status 0`).
    pub end: String,
    pub boot: Option<Boot>,
    pub phases: Vec<PhaseOut>,
    pub writes: Vec<WriteOut>,
    pub console: Vec<String>,
    /// The guest's PSCI CPU_ON and CPU_OFF calls, each with its answer; absent when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub power_calls: Vec<PowerCallOut>,
    pub problems: Vec<String>,
    /// What is still exact but said, among them every call the hypervisor refused.
    pub notes: Vec<String>,
}

/// A PSCI power call as the report shows it (`CPU 0: CPU_ON of 0x1 at 0x40081000 (context
/// 0x0) at pc 0x40080010: DENIED, phase 1 open`), and whether it succeeded.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PowerCallOut {
    pub call: String,
    pub succeeded: bool,
}

/// The guest's power calls as report.json gives them, built-in guest and Linux alike.
pub fn power_calls(r: &Report) -> Vec<PowerCallOut> {
    r.power_calls
        .iter()
        .map(|c| PowerCallOut {
            call: crate::model::report::describe_power_call(c),
            succeeded: c.result == 0,
        })
        .collect()
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Boot {
    /// `kernel+dtb`, `uefi+dtb`, `uefi+acpi`.
    pub path: String,
    pub midr: String,
    pub console: String,
    pub hypervisor: String,
    pub guest_ram: String,
    /// `fgt` or `tvm`.
    pub traps: String,
    pub counter_hz: u64,
    pub emulator: bool,
}

/// A phase for tests: `name`, traced whole from 0 to 1 with `counters`, nothing else.
#[cfg(test)]
impl PhaseOut {
    pub fn example(name: &str, counters: BTreeMap<String, u64>) -> Self {
        PhaseOut {
            id: 1,
            name: name.into(),
            policy: None,
            workload: None,
            iters: None,
            size: None,
            tasks: None,
            tcf0: None,
            traced: true,
            partial: false,
            begin_ts: 0,
            end_ts: Some(1),
            counters,
            not_supported: Vec::new(),
            not_counted: Vec::new(),
            functions: Vec::new(),
            stacks: Vec::new(),
            profile: None,
            cpus: Vec::new(),
            sampled: None,
            estimates: Default::default(),
            cpu_estimates: Vec::new(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PhaseOut {
    /// The phase's number, as the guest gave it (a Linux window's is the window's); 0 in a
    /// document written before phases carried it.
    #[serde(default)]
    pub id: u32,
    pub name: String,
    /// The kernel scenario's (policy, workload) run, in CLI spellings.
    pub policy: Option<String>,
    pub workload: Option<String>,
    pub iters: Option<u32>,
    pub size: Option<u32>,
    pub tasks: Option<u32>,
    pub tcf0: Option<String>,
    pub traced: bool,
    /// The run ended inside the phase: its counters are up to there.
    pub partial: bool,
    /// Counter ticks (`boot.counter_hz`) at its begin and end (end absent when partial).
    pub begin_ts: u64,
    pub end_ts: Option<u64>,
    /// Counter name → value ([`counters`]).
    pub counters: BTreeMap<String, u64>,
    /// Counters the CPU's PMU does not have (`untraced.mem_access_checked_rd:k` on QEMU):
    /// never shown as 0.
    #[serde(default)]
    pub not_supported: Vec<String>,
    /// Counters whose pass never ran (a guest program that does not repeat its work).
    #[serde(default)]
    pub not_counted: Vec<String>,
    /// Its counts by function, for a phase profiled by PC (`mtex.profile=1`) whose profile
    /// adds up to its counts; each counter's rows add up to the phase's figure.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub functions: Vec<crate::profile::functions::FunctionRow>,
    /// The same counts by call stack and function, for a phase whose kernel stacks were
    /// followed (`mtex.stacks=1`); each counter's rows add up to the phase's figure.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stacks: Vec<crate::profile::functions::FunctionRow>,
    /// The profile by PC the functions come from, kept (not written) until the guest's
    /// symbols name them ([`Results::symbolize`]).
    #[serde(skip)]
    pub profile: Option<crate::profile::PhaseProfile>,
    /// A phase counted on several CPUs: each CPU's share, under the phase's own counter
    /// names (`mtex_abi::counters::of_cpu_share`); the phase's counters are their sum.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cpus: Vec<CpuShareOut>,
    /// A sampled phase (`mtex.sample`): how it was sampled. Its trace counters are not in
    /// `counters` (nothing exact is claimed for them) but in `estimates`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampled: Option<SampledOut>,
    /// A sampled phase's trace counters: counter name → its estimate and interval.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub estimates: BTreeMap<String, EstimateOut>,
    /// A window sampled on several CPUs: each CPU's share, with its own estimates
    /// (`estimates` holds the window's, from every CPU's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cpu_estimates: Vec<CpuEstimatesOut>,
}

/// One CPU's share of a window sampled on several CPUs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CpuEstimatesOut {
    /// The CPU's index among the machine's.
    pub cpu: u32,
    /// Its units, and its exact instructions at [EL0, EL1] (its PMU's) over its share.
    pub units: u32,
    pub instructions: Option<[u64; 2]>,
    /// Its sampling timer stopped reaching the hypervisor: no estimates of it.
    pub timer_stopped: bool,
    /// Counter name → its estimate from this CPU's units alone (empty when it has none).
    pub estimates: BTreeMap<String, EstimateOut>,
}

/// How a sampled phase was sampled.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SampledOut {
    /// Units traced, of `unit_instructions` each, after gaps of 0 to 2 × `gap_us` µs.
    pub units: u32,
    pub unit_instructions: u32,
    pub gap_us: u32,
    pub seed: u64,
    /// Traced whole (gap 0): the estimates are the exact counts.
    pub whole: bool,
}

/// A counter estimated from a sampled phase's units (`crate::model::report::sampled`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct EstimateOut {
    pub value: f64,
    /// Half the confidence interval's width, in counts; absent when there is no interval
    /// (`not_estimable` says why).
    pub half_width: Option<f64>,
    /// The interval's confidence level (0.95).
    pub level: f64,
    pub units: usize,
    /// Of the units, those that counted it at least once.
    #[serde(default)]
    pub met: usize,
    /// Share of the EL's instructions the units traced.
    pub sampled: f64,
    /// Every instruction was traced: `value` is the exact count.
    pub exact: bool,
    /// Why it has no interval (`value` is then no more than a pointer); absent when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_estimable: Option<crate::model::sample::NotEstimable>,
}

impl EstimateOut {
    pub fn of(e: &crate::model::sample::Estimate) -> Self {
        Self {
            value: e.value,
            half_width: e.half_width.is_finite().then_some(e.half_width),
            level: e.level,
            units: e.units,
            met: e.met,
            sampled: e.sampled,
            exact: e.exact,
            not_estimable: e.not_estimable,
        }
    }

    pub fn estimate(&self) -> crate::model::sample::Estimate {
        crate::model::sample::Estimate {
            value: self.value,
            half_width: self.half_width.unwrap_or(f64::INFINITY),
            level: self.level,
            units: self.units,
            met: self.met,
            sampled: self.sampled,
            exact: self.exact,
            not_estimable: self.not_estimable,
        }
    }
}

/// One CPU's share of a phase counted on several CPUs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuShareOut {
    /// The CPU's index among the machine's.
    pub cpu: u32,
    pub counters: BTreeMap<String, u64>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WriteOut {
    pub seq: u32,
    /// The CPU that wrote it (its index among the machine's).
    #[serde(default)]
    pub cpu: u32,
    pub register: String,
    pub old: String,
    pub new: String,
    /// `FIELD old→new`, e.g. `TCF0 NONE→SYNC`.
    pub changes: Vec<String>,
    pub pc: String,
    /// The guest function the pc is in (`name+0xoff`), when the guest's symbols were known.
    #[serde(default)]
    pub symbol: Option<String>,
    pub el: u8,
    pub tco: bool,
    pub phase: Option<String>,
    /// Counter ticks when it trapped.
    pub ts: u64,
}

/// A scenario expectation and whether it held.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Expectation {
    /// As written in the scenario, in words.
    pub text: String,
    pub held: bool,
    /// The values it was judged on, in words.
    pub detail: String,
}

impl Expectation {
    /// PASS or FAIL, as every form shows it.
    pub fn verdict(&self) -> &'static str {
        if self.held { "PASS" } else { "FAIL" }
    }
}

/// `0x…` for an address or register value.
pub fn hex(v: u64) -> String {
    format!("{v:#x}")
}

/// The value of a [`hex`] string (None for one that is not).
pub fn from_hex(s: &str) -> Option<u64> {
    u64::from_str_radix(s.trim_start_matches("0x"), 16).ok()
}

/// The counters of a traced phase, under the names and definitions of
/// [`mtex_abi::counters`]: the architectural view has perf's own names
/// (`mem_access_checked_rd:k` …), the other views are prefixed with theirs (`tcf_elided.`,
/// `if_tcma1.`, `if_kernel_tco.`); `mem_access_*` counts every data access.
pub fn trace_counters(t: &TraceCounts) -> BTreeMap<String, u64> {
    mtex_abi::counters::of_trace(t)
        .map(|(c, v)| (c.name.to_string(), v))
        .collect()
}

/// How the step engine ran a traced phase: its breakpoint runs, how they were planned, and
/// the branches it executed for the guest (`engine.*`), as the counters' table reads them.
fn engine_counters(
    e: &mtex_abi::report::StepEngine,
    t: Option<&TraceCounts>,
) -> impl Iterator<Item = (String, u64)> {
    mtex_abi::counters::all()
        .filter_map(move |c| c.of_engine(e, t).map(|v| (c.name.to_string(), v)))
}

/// Every counter of a phase: the trace's (when traced) and the hypervisor's own (exits,
/// trapped writes, and the PMU's instructions per EL when it counted them: `pmu.instructions:k`,
/// `:u`, `:h`).
pub fn counters(p: &Phase) -> BTreeMap<String, u64> {
    let mut c = own_counters(p);
    if let Some(u) = &p.untraced {
        c.extend(untraced_counters(u).counters);
    }
    c
}

/// The report's name of what the guest's PMU counters of MTE `event` counted at `els` (an
/// index of `GUEST_PMU_ELS`) in `view`: `guest_pmu.mem_access_checked_rd:k`.
pub fn guest_pmu_name(view: mtex_abi::options::GuestEventsView, event: u16, els: usize) -> String {
    format!(
        "{}{}:{}",
        mtex_abi::counters::guest_pmu_prefix(view),
        mtex_abi::report::pmu_event::name(event).unwrap_or("?"),
        mtex_abi::counters::GUEST_PMU_ELS[els]
    )
}

/// [`counters`] but the untraced passes'.
fn own_counters(p: &Phase) -> BTreeMap<String, u64> {
    let mut c = p.trace.as_ref().map(trace_counters).unwrap_or_default();
    if let Some(s) = &p.stats {
        c.extend(
            mtex_abi::counters::all()
                .filter_map(|k| k.of_stats(s).map(|v| (k.name.to_string(), v))),
        );
    }
    // What the guest's own PMU counters of the MTE events counted (perf inside the guest).
    if let Some(view) = p.guest_pmu.first().map(|g| g.view) {
        use mtex_abi::counters::{GUEST_PMU_ELS, GUEST_PMU_EVENTS};
        for (e, &event) in GUEST_PMU_EVENTS.iter().enumerate() {
            for els in 0..GUEST_PMU_ELS.len() {
                let v: u64 = p.guest_pmu.iter().map(|g| g.counted[e][els]).sum();
                if v > 0 {
                    c.insert(guest_pmu_name(view, event, els), v);
                }
            }
        }
    }
    // A traced phase's own PMU events (the MTE ones, where the CPU has them): the silicon's
    // count of the very execution the trace counted.
    if let Some(m) = p.pmu_record.filter(|m| m.pass == 0) {
        for count in m.counts.iter().flatten() {
            if let mtex_abi::report::PmuValue::Counted(v) = count.value {
                c.insert(
                    format!("pmu.{}", crate::model::report::pmu_count_name(count)),
                    v,
                );
            }
        }
    }
    c
}

/// The PMU backend's figures of a run's untraced passes.
pub struct UntracedOut {
    /// Under `untraced.`: instructions per EL (`:h` the hypervisor's), cycles, the MTE
    /// events and raw ones per EL, the passes it took, the TCO watch's.
    pub counters: BTreeMap<String, u64>,
    /// The events the CPU does not have, and those whose pass never ran.
    pub not_supported: Vec<String>,
    pub not_counted: Vec<String>,
}

pub fn untraced_counters(u: &crate::model::report::Untraced) -> UntracedOut {
    use mtex_abi::report::PmuValue;
    let mut c = BTreeMap::new();
    let mut missing = Vec::new();
    let mut not_counted = Vec::new();
    let [h, k, user] = u.instructions();
    for (name, v) in [
        ("untraced.instructions:h", h),
        ("untraced.instructions:k", k),
        ("untraced.instructions:u", user),
        ("untraced.passes", Some(u64::from(u.passes))),
    ] {
        if let Some(v) = v {
            c.insert(name.to_string(), v);
        }
    }
    if let Some(t) = u.tco() {
        c.insert("untraced.tco_sites".to_string(), u64::from(t.sites));
        // Short counts are a problem of the run, and never shown as a total.
        if t.complete() {
            c.insert(
                "untraced.tco_writes".to_string(),
                t.writes_el0 + t.writes_el1,
            );
        }
    }
    for count in u.runs.iter().flat_map(|p| &p.counts) {
        let name = format!("untraced.{}", crate::model::report::pmu_count_name(count));
        match count.value {
            PmuValue::Counted(v) => {
                c.insert(name, v);
            }
            PmuValue::NotSupported => missing.push(name),
            PmuValue::NotCounted => not_counted.push(name),
            // A problem of the run already; no figure.
            PmuValue::Withheld => {}
        }
    }
    UntracedOut {
        counters: c,
        not_supported: missing,
        not_counted,
    }
}

fn phase_out(p: &Phase, engines: &[mtex_abi::report::StepEngine], emulator: bool) -> PhaseOut {
    let pp = p.params;
    let profile = crate::profile::of_phase(p).cloned();
    let untraced = p.untraced.as_ref().map(untraced_counters);
    let (untraced_counts, not_supported, not_counted) = untraced
        .map(|u| (u.counters, u.not_supported, u.not_counted))
        .unwrap_or_default();
    PhaseOut {
        id: p.id,
        name: p.name.clone(),
        policy: pp.map(|q| q.policy.name().as_str().to_string()),
        workload: pp.map(|q| q.workload.name().to_string()),
        iters: pp.map(|q| q.params.iters),
        size: pp.map(|q| q.params.size),
        tasks: pp.map(|q| q.params.tasks),
        tcf0: pp.map(|q| q.tcf0.name().to_string()),
        traced: p.trace.is_some(),
        partial: p.end.is_none(),
        begin_ts: p.begin_ts,
        end_ts: p.end_ts,
        counters: {
            let mut c = own_counters(p);
            c.extend(untraced_counts);
            if let Some(e) = engines.iter().rev().find(|e| e.id == p.id) {
                c.extend(engine_counters(e, p.trace.as_ref()));
            }
            c
        },
        not_supported,
        not_counted,
        // Until symbols name them, every PC is `[no symbol]`: the rows still add up.
        functions: profile
            .as_ref()
            .map(|f| by_function(f, &Symbols::default()))
            .unwrap_or_default(),
        stacks: profile
            .as_ref()
            .map(|f| {
                crate::profile::stacks::by_stack(
                    f,
                    &Symbols::default(),
                    crate::profile::stacks::Syscalls::Numbers,
                )
            })
            .unwrap_or_default(),
        profile,
        cpus: {
            let mut shares: Vec<CpuShareOut> = p
                .cpus
                .iter()
                .map(|c| CpuShareOut {
                    cpu: c.cpu,
                    counters: mtex_abi::counters::of_cpu_share(c)
                        .map(|(k, v)| (k.name.to_string(), v))
                        .collect(),
                })
                .collect();
            shares.sort_by_key(|s| s.cpu);
            shares
        },
        sampled: p.sampled.as_ref().and_then(|s| s.how).map(|h| SampledOut {
            units: h.units,
            unit_instructions: h.unit_instructions,
            gap_us: h.gap_us,
            seed: h.seed,
            whole: h.whole,
        }),
        estimates: crate::model::report::sampled::estimates(p, emulator)
            .into_iter()
            .map(|(c, e)| (c.name.to_string(), EstimateOut::of(&e)))
            .collect(),
        cpu_estimates: cpu_estimates_out(p, emulator),
    }
}

/// Each CPU's share of a window sampled on several CPUs, with its estimates.
fn cpu_estimates_out(p: &Phase, emulator: bool) -> Vec<CpuEstimatesOut> {
    use crate::model::report::sampled;
    let Some(s) = p.sampled.as_ref() else {
        return Vec::new();
    };
    let mut by_cpu = sampled::cpu_estimates(p, emulator);
    s.shares
        .iter()
        .map(|share| CpuEstimatesOut {
            cpu: share.cpu,
            units: share.sampled.units,
            instructions: sampled::share_population(s, share, emulator),
            timer_stopped: share.sampled.timer_stopped,
            estimates: by_cpu
                .iter_mut()
                .find(|(cpu, _)| *cpu == share.cpu)
                .map(|(_, es)| {
                    es.iter()
                        .map(|(c, e)| (c.name.to_string(), EstimateOut::of(e)))
                        .collect()
                })
                .unwrap_or_default(),
        })
        .collect()
}

fn write_out(w: &Write) -> WriteOut {
    WriteOut {
        seq: w.seq,
        cpu: w.cpu,
        register: w.register.to_string(),
        old: hex(w.old),
        new: hex(w.new),
        changes: w
            .changes
            .iter()
            .map(|c| format!("{} {}→{}", c.field, c.old, c.new))
            .collect(),
        pc: hex(w.at.pc),
        symbol: None,
        el: w.at.el,
        tco: w.at.tco,
        phase: w.phase.clone(),
        ts: w.ts,
    }
}

/// One run's part of the document.
pub fn run(name: &str, repeat: u32, r: &Report) -> Run {
    Run {
        name: name.to_string(),
        repeat,
        success: r.succeeded(),
        end: r.end(),
        boot: r.boot.map(|b| Boot {
            path: mtex_platform::BootPath::from_u32(b.boot_path.into())
                .map_or("unknown", |p| p.name())
                .to_string(),
            midr: hex(b.midr),
            console: hex(b.console),
            hypervisor: hex(b.hyp_start),
            guest_ram: hex(b.guest_ram_pa),
            traps: match b.trap_mode {
                mtex_abi::report::TrapMode::FineGrained => "fgt",
                mtex_abi::report::TrapMode::Tvm => "tvm",
            }
            .to_string(),
            counter_hz: b.counter_hz,
            emulator: b.is_emulator(),
        }),
        phases: r
            .phases
            .iter()
            .map(|p| phase_out(p, &r.engines, r.boot.is_none_or(|b| b.is_emulator())))
            .collect(),
        writes: r.writes.iter().map(write_out).collect(),
        console: r.console.clone(),
        power_calls: power_calls(r),
        problems: r.problems.clone(),
        // Every call refused, but those the run relied on: they are among its problems.
        notes: r
            .notes
            .iter()
            .cloned()
            .chain(crate::model::report::power::notes(r))
            .collect(),
    }
}

impl Results {
    /// The last line of every text form: the whole document's verdict.
    pub fn verdict_line(&self) -> &'static str {
        if self.success {
            "mtex: success"
        } else {
            "mtex: FAILED (a run failed or an expectation did not hold)"
        }
    }

    /// A document of `runs`, judged by `expectations`.
    pub fn new(scenario: Option<String>, runs: Vec<Run>, expectations: Vec<Expectation>) -> Self {
        let success = runs.iter().all(|r| r.success) && expectations.iter().all(|e| e.held);
        Results {
            schema: SCHEMA.to_string(),
            version: VERSION,
            mtex: env!("CARGO_PKG_VERSION").to_string(),
            success,
            scenario,
            runs,
            expectations,
            kernel: None,
            linux: None,
            by_cpus: Vec::new(),
        }
    }

    /// The document of one plain run (`mtex run` without a scenario file, `mtex parse`).
    pub fn single(r: &Report) -> Self {
        Results::new(None, vec![run("run", 0, r)], Vec::new())
    }

    /// Names the function of every trapped write's pc, and gathers profiled phases by
    /// function, from the guest's symbols.
    pub fn symbolize(&mut self, symbols: &Symbols) {
        for p in self.runs.iter_mut().flat_map(|r| r.phases.iter_mut()) {
            if let Some(f) = &p.profile {
                p.functions = by_function(f, symbols);
                p.stacks = crate::profile::stacks::by_stack(
                    f,
                    symbols,
                    crate::profile::stacks::Syscalls::Numbers,
                );
            }
        }
        for w in self.runs.iter_mut().flat_map(|r| r.writes.iter_mut()) {
            w.symbol = from_hex(&w.pc).and_then(|pc| symbols.lookup(pc));
        }
    }

    /// Reads a document, refusing another schema or version by name.
    pub fn from_json(text: &str) -> anyhow::Result<Self> {
        let v: serde_json::Value = serde_json::from_str(text)?;
        let schema = v.get("schema").and_then(|s| s.as_str()).unwrap_or("");
        let version = v.get("version").and_then(|s| s.as_u64()).unwrap_or(0);
        if schema != SCHEMA || !(u64::from(OLDEST_VERSION)..=u64::from(VERSION)).contains(&version)
        {
            anyhow::bail!(
                "not an {SCHEMA} document of version {OLDEST_VERSION} to {VERSION} (schema \
                 {schema:?}, version {version})"
            );
        }
        let doc: Self = serde_json::from_value(v)?;
        // A results directory travels between machines, and a run's name names its files
        // there (`NAME-K.log`, the page's links to them): a name mtex would not have written
        // (a path, `..`, a URL) is refused, never followed.
        if let Some(r) = doc
            .runs
            .iter()
            .find(|r| !crate::scenario::file::is_safe_name(&r.name))
        {
            anyhow::bail!(
                "run name {:?}: not a name mtex writes (letters, digits, - and _, at most 64); \
                 it would name a file outside the results directory or a link elsewhere",
                r.name
            );
        }
        Ok(doc)
    }
}

impl Run {
    /// Its console log's file name in the results directory (`NAME-K.log`); None for a name
    /// that is not a plain file name (no such document is read: see `Results::from_json`).
    pub fn log_file(&self) -> Option<String> {
        crate::scenario::file::is_safe_name(&self.name)
            .then(|| format!("{}-{}.log", self.name, u64::from(self.repeat) + 1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use mtex_abi::report::{ExitReason, GuestState, Summary, SysregWrite};
    use mtex_abi::{Record, frame};

    /// A log of one trapped SCTLR_EL1 write from a kernel address and a summary.
    fn log() -> Vec<u8> {
        let records = [
            Record::SysregWrite(SysregWrite {
                reg: mtex_arch::SysReg::SctlrEl1,
                old: 0x30d0_0800,
                new: 0x0c60_30d0_1805,
                at: GuestState {
                    pc: 0xffff_ff80_4100_7250,
                    el: 1,
                    tco: false,
                },
                ts: 1,
                phase: 0,
            }),
            Record::Summary(Summary {
                records: 1,
                exit: ExitReason::GuestExit { status: 0 },
                ts: 2,
                exits: 1,
            }),
        ];
        let mut out = Vec::new();
        for (i, r) in records.iter().enumerate() {
            let mut buf = [0u8; frame::MAX_TEXT];
            out.extend_from_slice(frame::encode(i as u32, r, &mut buf).unwrap().as_bytes());
            out.push(b'\n');
        }
        out
    }

    #[test]
    fn addresses_are_hex_strings_and_names_cli_spellings() {
        let r = crate::model::report::parse_bytes(&log());
        let doc = Results::single(&r);
        let json = serde_json::to_value(&doc).unwrap();
        assert_eq!(json["schema"], "mtex-report");
        assert_eq!(json["version"], 2);
        let w = &json["runs"][0]["writes"][0];
        // Above 2^53: a JSON number would be rounded by jq.
        assert_eq!(w["pc"], "0xffffff8041007250", "{w}");
        assert_eq!(w["new"], "0xc6030d01805", "{w}");
        assert!(
            w["changes"]
                .as_array()
                .unwrap()
                .iter()
                .any(|c| c == "TCF0 NONE→SYNC"),
            "{w}"
        );
        let back = Results::from_json(&serde_json::to_string(&doc).unwrap()).unwrap();
        assert_eq!(back, doc);
    }

    #[test]
    fn a_profiled_phase_is_gathered_by_function_and_shown_once_symbols_name_it() {
        let (r, symbols) = crate::profile::fixture::report();
        let mut doc = Results::single(&r);
        // Before the symbols: every PC under `[no symbol]`, still adding up.
        let rows = &doc.runs[0].phases[0].functions;
        assert!(rows.iter().all(|f| f.name.starts_with('[')), "{rows:?}");
        doc.symbolize(&symbols);
        let text = crate::output::full(&doc);
        assert!(text.contains(" Where the checks are"), "{text}");
        assert!(text.contains("kfunc_24"), "{text}");
        let back = Results::from_json(&serde_json::to_string(&doc).unwrap()).unwrap();
        assert_eq!(
            back.runs[0].phases[0].functions,
            doc.runs[0].phases[0].functions
        );
        // A profile that does not add up to the counts shows nothing.
        let mut bad = r.clone();
        bad.phases[0].trace.as_mut().unwrap().instructions_el1 += 1;
        let mut doc = Results::single(&bad);
        doc.symbolize(&symbols);
        assert!(doc.runs[0].phases[0].functions.is_empty());
    }

    #[test]
    fn another_schema_or_version_is_refused() {
        let e = Results::from_json(r#"{"schema":"mtex-report","version":3}"#).unwrap_err();
        assert!(e.to_string().contains("version 3"), "{e}");
        let e = Results::from_json(r#"{"schema":"mtex-report","version":0}"#).unwrap_err();
        assert!(e.to_string().contains("version 0"), "{e}");
        assert!(Results::from_json(r#"{"runs":[]}"#).is_err());
    }

    /// A version 1 document (before the Linux section) is still read, as it was.
    #[test]
    fn a_version_1_document_is_still_read() {
        let mut doc = Results::single(&crate::model::report::parse_bytes(&log()));
        doc.version = 1;
        let back = Results::from_json(&serde_json::to_string(&doc).unwrap()).unwrap();
        assert_eq!(back, doc);
        assert!(back.linux.is_none());
    }

    #[test]
    fn a_run_name_that_is_not_a_file_name_is_refused() {
        let mut doc = Results::single(&Report::default());
        assert_eq!(doc.runs[0].log_file().as_deref(), Some("run-1.log"));
        for name in [
            "javascript:alert(1)//",
            "../../../../etc/passwd",
            "/abs/outside",
            "",
        ] {
            doc.runs[0].name = name.to_string();
            assert_eq!(doc.runs[0].log_file(), None, "{name}");
            let e = Results::from_json(&serde_json::to_string(&doc).unwrap()).unwrap_err();
            assert!(e.to_string().contains(&format!("run name {name:?}")), "{e}");
        }
    }
}
