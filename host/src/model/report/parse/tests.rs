use super::*;
use crate::model::report::test_stream::*;
use mtex_abi::ShortStr;
use mtex_abi::report::{Boot, PmuValue, TrapMode};
use mtex_trace::counts::TraceCounts;

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

/// A sampled phase's unit loses its abandoned instructions in SampleUnit's encoding: the
/// TraceMore after it gives them back to that unit, not to another.
#[test]
fn more_trace_counts_after_a_sampled_unit_join_that_unit() {
    let unit = |lead| {
        Record::SampleUnit(mtex_abi::report::SampleUnit {
            id: 5,
            lead,
            guest_clock: 0,
            counts: TraceCounts {
                instructions_el0: 30,
                ..TraceCounts::default()
            },
        })
    };
    let r = parse(&stream(vec![
        begin(5, "w"),
        unit(true),
        unit(false),
        Record::TraceMore(mtex_abi::report::TraceMore {
            id: 5,
            abandoned_el0: 1,
            abandoned_el1: 0,
            trapped_el0: 0,
            trapped_el1: 0,
        }),
    ]));
    assert!(
        !r.problems.iter().any(|p| p.contains("no trace")),
        "{:?}",
        r.problems
    );
    let s = r.phases[0].sampled.as_ref().expect("sampled");
    let abandoned: Vec<u64> = s.stretches.iter().map(|u| u.counts.abandoned_el0).collect();
    assert_eq!(abandoned, [0, 1]);
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
    let out = crate::model::results::run("run", 0, &r);
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
    let out = crate::model::results::run("run", 0, &r);
    let p = &out.phases[0];
    assert_eq!(p.counters["pmu.mem_access_checked_rd:k"], 1290);
    let lines = crate::output::full::silicon_vs_model(p);
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

#[test]
fn a_loader_error_is_a_problem_of_the_run() {
    let log = b"\x1b[0mBdsDxe: loading Boot0001\r\nmtex-loader: error: cannot read \\EFI\\BOOT\\mtex-guest.bin: NOT_FOUND\r\n";
    let r = parse_bytes(log);
    assert!(!r.succeeded());
    assert!(
        r.problems[0].contains("the UEFI loader stopped: cannot read \\EFI\\BOOT\\mtex-guest.bin"),
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

#[test]
fn a_snapshot_the_guest_took_ends_without_a_summary_and_says_so() {
    use mtex_abi::report::ResultsTaken;
    let snapshot = |records: Vec<Record>, taken: ResultsTaken| -> String {
        records
            .into_iter()
            .chain([Record::ResultsTaken(taken)])
            .enumerate()
            .map(|(i, r)| frame(i as u32, r))
            .collect()
    };
    let phase = vec![
        begin(1, "window 1"),
        traced(1, TraceCounts::default()),
        end(1, mtex_abi::report::PhaseStats::default()),
    ];
    let n = phase.len() as u32;
    let whole = parse(&snapshot(
        phase.clone(),
        ResultsTaken {
            records: n,
            lost: 0,
        },
    ));
    assert!(whole.problems.is_empty(), "{:?}", whole.problems);
    assert!(
        whole
            .notes
            .iter()
            .any(|n| n.contains("results taken by the guest")),
        "{:?}",
        whole.notes
    );
    assert_eq!(whole.phases.len(), 1);
    assert!(whole.is_results_snapshot && whole.succeeded());
    // Records the ring could not hold are missing from the snapshot: a problem.
    let lost = parse(&snapshot(
        phase.clone(),
        ResultsTaken {
            records: n,
            lost: 300,
        },
    ));
    assert!(
        lost.problems
            .iter()
            .any(|p| p.contains("300 bytes of records")),
        "{:?}",
        lost.problems
    );
    // A snapshot record that does not end the stream, or miscounts it, is no end.
    let mut cut: Vec<Record> = phase.clone();
    cut.push(Record::ResultsTaken(ResultsTaken {
        records: n,
        lost: 0,
    }));
    cut.push(phase[0]);
    let cut: String = cut
        .into_iter()
        .enumerate()
        .map(|(i, r)| frame(i as u32, r))
        .collect();
    assert!(
        parse(&cut)
            .problems
            .iter()
            .any(|p| p.contains("no summary record"))
    );
    let miscounted = parse(&snapshot(
        phase,
        ResultsTaken {
            records: n + 1,
            lost: 0,
        },
    ));
    assert!(
        miscounted
            .problems
            .iter()
            .any(|p| p.contains("no summary record"))
    );
    // In a whole run it is only a mark.
    let run = parse(&stream(vec![Record::ResultsTaken(ResultsTaken {
        records: 0,
        lost: 0,
    })]));
    assert!(run.problems.is_empty(), "{:?}", run.problems);
}

/// Through UEFI the OS's console shares the UART with the records: a line it printed while a
/// record was being written lands inside that record. The record is applied whole, the line
/// is the console's, and the report says so (a note: nothing was lost).
#[test]
fn console_text_inside_a_record_is_given_back_to_the_console() {
    let line = frame(1, write(0, 1));
    let cut = 30;
    let text = [
        frame(0, write(0, 1)),
        format!("{}mtex-linux: init{}", &line[..cut], &line[cut..]),
        frame(2, summary(2)),
    ]
    .concat();
    let r = parse(&text);
    assert!(r.succeeded(), "{:?}", r.problems);
    assert_eq!(r.writes.len(), 2);
    assert_eq!(r.other_output, ["mtex-linux: init"]);
    assert!(
        r.notes
            .iter()
            .any(|n| n.starts_with("1 record(s) had other console text")),
        "{:?}",
        r.notes
    );
    // The OS's own text, records out: its line whole again, where it landed.
    let own = super::console_without_records(text.as_bytes());
    assert_eq!(own, "\nmtex-linux: init\n\n");
}
