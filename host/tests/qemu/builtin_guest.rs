//! QEMU integration tests, under `-icount shift=0`. Expectations come from what the guest
//! program does (`mtex_abi::program::DEFAULT` is the program itself), never from earlier runs.

use mtex::model::report::{self, Report};
use mtex::qemu::{self, RunConfig};
use mtex_abi::hypercall;
use mtex_abi::program::{self, Action};
use mtex_abi::report::{Conduit, ExitReason, TrapMode};
use mtex_arch::SysReg;
use mtex_platform::guest_vm;
use std::time::Duration;

use mtex::images::built as images;

/// Boots with `cmdline` and returns the report and the wall time.
fn boot(cmdline: &str) -> (Report, Duration) {
    let cfg = RunConfig {
        cmdline: cmdline.to_string(),
        timeout: Duration::from_secs(30),
        ..RunConfig::default()
    };
    let console = qemu::run(images(), &cfg).expect("running QEMU");
    assert!(!console.timed_out, "host time limit hit:\n{}", console.text);
    (report::parse(&console.text), console.wall)
}

/// (phase, register, old, new) of every write the default program makes, in order, with old
/// values following from the values the hypervisor enters the guest with.
fn expected_writes() -> Vec<(String, &'static str, u64, u64)> {
    let (mut sctlr, mut tcr) = (program::SCTLR_EL1_AT_ENTRY, program::TCR_EL1_AT_ENTRY);
    let mut out = Vec::new();
    for phase in program::DEFAULT {
        for a in phase.actions {
            match *a {
                Action::WriteSctlr(v) => {
                    out.push((phase.name.to_string(), "SCTLR_EL1", sctlr, v));
                    sctlr = v;
                }
                Action::WriteTcr(v) => {
                    out.push((phase.name.to_string(), "TCR_EL1", tcr, v));
                    tcr = v;
                }
                Action::SetTco(_) | Action::TaggedAccess => {}
            }
        }
    }
    out
}

fn mte_writes(r: &Report) -> Vec<(String, &'static str, u64, u64)> {
    r.writes
        .iter()
        .filter(|w| w.register == "SCTLR_EL1" || w.register == "TCR_EL1")
        .map(|w| {
            (
                w.phase.clone().unwrap_or_default(),
                w.register,
                w.old,
                w.new,
            )
        })
        .collect()
}

#[test]
fn default_run_reports_exactly_the_writes_the_guest_made() {
    let (r, _) = boot("mtex.guest=controls");
    assert!(r.succeeded(), "{}", mtex::output::matrix::text(&r));
    assert_eq!(r.boot.unwrap().trap_mode, TrapMode::FineGrained);
    // Under FEAT_FGT only SCTLR_EL1 and TCR_EL1 trap.
    assert_eq!(mte_writes(&r).len(), r.writes.len());
    assert_eq!(mte_writes(&r), expected_writes());

    // Phases in program order, each closed, each counting its own trapped writes.
    let names: Vec<_> = r.phases.iter().map(|p| p.name.as_str()).collect();
    let expected: Vec<_> = program::DEFAULT.iter().map(|p| p.name).collect();
    assert_eq!(names, expected);
    for (p, def) in r.phases.iter().zip(program::DEFAULT) {
        let writes = def
            .actions
            .iter()
            .filter(|a| matches!(a, Action::WriteSctlr(_) | Action::WriteTcr(_)))
            .count() as u64;
        assert_eq!(p.stats.unwrap().sysreg_writes, writes, "phase {}", p.name);
    }

    // The decoded fields of the write that turns on synchronous checking.
    let sync = r
        .writes
        .iter()
        .find(|w| w.phase.as_deref() == Some("mte-sync"))
        .unwrap();
    let fields: Vec<_> = sync
        .changes
        .iter()
        .map(|c| (c.field, c.old, c.new))
        .collect();
    assert_eq!(fields, [("ATA", "0", "1"), ("TCF", "NONE", "SYNC")]);

    // PSTATE.TCO as EL2 sees it: set across the phase-end call of `tco-set` only.
    let tco_set = r.phase("tco-set").unwrap();
    assert!(tco_set.end.unwrap().tco);
    assert_eq!(tco_set.stats.unwrap().exits_with_tco, 1);
    assert!(!r.phase("tco-clear").unwrap().end.unwrap().tco);
    assert!(r.writes.iter().all(|w| !w.at.tco && w.at.el == 1));

    // The tagged accesses ran with checking on and matched.
    let tagged = r
        .console
        .iter()
        .filter(|l| l.contains("tagged load ok"))
        .count();
    let expected_tagged = program::DEFAULT
        .iter()
        .flat_map(|p| p.actions)
        .filter(|a| matches!(a, Action::TaggedAccess))
        .count();
    assert_eq!(tagged, expected_tagged);
}

#[test]
fn two_runs_give_identical_reports() {
    let (a, _) = boot("mtex.guest=controls");
    let (b, _) = boot("mtex.guest=controls");
    assert_eq!(a, b);
}

#[test]
fn tvm_fallback_traps_and_emulates_every_vm_control_write() {
    let (r, _) = boot("mtex.guest=controls mtex.traps=tvm");
    assert!(r.succeeded(), "{}", mtex::output::matrix::text(&r));
    assert_eq!(r.boot.unwrap().trap_mode, TrapMode::Tvm);
    // The MTE controls are reported exactly as with FEAT_FGT...
    assert_eq!(mte_writes(&r), expected_writes());
    // ...and the other TVM registers the guest writes are emulated too (the MMU came on,
    // so the MAIR and TTBR0 writes took effect).
    let mair: Vec<_> = r
        .writes
        .iter()
        .filter(|w| w.register == SysReg::MairEl1.name())
        .collect();
    assert_eq!(mair.len(), 1);
    assert_eq!(mair[0].new, program::MAIR_EL1);
    assert!(
        r.writes
            .iter()
            .any(|w| w.register == SysReg::Ttbr0El1.name())
    );
}

#[test]
fn unknown_hypercall_gets_not_supported_and_a_record() {
    let (r, wall) = boot("mtex.guest=unknown-hvc");
    assert!(!r.succeeded());
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    assert_eq!(r.unknown_calls.len(), 1);
    assert_eq!(r.unknown_calls[0].conduit, Conduit::Hvc);
    assert_eq!(
        r.unknown_calls[0].function,
        hypercall::function_id(0xff) as u64
    );
    // The guest exits with 3 exactly when it was answered NOT_SUPPORTED.
    assert_eq!(r.summary.unwrap().exit, ExitReason::GuestExit { status: 3 });
    assert!(wall < Duration::from_secs(10));
}

#[test]
fn touching_memory_outside_guest_ram_ends_the_run_with_a_stage2_fault() {
    let (r, wall) = boot("mtex.guest=touch-hyp");
    assert!(!r.succeeded());
    let b = r.boot.unwrap();
    // The hypervisor's memory and the host memory behind guest RAM are apart.
    let guest = b.guest_ram_pa..b.guest_ram_pa + guest_vm::RAM_SIZE;
    assert!(
        b.hyp_end <= guest.start || b.hyp_start >= guest.end,
        "{b:?}"
    );
    let past_ram = guest_vm::RAM_BASE + guest_vm::RAM_SIZE;
    match r.summary.unwrap().exit {
        ExitReason::UnhandledGuestExit {
            esr,
            hpfar,
            far,
            at,
        } => {
            assert_eq!(esr >> 26, 0x24, "data abort from a lower EL");
            assert_eq!(hpfar, past_ram);
            assert_eq!(far, past_ram);
            assert_eq!(at.el, 1);
        }
        other => panic!("unexpected exit {other:?}"),
    }
    assert!(wall < Duration::from_secs(10));
}

#[test]
fn a_spinning_guest_is_stopped_by_the_watchdog() {
    let (r, wall) = boot("mtex.guest=spin mtex.watchdog_ms=200");
    assert!(!r.succeeded());
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    match r.summary.unwrap().exit {
        ExitReason::Watchdog { budget_ms, at } => {
            assert_eq!(budget_ms, 200);
            assert_eq!(at.el, 1);
        }
        other => panic!("unexpected exit {other:?}"),
    }
    assert!(wall < Duration::from_secs(10));
}

/// The place a host kill names: (pc, EL) from `... guest at pc 0x..., EL1 (PSTATE ...)`.
fn killed_at(killed: &str) -> (u64, u8) {
    let rest = killed
        .split_once("QEMU killed; guest at pc 0x")
        .unwrap_or_else(|| panic!("no guest place in {killed:?}"))
        .1;
    let (pc, rest) = rest.split_once(", EL").unwrap();
    let el = rest.split_once(' ').unwrap().0;
    (u64::from_str_radix(pc, 16).unwrap(), el.parse().unwrap())
}

#[test]
fn a_run_the_host_kills_says_where_the_guest_was() {
    // A budget far beyond the host's limit: only the host can end this run.
    let cfg = RunConfig {
        cmdline: "mtex.guest=spin mtex.watchdog_ms=3600000".into(),
        timeout: Duration::from_secs(3),
        ..RunConfig::default()
    };
    let console = qemu::run(images(), &cfg).expect("running QEMU");
    assert!(console.timed_out && console.status.is_none());
    let r = console.report();
    assert!(!r.succeeded());
    let killed = console.killed.as_deref().unwrap();
    assert!(
        killed.starts_with("host time limit of 3 s reached: QEMU killed; guest at pc 0x"),
        "{killed}"
    );
    assert_eq!(r.problems.last().map(String::as_str), Some(killed));
    // The spin loop, in the guest's image, at EL1.
    let (pc, el) = killed_at(killed);
    assert_eq!(el, 1, "{killed}");
    assert!(pc >= r.boot.unwrap().guest_entry, "{killed}");
    assert!(console.wall < Duration::from_secs(10));
}

#[test]
fn a_guest_whose_clock_stops_is_ended_by_the_host_at_once() {
    // Every exception entry faults again on its own unmapped vector: nothing retires, the
    // guest's clock stops under -icount and no watchdog can fire. Watching the clock, the host
    // ends the run after CLOCK_STALL, long before its own (default) limit.
    let cfg = RunConfig::with_default_limits("mtex.guest=hostile-abort-loop".into(), true);
    assert!(cfg.timeout > Duration::from_secs(600));
    let console = qemu::run(images(), &cfg).expect("running QEMU");
    let killed = console.killed.as_deref().expect("killed by the host");
    assert!(
        killed.starts_with("the guest's clock stopped at "),
        "{killed}"
    );
    let (pc, el) = killed_at(killed);
    assert_eq!(el, 1, "{killed}");
    // At the vector the guest set: VBAR_EL1 + 0x200 (current EL, SP_ELx, synchronous).
    assert_eq!(pc & 0x7ff, 0x200, "{killed}");
    assert!(console.wall < qemu::CLOCK_STALL + Duration::from_secs(10));
    assert!(!console.report().succeeded());
}

#[test]
fn a_bad_option_that_reaches_the_hypervisor_fails_the_boot_naming_it() {
    let (r, _) = boot("mtex.watchdog_ms=soon");
    match r.summary.unwrap().exit {
        ExitReason::BootFailed { reason } => assert!(reason.as_str().contains("watchdog_ms")),
        other => panic!("unexpected exit {other:?}"),
    }
    assert!(r.phases.is_empty());
}

#[test]
fn an_unknown_option_that_reaches_the_hypervisor_fails_the_boot_naming_it() {
    // The host refuses it first; this is the same command line arriving some other way.
    let (r, _) = boot("mtex.policy=tcma1");
    match r.summary.unwrap().exit {
        ExitReason::BootFailed { reason } => {
            assert_eq!(reason.as_str(), "unknown option mtex.policy")
        }
        other => panic!("unexpected exit {other:?}"),
    }
    assert!(r.phases.is_empty());
}

/// Boots the trace program (with or without breakpoint runs) and checks every count against
/// the workloads' own arithmetic.
fn check_trace_program(runs: bool) {
    use mtex_trace::counts::ByEl;
    let (r, _) = boot(&format!("mtex.guest=trace mtex.runs={}", runs as u8));
    assert!(r.succeeded(), "{}", mtex::output::matrix::text(&r));
    assert_eq!(r.phases.len(), program::TRACE.len());
    for (p, def) in r.phases.iter().zip(program::TRACE) {
        assert_eq!(p.name, def.name);
        let t = p
            .trace
            .unwrap_or_else(|| panic!("{}: no trace record", def.name));
        let per = def.body.per_iteration();
        let n = def.n;
        // Every access executes at EL1 (an LDTR too: counted by the EL that executes it).
        let k = |reads: u64, writes: u64| ByEl {
            rd_k: reads,
            wr_k: writes,
            rd_u: 0,
            wr_u: 0,
        };
        let checked = k(per.checkable_reads * n, per.checkable_writes * n);
        let none = ByEl::default();
        let what = def.name;
        assert_eq!(
            t.accesses,
            k(per.reads * n, per.writes * n),
            "{what}: accesses"
        );
        assert_eq!(
            t.architectural,
            if def.checked { checked } else { none },
            "{what}: arch"
        );
        assert_eq!(
            t.tcf_elided,
            if def.elided_checked { checked } else { none },
            "{what}: elided"
        );
        // Counterfactual: no EL1 access is checked if the kernel leaves TCO set.
        assert_eq!(t.if_kernel_tco, none, "{what}: if kernel TCO");
        // The bodies use lower-half addresses, which TCMA1 does not cover.
        assert_eq!(t.if_tcma1, t.architectural, "{what}: if TCMA1");
        let instructions =
            n * (per.instructions + program::LOOP_OVERHEAD) + program::END_CALL_INSTRUCTIONS;
        assert_eq!(
            (t.instructions_el1, t.instructions_el0),
            (instructions, 0),
            "{what}: instructions"
        );
        // The PMU, counting EL1 instructions independently, agrees with the trace (less the
        // back-edge branches the step engine executed for the guest, which it never saw).
        let [el1, _] = r.pmu_expected(p).unwrap();
        assert_eq!(p.stats.unwrap().el1_instructions, Some(el1), "{what}: PMU");
        assert_eq!(t.tco_writes, per.tco_writes * n, "{what}: TCO writes");
        assert_eq!(t.tco_changes, per.tco_writes * n, "{what}: TCO changes");
        assert_eq!(
            t.granules_tagged,
            per.granules_tagged * n,
            "{what}: granules"
        );
        assert_eq!(
            (t.tag_check_faults, t.unknown_mem, t.runs_lost),
            (0, 0, 0),
            "{what}"
        );
        // Exits: one per instruction but the last (an HVC exit) when stepping. With runs, the
        // inert stretch is one run per iteration, from its load (judged at the stop) to the
        // back-edge branch (executed by the engine), then one run to the phase-end call: one
        // exit each.
        let exits = p.stats.unwrap().step_exits;
        match (runs, def.body) {
            (false, _) => assert_eq!((exits, t.runs), (instructions - 1, 0), "{what}: exits"),
            (true, program::Body::InertStretch) => {
                assert_eq!((exits, t.runs), (n + 1, n + 1), "{what}: exits with runs")
            }
            (true, _) => assert!(exits < instructions, "{what}: exits"),
        }
    }
    // TCO sites: the toggle writes #1 and #0 at two PCs, n times each.
    let toggle = r.phase("t-tco-toggle").unwrap();
    let n = program::TRACE
        .iter()
        .find(|t| t.name == "t-tco-toggle")
        .unwrap()
        .n;
    let mut sites: Vec<_> = toggle
        .tco_sites
        .iter()
        .map(|s| (s.value, s.count))
        .collect();
    sites.sort();
    assert_eq!(sites, [(false, n), (true, n)]);
}

#[test]
fn trace_counts_every_term_of_the_predicate_exactly() {
    check_trace_program(false);
}

#[test]
fn trace_counts_are_the_same_with_breakpoint_runs() {
    check_trace_program(true);
}

#[test]
fn runs_change_exits_not_counts_on_compiled_code() {
    let (stepped, _) = boot("mtex.guest=controls mtex.runs=0");
    let (ran, _) = boot("mtex.guest=controls mtex.runs=1");
    assert!(stepped.succeeded() && ran.succeeded());
    let (mut exits_stepped, mut exits_ran, mut runs) = (0, 0, 0);
    for (a, b) in stepped.phases.iter().zip(&ran.phases) {
        let (ta, tb) = (a.trace.unwrap(), b.trace.unwrap());
        // Everything counted is identical; only how the hypervisor got there differs.
        let same = mtex_trace::counts::TraceCounts { runs: 0, ..tb };
        assert_eq!(ta, same, "phase {}", a.name);
        assert_eq!(
            b.stats.unwrap().el1_instructions.map(Some),
            Some(ran.pmu_expected(b).map(|[el1, _]| el1)),
            "{}",
            b.name
        );
        assert_eq!(tb.runs_lost, 0);
        exits_stepped += a.stats.unwrap().step_exits;
        exits_ran += b.stats.unwrap().step_exits;
        runs += tb.runs;
    }
    assert!(runs > 0, "compiled code has stretches long enough for runs");
    assert!(exits_ran < exits_stepped, "{exits_ran} !< {exits_stepped}");
}

#[test]
fn differential_qemu_faults_exactly_when_the_elided_view_checks() {
    use mtex_abi::program::{DIFF_CASES, diff_case};
    let cfg = RunConfig {
        cmdline: "mtex.guest=differential mtex.watchdog_ms=120000".into(),
        timeout: Duration::from_secs(300),
        ..RunConfig::default()
    };
    let console = qemu::run(images(), &cfg).expect("running QEMU");
    let r = report::parse(&console.text);
    assert!(r.succeeded(), "{}", mtex::output::matrix::text(&r));
    // The guest's own record of which cases took a tag-check fault.
    let mut words = vec![None; DIFF_CASES.div_ceil(64)];
    for line in r
        .console
        .iter()
        .filter_map(|l| l.strip_prefix("diff-faults "))
    {
        let (w, bits) = line.split_once(' ').unwrap();
        words[w.parse::<usize>().unwrap()] = Some(u64::from_str_radix(bits, 16).unwrap());
    }
    let faulted = |i: usize| words[i / 64].expect("bitmap word") >> (i % 64) & 1 == 1;
    assert_eq!(r.phases.len(), DIFF_CASES);
    let mut disagreements = Vec::new();
    let (mut checked_cases, mut faults) = (0, 0);
    for (i, p) in r.phases.iter().enumerate() {
        assert_eq!(p.name, format!("d{i}"));
        let t = p.trace.expect("traced");
        let elided_checked = t.tcf_elided.total() > 0;
        checked_cases += elided_checked as usize;
        faults += faulted(i) as usize;
        // The architectural view never counts fewer checks than an eliding implementation.
        assert!(t.architectural.total() >= t.tcf_elided.total(), "case {i}");
        if elided_checked != faulted(i) {
            disagreements.push(format!(
                "case {i}: {:?} — model says checked={elided_checked}, QEMU faulted={}",
                diff_case(i),
                faulted(i)
            ));
        }
    }
    assert!(
        disagreements.is_empty(),
        "{} of {DIFF_CASES} cases disagree:\n{}",
        disagreements.len(),
        disagreements.join("\n")
    );
    // Both outcomes occur often enough for the comparison to mean something.
    assert!(
        checked_cases > 100 && DIFF_CASES - checked_cases > 100,
        "{checked_cases} checked"
    );
    assert_eq!(faults, checked_cases);
}

#[test]
fn an_exclusive_retry_loop_runs_unstepped_from_its_load_to_after_its_store() {
    // ldaxr; add; stlxr; cbnz (back on failure) once, then subs; b.ne and the end call. A
    // breakpoint run carries the sequence: the store succeeds at the first attempt.
    let (r, _) = boot("mtex.guest=exclusive-loop");
    assert!(r.succeeded(), "{}", mtex::output::matrix::text(&r));
    let t = r.phases[0].trace.unwrap();
    assert_eq!(
        t.instructions_el1,
        4 + mtex_abi::program::LOOP_OVERHEAD + mtex_abi::program::END_CALL_INSTRUCTIONS
    );
    assert_eq!(t.failed_store_exclusives, 0);
    assert_eq!((t.accesses.rd_k, t.accesses.wr_k), (1, 1));
}

#[test]
fn an_exclusive_loop_stepped_ends_with_a_named_reason_not_a_hang() {
    // Without runs every instruction is stepped, and every step's ERET clears the monitor.
    let (r, wall) = boot("mtex.guest=exclusive-loop mtex.runs=0");
    assert!(!r.succeeded());
    let stopped = match r.summary.unwrap().exit {
        ExitReason::TraceUnsupported { at, reason } => {
            assert_eq!(at.el, 1);
            assert!(reason.as_str().contains("LDXR/STXR"), "{reason}");
            at
        }
        other => panic!("unexpected exit {other:?}"),
    };
    // The one problem: the phase never ended, its counts are partial.
    assert_eq!(
        r.problems,
        [format!(
            "phase 1 ({}) never ended: counts up to where it stopped at pc {:#x} EL1 (partial)",
            r.phases[0].name, stopped.pc
        )]
    );
    // The phase never ended, but its counts up to where the engine stopped are reported:
    // EXCLUSIVE_RETRIES + 1 attempts of ldaxr, add, stlxr (every store failing: no write),
    // and the cbnz of every attempt but the last, whose retry ended the run.
    let p = &r.phases[0];
    assert!(p.end.is_none());
    let t = p.trace.expect("the phase's partial counts");
    let attempts = mtex_trace::EXCLUSIVE_RETRIES as u64 + 1;
    assert_eq!(t.instructions_el1, 3 * attempts + (attempts - 1));
    assert_eq!(t.failed_store_exclusives, attempts);
    assert_eq!((t.accesses.rd_k, t.accesses.wr_k), (attempts, 0));
    assert!(wall < Duration::from_secs(10));
}

#[test]
fn an_exception_at_el2_ends_the_run_with_its_syndrome() {
    let (r, wall) = boot("mtex.selftest=hyp-fault");
    assert!(!r.succeeded());
    match r.summary.unwrap().exit {
        ExitReason::HypException {
            vector, esr, elr, ..
        } => {
            assert_eq!(vector, 4, "current EL with SP_ELx, synchronous");
            assert_eq!(esr >> 26, 0, "EC 0: unknown reason (UDF)");
            assert!(elr >= r.boot.unwrap().hyp_start && elr < r.boot.unwrap().hyp_end);
        }
        other => panic!("unexpected exit {other:?}"),
    }
    assert!(wall < Duration::from_secs(10));
}

#[test]
fn a_hypervisor_panic_ends_the_run_with_its_message() {
    let (r, _) = boot("mtex.selftest=hyp-panic");
    match r.summary.unwrap().exit {
        ExitReason::HypPanic { message } => assert!(message.as_str().contains("self-test panic")),
        other => panic!("unexpected exit {other:?}"),
    }
    assert!(r.problems.is_empty(), "{:?}", r.problems);
}

#[test]
fn the_step_engine_follows_the_guest_into_el0_and_back() {
    use mtex_trace::counts::ByEl;
    let n = 25;
    let (r, _) = boot(&format!("mtex.guest=el0 mtex.bench_n={n}"));
    assert!(r.succeeded(), "{}", mtex::output::matrix::text(&r));
    let p = r.phase("el0-loads").unwrap();
    let t = p.trace.unwrap();
    // EL0 (guest/src/el0.rs, mtex_user_loads): n × (ldr, subs, b.ne) and the SVC.
    assert_eq!(t.instructions_el0, 3 * n + 1);
    // The PMU at EL0, less the loop's back-edge branches the step engine executed.
    let engine = r
        .engines
        .iter()
        .find(|e| e.id == p.id)
        .copied()
        .unwrap_or_default();
    assert_eq!(
        p.stats.unwrap().el0_instructions,
        Some(3 * n + 1 - engine.branches_el0),
        "PMU at EL0"
    );
    // EL1: 5 around the call, 14 in el0_call (up to its ERET), 5 in the vector, 12 in
    // el0_return, 4 for the phase-end call.
    assert_eq!(t.instructions_el1, 5 + 14 + 5 + 12 + 4);
    // QEMU's PMU counts one EL1 instruction more for the SVC's exception entry if it was
    // taken while stepping (its step stub), none inside a run: the relation the report
    // checks on every traced phase.
    assert_eq!(t.entries.total(), 1);
    let stub = t.entries.total() - engine.entries_in_runs;
    assert_eq!(
        p.stats.unwrap().el1_instructions,
        Some(t.instructions_el1 - engine.branches_el1 + stub),
        "PMU at EL1"
    );
    // EL0's loads are checked (ATA0, TCF0 SYNC, tag 3 on both sides) and counted under :u.
    // EL1 stores 7 registers with TCO clear (checked) and loads them back after the SVC,
    // whose exception entry set TCO (unchecked), then clears TCO.
    let expect = ByEl {
        rd_u: n,
        wr_u: 0,
        rd_k: 0,
        wr_k: 7,
    };
    assert_eq!(t.architectural, expect);
    assert_eq!(t.tcf_elided, expect);
    assert_eq!(
        t.accesses,
        ByEl {
            rd_u: n,
            wr_u: 0,
            rd_k: 7,
            wr_k: 7
        }
    );
    assert_eq!(
        t.if_kernel_tco,
        ByEl {
            rd_u: n,
            ..ByEl::default()
        }
    );
    // TCO: set by the exception entry, cleared by the one MSR.
    assert_eq!((t.tco_writes, t.tco_changes), (1, 2));
    assert_eq!(p.tco_sites.len(), 1);
    assert!(!p.tco_sites[0].value);
}

#[test]
fn diagnostics_come_at_the_level_asked_and_change_no_figure() {
    let (quiet, _) = boot("mtex.guest=trace");
    let (loud, _) = boot("mtex.guest=trace mtex.log=debug");
    assert!(quiet.succeeded() && loud.succeeded(), "{:?}", loud.problems);
    let has = |r: &Report, s: &str| r.console.iter().any(|l| l.starts_with(s));
    // At debug: the hypervisor's boot and phase lines and the guest's own.
    assert!(
        has(&loud, "hyp INFO: booted by kernel+dtb"),
        "{:?}",
        loud.console
    );
    assert!(
        has(&loud, "hyp DEBUG: phase 1 begins"),
        "{:?}",
        loud.console
    );
    assert!(
        has(&loud, "guest DEBUG: device tree at"),
        "{:?}",
        loud.console
    );
    // At the default level (warn) none of them.
    assert!(
        !quiet
            .console
            .iter()
            .any(|l| l.starts_with("hyp ") || l.starts_with("guest DEBUG"))
    );
    // Logging happens outside the phases' counting: every figure is the same.
    let figures = |r: &Report| {
        r.phases
            .iter()
            .map(|p| {
                (
                    p.name.clone(),
                    p.trace,
                    p.stats.map(|s| (s.el1_instructions, s.el0_instructions)),
                )
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(figures(&quiet), figures(&loud));
}
