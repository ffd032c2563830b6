use crate::model::report::test_stream::*;
use crate::model::report::{Report, parse};
use mtex_abi::Record;
use mtex_abi::ShortStr;
use mtex_abi::report::{Boot, ExitReason, GuestState, PhaseStats, PmuValue, Summary, TrapMode};
use mtex_trace::counts::TraceCounts;

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
    assert!(r.problems[0].contains("1 tag-check faults on accesses the model judged unchecked"));
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
fn a_phase_whose_cpus_shares_do_not_add_up_is_a_problem() {
    use mtex_abi::report::CpuTrace;
    use mtex_trace::counts::ByEl;
    let share = |cpu, el1, rd_k| {
        Record::CpuTrace(CpuTrace {
            id: 1,
            cpu,
            instructions: [0, el1],
            checked: ByEl {
                rd_k,
                ..ByEl::default()
            },
            accesses: ByEl {
                rd_k,
                ..ByEl::default()
            },
            ..CpuTrace::default()
        })
    };
    let phase = |shares: Vec<Record>, el1, rd_k| {
        let reads = ByEl {
            rd_k,
            ..ByEl::default()
        };
        let t = TraceCounts {
            instructions_el1: el1,
            architectural: reads,
            accesses: reads,
            ..TraceCounts::default()
        };
        let mut records = vec![begin(1, "both")];
        records.extend(shares);
        records.extend([traced(1, t), end(1, PhaseStats::default())]);
        parse(&stream(records))
    };
    let whole = phase(vec![share(0, 30, 10), share(1, 12, 0)], 42, 10);
    assert!(
        !whole.problems.iter().any(|p| p.contains("shares")),
        "{:?}",
        whole.problems
    );
    // Shares arrive in the order the CPUs end; the report lists them by CPU.
    let late = phase(
        vec![share(2, 0, 0), share(1, 12, 0), share(0, 30, 10)],
        42,
        10,
    );
    let order: Vec<u32> = late.phases[0].cpus.iter().map(|c| c.cpu).collect();
    assert_eq!(order, [0, 1, 2]);
    let short = phase(vec![share(0, 30, 10), share(1, 12, 0)], 42, 11);
    assert!(
        short
            .problems
            .iter()
            .any(|p| p.contains("phase 1 (both): its CPUs' shares do not add up")),
        "{:?}",
        short.problems
    );
}
