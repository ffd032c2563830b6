//! A sampled phase's figures: each trace counter of the phase estimated from its units
//! (`crate::model::sample::ratio_total`, in the order the schedule traced them), against the exact
//! instruction totals of the EL that executed what it counts. Counters of EL0 (`:u`) rest on
//! EL0's instructions, those of EL1 (`:k`) on EL1's: a ratio estimator per EL
//! (post-stratified by EL). A counter that is not of one EL rests on both ELs' instructions
//! together. Each estimate is judged ([`crate::model::sample::Estimate::judged`]): too few units, or
//! too few that met the counter, and it is shown as not estimable, in every output alike.
//!
//! The totals are the PMU's count of the whole phase, with the units' own instructions put
//! right: the PMU counted what the units traced as [`super::checks::pmu_expected`] says it
//! does (the branches the hypervisor executed for the guest are not counted by the CPU; on
//! QEMU a kernel entry taken while stepping counts one more), so the phase's instructions
//! are the PMU's count less that, plus what the trace counted — in the units and in the
//! leads stepped before them alike. A phase traced whole (gap 0) rests on the trace's own
//! sum, exactly.

use super::Phase;
use crate::model::sample::{Estimate, MIN_MET, ratio_total};
use mtex_abi::counters::{self, Counter, El};
use mtex_trace::counts::TraceCounts;

/// The confidence level of every interval mtex prints.
pub const LEVEL: f64 = 0.95;

/// Units below which no interval is given ([`crate::model::sample::MIN_UNITS`]).
pub use crate::model::sample::MIN_UNITS;

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
    // Units from part of the phase only, or totals QEMU over-counted: no estimate of the
    // whole is made (`problems`).
    if s.how
        .is_some_and(|h| h.timer_stopped || over_counted(&h, emulator))
    {
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
            ratio_total(&pairs, n, LEVEL).map(|e| (c, e.judged(MIN_UNITS, MIN_MET)))
        })
        .collect()
}

/// On an emulator, the phase's instruction totals take in instructions never executed: QEMU
/// raises an ID- or debug-register trap from a check in the middle of a block of translated
/// code, and counts the rest of the block as executed (measured on QEMU 10.0 under `-icount`:
/// a loop reading ID_AA64PFR1_EL1, MDSCR_EL1 or OSDLR_EL1 at the top of a 138-instruction
/// turn counted about 83 instructions more per turn than it ran; one reading it last, 1
/// more). Traced, every instruction is a block of its own, so the units are exact; the totals
/// the estimates are scaled by are not, and by how much no one measures.
fn over_counted(how: &mtex_abi::report::PhaseSampled, emulator: bool) -> bool {
    emulator && !how.whole && how.untraced_id_debug_traps > 0
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
            } else if over_counted(&how, emulator) {
                out.push(format!(
                    "{name}: {} ID- or debug-register accesses trapped outside its units; QEMU \
                     counts the rest of a block of translated code as executed at each, so its \
                     instruction totals are too high by an unknown amount: no estimate is made \
                     (trace the phase whole, or keep such accesses out of it)",
                    how.untraced_id_debug_traps
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
        out.extend(super::checks::impdef_problems(
            &format!("{name} (its units)"),
            &t,
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::report::Sampled;
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

    /// A phase of 100,000 EL1 and 10,000 EL0 instructions sampled in 60 units of 100 EL1
    /// and 10 EL0 instructions: checked kernel reads in every unit (5 to 14), a DSB and a
    /// checked kernel write in 3 of them, EL0 accesses in none.
    fn mixed() -> Phase {
        let mut p = sampled(60, false);
        if let Some(s) = p.stats.as_mut() {
            s.el0_instructions = Some(10_000);
        }
        if let Some(s) = p.sampled.as_mut() {
            for (i, u) in s.stretches.iter_mut().enumerate() {
                u.counts.instructions_el0 = 10;
                u.counts.architectural.rd_k = 5 + (i as u64 * 7) % 10;
                u.counts.dsb = u64::from(i % 20 == 0);
                u.counts.architectural.wr_k = u64::from(i % 20 == 0);
            }
        }
        p
    }

    #[test]
    fn every_output_says_the_same_of_each_estimate() {
        let p = mixed();
        let es = estimates(&p, false);
        let get = |name: &str| es.iter().find(|(c, _)| c.name == name).unwrap().1;
        let rd_k = get("mem_access_checked_rd:k");
        assert!(rd_k.has_interval() && rd_k.half_width > 0.0, "{rd_k:?}");
        let dsb = get("dsb");
        assert_eq!(dsb.met, 3);
        assert!(!dsb.has_interval(), "{dsb:?}");
        let rd_u = get("mem_access_checked_rd:u");
        assert!(rd_u.none_seen() && !rd_u.has_interval(), "{rd_u:?}");

        let report = crate::model::report::Report {
            phases: vec![p],
            ..crate::model::report::Report::default()
        };
        let doc = crate::model::results::Results::single(&report);
        // report.json: no half-width without an interval, and the reason.
        let json = serde_json::to_value(&doc).unwrap();
        let e = &json["runs"][0]["phases"][0]["estimates"];
        assert!(
            e["mem_access_checked_rd:k"]["half_width"].is_number(),
            "{e}"
        );
        assert!(e["mem_access_checked_rd:k"].get("not_estimable").is_none());
        assert!(
            e["dsb"].get("half_width").is_none_or(|h| h.is_null()),
            "{e}"
        );
        assert_eq!(
            e["dsb"]["not_estimable"],
            serde_json::json!({"too_few_met": {"met": 3, "need": 10}})
        );
        // It reads back the same.
        let back = crate::model::results::Results::from_json(&json.to_string()).unwrap();
        let dsb_back = back.runs[0].phases[0].estimates["dsb"].estimate();
        assert_eq!(dsb_back.not_estimable, dsb.not_estimable);
        // CSV: its kind.
        let csv = crate::output::csv::render(&doc);
        let row = |name: &str| {
            csv.lines()
                .find(|l| l.contains(&format!(",{name},")))
                .unwrap_or_else(|| panic!("no {name} row:\n{csv}"))
                .to_string()
        };
        assert!(row("mem_access_checked_rd:k").contains(",estimate,"));
        assert!(row("dsb").ends_with(",not_estimable,,"), "{}", row("dsb"));
        // The text's phase block: an interval, or said to be not estimable.
        let text = crate::output::full::render(&doc);
        let line = |name: &str| {
            text.lines()
                .find(|l| l.contains(&format!(" {name} ")))
                .unwrap_or_else(|| panic!("no {name} line:\n{text}"))
                .to_string()
        };
        assert!(line("mem_access_checked_rd:k").contains("% (95% CI, 60 units)"));
        let l = line("dsb");
        // (The note may wrap onto the next line.)
        assert!(
            l.contains("~50 ") && l.contains("(not estimable: 3 units met it"),
            "{l}"
        );
        assert!(!l.contains('±'), "{l}");
        // The summary's table (and the HTML page, which shows it).
        let summary = crate::output::summary::sampled_lines(&doc).join("\n");
        assert!(summary.contains(" ±"), "{summary}");
        assert!(summary.contains("not estimable"), "{summary}");
        assert!(summary.contains("0 seen"), "{summary}");
        let html = crate::output::html::page(&doc).unwrap();
        assert!(html.contains("not estimable"), "the summary's table");
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

    #[test]
    fn id_register_traps_outside_the_units_withhold_the_estimates_on_an_emulator_only() {
        let mut phase = sampled(40, false);
        if let Some(how) = phase.sampled.as_mut().and_then(|s| s.how.as_mut()) {
            how.untraced_id_debug_traps = 3;
        }
        assert!(estimates(&phase, true).is_empty());
        let p = problems(&phase, true);
        assert!(
            p.len() == 1 && p[0].contains("3 ID- or debug-register accesses"),
            "{p:?}"
        );
        // On silicon a trapped access is one instruction, counted as such.
        assert!(!estimates(&phase, false).is_empty());
        assert!(problems(&phase, false).is_empty());
    }
}
