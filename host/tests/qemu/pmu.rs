//! The PMU backend on QEMU (`-icount shift=0`): per-EL cycles and instructions of untraced
//! passes, events the CPU lacks, and re-runs when a run's events need more counters than
//! the hypervisor has free. (A guest that takes over the PMU: hostile.rs.)

use mtex::model::report::{self, Report};
use mtex::qemu::{self, RunConfig};
use mtex_abi::report::{ExitReason, PmuValue, pmu_event};
use std::time::Duration;

use mtex::images::built as images;

fn boot(cmdline: &str) -> Report {
    let cfg = RunConfig {
        cmdline: format!("mtex.guest=kernel mtex.watchdog_ms=600000 {cmdline}"),
        timeout: Duration::from_secs(120),
        ..RunConfig::default()
    };
    let console = qemu::run(images(), &cfg).expect("running QEMU");
    assert!(!console.timed_out, "host time limit hit:\n{}", console.text);
    report::parse(&console.text)
}

#[test]
fn the_mte_events_are_not_supported_on_qemu_never_zero() {
    let r = boot("mtex.policies=entry-tco mtex.workloads=getpid");
    assert!(r.succeeded(), "{:?}", r.problems);
    let p = &r.phases[0];
    for event in [
        pmu_event::MEM_ACCESS_CHECKED_RD,
        pmu_event::MEM_ACCESS_CHECKED_WR,
    ] {
        for el in [0, 1] {
            assert_eq!(p.pmu(event, el), Some(PmuValue::NotSupported));
        }
    }
    let out = mtex::model::results::run("run", 0, &r);
    let c = &out.phases[0];
    assert_eq!(c.not_supported.len(), 4, "{:?}", c.not_supported);
    assert!(
        c.counters
            .keys()
            .all(|k| !k.starts_with("untraced.mem_access_checked")),
        "a missing event must not appear as a count"
    );
    let text =
        mtex::output::full::render(&mtex::model::results::Results::new(None, vec![out], vec![]));
    assert!(
        text.contains("<not supported>      untraced.mem_access_checked_rd:k"),
        "{text}"
    );
}

#[test]
fn a_run_that_requires_the_mte_events_fails_at_boot_naming_them() {
    let r = boot("mtex.pmu_require=0x4026 mtex.policies=entry-tco mtex.workloads=getpid");
    assert!(!r.succeeded());
    assert!(r.phases.is_empty(), "nothing ran");
    match r.summary.map(|s| s.exit) {
        Some(ExitReason::BootFailed { reason }) => {
            let reason = reason.as_str();
            assert!(
                reason.contains("0x4026") && reason.contains("not supported"),
                "{reason}"
            );
        }
        other => panic!("expected a boot failure, got {other:?}"),
    }
}

#[test]
fn events_past_the_free_counters_rerun_the_work_and_give_the_same_totals() {
    // QEMU has 6 counters: the guest keeps one, three count instructions, two are free per
    // phase. Cycles take the first pass; raw cycles and raw instructions one more each.
    let r = boot(
        "mtex.hz=0 mtex.pmu_events=0x11,0x8 mtex.policies=entry-tco \
         mtex.workloads=getpid,futex-hash",
    );
    assert!(r.succeeded(), "{:?}", r.problems);
    assert!(r.notes.is_empty(), "{:?}", r.notes);
    assert_eq!(r.phases.len(), 2);
    for p in &r.phases {
        let t = p.trace.unwrap();
        let u = p.untraced.as_ref().unwrap();
        assert_eq!((u.passes, u.runs.len()), (3, 3), "{}", p.name);
        // Every pass ran the same work: its fixed counters say so, instruction for
        // instruction, and so does the trace of the traced phase.
        for pass in &u.runs {
            let s = pass.stats.unwrap();
            assert_eq!(
                (s.el1_instructions, s.el0_instructions),
                (Some(t.instructions_el1), Some(t.instructions_el0)),
                "{} pass {}",
                p.name,
                pass.id
            );
        }
        // Each event was counted in its own pass, and agrees with the first pass's figures.
        let raw = |event, el| u.get(event, el, true);
        for (el, instructions) in [(1, t.instructions_el1), (0, t.instructions_el0)] {
            assert_eq!(
                p.pmu(pmu_event::CPU_CYCLES, el),
                raw(0x11, el),
                "{}",
                p.name
            );
            assert_eq!(
                raw(0x08, el),
                Some(PmuValue::Counted(instructions)),
                "{}",
                p.name
            );
        }
        let ids: Vec<u32> = u.runs.iter().map(|r| r.id).collect();
        assert!(ids.windows(2).all(|w| w[1] == w[0] + 1), "{ids:?}");
        assert!(ids[2] < p.id, "the passes come before the traced phase");
    }
}

#[test]
fn msr_tco_writes_watched_with_breakpoints_equal_the_traces_site_by_site() {
    // Untraced only: each run's passes after the PMU's watch the image's MSR TCO sites, six
    // breakpoints at a time, and emulate each hit. The same runs traced count every MSR TCO
    // by stepping. No tick, so both do the same work.
    let runs = "mtex.hz=0 mtex.policies=entry-tco,uaccess-tco \
                mtex.workloads=getpid,futex-hash,memcached";
    let watched = boot(&format!("mtex.trace=0 {runs}"));
    let traced = boot(&format!("mtex.trace=only {runs}"));
    for r in [&watched, &traced] {
        assert!(r.succeeded(), "{:?}", r.problems);
    }
    assert!(watched.notes.is_empty(), "{:?}", watched.notes);
    assert_eq!(watched.phases.len(), traced.phases.len());
    let mut any_writes = false;
    for (w, t) in watched.phases.iter().zip(&traced.phases) {
        assert_eq!(w.params, t.params);
        let u = w.untraced.as_ref().unwrap();
        let total = u.tco().unwrap();
        assert!(total.complete(), "{}: {total:?}", w.name);
        let trace = t.trace.unwrap();
        assert_eq!(
            total.writes_el0 + total.writes_el1,
            trace.tco_writes,
            "{}",
            w.name
        );
        any_writes |= trace.tco_writes > 0;
        // Site by site, value by value.
        let sites = |list: &mut Vec<(u64, bool, u64)>| {
            list.sort();
            list.clone()
        };
        let mut seen: Vec<_> = u
            .runs
            .iter()
            .flat_map(|p| &p.tco_sites)
            .map(|s| (s.pc, s.value, s.count))
            .collect();
        let mut stepped: Vec<_> = t
            .tco_sites
            .iter()
            .map(|s| (s.pc, s.value, s.count))
            .collect();
        assert_eq!(sites(&mut seen), sites(&mut stepped), "{}", w.name);
        // The watch passes ran the same work: what the PMU did not count is what was
        // emulated (the report's note would say otherwise).
        let first = u.runs[0].stats.unwrap();
        assert_eq!(first.el1_instructions, Some(trace.instructions_el1));
    }
    assert!(any_writes, "no MSR TCO to watch");
}

#[test]
fn a_guest_that_does_not_repeat_its_work_gets_not_counted_never_a_figure() {
    // hostile-cpu opens its phases without PHASE_REPEATABLE: the raw event's pass will never
    // run, so it is reported as not counted (a note), and no pass is asked for.
    let r = boot("mtex.guest=hostile-cpu mtex.pmu_events=0x8");
    assert!(r.succeeded(), "{:?}", r.problems);
    let u = r.phases[1].untraced.as_ref().unwrap();
    assert_eq!((u.passes, u.runs.len()), (1, 1));
    assert_eq!(u.get(0x08, 1, true), Some(PmuValue::NotCounted));
    assert!(matches!(
        r.phases[1].pmu(pmu_event::CPU_CYCLES, 1),
        Some(PmuValue::Counted(n)) if n > 0
    ));
    assert!(
        r.notes.iter().any(|n| n.contains("not counted")),
        "{:?}",
        r.notes
    );
    let out = mtex::model::results::run("run", 0, &r);
    assert_eq!(
        out.phases[1].not_counted,
        ["untraced.raw.0x0008:k", "untraced.raw.0x0008:u"]
    );
}
