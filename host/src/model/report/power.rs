//! The guest's PSCI power calls that the hypervisor answered with an error, in the report:
//! each is a line of it, and a DENIED CPU_ON the run went on without is a problem.
//!
//! The hypervisor denies CPU_ON while a phase (or a Linux window) is open, since a CPU started
//! inside it would go uncounted, and CPU_OFF to the last CPU on. The other errors (an entry
//! point outside RAM, a CPU the machine lacks, one already on) are PSCI's answers to the
//! call's own arguments, as firmware gives them. What the run relied on:
//!
//! - a DENIED CPU_ON, when a phase began after it before a CPU_ON started that CPU (or found
//!   it on): that phase measured the guest on fewer CPUs than it asked for — a problem;
//! - a DENIED CPU_OFF returns to its caller, which runs on as its own code says (PSCI's
//!   CPU_OFF returns only on failure): listed, not a problem;
//! - every other error is listed, not a problem: the guest got the answer firmware gives.

use super::{Report, describe_power_call};
use smccc::psci::error::{ALREADY_ON, DENIED, ON_PENDING};
use smccc::psci::{PSCI_CPU_ON_32, PSCI_CPU_ON_64};

fn is_cpu_on(function: u32) -> bool {
    matches!(function, PSCI_CPU_ON_32 | PSCI_CPU_ON_64)
}

/// Why the run relied on power call `i`, when it did: its DENIED CPU_ON left the guest
/// without a CPU through a phase that began after it.
pub fn relied_on(r: &Report, i: usize) -> Option<String> {
    let c = r.power_calls.get(i)?;
    if c.result != DENIED || !is_cpu_on(c.function) {
        return None;
    }
    let begun_at = |j: usize| r.power_call_phases_begun.get(j).copied().unwrap_or(0);
    // The first later CPU_ON that left the same CPU on, or starting.
    let started = r
        .power_calls
        .iter()
        .enumerate()
        .skip(i + 1)
        .find(|(_, d)| {
            is_cpu_on(d.function)
                && d.target == c.target
                && [0, ALREADY_ON, ON_PENDING].contains(&d.result)
        })
        .map(|(j, _)| j);
    let begun_by_then = started.map_or(r.phases_begun, begun_at);
    if begun_by_then <= begun_at(i) {
        return None;
    }
    Some(match started {
        Some(_) => format!(
            "{}: a phase began before the CPU was started: it ran on fewer CPUs than the guest asked for",
            describe_power_call(c)
        ),
        None => format!(
            "{}: the CPU was never started after it, and a phase began without it: it ran on fewer CPUs than the guest asked for",
            describe_power_call(c)
        ),
    })
}

/// Every DENIED call the run relied on, as problems.
pub(super) fn problems(r: &Report) -> Vec<String> {
    (0..r.power_calls.len())
        .filter_map(|i| relied_on(r, i))
        .collect()
}

/// Every power call answered with an error that is not a problem, and every call the
/// hypervisor answered NOT_SUPPORTED, as lines of the report.
pub fn notes(r: &Report) -> Vec<String> {
    let refused = r
        .power_calls
        .iter()
        .enumerate()
        .filter(|&(i, c)| c.result != 0 && relied_on(r, i).is_none())
        .map(|(_, c)| format!("CPU power call refused: {}", describe_power_call(c)));
    let unknown = r.unknown_calls.iter().map(|c| {
        format!(
            "unknown call {:#x} by {:?} at pc {:#x}: answered NOT_SUPPORTED",
            c.function, c.conduit, c.at.pc
        )
    });
    refused.chain(unknown).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use mtex_abi::report::{GuestState, PowerCall};
    use smccc::psci::PSCI_CPU_OFF;
    use smccc::psci::error::INVALID_ADDRESS;

    fn call(function: u32, target: u64, result: i32, phase: u32) -> PowerCall {
        PowerCall {
            cpu: 0,
            function,
            target,
            entry: 0x4008_0000,
            context_id: 0,
            result,
            phase,
            at: GuestState {
                pc: 0x4008_1000,
                el: 1,
                tco: false,
            },
        }
    }

    /// A report of `calls`, each made when the given number of phases had begun, and
    /// `begun` phases in all.
    fn report(calls: &[(PowerCall, usize)], begun: usize) -> Report {
        Report {
            power_calls: calls.iter().map(|c| c.0).collect(),
            power_call_phases_begun: calls.iter().map(|c| c.1).collect(),
            phases_begun: begun,
            ..Report::default()
        }
    }

    #[test]
    fn a_denied_cpu_on_is_a_problem_when_a_phase_ran_without_the_cpu() {
        let on = PSCI_CPU_ON_64;
        let denied = (call(on, 1, DENIED, 1), 1);
        // Denied inside phase 1, and no phase after it: listed only.
        let r = report(&[denied], 1);
        assert!(problems(&r).is_empty());
        assert_eq!(notes(&r).len(), 1);
        assert!(notes(&r)[0].contains("CPU_ON of 0x1"), "{:?}", notes(&r));
        assert!(
            notes(&r)[0].ends_with("DENIED, phase 1 open"),
            "{:?}",
            notes(&r)
        );
        // A phase began after it, the CPU never started: the run relied on it.
        let r = report(&[denied], 2);
        let p = problems(&r);
        assert_eq!(p.len(), 1);
        assert!(p[0].contains("DENIED, phase 1 open") && p[0].contains("never started"));
        assert!(notes(&r).is_empty(), "{:?}", notes(&r));
        // Started before the next phase (or found on): the guest had what it asked for.
        for answer in [0, ALREADY_ON, ON_PENDING] {
            let r = report(&[denied, (call(on, 1, answer, 0), 1)], 3);
            assert!(problems(&r).is_empty(), "{answer}");
        }
        // Started only after another phase ran; or another CPU started instead.
        let r = report(&[denied, (call(on, 1, 0, 0), 2)], 3);
        assert!(problems(&r)[0].contains("a phase began before the CPU was started"));
        let r = report(&[denied, (call(on, 2, 0, 0), 1)], 2);
        assert_eq!(problems(&r).len(), 1);
    }

    #[test]
    fn other_refusals_are_listed_and_never_a_problem() {
        let r = report(
            &[
                (call(PSCI_CPU_OFF, 0, DENIED, 0), 0),
                (call(PSCI_CPU_ON_64, 1, INVALID_ADDRESS, 0), 0),
                (call(PSCI_CPU_ON_64, 1, 0, 0), 0),
            ],
            5,
        );
        assert!(problems(&r).is_empty());
        let n = notes(&r);
        assert_eq!(n.len(), 2, "{n:?}");
        assert!(n[0].ends_with("CPU_OFF at pc 0x40081000: DENIED"), "{n:?}");
        assert!(n[1].ends_with("INVALID_ADDRESS"), "{n:?}");
    }
}
