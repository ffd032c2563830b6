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
//!
//! A window sampled on several CPUs has a share per CPU (`CpuSampled`): each CPU's units,
//! drawn on its own schedule, and its PMU's totals. Each CPU is a stratum: its estimate is
//! the ratio estimator of its own units against its own totals (by EL, as above), and the
//! window's is their sum, with the variance of a sum of independent strata and the
//! Welch–Satterthwaite degrees of freedom ([`crate::model::sample::stratified`]). Where a CPU
//! cannot carry an interval of its own for a counter (too few units, too few that met it, no
//! unit at that EL), the window's estimate of that counter pools every CPU's units instead
//! (one ratio over the window's totals): every CPU samples its instructions at the same rate,
//! so the pooled units are a sample of the whole, only a less efficient one.

use super::Phase;
use crate::model::sample::{Estimate, MIN_MET, Part, ratio_part, ratio_total, stratified};
use mtex_abi::counters::{self, Counter, El};
use mtex_abi::report::{CpuSampled, SampleUnit};
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
/// A window on several CPUs: the sum of its CPUs' ([`share_population`]).
pub fn population(p: &Phase, emulator: bool) -> Option<[u64; 2]> {
    let s = p.sampled.as_ref()?;
    let how = s.how?;
    if !s.shares.is_empty() {
        return s.shares.iter().try_fold([0, 0], |[a, b], share| {
            let [x, y] = share_population(s, share, emulator)?;
            Some([a + x, b + y])
        });
    }
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

/// One CPU's share of a window sampled on several CPUs: its instructions at [EL0, EL1];
/// None when nothing gave a figure.
///
/// On silicon: its PMU's, with its own units put right, as [`population`] does for a phase.
/// On an emulator: the emulator's own count of that CPU's share ([`super::Sampled::counted`],
/// the `mtex-oracle` plugin's `shares=on`), because under `-icount` QEMU's PMU counts every
/// vCPU's instructions, not the CPU's own. The plugin counts instructions begun (QEMU's step
/// stubs left out); in the trace's unit, what the units abandoned for an exception is taken
/// off and the branches the hypervisor executed for them are added. An instruction abandoned
/// outside the units (a page fault, restarted after it) stays in, once per fault: the units'
/// rate is then scaled by a total high by the share's faults, a bias far inside any interval
/// (the window's faults against its instructions: `docs/sampling.md`).
pub fn share_population(
    s: &super::Sampled,
    share: &CpuSampled,
    emulator: bool,
) -> Option<[u64; 2]> {
    let mut sum = TraceCounts::default();
    for u in s.stretches_on(share.cpu) {
        sum.add(&u.counts);
    }
    if share.sampled.whole {
        return Some([sum.instructions_el0, sum.instructions_el1]);
    }
    if emulator {
        let counted = s
            .counted
            .iter()
            .find(|c| c.cpu == share.cpu && c.id == u64::from(share.id) && c.closed)?;
        let e = &share.sampled.engine;
        let [b0, b1] = counted.instructions;
        return Some([
            (b0 + e.branches_el0).checked_sub(sum.abandoned_el0)?,
            (b1 + e.branches_el1).checked_sub(sum.abandoned_el1)?,
        ]);
    }
    let [el0, el1] = share.pmu_instructions?;
    let stats = mtex_abi::report::PhaseStats {
        emulated: share.emulated,
        ..Default::default()
    };
    let [exp_el1, exp_el0] =
        super::checks::pmu_expected(&stats, &sum, share.sampled.engine, emulator);
    Some([
        (el0 + sum.instructions_el0).checked_sub(exp_el0)?,
        (el1 + sum.instructions_el1).checked_sub(exp_el1)?,
    ])
}

/// The (instructions at the counter's EL, count) of each unit.
fn pairs<'a>(c: &Counter, units: impl Iterator<Item = &'a SampleUnit>) -> Vec<(u64, u64)> {
    units
        .map(|u| {
            let t = &u.counts;
            let x = match c.el {
                Some(El::User) => t.instructions_el0,
                Some(El::Kernel) => t.instructions_el1,
                _ => t.instructions_el0 + t.instructions_el1,
            };
            (x, c.of_trace(t).unwrap_or(0))
        })
        .collect()
}

/// The instructions of the counter's EL among [EL0, EL1].
fn at_el(c: &Counter, [n0, n1]: [u64; 2]) -> u64 {
    match c.el {
        Some(El::User) => n0,
        Some(El::Kernel) => n1,
        _ => n0 + n1,
    }
}

/// The trace counters (only they are estimated: the records' own counters are exact).
fn trace_counters() -> impl Iterator<Item = &'static Counter> {
    counters::all().filter(|c| c.of_trace(&TraceCounts::default()).is_some())
}

/// A share whose units can carry estimates: its timer kept reaching EL2. (QEMU's PMU
/// over-counts at untraced ID- or debug-register traps, [`over_counted`], but a share's
/// totals on an emulator are the plugin's, which counts each instruction as it begins.)
fn share_usable(share: &CpuSampled) -> bool {
    !share.sampled.timer_stopped
}

/// Each CPU's estimates of a window sampled on several CPUs, by CPU number: every trace
/// counter's, from that CPU's units and totals alone. A CPU whose share cannot carry them
/// (its timer stopped, its PMU gave no figure) is left out; [`problems`] names it.
pub fn cpu_estimates(p: &Phase, emulator: bool) -> Vec<(u32, Vec<(&'static Counter, Estimate)>)> {
    let Some(s) = p.sampled.as_ref() else {
        return Vec::new();
    };
    s.shares
        .iter()
        .filter(|share| share_usable(share))
        .filter_map(|share| {
            let n = share_population(s, share, emulator)?;
            let units: Vec<&SampleUnit> = s.stretches_on(share.cpu).filter(|u| !u.lead).collect();
            let es = trace_counters()
                .filter_map(|c| {
                    let e = ratio_total(&pairs(c, units.iter().copied()), at_el(c, n), LEVEL)?;
                    Some((c, e.judged(MIN_UNITS, MIN_MET)))
                })
                .collect();
            Some((share.cpu, es))
        })
        .collect()
}

/// A window sampled on several CPUs: each counter's estimate, stratified by CPU where every
/// CPU's own can carry an interval, pooled over the CPUs' units otherwise (the module's
/// comment says why both hold). Empty when a CPU's share cannot carry estimates: the units
/// would not cover the window ([`problems`] says which).
fn window_estimates(p: &Phase, emulator: bool) -> Vec<(&'static Counter, Estimate)> {
    let Some(s) = p.sampled.as_ref() else {
        return Vec::new();
    };
    if !s.shares.iter().all(share_usable) {
        return Vec::new();
    }
    let Some(per_cpu) = s
        .shares
        .iter()
        .map(|share| {
            let n = share_population(s, share, emulator)?;
            let units: Vec<&SampleUnit> = s.stretches_on(share.cpu).filter(|u| !u.lead).collect();
            Some((n, units))
        })
        .collect::<Option<Vec<_>>>()
    else {
        return Vec::new();
    };
    let total = per_cpu
        .iter()
        .fold([0, 0], |[a, b], ([x, y], _)| [a + x, b + y]);
    trace_counters()
        .filter_map(|c| {
            let parts: Option<Vec<Part>> = per_cpu
                .iter()
                .map(|(n, units)| ratio_part(&pairs(c, units.iter().copied()), at_el(c, *n), LEVEL))
                .collect();
            let each_holds = |parts: &[Part]| {
                parts.iter().all(|part| {
                    part.population == 0 || {
                        let e = part.estimate.judged(MIN_UNITS, MIN_MET);
                        e.exact || e.has_interval()
                    }
                })
            };
            let e = match parts {
                Some(parts) if each_holds(&parts) => stratified(&parts, LEVEL)?,
                _ => {
                    let all: Vec<&SampleUnit> = per_cpu
                        .iter()
                        .flat_map(|(_, u)| u.iter().copied())
                        .collect();
                    ratio_total(&pairs(c, all.into_iter()), at_el(c, total), LEVEL)?
                }
            };
            Some((c, e.judged(MIN_UNITS, MIN_MET)))
        })
        .collect()
}

/// Every trace counter of a sampled phase with its estimate, in the counters' table order.
/// Empty for a phase that is not sampled, or whose totals are unknown (the report says why
/// as a problem: [`problems`]).
pub fn estimates(p: &Phase, emulator: bool) -> Vec<(&'static Counter, Estimate)> {
    if p.sampled.as_ref().is_some_and(|s| !s.shares.is_empty()) {
        return window_estimates(p, emulator);
    }
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
    trace_counters()
        .filter_map(|c| {
            ratio_total(&pairs(c, s.units()), at_el(c, [n0, n1]), LEVEL)
                .map(|e| (c, e.judged(MIN_UNITS, MIN_MET)))
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
        Some(how) if !s.shares.is_empty() => {
            for share in &s.shares {
                let cpu = share.cpu;
                if share_population(s, share, emulator).is_none() {
                    out.push(if emulator {
                        format!(
                            "{name}: no count of CPU {cpu}'s own instructions in its share came \
                             from QEMU's plugin (QEMU's PMU counts every vCPU's): no estimate is \
                             made of it or of the window"
                        )
                    } else {
                        format!(
                            "{name}: CPU {cpu}'s PMU gave no exact instruction total for its \
                             share: no estimate is made of it or of the window"
                        )
                    });
                } else if share.sampled.timer_stopped {
                    out.push(format!(
                        "{name}: CPU {cpu}'s sampling timer stopped reaching the hypervisor \
                         before it left the window (the guest took the interrupt's routing, or \
                         masked it in its redistributor): its units cover only part of its \
                         share, so no estimate is made of it or of the window; the other CPUs' \
                         estimates are their own"
                    ));
                }
            }
            if !how.whole && (how.units as usize) < MIN_UNITS {
                out.push(format!(
                    "{name}: {} sampled units over its CPUs: too few for an interval, which \
                     needs {MIN_UNITS} (lower the gap, `mtex.sample=UNIT:GAP_US`)",
                    how.units
                ));
            }
        }
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
                stretch_cpus: vec![0; units as usize],
                shares: Vec::new(),
                counted: Vec::new(),
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

    /// A window on two CPUs: CPU 0 traced 60 units of 100 EL1 instructions (checked kernel
    /// reads 5 to 14 a unit, a DSB in 20 of them) of its 100,000; CPU 1 traced 40 (reads 15 to
    /// 24, a DSB in 2) of its 50,000.
    fn two_cpus() -> Phase {
        use mtex_abi::report::CpuSampled;
        let unit = |rd_k: u64, dsb: u64| SampleUnit {
            id: 1,
            lead: false,
            guest_clock: 0,
            counts: TraceCounts {
                instructions_el1: 100,
                dsb,
                architectural: mtex_trace::counts::ByEl {
                    rd_k,
                    ..Default::default()
                },
                ..TraceCounts::default()
            },
        };
        let mut s = Sampled::default();
        for i in 0..100u64 {
            let (cpu, u) = if i % 5 < 3 {
                (0, unit(5 + (i * 7) % 10, u64::from(i % 5 == 0)))
            } else {
                (1, unit(15 + (i * 3) % 10, u64::from(i == 3 || i == 8)))
            };
            s.stretches.push(u);
            s.stretch_cpus.push(cpu);
        }
        let how = |units| PhaseSampled {
            id: 1,
            units,
            unit_instructions: 100,
            gap_us: 10,
            seed: 1,
            ..PhaseSampled::default()
        };
        s.how = Some(how(100));
        s.shares = [(0, 60, 100_000), (1, 40, 50_000)]
            .map(|(cpu, units, el1)| CpuSampled {
                id: 1,
                cpu,
                sampled: how(units),
                pmu_instructions: Some([0, el1]),
                ..CpuSampled::default()
            })
            .to_vec();
        Phase {
            id: 1,
            name: "window".into(),
            end: Some(Default::default()),
            sampled: Some(s),
            ..Phase::default()
        }
    }

    fn find(es: &[(&'static Counter, Estimate)], name: &str) -> Estimate {
        es.iter().find(|(c, _)| c.name == name).unwrap().1
    }

    #[test]
    fn a_window_on_several_cpus_is_estimated_cpu_by_cpu_and_summed() {
        let p = two_cpus();
        assert_eq!(population(&p, false), Some([0, 150_000]));
        let by_cpu = cpu_estimates(&p, false);
        assert_eq!(by_cpu.iter().map(|(c, _)| *c).collect::<Vec<_>>(), [0, 1]);
        // Each CPU's: its units' rate times its own instructions.
        let rate = |cpu: u32| {
            let s = p.sampled.as_ref().unwrap();
            let (y, x) = s.stretches_on(cpu).fold((0, 0), |(y, x), u| {
                (y + u.counts.architectural.rd_k, x + 100)
            });
            y as f64 / x as f64
        };
        let e0 = find(&by_cpu[0].1, "mem_access_checked_rd:k");
        let e1 = find(&by_cpu[1].1, "mem_access_checked_rd:k");
        assert!((e0.value - rate(0) * 100_000.0).abs() < 1e-6);
        assert!((e1.value - rate(1) * 50_000.0).abs() < 1e-6);
        assert!(e0.has_interval() && e1.has_interval());
        // The window's: their sum, its variance theirs summed (so its half-width lies
        // between the larger one's and their sum).
        let w = find(&estimates(&p, false), "mem_access_checked_rd:k");
        assert!((w.value - e0.value - e1.value).abs() < 1e-6, "{w:?}");
        assert!(w.has_interval(), "{w:?}");
        assert!(
            w.half_width > e0.half_width.max(e1.half_width) * 0.9,
            "{w:?}"
        );
        assert!(w.half_width < e0.half_width + e1.half_width, "{w:?}");
        assert_eq!(w.units, 100);
        // One rate over both CPUs would be another figure: the CPUs' rates differ.
        let pooled = (rate(0) * 60.0 + rate(1) * 40.0) / 100.0 * 150_000.0;
        assert!((w.value - pooled).abs() > 1.0);
        assert!(problems(&p, false).is_empty(), "{:?}", problems(&p, false));
    }

    #[test]
    fn a_counter_too_rare_on_one_cpu_is_estimated_from_every_cpu_s_units_pooled() {
        let p = two_cpus();
        let by_cpu = cpu_estimates(&p, false);
        assert!(find(&by_cpu[0].1, "dsb").has_interval());
        assert!(!find(&by_cpu[1].1, "dsb").has_interval(), "2 units met it");
        let w = find(&estimates(&p, false), "dsb");
        // 22 DSBs in 10,000 traced instructions, over the window's 150,000.
        assert!(
            (w.value - 22.0 / 10_000.0 * 150_000.0).abs() < 1e-6,
            "{w:?}"
        );
        assert!(w.has_interval() && w.met == 22, "{w:?}");
    }

    #[test]
    fn a_cpu_whose_timer_stopped_keeps_the_others_estimates_and_the_window_gets_none() {
        let mut p = two_cpus();
        p.sampled.as_mut().unwrap().shares[1].sampled.timer_stopped = true;
        assert!(
            estimates(&p, false).is_empty(),
            "no estimate of the whole window"
        );
        let by_cpu = cpu_estimates(&p, false);
        assert_eq!(by_cpu.len(), 1);
        assert_eq!(by_cpu[0].0, 0, "CPU 0's share is its own");
        let problems = problems(&p, false);
        assert!(
            problems.len() == 1 && problems[0].contains("CPU 1's sampling timer stopped"),
            "{problems:?}"
        );
        // A CPU whose PMU gave no total: named, and no window estimate either.
        let mut p = two_cpus();
        p.sampled.as_mut().unwrap().shares[0].pmu_instructions = None;
        assert!(estimates(&p, false).is_empty());
        assert_eq!(population(&p, false), None);
        let problems = super::problems(&p, false);
        assert!(
            problems.len() == 1 && problems[0].contains("CPU 0's PMU gave no exact"),
            "{problems:?}"
        );
    }

    #[test]
    fn on_an_emulator_a_shares_totals_are_the_plugins_count_never_its_pmus() {
        use mtex_abi::oracle::OracleShare;
        let mut p = two_cpus();
        let counted = |cpu, el1, closed| OracleShare {
            id: 1,
            cpu,
            closed,
            instructions: [0, el1],
            step_stubs: 0,
        };
        {
            let s = p.sampled.as_mut().unwrap();
            s.counted = vec![counted(0, 80_000, true), counted(1, 30_000, true)];
            // What the units abandoned is not in the trace's unit; what EL2 executed for them is.
            s.stretches[0].counts.abandoned_el1 = 7;
            s.shares[0].sampled.engine.branches_el1 = 3;
        }
        // On silicon the PMU's (100,000 and 50,000, with the 3 branches the CPU never ran);
        // on an emulator the plugin's.
        assert_eq!(population(&p, false), Some([0, 150_003]));
        assert_eq!(population(&p, true), Some([0, 80_000 - 7 + 3 + 30_000]));
        let silicon = find(&cpu_estimates(&p, false)[0].1, "mem_access_checked_rd:k");
        let emulator = find(&cpu_estimates(&p, true)[0].1, "mem_access_checked_rd:k");
        let ratio = emulator.value / silicon.value;
        assert!((ratio - 79_996.0 / 100_003.0).abs() < 1e-9, "{ratio}");
        assert!(problems(&p, true).is_empty(), "{:?}", problems(&p, true));
        // A share the plugin never saw close, or did not count at all: no estimate of that
        // CPU, none of the window, and a problem that names the CPU and says why.
        for counted in [
            vec![counted(0, 80_000, false), counted(1, 30_000, true)],
            vec![counted(1, 30_000, true)],
            vec![
                counted(1, 30_000, true),
                OracleShare {
                    id: 2,
                    ..counted(0, 80_000, true)
                },
            ],
        ] {
            p.sampled.as_mut().unwrap().counted = counted;
            assert!(estimates(&p, true).is_empty());
            let by_cpu = cpu_estimates(&p, true);
            assert_eq!(by_cpu.iter().map(|(c, _)| *c).collect::<Vec<_>>(), [1]);
            let problems = problems(&p, true);
            assert!(
                problems.len() == 1
                    && problems[0].contains("no count of CPU 0's own instructions")
                    && problems[0].contains("QEMU's PMU counts every vCPU's"),
                "{problems:?}"
            );
        }
    }
}
