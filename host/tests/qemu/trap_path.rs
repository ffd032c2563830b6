//! The trap fast path (hyp/src/fast_step.rs) against its reference, the full path: the same
//! guest runs with `mtex.step=fast` and `mtex.step=plain` must give the same trapped writes in
//! the same order, the same per-phase counts and the same exit count, under `-icount shift=0`.

use mtex::model::report::{self, Report};
use mtex::qemu::{self, RunConfig};
use mtex_abi::report::GuestState;
use std::time::Duration;

use mtex::images::built as images;

fn boot(cmdline: &str) -> Report {
    boot_on(cmdline, 1, Duration::from_secs(60))
}

/// [`boot`] on `cpus` CPUs, within `timeout`.
fn boot_on(cmdline: &str, cpus: u32, timeout: Duration) -> Report {
    let cfg = RunConfig {
        cmdline: cmdline.to_string(),
        timeout,
        cpus,
        ..RunConfig::default()
    };
    let console = qemu::run(images(), &cfg).expect("running QEMU");
    assert!(!console.timed_out, "host time limit hit:\n{}", console.text);
    let r = report::parse(&console.text);
    assert!(
        r.succeeded(),
        "{cmdline}:\n{}",
        mtex::output::matrix::text(&r)
    );
    r
}

/// Every trapped write but its timestamp: register, old, new, where, phase.
type WriteKey = (&'static str, u64, u64, GuestState, Option<String>);

fn writes(r: &Report) -> Vec<WriteKey> {
    r.writes
        .iter()
        .map(|w| (w.register, w.old, w.new, w.at, w.phase.clone()))
        .collect()
}

/// Per phase: exits, exits with TCO, trapped writes, emulated instructions, EL1 and EL0
/// instructions (PMU), and its trace counts if traced.
fn phase_counts(r: &Report) -> Vec<String> {
    r.phases
        .iter()
        .map(|p| {
            let s = p
                .stats
                .unwrap_or_else(|| panic!("phase {} has no stats", p.name));
            assert!(!s.pmu_disturbed, "phase {}: PMU disturbed", p.name);
            assert!(s.el1_instructions.is_some(), "phase {}: no PMU", p.name);
            format!(
                "{}: exits {} with TCO {} writes {} emulated {} EL1 {:?} EL0 {:?} trace {:?}",
                p.name,
                s.exits,
                s.exits_with_tco,
                s.sysreg_writes,
                s.emulated,
                s.el1_instructions,
                s.el0_instructions,
                p.trace
            )
        })
        .collect()
}

/// Per phase, the guest clock's advance from its begin to its end (the hypervisor's debug
/// lines `phase N begins … guest clock C` and `phase N ends: … guest clock C`).
fn phase_clocks(r: &Report) -> Vec<(String, u64)> {
    let clock = |l: &str| -> Option<(String, bool, u64)> {
        let rest = &l[l.find("phase ")? + 6..];
        let (id, rest) = rest.split_once(' ')?;
        let c = rest.rsplit_once("guest clock ")?.1.trim().parse().ok()?;
        Some((id.to_string(), rest.starts_with("begins"), c))
    };
    let lines: Vec<_> = r.console.iter().filter_map(|l| clock(l)).collect();
    let out: Vec<_> = lines
        .iter()
        .filter(|(_, begins, _)| *begins)
        .map(|(id, _, begin)| {
            let end = lines
                .iter()
                .find(|(i, begins, _)| i == id && !begins)
                .unwrap_or_else(|| panic!("phase {id}: no end line"))
                .2;
            (id.clone(), end - begin)
        })
        .collect();
    assert_eq!(out.len(), r.phases.len(), "a clock line per phase");
    out
}

/// Asserts two lists equal, naming the first difference (the lists run to hundreds).
fn same_lists<T: PartialEq + std::fmt::Debug>(fast: &[T], plain: &[T], cmdline: &str, what: &str) {
    if let Some(i) = (0..fast.len().min(plain.len())).find(|&i| fast[i] != plain[i]) {
        panic!(
            "{cmdline}: {what} #{i} differ:\n fast:  {:?}\n plain: {:?}",
            fast[i], plain[i]
        );
    }
    assert_eq!(fast.len(), plain.len(), "{cmdline}: number of {what}");
}

/// Boots `cmdline` with the fast paths and with the reference path; asserts every record and
/// count equal and returns both reports (fast, plain).
fn same_either_way(cmdline: &str) -> (Report, Report) {
    // Breakpoint runs off: traced phases then step every instruction in both modes (runs
    // change the PMU's view of a traced phase by design), and only the fast paths differ.
    let fast = boot(&format!(
        "{cmdline} mtex.step=fast mtex.runs=0 mtex.log=debug"
    ));
    let plain = boot(&format!(
        "{cmdline} mtex.step=plain mtex.runs=0 mtex.log=debug"
    ));
    assert!(!writes(&plain).is_empty(), "{cmdline}: no trapped writes");
    same_lists(&writes(&fast), &writes(&plain), cmdline, "trapped writes");
    same_lists(
        &phase_counts(&fast),
        &phase_counts(&plain),
        cmdline,
        "phase counts",
    );
    // Guest time is exact on either path: each phase lasts as long on the guest's clock.
    same_lists(
        &phase_clocks(&fast),
        &phase_clocks(&plain),
        cmdline,
        "phase lengths on the guest clock",
    );
    let exits = |r: &Report| r.summary.unwrap().exits;
    assert_eq!(
        exits(&fast),
        exits(&plain),
        "{cmdline}: the Summary's exits"
    );
    for r in [&fast, &plain] {
        each_phase_counts_its_writes(r, cmdline);
    }
    (fast, plain)
}

/// Each phase of `r` counts its own writes, as many as it has records.
fn each_phase_counts_its_writes(r: &Report, what: &str) {
    for p in &r.phases {
        let n = r
            .writes
            .iter()
            .filter(|w| w.phase.as_deref() == Some(p.name.as_str()))
            .count() as u64;
        assert_eq!(p.stats.unwrap().sysreg_writes, n, "{what}: {}", p.name);
    }
}

/// EL2 instructions per trapped write in the bench program (framing excluded), as
/// `mtex bench traps` computes it.
fn el2_per_write(r: &Report, n: u64) -> f64 {
    let trap_path = |name: &str| {
        let s = r.phase(name).unwrap().stats.unwrap();
        (s.el2_instructions.unwrap() - s.el2_report_instructions.unwrap()) as f64
    };
    (trap_path("bench-2n") - trap_path("bench-n")) / n as f64
}

#[test]
fn the_controls_walk_is_the_same_through_the_trap_fast_path() {
    same_either_way("mtex.guest=controls");
}

#[test]
fn the_controls_walk_under_tvm_is_the_same_through_the_trap_fast_path() {
    let (fast, _) = same_either_way("mtex.guest=controls mtex.traps=tvm");
    // Under TVM other registers trap too (and take the full path) between the fast ones.
    assert!(
        fast.writes
            .iter()
            .any(|w| w.register != "SCTLR_EL1" && w.register != "TCR_EL1")
    );
}

#[test]
fn more_writes_than_the_ring_holds_are_the_same_and_the_fast_path_ran() {
    // 300 and 600 writes: the ring (128 entries) fills, and the full path takes the write
    // that finds it full, so both paths alternate within each phase.
    let n = 300;
    let (fast, plain) = same_either_way(&format!("mtex.guest=bench-traps mtex.bench_n={n}"));
    assert_eq!(
        fast.phase("bench-2n").unwrap().stats.unwrap().sysreg_writes,
        2 * n
    );
    let (f, p) = (el2_per_write(&fast, n), el2_per_write(&plain, n));
    assert!(
        f < p / 2.0,
        "EL2 instructions per trapped write: fast {f:.1}, plain {p:.1}"
    );
}

#[test]
fn traced_phases_see_the_controls_the_fast_path_wrote_between_them() {
    // The trace program writes each phase's controls before it, untraced (the fast path):
    // the step engine's predicate must judge every access the same as after the full path.
    let (fast, _) = same_either_way("mtex.guest=trace");
    assert!(fast.phases.iter().all(|p| p.trace.is_some()));
    assert!(fast.writes.iter().any(|w| w.phase.is_none()));
}

/// The guest kernel on four CPUs, each CPU applying each run's policy itself between the
/// traced phases (SCTLR_EL1 and TCR_EL1 writes, untraced: through the boot CPU's fast path
/// until it starts the others, the full path after): with `mtex.step=fast` each CPU's writes
/// come out as with the full path alone, under that CPU and in the same phase, the Summary
/// counts the same exits, and every traced phase counts as many writes as it has records.
#[test]
fn on_four_cpus_each_cpus_writes_are_the_same_either_way() {
    const CPUS: u32 = 4;
    let on_four = |step: &str| {
        let cmdline = format!(
            "mtex.guest=kernel mtex.watchdog_ms=600000 mtex.cpus={CPUS} mtex.hz=0 \
             mtex.trace=only mtex.policies=entry-tco,tcma1,kasan-sync \
             mtex.workloads=getpid,futex-hash mtex.step={step}"
        );
        boot_on(&cmdline, CPUS, Duration::from_secs(300))
    };
    let (fast, plain) = (on_four("fast"), on_four("plain"));
    // Each CPU's writes in its own order; the CPUs interleave as each path's timing lets them.
    let by_cpu = |r: &Report, cpu: u32| -> Vec<WriteKey> {
        r.writes
            .iter()
            .filter(|w| w.cpu == cpu)
            .map(|w| (w.register, w.old, w.new, w.at, w.phase.clone()))
            .collect()
    };
    for cpu in 0..CPUS {
        let f = by_cpu(&fast, cpu);
        assert!(!f.is_empty(), "CPU {cpu}: no trapped writes");
        same_lists(
            &f,
            &by_cpu(&plain, cpu),
            &format!("CPU {cpu}"),
            "trapped writes",
        );
    }
    for r in [&fast, &plain] {
        each_phase_counts_its_writes(r, "four CPUs");
    }
    let exits = |r: &Report| r.summary.unwrap().exits;
    assert_eq!(exits(&fast), exits(&plain), "the Summary's exits");
}
