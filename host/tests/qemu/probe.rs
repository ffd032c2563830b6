//! `mtex probe` on QEMU under `-icount shift=0`: QEMU has no MTE PMU events, so every cell
//! with TCF ≠ NONE is judged by its tag-check faults — each must match the trace counter's
//! predicate, and fault as its mode requires — and every TCF = NONE cell says unknown, as
//! does the first line. QEMU counts one cycle per instruction, and each cost loop executes
//! exactly its operation's instructions more per iteration than the baseline: a TCO write
//! costs exactly one cycle.

use mtex::cli::probe::{self, Cell, Fault, Seen};
use mtex_abi::report::{PmuValue, pmu_event};
use mtex_abi::scenario::Tcf;
use std::process::Command;

fn run() -> (mtex::model::report::Report, probe::Probe) {
    let console = probe::boot(mtex::images::built()).expect("running QEMU");
    assert!(!console.timed_out, "host time limit hit:\n{}", console.text);
    let r = console.report();
    let p = probe::analyse(&r);
    (r, p)
}

#[test]
fn every_cell_observable_through_faults_matches_the_predicate() {
    let (r, p) = run();
    let text = probe::render(&p);
    assert!(r.succeeded(), "{}\n{text}", mtex::output::matrix::text(&r));
    assert!(p.problems.is_empty(), "{text}");
    assert!(
        p.skipped.is_empty(),
        "QEMU -cpu max has FEAT_MTE3 and DC GZVA: {text}"
    );
    assert_eq!(p.cells.len(), Cell::all().len());
    assert_eq!(p.cells.len(), 128);
    assert_eq!(p.contradictions(), 0, "{text}");
    // Observable through faults: every cell with TCF ≠ NONE, 3 of the 4 modes.
    let by_fault: Vec<_> = p
        .cells
        .iter()
        .filter(|c| {
            [&c.rd, &c.wr]
                .iter()
                .all(|a| matches!(a.seen, Seen::Fault(_)))
        })
        .collect();
    assert_eq!(by_fault.len(), 96);
    assert!(by_fault.iter().all(|c| c.measured.cell.tcf != Tcf::None));
    // Each agrees with the predicate, and a failed check faults as the mode says.
    let mut checked = 0;
    for c in &by_fault {
        let cell = &c.measured.cell;
        for (a, write) in [(&c.rd, false), (&c.wr, true)] {
            assert_eq!(a.architectural, a.tcf_elided, "{}: TCF ≠ NONE", cell.name);
            assert_eq!(
                a.seen.checked(),
                Some(a.architectural),
                "{} (write: {write})",
                cell.name
            );
            let fault = match (a.architectural, cell.tcf) {
                (false, _) => Fault::None,
                (true, Tcf::Sync) => Fault::Sync,
                (true, Tcf::Async) => Fault::Async,
                (true, _) if write => Fault::Async,
                (true, _) => Fault::Sync,
            };
            assert_eq!(a.fault, fault, "{} (write: {write})", cell.name);
        }
        checked += c.rd.architectural as usize;
    }
    // Checked: TCO clear, a Tagged page, and not a match-all pointer under TCMA; 3/16 of 96.
    assert_eq!(checked, 18);
    // TCF = NONE: no fault to see, and QEMU's PMU has no MTE events.
    for c in p.cells.iter().filter(|c| c.measured.cell.tcf == Tcf::None) {
        assert_eq!((c.rd.seen, c.wr.seen), (Seen::NoEvents, Seen::NoEvents));
        assert_eq!((c.rd.fault, c.wr.fault), (Fault::None, Fault::None));
        let phase = r.phase(&c.measured.cell.name).expect("the cell's phase");
        let el = c.measured.cell.el;
        for event in [
            pmu_event::MEM_ACCESS_CHECKED_RD,
            pmu_event::MEM_ACCESS_CHECKED_WR,
        ] {
            assert_eq!(phase.pmu(event, el), Some(PmuValue::NotSupported));
        }
    }
    assert_eq!(
        text.lines().next(),
        Some(
            format!(
                "{} — this CPU: unknown (no MTE PMU events)",
                probe::QUESTION
            )
            .as_str()
        )
    );
    assert!(p.passed());
}

#[test]
fn a_tco_write_costs_one_cycle_under_icount() {
    let (_, p) = run();
    let text = probe::render(&p);
    // Instructions per operation: each costs as many cycles under -icount shift=0.
    let expected = [
        ("tco-write", 1.0),
        ("tfsr-read", 3.0),
        ("stg", 1.0),
        ("st2g", 1.0),
        ("dc-gzva", 1.0),
    ];
    assert_eq!(p.costs.len(), expected.len(), "{text}");
    for (what, cycles) in expected {
        let c = p.costs.iter().find(|c| c.what == what).expect(what);
        let [base, with] = c
            .cycles
            .unwrap_or_else(|| panic!("{what}: no cycles\n{text}"));
        assert_eq!(
            with - base,
            c.ops * cycles as u64,
            "{what}: {base} → {with} over {} operations",
            c.ops
        );
        assert_eq!(c.per_op, Some(cycles), "{what}");
    }
    let tco = p.costs.iter().find(|c| c.what == "tco-write").unwrap();
    assert_eq!(tco.ops, 2000, "two writes per iteration, 1000 iterations");
}

#[test]
fn the_command_prints_the_question_first_and_exits_zero() {
    let json = std::env::temp_dir().join(format!("mtex-probe-{}.json", std::process::id()));
    let out = Command::new(env!("CARGO_BIN_EXE_mtex"))
        .args(["probe", "--json"])
        .arg(&json)
        .output()
        .expect("running mtex probe");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.lines().next().is_some_and(
            |l| l.starts_with(probe::QUESTION) && l.ends_with("unknown (no MTE PMU events)")
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("128 cells, 0 contradicting; PASS"),
        "{stdout}"
    );
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let _ = std::fs::remove_file(&json);
    assert_eq!(doc["cells"].as_array().map(Vec::len), Some(128));
    assert_eq!(doc["problems"], serde_json::json!([]));
}
