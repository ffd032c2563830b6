//! Host tests of the probe's verdicts on synthetic reports.

use super::*;
use mtex_abi::program::KERNEL_LINEAR_BASE;
use mtex_arch::mte_bits::{sctlr, tcr, with_tag};

/// The controls the guest uses for `cell` (guest/src/probe.rs), the pointer, and the
/// faults QEMU gives: a check fails with the mode's fault where the elided view checks.
fn line(cell: &Cell) -> String {
    let tcf = cell.tcf as u64;
    let (sctlr, tcr, base, ma) = if cell.el == 1 {
        let tcma = tcr::TCMA0 | if cell.tcma { tcr::TCMA1 } else { 0 };
        (
            sctlr::ATA | sctlr::ATA0 | tcf << sctlr::TCF_SHIFT,
            tcr::TBI0 | tcr::TBI1 | tcma,
            KERNEL_LINEAR_BASE | 0x4112_0000,
            0xf,
        )
    } else {
        let tcma = if cell.tcma { tcr::TCMA0 } else { 0 };
        (
            sctlr::ATA | sctlr::ATA0 | tcf << sctlr::TCF0_SHIFT,
            tcr::TBI0 | tcr::TBI1 | tcma,
            0x4112_3000,
            0,
        )
    };
    let ptr = with_tag(base, if cell.match_all { ma } else { 5 });
    let checked =
        cell.tcf != Tcf::None && !cell.tco && cell.tagged_page && !(cell.tcma && cell.match_all);
    let (rd, wr) = match (checked, cell.tcf) {
        (false, _) | (_, Tcf::None) => ("none", "none"),
        (true, Tcf::Sync) => ("sync", "sync"),
        (true, Tcf::Async) => ("async", "async"),
        (true, Tcf::Asymm) => ("sync", "async"),
    };
    format!(
        "probe: cell {} rd={rd} wr={wr} sctlr={sctlr:#x} tcr={tcr:#x} ptr={ptr:#x}",
        cell.name
    )
}

/// A report of a successful probe run on QEMU: every cell's line, the cost lines and
/// `done`, with no phases (the PMU figures come from the test's closure).
fn qemu_like() -> Report {
    let mut console: Vec<String> = Cell::all().iter().map(line).collect();
    console.push("probe: cost baseline n=1000 ops=0".into());
    console.push("probe: cost tco-write n=1000 ops=2000".into());
    console.push("probe: done".into());
    Report {
        console,
        summary: Some(mtex_abi::report::Summary {
            records: 0,
            exit: mtex_abi::report::ExitReason::GuestExit { status: 0 },
            ts: 0,
            exits: 0,
        }),
        ..Report::default()
    }
}

#[test]
fn cell_names_round_trip_and_fit_a_phase_name() {
    let all = Cell::all();
    assert_eq!(all.len(), 128);
    for c in &all {
        assert_eq!(Cell::parse(&c.name).as_ref(), Some(c));
        assert!(
            c.name.len() <= mtex_abi::hypercall::PHASE_NAME_BYTES,
            "{}",
            c.name
        );
    }
    for bad in [
        "el2/none/tco0/tcma0/ma/tagged",
        "el1/none/tco0/tcma0/ma",
        "x",
    ] {
        assert_eq!(Cell::parse(bad), None, "{bad}");
    }
}

#[test]
fn without_mte_pmu_events_tcf_none_cells_are_unknown_and_faults_agree() {
    let r = qemu_like();
    let p = analyse_with(&r, |_, _, _| Some(PmuValue::NotSupported));
    assert!(p.problems.is_empty(), "{:?}", p.problems);
    assert_eq!(p.cells.len(), 128);
    assert_eq!(p.contradictions(), 0, "{}", render(&p));
    assert_eq!(p.answer, Answer::Unknown("no MTE PMU events"));
    for c in &p.cells {
        let none = c.measured.cell.tcf == Tcf::None;
        for a in [&c.rd, &c.wr] {
            assert_eq!(a.seen == Seen::NoEvents, none, "{}", c.measured.cell.name);
        }
    }
    let text = render(&p);
    assert!(
        text.lines()
            .next()
            .unwrap()
            .ends_with("this CPU: unknown (no MTE PMU events)"),
        "{text}"
    );
    assert!(text.contains("unknown (no MTE PMU events)"));
    assert!(p.passed());
    // The same without any PMU record at all.
    let q = analyse_with(&r, |_, _, _| None);
    assert_eq!(q.answer, Answer::Unknown("no MTE PMU events"));
    assert!(q.passed());
}

#[test]
fn a_fault_the_predicate_rules_out_is_flagged() {
    let mut r = qemu_like();
    // TCO set: unchecked in both views, yet the guest says the load faulted.
    let cell = "el1/sync/tco1/tcma0/mm/tagged";
    let l = r
        .console
        .iter_mut()
        .find(|l| l.contains(&format!(" {cell} ")))
        .unwrap();
    *l = l.replace("rd=none", "rd=sync");
    let p = analyse_with(&r, |_, _, _| Some(PmuValue::NotSupported));
    assert_eq!(p.contradictions(), 1);
    let c = p.cells.iter().find(|c| c.contradicts()).unwrap();
    assert_eq!(c.measured.cell.name, cell);
    assert!(c.rd.contradiction.is_some() && c.wr.contradiction.is_none());
    assert!(!p.passed());
    let text = render(&p);
    assert!(text.contains(&format!("{cell} load: checked, where the predicate")));
    assert!(text.contains("FAIL"));
    // A checked access without its fault is flagged too.
    let mut r = qemu_like();
    let l = r
        .console
        .iter_mut()
        .find(|l| l.contains(" el0/async/tco0/tcma0/mm/tagged "))
        .unwrap();
    *l = l.replace("wr=async", "wr=none");
    assert_eq!(analyse_with(&r, |_, _, _| None).contradictions(), 1);
}

#[test]
fn the_pmu_answers_the_question_and_is_checked_against_the_faults() {
    let r = qemu_like();
    // A CPU that counts every access the architecture checks (AmpereOne-like), and one
    // that counts only where TCF is not NONE (Arm cores).
    for (tcf_none, answer) in [(true, Answer::Yes), (false, Answer::No)] {
        let counts = |name: &str, event: u16, el: u8| {
            // The cost phases' cycles are not asked about here.
            let c = Cell::parse(name)?;
            assert!(
                event == pmu_event::MEM_ACCESS_CHECKED_RD
                    || event == pmu_event::MEM_ACCESS_CHECKED_WR
            );
            assert_eq!(el, c.el);
            let checked = !c.tco && c.tagged_page && !(c.tcma && c.match_all);
            let n = checked && (tcf_none || c.tcf != Tcf::None);
            Some(PmuValue::Counted(n as u64))
        };
        let p = analyse_with(&r, counts);
        assert_eq!(p.answer, answer);
        assert_eq!(p.contradictions(), 0, "{}", render(&p));
        assert!(p.cells.iter().all(|c| matches!(c.rd.seen, Seen::Pmu(_))));
    }
    // A PMU that counts nothing where a fault shows a check disagrees with it.
    let p = analyse_with(&r, |_, _, _| Some(PmuValue::Counted(0)));
    assert_eq!(p.answer, Answer::No);
    assert_eq!(p.contradictions(), 18, "the cells QEMU faults in");
}

#[test]
fn costs_are_cycles_over_the_baseline_per_operation() {
    let r = qemu_like();
    let p = analyse_with(&r, |name, event, el| {
        if Cell::parse(name).is_some() {
            return Some(PmuValue::NotSupported);
        }
        assert_eq!((event, el), (pmu_event::CPU_CYCLES, 1));
        Some(PmuValue::Counted(if name == "cost/baseline" {
            2004
        } else {
            4004
        }))
    });
    assert_eq!(p.costs.len(), 1);
    assert_eq!(p.costs[0].cycles, Some([2004, 4004]));
    assert_eq!(p.costs[0].per_op, Some(1.0));
    assert!(render(&p).contains("TCO write (MSR TCO, #imm)"));
    // No cycle counts: said, not guessed.
    let q = analyse_with(&r, |_, _, _| Some(PmuValue::NotSupported));
    assert_eq!(q.costs[0].per_op, None);
    assert!(render(&q).contains("unknown (no cycle counts)"));
}

#[test]
fn missing_lines_and_a_failed_run_fail_the_probe() {
    let mut r = qemu_like();
    r.console.retain(|l| !l.contains(" el0/"));
    r.console
        .push("probe: cell el1/none/tco0/tcma0/ma/tagged rd=what".into());
    let p = analyse_with(&r, |_, _, _| None);
    assert!(!p.passed());
    assert_eq!(p.cells.len(), 64);
    assert!(p.problems.iter().any(|e| e.contains("malformed")));
    assert_eq!(
        p.problems
            .iter()
            .filter(|e| e.contains("expected one"))
            .count(),
        64
    );
    let mut r = qemu_like();
    r.summary = None;
    assert!(!analyse_with(&r, |_, _, _| None).passed());
}
