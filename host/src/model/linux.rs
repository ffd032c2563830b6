//! The Linux section of a results document: what a Linux-mode run has beyond its phases.
//! Its windows are phases of the document like any other (their counters under the one
//! table's names); this section holds only what is not a counter: how the boot went, what
//! the workload printed, each window's command line, clock and oracle verdict, the
//! registers' last values, and the windows opened and never closed.

use serde::{Deserialize, Serialize};

/// Linux mode's part of a results document (`Results::linux`). The kernel's identity is
/// `Results::kernel`; the problems, notes, trapped writes and power calls are the run's.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LinuxSection {
    /// The CPUs the machine gave Linux (`--cpus`).
    pub cpus: u32,
    /// The CPU QEMU gave it, in words (`QEMU max without SVE and SME`); empty in a document
    /// written before it was recorded.
    #[serde(default)]
    pub cpu_model: String,
    /// `--tagged-heap`: the mode glibc's tagged heap was asked for in (sync, async).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tagged_heap: Option<String>,
    /// Booted by UEFI firmware with the hypervisor installed under it (`--uefi`), rather
    /// than by the hypervisor itself.
    pub through_firmware: bool,
    /// Whether Linux ran the initramfs's /init, and the workload's exit status.
    pub reached_init: bool,
    pub workload_status: Option<i32>,
    /// The workload programs' result lines (`mtex-work: ...`) from Linux's console.
    pub workload_output: Vec<String>,
    /// What each window measured that is not a counter, by the phase's id.
    pub windows: Vec<WindowInfo>,
    /// Windows opened and never closed: not measured, no counts (and no phase).
    pub unclosed_windows: Vec<UnclosedWindow>,
    /// Whether QEMU ran with -icount (the guest clock's times exact).
    pub icount: bool,
    /// Each register's last value (hex, as every register value in the document) and its
    /// MTE fields (`TCMA1=0`, ...).
    pub final_sctlr_el1: Option<(String, Vec<String>)>,
    pub final_tcr_el1: Option<(String, Vec<String>)>,
    /// How the run ended, in words.
    pub exit: String,
    pub wall_s: f64,
    /// The kernel symbols known (0: PCs only).
    pub symbols: usize,
    pub unknown_calls: Vec<String>,
    pub debug_writes: usize,
    /// The last lines of Linux's console when it did not reach /init (why it stopped).
    pub console_tail: Vec<String>,
}

/// The bits of a register value the document gives in hex (`0x…`; 0 if it is not).
pub fn bits(hex: &str) -> u64 {
    crate::model::results::from_hex(hex).unwrap_or(0)
}

/// A window's facts beside its counters (the phase with the same `id`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WindowInfo {
    pub id: u32,
    /// The workload's own line naming it (`mtex-work --window 1 ...`), if it printed one.
    pub label: Option<String>,
    /// Sampled (`--sample`): its counters are estimates, not counts.
    #[serde(default)]
    pub sampled: bool,
    /// The guest's own clock over the window, in milliseconds: its virtual counter
    /// (CNTVCT_EL0, what Linux reads), which the hypervisor holds back by its own time at
    /// every exit, so the stepping is left out. Exact under -icount (one nanosecond per guest
    /// instruction and exception, idle time skipped), approximate without. None where the
    /// hypervisor did not record it, or where the close read behind the open.
    pub guest_clock_ms: Option<f64>,
    /// The guest's own clock when the window opened, in milliseconds since Linux's first
    /// instruction: the boot and the workload's start.
    pub opened_ms: Option<f64>,
    /// Instructions that began but were abandoned for an exception taken on them, at EL0
    /// and EL1 (not in the instruction counters).
    pub abandoned: [u64; 2],
    /// The TCF0 values the SCTLR_EL1 writes trapped in the window set, each once, in the
    /// order first set: the user tag checking its tasks asked for and ran with (Linux writes
    /// a task's TCF0 when it asks by prctl, and at each switch between tasks whose TCF0
    /// differ). Empty: no write in the window changed TCF0.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub user_tcf0: Vec<String>,
    /// The operations its command said it made, read from its own output (memcaslap's,
    /// perf bench futex hash's): its counts are also given per operation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operations: Option<crate::linux::operations::Operations>,
    /// `perf stat` inside the guest: its figures for the MTE events beside the window's
    /// `guest_pmu.*` counters (`crate::linux::perf_stat`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub perf_stat: Vec<crate::linux::perf_stat::PerfBeside>,
    /// The oracle's check of the window (`mtex linux --oracle`); of a sampled window, of
    /// what its units and their leads traced.
    pub oracle: Option<crate::oracle_check::Check>,
    /// What its call stacks could not follow (`mtex.stacks=1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack_stats: Option<mtex_trace::callstack::StackStats>,
    /// A window every CPU counted: what each CPU's share has beyond its counters.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cpus: Vec<CpuInfo>,
    /// A sampled window: its exact instructions at [EL0, EL1] (the PMU's), which the
    /// estimates scale to, and of them those its units traced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub population: Option<[u64; 2]>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traced: Option<[u64; 2]>,
}

/// One CPU's share of a window, beyond its counters.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuInfo {
    pub cpu: u32,
    pub step_exits: u64,
    /// The oracle's check of this CPU's share (`mtex linux --oracle`).
    pub oracle: Option<crate::oracle_check::Check>,
}

/// A window the workload opened and never closed: it was not measured (what the trace
/// holds is whatever ran until the run ended), so no count of it is given.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct UnclosedWindow {
    pub id: u32,
    pub label: Option<String>,
    /// The guest's own clock when it opened, in milliseconds since Linux's first
    /// instruction.
    pub opened_ms: Option<f64>,
}
