//! Report records: what the hypervisor tells the host. Sent in order, each framed with a
//! sequence number and a checksum (see [`crate::frame`]); the last one is a [`Summary`] that
//! says how many came before it, so a lost record is always noticed.

use crate::ShortStr;
use mtex_arch::SysReg;
use serde::{Deserialize, Serialize};

/// A phase name as the guest gave it.
pub type PhaseName = ShortStr<{ crate::hypercall::PHASE_NAME_BYTES }>;
/// One line of guest console output (longer lines are split).
pub type ConsoleText = ShortStr<CONSOLE_LINE_BYTES>;
/// Longest console line carried in one record.
pub const CONSOLE_LINE_BYTES: usize = 160;
/// A short diagnostic message.
pub type Message = ShortStr<96>;

/// One report record.
#[allow(
    clippy::large_enum_variant,
    reason = "records are Copy and built without an allocator at EL2; the large one (the trace counts) goes once per phase"
)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Record {
    /// First record of a run: how the hypervisor found the machine.
    Boot(Boot),
    /// The guest opened a named phase.
    PhaseBegin(PhaseBegin),
    /// The guest closed the phase, with what the hypervisor counted in it.
    PhaseEnd(PhaseEnd),
    /// The guest wrote a trapped EL1 system register; the hypervisor emulated the write.
    SysregWrite(SysregWrite),
    /// A line the guest printed through the console hypercall.
    Console(ConsoleText),
    /// The guest made a call the hypervisor does not implement; it got NOT_SUPPORTED.
    UnknownCall(UnknownCall),
    /// What the trace counter counted in a traced phase (sent just before its PhaseEnd).
    PhaseTrace(PhaseTrace),
    /// A place where the guest wrote PSTATE.TCO in a traced phase, and how often.
    TcoSite(TcoSite),
    /// The guest wrote a debug register; the hypervisor kept the value in the guest's shadow
    /// and did not pass it to the hardware (the step engine owns the real ones).
    DebugWrite(DebugWrite),
    /// Last record of a run.
    Summary(Summary),
    /// How the step engine ran a traced phase (sent with its PhaseTrace). Last of the
    /// variants so that logs written before it still decode.
    StepEngine(StepEngine),
    /// What the PMU backend counted in a phase (sent just before its PhaseEnd), and which run
    /// and pass of it the phase was. After StepEngine so that older logs still decode.
    PhasePmu(PhasePmu),
    /// How an untraced pass watched the guest's MSR TCO sites with breakpoints (sent with its
    /// TcoSite records, before its PhasePmu).
    TcoWatch(TcoWatch),
    /// Linux mode: a doorbell access the hypervisor refused (`crate::doorbell`). After
    /// TcoWatch so that older logs still decode.
    DoorbellRefused(DoorbellRefused),
    /// Counts of a traced phase added after PhaseTrace's layout was fixed (sent with it; kept
    /// out of it so that the logs written before still decode). Last for the same reason.
    TraceMore(TraceMore),
    /// A call made while a guarded phase was open, from code that may not make it
    /// (`crate::hypercall::PHASE_GUARDED`): refused. After TraceMore so that older logs still
    /// decode.
    CallRefused(CallRefused),
    /// The guest's own clock at a phase's begin (sent after its PhaseBegin) and end (before
    /// its PhaseEnd). After CallRefused so that older logs still decode.
    PhaseClock(PhaseClock),
    /// What one PC counted in a traced phase (`mtex.profile`), sent after its PhaseTrace in
    /// PC order. After PhaseClock so that older logs still decode.
    PcProfile(PcProfile),
    /// The end of a phase's PcProfile records: how many were sent.
    PcProfileEnd(PcProfileEnd),
    /// A call stack of a traced phase (`mtex.stacks=1`), sent after its PcProfileEnd: one
    /// per node of the phase's tree of frames, which its PcProfile entries name.
    StackNode(StackNode),
    /// The end of a phase's StackNode records.
    StackEnd(StackEnd),
    /// A PSCI CPU_ON or CPU_OFF the guest made, and the answer it got. After StackEnd so
    /// that older logs still decode.
    PowerCall(PowerCall),
    /// A PHASE_BEGIN refused because other CPUs were on or starting, and the phase could
    /// not be counted on all of them (`mtex_vm::phase::Refusal::OtherCpusOn`).
    PhaseRefused(PhaseRefused),
    /// One CPU's share of a traced window counted on several CPUs (sent as the CPU leaves
    /// it, before the window's PhaseTrace, which holds their sum).
    CpuTrace(CpuTrace),
    /// The CPU that sends the records after it, up to the next `OnCpu`: the trapped writes
    /// among them are that CPU's. Sent only when the sender changes, so a run on one CPU
    /// never has one (the records before the first are CPU 0's).
    OnCpu(OnCpu),
    /// The guest took a snapshot of the records (the doorbell's RESULTS): the snapshot ends
    /// with this record. A stream that ends here without a Summary is such a snapshot.
    ResultsTaken(ResultsTaken),
    /// One traced unit of a sampled phase (`mtex.sample`): what the trace counted in it,
    /// sent as the unit ends. After ResultsTaken so that older logs still decode.
    SampleUnit(SampleUnit),
    /// How a sampled phase was sampled (sent at its end, after its last SampleUnit and
    /// before its PhasePmu): the schedule, the units, and what the step engine did in them.
    PhaseSampled(PhaseSampled),
    /// The guest programmed one of its PMU counters with an MTE event the CPU does not
    /// implement (`pmu_plan::unimplemented_mte_event`): that counter counts nothing, so perf
    /// inside the guest would print 0 for it. Sent once per counter and event. After
    /// PhaseSampled so that older logs still decode.
    GuestPmuEvent(GuestPmuEvent),
    /// The iterations a guarded phase's harness made, as the hypervisor counted them
    /// (`crate::hypercall::PHASE_ITERATION`), with those it said it would make: first of the
    /// phase's closing records, or sent when the run ends inside the phase. After
    /// GuestPmuEvent so that older logs still decode.
    PhaseIterations(PhaseIterations),
    /// How many of a traced phase's (or sampled unit's) accesses rest on a choice the Arm
    /// ARM leaves to the CPU (sent after its TraceMore, only when one is not zero). After
    /// PhaseIterations so that older logs still decode.
    TraceImpdef(TraceImpdef),
    /// The counter ticks one CPU spent at EL2 in a phase waiting for the hypervisor's lock
    /// while another CPU held it: sent before the PhaseEnd of a phase counted on one CPU,
    /// and with each CPU's share of a window counted on several. After TraceImpdef so that
    /// older logs still decode.
    LockWait(LockWait),
    /// What one CPU's guest PMU counters of the MTE events counted over a traced phase, or
    /// its share of a window (sent as its trace stops, when the guest programmed one of the
    /// events in it). After LockWait so that older logs still decode.
    GuestPmuCounted(GuestPmuCounted),
    /// A guest PMU counter of the MTE events (or one with no hardware behind it) whose
    /// count is not exact, and why: sent once per CPU, counter and reason. After
    /// GuestPmuCounted so that older logs still decode.
    GuestPmuInexact(GuestPmuInexact),
    /// One CPU's share of a sampled window counted on several CPUs (sent as the CPU leaves
    /// it, after its last SampleUnit; the SampleUnit records this CPU sent, as `OnCpu` tells,
    /// are its units). After GuestPmuInexact so that older logs still decode.
    CpuSampled(CpuSampled),
}

/// How one CPU sampled its share of a window counted on several CPUs: from its first
/// instruction after the window reached it (it joined) to its first exit after the window
/// closed, or as it went off (it left). Each CPU samples on its own schedule (the window's
/// random seed, made its own by the CPU's index) with its own EL2 timer; its instructions
/// are its PMU's on silicon, an emulator's own count on QEMU (whose PMU counts every vCPU's):
/// the estimates of the window are made CPU by CPU and summed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuSampled {
    pub id: u32,
    /// The CPU: its index among the machine's CPUs.
    pub cpu: u32,
    /// The CPU's schedule, its units and its step engine's work in them, as a sampled
    /// phase's record has them (`sampled.id` is the window's; `seed` the CPU's own).
    pub sampled: PhaseSampled,
    /// Instructions its PMU counted at [EL0, EL1] from its join to its leave; None when the
    /// PMU gave no figure (no instruction counter, or one disturbed meanwhile). On QEMU these
    /// take in every vCPU's instructions, and the host uses the plugin's count instead.
    pub pmu_instructions: Option<[u64; 2]>,
    /// Trapped writes the hypervisor emulated for it meanwhile (`PhaseStats::emulated`).
    pub emulated: u64,
    /// Single-step exits it took meanwhile.
    pub step_exits: u64,
}

/// Counter ticks (CNTPCT_EL0) CPU `cpu` spent at EL2 during phase `id` waiting for the
/// hypervisor's lock while another CPU held it (0 when it never waited). Under `-icount`
/// the counter advances with every CPU's instructions: the ticks are the machine's work
/// while the CPU waited.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockWait {
    pub id: u32,
    pub cpu: u32,
    pub ticks: u64,
}

/// A guarded phase's iterations: those its harness said at PHASE_BEGIN it would make, and
/// the PHASE_ITERATION calls the hypervisor took from the harness's own instruction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PhaseIterations {
    pub id: u32,
    pub wanted: u64,
    pub counted: u64,
}

/// One unit of a sampled phase: consecutive instructions the step engine traced exactly.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SampleUnit {
    pub id: u32,
    /// Not a unit but the lead stepped before one (`mtex_vm::sample`): not part of the
    /// sample, its instructions only put right in the phase's totals as a unit's are.
    pub lead: bool,
    /// The guest's clock when the unit began (`PhaseClock`'s), so units can be placed in
    /// the phase.
    pub guest_clock: u64,
    pub counts: mtex_trace::counts::TraceCounts,
}

/// How a sampled phase was sampled.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PhaseSampled {
    pub id: u32,
    /// Units traced (as many SampleUnit records came before this one).
    pub units: u32,
    /// The schedule (`crate::options::SampleOptions`).
    pub unit_instructions: u32,
    pub gap_us: u32,
    pub seed: u64,
    /// Every instruction of the phase was traced: the units began at the phase's begin and
    /// each where the last ended (gap 0), so their sum is the phase's exact count.
    pub whole: bool,
    /// The step engine's work summed over the units (its `id` is the phase's).
    pub engine: StepEngine,
    /// Units that began while another was still being traced (the timer fired late): none
    /// is begun twice, they are counted here.
    pub late_triggers: u32,
    /// ID- and debug-register accesses the guest made outside the units, each trapped to the
    /// hypervisor and emulated. QEMU raises those traps from a check in the middle of a
    /// block of translated code, and its instruction count (the PMU's, and under `-icount`
    /// the counter's) takes in the rest of the block as executed: the phase's instruction
    /// total is then too high by an amount no one measures.
    pub untraced_id_debug_traps: u32,
    /// The phase ended long after its next unit was due (`mtex_vm::sample::overdue`): the
    /// timer stopped reaching EL2, so the units cover only part of the phase.
    pub timer_stopped: bool,
}

/// A snapshot of the records taken by the guest.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResultsTaken {
    /// Records before this one (as a Summary counts them).
    pub records: u32,
    /// Bytes of the records before this one that did not fit the hypervisor's results ring
    /// (they went to the UART only): the snapshot lacks them.
    pub lost: u64,
}

/// Which CPU the records that follow come from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OnCpu {
    /// Its index among the machine's CPUs.
    pub cpu: u32,
}

/// What one CPU counted in a window that every CPU counts: from its first instruction after
/// the window reached it (it joined) to its first exit after the window closed (it left).
/// The figures the per-CPU report and the oracle's per-CPU check need, in a record that fits
/// a frame whatever their size (the whole `TraceCounts` would not, beside the rest).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuTrace {
    pub id: u32,
    /// The CPU: its index among the machine's CPUs.
    pub cpu: u32,
    /// Instructions executed, abandoned and (of those) trapped, at EL0 and EL1, as
    /// `TraceCounts::instructions_el*` and `TraceMore` count them.
    pub instructions: [u64; 2],
    pub abandoned: [u64; 2],
    pub trapped: [u64; 2],
    /// Direct branches the hypervisor executed for the guest on this CPU
    /// (`StepEngine::branches_el*`), at EL0 and EL1.
    pub hyp_branches: [u64; 2],
    /// Tag-checked accesses (`TraceCounts::architectural`) and every data access.
    pub checked: mtex_trace::counts::ByEl,
    pub accesses: mtex_trace::counts::ByEl,
    pub tag_check_faults: u64,
    pub unknown_mem: u64,
    /// Single-step exits this CPU took in the window.
    pub step_exits: u64,
}

/// A guest's PSCI power call (`mtex_vm::power` decides it) and its answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PowerCall {
    /// The calling CPU: its index among the machine's CPUs.
    pub cpu: u32,
    /// The PSCI function ID (CPU_ON's 32- or 64-bit form, or CPU_OFF).
    pub function: u32,
    /// CPU_ON's target (MPIDR affinity), entry point and context id; 0 for CPU_OFF.
    pub target: u64,
    pub entry: u64,
    pub context_id: u64,
    /// PSCI's answer: 0 (success) or a negative error code.
    pub result: i32,
    /// The phase open at the time, 0 if none.
    pub phase: u32,
    pub at: GuestState,
}

/// What one CPU's guest PMU counters of MEM_ACCESS_CHECKED (0x4024), _RD, _WR counted in
/// a traced phase (`mtex_vm::guest_events`): by event, then by the ELs their types count at
/// (`[0]` EL0 only, perf's `:u`; `[1]` EL1 only, `:k`; `[2]` both). Counters of the same
/// event and ELs add up.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GuestPmuCounted {
    pub phase: u32,
    pub cpu: u32,
    pub view: crate::options::GuestEventsView,
    pub counted: [[u64; 3]; 3],
}

/// Why a guest PMU counter's count is not exact.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum GuestPmuInexactReason {
    /// It counted an MTE event while nothing was traced whole on its CPU (outside a traced
    /// phase or window, or in a sampled one): that time added nothing to it.
    Untraced,
    /// It is one of the hypervisor's counters (the guest's for the MTE events alone) and
    /// counted another event: it has nothing to count with.
    NoHardware,
    /// It has no hardware behind it and overflowed with its interrupt enabled: the
    /// interrupt was not raised.
    InterruptLost,
}

/// A guest PMU counter whose count is not exact.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GuestPmuInexact {
    pub cpu: u32,
    pub counter: u8,
    /// Its type as the guest wrote it (event and filters).
    pub evtyper: u64,
    pub reason: GuestPmuInexactReason,
    /// The phase open at the time, 0 if none.
    pub phase: u32,
    pub at: GuestState,
}

/// A guest PMU counter programmed with an MTE event the CPU lacks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GuestPmuEvent {
    /// The calling CPU: its index among the machine's CPUs.
    pub cpu: u32,
    /// The guest's counter (PMEVTYPER<n>_EL0, directly or through PMSELR/PMXEVTYPER).
    pub counter: u8,
    /// The event number (0x4024 MEM_ACCESS_CHECKED, 0x4025 _RD, 0x4026 _WR).
    pub event: u16,
    /// The whole type written, filter bits included.
    pub evtyper: u64,
    /// The phase open at the time, 0 if none.
    pub phase: u32,
    pub at: GuestState,
}

/// A PHASE_BEGIN refused while other CPUs were on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PhaseRefused {
    pub id: u32,
    /// CPUs on (or starting) at the time, the caller included.
    pub cpus_on: u32,
    pub at: GuestState,
}

/// A node of a phase's call-stack tree: its top frame over the stack `parent`
/// (`mtex_trace::callstack::ROOT`, `UNKNOWN`, or another node).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StackNode {
    pub id: u32,
    pub node: u32,
    pub parent: u32,
    pub frame: mtex_trace::callstack::StackFrame,
}

/// Closes a phase's StackNode records.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StackEnd {
    pub id: u32,
    /// StackNode records sent for the phase.
    pub nodes: u32,
    /// What the stacks could not follow (each started a stack again from `[unknown]`).
    pub stats: mtex_trace::callstack::StackStats,
}

/// One PC's counts in a traced phase, or an `[other]` bucket: what PCs that found no room in
/// the hypervisor's bounded table counted (kept by EL and unprivileged, without their PCs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PcProfile {
    pub id: u32,
    /// An `[other]` bucket (its `pc` means nothing).
    pub other: bool,
    pub entry: mtex_trace::profile::PcEntry,
}

/// Closes a phase's PcProfile records.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PcProfileEnd {
    pub id: u32,
    /// PcProfile records sent for the phase (its PCs and its non-empty `[other]` buckets).
    pub records: u32,
    /// Distinct PCs the table kept.
    pub pcs: u32,
    /// Retired instructions and faults counted in `[other]` because the table had no room.
    pub other_notes: u64,
}

/// A refused call: which, how and from where.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallRefused {
    pub conduit: Conduit,
    /// The function ID in x0.
    pub function: u64,
    /// `pc` is the instruction after the HVC, or the SMC itself.
    pub at: GuestState,
    /// The guarded phase open at the time.
    pub phase: u32,
}

/// The guest's own clock, its virtual counter (CNTPCT_EL0 less CNTVOFF_EL2, which the
/// hypervisor advances by its own time at every exit), at the call or store that began or
/// ended a phase: the time the guest itself saw, the hypervisor's left out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PhaseClock {
    pub id: u32,
    /// The phase's end (false: its begin).
    pub end: bool,
    pub guest_clock: u64,
}

/// A traced phase's counts that PhaseTrace does not carry (`mtex_trace::counts::TraceCounts`
/// has them, outside its encoding).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceMore {
    pub id: u32,
    /// Instructions begun but abandoned, by EL (`mtex_trace::counts::began`).
    pub abandoned_el0: u64,
    pub abandoned_el1: u64,
    /// Of those, the ones whose exception the instruction raised itself.
    pub trapped_el0: u64,
    pub trapped_el1: u64,
}

/// The counts of a traced phase that the Arm ARM leaves to the CPU
/// (`mtex_trace::counts::TraceCounts` has each, with what it means).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceImpdef {
    pub id: u32,
    /// CAS/CASP whose compare failed.
    pub failed_cas: u64,
    /// Store-exclusives whose Tag Checked property differed from their load-exclusive's.
    pub exclusive_pairs_mixed: u64,
    /// Accesses Tag Checked only if Non-shareable or non-cacheable Tagged memory is Tagged.
    pub tagged_impdef: u64,
}

impl TraceImpdef {
    pub fn is_zero(&self) -> bool {
        self.failed_cas | self.exclusive_pairs_mixed | self.tagged_impdef == 0
    }
}

/// A refused doorbell access: what was stored where, by whom, and why it was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DoorbellRefused {
    pub offset: u64,
    pub value: u64,
    pub why: crate::doorbell::Refusal,
    pub at: GuestState,
    /// The window open at the time, 0 if none.
    pub open: u32,
}

/// The MSR TCO sites an untraced pass watched. The hypervisor scans the guest image's
/// executable mappings for MSR TCO at the run's first pass; later passes each watch as many
/// sites as there are breakpoints, so the run's passes together see every site. Each hit is
/// emulated (the write done, the instruction skipped) and counted, with no stepping.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TcoWatch {
    pub id: u32,
    /// Sites the scan found (at most [`TCO_WATCH_SITES`] are kept).
    pub sites: u32,
    /// Sites found beyond those kept, plus pages past the scan's limit: never watched. Any
    /// non-zero value means the run's count is short.
    pub unwatched: u32,
    /// This pass watched sites `first..first + watched` of the scan's order.
    pub first: u32,
    pub watched: u32,
    /// MSR TCO executions at the watched sites, at EL0 and EL1. They were emulated, so the
    /// CPU's PMU did not count them as instructions.
    pub writes_el0: u64,
    pub writes_el1: u64,
    /// A watched site no longer held MSR TCO when hit (code rewritten): the pass stopped
    /// watching there, and its count is short.
    pub lost: bool,
    /// The scan at this pass found other sites than the run's first pass did (code
    /// rewritten or mapped elsewhere between passes): the sites watched may not be where
    /// the writes are, and the run's count is short.
    pub moved: bool,
    /// Executable pages of the guest image the scan read.
    pub pages: u32,
}

/// Most MSR TCO sites one scan keeps.
pub const TCO_WATCH_SITES: usize = 192;

/// Most PMU counts one [`PhasePmu`] record carries: six events (cycles, the two MTE events,
/// three raw ones) at EL1 and EL0. Bounded so that the record fits one frame.
pub const PMU_COUNTS: usize = 12;
/// Most raw events a run may name (`mtex.pmu_events`).
pub const PMU_RAW_EVENTS: usize = 3;

/// PMU events mtex counts on every phase it can, and the MTE ones it asks the CPU for.
pub mod pmu_event {
    /// INST_RETIRED: counted per EL on the hypervisor's fixed counters (`PhaseStats`).
    pub const INST_RETIRED: u16 = 0x08;
    /// CPU_CYCLES.
    pub const CPU_CYCLES: u16 = 0x11;
    /// MEM_ACCESS_CHECKED: a tag-checked access (FEAT_MTE_PMU: PMCEID1 bit 36).
    pub const MEM_ACCESS_CHECKED: u16 = 0x4024;
    /// MEM_ACCESS_CHECKED_RD / _WR: tag-checked reads / writes (PMCEID1 bits 37, 38).
    pub const MEM_ACCESS_CHECKED_RD: u16 = 0x4025;
    pub const MEM_ACCESS_CHECKED_WR: u16 = 0x4026;

    /// perf's name for a common event mtex knows, else None.
    pub const fn name(event: u16) -> Option<&'static str> {
        Some(match event {
            INST_RETIRED => "instructions",
            CPU_CYCLES => "cycles",
            MEM_ACCESS_CHECKED => "mem_access_checked",
            MEM_ACCESS_CHECKED_RD => "mem_access_checked_rd",
            MEM_ACCESS_CHECKED_WR => "mem_access_checked_wr",
            _ => return None,
        })
    }

    /// The event perf calls `name`, of those mtex knows ([`name`] backwards).
    pub fn by_name(name: &str) -> Option<u16> {
        [
            INST_RETIRED,
            CPU_CYCLES,
            MEM_ACCESS_CHECKED,
            MEM_ACCESS_CHECKED_RD,
            MEM_ACCESS_CHECKED_WR,
        ]
        .into_iter()
        .find(|&e| self::name(e) == Some(name))
    }

    /// Whether PMCEID0_EL0/PMCEID1_EL0 can say if `event` is implemented: the common events
    /// 0x0000-0x003F and 0x4000-0x403F. Others (IMPLEMENTATION DEFINED) cannot be checked.
    pub const fn described_by_pmceid(event: u16) -> bool {
        event < 0x40 || (event >= 0x4000 && event < 0x4040)
    }

    /// The PMCEID register (0 or 1) and bit that say whether common `event` is implemented:
    /// PMCEID0 holds 0x00-0x1F in bits 31:0 and 0x4000-0x401F in 63:32; PMCEID1 0x20-0x3F
    /// and 0x4020-0x403F.
    pub const fn pmceid_bit(event: u16) -> (usize, u32) {
        let high = event >= 0x4000;
        let n = (event & 0x3f) as u32;
        (
            if n >= 32 { 1 } else { 0 },
            (n % 32) + if high { 32 } else { 0 },
        )
    }
}

/// One PMU figure of a phase: an event counted at one EL.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PmuCount {
    pub event: u16,
    /// 0 (EL0, perf's `:u`) or 1 (EL1, `:k`).
    pub el: u8,
    /// Named by the run (`mtex.pmu_events`) rather than counted by mtex on its own (the
    /// same event may be both).
    pub raw: bool,
    pub value: PmuValue,
}

/// What the PMU said about one event at one EL.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PmuValue {
    Counted(u64),
    /// PMCEID says the CPU does not implement the event: never shown as 0.
    NotSupported,
    /// The hypervisor's counters were disturbed (stopped, reprogrammed, or a 32-bit counter
    /// overflowed) during the phase: no figure.
    Withheld,
    /// The event's pass never ran: the guest does not repeat its work (no PHASE_REPEATABLE),
    /// and one pass had no counter left for it.
    NotCounted,
}

/// The PMU backend's figures of one phase. A run of the kernel scenario (one policy, one
/// workload) may take several phases: untraced passes 1..=`passes`, each counting the next
/// set of events on the counters the hypervisor has free (deterministic re-runs, not
/// time-multiplexing), and then its traced phase (`pass` 0). All carry the run's serial
/// number (`crate::runs`) in `run`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PhasePmu {
    pub id: u32,
    pub run: u32,
    /// 1-based untraced pass, or 0 for a traced phase (which counts nothing here).
    pub pass: u8,
    /// Untraced passes the run's events need.
    pub passes: u8,
    /// This pass's figures; the first pass also lists the events the CPU does not have.
    pub counts: [Option<PmuCount>; PMU_COUNTS],
}

/// How the step engine ran a traced phase: what it did for the guest that the CPU did not
/// do itself, and how its breakpoint runs were planned.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepEngine {
    pub id: u32,
    /// Direct branches that ended a run and that the hypervisor executed for the guest
    /// (counted in the trace's instructions; never executed by the CPU, so never counted
    /// by its PMU), at EL0 and EL1.
    pub branches_el0: u64,
    pub branches_el1: u64,
    /// Kernel entries (exceptions taken to EL1) that happened inside a run rather than
    /// while stepping (`TraceCounts::entries` counts both): QEMU's PMU counts one extra EL1
    /// instruction per entry taken with single-step pending, and none for these.
    pub entries_in_runs: u64,
    /// Run plans made, and reused from the plan cache.
    pub plans_made: u64,
    pub plans_reused: u64,
    /// Stops from which no run was worth making (stepped instead).
    pub stepped_starts: u64,
}

impl StepEngine {
    /// Adds what the engine did in another stretch of the same phase (`id` stays).
    pub fn add(&mut self, o: &StepEngine) {
        self.branches_el0 += o.branches_el0;
        self.branches_el1 += o.branches_el1;
        self.entries_in_runs += o.entries_in_runs;
        self.plans_made += o.plans_made;
        self.plans_reused += o.plans_reused;
        self.stepped_starts += o.stepped_starts;
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PhaseTrace {
    pub id: u32,
    pub counts: mtex_trace::counts::TraceCounts,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DebugWrite {
    /// The register as an EC 0x18 ISS names it (op0, op1, CRn, CRm, op2; Rt and the
    /// direction zero): `mtex_arch::DebugReg::from_iss` decodes it.
    pub iss: u32,
    pub value: u64,
    pub at: GuestState,
    /// Id of the phase open at the time, 0 if none.
    pub phase: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TcoSite {
    pub phase: u32,
    pub pc: u64,
    /// The value written.
    pub value: bool,
    pub count: u64,
}

/// Where the guest was when it exited to EL2.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GuestState {
    /// ELR_EL2: the guest instruction that exited (or the one after, for HVC/SMC).
    pub pc: u64,
    /// The guest's exception level (SPSR_EL2.M[3:2]).
    pub el: u8,
    /// The guest's PSTATE.TCO (SPSR_EL2 bit 25).
    pub tco: bool,
}

/// How guest writes to SCTLR_EL1/TCR_EL1 are trapped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TrapMode {
    /// FEAT_FGT: HFGWTR_EL2 traps only SCTLR_EL1 and TCR_EL1 writes.
    FineGrained,
    /// HCR_EL2.TVM: every EL1 virtual-memory control write traps and is emulated.
    Tvm,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Boot {
    /// [`crate::hypercall::ABI_VERSION`] of the hypervisor.
    pub abi_version: u64,
    /// CNTFRQ_EL0: the unit of every `ts` field.
    pub counter_hz: u64,
    pub trap_mode: TrapMode,
    /// The hypervisor's own memory (host physical), outside the guest's address space.
    pub hyp_start: u64,
    pub hyp_end: u64,
    /// Where the guest was entered and the device tree it got in x0 (guest addresses: the
    /// same on every host).
    pub guest_entry: u64,
    pub guest_dtb: u64,
    /// Guest run budget before the watchdog ends the run, in ms of counter time.
    pub watchdog_ms: u64,
    /// The PMU counts instructions (event 0x08), so phases report per-EL instruction counts.
    pub pmu_instructions: bool,
    /// MIDR_EL1 of the CPU: which machine ran (the host picks the rule it checks the trace
    /// against the PMU with: [`Boot::is_emulator`]).
    pub midr: u64,
    /// How the hypervisor was started: `mtex_platform::BootPath` as a number (1 `-kernel`
    /// with a device tree, 2 UEFI with a device tree, 3 UEFI with ACPI).
    pub boot_path: u8,
    /// Host physical address of the memory behind guest RAM (where firmware had room).
    pub guest_ram_pa: u64,
    /// The console UART the report stream came through (host physical).
    pub console: u64,
}

impl Boot {
    /// MIDR_EL1.Implementer 0x00 is "reserved for software use": QEMU's `-cpu max`. Silicon
    /// has a vendor there (0x41 Arm, 0xC0 Ampere...).
    pub fn is_emulator(&self) -> bool {
        (self.midr >> 24) & 0xff == 0
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PhaseBegin {
    pub id: u32,
    pub name: PhaseName,
    /// The (policy, workload) run this phase measures, when the guest said so.
    pub params: Option<crate::scenario::PhaseParams>,
    /// Counter value (CNTPCT_EL0).
    pub ts: u64,
    pub at: GuestState,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PhaseEnd {
    pub id: u32,
    pub ts: u64,
    pub at: GuestState,
    pub stats: PhaseStats,
}

/// What the hypervisor counted between a phase's begin and end hypercalls (both excluded
/// where the count is of guest events, included for EL2 instructions).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PhaseStats {
    /// Guest exits to EL2, single-step exits excluded.
    pub exits: u64,
    /// Single-step exits (traced phases).
    pub step_exits: u64,
    /// Of those, exits with the guest's PSTATE.TCO set.
    pub exits_with_tco: u64,
    /// Trapped system-register writes.
    pub sysreg_writes: u64,
    /// Virtual interrupts the hypervisor injected (the guest's timer ticks).
    pub virqs: u64,
    /// Instructions executed at EL2 / EL1 / EL0 (PMU event 0x08), when the PMU counts them.
    pub el2_instructions: Option<u64>,
    pub el1_instructions: Option<u64>,
    pub el0_instructions: Option<u64>,
    /// Of the EL2 instructions, those spent framing records that were queued during the
    /// phase (the trap path itself is the rest).
    pub el2_report_instructions: Option<u64>,
    /// The hypervisor's PMU counters were stopped, reprogrammed or overflowed during the
    /// phase: its instruction counts are withheld (None above), and this says why.
    pub pmu_disturbed: bool,
    /// Guest instructions the hypervisor emulated after a trap (system-register, PMU and
    /// debug-register accesses, WFI/WFE): they completed for the guest. (QEMU's PMU counts
    /// them as executed; silicon need not, as a trapped instruction is not architecturally
    /// executed: this is the difference to allow for.)
    pub emulated: u64,
    /// Of those, accesses to PMU registers and to debug registers, and WFI/WFE.
    pub guest_pmu_accesses: u64,
    pub guest_debug_accesses: u64,
    pub wfx_traps: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SysregWrite {
    pub reg: SysReg,
    /// Register value before the write.
    pub old: u64,
    /// Value written.
    pub new: u64,
    pub at: GuestState,
    pub ts: u64,
    /// Id of the phase open at the time, 0 if none.
    pub phase: u32,
}

/// How a guest call reached the hypervisor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Conduit {
    Hvc,
    Smc,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnknownCall {
    pub conduit: Conduit,
    /// The function ID in x0.
    pub function: u64,
    pub at: GuestState,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    /// Records sent before this one; sequence numbers run 0..records.
    pub records: u32,
    pub exit: ExitReason,
    pub ts: u64,
    /// Guest exits to EL2 over the whole run.
    pub exits: u64,
}

/// Why the run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ExitReason {
    /// The guest called EXIT with this status.
    GuestExit { status: u64 },
    /// The guest called PSCI SYSTEM_OFF.
    GuestSystemOff,
    /// The guest called PSCI SYSTEM_RESET (the run ends; mtex does not reboot guests).
    GuestSystemReset,
    /// The guest exited to EL2 in a way the hypervisor does not handle (e.g. a stage-2 fault
    /// on memory it does not own).
    UnhandledGuestExit {
        esr: u64,
        far: u64,
        hpfar: u64,
        at: GuestState,
    },
    /// The guest ran past its budget.
    Watchdog { budget_ms: u64, at: GuestState },
    /// The trace counter met guest code it cannot trace exactly (e.g. an exclusive-monitor
    /// retry loop under single-step) and ended the run rather than spin or guess.
    TraceUnsupported { at: GuestState, reason: Message },
    /// An exception was taken at EL2 itself: a hypervisor bug.
    HypException {
        vector: u8,
        esr: u64,
        elr: u64,
        far: u64,
    },
    /// The hypervisor panicked.
    HypPanic { message: Message },
    /// The hypervisor could not start the guest.
    BootFailed { reason: Message },
    /// The guest wrote memory that stage 2 keeps read-only while a guarded phase is open
    /// (`crate::hypercall::PHASE_GUARDED`: the harness's code and the guest's): at `far`,
    /// guest physical `ipa`, in that phase.
    ProtectedWrite {
        far: u64,
        ipa: u64,
        phase: u32,
        at: GuestState,
    },
}

impl ExitReason {
    /// True when the guest ended the run on purpose and said it succeeded.
    pub fn is_success(&self) -> bool {
        matches!(self, Self::GuestExit { status: 0 } | Self::GuestSystemOff)
    }
}
