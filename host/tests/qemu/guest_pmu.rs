//! The guest's own PMU counting the MTE events (MEM_ACCESS_CHECKED 0x4024, _RD 0x4025, _WR
//! 0x4026), which the hypervisor keeps from the trace: snippets at EL1 that program them as
//! perf does and check their own counts against their own instructions. A snippet whose
//! count is wrong executes UDF, and the run fails.

use mtex::cli::snippet::{self, Env};
use mtex::images::built as images;
use mtex::model::report::Report;

fn assemble(source: &str) -> Vec<u8> {
    match snippet::assemble_source(source).expect("running the assembler") {
        Ok(code) => code,
        Err(e) => panic!("{source}\ndid not assemble: {e}"),
    }
}

fn run(source: &str, extra: &[&str]) -> Report {
    let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
    let (r, console) = snippet::run_with(images(), &assemble(source), &Env::default(), &extra)
        .expect("running QEMU");
    assert!(!console.timed_out, "host time limit hit:\n{}", console.text);
    r
}

/// `mov` of a 32-bit constant into x7, then `msr REG, x7` (x0, the tagged buffer, is kept).
fn set(reg: &str, v: u32) -> String {
    format!(
        "mov x7, #{:#x}\nmovk x7, #{:#x}, lsl #16\nmsr {reg}, x7\n",
        v & 0xffff,
        v >> 16
    )
}

/// Reads `reg` and fails unless it holds `want`: a load from the value read, whose fault
/// shows it (FAR_EL1) at this check (ELR_EL1).
fn expect(reg: &str, want: u32) -> String {
    format!(
        "mrs x5, {reg}\nmov x6, #{:#x}\nmovk x6, #{:#x}, lsl #16\ncmp x5, x6\nb.eq 1f\n\
         ldr x1, [x5]\nudf #0\n1:\n",
        want & 0xffff,
        want >> 16
    )
}

/// `counters` (number, type) programmed from zero and enabled with PMCR_EL0.E around LOADS
/// checked loads and STORES checked stores through x0, then PMCR_EL0.E cleared.
fn around_accesses(counters: &[(u8, u32)]) -> String {
    let mut s = String::new();
    for &(n, t) in counters {
        s += &set(&format!("pmevtyper{n}_el0"), t);
        s += &format!("msr pmevcntr{n}_el0, xzr\n");
    }
    let enable = counters.iter().fold(0, |m, &(n, _)| m | 1 << n);
    s += &set("pmcntenset_el0", enable);
    s += &set("pmcr_el0", 1);
    for _ in 0..LOADS {
        s += "ldr x1, [x0]\n";
    }
    for _ in 0..STORES {
        s += "str x1, [x0, #16]\n";
    }
    s + "msr pmcr_el0, xzr\n"
}

const P: u32 = 1 << 31;
const U: u32 = 1 << 30;
const LOADS: u32 = 5;
const STORES: u32 = 3;

/// Four counters, as perf would program `mem_access_checked_rd:k`, `_wr:k`,
/// `mem_access_checked:u` and `mem_access_checked` (the first has hardware behind it, the
/// others are the hypervisor's own), around 5 checked loads and 3 checked stores through x0's
/// tagged pointer at EL1: 5, 3, 0 and 8. Reads through PMSELR/PMXEVCNTR give the same.
fn counting_program() -> String {
    let mut s = around_accesses(&[
        (0, U | 0x4025),
        (1, U | 0x4026),
        (2, P | 0x4024),
        (3, 0x4024),
    ]);
    s += &expect("pmevcntr0_el0", LOADS);
    s += &expect("pmevcntr1_el0", STORES);
    s += &expect("pmevcntr2_el0", 0);
    s += &expect("pmevcntr3_el0", LOADS + STORES);
    s += &set("pmselr_el0", 3);
    s += &expect("pmxevcntr_el0", LOADS + STORES);
    s += &expect("pmxevtyper_el0", 0x4024);
    s += "ret\n9:\nudf #0\n";
    s
}

/// The same with runs, without, and on the reference path.
#[test]
fn a_guest_counts_its_own_checked_accesses_with_the_mte_events() {
    for mode in [&[][..], &["runs=0"], &["step=plain"]] {
        counts_its_own(mode);
    }
}

fn counts_its_own(mode: &[&str]) {
    let r = run(&counting_program(), mode);
    let text = mtex::output::matrix::text(&r);
    assert!(r.succeeded(), "{text}");
    let p = r.phase(snippet::PHASE).expect("the snippet's phase");
    let c = mtex::model::results::counters(p);
    // What the guest's counters counted, as the report names it: each counter's own.
    assert_eq!(
        c.get("guest_pmu.mem_access_checked_rd:k"),
        Some(&u64::from(LOADS)),
        "{c:#?}"
    );
    assert_eq!(
        c.get("guest_pmu.mem_access_checked_wr:k"),
        Some(&u64::from(STORES))
    );
    assert_eq!(
        c.get("guest_pmu.mem_access_checked:uk"),
        Some(&u64::from(LOADS + STORES))
    );
    assert_eq!(c.get("guest_pmu.mem_access_checked:u"), None);
    // The trace's own figures hold the guest's: the snippet's accesses and the harness's.
    assert!(c["mem_access_checked_rd:k"] >= u64::from(LOADS), "{c:#?}");
}

/// The guest sees the events and every counter the hardware has (the hypervisor's too); with
/// `mtex.guest_pmu_events=0` it sees the hardware's alone.
#[test]
fn the_events_are_advertised_unless_turned_off() {
    // PMCEID1_EL0 bits 36–38; PMCR_EL0.N (bits 15:11) the hardware's 6 on QEMU, where
    // HPMN is 1.
    let source = "mrs x5, pmceid1_el0\nubfx x5, x5, #36, #3\ncmp x5, #7\nb.ne 9f\n\
                  mrs x5, pmcr_el0\nubfx x5, x5, #11, #5\ncmp x5, #6\nb.ne 9f\nret\n9:\nudf #0\n";
    let r = run(source, &[]);
    assert!(r.succeeded(), "{}", mtex::output::matrix::text(&r));
    let off = source
        .replace("cmp x5, #7\nb.ne 9f\nmrs", "cmp x5, #0\nb.ne 9f\nmrs")
        .replace("#11, #5\ncmp x5, #6", "#11, #5\ncmp x5, #1");
    let r = run(&off, &["guest_pmu_events=0"]);
    assert!(r.succeeded(), "{}", mtex::output::matrix::text(&r));
}

/// A counter enabled outside the trace: the snippet's phase is traced, but a counter left
/// counting at its end counts untraced from there. A counter past the hardware's given an
/// event other than the three has nothing to count with. Both are problems, named.
#[test]
fn a_counter_that_cannot_count_exactly_is_a_problem() {
    let mut s = String::new();
    s += &set("pmevtyper1_el0", U | 0x4025);
    s += &set("pmevtyper2_el0", 0x11);
    s += &set("pmcntenset_el0", 0b110);
    s += &set("pmcr_el0", 1);
    s += "ldr x1, [x0]\nret\n";
    let r = run(&s, &[]);
    assert!(!r.succeeded(), "{}", mtex::output::matrix::text(&r));
    let named = |what: &str| r.problems.iter().filter(|p| p.contains(what)).count();
    assert_eq!(
        named("PMU counter 1 (mem_access_checked_rd"),
        1,
        "{:#?}",
        r.problems
    );
    assert_eq!(
        named("counted while nothing was traced whole"),
        1,
        "{:#?}",
        r.problems
    );
    assert_eq!(named("PMU counter 2 (cycles"), 1, "{:#?}", r.problems);
    assert_eq!(named("nothing to count"), 1, "{:#?}", r.problems);
}

/// Overflow: a counter with hardware behind it set 2 below the 32-bit wrap (PMCR_EL0.LP
/// clear) overflows at the snippet's second checked load, and a PMOVSSET read after it says
/// so; one set further off does not. The count goes on past bit 32 (FEAT_PMUv3p5).
#[test]
fn a_counter_overflows_where_the_architecture_says() {
    let mut s = String::new();
    s += &set("pmevtyper0_el0", U | 0x4025);
    s += &set("pmevtyper1_el0", U | 0x4025);
    s += "mov x5, #0xfffffffe\nmsr pmevcntr0_el0, x5\nmov x5, #0xfffffff0\nmsr pmevcntr1_el0, x5\n";
    s += &set("pmcntenset_el0", 0b11);
    s += &set("pmcr_el0", 1);
    s += "ldr x1, [x0]\n";
    s += &expect("pmovsset_el0", 0);
    s += "ldr x1, [x0]\n";
    s += &expect("pmovsset_el0", 0b01);
    s += "mrs x5, pmevcntr0_el0\nmov x6, #0x100000000\ncmp x5, x6\nb.ne 9f\n";
    s += &set("pmovsclr_el0", 0b11);
    s += &expect("pmovsset_el0", 0);
    s += "msr pmcr_el0, xzr\nret\n9:\nudf #0\n";
    let r = run(&s, &[]);
    assert!(r.succeeded(), "{}", mtex::output::matrix::text(&r));
}

/// At EL0 (PMUSERENR_EL0.EN, which the harness sets for an EL0 snippet): a counter of EL0
/// reads counts the snippet's 5 loads, one of EL1 reads none of them, and one of writes at
/// both ELs (past the hardware's counters) its 3 stores.
#[test]
fn an_el0_task_counts_its_own_accesses_by_el() {
    let mut s = around_accesses(&[(0, P | 0x4025), (1, U | 0x4025), (4, 0x4026)]);
    s += &expect("pmevcntr0_el0", LOADS);
    s += &expect("pmevcntr1_el0", 0);
    s += &expect("pmevcntr4_el0", STORES);
    s += "ret\n";
    let env = Env {
        el: 0,
        ..Env::default()
    };
    let (r, console) = snippet::run_with(images(), &assemble(&s), &env, &[]).expect("running QEMU");
    assert!(!console.timed_out, "host time limit hit");
    let text = mtex::output::matrix::text(&r);
    assert!(r.succeeded(), "{text}");
    let c = mtex::model::results::counters(r.phase(snippet::PHASE).expect("the phase"));
    assert_eq!(
        c.get("guest_pmu.mem_access_checked_rd:u"),
        Some(&u64::from(LOADS)),
        "{text}"
    );
    assert_eq!(
        c.get("guest_pmu.mem_access_checked_wr:uk"),
        Some(&u64::from(STORES))
    );
    assert_eq!(c.get("guest_pmu.mem_access_checked_rd:k"), None);
}

/// A guest that moves PMSELR_EL0 between an access and its read, puts 0x4025 on the cycle
/// counter and on a counter it does not have, disables and enables mid-run, resets with
/// PMCR_EL0.C and .P and writes the count: each counted by definition or ignored, and the
/// hypervisor's own PMU figures of the phase intact (the run's checks of them pass).
#[test]
fn hostile_orders_are_counted_by_definition() {
    let mut s = String::new();
    // The cycle counter through PMSELR 31: PMXEVTYPER is PMCCFILTR, which has no event.
    s += &set("pmselr_el0", 31);
    s += &set("pmxevtyper_el0", U | 0x4025);
    s += &expect("pmccfiltr_el0", U);
    // Counter 6 is past the guest's 6 (QEMU's N; PMEVTYPER6_EL0 itself is UNDEFINED
    // there): through PMSELR, ignored, read as zero.
    s += &set("pmselr_el0", 6);
    s += &set("pmxevtyper_el0", U | 0x4025);
    s += &expect("pmxevtyper_el0", 0);
    s += &set("pmevtyper2_el0", U | 0x4025);
    s += "msr pmevcntr2_el0, xzr\n";
    s += &set("pmcntenset_el0", 0b100);
    s += &set("pmcr_el0", 1);
    s += "ldr x1, [x0]\nldr x1, [x0]\nldr x1, [x0]\nldr x1, [x0]\n";
    s += &set("pmselr_el0", 5);
    s += &expect("pmxevcntr_el0", 0);
    s += &set("pmselr_el0", 2);
    s += &expect("pmxevcntr_el0", 4);
    // C resets the cycle counter only; P the event counters.
    s += &set("pmcr_el0", 1 | 4);
    s += &expect("pmevcntr2_el0", 4);
    s += &set("pmcr_el0", 1 | 2);
    s += &expect("pmevcntr2_el0", 0);
    // Disabled, two loads are not counted; enabled again, one is.
    s += &set("pmcntenclr_el0", 0b100);
    s += "ldr x1, [x0]\nldr x1, [x0]\n";
    s += &set("pmcntenset_el0", 0b100);
    s += "ldr x1, [x0]\n";
    s += &expect("pmevcntr2_el0", 1);
    // A written count goes on from the value written.
    s += &set("pmevcntr2_el0", 100);
    s += "ldr x1, [x0]\n";
    s += &expect("pmevcntr2_el0", 101);
    s += "msr pmcr_el0, xzr\nret\n";
    let r = run(&s, &[]);
    let text = mtex::output::matrix::text(&r);
    assert!(r.succeeded(), "{text}");
    let p = r.phase(snippet::PHASE).expect("the phase");
    let c = mtex::model::results::counters(p);
    // What counter 2 counted while it counted: 4, then 1, then 1.
    assert_eq!(
        c.get("guest_pmu.mem_access_checked_rd:k"),
        Some(&6),
        "{text}"
    );
    let s = p.stats.expect("the phase's statistics");
    assert!(!s.pmu_disturbed, "{text}");
}

/// The view the events count (`mtex.guest_pmu_events`): with SCTLR_EL1.TCF NONE, EL1's loads
/// through a tagged pointer are Tag Checked by the architecture (AmpereOne's PMU counts them)
/// and not by the Arm cores' rule (checks only where TCF can report). 5 loads give 5 in the
/// architecture's view and 0 in `tcf-elided`, under names that say which.
#[test]
fn the_view_is_the_one_asked_for_and_named() {
    let program = |want: u32| {
        let mut s = String::new();
        s += &set("pmevtyper0_el0", U | 0x4025);
        s += "msr pmevcntr0_el0, xzr\n";
        s += &set("pmcntenset_el0", 1);
        s += &set("pmcr_el0", 1);
        for _ in 0..LOADS {
            s += "ldr x1, [x0]\n";
        }
        s += "msr pmcr_el0, xzr\n";
        s += &expect("pmevcntr0_el0", want);
        s + "ret\n"
    };
    let env = Env {
        tcf: snippet::Tcf::None,
        ..Env::default()
    };
    for (option, want, name) in [
        (
            "guest_pmu_events=architectural",
            LOADS,
            "guest_pmu.mem_access_checked_rd:k",
        ),
        (
            "guest_pmu_events=tcf-elided",
            0,
            "guest_pmu.tcf_elided.mem_access_checked_rd:k",
        ),
    ] {
        let extra = [option.to_string()];
        let (r, _) = snippet::run_with(images(), &assemble(&program(want)), &env, &extra)
            .expect("running QEMU");
        let text = mtex::output::matrix::text(&r);
        assert!(r.succeeded(), "{option}: {text}");
        let c = mtex::model::results::counters(r.phase(snippet::PHASE).expect("the phase"));
        assert_eq!(
            c.get(name).copied().unwrap_or(0),
            u64::from(want),
            "{option}: {c:#?}"
        );
        // The other view's name is not there.
        assert!(
            c.keys()
                .filter(|k| k.starts_with("guest_pmu."))
                .all(|k| k == name),
            "{option}: {c:#?}"
        );
    }
}
