//! Reading the report stream out of console text into a report a person or a script can use.
//! Damaged, missing and out-of-order records are listed as problems, never skipped silently.

use mtex_abi::Record;
use mtex_abi::frame;
use mtex_abi::report::{
    Boot, ExitReason, GuestState, PhasePmu, PhaseStats, PmuCount, PmuValue, Summary, TcoSite,
    TcoWatch, UnknownCall,
};
use mtex_arch::fields::changed_fields;
use mtex_trace::counts::TraceCounts;
use serde::Serialize;

/// One decoded MTE field change of a trapped write.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FieldChange {
    pub field: &'static str,
    pub old: &'static str,
    pub new: &'static str,
}

/// A trapped system-register write.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Write {
    pub seq: u32,
    pub register: &'static str,
    pub old: u64,
    pub new: u64,
    pub changes: Vec<FieldChange>,
    pub at: GuestState,
    pub ts: u64,
    /// Name of the phase it happened in, if any.
    pub phase: Option<String>,
}

/// A phase as begun and (if it was) ended.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Phase {
    pub id: u32,
    pub name: String,
    /// The (policy, workload) run of the kernel scenario this phase measured.
    pub params: Option<mtex_abi::scenario::PhaseParams>,
    pub begin_ts: u64,
    pub begin: GuestState,
    pub end_ts: Option<u64>,
    pub end: Option<GuestState>,
    /// The guest's own clock (its virtual counter: the hypervisor's time left out) at the
    /// phase's begin and end, where the hypervisor recorded it.
    pub begin_guest_clock: Option<u64>,
    pub end_guest_clock: Option<u64>,
    pub stats: Option<PhaseStats>,
    /// Counts of the trace counter, for a traced phase.
    pub trace: Option<TraceCounts>,
    /// Where the guest wrote PSTATE.TCO in a traced phase.
    pub tco_sites: Vec<TcoSite>,
    /// The PMU backend's record of the phase: its run, its pass and what it counted.
    pub pmu_record: Option<PhasePmu>,
    /// How the phase (an untraced pass) watched the guest's MSR TCO sites.
    pub tco_watch: Option<TcoWatch>,
    /// The untraced passes of the phase's run (a run of several phases is shown as its last:
    /// the traced one, or the first pass of a run that is not traced).
    pub untraced: Option<Untraced>,
    /// The oracle's check of its trace, for a run with the oracle (`crate::oracle_check`).
    pub oracle: Option<crate::oracle_check::Check>,
}

/// A run's untraced passes: what the PMU backend counted at full speed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Untraced {
    /// Passes the run's events needed.
    pub passes: u8,
    /// The passes that ran, in order.
    pub runs: Vec<UntracedPass>,
}

/// One untraced pass.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct UntracedPass {
    pub id: u32,
    pub begin_ts: u64,
    pub end_ts: Option<u64>,
    pub stats: Option<PhaseStats>,
    pub counts: Vec<PmuCount>,
    /// A pass of the TCO watch: its record and the sites it saw written.
    pub tco_watch: Option<TcoWatch>,
    pub tco_sites: Vec<TcoSite>,
}

/// What the TCO watch passes of a run saw together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcoTotal {
    /// MSR TCO executions at the watched sites, EL0 and EL1.
    pub writes_el0: u64,
    pub writes_el1: u64,
    /// Sites the scan found, and how many the passes watched.
    pub sites: u32,
    pub watched: u32,
    /// Sites never watched (past the scan's limits), and passes whose watch was lost (a
    /// watched site rewritten, or the sites moved since the first pass).
    pub unwatched: u32,
    pub lost: u32,
}

impl TcoTotal {
    /// Every site was watched to the end: the writes are the run's total.
    pub fn complete(&self) -> bool {
        self.watched == self.sites && self.unwatched == 0 && self.lost == 0
    }
}

impl Untraced {
    /// The figure of `event` at `el` (raw: named by the run), from whichever pass counted it.
    pub fn get(&self, event: u16, el: u8, raw: bool) -> Option<PmuValue> {
        self.runs
            .iter()
            .flat_map(|p| &p.counts)
            .find(|c| c.event == event && c.el == el && c.raw == raw)
            .map(|c| c.value)
    }

    /// What the run's TCO watch passes saw, if it had any.
    pub fn tco(&self) -> Option<TcoTotal> {
        let mut watches = self.runs.iter().filter_map(|p| p.tco_watch).peekable();
        let first = *watches.peek()?;
        let mut t = TcoTotal {
            writes_el0: 0,
            writes_el1: 0,
            sites: first.sites,
            watched: 0,
            unwatched: first.unwatched,
            lost: 0,
        };
        for w in watches {
            t.writes_el0 += w.writes_el0;
            t.writes_el1 += w.writes_el1;
            t.watched += w.watched;
            t.lost += (w.lost || w.moved) as u32;
        }
        Some(t)
    }

    /// Instructions at EL2, EL1, EL0 of the first pass (the hypervisor's fixed counters).
    pub fn instructions(&self) -> [Option<u64>; 3] {
        let s = self.runs.first().and_then(|p| p.stats);
        [
            s.and_then(|s| s.el2_instructions),
            s.and_then(|s| s.el1_instructions),
            s.and_then(|s| s.el0_instructions),
        ]
    }
}

impl Phase {
    /// What the PMU backend counted of `event` at `el` (1 kernel, 0 user) in the phase's run
    /// at full speed; None when it was never asked.
    pub fn pmu(&self, event: u16, el: u8) -> Option<PmuValue> {
        let u = self.untraced.as_ref()?;
        u.get(event, el, false).or_else(|| u.get(event, el, true))
    }
}

/// Everything one run reported.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Report {
    pub boot: Option<Boot>,
    pub phases: Vec<Phase>,
    pub writes: Vec<Write>,
    pub console: Vec<String>,
    pub unknown_calls: Vec<UnknownCall>,
    /// The guest's debug-register writes, kept in its shadow (never reaching the hardware).
    pub debug_writes: Vec<mtex_abi::report::DebugWrite>,
    /// How the step engine ran each traced phase (by phase id).
    pub engines: Vec<mtex_abi::report::StepEngine>,
    pub summary: Option<Summary>,
    /// Records that were damaged, missing or unexpected, and a missing summary.
    pub problems: Vec<String>,
    /// Damage that touched no record (bytes that were not UTF-8 in text outside records):
    /// shown, but the run still counts.
    pub notes: Vec<String>,
    /// Console text that was not a record (firmware, QEMU messages).
    pub other_output: Vec<String>,
}

impl Report {
    /// True when the guest ended the run on purpose, said it succeeded, and every record
    /// arrived intact.
    pub fn succeeded(&self) -> bool {
        self.problems.is_empty() && self.summary.is_some_and(|s| s.exit.is_success())
    }

    /// The phase with this name.
    pub fn phase(&self, name: &str) -> Option<&Phase> {
        self.phases.iter().find(|p| p.name == name)
    }

    fn phase_name(&self, id: u32) -> Option<String> {
        self.phases
            .iter()
            .rev()
            .find(|p| p.id == id)
            .map(|p| p.name.clone())
    }
}

/// A guest call's name, by its function ID: mtex's calls and PSCI's that end the run.
pub fn call_name(function: u64) -> String {
    use mtex_abi::hypercall as hc;
    let known = [
        (hc::VERSION, "VERSION"),
        (hc::PHASE_BEGIN, "PHASE_BEGIN"),
        (hc::PHASE_END, "PHASE_END"),
        (hc::CONSOLE_WRITE, "CONSOLE_WRITE"),
        (hc::EXIT, "EXIT"),
        (0x8400_0008, "PSCI SYSTEM_OFF"),
        (0x8400_0009, "PSCI SYSTEM_RESET"),
        (0x8400_0012, "PSCI SYSTEM_RESET2"),
        (0xc400_0012, "PSCI SYSTEM_RESET2"),
    ];
    match known.iter().find(|(id, _)| u64::from(*id) == function) {
        Some((_, name)) => format!("{name} ({function:#x})"),
        None => format!("{function:#x}"),
    }
}

/// Parses the console text of a run.
pub fn parse(text: &str) -> Report {
    parse_bytes(text.as_bytes())
}

/// Parses the console output of a run as it came, bytes that are not UTF-8 included. Total:
/// any input gives a report, and any damage to a record is listed in its problems.
pub fn parse_bytes(bytes: &[u8]) -> Report {
    let mut r = Report::default();
    // Sequence numbers as u64, so that nothing wraps whatever a damaged stream holds.
    let mut next_seq: u64 = 0;
    let mut seen = std::collections::HashSet::new();
    // Records before the summary, and the summary's own sequence number.
    let mut at_summary: Option<(u64, u64)> = None;
    let mut last_end = 0;
    // Where the frames were, to tell which bytes that are not UTF-8 hit a record's line.
    let mut spans = Vec::new();
    for found in frame::scan_bytes(bytes) {
        collect_other(
            &mut r,
            bytes.get(last_end..found.offset).unwrap_or_default(),
        );
        last_end = found.end.max(last_end);
        spans.push((found.offset, found.end));
        let (seq, record) = match found.result {
            Ok(ok) => ok,
            Err(e) => {
                let after = match next_seq {
                    0 => "before any record".to_string(),
                    n => format!("after record {}", n - 1),
                };
                r.problems.push(format!(
                    "damaged record at byte {} ({after}): {e:?}",
                    found.offset
                ));
                continue;
            }
        };
        let seq64 = u64::from(seq);
        if r.summary.is_some() {
            r.problems.push(format!("record {seq} after the summary"));
        }
        if seq64 >= next_seq {
            if seq64 > next_seq {
                r.problems
                    .push(format!("records {next_seq}..{} missing", seq64 - 1));
            }
            next_seq = seq64 + 1;
        } else if seen.contains(&seq) {
            // Applying it again would count it twice.
            r.problems
                .push(format!("record {seq} repeated (expected {next_seq})"));
            continue;
        } else {
            r.problems
                .push(format!("record {seq} out of order (expected {next_seq})"));
        }
        seen.insert(seq);
        if matches!(record, Record::Summary(_)) {
            at_summary = Some((seen.len() as u64 - 1, seq64));
        }
        apply(&mut r, seq, record);
    }
    collect_other(&mut r, bytes.get(last_end..).unwrap_or_default());
    // The UEFI loader speaks before any record exists: its errors are why a run never began.
    let loader_errors: Vec<String> = r
        .other_output
        .iter()
        .filter_map(|l| {
            l.split_once(LOADER_ERROR)
                .map(|(_, why)| why.trim().to_string())
        })
        .map(|why| format!("the UEFI loader stopped: {why}"))
        .collect();
    r.problems.extend(loader_errors);
    match (r.summary, at_summary) {
        (Some(s), Some((before, seq))) if u64::from(s.records) != before || before != seq => {
            r.problems.push(format!(
                "the summary counts {} records before it, {before} arrived (it is record {seq})",
                s.records
            ))
        }
        (Some(_), _) => {}
        (None, _) => r
            .problems
            .push("no summary record: the run did not finish (report truncated)".to_string()),
    }
    not_utf8(&mut r, bytes, &spans);
    fold_runs(&mut r);
    check_figures(&mut r);
    r
}

/// How the UEFI loader (loader/) starts an error line on the console.
pub const LOADER_ERROR: &str = "mtex-loader: error: ";

/// Where the guest was when the run ended, when the ending says.
fn stopped_at(e: &ExitReason) -> Option<GuestState> {
    match *e {
        ExitReason::UnhandledGuestExit { at, .. }
        | ExitReason::Watchdog { at, .. }
        | ExitReason::TraceUnsupported { at, .. } => Some(at),
        _ => None,
    }
}

/// Lists every figure the run cannot vouch for: a phase that never ended, PMU counts that
/// were withheld or disagree with the trace, trace counts that are not exact. Each makes the
/// run fail: nothing is wrong silently.
fn check_figures(r: &mut Report) {
    let mut problems = Vec::new();
    for p in &r.phases {
        let name = format!("phase {} ({})", p.id, p.name);
        if p.stats.is_none() {
            // What the counts reach up to (traced), and how the phase was left (untraced).
            let (upto, end) = match r.summary.map(|s| s.exit) {
                Some(e) => match stopped_at(&e) {
                    Some(at) => {
                        let at = format!("at pc {:#x} EL{}", at.pc, at.el);
                        (format!("where it stopped {at}"), format!("it stopped {at}"))
                    }
                    None => {
                        let how = describe_exit(&e);
                        (
                            format!("the end of the run ({how})"),
                            format!("the run ended: {how}"),
                        )
                    }
                },
                None => (
                    "where the report was cut off".to_string(),
                    "the report was cut off".to_string(),
                ),
            };
            problems.push(if p.trace.is_some() {
                format!("{name} never ended: counts up to {upto} (partial)")
            } else {
                format!("{name} never ended: no counts (untraced); {end}")
            });
        }
        if let Some(u) = &p.untraced {
            untraced_problems(&name, u, &mut problems, &mut r.notes);
        }
        // The traced phase's own MTE counts (silicon beside the model): withheld is a problem.
        let withheld: Vec<String> = p
            .pmu_record
            .filter(|m| m.pass == 0)
            .iter()
            .flat_map(|m| m.counts.iter().flatten().copied())
            .filter(|c| c.value == PmuValue::Withheld)
            .map(|c| pmu_count_name(&c))
            .collect();
        if !withheld.is_empty() {
            problems.push(format!(
                "{name}: the hypervisor's PMU counters were disturbed in the traced phase; withheld: {}",
                withheld.join(", ")
            ));
        }
        if let Some(t) = &p.trace {
            if t.runs_lost > 0 {
                problems.push(format!(
                    "{name}: {} breakpoint runs ended where the plan did not know: their instructions and accesses are not counted (counts not exact)",
                    t.runs_lost
                ));
            }
            if t.unknown_mem > 0 {
                problems.push(format!(
                    "{name}: {} load/store instructions the decoder does not model: not judged (access counts not exact)",
                    t.unknown_mem
                ));
            }
            if t.unexpected_tag_check_faults > 0 {
                problems.push(format!(
                    "{name}: the CPU took {} tag-check faults on accesses the model judged unchecked: the model and the CPU disagree (checked counts in doubt)",
                    t.unexpected_tag_check_faults
                ));
            }
        }
        let Some(s) = &p.stats else { continue };
        if s.pmu_disturbed {
            problems.push(format!(
                "{name}: the hypervisor's PMU counters were disturbed; its instruction counts are withheld"
            ));
            continue;
        }
        // Lost runs are already listed: the trace's instruction counts are short by them.
        if let Some(t) = p.trace.filter(|t| t.runs_lost == 0) {
            // No Boot record (a damaged stream, already a problem): QEMU's rule, the measured one.
            let emulator = r.boot.is_none_or(|b| b.is_emulator());
            let engine = r.engines.iter().rev().find(|e| e.id == p.id).copied();
            problems.extend(pmu_mismatches(
                &name,
                s,
                &t,
                engine.unwrap_or_default(),
                emulator,
            ));
        }
    }
    r.problems.extend(problems);
}

/// What a run's untraced passes leave in doubt: passes the guest never ran (their events
/// are not counted), and withheld counts, are problems; passes that executed different
/// instruction counts (interrupts land where they land) are a note, since each event's
/// figure is still its own pass's exact count.
fn untraced_problems(
    name: &str,
    u: &Untraced,
    problems: &mut Vec<String>,
    notes: &mut Vec<String>,
) {
    if (u.runs.len() as u64) < u64::from(u.passes) {
        problems.push(format!(
            "{name}: the PMU backend needed {} untraced passes for its events, the guest ran {}: the events of the others are not counted",
            u.passes,
            u.runs.len()
        ));
    }
    let withheld: Vec<String> = u
        .runs
        .iter()
        .flat_map(|p| &p.counts)
        .filter(|c| c.value == PmuValue::Withheld)
        .map(pmu_count_name)
        .collect();
    if !withheld.is_empty() {
        problems.push(format!(
            "{name}: the hypervisor's PMU counters were disturbed in an untraced pass; withheld: {}",
            withheld.join(", ")
        ));
    }
    let counts = || u.runs.iter().flat_map(|p| &p.counts);
    let raw_unchecked: Vec<String> = counts()
        .filter(|c| c.raw && !mtex_abi::report::pmu_event::described_by_pmceid(c.event))
        .filter(|c| matches!(c.value, PmuValue::Counted(_)))
        .map(pmu_count_name)
        .collect();
    if !raw_unchecked.is_empty() {
        notes.push(format!(
            "{name}: {} are IMPLEMENTATION DEFINED events PMCEID cannot describe: counted as the CPU reports them (a CPU without one may count 0)",
            raw_unchecked.join(", ")
        ));
    }
    let uncounted: Vec<String> = counts()
        .filter(|c| c.value == PmuValue::NotCounted)
        .map(pmu_count_name)
        .collect();
    if !uncounted.is_empty() {
        notes.push(format!(
            "{name}: not counted (the guest does not repeat its work, and one pass had no counter left): {}",
            uncounted.join(", ")
        ));
    }
    if let Some(t) = u.tco().filter(|t| !t.complete()) {
        problems.push(format!(
            "{name}: the TCO watch saw {} of {} MSR TCO sites ({} never watched, {} passes lost to rewritten or moved code): its {} writes are not the run's total",
            t.watched,
            t.sites,
            t.unwatched,
            t.lost,
            t.writes_el0 + t.writes_el1
        ));
    }
    // A TCO watch pass emulated its MSR TCOs (the PMU did not count them): added back.
    let instr = |p: &UntracedPass| {
        let (w1, w0) = p.tco_watch.map_or((0, 0), |w| (w.writes_el1, w.writes_el0));
        p.stats.map(|s| {
            (
                s.el1_instructions.map(|n| n + w1),
                s.el0_instructions.map(|n| n + w0),
            )
        })
    };
    if let Some(first) = u.runs.first().and_then(instr)
        && let Some(other) = u
            .runs
            .iter()
            .skip(1)
            .filter_map(instr)
            .find(|i| *i != first)
    {
        notes.push(format!(
            "{name}: untraced passes executed different instruction counts (EL1, EL0: {first:?} and {other:?}); each event's figure is its own pass's"
        ));
    }
}

/// `mem_access_checked_rd:k`, `raw.0x0013:u`: a PMU figure's name as the report shows it.
pub fn pmu_count_name(c: &PmuCount) -> String {
    let el = if c.el == 1 { "k" } else { "u" };
    match mtex_abi::report::pmu_event::name(c.event) {
        Some(n) if !c.raw => format!("{n}:{el}"),
        _ => format!("raw.{:#06x}:{el}", c.event),
    }
}

/// The trace against the PMU, per EL, on a traced phase where the PMU counted: the two count
/// the same instructions independently (the trace by retiring each step, the PMU by event
/// 0x08 filtered to the EL), so any difference is a fault in one of them.
///
/// Measured on QEMU 10.0 (`-icount shift=0`) on every traced phase of every guest program,
/// with and without breakpoint runs (`mtex.runs=1`): the kernel matrix (56 phases, also at
/// `hz=20000` with interrupts from EL0 and EL1), trace, el0, controls, addresses, differential
/// (tag-check faults taken at EL1) and the hostile programs:
/// - EL0: PMU = trace, exactly.
/// - EL1: PMU = trace + kernel entries (`entries.total()`), exactly: with single-step pending,
///   QEMU's exception entry goes through a step stub that its PMU counts as one EL1
///   instruction (getpid: 4848 traced, 4881 counted, 33 entries; memcached: 73009, 73100, 91;
///   fork-pgtable at the tick that landed: 224619, 224633, 13 system calls and 1 IRQ).
/// - Instructions that trapped to EL2 and were emulated (`emulated`: PMU, debug-register and
///   ID-register accesses, WFI/WFE) are counted by QEMU's PMU as the trace counts them.
/// - An instruction abandoned to an exception it raised itself, taken to EL1 (an undefined
///   instruction, a system register access Linux emulates: `trapped_el*`), is counted by
///   QEMU's PMU, which raises it from the translated code; one abandoned to a data abort is
///   not (measured: a window around `exec true`, glibc's MIDR_EL1 read emulated by Linux,
///   22,081 at EL0 for the trace's 22,080; every page fault of the fork windows, exact).
///   QEMU raises some such traps from a helper instead (a register with an access check, such
///   as CTR_EL0 with SCTLR_EL1.UCT clear): if its PMU does not count those, a window with one
///   shows a difference, a problem, never a silent figure.
///
/// On silicon (the Boot record's MIDR_EL1 names a vendor) there is no step stub, and an
/// instruction that trapped to EL2 is not architecturally executed, so INST_RETIRED does not
/// count it: the architecture's relation is PMU EL1 = trace EL1 - emulated (the emulated
/// instructions are the guest kernel's; not yet measured on hardware).
///
/// Direct branches the step engine executed for the guest at the end of a run
/// (`StepEngine::branches_el*`) are in the trace's count but were never executed by the CPU,
/// so they are taken out of the expected PMU count on every machine.
fn pmu_mismatches(
    name: &str,
    s: &PhaseStats,
    t: &TraceCounts,
    engine: mtex_abi::report::StepEngine,
    emulator: bool,
) -> Vec<String> {
    let mut out = Vec::new();
    let [expected_el1, expected_el0] = pmu_expected(s, t, engine, emulator);
    // Only entries taken while stepping go through QEMU's step stub.
    let entries = t.entries.total().saturating_sub(engine.entries_in_runs);
    if let Some(pmu) = s.el1_instructions {
        let expected = expected_el1;
        let why = if emulator {
            format!(
                "the trace's count less {} branches the hypervisor executed, and one per kernel entry taken while stepping, {entries}, QEMU's step stub, and {} abandoned to a trap they raised",
                engine.branches_el1, t.trapped_el1
            )
        } else {
            format!(
                "the trace's count less {} branches the hypervisor executed and the {} trapped and emulated, which the architecture does not count as executed",
                engine.branches_el1, s.emulated
            )
        };
        if pmu != expected {
            out.push(format!(
                "{name}: trace counted {} EL1 instructions, the PMU {pmu} (expected {expected}: {why})",
                t.instructions_el1
            ));
        }
    }
    if let Some(pmu) = s.el0_instructions
        && pmu != expected_el0
    {
        let branches = match (engine.branches_el0, emulator.then_some(t.trapped_el0)) {
            (0, None | Some(0)) => String::new(),
            (n, Some(k)) if k > 0 => format!(
                " ({n} of them branches the hypervisor executed; {k} more abandoned to a trap they raised, which QEMU's PMU counts)"
            ),
            (n, _) => format!(" ({n} of them branches the hypervisor executed)"),
        };
        out.push(format!(
            "{name}: trace counted {} EL0 instructions{branches}, the PMU {pmu}",
            t.instructions_el0
        ));
    }
    out
}

/// The instructions the PMU should have counted at EL1 and EL0 in a traced phase with
/// figures `s`, trace `t` and step engine record `engine` (the rules above).
pub fn pmu_expected(
    s: &PhaseStats,
    t: &TraceCounts,
    engine: mtex_abi::report::StepEngine,
    emulator: bool,
) -> [u64; 2] {
    let el1 = t.instructions_el1.saturating_sub(engine.branches_el1);
    let el1 = if emulator {
        el1 + t.entries.total().saturating_sub(engine.entries_in_runs) + t.trapped_el1
    } else {
        el1.saturating_sub(s.emulated)
    };
    let el0 = t.instructions_el0.saturating_sub(engine.branches_el0);
    let el0 = if emulator { el0 + t.trapped_el0 } else { el0 };
    [el1, el0]
}

impl Report {
    /// [`pmu_expected`] for phase `p` of this report: what its PMU should count at EL1 and
    /// EL0 given its trace, or None for a phase without a trace or figures.
    pub fn pmu_expected(&self, p: &Phase) -> Option<[u64; 2]> {
        let engine = self.engines.iter().rev().find(|e| e.id == p.id).copied();
        let emulator = self.boot.is_none_or(|b| b.is_emulator());
        Some(pmu_expected(
            p.stats.as_ref()?,
            p.trace.as_ref()?,
            engine.unwrap_or_default(),
            emulator,
        ))
    }
}

/// Lists bytes that are not UTF-8: a problem when they sit on a line that holds a record (the
/// record may be damaged), a note elsewhere. `spans` are the frames' byte ranges, in order.
fn not_utf8(r: &mut Report, bytes: &[u8], spans: &[(usize, usize)]) {
    // (bytes, first offset) on record lines and elsewhere.
    let mut hit: (usize, Option<usize>) = (0, None);
    let mut other: (usize, Option<usize>) = (0, None);
    let mut at = 0;
    // The line of the last bad bytes, and whether it holds a frame.
    let mut line: Option<(usize, usize, bool)> = None;
    for chunk in bytes.utf8_chunks() {
        at += chunk.valid().len();
        let bad = chunk.invalid().len();
        if bad == 0 {
            continue;
        }
        let on_record_line = match line {
            Some((_, end, framed)) if at < end => framed,
            _ => {
                let start = bytes[..at]
                    .iter()
                    .rposition(|&b| b == b'\n')
                    .map_or(0, |n| n + 1);
                let end = bytes[at..]
                    .iter()
                    .position(|&b| b == b'\n')
                    .map_or(bytes.len(), |n| at + n);
                // The first frame ending after the line starts: does it begin before it ends?
                let i = spans.partition_point(|&(_, e)| e <= start);
                let framed = spans.get(i).is_some_and(|&(o, _)| o < end);
                line = Some((start, end, framed));
                framed
            }
        };
        let tally = if on_record_line { &mut hit } else { &mut other };
        tally.0 += bad;
        tally.1.get_or_insert(at);
        at += bad;
    }
    if let (n @ 1.., Some(first)) = hit {
        r.problems.push(format!(
            "console: {n} bytes were not UTF-8 on lines holding records (first at byte {first}): those records may be damaged"
        ));
    }
    if let (n @ 1.., Some(first)) = other {
        r.notes.push(format!(
            "console: {n} bytes were not UTF-8 in text outside records (first at byte {first}), shown as U+FFFD"
        ));
    }
}

fn collect_other(r: &mut Report, bytes: &[u8]) {
    r.other_output.extend(
        String::from_utf8_lossy(bytes)
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(String::from),
    );
}

fn apply(r: &mut Report, seq: u32, record: Record) {
    match record {
        Record::Boot(b) => r.boot = Some(b),
        Record::PhaseBegin(p) => r.phases.push(Phase {
            id: p.id,
            name: p.name.as_str().to_string(),
            params: p.params,
            begin_ts: p.ts,
            begin: p.at,
            end_ts: None,
            end: None,
            ..Phase::default()
        }),
        Record::PhaseEnd(e) => match r.phases.iter_mut().rev().find(|p| p.id == e.id) {
            Some(p) if p.stats.is_none() => {
                p.end_ts = Some(e.ts);
                p.end = Some(e.at);
                p.stats = Some(e.stats);
            }
            _ => r.problems.push(format!(
                "record {seq}: end of phase {} that was not open",
                e.id
            )),
        },
        Record::SysregWrite(w) => {
            let phase = if w.phase == 0 {
                None
            } else {
                r.phase_name(w.phase)
            };
            r.writes.push(Write {
                seq,
                register: w.reg.name(),
                old: w.old,
                new: w.new,
                changes: changed_fields(w.reg, w.old, w.new)
                    .map(|c| FieldChange {
                        field: c.field.name,
                        old: c.field.value_name(c.old),
                        new: c.field.value_name(c.new),
                    })
                    .collect(),
                at: w.at,
                ts: w.ts,
                phase,
            });
        }
        Record::PhaseTrace(t) => match r.phases.iter_mut().rev().find(|p| p.id == t.id) {
            Some(p) if p.trace.is_none() => p.trace = Some(t.counts),
            _ => r.problems.push(format!(
                "record {seq}: trace of phase {} that was not open",
                t.id
            )),
        },
        Record::PhaseClock(c) => match r.phases.iter_mut().rev().find(|p| p.id == c.id) {
            Some(p) if p.stats.is_none() => {
                *(if c.end {
                    &mut p.end_guest_clock
                } else {
                    &mut p.begin_guest_clock
                }) = Some(c.guest_clock)
            }
            _ => r.problems.push(format!(
                "record {seq}: guest clock of phase {} that was not open",
                c.id
            )),
        },
        Record::TraceMore(a) => match r
            .phases
            .iter_mut()
            .rev()
            .find(|p| p.id == a.id)
            .and_then(|p| p.trace.as_mut())
        {
            Some(t) => {
                (t.abandoned_el0, t.abandoned_el1) = (a.abandoned_el0, a.abandoned_el1);
                (t.trapped_el0, t.trapped_el1) = (a.trapped_el0, a.trapped_el1);
            }
            None => r.problems.push(format!(
                "record {seq}: more trace counts of phase {} that has no trace",
                a.id
            )),
        },
        Record::TcoSite(s) => match r.phases.iter_mut().rev().find(|p| p.id == s.phase) {
            Some(p) => p.tco_sites.push(s),
            None => r.problems.push(format!(
                "record {seq}: TCO site of unknown phase {}",
                s.phase
            )),
        },
        Record::Console(t) => r.console.push(t.as_str().to_string()),
        Record::UnknownCall(c) => r.unknown_calls.push(c),
        // A workload's mistake with the doorbell: the window it meant is not what ran.
        Record::DoorbellRefused(d) => r.problems.push(format!(
            "doorbell store of {:#x} at offset {:#x} refused ({}) at pc {:#x} EL{}{}",
            d.value,
            d.offset,
            d.why.describe(),
            d.at.pc,
            d.at.el,
            if d.open != 0 {
                format!(", window {} open", d.open)
            } else {
                String::new()
            }
        )),
        // Code inside a guarded phase (a snippet) tried to end it, open another or end the
        // run: refused, and the run cannot be taken as it would have been.
        Record::CallRefused(c) => r.problems.push(format!(
            "{} call {} by the code at pc {:#x} EL{} refused: while phase {} is open only its \
             harness may make calls",
            match c.conduit {
                mtex_abi::report::Conduit::Hvc => "HVC",
                mtex_abi::report::Conduit::Smc => "SMC",
            },
            call_name(c.function),
            c.at.pc.wrapping_sub(4),
            c.at.el,
            c.phase
        )),
        Record::DebugWrite(w) => r.debug_writes.push(w),
        Record::Summary(s) => r.summary = Some(s),
        Record::StepEngine(e) => r.engines.push(e),
        Record::TcoWatch(w) => match r.phases.iter_mut().rev().find(|p| p.id == w.id) {
            Some(p) if p.tco_watch.is_none() => p.tco_watch = Some(w),
            _ => r.problems.push(format!(
                "record {seq}: TCO watch of phase {} that was not open",
                w.id
            )),
        },
        Record::PhasePmu(m) => match r.phases.iter_mut().rev().find(|p| p.id == m.id) {
            Some(p) if p.pmu_record.is_none() => p.pmu_record = Some(m),
            _ => r.problems.push(format!(
                "record {seq}: PMU figures of phase {} that was not open",
                m.id
            )),
        },
    }
}

/// Folds each run's phases into one: its untraced passes go into `untraced` of the phase
/// that stands for the run (its traced phase; or its first pass when it is not traced), and
/// only that phase stays in `phases`. Runs are told apart by the hypervisor's serial number,
/// whatever ids the guest gave; phases without a PMU record (older logs) stay as they are.
fn fold_runs(r: &mut Report) {
    use std::collections::{BTreeMap, HashSet};
    let mut passes: BTreeMap<u32, Untraced> = BTreeMap::new();
    for p in &r.phases {
        let Some(m) = p.pmu_record.filter(|m| m.pass > 0) else {
            continue;
        };
        let u = passes.entry(m.run).or_insert_with(|| Untraced {
            passes: m.passes,
            runs: Vec::new(),
        });
        u.runs.push(UntracedPass {
            id: p.id,
            begin_ts: p.begin_ts,
            end_ts: p.end_ts,
            stats: p.stats,
            counts: m.counts.iter().flatten().copied().collect(),
            tco_watch: p.tco_watch,
            tco_sites: if p.tco_watch.is_some() {
                p.tco_sites.clone()
            } else {
                Vec::new()
            },
        });
    }
    let traced: HashSet<u32> = r
        .phases
        .iter()
        .filter_map(|p| p.pmu_record.filter(|m| m.pass == 0).map(|m| m.run))
        .collect();
    r.phases.retain_mut(|p| {
        let Some(m) = p.pmu_record else {
            return true;
        };
        let stands_for_run = m.pass == 0 || (m.pass == 1 && !traced.contains(&m.run));
        if stands_for_run {
            p.untraced = passes.remove(&m.run);
        }
        stands_for_run
    });
}

/// One line saying how the run ended.
pub fn describe_exit(e: &ExitReason) -> String {
    match *e {
        ExitReason::GuestExit { status } => format!("guest exited with status {status}"),
        ExitReason::GuestSystemOff => "guest called PSCI SYSTEM_OFF".into(),
        ExitReason::GuestSystemReset => "guest called PSCI SYSTEM_RESET".into(),
        ExitReason::UnhandledGuestExit {
            esr,
            far,
            hpfar,
            at,
        } => format!(
            "unhandled guest exit: {} (EC {:#04x}) ESR_EL2={esr:#x} ELR={:#x} EL{} FAR={far:#x} IPA={hpfar:#x}",
            mtex_arch::Esr(esr).ec().name(),
            mtex_arch::Esr(esr).ec_bits(),
            at.pc,
            at.el
        ),
        ExitReason::Watchdog { budget_ms, at } => format!(
            "watchdog: the guest ran past its {budget_ms} ms budget (at pc {:#x}, EL{})",
            at.pc, at.el
        ),
        ExitReason::HypException {
            vector,
            esr,
            elr,
            far,
        } => format!(
            "hypervisor exception: vector {vector} ESR_EL2={esr:#x} ELR_EL2={elr:#x} FAR_EL2={far:#x}"
        ),
        ExitReason::HypPanic { message } => format!("hypervisor panic: {message}"),
        ExitReason::TraceUnsupported { at, reason } => {
            format!("trace stopped at pc {:#x} (EL{}): {reason}", at.pc, at.el)
        }
        ExitReason::BootFailed { reason } => format!("boot failed: {reason}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mtex_abi::ShortStr;
    use mtex_abi::report::{SysregWrite, TrapMode};
    use mtex_arch::SysReg;

    fn frame(seq: u32, r: Record) -> String {
        let mut buf = [0u8; frame::MAX_TEXT];
        frame::encode(seq, &r, &mut buf).unwrap().to_string()
    }

    fn summary(records: u32) -> Record {
        Record::Summary(Summary {
            records,
            exit: ExitReason::GuestExit { status: 0 },
            ts: 0,
            exits: 0,
        })
    }

    fn write(old: u64, new: u64) -> Record {
        Record::SysregWrite(SysregWrite {
            reg: SysReg::SctlrEl1,
            old,
            new,
            at: GuestState::default(),
            ts: 1,
            phase: 0,
        })
    }

    /// The records of one phase: begin, PMU record (run, pass, passes, counts), end with
    /// `instructions` at EL1 and EL0.
    fn pmu_phase(
        id: u32,
        run: u32,
        pass: u8,
        passes: u8,
        counts: &[(u16, u8, PmuValue)],
        instructions: [u64; 2],
    ) -> Vec<Record> {
        let mut c = [None; mtex_abi::report::PMU_COUNTS];
        for (slot, &(event, el, value)) in c.iter_mut().zip(counts) {
            *slot = Some(PmuCount {
                event,
                el,
                raw: false,
                value,
            });
        }
        let stats = PhaseStats {
            el1_instructions: Some(instructions[0]),
            el0_instructions: Some(instructions[1]),
            ..PhaseStats::default()
        };
        vec![
            Record::PhaseBegin(mtex_abi::report::PhaseBegin {
                id,
                name: ShortStr::truncated("getpid"),
                params: None,
                ts: u64::from(id) * 10,
                at: GuestState::default(),
            }),
            Record::PhasePmu(PhasePmu {
                id,
                run,
                pass,
                passes,
                counts: c,
            }),
            Record::PhaseEnd(mtex_abi::report::PhaseEnd {
                id,
                ts: u64::from(id) * 10 + 5,
                at: GuestState::default(),
                stats,
            }),
        ]
    }

    fn stream(records: Vec<Record>) -> String {
        let n = records.len() as u32;
        records
            .into_iter()
            .chain([summary(n)])
            .enumerate()
            .map(|(i, r)| frame(i as u32, r))
            .collect()
    }

    #[test]
    fn more_trace_counts_join_their_phases_trace_and_a_stray_record_is_a_problem() {
        let abandoned = |id, el0, el1| {
            Record::TraceMore(mtex_abi::report::TraceMore {
                id,
                abandoned_el0: el0,
                abandoned_el1: el1,
                trapped_el0: 1,
                trapped_el1: 2,
            })
        };
        let r = parse(&stream(vec![
            begin(4, "w"),
            traced(4, TraceCounts::default()),
            abandoned(4, 2, 3),
            abandoned(9, 1, 1),
        ]));
        let t = r.phases[0].trace.expect("trace");
        assert_eq!((t.abandoned_el0, t.abandoned_el1), (2, 3));
        assert_eq!((t.trapped_el0, t.trapped_el1), (1, 2));
        assert!(
            r.problems
                .iter()
                .any(|p| p.contains("phase 9 that has no trace")),
            "{:?}",
            r.problems
        );
    }

    #[test]
    fn a_runs_passes_fold_into_its_traced_phase() {
        use PmuValue::{Counted, NotSupported};
        let cycles = mtex_abi::report::pmu_event::CPU_CYCLES;
        let rd = mtex_abi::report::pmu_event::MEM_ACCESS_CHECKED_RD;
        let records = [
            // Run 1: two untraced passes, then traced.
            pmu_phase(
                1,
                1,
                1,
                2,
                &[(cycles, 1, Counted(900)), (rd, 1, NotSupported)],
                [900, 40],
            ),
            pmu_phase(2, 1, 2, 2, &[(0x13, 1, Counted(7))], [900, 40]),
            pmu_phase(3, 1, 0, 2, &[], [930, 40]),
            // Run 4: untraced only, one pass.
            pmu_phase(4, 4, 1, 1, &[(cycles, 0, Counted(50))], [10, 50]),
        ]
        .concat();
        let r = parse(&stream(records));
        assert!(r.succeeded(), "{:?}", r.problems);
        let ids: Vec<u32> = r.phases.iter().map(|p| p.id).collect();
        assert_eq!(
            ids,
            [3, 4],
            "each run shows as its traced phase, or its first pass"
        );
        let traced = &r.phases[0];
        let u = traced.untraced.as_ref().unwrap();
        assert_eq!((u.passes, u.runs.len()), (2, 2));
        assert_eq!(u.instructions(), [None, Some(900), Some(40)]);
        assert_eq!(traced.pmu(cycles, 1), Some(Counted(900)));
        assert_eq!(traced.pmu(rd, 1), Some(NotSupported));
        assert_eq!(traced.pmu(0x13, 1), Some(Counted(7)));
        assert_eq!(traced.pmu(cycles, 0), None);
        assert_eq!(r.phases[1].pmu(cycles, 0), Some(Counted(50)));
        let out = crate::results::run("run", 0, &r);
        let c = &out.phases[0];
        assert_eq!(c.counters["untraced.cycles:k"], 900);
        assert_eq!(c.counters["untraced.instructions:u"], 40);
        assert_eq!(c.counters["untraced.passes"], 2);
        assert_eq!(c.not_supported, ["untraced.mem_access_checked_rd:k"]);
        assert!(!c.counters.contains_key("untraced.mem_access_checked_rd:k"));
    }

    #[test]
    fn a_traced_phase_puts_the_silicons_mte_counts_beside_the_models() {
        // As on a CPU with the MTE events: the traced phase's own PMU counted checked reads
        // at EL1 on the very execution the trace counted.
        let rd = mtex_abi::report::pmu_event::MEM_ACCESS_CHECKED_RD;
        let mut records = pmu_phase(1, 1, 0, 1, &[(rd, 1, PmuValue::Counted(1290))], [0, 0]);
        let mut counts = TraceCounts::default();
        counts.architectural.rd_k = 1290;
        counts.tcf_elided.rd_k = 32;
        counts.instructions_el1 = 0;
        records.insert(
            2,
            Record::PhaseTrace(mtex_abi::report::PhaseTrace { id: 1, counts }),
        );
        let r = parse(&stream(records));
        let out = crate::results::run("run", 0, &r);
        let p = &out.phases[0];
        assert_eq!(p.counters["pmu.mem_access_checked_rd:k"], 1290);
        let lines = crate::perf_text::silicon_vs_model(p);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(
            lines[0].ends_with("rd:k: 0 against architectural, +1,258 against TCF-elided"),
            "{lines:?}"
        );
    }

    #[test]
    fn runs_fold_by_their_serial_whatever_ids_the_guest_reuses() {
        let cycles = mtex_abi::report::pmu_event::CPU_CYCLES;
        // A guest that opens phase 1 twice, as two runs (serials 1 and 2), each untraced
        // then traced, and a traced phase 1 again as a run of its own (serial 3).
        let c = |n| [(cycles, 1, PmuValue::Counted(n))];
        let records = [
            pmu_phase(1, 1, 1, 1, &c(10), [10, 0]),
            pmu_phase(2, 1, 0, 1, &[], [10, 0]),
            pmu_phase(1, 2, 1, 1, &c(20), [20, 0]),
            pmu_phase(2, 2, 0, 1, &[], [20, 0]),
            pmu_phase(1, 3, 0, 1, &[], [30, 0]),
        ]
        .concat();
        let r = parse(&stream(records));
        let figures: Vec<_> = r.phases.iter().map(|p| (p.id, p.pmu(cycles, 1))).collect();
        assert_eq!(
            figures,
            [
                (2, Some(PmuValue::Counted(10))),
                (2, Some(PmuValue::Counted(20))),
                (1, None)
            ]
        );
        assert!(r.notes.is_empty(), "{:?}", r.notes);
    }

    #[test]
    fn a_pass_never_run_or_withheld_is_a_problem() {
        let cycles = mtex_abi::report::pmu_event::CPU_CYCLES;
        // The guest ignored "one more pass": the second pass's events are never counted.
        let short = pmu_phase(1, 1, 1, 2, &[(cycles, 1, PmuValue::Counted(5))], [5, 0]);
        let r = parse(&stream(short));
        assert!(!r.succeeded());
        assert!(
            r.problems[0].contains("needed 2 untraced passes"),
            "{:?}",
            r.problems
        );
        let withheld = pmu_phase(1, 1, 1, 1, &[(cycles, 1, PmuValue::Withheld)], [5, 0]);
        let r = parse(&stream(withheld));
        assert!(
            r.problems[0].contains("withheld: cycles:k"),
            "{:?}",
            r.problems
        );
        // Passes that ran different instruction counts: a note, not a problem.
        let records = [
            pmu_phase(1, 1, 1, 2, &[(cycles, 1, PmuValue::Counted(5))], [5, 0]),
            pmu_phase(2, 1, 2, 2, &[], [6, 0]),
        ]
        .concat();
        let r = parse(&stream(records));
        assert!(r.succeeded(), "{:?}", r.problems);
        assert!(
            r.notes[0].contains("different instruction counts"),
            "{:?}",
            r.notes
        );
    }

    #[test]
    fn complete_stream_succeeds_and_decodes_fields() {
        let text = [
            "firmware says hi\n".to_string(),
            frame(0, Record::Console(ShortStr::truncated("hello"))),
            frame(1, write(0, (1 << 43) | (1 << 40))),
            frame(2, summary(2)),
        ]
        .concat();
        let r = parse(&text);
        assert!(r.succeeded(), "{:?}", r.problems);
        assert_eq!(r.console, ["hello"]);
        assert_eq!(r.other_output, ["firmware says hi"]);
        let names: Vec<_> = r.writes[0]
            .changes
            .iter()
            .map(|c| (c.field, c.new))
            .collect();
        assert_eq!(names, [("ATA", "1"), ("TCF", "SYNC")]);
    }

    #[test]
    fn missing_damaged_and_truncated_streams_are_problems() {
        let missing = [frame(0, write(0, 1)), frame(2, summary(2))].concat();
        let r = parse(&missing);
        assert!(!r.succeeded());
        assert!(
            r.problems.iter().any(|p| p.contains("1..1 missing")),
            "{:?}",
            r.problems
        );

        let mut damaged = frame(0, write(0, 1));
        damaged.replace_range(10..11, if &damaged[10..11] == "0" { "1" } else { "0" });
        let r = parse(&(damaged + &frame(1, summary(1))));
        assert!(
            r.problems.iter().any(|p| p.contains("damaged")),
            "{:?}",
            r.problems
        );

        let r = parse(&frame(0, write(0, 1)));
        assert!(r.problems.iter().any(|p| p.contains("no summary")));
        assert!(!r.succeeded());
    }

    #[test]
    fn two_frames_on_one_line_are_both_read() {
        // The newline between two frames lost, and guest text glued to the end of a frame.
        let text = [
            frame(0, write(0, 1)).trim_end().to_string(),
            frame(1, Record::Console(ShortStr::truncated("hi"))),
            frame(2, summary(2)).trim_end().to_string(),
            " trailing text\n".to_string(),
        ]
        .concat();
        let r = parse(&text);
        assert!(r.succeeded(), "{:?}", r.problems);
        assert_eq!((r.writes.len(), r.console.len()), (1, 1));
        assert_eq!(r.other_output, ["trailing text"]);
    }

    #[test]
    fn repeated_and_foreign_frames_are_problems_not_panics() {
        let line = frame(1, write(0, 1));
        let text = [
            frame(0, write(0, 1)),
            format!("{}{line}", line.trim_end()),
            frame(2, summary(2)),
        ]
        .concat();
        let r = parse(&text);
        assert!(!r.succeeded());
        assert_eq!(r.writes.len(), 2, "a repeated record is not counted twice");
        assert!(
            r.problems.iter().any(|p| p.contains("record 1 repeated")),
            "{:?}",
            r.problems
        );
        // Sequence numbers at the ends of the range, markers with nothing after them.
        let r = parse(&[frame(u32::MAX, summary(u32::MAX)), "@mtex ".into()].concat());
        assert!(!r.succeeded());
        let r = parse("@mtex @mtex \u{e9}@mtex 00@mtex");
        assert_eq!(
            r.problems
                .iter()
                .filter(|p| p.starts_with("damaged record"))
                .count(),
            3,
            "{:?}",
            r.problems
        );
    }

    #[test]
    fn bytes_that_are_not_utf8_are_listed() {
        let good = [frame(0, write(0, 1)), frame(1, summary(1))].concat();
        // In text outside records: a note, the run still counts.
        let mut log = b"firmware \xff\xfe says hi\n".to_vec();
        log.extend_from_slice(good.as_bytes());
        let r = parse_bytes(&log);
        assert!(r.succeeded(), "{:?}", r.problems);
        assert_eq!(r.other_output, ["firmware \u{fffd}\u{fffd} says hi"]);
        assert!(
            r.notes.iter().any(|n| n.contains("2 bytes were not UTF-8")),
            "{:?}",
            r.notes
        );
        // On a record's line: a problem, even when the frame itself still decodes.
        let mut log = good.as_bytes().to_vec();
        let eol = log.iter().position(|&b| b == b'\n').unwrap();
        log.insert(eol, 0x80);
        let r = parse_bytes(&log);
        assert!(!r.succeeded());
        assert!(
            r.problems
                .iter()
                .any(|p| p.contains("1 bytes were not UTF-8 on lines holding records")),
            "{:?}",
            r.problems
        );
        // Inside a frame: the frame is damaged as well.
        let mut log = good.as_bytes().to_vec();
        log[20] = 0xc3;
        let r = parse_bytes(&log);
        assert!(r.problems.iter().any(|p| p.starts_with("damaged record")));
        assert!(!r.succeeded());
    }

    fn begin(id: u32, name: &str) -> Record {
        Record::PhaseBegin(mtex_abi::report::PhaseBegin {
            id,
            name: ShortStr::truncated(name),
            params: None,
            ts: 0,
            at: GuestState::default(),
        })
    }

    fn end(id: u32, stats: PhaseStats) -> Record {
        Record::PhaseEnd(mtex_abi::report::PhaseEnd {
            id,
            ts: 1,
            at: GuestState::default(),
            stats,
        })
    }

    fn traced(id: u32, counts: TraceCounts) -> Record {
        Record::PhaseTrace(mtex_abi::report::PhaseTrace { id, counts })
    }

    /// A traced phase with QEMU's figures: 100 EL1 and 20 EL0 instructions traced, 3 kernel
    /// entries, and PMU counts that agree (EL1: one more per entry).
    fn qemu_phase() -> (TraceCounts, PhaseStats) {
        let mut t = TraceCounts {
            instructions_el1: 100,
            instructions_el0: 20,
            ..TraceCounts::default()
        };
        t.entries.sync_el0 = 2;
        t.entries.irq_el1 = 1;
        let s = PhaseStats {
            el1_instructions: Some(103),
            el0_instructions: Some(20),
            emulated: 2,
            ..PhaseStats::default()
        };
        (t, s)
    }

    /// The report of one phase with these counts, ended or not, and the problems it gave.
    fn one_phase(t: Option<TraceCounts>, s: Option<PhaseStats>, exit: ExitReason) -> Report {
        one_phase_on(None, t, s, exit)
    }

    /// [`one_phase`] after a Boot record, when given.
    fn one_phase_on(
        boot: Option<Boot>,
        t: Option<TraceCounts>,
        s: Option<PhaseStats>,
        exit: ExitReason,
    ) -> Report {
        one_phase_with(boot, t, s, None, exit)
    }

    /// [`one_phase_on`] with the step engine's record after the trace, when given.
    fn one_phase_with(
        boot: Option<Boot>,
        t: Option<TraceCounts>,
        s: Option<PhaseStats>,
        engine: Option<mtex_abi::report::StepEngine>,
        exit: ExitReason,
    ) -> Report {
        let mut records: Vec<_> = boot.map(Record::Boot).into_iter().collect();
        records.push(begin(1, "work"));
        records.extend(t.map(|t| traced(1, t)));
        records.extend(engine.map(Record::StepEngine));
        records.extend(s.map(|s| end(1, s)));
        let n = records.len() as u32;
        records.push(Record::Summary(Summary {
            records: n,
            exit,
            ts: 2,
            exits: 0,
        }));
        let text: String = records
            .into_iter()
            .enumerate()
            .map(|(i, r)| frame(i as u32, r))
            .collect();
        parse(&text)
    }

    const OK: ExitReason = ExitReason::GuestExit { status: 0 };

    #[test]
    fn a_trace_and_pmu_that_agree_by_qemus_rule_are_no_problem() {
        let (t, s) = qemu_phase();
        let r = one_phase(Some(t), Some(s), OK);
        assert!(r.succeeded(), "{:?}", r.problems);
        // Without kernel entries the two are equal.
        let t0 = TraceCounts {
            entries: Default::default(),
            ..t
        };
        let s0 = PhaseStats {
            el1_instructions: Some(100),
            ..s
        };
        assert!(one_phase(Some(t0), Some(s0), OK).succeeded());
        // An untraced phase, or one without PMU figures, has nothing to compare.
        assert!(one_phase(None, Some(s), OK).succeeded());
        let none = PhaseStats {
            el1_instructions: None,
            el0_instructions: None,
            ..s
        };
        assert!(one_phase(Some(t), Some(none), OK).succeeded());
    }

    #[test]
    fn on_silicon_the_pmu_is_held_to_the_architectures_rule() {
        // A Neoverse-like MIDR_EL1 (implementer 0x41): no step stub, and the two trapped and
        // emulated instructions are not architecturally executed.
        let boot = Boot {
            abi_version: 1,
            counter_hz: 1_000_000_000,
            trap_mode: TrapMode::FineGrained,
            hyp_start: 0,
            hyp_end: 0,
            guest_entry: 0,
            guest_dtb: 0,
            watchdog_ms: 10,
            pmu_instructions: true,
            midr: 0x410f_d0c0,
            boot_path: 1,
            guest_ram_pa: 0x6000_0000,
            console: 0x0900_0000,
        };
        assert!(!boot.is_emulator());
        let (t, s) = qemu_phase();
        let run = |s: PhaseStats| one_phase_on(Some(boot), Some(t), Some(s), OK);
        let architectural = PhaseStats {
            el1_instructions: Some(100 - 2),
            ..s
        };
        assert!(run(architectural).succeeded());
        // QEMU's figure (trace + entries) is a mismatch there.
        let r = run(s);
        assert!(!r.succeeded());
        assert!(r.problems[0].contains("trace counted 100 EL1 instructions, the PMU 103"));
    }

    #[test]
    fn a_trace_and_pmu_that_disagree_are_a_problem_per_el() {
        let (t, s) = qemu_phase();
        let s1 = PhaseStats {
            el1_instructions: Some(100),
            el0_instructions: Some(21),
            ..s
        };
        let r = one_phase(Some(t), Some(s1), OK);
        assert!(!r.succeeded());
        assert_eq!(r.problems.len(), 2, "{:?}", r.problems);
        assert!(
            r.problems[0].starts_with(
                "phase 1 (work): trace counted 100 EL1 instructions, the PMU 100 (expected 103"
            ),
            "{:?}",
            r.problems
        );
        assert_eq!(
            r.problems[1],
            "phase 1 (work): trace counted 20 EL0 instructions, the PMU 21"
        );
    }

    #[test]
    fn branches_the_hypervisor_executed_are_not_expected_from_the_pmu() {
        let (t, s) = qemu_phase();
        let engine = mtex_abi::report::StepEngine {
            id: 1,
            branches_el0: 5,
            branches_el1: 7,
            ..Default::default()
        };
        // QEMU: PMU EL1 = trace - branches + entries (3); EL0 = trace - branches.
        let counted = PhaseStats {
            el1_instructions: Some(100 - 7 + 3),
            el0_instructions: Some(20 - 5),
            ..s
        };
        assert!(
            !one_phase(Some(t), Some(counted), OK).succeeded(),
            "without the StepEngine record, a mismatch"
        );
        let r = one_phase_with(None, Some(t), Some(counted), Some(engine), OK);
        assert!(r.problems.is_empty(), "{:?}", r.problems);
        assert_eq!(r.engines, [engine]);
    }

    #[test]
    fn disturbed_pmu_counters_are_a_problem_not_a_comparison() {
        let (t, s) = qemu_phase();
        let s = PhaseStats {
            pmu_disturbed: true,
            el1_instructions: None,
            el0_instructions: None,
            el2_instructions: None,
            ..s
        };
        let r = one_phase(Some(t), Some(s), OK);
        assert_eq!(
            r.problems,
            [
                "phase 1 (work): the hypervisor's PMU counters were disturbed; its instruction counts are withheld"
            ]
        );
        assert!(!r.succeeded());
    }

    #[test]
    fn counts_that_are_not_exact_are_problems() {
        let (t, s) = qemu_phase();
        let lost = TraceCounts {
            runs: 4,
            runs_lost: 1,
            unknown_mem: 2,
            // Short by the lost run: not compared with the PMU (the lost run says why).
            instructions_el1: 90,
            ..t
        };
        let r = one_phase(Some(lost), Some(s), OK);
        assert!(!r.succeeded());
        assert_eq!(r.problems.len(), 2, "{:?}", r.problems);
        assert!(r.problems[0].starts_with("phase 1 (work): 1 breakpoint runs ended"));
        assert!(r.problems[0].ends_with("(counts not exact)"));
        assert!(r.problems[1].starts_with("phase 1 (work): 2 load/store instructions"));
    }

    #[test]
    fn a_fault_the_model_did_not_expect_is_a_problem() {
        let (t, s) = qemu_phase();
        let disagreeing = TraceCounts {
            unexpected_tag_check_faults: 1,
            ..t
        };
        let r = one_phase(Some(disagreeing), Some(s), OK);
        assert!(!r.succeeded());
        assert_eq!(r.problems.len(), 1, "{:?}", r.problems);
        assert!(
            r.problems[0].contains("1 tag-check faults on accesses the model judged unchecked")
        );
    }

    #[test]
    fn a_phase_that_never_ended_is_a_problem_with_its_partial_counts_kept() {
        let (t, _) = qemu_phase();
        let at = GuestState {
            pc: 0x4100_1234,
            el: 1,
            tco: false,
        };
        let stopped = ExitReason::TraceUnsupported {
            at,
            reason: ShortStr::truncated("LDXR/STXR retry loop"),
        };
        let r = one_phase(Some(t), None, stopped);
        assert_eq!(
            r.problems,
            [
                "phase 1 (work) never ended: counts up to where it stopped at pc 0x41001234 EL1 (partial)"
            ]
        );
        assert_eq!(r.phases[0].trace, Some(t));
        assert!(r.phases[0].end.is_none());
        // Untraced, ended by the guest's exit (no place given), or cut off before the summary.
        let r = one_phase(None, None, ExitReason::GuestExit { status: 0 });
        assert!(!r.succeeded());
        assert_eq!(
            r.problems,
            [
                "phase 1 (work) never ended: no counts (untraced); the run ended: guest exited with status 0"
            ]
        );
        let r = parse(&[frame(0, begin(7, "cut")), frame(1, traced(7, t))].concat());
        assert!(
            r.problems.iter().any(|p| p
                == "phase 7 (cut) never ended: counts up to where the report was cut off (partial)"),
            "{:?}",
            r.problems
        );
    }

    #[test]
    fn a_loader_error_is_a_problem_of_the_run() {
        let log = b"\x1b[0mBdsDxe: loading Boot0001\r\nmtex-loader: error: cannot read \\EFI\\BOOT\\mtex-guest.bin: NOT_FOUND\r\n";
        let r = parse_bytes(log);
        assert!(!r.succeeded());
        assert!(
            r.problems[0]
                .contains("the UEFI loader stopped: cannot read \\EFI\\BOOT\\mtex-guest.bin"),
            "{:?}",
            r.problems
        );
    }

    #[test]
    fn boot_record_is_kept() {
        let boot = Boot {
            abi_version: 1,
            counter_hz: 1_000_000_000,
            trap_mode: TrapMode::FineGrained,
            hyp_start: 0x4020_0000,
            hyp_end: 0x4100_0000,
            guest_entry: 0x4100_0000,
            guest_dtb: 0x4000_0000,
            watchdog_ms: 10,
            pmu_instructions: true,
            midr: 0x000f_0510,
            boot_path: 1,
            guest_ram_pa: 0x6000_0000,
            console: 0x0900_0000,
        };
        let r = parse(&[frame(0, Record::Boot(boot)), frame(1, summary(1))].concat());
        assert_eq!(r.boot, Some(boot));
        assert!(r.succeeded());
    }
}
