//! The optimised paths count what the reference path counts: every traced program
//! booted with `mtex.step=plain` (every exit through the full path, every instruction
//! stepped), `mtex.step=fast` and `mtex.step=fast mtex.runs=1`, under `-icount shift=0`, must
//! give the same counts phase by phase, field by field (`mtex::cli::bench::equality::compare`: the trace
//! counts but the fast paths' own `runs`/`runs_lost`, the PMU's EL1/EL0 instruction counts,
//! the trapped writes in order, the TCO write sites), with no breakpoint run lost. The three
//! boots of a program run in parallel.

use mtex::cli::bench::equality::{self, PROGRAMS};
use mtex::model::report::{self, Report};
use mtex::qemu::{self, RunConfig};
use std::time::Duration;

use mtex::images::built as images;

/// Boots `cmdline` under `-icount` and parses its report (the other QEMU test modules too).
pub(crate) fn boot(cmdline: String) -> Report {
    let cfg = RunConfig {
        cmdline,
        timeout: Duration::from_secs(300),
        ..RunConfig::default()
    };
    let console = qemu::run(images(), &cfg).expect("running QEMU");
    assert!(
        !console.timed_out,
        "{}: host time limit hit:\n{}",
        cfg.cmdline, console.text
    );
    report::parse(&console.text)
}

/// Boots `program` in every step mode and compares each fast run with the plain one.
fn assert_counts_equal(program: &str) {
    assert_counts_equal_in(program, equality::modes_of(program).0)
}

/// [`assert_counts_equal`] over `modes` (the first is the reference).
fn assert_counts_equal_in(program: &str, modes: &[equality::Mode]) {
    let (_, line) = PROGRAMS
        .iter()
        .find(|(name, _)| *name == program)
        .unwrap_or_else(|| panic!("{program} is not in mtex::cli::bench::equality::PROGRAMS"));
    images();
    let reports: Vec<Report> = std::thread::scope(|s| {
        let boots: Vec<_> = modes
            .iter()
            .map(|mode| s.spawn(move || boot(format!("{line} {}", mode.opts))))
            .collect();
        boots.into_iter().map(|b| b.join().unwrap()).collect()
    });
    let traced = reports[0]
        .phases
        .iter()
        .filter(|p| p.trace.is_some())
        .count();
    assert!(traced > 0, "{program}: no traced phase");
    // Everything wrong, in every mode, in one message.
    let mut wrong = Vec::new();
    for (mode, r) in modes.iter().zip(&reports) {
        let problems = equality::run_problems(r);
        wrong.extend(problems.iter().map(|p| format!("{}: {p}", mode.opts)));
        if *mode == equality::PLAIN {
            continue;
        }
        let c = equality::compare(&reports[0], r, *mode);
        wrong.extend(c.differences.iter().map(|d| format!("{}: {d}", mode.opts)));
        assert_eq!(c.phases, reports[0].phases.len(), "{program} {}", mode.opts);
    }
    assert!(
        wrong.is_empty(),
        "{program}: counts differ from {} or a run failed:\n{}",
        equality::PLAIN.opts,
        wrong.join("\n")
    );
}

#[test]
fn trace_program() {
    assert_counts_equal("trace");
}

#[test]
fn controls_walk() {
    assert_counts_equal("controls");
}

#[test]
fn el0_program() {
    assert_counts_equal("el0");
}

#[test]
fn differential_program() {
    assert_counts_equal("differential");
}

#[test]
fn kernel_matrix() {
    assert_counts_equal("kernel");
}

#[test]
fn hostile_patch() {
    assert_counts_equal("hostile-patch");
}

#[test]
fn hostile_remap() {
    assert_counts_equal("hostile-remap");
}

#[test]
fn hostile_vector() {
    assert_counts_equal("hostile-vector");
}

/// Stepped modes only (`equality::RESTRICTED`, which `cargo mtex bench` follows too): the
/// guest itself behaves differently in a breakpoint run, and `hostile.rs` checks each
/// mode's counts against the loop.
#[test]
fn hostile_exclusive() {
    assert_eq!(
        equality::modes_of("hostile-exclusive").0,
        &[equality::PLAIN, equality::FAST]
    );
    assert_counts_equal("hostile-exclusive");
}

#[test]
fn hostile_debug() {
    assert_counts_equal("hostile-debug");
}

#[test]
fn hostile_cpu() {
    assert_counts_equal("hostile-cpu");
}

#[test]
fn addresses() {
    assert_counts_equal("addresses");
}

/// Every program of the list has its test above.
#[test]
fn every_program_is_tested() {
    let source = include_str!("equality.rs");
    for (name, _) in PROGRAMS {
        assert!(
            source.contains(&format!("assert_counts_equal(\"{name}\")"))
                || source.contains(&format!("assert_counts_equal_in(\"{name}\"")),
            "{name}"
        );
    }
}
