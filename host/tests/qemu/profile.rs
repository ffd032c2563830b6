//! The per-PC profile (`mtex.profile=1`) changes no count, adds up to every traced phase's
//! counts exactly (the report's own check, which makes a run fail), and is the same whichever
//! way the engine stepped: the reference path retires every instruction one by one with its
//! PC, breakpoint runs attribute theirs from the plan, so equal tables prove the runs'
//! attribution exact.

use super::equality::boot;
use mtex::cli::bench::equality::{self, FAST_RUNS, PLAIN, PROGRAMS};
use mtex::model::report::Report;
use mtex::symbols::Symbols;

use mtex::images::built as images;

const PROFILE: &str = "mtex.profile=1";

/// Boots `program` unprofiled, and profiled with runs and on the reference path.
fn three_boots(program: &str) -> [Report; 3] {
    let (_, line) = PROGRAMS.iter().find(|(n, _)| *n == program).unwrap();
    images();
    let lines = [
        format!("{line} {}", FAST_RUNS.opts),
        format!("{line} {} {PROFILE}", FAST_RUNS.opts),
        format!("{line} {} {PROFILE}", PLAIN.opts),
    ];
    std::thread::scope(|s| {
        let boots: Vec<_> = lines.map(|l| s.spawn(move || boot(l))).into();
        let mut r = boots.into_iter().map(|b| b.join().unwrap());
        [(); 3].map(|_| r.next().unwrap())
    })
}

fn assert_profile_exact(program: &str) {
    let [unprofiled, profiled, plain] = three_boots(program);
    for (what, r) in [("profiled", &profiled), ("profiled, plain", &plain)] {
        let problems = equality::run_problems(r);
        assert!(problems.is_empty(), "{program} {what}: {problems:#?}");
        let traced: Vec<_> = r.phases.iter().filter(|p| p.trace.is_some()).collect();
        assert!(!traced.is_empty(), "{program}: no traced phase");
        for p in traced {
            let profile = p
                .profile
                .as_ref()
                .unwrap_or_else(|| panic!("{program} {what}: phase {} has no profile", p.name));
            // The check the report makes, made here too: a report that stopped making it
            // would otherwise pass.
            assert_eq!(
                profile.problem(p.trace.as_ref().unwrap()),
                None,
                "{}",
                p.name
            );
            assert!(profile.other.is_empty(), "{}: table overflowed", p.name);
        }
        assert!(
            !r.phases
                .iter()
                .any(|p| p.trace.is_none() && p.profile.is_some()),
            "{program}: a profile of an untraced phase"
        );
    }
    // Profiling changes no count.
    let c = equality::compare(&unprofiled, &profiled, FAST_RUNS);
    assert!(c.differences.is_empty(), "{program}: {:#?}", c.differences);
    assert_eq!(c.phases, unprofiled.phases.len());
    // Runs attribute their instructions to the PCs the reference path steps one by one.
    for (a, b) in plain.phases.iter().zip(&profiled.phases) {
        assert_eq!(a.name, b.name);
        let (pa, pb) = (a.profile.as_ref(), b.profile.as_ref());
        assert_eq!(
            pa.map(|p| &p.pcs),
            pb.map(|p| &p.pcs),
            "{program} phase {}: per-PC counts differ between step=plain and runs",
            a.name
        );
    }
}

#[test]
fn trace_program() {
    assert_profile_exact("trace");
}

#[test]
fn el0_program() {
    assert_profile_exact("el0");
}

#[test]
fn kernel_matrix() {
    assert_profile_exact("kernel");
}

#[test]
fn hostile_vector() {
    assert_profile_exact("hostile-vector");
}

/// A table too small for the kernel matrix's phases: the PCs it has no room for are counted
/// in `[other]`, and every profile still adds up to its phase's counts, with no problem.
#[test]
fn an_overflowing_table_still_adds_up() {
    let r = boot(format!(
        "{} {PROFILE} mtex.profile_slots=64",
        equality::KERNEL
    ));
    assert!(equality::run_problems(&r).is_empty(), "{:#?}", r.problems);
    let mut overflowed = 0;
    for p in r.phases.iter().filter(|p| p.trace.is_some()) {
        let profile = p.profile.as_ref().expect("a profile");
        assert_eq!(
            profile.problem(p.trace.as_ref().unwrap()),
            None,
            "{}",
            p.name
        );
        assert!(profile.pcs.len() <= 64, "{}", p.name);
        let end = profile.end.unwrap();
        if !profile.other.is_empty() {
            overflowed += 1;
            assert!(end.other_notes > 0, "{}", p.name);
        }
    }
    assert!(overflowed > 0, "no phase overflowed 64 slots");
}

/// The built-in kernel's one traced phase of `workload` under entry-tco, profiled: its counts
/// and profile, with the guest's symbols.
fn profiled_workload(
    workload: &str,
) -> (
    mtex_trace::counts::TraceCounts,
    mtex::profile::PhaseProfile,
    Symbols,
) {
    let r = boot(format!(
        "mtex.guest=kernel mtex.policies=entry-tco mtex.workloads={workload} mtex.trace=only \
         {PROFILE}"
    ));
    assert!(equality::run_problems(&r).is_empty(), "{:#?}", r.problems);
    let phase = r.phases.iter().find(|p| p.trace.is_some()).unwrap();
    let profile = phase.profile.clone().expect("a profile");
    (
        phase.trace.unwrap(),
        profile,
        Symbols::load(&images().guest_elf),
    )
}

/// The kernel's uaccess workload copies from user memory with `copy_from_user`'s LDTR: its
/// checked uaccess reads are at PCs inside that function, and nowhere else.
#[test]
fn uaccess_reads_are_in_copy_from_user() {
    let (trace, profile, syms) = profiled_workload("uaccess-heavy");
    assert!(
        trace.uaccess.arch_rd > 0,
        "the workload made no checked uaccess read"
    );
    let mut in_copy = 0;
    for e in profile.pcs.iter().filter(|e| e.unprivileged) {
        let f = syms.lookup(e.pc).unwrap_or_else(|| format!("{:#x}", e.pc));
        if e.rd[mtex_trace::profile::ARCH] > 0 {
            assert!(
                f.contains("copy_from_user"),
                "a checked uaccess read in {f}"
            );
            in_copy += e.rd[mtex_trace::profile::ARCH];
        }
    }
    assert_eq!(in_copy, trace.uaccess.arch_rd);
}

/// The built-in kernel's user programs are named too: every EL0 PC of futex-hash is in one
/// of the `.usertext` programs, and its checked user reads are futex's own.
#[test]
fn user_pcs_are_named_by_the_guest_programs() {
    let (trace, profile, syms) = profiled_workload("futex-hash");
    assert!(
        trace.architectural.rd_u > 0,
        "futex-hash made no checked user read"
    );
    let mut futex_reads = 0;
    for e in profile.pcs.iter().filter(|e| e.el == 0) {
        let (name, _) = syms
            .function(e.pc)
            .unwrap_or_else(|| panic!("EL0 pc {:#x} has no symbol", e.pc));
        assert!(
            name.starts_with("mtex_user_"),
            "EL0 pc {:#x} in {name}",
            e.pc
        );
        if name == "mtex_user_futex" {
            futex_reads += e.rd[mtex_trace::profile::ARCH];
        }
    }
    assert_eq!(futex_reads, trace.architectural.rd_u);
}
