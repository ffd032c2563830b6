//! The one table of counter definitions: every counter a report exports (text, report.json,
//! CSV, the matrix, plots, `mtex compare`, scenario expectations) is named here, with what it
//! counts, its unit, view, exception level and direction, whether it is exact, and whether it
//! describes the guest or the instrument. Renderers take names and values from here; none
//! computes a counter of its own.
//!
//! Names follow `perf stat`: the architectural view has perf's own event names
//! (`mem_access_checked_rd:k`), the other views are prefixed with theirs (`tcf_elided.`,
//! `if_tcma1.`, `if_kernel_tco.`), `:u`/`:k`/`:h` is the EL that executed the instruction
//! (EL0, EL1, EL2), and a name with `checked` counts only Tag Checked accesses of its view.

use crate::report::{PhaseStats, StepEngine};
use mtex_trace::counts::{ByEl, TraceCounts};

/// Whose behaviour a counter describes: the guest's (a policy changes it), or the
/// instrument's own work (a property of how mtex measured, never a guest regression).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Describes {
    Guest,
    Instrument,
}

/// Whether a figure is a count of every event, or an estimate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exactness {
    Exact,
    Estimate,
}

/// The configuration an access is judged under (`counts::Views`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum View {
    /// The guest's actual controls, as the architecture defines Tag Checked.
    Architectural,
    /// Only where SCTLR_EL1.TCF/TCF0 is not NONE (what Arm cores and QEMU check).
    TcfElided,
    /// As if TCR_EL1.TCMA1 were set.
    IfTcma1,
    /// As if EL1 had kept PSTATE.TCO set.
    IfKernelTco,
}

/// The EL that executed what is counted (perf's modifiers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum El {
    /// `:u`, EL0.
    User,
    /// `:k`, EL1.
    Kernel,
    /// `:h`, EL2.
    Hyp,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dir {
    Read,
    Write,
}

/// What a trace counter counts, precisely enough to evaluate it on a trace by definition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counts {
    /// Data-access instructions in `dir` executed at `el`; with `checked`, only those Tag
    /// Checked in the view; with `unprivileged`, only EL1's LDTR/STTR that access as EL0.
    Accesses {
        checked: Option<View>,
        el: El,
        dir: Dir,
        unprivileged: bool,
    },
    /// Anything else (instructions, entries, TCO writes, barriers...), described in words.
    Other,
}

/// Where a counter's value comes from: the record that carries it, and how it is read there.
/// The host reads every counter through this, so a counter a record already carries needs
/// only its line in the table.
#[derive(Clone, Copy)]
pub enum Source {
    /// A traced phase's counts (`PhaseTrace`, `TraceMore`, `TraceImpdef`).
    Trace(fn(&TraceCounts) -> u64),
    /// The phase's statistics (`PhaseEnd`): None where the phase has none of it (the PMU's
    /// instruction counts when it did not count them).
    Stats(fn(&PhaseStats) -> Option<u64>),
    /// The step engine's record of a traced phase (`StepEngine`), with its counts.
    Engine(fn(&StepEngine, Option<&TraceCounts>) -> u64),
    /// The PMU's records of the phase (`PhasePmu`: its traced pass under `pmu.`, its
    /// untraced passes under `untraced.`; `TcoWatch`), gathered by the host.
    PmuPasses,
    /// What the guest's own PMU counters of the MTE events counted (`GuestPmuCounted`, one
    /// per CPU), summed by the host.
    GuestPmu,
}

/// One counter.
#[derive(Clone, Copy)]
pub struct Counter {
    pub name: &'static str,
    /// What one unit of it is (`accesses`, `instructions`...).
    pub unit: &'static str,
    pub describes: Describes,
    pub exactness: Exactness,
    pub view: Option<View>,
    pub el: Option<El>,
    pub dir: Option<Dir>,
    pub counts: Counts,
    /// What it counts, in a few words.
    pub what: &'static str,
    pub source: Source,
}

impl core::fmt::Debug for Counter {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name)
    }
}

impl Counter {
    /// Its value in a traced phase's counts (None for a counter the records give).
    pub fn of_trace(&self, t: &TraceCounts) -> Option<u64> {
        match self.source {
            Source::Trace(f) => Some(f(t)),
            _ => None,
        }
    }

    /// Its value in a phase's statistics (None for a counter they do not give).
    pub fn of_stats(&self, s: &PhaseStats) -> Option<u64> {
        match self.source {
            Source::Stats(f) => f(s),
            _ => None,
        }
    }

    /// Its value in the step engine's record of a traced phase (None for a counter that
    /// record does not give).
    pub fn of_engine(&self, e: &StepEngine, t: Option<&TraceCounts>) -> Option<u64> {
        match self.source {
            Source::Engine(f) => Some(f(e, t)),
            _ => None,
        }
    }
}

/// The counters of one view of checked accesses, and of all accesses (`checked` None).
macro_rules! by_el {
    ($prefix:literal, $view:expr, $what:literal, $field:ident) => {
        [
            by_el!(@one $prefix, "rd:k", $view, El::Kernel, Dir::Read, $what, $field, rd_k),
            by_el!(@one $prefix, "wr:k", $view, El::Kernel, Dir::Write, $what, $field, wr_k),
            by_el!(@one $prefix, "rd:u", $view, El::User, Dir::Read, $what, $field, rd_u),
            by_el!(@one $prefix, "wr:u", $view, El::User, Dir::Write, $what, $field, wr_u),
        ]
    };
    (@one $prefix:literal, $suffix:literal, $view:expr, $el:expr, $dir:expr, $what:literal,
     $field:ident, $part:ident) => {
        Counter {
            name: concat!($prefix, $suffix),
            unit: "accesses",
            describes: Describes::Guest,
            exactness: Exactness::Exact,
            view: $view,
            el: Some($el),
            dir: Some($dir),
            counts: Counts::Accesses {
                checked: $view,
                el: $el,
                dir: $dir,
                unprivileged: false,
            },
            what: $what,
            source: Source::Trace(|t: &TraceCounts| {
                let c: &ByEl = &t.$field;
                c.$part
            }),
        }
    };
}

const ARCH: Option<View> = Some(View::Architectural);
const ELIDED: Option<View> = Some(View::TcfElided);

const fn uaccess(
    name: &'static str,
    checked: Option<View>,
    dir: Dir,
    what: &'static str,
    f: fn(&TraceCounts) -> u64,
) -> Counter {
    Counter {
        name,
        unit: "accesses",
        describes: Describes::Guest,
        exactness: Exactness::Exact,
        view: checked,
        el: Some(El::Kernel),
        dir: Some(dir),
        counts: Counts::Accesses {
            checked,
            el: El::Kernel,
            dir,
            unprivileged: true,
        },
        what,
        source: Source::Trace(f),
    }
}

const fn other(
    name: &'static str,
    unit: &'static str,
    el: Option<El>,
    what: &'static str,
    f: fn(&TraceCounts) -> u64,
) -> Counter {
    Counter {
        name,
        unit,
        describes: Describes::Guest,
        exactness: Exactness::Exact,
        view: None,
        el,
        dir: None,
        counts: Counts::Other,
        what,
        source: Source::Trace(f),
    }
}

/// A counter another record than the trace gives (`source`), counting something other than
/// accesses.
const fn from_record(
    name: &'static str,
    unit: &'static str,
    describes: Describes,
    el: Option<El>,
    what: &'static str,
    source: Source,
) -> Counter {
    Counter {
        name,
        unit,
        describes,
        exactness: Exactness::Exact,
        view: None,
        el,
        dir: None,
        counts: Counts::Other,
        what,
        source,
    }
}

const fn stats(
    name: &'static str,
    unit: &'static str,
    describes: Describes,
    el: Option<El>,
    what: &'static str,
    f: fn(&PhaseStats) -> Option<u64>,
) -> Counter {
    from_record(name, unit, describes, el, what, Source::Stats(f))
}

const fn engine(
    name: &'static str,
    unit: &'static str,
    el: Option<El>,
    what: &'static str,
    f: fn(&StepEngine, Option<&TraceCounts>) -> u64,
) -> Counter {
    from_record(
        name,
        unit,
        Describes::Instrument,
        el,
        what,
        Source::Engine(f),
    )
}

const fn untraced(
    name: &'static str,
    unit: &'static str,
    describes: Describes,
    el: Option<El>,
    what: &'static str,
) -> Counter {
    from_record(name, unit, describes, el, what, Source::PmuPasses)
}

const CHECKED: [Counter; 16] = {
    let a = by_el!(
        "mem_access_checked_",
        ARCH,
        "Tag Checked data accesses, architecturally",
        architectural
    );
    let b = by_el!(
        "tcf_elided.mem_access_checked_",
        ELIDED,
        "Tag Checked where TCF is not NONE",
        tcf_elided
    );
    let c = by_el!(
        "if_tcma1.mem_access_checked_",
        Some(View::IfTcma1),
        "Tag Checked had TCR_EL1.TCMA1 been set",
        if_tcma1
    );
    let d = by_el!(
        "if_kernel_tco.mem_access_checked_",
        Some(View::IfKernelTco),
        "Tag Checked had EL1 kept PSTATE.TCO set",
        if_kernel_tco
    );
    [
        a[0], a[1], a[2], a[3], b[0], b[1], b[2], b[3], c[0], c[1], c[2], c[3], d[0], d[1], d[2],
        d[3],
    ]
};

const ALL_ACCESSES: [Counter; 4] = by_el!(
    "mem_access_",
    None,
    "data accesses, Tag Checked or not (STGP, STZG, STZ2G, STZGM, DC ZVA and DC GZVA \
     write data)",
    accesses
);

const UACCESS: [Counter; 6] = [
    uaccess(
        "uaccess_rd",
        None,
        Dir::Read,
        "EL1's LDTR loads that access as EL0, Tag Checked or not",
        |t| t.uaccess.rd,
    ),
    uaccess(
        "uaccess_wr",
        None,
        Dir::Write,
        "EL1's STTR stores that access as EL0, Tag Checked or not",
        |t| t.uaccess.wr,
    ),
    uaccess(
        "uaccess_checked_rd",
        ARCH,
        Dir::Read,
        "EL1's LDTR loads that access as EL0, Tag Checked (also in :k)",
        |t| t.uaccess.arch_rd,
    ),
    uaccess(
        "uaccess_checked_wr",
        ARCH,
        Dir::Write,
        "EL1's STTR stores that access as EL0, Tag Checked (also in :k)",
        |t| t.uaccess.arch_wr,
    ),
    uaccess(
        "tcf_elided.uaccess_checked_rd",
        ELIDED,
        Dir::Read,
        "EL1's LDTR loads, Tag Checked where TCF0 is not NONE",
        |t| t.uaccess.elided_rd,
    ),
    uaccess(
        "tcf_elided.uaccess_checked_wr",
        ELIDED,
        Dir::Write,
        "EL1's STTR stores, Tag Checked where TCF0 is not NONE",
        |t| t.uaccess.elided_wr,
    ),
];

const OTHER: [Counter; 22] = [
    other(
        "instructions:k",
        "instructions",
        Some(El::Kernel),
        "instructions executed at EL1, traced",
        |t| t.instructions_el1,
    ),
    other(
        "instructions:u",
        "instructions",
        Some(El::User),
        "instructions executed at EL0, traced",
        |t| t.instructions_el0,
    ),
    other(
        "kernel_entries.sync_el0",
        "exceptions",
        None,
        "system calls and EL0 aborts taken to EL1",
        |t| t.entries.sync_el0,
    ),
    other(
        "kernel_entries.irq_el0",
        "exceptions",
        None,
        "interrupts taken from EL0",
        |t| t.entries.irq_el0,
    ),
    other(
        "kernel_entries.sync_el1",
        "exceptions",
        None,
        "synchronous exceptions taken from EL1",
        |t| t.entries.sync_el1,
    ),
    other(
        "kernel_entries.irq_el1",
        "exceptions",
        None,
        "interrupts taken from EL1",
        |t| t.entries.irq_el1,
    ),
    other(
        "kernel_entries.other",
        "exceptions",
        None,
        "FIQ, SError and AArch32 entries",
        |t| t.entries.other,
    ),
    other(
        "tco_writes",
        "instructions",
        None,
        "MSR TCO instructions executed",
        |t| t.tco_writes,
    ),
    other(
        "tco_changes",
        "changes",
        None,
        "PSTATE.TCO changes seen across instructions",
        |t| t.tco_changes,
    ),
    other(
        "tag_store_insns",
        "instructions",
        None,
        "tag-store instructions (STG, STZG, ST2G, STZ2G, STGP, DC GVA/GZVA, STGM/STZGM)",
        |t| t.tag_store_insns,
    ),
    other(
        "granules_tagged",
        "granules",
        None,
        "16-byte granules the tag stores tagged",
        |t| t.granules_tagged,
    ),
    other(
        "tfsr_reads",
        "instructions",
        None,
        "MRS of TFSR_EL1 or TFSRE0_EL1",
        |t| t.tfsr_reads,
    ),
    other(
        "dsb",
        "instructions",
        None,
        "DSB instructions (with or without nXS), not SSBB/PSSBB",
        |t| t.dsb,
    ),
    other("dmb", "instructions", None, "DMB instructions", |t| t.dmb),
    other("isb", "instructions", None, "ISB instructions", |t| t.isb),
    other(
        "tag_check_faults",
        "faults",
        None,
        "synchronous tag-check faults taken",
        |t| t.tag_check_faults,
    ),
    other(
        "failed_store_exclusives",
        "instructions",
        None,
        "store-exclusives that failed (no access)",
        |t| t.failed_store_exclusives,
    ),
    other(
        "failed_cas",
        "instructions",
        None,
        "CAS/CASP whose compare failed (counted as a read and a write; a CPU may write Unchecked, or not write)",
        |t| t.failed_cas,
    ),
    other(
        "exclusive_pairs_mixed",
        "instructions",
        None,
        "store-exclusives Tag Checked otherwise than their load-exclusive (status UNKNOWN)",
        |t| t.exclusive_pairs_mixed,
    ),
    other(
        "tagged_impdef",
        "accesses",
        None,
        "accesses checked only if Tagged memory mapped Non-shareable or with SCTLR_EL1.C = 0 is Tagged",
        |t| t.tagged_impdef,
    ),
    other(
        "unknown_mem",
        "instructions",
        None,
        "load/store encodings not modelled (their accesses are not counted)",
        |t| t.unknown_mem,
    ),
    other(
        "unexpected_tag_check_faults",
        "faults",
        None,
        "tag-check faults on accesses judged not Tag Checked",
        |t| t.unexpected_tag_check_faults,
    ),
];

/// Counters the host reads from the hypervisor's other records: the phase's statistics, the
/// step engine's record, the untraced passes.
const RECORDS: [Counter; 24] = [
    stats(
        "exits",
        "exits",
        Describes::Instrument,
        None,
        "exits to the hypervisor",
        |s| Some(s.exits),
    ),
    stats(
        "step_exits",
        "exits",
        Describes::Instrument,
        None,
        "single-step exits",
        |s| Some(s.step_exits),
    ),
    stats(
        "trapped_writes",
        "writes",
        Describes::Guest,
        None,
        "SCTLR_EL1/TCR_EL1 writes the guest made (trapped)",
        |s| Some(s.sysreg_writes),
    ),
    stats(
        "virtual_irqs",
        "interrupts",
        Describes::Instrument,
        None,
        "virtual interrupts the hypervisor injected",
        |s| Some(s.virqs),
    ),
    stats(
        "emulated",
        "instructions",
        Describes::Instrument,
        None,
        "guest instructions the hypervisor emulated",
        |s| Some(s.emulated),
    ),
    stats(
        "pmu_register_accesses",
        "instructions",
        Describes::Guest,
        None,
        "the guest's accesses to PMU registers (trapped, emulated)",
        |s| Some(s.guest_pmu_accesses),
    ),
    stats(
        "debug_register_accesses",
        "instructions",
        Describes::Guest,
        None,
        "the guest's accesses to debug registers (trapped, emulated)",
        |s| Some(s.guest_debug_accesses),
    ),
    stats(
        "wfx_traps",
        "instructions",
        Describes::Guest,
        None,
        "the guest's WFI and WFE (trapped)",
        |s| Some(s.wfx_traps),
    ),
    stats(
        "pmu.instructions:h",
        "instructions",
        Describes::Instrument,
        Some(El::Hyp),
        "the hypervisor's own instructions (PMU)",
        |s| s.el2_instructions,
    ),
    stats(
        "pmu.instructions:k",
        "instructions",
        Describes::Guest,
        Some(El::Kernel),
        "EL1 instructions counted by the PMU",
        |s| s.el1_instructions,
    ),
    stats(
        "pmu.instructions:u",
        "instructions",
        Describes::Guest,
        Some(El::User),
        "EL0 instructions counted by the PMU",
        |s| s.el0_instructions,
    ),
    engine(
        "engine.runs",
        "runs",
        None,
        "breakpoint runs the step engine made",
        |_, t| t.map_or(0, |t| t.runs),
    ),
    engine(
        "engine.runs_lost",
        "runs",
        None,
        "runs that ended where the plan did not know",
        |_, t| t.map_or(0, |t| t.runs_lost),
    ),
    engine(
        "engine.plans_made",
        "plans",
        None,
        "run plans made",
        |e, _| e.plans_made,
    ),
    engine(
        "engine.plans_reused",
        "plans",
        None,
        "run plans reused",
        |e, _| e.plans_reused,
    ),
    engine(
        "engine.stepped_starts",
        "instructions",
        None,
        "places where no run could start",
        |e, _| e.stepped_starts,
    ),
    engine(
        "engine.branches:k",
        "instructions",
        Some(El::Kernel),
        "EL1 branches the hypervisor executed for the guest",
        |e, _| e.branches_el1,
    ),
    engine(
        "engine.branches:u",
        "instructions",
        Some(El::User),
        "EL0 branches the hypervisor executed for the guest",
        |e, _| e.branches_el0,
    ),
    untraced(
        "untraced.instructions:h",
        "instructions",
        Describes::Instrument,
        Some(El::Hyp),
        "the hypervisor's instructions in the untraced passes",
    ),
    untraced(
        "untraced.instructions:k",
        "instructions",
        Describes::Guest,
        Some(El::Kernel),
        "EL1 instructions at full speed (PMU)",
    ),
    untraced(
        "untraced.instructions:u",
        "instructions",
        Describes::Guest,
        Some(El::User),
        "EL0 instructions at full speed (PMU)",
    ),
    untraced(
        "untraced.passes",
        "passes",
        Describes::Instrument,
        None,
        "untraced passes the PMU needed",
    ),
    untraced(
        "untraced.tco_sites",
        "sites",
        Describes::Instrument,
        None,
        "MSR TCO sites the TCO watch armed",
    ),
    untraced(
        "untraced.tco_writes",
        "instructions",
        Describes::Guest,
        None,
        "MSR TCO executed at full speed (TCO watch)",
    ),
];

/// Every counter with a fixed name, trace counters first in report order.
pub const ALL: [&[Counter]; 5] = [&CHECKED, &ALL_ACCESSES, &UACCESS, &OTHER, &RECORDS];

/// Every counter with a fixed name.
pub fn all() -> impl Iterator<Item = &'static Counter> {
    ALL.iter().flat_map(|g| g.iter())
}

/// The counters a traced phase's counts give, with their values.
pub fn of_trace(t: &TraceCounts) -> impl Iterator<Item = (&'static Counter, u64)> + '_ {
    all().filter_map(move |c| c.of_trace(t).map(|v| (c, v)))
}

/// The counters of one CPU's share of a phase counted on several CPUs (`CpuTrace`), with
/// their values: the phase's own counters, for the figures a share holds.
pub fn of_cpu_share(
    c: &crate::report::CpuTrace,
) -> impl Iterator<Item = (&'static Counter, u64)> + use<> {
    const IN_A_SHARE: [&str; 11] = [
        "instructions:k",
        "instructions:u",
        "mem_access_checked_rd:k",
        "mem_access_checked_wr:k",
        "mem_access_checked_rd:u",
        "mem_access_checked_wr:u",
        "mem_access_rd:k",
        "mem_access_wr:k",
        "mem_access_rd:u",
        "mem_access_wr:u",
        "tag_check_faults",
    ];
    let t = TraceCounts {
        instructions_el0: c.instructions[0],
        instructions_el1: c.instructions[1],
        architectural: c.checked,
        accesses: c.accesses,
        tag_check_faults: c.tag_check_faults,
        ..TraceCounts::default()
    };
    all().filter_map(move |k| {
        IN_A_SHARE
            .contains(&k.name)
            .then(|| k.of_trace(&t).map(|v| (k, v)))
            .flatten()
    })
}

/// A PMU event counted per EL, under `pmu.` (a traced phase) or `untraced.` (a full-speed
/// pass): `pmu.mem_access_checked_rd:k`, `untraced.cycles:u`, `untraced.raw.0x0013:k`.
/// Counted by the CPU, of the guest's execution.
pub const PMU_EVENT: Counter = untraced(
    "pmu.EVENT:EL",
    "events",
    Describes::Guest,
    None,
    "a PMU event counted per EL by the CPU",
);

/// An MTE event as the guest's own PMU counters counted it (perf inside the guest), which
/// the hypervisor keeps from the trace: `guest_pmu.mem_access_checked_rd:k` (the
/// architecture's view; `guest_pmu.tcf_elided.…` the Arm cores', [`guest_pmu_prefix`]), with
/// perf's modifier for the ELs the counters' types count at (`:u`, `:k`, `:uk` for both), summed
/// over the phase's CPUs and over counters of the same event and ELs. Exact: only time traced
/// whole adds to them (a counter that counted otherwise is a problem of the run).
pub const GUEST_PMU_EVENT: Counter = Counter {
    name: "guest_pmu.EVENT:EL",
    unit: "accesses",
    describes: Describes::Guest,
    exactness: Exactness::Exact,
    view: None,
    el: None,
    dir: None,
    counts: Counts::Other,
    what: "an MTE event counted by the guest's own PMU counters, from the trace",
    source: Source::GuestPmu,
};

/// The prefix of the guest's counters' names in `view` (that of `mtex.guest_pmu_events`):
/// `guest_pmu.` for the architecture's, `guest_pmu.tcf_elided.` for the Arm cores'.
pub const fn guest_pmu_prefix(view: crate::options::GuestEventsView) -> &'static str {
    match view {
        crate::options::GuestEventsView::Architectural => "guest_pmu.",
        crate::options::GuestEventsView::TcfElided => "guest_pmu.tcf_elided.",
    }
}

/// perf's modifier for what a guest counter counts at, as `GuestPmuCounted` indexes it.
pub const GUEST_PMU_ELS: [&str; 3] = ["u", "k", "uk"];

/// The MTE events as `GuestPmuCounted` indexes them.
pub const GUEST_PMU_EVENTS: [u16; 3] = [
    crate::report::pmu_event::MEM_ACCESS_CHECKED,
    crate::report::pmu_event::MEM_ACCESS_CHECKED_RD,
    crate::report::pmu_event::MEM_ACCESS_CHECKED_WR,
];

/// The definition of the counter named `name`: a fixed one, a PMU event per EL under
/// `pmu.`/`untraced.`, or the guest's own (`guest_pmu.`). None for a name no report exports.
pub fn lookup(name: &str) -> Option<&'static Counter> {
    if let Some(c) = all().find(|c| c.name == name) {
        return Some(c);
    }
    if let Some((event, el)) = name
        .strip_prefix("guest_pmu.")
        .map(|e| e.strip_prefix("tcf_elided.").unwrap_or(e))
        .and_then(|e| e.rsplit_once(':'))
    {
        let known = GUEST_PMU_EVENTS
            .iter()
            .any(|&e| crate::report::pmu_event::name(e) == Some(event));
        return (known && GUEST_PMU_ELS.contains(&el)).then_some(&GUEST_PMU_EVENT);
    }
    let event = name
        .strip_prefix("pmu.")
        .or_else(|| name.strip_prefix("untraced."))?;
    let (event, el) = event.rsplit_once(':')?;
    let known = crate::report::pmu_event::by_name(event).is_some()
        || event.strip_prefix("raw.0x").is_some_and(|h| {
            // As reports spell them: four hex digits.
            h.len() == 4 && h.bytes().all(|b| b.is_ascii_hexdigit())
        });
    (known && matches!(el, "k" | "u")).then_some(&PMU_EVENT)
}

/// Whether a counter describes the guest (None, an unknown name, counts as the guest's: a
/// comparison never hides a figure it cannot place).
pub fn describes_guest(name: &str) -> bool {
    lookup(name).is_none_or(|c| c.describes == Describes::Guest)
}

#[cfg(test)]
mod share_tests {
    use super::*;

    #[test]
    fn a_cpus_share_gives_the_phases_counters_for_its_figures() {
        let share = crate::report::CpuTrace {
            instructions: [5, 7],
            checked: ByEl {
                rd_k: 3,
                ..ByEl::default()
            },
            tag_check_faults: 1,
            ..Default::default()
        };
        let got: std::vec::Vec<(&str, u64)> =
            of_cpu_share(&share).map(|(c, v)| (c.name, v)).collect();
        assert_eq!(got.len(), 11, "{got:?}");
        for want in [
            ("instructions:u", 5),
            ("instructions:k", 7),
            ("mem_access_checked_rd:k", 3),
            ("tag_check_faults", 1),
        ] {
            assert!(got.contains(&want), "{want:?} in {got:?}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_found() {
        let mut names: std::vec::Vec<_> = all().map(|c| c.name).collect();
        let n = names.len();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), n, "a name is defined twice");
        for c in all() {
            assert_eq!(lookup(c.name).map(|d| d.name), Some(c.name));
        }
    }

    #[test]
    fn a_checked_name_counts_only_checked_accesses_and_says_its_view() {
        for c in all() {
            let checked = c.name.contains("checked");
            match c.counts {
                Counts::Accesses {
                    checked: view,
                    el,
                    dir,
                    ..
                } => {
                    assert_eq!(view.is_some(), checked, "{}", c.name);
                    assert_eq!(view, c.view, "{}", c.name);
                    assert_eq!((Some(el), Some(dir)), (c.el, c.dir), "{}", c.name);
                    let prefix = match view {
                        Some(View::TcfElided) => "tcf_elided.",
                        Some(View::IfTcma1) => "if_tcma1.",
                        Some(View::IfKernelTco) => "if_kernel_tco.",
                        _ => "",
                    };
                    assert!(c.name.starts_with(prefix), "{}", c.name);
                    let rd = c.name.contains("rd");
                    assert_eq!(rd, dir == Dir::Read, "{}", c.name);
                }
                Counts::Other => assert!(!checked, "{}", c.name),
            }
        }
    }

    use mtex_trace::counts::{Effect, Judged, Pending, Tally, Views};
    use proptest::prelude::*;

    /// An access generated for the property below: executing EL, whether it is EL1's
    /// LDTR/STTR accessing as EL0, and each direction: absent, or present with the views
    /// that check it (every other view only removes checks from the architectural one).
    fn judged(present: bool, arch: bool, others: [bool; 3]) -> Judged {
        if !present {
            return Judged::default();
        }
        Judged::access(Views {
            architectural: arch,
            tcf_elided: arch && others[0],
            if_tcma1: arch && others[1],
            if_kernel_tco: arch && others[2],
        })
    }

    fn in_view(j: Judged, view: Option<View>) -> bool {
        let v = j.views();
        j.present()
            && match view {
                None => true,
                Some(View::Architectural) => v.architectural,
                Some(View::TcfElided) => v.tcf_elided,
                Some(View::IfTcma1) => v.if_tcma1,
                Some(View::IfKernelTco) => v.if_kernel_tco,
            }
    }

    proptest! {
        /// Every exported access counter equals its definition evaluated on the trace: the
        /// accesses of its EL and direction (EL1's unprivileged ones only, for `uaccess`),
        /// all of them, or only those Tag Checked in its view.
        #[test]
        fn every_access_counter_is_its_definition(
            trace in proptest::collection::vec(
                (0u8..2, any::<bool>(), (any::<bool>(), any::<bool>(), any::<[bool; 3]>()),
                 (any::<bool>(), any::<bool>(), any::<[bool; 3]>())),
                0..60)
        ) {
            let mut tally = Tally::default();
            let mut accesses = std::vec::Vec::new();
            for (el, unpriv, (rp, ra, ro), (wp, wa, wo)) in trace {
                let p = Pending {
                    pc: 0,
                    effect: Effect::Access,
                    el,
                    read: judged(rp, ra, ro),
                    write: judged(wp, wa, wo),
                    unprivileged: unpriv && el == 1,
                    tagged_impdef: false,
                };
                tally.retire(&p);
                accesses.push(p);
            }
            let t = tally.finish();
            for (c, value) in of_trace(&t) {
                let Counts::Accesses { checked, el, dir, unprivileged } = c.counts else {
                    continue;
                };
                let by_definition = accesses
                    .iter()
                    .filter(|p| match el {
                        El::User => p.el == 0,
                        El::Kernel => p.el == 1,
                        El::Hyp => false,
                    })
                    .filter(|p| !unprivileged || p.unprivileged)
                    .filter(|p| in_view(if dir == Dir::Read { p.read } else { p.write }, checked))
                    .count() as u64;
                prop_assert_eq!(value, by_definition, "{}", c.name);
            }
        }
    }

    #[test]
    fn pmu_events_are_found_by_family() {
        for n in [
            "pmu.mem_access_checked_rd:k",
            "untraced.cycles:u",
            "untraced.raw.0x0013:k",
        ] {
            assert!(lookup(n).is_some(), "{n}");
        }
        for n in [
            "pmu.nope:k",
            "untraced.cycles:x",
            "checked_reads",
            "uaccess_checked",
        ] {
            assert!(lookup(n).is_none(), "{n}");
        }
        assert!(!describes_guest("engine.plans_made"));
        assert!(!describes_guest("pmu.instructions:h"));
        assert!(describes_guest("mem_access_checked_rd:k"));
    }
}
