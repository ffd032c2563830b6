//! Judging a change: each side's samples summarised (mean, standard deviation, Student's t
//! confidence interval), Welch's t-test between them, and the verdict a counter gets. Kept
//! apart from the matching and the rendering so that the statistics can be checked on their
//! own against their textbook values (the tests here, and `tests/output.rs`).

use super::{Stats, Test, Verdict};
use statrs::distribution::{ContinuousCDF, StudentsT};

/// The significance level of the marks.
pub const ALPHA: f64 = 0.05;

/// Mean, standard deviation and confidence interval of `samples`; None for no sample.
pub fn stats(samples: &[u64]) -> Option<Stats> {
    let n = samples.len();
    let first = *samples.first()?;
    let exact = samples.iter().all(|&s| s == first).then_some(first);
    let xs: Vec<f64> = samples.iter().map(|&s| s as f64).collect();
    let mean = xs.iter().sum::<f64>() / n as f64;
    let sd = if n < 2 || exact.is_some() {
        0.0
    } else {
        (xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
    };
    let ci95 = (n >= 2)
        .then(|| {
            let t = StudentsT::new(0.0, 1.0, (n - 1) as f64).ok()?;
            let half = t.inverse_cdf(0.975) * sd / (n as f64).sqrt();
            half.is_finite().then_some((mean - half, mean + half))
        })
        .flatten();
    Some(Stats {
        n,
        mean,
        sd,
        ci95,
        exact,
    })
}

/// Welch's t-test of B against A: t (positive when B's mean is higher), the
/// Welch–Satterthwaite degrees of freedom and the two-sided p-value. None with fewer than two
/// samples on a side, no spread on either, or figures past f64's range.
pub fn welch(a: &Stats, b: &Stats) -> Option<(f64, f64, f64)> {
    if a.n < 2 || b.n < 2 {
        return None;
    }
    let (va, vb) = (a.sd.powi(2) / a.n as f64, b.sd.powi(2) / b.n as f64);
    let se2 = va + vb;
    if se2 <= 0.0 {
        return None;
    }
    let t = (b.mean - a.mean) / se2.sqrt();
    let df = se2.powi(2) / (va.powi(2) / (a.n - 1) as f64 + vb.powi(2) / (b.n - 1) as f64);
    // statrs panics on a NaN argument: only finite figures reach it.
    if !t.is_finite() || !df.is_finite() || df <= 0.0 {
        return None;
    }
    let p = 2.0 * StudentsT::new(0.0, 1.0, df).ok()?.sf(t.abs());
    Some((t, df, p.min(1.0)))
}

/// Judges one counter: how, and what changed.
pub(super) fn judge(a: &Option<Stats>, b: &Option<Stats>) -> (Test, Verdict) {
    let (a, b) = match (a, b) {
        (Some(a), Some(b)) => (a, b),
        (Some(_), None) => return (Test::Untested, Verdict::OnlyA),
        _ => return (Test::Untested, Verdict::OnlyB),
    };
    let exact_both = a.n >= 2 && b.n >= 2 && a.exact.is_some() && b.exact.is_some();
    let test = if exact_both {
        Test::Exact
    } else {
        match welch(a, b) {
            Some((t, df, p)) => Test::Welch { t, df, p },
            None => Test::Untested,
        }
    };
    // Integers when both sides are exact, so that 2^53 + 1 against 2^53 is still a change.
    let order = match (a.exact, b.exact) {
        (Some(x), Some(y)) => y.cmp(&x),
        _ => b
            .mean
            .partial_cmp(&a.mean)
            .unwrap_or(std::cmp::Ordering::Equal),
    };
    // Exact: no noise, any difference is real. Untested: a single run has no spread to judge
    // by, so its difference is said, and never called an improvement or a regression.
    let significant = match test {
        Test::Welch { p, .. } => p < ALPHA,
        Test::Exact | Test::Intervals => true,
        Test::Untested => {
            return (
                test,
                if order == std::cmp::Ordering::Equal {
                    Verdict::Unchanged
                } else {
                    Verdict::Changed
                },
            );
        }
    };
    let verdict = match order {
        std::cmp::Ordering::Less if significant => Verdict::Improvement,
        std::cmp::Ordering::Greater if significant => Verdict::Regression,
        _ => Verdict::Unchanged,
    };
    (test, verdict)
}

/// A sampled phase's estimate as a side's figures: its value, its interval (none when it is
/// not estimable), its units as `n`; exact only when it was traced whole.
pub(super) fn estimate_stats(e: &crate::model::results::EstimateOut) -> Stats {
    let est = e.estimate();
    Stats {
        n: e.units,
        mean: e.value,
        sd: 0.0,
        ci95: est.has_interval().then(|| (est.low(), est.high())),
        exact: e.exact.then_some(e.value.round() as u64),
    }
}

/// A side's interval: an estimate's, an exact count's single point, a repeated count's 95%
/// interval; None when it has none (unbounded).
fn interval(s: &Stats) -> Option<(f64, f64)> {
    match (s.exact, s.ci95) {
        (Some(v), _) => Some((v as f64, v as f64)),
        (None, Some(ci)) => Some(ci),
        (None, None) => None,
    }
}

/// The change from A to B where a side is an estimate: marked only where the intervals are
/// disjoint.
pub(super) fn judge_intervals(a: &Option<Stats>, b: &Option<Stats>) -> (Test, Verdict) {
    let (a, b) = match (a, b) {
        (Some(a), Some(b)) => (a, b),
        (Some(_), None) => return (Test::Intervals, Verdict::OnlyA),
        _ => return (Test::Intervals, Verdict::OnlyB),
    };
    let verdict = match (interval(a), interval(b)) {
        (Some((_, a_high)), Some((b_low, _))) if b_low > a_high => Verdict::Regression,
        (Some((a_low, _)), Some((_, b_high))) if b_high < a_low => Verdict::Improvement,
        _ => Verdict::Unchanged,
    };
    (Test::Intervals, verdict)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn est(value: f64, half: Option<f64>, units: usize) -> Option<Stats> {
        let e =
            crate::model::sample::Estimate::example(value, half.unwrap_or(f64::INFINITY), units);
        Some(estimate_stats(&crate::model::results::EstimateOut::of(&e)))
    }

    #[test]
    fn estimates_differ_only_where_their_intervals_are_disjoint() {
        let a = est(1000.0, Some(10.0), 300);
        // Overlapping by one count: never a change.
        assert_eq!(
            judge_intervals(&a, &est(1019.0, Some(10.0), 300)),
            (Test::Intervals, Verdict::Unchanged)
        );
        assert_eq!(
            judge_intervals(&a, &est(1021.0, Some(10.0), 300)).1,
            Verdict::Regression
        );
        assert_eq!(
            judge_intervals(&a, &est(979.0, Some(10.0), 300)).1,
            Verdict::Improvement
        );
        // An unbounded interval overlaps everything.
        assert_eq!(
            judge_intervals(&a, &est(5000.0, None, 10)).1,
            Verdict::Unchanged
        );
        // An exact count is a point: inside the interval, no change; outside, one.
        assert_eq!(judge_intervals(&a, &stats(&[1005])).1, Verdict::Unchanged);
        assert_eq!(judge_intervals(&a, &stats(&[1011])).1, Verdict::Regression);
        assert_eq!(judge_intervals(&a, &None).1, Verdict::OnlyA);
    }

    fn close(x: f64, y: f64, eps: f64) -> bool {
        (x - y).abs() <= eps
    }

    #[test]
    fn stats_of_one_sample_and_of_identical_samples() {
        let s = stats(&[5]).unwrap();
        assert_eq!(
            (s.n, s.mean, s.sd, s.ci95, s.exact),
            (1, 5.0, 0.0, None, Some(5))
        );
        let s = stats(&[7, 7, 7]).unwrap();
        assert_eq!((s.sd, s.ci95, s.exact), (0.0, Some((7.0, 7.0)), Some(7)));
        assert!(stats(&[]).is_none());
        // Past 2^53 and at u64::MAX: no panic.
        assert!(stats(&[u64::MAX, 0, u64::MAX]).is_some());
    }

    #[test]
    fn identical_repeats_are_exact_and_any_difference_significant() {
        let (a, b) = (stats(&[100, 100]), stats(&[99, 99]));
        assert_eq!(judge(&a, &b), (Test::Exact, Verdict::Improvement));
        assert_eq!(judge(&b, &a), (Test::Exact, Verdict::Regression));
        assert_eq!(judge(&a, &a), (Test::Exact, Verdict::Unchanged));
    }

    #[test]
    fn noise_is_not_a_change() {
        let (a, b) = (stats(&[10, 20, 15]), stats(&[11, 19, 16]));
        let (test, verdict) = judge(&a, &b);
        assert!(matches!(test, Test::Welch { p, .. } if p > 0.5), "{test:?}");
        assert_eq!(verdict, Verdict::Unchanged);
    }

    #[test]
    fn confidence_interval_uses_students_t() {
        // t(0.975, 2) = 4.302653; sd 1, n 3: half-width 4.302653 / sqrt(3) = 2.484138.
        let s = stats(&[10, 12, 11]).unwrap();
        let (lo, hi) = s.ci95.unwrap();
        assert!(
            close(lo, 11.0 - 2.484138, 1e-5) && close(hi, 11.0 + 2.484138, 1e-5),
            "{s:?}"
        );
    }
}
