//! Accesses whose address is more than the base register plus an offset, or on two pages
//! (`guest/src/selftest/addresses.rs`), under `-icount shift=0`: loads through pointers signed
//! with the DA and DB keys (LDRAA, LDRAB with an offset) must be judged at the authenticated
//! address, and 8-byte loads from the last 4 bytes of an Untagged page into a Tagged one on
//! the Tagged part. Every figure is the loop's own arithmetic.

use mtex::model::report::{self, Phase, Report};
use mtex::qemu::{self, RunConfig};
use mtex_abi::program::{END_CALL_INSTRUCTIONS, HOSTILE_N};
use mtex_trace::counts::ByEl;
use std::sync::OnceLock;
use std::time::Duration;

use mtex::images::built as images;

fn report() -> &'static Report {
    static REPORT: OnceLock<Report> = OnceLock::new();
    REPORT.get_or_init(|| {
        let cfg = RunConfig {
            cmdline: "mtex.guest=addresses".to_string(),
            timeout: Duration::from_secs(60),
            ..RunConfig::default()
        };
        let console = qemu::run(images(), &cfg).expect("running QEMU");
        assert!(!console.timed_out, "host time limit hit:\n{}", console.text);
        report::parse(&console.text)
    })
}

fn phase(name: &str) -> &'static Phase {
    let r = report();
    assert!(r.succeeded(), "{}", mtex::output::matrix::text(r));
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    r.phases
        .iter()
        .find(|p| p.name == name)
        .unwrap_or_else(|| panic!("no phase {name}"))
}

/// `n` reads at EL1, nothing else.
fn reads_k(n: u64) -> ByEl {
    ByEl {
        rd_k: n,
        ..ByEl::default()
    }
}

/// The loop `1: <load>; subs x10, x10, #1; b.ne 1b` run HOSTILE_N times, then the phase-end
/// call: EL1 instructions, and one checked read per iteration (each pointer's tag matches
/// the memory's, TCF is SYNC, nothing turns checking off).
fn assert_checked_loop(name: &str) {
    let p = phase(name);
    let t = p.trace.unwrap_or_else(|| panic!("{name}: no trace"));
    let n = HOSTILE_N;
    let instructions = 3 * n + END_CALL_INSTRUCTIONS;
    assert_eq!(
        (t.instructions_el1, t.instructions_el0),
        (instructions, 0),
        "{name}: instructions"
    );
    assert_eq!(t.accesses, reads_k(n), "{name}: accesses");
    assert_eq!(t.architectural, reads_k(n), "{name}: architectural");
    assert_eq!(t.tcf_elided, reads_k(n), "{name}: elided");
    assert_eq!(
        (t.tag_check_faults, t.unknown_mem, t.runs_lost),
        (0, 0, 0),
        "{name}"
    );
    // The PMU, less the back-edge branches the step engine executed for the guest.
    let s = p.stats.unwrap();
    let [el1, _] = report().pmu_expected(p).unwrap();
    assert_eq!(s.el1_instructions, Some(el1), "{name}: PMU vs trace");
}

#[test]
fn ldraa_is_judged_at_the_authenticated_address() {
    assert_checked_loop("ldraa");
}

#[test]
fn ldrab_adds_its_offset_to_the_authenticated_address() {
    assert_checked_loop("ldrab-offset");
}

#[test]
fn a_load_from_an_untagged_into_a_tagged_page_is_checked() {
    assert_checked_loop("cross-page");
}

/// One page-crossing load whose pointer tag differs from the Tagged page's: QEMU checks that
/// part and faults, as the count says; the EL1 vector resumes after the load.
#[test]
fn qemu_checks_the_tagged_part_of_a_page_crossing_load() {
    let p = phase("cross-page-mismatch");
    let t = p.trace.expect("a trace");
    // The fault is on an access the count judged checked: not an unexpected one.
    assert_eq!((t.tag_check_faults, t.unexpected_tag_check_faults), (1, 0));
    assert_eq!(t.accesses, reads_k(1));
    assert_eq!(t.architectural, reads_k(1));
    assert_eq!(t.tcf_elided, reads_k(1));
    assert_eq!(t.entries.sync_el1, 1);
    // The load did not complete; the vector's resume path is 15 instructions (ERET included).
    assert_eq!(
        (t.instructions_el1, t.instructions_el0),
        (15 + END_CALL_INSTRUCTIONS, 0)
    );
    assert!(
        report()
            .console
            .iter()
            .any(|l| l == "addresses: cross-page-mismatch faulted=1"),
        "{:?}",
        report().console
    );
}
