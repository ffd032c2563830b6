//! What a run cannot vouch for, listed as problems (or, for what is still exact, notes): a
//! phase that never ended, untraced passes that never ran, PMU counts withheld or at odds
//! with the trace, trace counts that are not exact. Apart from the parser because these are
//! the rules of the measurement (what QEMU's PMU and the architecture count), not of the
//! stream, and they are what a reader checks against hardware.

use super::{Phase, Report, Untraced, UntracedPass, describe_exit, pmu_count_name};
use mtex_abi::report::{ExitReason, GuestState, PhaseStats, PmuValue};
use mtex_trace::counts::{ByEl, TraceCounts};

#[cfg(test)]
mod tests;

/// Where the guest was when the run ended, when the ending says.
fn stopped_at(e: &ExitReason) -> Option<GuestState> {
    match *e {
        ExitReason::UnhandledGuestExit { at, .. }
        | ExitReason::ProtectedWrite { at, .. }
        | ExitReason::Watchdog { at, .. }
        | ExitReason::TraceUnsupported { at, .. } => Some(at),
        _ => None,
    }
}

/// Lists every figure the run cannot vouch for: a phase that never ended, PMU counts that
/// were withheld or disagree with the trace, trace counts that are not exact. Each makes the
/// run fail: nothing is wrong silently.
pub(super) fn check_figures(r: &mut Report) {
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
        if let (Some(profile), Some(trace)) = (&p.profile, &p.trace)
            && let Some(why) = profile.problem(trace)
        {
            problems.push(format!("{name}: {why}"));
        }
        if let Some(u) = &p.untraced {
            untraced_problems(&name, u, &mut problems, &mut r.notes);
        }
        problems.extend(shares_add_up(&name, p));
        problems.extend(super::sampled::problems(
            p,
            r.boot.is_none_or(|b| b.is_emulator()),
        ));
        r.notes.extend(super::sampled::notes(p));
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
            problems.extend(impdef_problems(&name, t));
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
    // A CPU_ON the hypervisor denied, which a phase then ran without.
    problems.extend(super::power::problems(r));
    // Code inside a guarded phase tried to rewrite its harness (or the guest after it).
    if let Some(e @ ExitReason::ProtectedWrite { .. }) = r.summary.map(|s| s.exit) {
        problems.push(describe_exit(&e));
    }
    r.problems.extend(problems);
}

/// A phase every CPU counted: its CPUs' shares (sent apart, summed by the hypervisor) must
/// add up to its figures.
fn shares_add_up(name: &str, p: &Phase) -> Option<String> {
    let (Some(t), false) = (&p.trace, p.cpus.is_empty()) else {
        return None;
    };
    let mut instructions = [0u64; 2];
    let (mut checked, mut accesses) = (ByEl::default(), ByEl::default());
    let mut step_exits = 0;
    for c in &p.cpus {
        instructions[0] += c.instructions[0];
        instructions[1] += c.instructions[1];
        checked.add(&c.checked);
        accesses.add(&c.accesses);
        step_exits += c.step_exits;
    }
    let shares = (instructions, checked, accesses, step_exits);
    let whole = (
        [t.instructions_el0, t.instructions_el1],
        t.architectural,
        t.accesses,
        p.stats.map_or(step_exits, |s| s.step_exits),
    );
    (whole != shares).then(|| {
        format!(
            "{name}: its CPUs' shares do not add up to its figures ({shares:?} against {whole:?})"
        )
    })
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

/// The problems of counts that rest on a choice the Arm ARM leaves to the CPU, where the
/// CPU's choice changes a count by more than a bound the report can state as a note (a
/// failed CAS's write is such a note: `render::phase_notes`).
pub fn impdef_problems(name: &str, t: &TraceCounts) -> Vec<String> {
    let mut out = Vec::new();
    if t.exclusive_pairs_mixed > 0 {
        out.push(format!(
            "{name}: {} store-exclusives were Tag Checked otherwise than their load-exclusive: the Arm ARM makes their status UNKNOWN, so whether they wrote is not known (write counts in doubt)",
            t.exclusive_pairs_mixed
        ));
    }
    if t.tagged_impdef > 0 {
        out.push(format!(
            "{name}: {} accesses were counted Tag Checked on Tagged memory mapped Non-shareable or with SCTLR_EL1.C = 0, which a CPU may take as Untagged (IMPLEMENTATION DEFINED: checked counts may be up to that many fewer)",
            t.tagged_impdef
        ));
    }
    out
}
