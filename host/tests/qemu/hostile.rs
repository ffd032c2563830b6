//! Guests that try to fool the hypervisor (`guest/src/selftest/`), under `-icount shift=0`.
//! Each takes state the step engine or the counters depend on — the debug registers, the
//! PMU, WFI/WFE, the ID registers — around a traced loop of `HOSTILE_N` tagged loads, and
//! the report must still give the loop's own arithmetic, or say why it cannot.

use mtex::model::report::{self, Phase, Report};
use mtex::qemu::{self, RunConfig};
use mtex_abi::program::{END_CALL_INSTRUCTIONS, HOSTILE_N};
use mtex_abi::report::{ExitReason, PmuValue};
use mtex_arch::{DebugReg, esr::SysRegIss};
use mtex_trace::counts::ByEl;
use std::time::Duration;

use mtex::images::built as images;

fn boot(cmdline: &str) -> Report {
    let cfg = RunConfig {
        cmdline: cmdline.to_string(),
        timeout: Duration::from_secs(120),
        ..RunConfig::default()
    };
    let console = qemu::run(images(), &cfg).expect("running QEMU");
    assert!(!console.timed_out, "host time limit hit:\n{}", console.text);
    report::parse(&console.text)
}

/// The loop `1: ldr x12, [x9]; <extra>; subs; b.ne 1b` run HOSTILE_N times, with `before`
/// instructions ahead of it in the phase, then the phase-end call: EL1 instructions, and one
/// checked read per iteration (tag matches, TCF sync, nothing turns checking off).
fn assert_loop_counts(r: &Report, p: &Phase, before: u64, extra: u64) {
    let t = p.trace.unwrap_or_else(|| panic!("{}: no trace", p.name));
    let n = HOSTILE_N;
    let instructions = before + n * (3 + extra) + END_CALL_INSTRUCTIONS;
    assert_eq!(
        (t.instructions_el1, t.instructions_el0),
        (instructions, 0),
        "{}: instructions",
        p.name
    );
    let reads = ByEl {
        rd_k: n,
        ..ByEl::default()
    };
    assert_eq!(t.accesses, reads, "{}: accesses", p.name);
    assert_eq!(t.architectural, reads, "{}: architectural", p.name);
    assert_eq!(t.tcf_elided, reads, "{}: elided", p.name);
    assert_eq!((t.unknown_mem, t.runs_lost), (0, 0), "{}", p.name);
    // The PMU counts independently. QEMU's counts an instruction that trapped to EL2 and
    // was emulated, as the trace does (it completed for the guest); it does not count the
    // loop's back-edge branches the step engine executed at the end of each run.
    let s = p.stats.unwrap();
    assert!(!s.pmu_disturbed, "{}: PMU disturbed", p.name);
    let [el1, _] = r.pmu_expected(p).unwrap();
    let branches = r
        .engines
        .iter()
        .find(|e| e.id == p.id)
        .map_or(0, |e| e.branches_el1);
    assert_eq!(el1, instructions - branches, "{}", p.name);
    assert_eq!(s.el1_instructions, Some(el1), "{}: PMU vs trace", p.name);
}

fn debug_reg(iss: u32) -> DebugReg {
    DebugReg::from_iss(SysRegIss::from_iss(iss)).expect("a debug register")
}

#[test]
fn os_locks_and_a_guest_breakpoint_do_not_stop_or_fool_the_step_engine() {
    let r = boot("mtex.guest=hostile-debug");
    assert!(r.succeeded(), "{}", mtex::output::matrix::text(&r));
    assert_eq!(r.phases.len(), 2);
    // Both locks set before phase 1 (the guest's shadow took them)...
    assert_loop_counts(&r, &r.phases[0], 0, 0);
    // ...and its own breakpoint on the traced load, enabled, in phase 2.
    assert_loop_counts(&r, &r.phases[1], 0, 0);
    let writes: Vec<_> = r
        .debug_writes
        .iter()
        .map(|w| (debug_reg(w.iss), w.value, w.phase))
        .collect();
    assert_eq!(
        &writes[..2],
        &[(DebugReg::Osdlr, 1, 0), (DebugReg::Oslar, 1, 0)]
    );
    assert_eq!(writes[2].0, DebugReg::Bvr(0));
    assert_eq!(writes[3], (DebugReg::Bcr(0), 0x1e7, 0));
    assert_eq!(writes[4].0, DebugReg::Mdscr);
    assert_eq!(writes.len(), 5);
    // Reads give the guest its own view back: OS Lock and Double Lock set, breakpoint on.
    assert!(
        r.console
            .iter()
            .any(|l| l == "hostile-debug oslsr=0xa osdlr=0x1 dbgbcr0=0x1e7"),
        "{:?}",
        r.console
    );
}

#[test]
fn a_guest_resetting_the_pmu_never_touches_the_hypervisors_counters() {
    let r = boot("mtex.guest=hostile-cpu");
    assert!(r.succeeded(), "{}", mtex::output::matrix::text(&r));
    let p = &r.phases[0];
    // Seven instructions before the loop: six PMU writes (trapped, emulated) and a mov.
    assert_loop_counts(&r, p, 7, 0);
    let s = p.stats.unwrap();
    assert_eq!((s.emulated, s.guest_pmu_accesses), (6, 6));
    // The same take-over untraced, where the hypervisor's per-phase counters count cycles:
    // they and the fixed instruction counters still count exactly the phase's own work.
    let u = &r.phases[1];
    assert!(u.trace.is_none(), "{} was traced", u.name);
    let instructions = 7 + 3 * HOSTILE_N + END_CALL_INSTRUCTIONS;
    let s = u.stats.unwrap();
    assert!(!s.pmu_disturbed);
    assert_eq!(
        (s.el1_instructions, s.el0_instructions),
        (Some(instructions), Some(0))
    );
    let cycles = mtex_abi::report::pmu_event::CPU_CYCLES;
    // Under -icount shift=0 QEMU's cycle counter advances one per instruction.
    assert_eq!(u.pmu(cycles, 1), Some(PmuValue::Counted(instructions)));
    assert_eq!(u.pmu(cycles, 0), Some(PmuValue::Counted(0)));
    // The guest sees HPMN counters (QEMU has 6; the hypervisor keeps all but one: three
    // fixed instruction counters and two per-phase ones) and, for the MTE events, the
    // hypervisor's five as its own (its counter 5, which the body zeroes, is one of those:
    // never the hardware's), and no FEAT_MOPS.
    assert!(
        r.console
            .iter()
            .any(|l| l == "hostile-cpu pmcr.n=6 isar2.mops=0"),
        "{:?}",
        r.console
    );
}

#[test]
fn wfi_counts_as_executed_and_a_wfe_spin_meets_the_watchdog() {
    let r = boot("mtex.guest=hostile-wfx mtex.watchdog_ms=50");
    // Traced: QEMU completes a stepped WFI as a step, without the trap; each counts once.
    assert_loop_counts(&r, &r.phases[0], 0, 1);
    // Untraced: every WFI traps and completes at once.
    let s = r.phases[1].stats.unwrap();
    assert_eq!((s.wfx_traps, s.emulated), (HOSTILE_N, HOSTILE_N));
    assert_eq!(
        s.el1_instructions,
        Some(4 * HOSTILE_N + END_CALL_INSTRUCTIONS)
    );
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    match r.summary.unwrap().exit {
        ExitReason::Watchdog { budget_ms, at } => {
            assert_eq!((budget_ms, at.el), (50, 1));
        }
        other => panic!("expected the watchdog, got {other:?}"),
    }
}

#[test]
fn a_guest_writing_the_report_uart_is_stopped_by_stage_2() {
    let r = boot("mtex.guest=hostile-uart");
    assert!(!r.succeeded());
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    // The guest's tree lists the report UART where the machine has it.
    let uart = r.boot.unwrap().console;
    assert_eq!(uart, mtex_platform::qemu_virt::UART_BASE);
    match r.summary.unwrap().exit {
        ExitReason::UnhandledGuestExit { esr, hpfar, at, .. } => {
            assert_eq!(esr >> 26, 0x24, "data abort from a lower EL");
            assert_eq!((hpfar, at.el), (uart, 1));
        }
        other => panic!("expected a stage-2 fault, got {other:?}"),
    }
    assert!(!r.console.iter().any(|l| l.contains("took the write")));
}

#[test]
fn an_aliased_vector_does_not_hide_completed_loads() {
    let r = boot("mtex.guest=hostile-vector");
    assert!(r.succeeded(), "{}", mtex::output::matrix::text(&r));
    // One branch to the loop before it; no exception is taken, so no kernel entry either.
    assert_loop_counts(&r, &r.phases[0], 1, 0);
    assert_eq!(r.phases[0].trace.unwrap().entries.total(), 0);
}

#[test]
fn code_rewritten_under_a_run_by_an_uncounted_store_is_counted_as_executed() {
    // guest/src/selftest/stack_patch.rs: each iteration is ldr, three moves around an
    // SP-based store that turns the site's first add into `b .+8`, a branch to the site,
    // then that branch (the add it replaced and the next one skipped: the store precedes it
    // even in the first iteration), subs, b.ne; then ret, and around the call mov + blr and
    // the phase-end call.
    let n = HOSTILE_N;
    let expected = 9 * n + 1 + 2 + END_CALL_INSTRUCTIONS;
    let rw = ByEl {
        rd_k: n,
        wr_k: n,
        ..ByEl::default()
    };
    // Stepped, every instruction is read just before it runs; with breakpoint runs, no run
    // may execute a store that reaches its own code page (the SP-based store's address is
    // translated when the run is armed, `mtex_trace::run`): the same counts, exactly.
    for cmdline in [
        "mtex.guest=hostile-stack-patch mtex.step=plain",
        "mtex.guest=hostile-stack-patch",
    ] {
        let r = boot(cmdline);
        assert!(
            r.succeeded(),
            "{cmdline}: {}",
            mtex::output::matrix::text(&r)
        );
        let t = r.phases[0].trace.unwrap();
        assert_eq!(
            (t.instructions_el1, t.instructions_el0),
            (expected, 0),
            "{cmdline}"
        );
        assert_eq!(t.accesses, rw, "{cmdline}");
        assert_eq!(t.runs_lost, 0, "{cmdline}");
    }
}

#[test]
fn code_rewritten_in_place_is_counted_as_the_new_code() {
    // Breakpoint runs on: the eight adds are a stretch worth a run, planned once.
    let r = boot("mtex.guest=hostile-patch mtex.runs=1");
    assert!(r.succeeded(), "{}", mtex::output::matrix::text(&r));
    let t = r.phases[0].trace.unwrap();
    let n = HOSTILE_N;
    // Three calls of the loop: ldr, eight adds, subs, b.ne (11 per iteration) and ret; then
    // patched: ldr, b, subs, b.ne (4); then restored (11). Around them: mov + blr before
    // each call, str + dsb + isb for each rewrite, and the phase-end call.
    let expected = (11 + 4 + 11) * n + 3 + 3 * 2 + 2 * 3 + END_CALL_INSTRUCTIONS;
    assert_eq!((t.instructions_el1, t.instructions_el0), (expected, 0));
    // The loads, and the two stores that rewrote the code (tag 0 pointer, tag 0 memory).
    let accesses = ByEl {
        rd_k: 3 * n,
        wr_k: 2,
        ..ByEl::default()
    };
    assert_eq!((t.accesses, t.architectural), (accesses, accesses));
    assert!(
        t.runs > 0,
        "the stretch ran between breakpoints, not stepped"
    );
    assert_eq!(t.runs_lost, 0);
    let s = r.phases[0].stats.unwrap();
    // The loop's back-edge branches that ended a run were executed by the hypervisor: the
    // CPU's PMU never saw them.
    let branches = r.engines[0].branches_el1;
    assert!(branches > 0, "the loop's back edge ends its runs");
    assert_eq!(
        s.el1_instructions,
        Some(expected - branches),
        "PMU vs trace"
    );
}

#[test]
fn a_loop_of_exclusive_pairs_is_traced_to_its_end_and_failed_stores_make_no_access() {
    let r = boot("mtex.guest=hostile-exclusive");
    assert!(r.succeeded(), "{}", mtex::output::matrix::text(&r));
    let t = r.phases[0].trace.unwrap();
    let n = HOSTILE_N;
    // ldxr, add, stxr, subs, b.ne per iteration, then the phase-end call.
    assert_eq!(t.instructions_el1, 5 * n + END_CALL_INSTRUCTIONS);
    assert_eq!((t.accesses.rd_k, t.architectural.rd_k), (n, n));
    // Each store-exclusive either wrote (a checked write) or failed (no access at all).
    assert_eq!(t.accesses.wr_k + t.failed_store_exclusives, n);
    assert_eq!(t.architectural.wr_k, t.accesses.wr_k);
    // Breakpoint runs (the default) carry each pair unstepped, from the LDXR to just after
    // the STXR: nothing clears the monitor between them on one CPU, so every store writes.
    assert_eq!(t.failed_store_exclusives, 0);
    assert_eq!(t.accesses.wr_k, n);

    // Stepped, every ERET clears QEMU's monitor: all of them fail there, and none is
    // counted as a write.
    let r = boot("mtex.guest=hostile-exclusive mtex.runs=0");
    assert!(r.succeeded(), "{}", mtex::output::matrix::text(&r));
    let t = r.phases[0].trace.unwrap();
    assert_eq!(t.instructions_el1, 5 * n + END_CALL_INSTRUCTIONS);
    assert_eq!((t.failed_store_exclusives, t.accesses.wr_k), (n, 0));
}

#[test]
fn what_the_arm_arm_leaves_to_the_cpu_is_counted_and_said_never_silent() {
    let r = boot("mtex.guest=hostile-impdef");
    let n = HOSTILE_N;
    let phase = |name: &str| {
        let p = r.phases.iter().find(|p| p.name == name).unwrap();
        p.trace.unwrap_or_else(|| panic!("{name}: no trace"))
    };
    // Per iteration a CAS that passes, one that fails and a CASP that fails: each one read
    // and one write, judged alike (all checked); the two failed compares noted.
    let t = phase("cas");
    assert_eq!(t.instructions_el1, 9 * n + END_CALL_INSTRUCTIONS);
    let both = ByEl {
        rd_k: 3 * n,
        wr_k: 3 * n,
        ..ByEl::default()
    };
    assert_eq!((t.accesses, t.architectural), (both, both));
    assert_eq!((t.failed_cas, t.unknown_mem), (2 * n, 0));
    // Rs = XZR: what it read is lost, so whether it wrote is not known: not judged.
    let t = phase("cas-xzr");
    assert_eq!((t.unknown_mem, t.accesses), (n, ByEl::default()));
    assert_eq!(t.failed_cas, 0);
    // LDXR checked, STXR under TCO: each pair mixed (a run carries it, so every store writes).
    let t = phase("exclusive-mixed");
    assert_eq!(t.exclusive_pairs_mixed, n);
    assert_eq!((t.architectural.rd_k, t.architectural.wr_k), (n, 0));
    assert_eq!((t.accesses.rd_k, t.accesses.wr_k), (n, n));
    // Loads from the tagged page mapped Non-shareable, then with SCTLR_EL1.C = 0: checked in
    // the architectural view, each one resting on the CPU's choice.
    for name in ["non-shareable", "uncached"] {
        let t = phase(name);
        assert_eq!((t.architectural.rd_k, t.tagged_impdef), (n, n), "{name}");
    }
    // The other phases' accesses are on Tagged Inner Shareable memory with the caches on.
    assert_eq!(phase("cas").tagged_impdef, 0);
    // The report says each: the failed compares as a note, the rest as problems.
    let text = mtex::output::matrix::text(&r);
    assert!(
        text.contains(&format!("{} CAS whose compare failed", 2 * n)),
        "{text}"
    );
    let said = |what: &str| r.problems.iter().filter(|p| p.contains(what)).count();
    assert_eq!(
        said("load/store instructions the decoder does not model"),
        1
    );
    assert_eq!(said("Tag Checked otherwise than their load-exclusive"), 1);
    assert_eq!(said("mapped Non-shareable or with SCTLR_EL1.C = 0"), 2);
    assert!(!r.succeeded(), "problems make the run fail");
}

#[test]
fn a_yield_spin_meets_the_watchdog() {
    // YIELD cannot be trapped; under -icount shift=0 QEMU's clock advances only slowly through
    // it (50 ms of budget: several seconds of wall time), but it advances.
    let r = boot("mtex.guest=hostile-yield mtex.watchdog_ms=50");
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    match r.summary.unwrap().exit {
        ExitReason::Watchdog { budget_ms, at } => assert_eq!((budget_ms, at.el), (50, 1)),
        other => panic!("expected the watchdog, got {other:?}"),
    }
}

// The EL1 exception loop (`hostile-abort-loop`), which stops the guest's clock, is in
// host/tests/qemu/builtin_guest.rs (`a_guest_whose_clock_stops_is_ended_by_the_host_at_once`): the host
// ends it and names where the guest was.

#[test]
fn code_whose_mapping_is_switched_is_counted_as_the_new_page() {
    let r = boot("mtex.guest=hostile-remap");
    assert!(r.succeeded(), "{}", mtex::output::matrix::text(&r));
    let t = r.phases[0].trace.unwrap();
    let n = HOSTILE_N;
    // mov + blr; in A: its loop (3 per iteration) and the five-instruction switch; then, at
    // A's VA but from B's page: mov, B's loop (3 per iteration, no load) and ret; back in
    // the caller the five-instruction switch back; and the phase-end call.
    let expected = 2 + 3 * n + 5 + 1 + 3 * n + 1 + 5 + END_CALL_INSTRUCTIONS;
    assert_eq!((t.instructions_el1, t.instructions_el0), (expected, 0));
    // A's loads only; the two stores are to the page table (tag 0 pointer, tag 0 memory).
    let accesses = ByEl {
        rd_k: n,
        wr_k: 2,
        ..ByEl::default()
    };
    assert_eq!((t.accesses, t.architectural), (accesses, accesses));
}

#[test]
fn code_remapped_without_a_tlbi_then_tcr_rewritten_is_counted_as_the_new_page() {
    // guest/src/selftest/remap.rs, phase 2: as phase 1, with TCR_EL1 written with its own
    // value where phase 1 has a TLBI. The trapped write drops the engine's translation of the
    // code page, stepped and in runs alike.
    let n = HOSTILE_N;
    let expected = 2 + 3 * n + 5 + 1 + 3 * n + 1 + 5 + END_CALL_INSTRUCTIONS;
    let accesses = ByEl {
        rd_k: n,
        wr_k: 2,
        ..ByEl::default()
    };
    for cmdline in [
        "mtex.guest=hostile-remap mtex.step=plain",
        "mtex.guest=hostile-remap",
    ] {
        let r = boot(cmdline);
        assert!(
            r.succeeded(),
            "{cmdline}: {}",
            mtex::output::matrix::text(&r)
        );
        let p = r.phase("remapped-code-tcr").expect("the TCR phase");
        let t = p.trace.unwrap();
        assert_eq!(
            (t.instructions_el1, t.instructions_el0),
            (expected, 0),
            "{cmdline}"
        );
        assert_eq!(
            (t.accesses, t.architectural),
            (accesses, accesses),
            "{cmdline}"
        );
    }
}

#[test]
fn code_rewritten_through_an_alias_of_its_page_is_counted_as_executed() {
    // guest/src/selftest/stack_patch.rs, phase 2: mov + blr; per iteration a checkable store
    // through the alias that makes the site a load, dsb, isb, the load, a store that puts the
    // add back, dsb, isb, subs, b.ne; ret; the phase-end call. The stores (tag 0 pointer,
    // tag 0 memory) and the loads are all checked.
    let n = HOSTILE_N;
    let expected = 2 + 9 * n + 1 + END_CALL_INSTRUCTIONS;
    let rw = ByEl {
        rd_k: n,
        wr_k: 2 * n,
        ..ByEl::default()
    };
    for cmdline in [
        "mtex.guest=hostile-stack-patch mtex.step=plain",
        "mtex.guest=hostile-stack-patch",
    ] {
        let r = boot(cmdline);
        assert!(
            r.succeeded(),
            "{cmdline}: {}",
            mtex::output::matrix::text(&r)
        );
        let t = r
            .phase("alias-patch")
            .expect("the alias phase")
            .trace
            .unwrap();
        assert_eq!(
            (t.instructions_el1, t.instructions_el0),
            (expected, 0),
            "{cmdline}"
        );
        assert_eq!((t.accesses, t.architectural), (rw, rw), "{cmdline}");
    }
}

#[test]
fn a_rewritten_or_moved_msr_tco_under_the_watch_is_a_problem_never_a_total() {
    let r = boot("mtex.guest=hostile-tco-patch");
    // The untouched loop: every write at its one site, watched in whichever pass holds it.
    let plain = r.phase("tco-loop").expect("tco-loop");
    let total = plain.untraced.as_ref().and_then(|u| u.tco()).unwrap();
    assert!(total.complete(), "{total:?}");
    assert_eq!((total.writes_el1, total.writes_el0), (HOSTILE_N, 0));
    let sites: Vec<_> = plain
        .untraced
        .iter()
        .flat_map(|u| &u.runs)
        .flat_map(|p| &p.tco_sites)
        .map(|s| (s.value, s.count))
        .collect();
    assert_eq!(sites, [(false, HOSTILE_N)]);
    // The rewritten one: the watch sees its site hold a NOP, stops, and the run says so.
    let patched = r.phase("tco-rewritten").expect("tco-rewritten");
    let total = patched.untraced.as_ref().and_then(|u| u.tco()).unwrap();
    assert_eq!((total.lost, total.writes_el1), (1, HOSTILE_N));
    // The moved one: the watch passes scan again, see the sites moved since the first pass,
    // and say so; watching the old place alone would have counted 0 writes as the total.
    let moved = r.phase("tco-moved").expect("tco-moved");
    let total = moved.untraced.as_ref().and_then(|u| u.tco()).unwrap();
    assert!(total.lost > 0 && !total.complete(), "{total:?}");
    assert_eq!(r.problems.len(), 2, "{:?}", r.problems);
    for (problem, phase) in r.problems.iter().zip(["tco-rewritten", "tco-moved"]) {
        assert!(
            problem.contains(phase) && problem.contains("not the run's total"),
            "{:?}",
            r.problems
        );
    }
    let out = mtex::model::results::run("run", 0, &r);
    for phase in ["tco-rewritten", "tco-moved"] {
        let p = out.phases.iter().find(|p| p.name == phase).unwrap();
        assert!(!p.counters.contains_key("untraced.tco_writes"), "{phase}");
    }
    assert!(!r.succeeded());
}

/// hostile-smp on two CPUs, with `extra` options.
fn boot_smp(extra: &str) -> Report {
    let cfg = RunConfig {
        cmdline: format!("mtex.guest=hostile-smp {extra}"),
        timeout: Duration::from_secs(120),
        cpus: 2,
        ..RunConfig::default()
    };
    let console = qemu::run(images(), &cfg).expect("running QEMU");
    assert!(!console.timed_out, "host time limit hit:\n{}", console.text);
    report::parse(&console.text)
}

#[test]
fn cpu_power_calls_that_misuse_psci_get_errors_records_and_exact_phases() {
    use mtex_abi::report::GuestState;
    use smccc::psci::{PSCI_CPU_OFF, PSCI_CPU_ON_64, error::*};
    let r = boot_smp("");
    // The guest checked every answer it got (exit status 0) ...
    match r.summary.unwrap().exit {
        ExitReason::GuestExit { status } => assert_eq!(status, 0, "{:#?}", r.console),
        other => panic!("expected the guest's exit, got {other:?}"),
    }
    // ... and the hypervisor recorded each call, by the CPU that made it, in order. The
    // entry point and context id are the guest's own; only their shape matters here.
    let calls: Vec<(u32, u32, u64, i32, u32)> = r
        .power_calls
        .iter()
        .map(|c| (c.cpu, c.function, c.target, c.result, c.phase))
        .collect();
    let on = PSCI_CPU_ON_64;
    let mut want = vec![
        (0, on, 1, INVALID_ADDRESS, 0),
        (0, on, 1, INVALID_ADDRESS, 0),
        (0, on, 0xff00, INVALID_PARAMETERS, 0),
        (0, PSCI_CPU_OFF, 0, DENIED, 0),
        (0, on, 1, DENIED, 1),
        (0, on, 1, 0, 0),
    ];
    // The second call finds the CPU started or still starting.
    let again = calls.get(6).map_or(0, |c| c.3);
    assert!([ALREADY_ON, ON_PENDING].contains(&again), "{calls:?}");
    want.extend([
        (0, on, 1, again, 0),
        (1, PSCI_CPU_OFF, 0, 0, 0),
        (0, on, 1, 0, 0),
        (1, PSCI_CPU_OFF, 0, 0, 0),
        // The last act: the second CPU started, the first goes off.
        (0, on, 1, 0, 0),
        (0, PSCI_CPU_OFF, 0, 0, 0),
    ]);
    assert_eq!(calls, want);
    let entry = r.power_calls[5].entry;
    assert_eq!(r.power_calls[0].entry, entry + 2, "the unaligned entry");
    assert_eq!(r.power_calls[1].entry, 0x1000);
    // The untraced phase opened with the second CPU on was refused, and the run says so.
    assert_eq!(r.problems.len(), 1, "{:?}", r.problems);
    assert!(
        r.problems[0].contains("PHASE_BEGIN of phase 2")
            && r.problems[0].contains("2 CPUs were on"),
        "{:?}",
        r.problems
    );
    let ids: Vec<u32> = r.phases.iter().map(|p| p.id).collect();
    assert_eq!(ids, [1, 5, 3, 4]);
    assert_phase_on_two_cpus(&r.phases[1]);
    let r = Report {
        phases: r.phases.iter().filter(|p| p.id != 5).cloned().collect(),
        ..r
    };
    // The refused CPU_ON inside phase 1 is one of its six instructions before the loop
    // (four moves, the SMC, one move); phase 3 ran after a CPU went off and on twice.
    assert_loop_counts(&r, &r.phases[0], 6, 0);
    assert_loop_counts(&r, &r.phases[1], 0, 0);
    let GuestState { el, .. } = r.power_calls[0].at;
    assert_eq!(el, 1);
    // Each power-up of the second CPU wrote its DBGBVR0_EL1 (GO_OFF's address, its context
    // id): two writes, kept in that CPU's shadow, which the first CPU never saw (the guest
    // checked its own read 0).
    let writes: Vec<u64> = r.debug_writes.iter().map(|w| w.value).collect();
    assert_eq!(writes, [r.power_calls[5].context_id; 2]);
    assert_second_cpus_phase(&r);
    assert_refusals_reported(&r);
}

/// Every call refused is a line of the report — in report.json's run (its `power_calls` and
/// notes) and in the summary — and none is a problem: the CPU_ON denied inside phase 1 was
/// made again, with success, before the next phase began.
fn assert_refusals_reported(r: &Report) {
    let doc = mtex::model::results::Results::single(r);
    let run = &doc.runs[0];
    let calls: Vec<(&str, bool)> = run
        .power_calls
        .iter()
        .map(|c| (c.call.as_str(), c.succeeded))
        .collect();
    assert_eq!(calls.len(), r.power_calls.len(), "{calls:#?}");
    assert!(
        calls[4].0.ends_with("DENIED, phase 1 open") && !calls[4].1,
        "{calls:#?}"
    );
    let refused: Vec<&String> = run
        .notes
        .iter()
        .filter(|n| n.starts_with("CPU power call refused: "))
        .collect();
    let failed = r.power_calls.iter().filter(|c| c.result != 0).count();
    assert_eq!(refused.len(), failed, "{:#?}", run.notes);
    let summary = mtex::output::summary::render(&doc, None, true);
    for want in [
        "NOTE: CPU power call refused: CPU 0: CPU_OFF at pc",
        "NOTE: CPU power call refused: CPU 0: CPU_ON of 0x1 at",
    ] {
        assert!(summary.contains(want), "{want}:\n{summary}");
    }
    assert!(summary.contains("DENIED, phase 1 open"), "{summary}");
    assert!(
        !run.problems.iter().any(|p| p.contains("DENIED")),
        "{:?}",
        run.problems
    );
}

/// On one CPU the CPU_ON denied inside phase 1 is never answered with a start (the machine
/// has no second CPU), and the guest goes on to open phase 2: the run relied on the denied
/// call, and it is a problem of the run, in the summary and report.json.
#[test]
fn a_denied_cpu_on_that_a_later_phase_ran_without_is_a_problem() {
    let r = boot("mtex.guest=hostile-smp");
    let denied: Vec<&String> = r.problems.iter().filter(|p| p.contains("DENIED")).collect();
    assert_eq!(denied.len(), 1, "{:#?}", r.problems);
    assert!(
        denied[0].starts_with("CPU 0: CPU_ON of 0x1 at ")
            && denied[0].contains("DENIED, phase 1 open: the CPU was never started after it"),
        "{denied:?}"
    );
    let doc = mtex::model::results::Results::single(&r);
    assert!(doc.runs[0].problems.contains(denied[0]));
    let summary = mtex::output::summary::render(&doc, None, true);
    assert!(
        summary.contains("PROBLEM: CPU 0: CPU_ON of 0x1 at "),
        "{summary}"
    );
    assert!(!doc.success);
}

/// Phase 5, traced with both CPUs on: the first CPU's share is its loop's arithmetic, the
/// second's its polling of GO_OFF (a load from Device memory, never checked, in a loop of
/// four instructions), and the phase is their sum. The PMU, which counts one CPU, gives no
/// figure for it.
fn assert_phase_on_two_cpus(p: &Phase) {
    let n = HOSTILE_N;
    let t = p.trace.expect("phase 5 traced");
    let cpus: Vec<u32> = p.cpus.iter().map(|c| c.cpu).collect();
    assert_eq!(cpus.len(), 2, "{:?}", p.cpus);
    let first = p.cpus.iter().find(|c| c.cpu == 0).expect("CPU 0's share");
    let second = p.cpus.iter().find(|c| c.cpu == 1).expect("CPU 1's share");
    assert_eq!(first.instructions, [0, 3 * n + END_CALL_INSTRUCTIONS]);
    let reads = ByEl {
        rd_k: n,
        ..ByEl::default()
    };
    assert_eq!((first.checked, first.accesses), (reads, reads));
    let [el0, el1] = second.instructions;
    assert!(el0 == 0 && el1 > 0, "{second:?}");
    assert_eq!(second.checked, ByEl::default());
    assert!((el1 / 4).abs_diff(second.accesses.rd_k) <= 1, "{second:?}");
    assert_eq!(t.instructions_el1, first.instructions[1] + el1);
    assert_eq!(t.architectural, reads);
    assert_eq!(t.accesses.rd_k, n + second.accesses.rd_k);
    assert_eq!(p.stats.unwrap().el1_instructions, None);
}

/// Phase 4, traced on the second CPU alone with its MMU off: HOSTILE_N loads from Device
/// memory (never tag-checked), by its own step engine, and its PMU counting the same.
fn assert_second_cpus_phase(r: &Report) {
    let p = r.phases.iter().find(|p| p.id == 4).expect("phase 4");
    let t = p.trace.expect("phase 4 traced");
    let n = HOSTILE_N;
    let instructions = 3 * n + END_CALL_INSTRUCTIONS;
    assert_eq!((t.instructions_el1, t.instructions_el0), (instructions, 0));
    assert_eq!(t.accesses.rd_k, n);
    assert_eq!(t.architectural, ByEl::default());
    assert_eq!((t.unknown_mem, t.runs_lost), (0, 0));
    let branches = r
        .engines
        .iter()
        .find(|e| e.id == 4)
        .map_or(0, |e| e.branches_el1);
    let s = p.stats.unwrap();
    assert!(!s.pmu_disturbed, "phase 4: PMU disturbed");
    assert_eq!(
        s.el1_instructions,
        Some(instructions - branches),
        "phase 4: PMU"
    );
}

#[test]
fn a_profile_follows_the_cpu_that_traces() {
    // The per-PC table starts with the boot CPU; phase 4 is traced on the second CPU, and
    // its profile must be there and add up, as the first CPU's phases' do.
    let r = boot_smp("mtex.profile=1");
    // The untraced phase and the traced one with both CPUs on (a profile follows one CPU).
    assert_eq!(
        r.problems.len(),
        2,
        "only the refused phases: {:?}",
        r.problems
    );
    assert!(
        r.problems[1].contains("PHASE_BEGIN of phase 5"),
        "{:?}",
        r.problems
    );
    for p in r.phases.iter().filter(|p| p.trace.is_some()) {
        let profile = p
            .profile
            .as_ref()
            .unwrap_or_else(|| panic!("phase {}: no profile", p.id));
        assert_eq!(profile.problem(&p.trace.unwrap()), None, "phase {}", p.id);
    }
    assert_eq!(r.phases.iter().filter(|p| p.profile.is_some()).count(), 3);
    assert_second_cpus_phase(&r);
}

/// A guest that starts every CPU of a machine larger than the hypervisor's static heap can
/// hold (each CPU takes its stack, block, state and run tables, about 700 KiB, and keeps them
/// over power-ups): every CPU_ON succeeds, each CPU goes off again, and the run ends whole.
/// The hypervisor took the memory for them from RAM at boot, sized for the machine's CPUs.
#[test]
fn every_cpu_of_a_machine_with_200_cpus_starts() {
    const CPUS: u32 = 200;
    let cfg = RunConfig {
        cmdline: "mtex.guest=every-cpu".into(),
        timeout: Duration::from_secs(300),
        cpus: CPUS,
        memory_mib: 1024,
        ..RunConfig::default()
    };
    let console = qemu::run(images(), &cfg).expect("running QEMU");
    assert!(!console.timed_out, "host time limit hit:\n{}", console.text);
    let r = report::parse(&console.text);
    let others = CPUS - 1;
    for line in [
        format!("every-cpu started {others} of {others}"),
        format!("every-cpu off {others} of {others}"),
    ] {
        assert!(r.console.contains(&line), "{line}: {:#?}", r.console);
    }
    assert!(r.succeeded(), "{:?} {:#?}", r.problems, r.console);
    // One CPU_ON and one CPU_OFF per other CPU, each answered SUCCESS.
    assert_eq!(r.power_calls.len(), 2 * others as usize);
    assert!(r.power_calls.iter().all(|c| c.result == 0));
    // No CPU took more than the memory set aside for it.
    assert!(
        !r.console.iter().any(|l| l.contains("bytes of heap")),
        "{:#?}",
        r.console
    );
}
