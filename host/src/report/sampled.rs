//! A sampled phase's figures: each trace counter of the phase estimated from its units
//! (`crate::sample::ratio_total`), against the exact instruction totals of the EL that
//! executed what it counts. Counters of EL0 (`:u`) rest on EL0's instructions, those of EL1
//! (`:k`) on EL1's: a ratio estimator per EL (post-stratified by EL). A counter that is not
//! of one EL rests on both ELs' instructions together.
//!
//! The totals are the PMU's count of the whole phase, with the units' own instructions put
//! right: the PMU counted what the units traced as [`super::checks::pmu_expected`] says it
//! does (the branches the hypervisor executed for the guest are not counted by the CPU; on
//! QEMU a kernel entry taken while stepping counts one more), so the phase's instructions
//! are the PMU's count less that, plus what the trace counted — in the units and in the
//! leads stepped before them alike. A phase traced whole (gap 0) rests on the trace's own
//! sum, exactly.

use super::Phase;
use crate::sample::{Estimate, ratio_total};
use mtex_abi::counters::{self, Counter, El};
use mtex_trace::counts::TraceCounts;

/// The confidence level of every interval mtex prints.
pub const LEVEL: f64 = 0.95;

/// Units below which no interval is given (it is unbounded): the interval rests on the units'
/// spread being near normal, which a handful of units cannot show — two units of a loop in
/// its steady state agree to the count and would claim a precision they do not have.
pub const MIN_UNITS: usize = 30;

/// The sum of everything a sampled phase's engine traced: its units and their leads.
pub fn traced_sum(p: &Phase) -> Option<TraceCounts> {
    let s = p.sampled.as_ref()?;
    let mut t = TraceCounts::default();
    for u in &s.stretches {
        t.add(&u.counts);
    }
    Some(t)
}

/// The phase's exact instructions at [EL0, EL1], or None when the PMU gave no figure (no
/// instruction counter, or one disturbed in the phase) and the phase was not traced whole.
pub fn population(p: &Phase, emulator: bool) -> Option<[u64; 2]> {
    let s = p.sampled.as_ref()?;
    let how = s.how?;
    let sum = traced_sum(p)?;
    if how.whole {
        return Some([sum.instructions_el0, sum.instructions_el1]);
    }
    let stats = p.stats.as_ref()?;
    if stats.pmu_disturbed {
        return None;
    }
    let [exp_el1, exp_el0] = super::checks::pmu_expected(stats, &sum, how.engine, emulator);
    let el0 = stats.el0_instructions?;
    let el1 = stats.el1_instructions?;
    Some([
        (el0 + sum.instructions_el0).checked_sub(exp_el0)?,
        (el1 + sum.instructions_el1).checked_sub(exp_el1)?,
    ])
}

/// Every trace counter of a sampled phase with its estimate, in the counters' table order.
/// Empty for a phase that is not sampled, or whose totals are unknown (the report says why
/// as a problem: [`problems`]).
pub fn estimates(p: &Phase, emulator: bool) -> Vec<(&'static Counter, Estimate)> {
    let (Some(s), Some([n0, n1])) = (p.sampled.as_ref(), population(p, emulator)) else {
        return Vec::new();
    };
    // Units from part of the phase only: no estimate of the whole is made (`problems`).
    if s.how.is_some_and(|h| h.timer_stopped) {
        return Vec::new();
    }
    counters::all()
        .filter_map(|c| {
            // Only trace counters are estimated: the records' own counters are exact.
            c.of_trace(&TraceCounts::default())?;
            let pairs: Vec<(u64, u64)> = s
                .units()
                .map(|u| {
                    let t = &u.counts;
                    let x = match c.el {
                        Some(El::User) => t.instructions_el0,
                        Some(El::Kernel) => t.instructions_el1,
                        _ => t.instructions_el0 + t.instructions_el1,
                    };
                    (x, c.of_trace(t).unwrap_or(0))
                })
                .collect();
            let n = match c.el {
                Some(El::User) => n0,
                Some(El::Kernel) => n1,
                _ => n0 + n1,
            };
            ratio_total(&pairs, n, LEVEL).map(|mut e| {
                if !e.exact && e.units < MIN_UNITS {
                    e.half_width = f64::INFINITY;
                }
                (c, e)
            })
        })
        .collect()
}

/// What a reader of a sampled phase's estimates should know of their basis: store-exclusives
/// that failed in its units (stepping clears the exclusive monitor) mean the guest may have
/// acted otherwise traced than untraced, and the estimates are of how it ran traced.
pub fn notes(p: &Phase) -> Vec<String> {
    let failed: u64 = p
        .sampled
        .iter()
        .flat_map(|s| s.units())
        .map(|u| u.counts.failed_store_exclusives)
        .sum();
    if failed == 0 {
        return Vec::new();
    }
    vec![format!(
        "phase {} ({}): {failed} store-exclusives failed in its sampled units (stepping \
         clears the exclusive monitor): a guest that acts on their failure runs otherwise \
         traced than untraced, and the estimates are of how it ran traced",
        p.id, p.name
    )]
}

/// What keeps a sampled phase's figures from being made, or makes them doubtful.
pub fn problems(p: &Phase, emulator: bool) -> Vec<String> {
    let Some(s) = p.sampled.as_ref() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let name = format!("phase {} ({})", p.id, p.name);
    match s.how {
        None if p.end.is_some() => {
            out.push(format!("{name}: sampled, but its schedule was never sent"))
        }
        None => {}
        Some(how) => {
            if population(p, emulator).is_none() {
                out.push(format!(
                    "{name}: sampled, but the PMU gave no exact instruction total for it: \
                     no estimate is made"
                ));
            } else if how.timer_stopped {
                out.push(format!(
                    "{name}: its sampling timer stopped reaching the hypervisor before it ended \
                     (the guest took the interrupt's routing): the units cover only part of it, \
                     no estimate holds for the whole"
                ));
            } else if !how.whole && (how.units as usize) < MIN_UNITS {
                out.push(format!(
                    "{name}: {} sampled unit{}: too few for an interval, which needs \
                     {MIN_UNITS} (lower the gap, `mtex.sample=UNIT:GAP_US`)",
                    how.units,
                    if how.units == 1 { "" } else { "s" }
                ));
            }
        }
    }
    if let Some(t) = traced_sum(p) {
        if t.runs_lost > 0 {
            out.push(format!(
                "{name}: {} breakpoint runs in its units ended where the plan did not know: \
                 the units are short of them (estimates in doubt)",
                t.runs_lost
            ));
        }
        if t.unknown_mem > 0 {
            out.push(format!(
                "{name}: {} load/store instructions in its units the decoder does not model: \
                 not judged (access estimates in doubt)",
                t.unknown_mem
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Sampled;
    use mtex_abi::report::{PhaseSampled, PhaseStats, SampleUnit};
    use mtex_trace::counts::TraceCounts;

    /// A phase of 100,000 EL1 instructions (the PMU's), sampled in `units` units of 100
    /// instructions, each with 10 checked kernel reads.
    fn sampled(units: u32, timer_stopped: bool) -> Phase {
        let counts = TraceCounts {
            instructions_el1: 100,
            architectural: mtex_trace::counts::ByEl {
                rd_k: 10,
                ..Default::default()
            },
            ..TraceCounts::default()
        };
        Phase {
            id: 1,
            name: "window".into(),
            end: Some(Default::default()),
            stats: Some(PhaseStats {
                el0_instructions: Some(0),
                el1_instructions: Some(100_000),
                ..PhaseStats::default()
            }),
            sampled: Some(Sampled {
                stretches: (0..units)
                    .map(|_| SampleUnit {
                        id: 1,
                        lead: false,
                        guest_clock: 0,
                        counts,
                    })
                    .collect(),
                how: Some(PhaseSampled {
                    id: 1,
                    units,
                    unit_instructions: 100,
                    gap_us: 10,
                    seed: 1,
                    timer_stopped,
                    ..PhaseSampled::default()
                }),
            }),
            ..Phase::default()
        }
    }

    #[test]
    fn a_phase_whose_timer_stopped_gets_a_problem_and_no_estimate() {
        let whole_phase = sampled(40, false);
        let rd_k = estimates(&whole_phase, false)
            .into_iter()
            .find(|(c, _)| c.name == "mem_access_checked_rd:k")
            .map(|(_, e)| e.value);
        assert_eq!(rd_k, Some(10_000.0));
        assert!(problems(&whole_phase, false).is_empty());
        let part = sampled(40, true);
        assert!(estimates(&part, false).is_empty());
        let p = problems(&part, false);
        assert!(
            p.len() == 1 && p[0].contains("sampling timer stopped"),
            "{p:?}"
        );
    }
}
