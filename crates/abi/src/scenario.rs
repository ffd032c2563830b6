//! The scenario: which MTE policies the guest kernel runs which workloads under, with what
//! parameters. The host checks it (with these parsers) before anything boots; the guest
//! reads it from the kernel command line; each (policy, workload) run is announced to the
//! hypervisor as a phase carrying its [`PhaseParams`].
//!
//! Command-line form (all optional, defaults give every policy × every workload):
//! - `mtex.policies=entry-tco,uaccess-tco,tcma1,kasan-sync+tfsr-sync-skip,...` — a policy is
//!   one or more tokens joined by `+`;
//! - `mtex.workloads=getpid,futex-hash:iters=32,kbuf-probe:size=512,...` — a workload with
//!   optional `:iters=`, `:size=`, `:tasks=`, and `:tcf0=` (its own user mode);
//! - `mtex.tcf0=none|sync|async|asymm` — the user tasks' mode, as prctl(PR_SET_TAGGED_ADDR_CTRL)
//!   sets it (default sync, as glibc.mem.tagging=3 asks);
//! - `mtex.hz=N` — the kernel's timer tick (default 250; 0 = none);
//! - `mtex.trace=1|0|both|only` — run each (policy, workload) untraced at full speed (as many
//!   passes as the PMU backend's events need), then traced (default; `both` is the same, the
//!   name `cargo mtex bench` uses); `0`: untraced only (PMU figures only); `only`: traced only.

use crate::options::{OptionError, value};
use serde::{Deserialize, Serialize};

/// A tag-check fault mode, as SCTLR_EL1.TCF/TCF0 encode it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Tcf {
    None = 0,
    Sync = 1,
    Async = 2,
    Asymm = 3,
}

impl Tcf {
    pub const ALL: [(&'static str, Tcf); 4] = [
        ("none", Tcf::None),
        ("sync", Tcf::Sync),
        ("async", Tcf::Async),
        ("asymm", Tcf::Asymm),
    ];

    pub fn from_bits(b: u64) -> Tcf {
        match b & 3 {
            0 => Tcf::None,
            1 => Tcf::Sync,
            2 => Tcf::Async,
            _ => Tcf::Asymm,
        }
    }

    pub fn name(self) -> &'static str {
        Self::ALL[self as usize].0
    }

    /// Bit 0 of TCF0 is set for sync and asymm: the modes in which a user tag-check fault in
    /// a kernel uaccess is reported synchronously, so Linux re-enables checking on entry.
    pub fn reports_sync(self) -> bool {
        self as u64 & 1 != 0
    }
}

/// How the kernel handles PSTATE.TCO, which exception entry sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TcoPolicy {
    /// v6.18: clear TCO on every kernel entry if KASAN HW tags is on or the task's TCF0 is
    /// sync/asymm (mte_disable_tco_entry).
    Entry,
    /// The patch that defers clearing PSTATE.TCO to user_access_begin: clear TCO only
    /// inside user_access_begin/end sections.
    Uaccess,
}

/// One MTE policy of the guest kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Policy {
    pub tco: TcoPolicy,
    /// TCR_EL1.TCMA1 asked for explicitly (`tcma1`).
    pub tcma1: bool,
    /// KASAN HW tags with this kernel TCF; `None` means KASAN off.
    pub kasan: Tcf,
    /// `tfsr-sync-skip`: no TFSR_EL1 check (nor its DSB/ISB) when the kernel is in sync mode.
    pub tfsr_sync_skip: bool,
    /// `skip-tag-stacks-pgtables`: kernel stacks and page tables are not tagged (__GFP_SKIP_KASAN).
    pub skip_tag_stacks_pgtables: bool,
}

/// Every policy token, in the spelling the command line and scenario files use.
pub const TOKENS: [&str; 8] = [
    "entry-tco",
    "uaccess-tco",
    "tcma1",
    "kasan-sync",
    "kasan-async",
    "kasan-asymm",
    "tfsr-sync-skip",
    "skip-tag-stacks-pgtables",
];

impl Policy {
    pub const BASELINE: Policy = Policy {
        tco: TcoPolicy::Entry,
        tcma1: false,
        kasan: Tcf::None,
        tfsr_sync_skip: false,
        skip_tag_stacks_pgtables: false,
    };

    /// Parses `token+token+...`.
    pub fn parse(s: &str) -> Result<Policy, &'static str> {
        let mut p = Policy::BASELINE;
        let (mut tco_given, mut kasan_given) = (false, false);
        for t in s.split('+') {
            match t {
                "entry-tco" | "uaccess-tco" => {
                    if tco_given {
                        return Err("entry-tco and uaccess-tco exclude each other");
                    }
                    tco_given = true;
                    if t == "uaccess-tco" {
                        p.tco = TcoPolicy::Uaccess;
                    }
                }
                "tcma1" => p.tcma1 = true,
                "kasan-sync" | "kasan-async" | "kasan-asymm" => {
                    if kasan_given {
                        return Err("at most one kasan-* mode");
                    }
                    kasan_given = true;
                    p.kasan = match t {
                        "kasan-sync" => Tcf::Sync,
                        "kasan-async" => Tcf::Async,
                        _ => Tcf::Asymm,
                    };
                }
                "tfsr-sync-skip" => p.tfsr_sync_skip = true,
                "skip-tag-stacks-pgtables" => p.skip_tag_stacks_pgtables = true,
                _ => {
                    return Err(
                        "unknown policy token (entry-tco, uaccess-tco, tcma1, kasan-sync, kasan-async, kasan-asymm, tfsr-sync-skip, skip-tag-stacks-pgtables)",
                    );
                }
            }
        }
        if (p.tfsr_sync_skip || p.skip_tag_stacks_pgtables) && p.kasan == Tcf::None {
            return Err("tfsr-sync-skip and skip-tag-stacks-pgtables need a kasan-* mode");
        }
        Ok(p)
    }

    /// TCR_EL1.TCMA1 is set: asked for, or implied by KASAN HW tags (Linux has set it for
    /// KASAN_HW_TAGS since 5.13; the merged fix sets it whenever MTE is present).
    pub fn tcma1_set(self) -> bool {
        self.tcma1 || self.kasan != Tcf::None
    }

    /// The kernel checks TFSR_EL1 (with its barriers) on entry, exit and context switch.
    pub fn checks_tfsr(self) -> bool {
        self.kasan != Tcf::None && !(self.tfsr_sync_skip && self.kasan == Tcf::Sync)
    }

    pub fn to_bits(self) -> u64 {
        (self.tco == TcoPolicy::Uaccess) as u64
            | (self.tcma1 as u64) << 1
            | (self.kasan as u64) << 2
            | (self.tfsr_sync_skip as u64) << 4
            | (self.skip_tag_stacks_pgtables as u64) << 5
    }

    pub fn from_bits(b: u64) -> Policy {
        Policy {
            tco: if b & 1 != 0 {
                TcoPolicy::Uaccess
            } else {
                TcoPolicy::Entry
            },
            tcma1: b & 2 != 0,
            kasan: Tcf::from_bits(b >> 2),
            tfsr_sync_skip: b & 16 != 0,
            skip_tag_stacks_pgtables: b & 32 != 0,
        }
    }

    /// The canonical name: its tokens in a fixed order, joined by `+`.
    pub fn name(self) -> crate::ShortStr<64> {
        let mut s = crate::ShortStr::new();
        let on = [
            self.tco == TcoPolicy::Entry,
            self.tco == TcoPolicy::Uaccess,
            self.tcma1,
            self.kasan == Tcf::Sync,
            self.kasan == Tcf::Async,
            self.kasan == Tcf::Asymm,
            self.tfsr_sync_skip,
            self.skip_tag_stacks_pgtables,
        ];
        // entry-tco is the default: named only when nothing else is.
        let only_baseline = on[1..].iter().all(|b| !b);
        for (i, t) in TOKENS.iter().enumerate() {
            if on[i] && (i != 0 || only_baseline) {
                if !s.is_empty() {
                    s.push_str_truncating("+");
                }
                s.push_str_truncating(t);
            }
        }
        s
    }
}

/// The workloads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Workload {
    /// Each syscall hashes a user futex address into a kernel table and walks the bucket.
    FutexHash,
    /// A user client/server pair: get/set at 1:10 through read/write-like syscalls.
    Memcached,
    /// The minimal syscall.
    Getpid,
    /// `tasks` threads per iteration: kernel stack allocation and free.
    ThreadCreate,
    /// Map and fault `size` MiB, then fork; children exit at once.
    ForkPgtable,
    /// copy_from_user then copy_to_user of `size` bytes per iteration.
    UaccessHeavy,
    /// A syscall that reads `size` bytes of a kernel buffer.
    KbufProbe,
}

impl Workload {
    pub const ALL: [(&'static str, Workload); 7] = [
        ("futex-hash", Workload::FutexHash),
        ("memcached", Workload::Memcached),
        ("getpid", Workload::Getpid),
        ("thread-create", Workload::ThreadCreate),
        ("fork-pgtable", Workload::ForkPgtable),
        ("uaccess-heavy", Workload::UaccessHeavy),
        ("kbuf-probe", Workload::KbufProbe),
    ];

    pub fn name(self) -> &'static str {
        Self::ALL[self as usize].0
    }

    pub fn from_index(i: u64) -> Option<Workload> {
        Self::ALL.get(i as usize).map(|(_, w)| *w)
    }

    /// Default parameters: small enough that the whole matrix traces in seconds.
    pub fn defaults(self) -> WorkloadParams {
        let (iters, size, tasks) = match self {
            // size: futexes in the user's array; tasks: waiters queued per hash bucket.
            Workload::FutexHash => (32, 16, 16),
            // size: value bytes; tasks: the client and the server.
            Workload::Memcached => (22, 64, 2),
            Workload::Getpid => (32, 0, 1),
            Workload::ThreadCreate => (4, 0, 4),
            // size: MiB mapped and faulted before forking.
            Workload::ForkPgtable => (4, 2, 1),
            Workload::UaccessHeavy => (8, 4096, 1),
            Workload::KbufProbe => (8, 256, 1),
        };
        WorkloadParams { iters, size, tasks }
    }

    /// What `size` and `tasks` mean for this workload, for reports.
    pub fn units(self) -> (&'static str, &'static str) {
        match self {
            Workload::FutexHash => ("futexes", "queued per bucket"),
            Workload::Memcached => ("value bytes", "tasks"),
            Workload::Getpid => ("-", "-"),
            Workload::ThreadCreate => ("-", "threads per iteration"),
            Workload::ForkPgtable => ("MiB mapped", "-"),
            Workload::UaccessHeavy => ("bytes each way", "-"),
            Workload::KbufProbe => ("bytes read", "-"),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkloadParams {
    pub iters: u32,
    pub size: u32,
    pub tasks: u32,
}

/// Largest values the guest accepts (its memory is fixed).
pub const MAX_ITERS: u32 = 100_000;
pub const MAX_TASKS: u32 = 16;

impl WorkloadParams {
    fn check(self, w: Workload) -> Result<(), &'static str> {
        if self.iters == 0 || self.iters > MAX_ITERS {
            return Err("iters must be between 1 and 100000");
        }
        let size_ok = match w {
            Workload::FutexHash => (1..=256).contains(&self.size),
            Workload::Memcached => self.size.is_multiple_of(8) && (8..=1024).contains(&self.size),
            Workload::Getpid | Workload::ThreadCreate => true,
            Workload::ForkPgtable => (1..=16).contains(&self.size),
            Workload::UaccessHeavy | Workload::KbufProbe => {
                self.size.is_multiple_of(8) && (8..=16384).contains(&self.size)
            }
        };
        if !size_ok {
            return Err(match w {
                Workload::FutexHash => "size (futexes) must be 1..=256",
                Workload::ForkPgtable => "size (MiB) must be 1..=16",
                _ => "size must be a multiple of 8 in 8..=16384 (memcached: ..=1024)",
            });
        }
        let tasks_ok = match w {
            Workload::FutexHash => self.tasks <= 64,
            Workload::Memcached => self.tasks == 2,
            Workload::ThreadCreate => (1..=MAX_TASKS).contains(&self.tasks),
            _ => self.tasks == 1,
        };
        if !tasks_ok {
            return Err(
                "tasks: futex-hash 0..=64 queued per bucket, thread-create 1..=16, memcached 2, others 1",
            );
        }
        Ok(())
    }
}

/// What a phase of the kernel scenario ran: announced with PHASE_BEGIN.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PhaseParams {
    pub workload: Workload,
    pub policy: Policy,
    /// The user tasks' TCF0.
    pub tcf0: Tcf,
    pub params: WorkloadParams,
}

impl PhaseParams {
    /// Packs into the four registers PHASE_BEGIN carries them in (x7..x10).
    pub fn to_regs(self) -> [u64; 4] {
        [
            self.workload as u64 | self.policy.to_bits() << 8 | (self.tcf0 as u64) << 24,
            self.params.iters as u64,
            self.params.size as u64,
            self.params.tasks as u64,
        ]
    }

    pub fn from_regs(r: [u64; 4]) -> Option<PhaseParams> {
        if r[0] >> 26 != 0 || r[1..].iter().any(|&v| v > u32::MAX as u64) {
            return None;
        }
        let policy = Policy::from_bits(r[0] >> 8 & 0xffff);
        if policy.to_bits() != r[0] >> 8 & 0xffff {
            return None;
        }
        Some(PhaseParams {
            workload: Workload::from_index(r[0] & 0xff)?,
            policy,
            tcf0: Tcf::from_bits(r[0] >> 24),
            params: WorkloadParams {
                iters: r[1] as u32,
                size: r[2] as u32,
                tasks: r[3] as u32,
            },
        })
    }
}

pub const MAX_POLICIES: usize = 12;
pub const MAX_WORKLOADS: usize = 12;

/// The policies × workloads matrix the guest kernel runs, in order (policy-major).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scenario {
    pub policies: [Option<Policy>; MAX_POLICIES],
    /// Each workload with its parameters and, if given (`:tcf0=`), its own user mode.
    pub workloads: [Option<(Workload, WorkloadParams, Option<Tcf>)>; MAX_WORKLOADS],
    pub tcf0: Tcf,
    /// The kernel's timer tick rate (`mtex.hz`, like CONFIG_HZ; 0 = no tick).
    pub hz: u32,
    /// Each run has a traced phase: single-stepped and counted exactly (`mtex.trace=1`, the
    /// default, `both` and `only`; not `0`).
    pub traced: bool,
    /// Each run first goes untraced, at full speed, once per pass the PMU backend needs for
    /// its events (cycles, instructions, the MTE events: `mtex.trace=1`, `both` and `0`; not
    /// `only`).
    pub untraced: bool,
    /// CPUs the kernel runs on (`mtex.cpus`, 1 to [`MAX_KERNEL_CPUS`]): each run's workload
    /// runs once on each CPU, all at once, in one phase counted on every CPU.
    pub cpus: u32,
}

/// The most CPUs the kernel runs a scenario on.
pub const MAX_KERNEL_CPUS: u32 = 8;

/// The workloads that run on several CPUs: those whose measured part allocates nothing
/// (memcached's pairs each talk across two CPUs).
pub const SMP_WORKLOADS: [Workload; 5] = [
    Workload::Getpid,
    Workload::FutexHash,
    Workload::Memcached,
    Workload::UaccessHeavy,
    Workload::KbufProbe,
];

/// The default tick rate, Linux's common CONFIG_HZ=250.
pub const DEFAULT_HZ: u32 = 250;

/// Every policy × every workload.
pub const DEFAULT_POLICIES: &str = "entry-tco,uaccess-tco,tcma1,kasan-sync,kasan-sync+tfsr-sync-skip,kasan-async,kasan-async+tfsr-sync-skip,kasan-sync+skip-tag-stacks-pgtables";
pub const DEFAULT_WORKLOADS: &str =
    "futex-hash,memcached,getpid,thread-create,fork-pgtable,uaccess-heavy,kbuf-probe";

fn err(key: &'static str, problem: &'static str) -> OptionError {
    OptionError { key, problem }
}

impl Scenario {
    pub fn parse(cmdline: &str) -> Result<Scenario, OptionError> {
        let mut s = Scenario {
            policies: [None; MAX_POLICIES],
            workloads: [None; MAX_WORKLOADS],
            tcf0: Tcf::Sync,
            hz: DEFAULT_HZ,
            traced: true,
            untraced: true,
            cpus: 1,
        };
        let policies = value(cmdline, "policies").unwrap_or(DEFAULT_POLICIES);
        for (i, p) in policies.split(',').enumerate() {
            if i == MAX_POLICIES {
                return Err(err("policies", "at most 12 policies"));
            }
            s.policies[i] = Some(Policy::parse(p).map_err(|e| err("policies", e))?);
        }
        let workloads = value(cmdline, "workloads").unwrap_or(DEFAULT_WORKLOADS);
        for (i, spec) in workloads.split(',').enumerate() {
            if i == MAX_WORKLOADS {
                return Err(err("workloads", "at most 12 workloads"));
            }
            s.workloads[i] = Some(parse_workload(spec).map_err(|e| err("workloads", e))?);
        }
        if let Some(v) = value(cmdline, "tcf0") {
            s.tcf0 = parse_tcf(v).ok_or(err("tcf0", "expected none, sync, async or asymm"))?;
        }
        if let Some(v) = value(cmdline, "hz") {
            s.hz = v
                .parse()
                .ok()
                .filter(|&hz| hz <= 100_000)
                .ok_or(err("hz", "expected a tick rate from 0 (no tick) to 100000"))?;
        }
        (s.traced, s.untraced) = match value(cmdline, "trace") {
            None | Some("1") | Some("both") => (true, true),
            Some("0") => (false, true),
            Some("only") => (true, false),
            Some(_) => {
                return Err(err(
                    "trace",
                    "expected 1 (each run untraced for the PMU, then traced), 0 (PMU only), both (as 1) or only (traced only)",
                ));
            }
        };
        if let Some(v) = value(cmdline, "cpus") {
            s.cpus = v
                .parse()
                .ok()
                .filter(|n| (1..=MAX_KERNEL_CPUS).contains(n))
                .ok_or(err("cpus", "expected 1 to 8 CPUs"))?;
        }
        if s.cpus > 1 {
            if s.hz != 0 {
                return Err(err(
                    "cpus",
                    "several CPUs run without the timer tick: add mtex.hz=0",
                ));
            }
            if s.untraced {
                return Err(err(
                    "cpus",
                    "several CPUs are traced only (the PMU counts one CPU): add mtex.trace=only",
                ));
            }
            let smp = |w: &Option<(Workload, WorkloadParams, Option<Tcf>)>| {
                w.is_none_or(|(w, _, _)| SMP_WORKLOADS.contains(&w))
            };
            if !s.workloads.iter().all(smp) {
                return Err(err(
                    "cpus",
                    "on several CPUs the workloads are getpid, futex-hash, memcached, uaccess-heavy and kbuf-probe",
                ));
            }
        }
        // Sampling (the hypervisor's `mtex.sample`) is of traced phases on one CPU: the EL2
        // timer that begins each unit is one CPU's. Refused here rather than left undone.
        if value(cmdline, "sample").is_some() {
            if s.cpus > 1 {
                return Err(err(
                    "sample",
                    "a sampled phase runs on one CPU (its timer and units are one CPU's): leave mtex.cpus at 1",
                ));
            }
            if !s.traced {
                return Err(err(
                    "sample",
                    "sampling samples traced phases, and mtex.trace=0 has none",
                ));
            }
        }
        Ok(s)
    }

    /// Every (policy, workload) run, policy-major, with its phase parameters.
    pub fn runs(&self) -> impl Iterator<Item = PhaseParams> + '_ {
        self.policies.iter().flatten().flat_map(move |&policy| {
            self.workloads
                .iter()
                .flatten()
                .map(move |&(workload, params, tcf0)| PhaseParams {
                    workload,
                    policy,
                    tcf0: tcf0.unwrap_or(self.tcf0),
                    params,
                })
        })
    }
}

fn parse_tcf(v: &str) -> Option<Tcf> {
    Tcf::ALL.iter().find(|(n, _)| *n == v).map(|(_, t)| *t)
}

fn parse_workload(spec: &str) -> Result<(Workload, WorkloadParams, Option<Tcf>), &'static str> {
    let mut parts = spec.split(':');
    let name = parts.next().unwrap_or("");
    let w = Workload::ALL
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, w)| *w)
        .ok_or(
            "unknown workload (futex-hash, memcached, getpid, thread-create, fork-pgtable, uaccess-heavy, kbuf-probe)",
        )?;
    let mut p = w.defaults();
    let mut tcf0 = None;
    for kv in parts {
        let (k, v) = kv.split_once('=').ok_or("expected key=value after ':'")?;
        if k == "tcf0" {
            tcf0 = Some(parse_tcf(v).ok_or("tcf0: expected none, sync, async or asymm")?);
            continue;
        }
        let v: u32 = v.parse().map_err(|_| "expected a decimal integer")?;
        match k {
            "iters" => p.iters = v,
            "size" => p.size = v,
            "tasks" => p.tasks = v,
            _ => return Err("unknown workload parameter (iters, size, tasks, tcf0)"),
        }
    }
    p.check(w)?;
    Ok((w, p, tcf0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn default_scenario_is_every_policy_under_every_workload() {
        let s = Scenario::parse("").unwrap();
        assert_eq!(s.runs().count(), 8 * 7);
        assert_eq!(s.tcf0, Tcf::Sync);
        assert_eq!(s.hz, DEFAULT_HZ);
        assert_eq!(Scenario::parse("mtex.hz=0").unwrap().hz, 0);
        let first = s.runs().next().unwrap();
        assert_eq!(first.workload, Workload::FutexHash);
        assert_eq!(first.policy, Policy::BASELINE);
    }

    #[test]
    fn policies_combine_and_name_themselves() {
        let p = Policy::parse("kasan-sync+tfsr-sync-skip").unwrap();
        assert_eq!(p.kasan, Tcf::Sync);
        assert!(p.tfsr_sync_skip && p.tcma1_set() && !p.checks_tfsr());
        assert!(
            Policy::parse("kasan-async+tfsr-sync-skip")
                .unwrap()
                .checks_tfsr()
        );
        assert_eq!(p.name().as_str(), "kasan-sync+tfsr-sync-skip");
        assert_eq!(Policy::BASELINE.name().as_str(), "entry-tco");
        assert_eq!(
            Policy::parse("uaccess-tco").unwrap().tco,
            TcoPolicy::Uaccess
        );
        assert!(Policy::parse("tcma1").unwrap().tcma1_set());
        assert!(!Policy::BASELINE.tcma1_set());
    }

    #[test]
    fn bad_input_names_the_field() {
        for (line, key) in [
            ("mtex.policies=entry-tco+uaccess-tco", "policies"),
            ("mtex.policies=tfsr-sync-skip", "policies"),
            ("mtex.policies=fast", "policies"),
            ("mtex.workloads=getpid:iters=0", "workloads"),
            ("mtex.workloads=kbuf-probe:size=7", "workloads"),
            ("mtex.workloads=thread-create:tasks=99", "workloads"),
            ("mtex.workloads=getpid:speed=2", "workloads"),
            ("mtex.workloads=getpid:tcf0=on", "workloads"),
            ("mtex.workloads=nope", "workloads"),
            ("mtex.tcf0=on", "tcf0"),
            ("mtex.hz=fast", "hz"),
            ("mtex.hz=1000000", "hz"),
            ("mtex.cpus=0", "cpus"),
            ("mtex.cpus=9", "cpus"),
            ("mtex.cpus=2 mtex.hz=0 mtex.trace=only", "cpus"),
            ("mtex.cpus=2 mtex.trace=only mtex.workloads=getpid", "cpus"),
            ("mtex.cpus=2 mtex.hz=0 mtex.workloads=getpid", "cpus"),
            (
                "mtex.cpus=2 mtex.hz=0 mtex.trace=only mtex.workloads=getpid mtex.sample=1000:25",
                "sample",
            ),
            ("mtex.trace=0 mtex.sample=1000:25", "sample"),
        ] {
            assert_eq!(Scenario::parse(line).unwrap_err().key, key, "{line}");
        }
    }

    #[test]
    fn several_cpus_run_the_workloads_that_stay_on_their_cpu() {
        let s = Scenario::parse(
            "mtex.cpus=4 mtex.hz=0 mtex.trace=only mtex.workloads=getpid,futex-hash,memcached,uaccess-heavy,kbuf-probe",
        )
        .unwrap();
        assert_eq!((s.cpus, s.runs().count()), (4, 8 * 5));
        assert_eq!(Scenario::parse("").unwrap().cpus, 1);
        // Sampled on one CPU, traced (with or without the untraced passes).
        for line in ["mtex.sample=1000:25", "mtex.sample=1000:25 mtex.trace=only"] {
            assert!(Scenario::parse(line).is_ok(), "{line}");
        }
    }

    #[test]
    fn workload_parameters_override_defaults() {
        let s = Scenario::parse("mtex.policies=tcma1 mtex.workloads=kbuf-probe:size=512:iters=3")
            .unwrap();
        let r: std::vec::Vec<_> = s.runs().collect();
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].params.size, 512);
        assert_eq!(r[0].params.iters, 3);
        assert_eq!(r[0].tcf0, Tcf::Sync);
        let s = Scenario::parse("mtex.tcf0=none mtex.workloads=getpid,getpid:tcf0=asymm").unwrap();
        let modes: std::vec::Vec<_> = s.runs().map(|r| r.tcf0).collect();
        assert_eq!(modes[..2], [Tcf::None, Tcf::Asymm]);
    }

    proptest! {
        #[test]
        fn phase_params_round_trip(w in 0u64..7, bits in 0u64..64, tcf0 in 0u64..4,
                                   iters in 1u32..100_000, size in 0u32..20_000, tasks in 0u32..64) {
            let p = PhaseParams {
                workload: Workload::from_index(w).unwrap(),
                policy: Policy::from_bits(bits),
                tcf0: Tcf::from_bits(tcf0),
                params: WorkloadParams { iters, size, tasks },
            };
            prop_assert_eq!(PhaseParams::from_regs(p.to_regs()), Some(p));
        }

        #[test]
        fn every_default_workload_parses_with_its_defaults(i in 0u64..7) {
            let w = Workload::from_index(i).unwrap();
            prop_assert_eq!(parse_workload(w.name()), Ok((w, w.defaults(), None)));
        }
    }
}
