//! A run of a scenario booted at several CPU counts (`cpus = [1, 2, 4, 8]`): each of its
//! windows that has an operation count, its checked accesses per operation by kernel and CPU
//! count. The text's table, report.json and the plot all read this one form.

use crate::model::results::{EstimateOut, PhaseOut, Results};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The checked-access counters given per operation, by EL and direction.
pub const COUNTERS: [&str; 4] = [
    "mem_access_checked_rd:k",
    "mem_access_checked_wr:k",
    "mem_access_checked_rd:u",
    "mem_access_checked_wr:u",
];

/// One window of a run at each CPU count, on each kernel.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CpuSeries {
    /// The run as the scenario names it (its boots are the runs `RUN-Ncpu-KERNEL`).
    pub run: String,
    pub window: u32,
    /// What the window runs, as the scenario writes it (`{cpus}` for the CPU count).
    pub label: String,
    /// By kernel in the run's order, then by CPU count in the run's order.
    pub points: Vec<CpuPoint>,
}

/// A kernel at one CPU count: the window's operations and its counters per operation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CpuPoint {
    pub kernel: String,
    pub cpus: u32,
    pub operations: u64,
    /// Where the operation count was read (the program's own line).
    pub source: String,
    /// Each of [`COUNTERS`] per operation: a count divided by the operations (`exact`), or a
    /// sampled window's estimate with its interval, both divided (the operation count is
    /// exact, so the interval keeps its relative width).
    pub per_operation: BTreeMap<String, EstimateOut>,
}

/// One boot's window per operation, if it was measured (traced whole or sampled) and its
/// program's operations were counted.
pub fn point(kernel: &str, cpus: u32, doc: &Results, window: u32) -> Option<CpuPoint> {
    let ops = doc
        .linux
        .as_ref()?
        .windows
        .iter()
        .find(|w| w.id == window)?
        .operations
        .clone()?;
    let p = doc
        .runs
        .iter()
        .flat_map(|r| &r.phases)
        .find(|p| p.id == window && p.end_ts.is_some() && (p.traced || p.sampled.is_some()))?;
    let per_operation = COUNTERS
        .iter()
        .filter_map(|name| Some((name.to_string(), divided(p, name, ops.count)?)))
        .collect();
    Some(CpuPoint {
        kernel: kernel.to_string(),
        cpus,
        operations: ops.count,
        source: ops.source,
        per_operation,
    })
}

/// A counter of the phase over `ops`: exact where the phase counted it, else its estimate.
fn divided(p: &PhaseOut, name: &str, ops: u64) -> Option<EstimateOut> {
    let n = ops.max(1) as f64;
    if p.sampled.is_none() {
        let c = p.counters.get(name).copied().unwrap_or(0);
        return Some(EstimateOut {
            value: c as f64 / n,
            half_width: None,
            level: 0.95,
            units: 0,
            met: 0,
            sampled: 1.0,
            exact: true,
            not_estimable: None,
        });
    }
    let e = p.estimates.get(name)?;
    Some(EstimateOut {
        value: e.value / n,
        half_width: e.half_width.map(|h| h / n),
        ..*e
    })
}

/// A figure per operation as the text and the plot's labels give it: `3,554.6 ± 6.1%`,
/// `0 seen`, `~3.0 (not estimable)`.
pub fn figure(e: &EstimateOut) -> String {
    let v = crate::output::text::thousands_f64(e.value, 1);
    match e.half_width {
        _ if e.exact => v,
        Some(h) if e.value > 0.0 => {
            format!("{v} ± {}", crate::model::sample::percent(h / e.value))
        }
        _ if e.value == 0.0 => "0 seen".to_string(),
        _ => format!("~{v} (not estimable)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linux::operations::{Operations, test_phase};
    use crate::model::linux::{LinuxSection, WindowInfo};

    fn doc(phase: PhaseOut, ops: Option<u64>) -> Results {
        let mut run = crate::profile::fixture::results().runs[0].clone();
        run.phases = vec![phase];
        let mut d = Results::new(None, vec![run], Vec::new());
        d.linux = Some(LinuxSection {
            windows: vec![WindowInfo {
                id: 1,
                operations: ops.map(|count| Operations {
                    count,
                    source: "x".into(),
                }),
                ..Default::default()
            }],
            ..Default::default()
        });
        d
    }

    #[test]
    fn a_window_traced_whole_is_divided_exactly() {
        let mut p = test_phase(&[
            ("mem_access_checked_rd:k", 1_000),
            ("mem_access_checked_wr:u", 250),
        ]);
        p.id = 1;
        let pt = point("k", 2, &doc(p, Some(100)), 1).expect("a point");
        assert_eq!((pt.kernel.as_str(), pt.cpus, pt.operations), ("k", 2, 100));
        let rd = &pt.per_operation["mem_access_checked_rd:k"];
        assert!(rd.exact && rd.value == 10.0, "{rd:?}");
        assert_eq!(pt.per_operation["mem_access_checked_wr:u"].value, 2.5);
        assert_eq!(pt.per_operation["mem_access_checked_wr:k"].value, 0.0);
        assert_eq!(figure(rd), "10.0");
    }

    #[test]
    fn an_estimate_keeps_its_relative_interval() {
        let mut p = test_phase(&[]);
        p.id = 1;
        p.sampled = Some(crate::model::results::SampledOut {
            units: 40,
            unit_instructions: 1000,
            gap_us: 300,
            seed: 1,
            whole: false,
        });
        let est = EstimateOut {
            value: 10_000.0,
            half_width: Some(500.0),
            level: 0.95,
            units: 40,
            met: 10,
            sampled: 0.01,
            exact: false,
            not_estimable: None,
        };
        p.estimates.insert("mem_access_checked_rd:k".into(), est);
        let pt = point("k", 1, &doc(p, Some(100)), 1).expect("a point");
        let rd = &pt.per_operation["mem_access_checked_rd:k"];
        assert_eq!((rd.value, rd.half_width), (100.0, Some(5.0)));
        assert!(figure(rd).starts_with("100.0 ± 5"), "{}", figure(rd));
        // A counter the window did not estimate is not made up.
        assert!(!pt.per_operation.contains_key("mem_access_checked_wr:k"));
    }

    #[test]
    fn a_window_without_operations_or_not_closed_gives_no_point() {
        let mut p = test_phase(&[("mem_access_checked_rd:k", 1)]);
        p.id = 1;
        assert_eq!(point("k", 1, &doc(p.clone(), None), 1), None);
        assert_eq!(point("k", 1, &doc(p.clone(), Some(5)), 2), None);
        p.end_ts = None;
        assert_eq!(point("k", 1, &doc(p, Some(5)), 1), None);
    }
}
