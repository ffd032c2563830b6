//! A counter's total over a phase, estimated from sampled units, with a confidence interval.
//!
//! In sampled measurement the guest runs at full speed and the PMU gives the exact number of
//! instructions executed at each exception level (EL) over the whole phase. Short units of
//! consecutive instructions are traced exactly. For one EL, unit `i` gives
//!
//! - `x_i`: the instructions executed at that EL in the unit (0 if the unit never ran there),
//! - `y_i`: the counter's count in the unit (e.g. the tag-checked kernel reads),
//!
//! and `N` is the exact number of instructions at that EL over the phase. The counter's total
//! `Y` is estimated by the ratio estimator: the counter's rate per instruction in the units,
//! scaled to all of the EL's instructions. With `n` units:
//!
//! ```text
//! R̂       = Σy / Σx                                  the count per instruction in the units
//! Ŷ       = R̂ · N                                    the estimated total
//! d_i     = y_i − R̂ · x_i                            each unit's residual
//! s_d²    = Σ d_i² / (n − 1)
//! x̄       = Σx / n
//! f       = Σx / N                                   the share of the instructions traced
//! Var(Ŷ)  = N² · (1 − f) · s_d² / (n · x̄²)
//! ± half  = t(n − 1, (1 + level) / 2) · √Var(Ŷ)
//! ```
//!
//! where `t(ν, p)` is the `p` quantile of Student's t distribution with `ν` degrees of freedom
//! (1.96 for many units at 95%). `(1 − f)` is the finite-population correction: the more of the
//! EL's instructions the units traced, the narrower the interval, down to none at all when they
//! traced every one (`Σx == N`), where `Ŷ == Σy` is the exact count.
//!
//! The interval assumes the units were drawn at random, each unit of the phase equally likely,
//! and it is approximate (the ratio estimator is slightly biased in small samples). Units that
//! never ran at the EL still count in `n`: they are part of the sample. With a single unit the
//! spread cannot be estimated and the interval is unbounded (`± ∞`). When every unit has the
//! same rate (`y_i == R̂ · x_i`, e.g. no unit saw the counter at all) the residuals are 0 and so
//! is the interval, though the total need not be exact: a counter rare enough that no unit met
//! it is estimated at `0 ± 0`.

use crate::perf_text::thousands_f64;
use statrs::distribution::{ContinuousCDF, StudentsT};

/// A counter's total estimated from sampled units.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Estimate {
    /// The estimated total (R̂ · N).
    pub value: f64,
    /// Half the width of the confidence interval, in counts (0 when exact).
    pub half_width: f64,
    /// The interval's confidence level, e.g. 0.95.
    pub level: f64,
    /// Units the estimate rests on.
    pub units: usize,
    /// Fraction of the EL's instructions the units traced (Σx / N, at most 1).
    pub sampled: f64,
    /// Every instruction was traced (Σx == N): the value is the exact count.
    pub exact: bool,
}

/// The ratio estimator of a total: `units` are (x_i, y_i), `population` is N.
/// None when there is nothing to rest on: no unit has an instruction at this EL while
/// N > 0 (Σx == 0), or Σx > N (inconsistent input).  N == 0 gives an exact 0.
/// None too when `level` is not strictly between 0 and 1.
pub fn ratio_total(units: &[(u64, u64)], population: u64, level: f64) -> Option<Estimate> {
    // statrs panics on a NaN argument, and a level of 0 or 1 has no quantile.
    if !(level > 0.0 && level < 1.0) {
        return None;
    }
    let n = units.len();
    // u128: a sum of u64 counts cannot overflow it.
    let sum_x: u128 = units.iter().map(|&(x, _)| u128::from(x)).sum();
    let sum_y: u128 = units.iter().map(|&(_, y)| u128::from(y)).sum();
    let big_n = u128::from(population);
    if sum_x > big_n {
        return None;
    }
    if population == 0 {
        // Nothing ran at this EL, so nothing was counted there.
        return Some(Estimate {
            value: 0.0,
            half_width: 0.0,
            level,
            units: n,
            sampled: 1.0,
            exact: true,
        });
    }
    if sum_x == 0 {
        return None;
    }
    let sampled = sum_x as f64 / population as f64;
    if sum_x == big_n {
        return Some(Estimate {
            value: sum_y as f64,
            half_width: 0.0,
            level,
            units: n,
            sampled: 1.0,
            exact: true,
        });
    }
    let r = sum_y as f64 / sum_x as f64;
    let value = r * population as f64;
    let half_width = if n < 2 {
        f64::INFINITY
    } else {
        let nf = n as f64;
        let ss: f64 = units
            .iter()
            .map(|&(x, y)| (y as f64 - r * x as f64).powi(2))
            .sum();
        let s2 = ss / (nf - 1.0);
        let mean_x = sum_x as f64 / nf;
        let var = (population as f64).powi(2) * (1.0 - sampled) * s2 / (nf * mean_x * mean_x);
        t_quantile(n - 1, level)? * var.sqrt()
    };
    Some(Estimate {
        value,
        half_width,
        level,
        units: n,
        sampled,
        exact: false,
    })
}

/// Student's t quantile for a two-sided interval at `level` with `df` degrees of freedom.
fn t_quantile(df: usize, level: f64) -> Option<f64> {
    let t = StudentsT::new(0.0, 1.0, df as f64).ok()?;
    let q = t.inverse_cdf((1.0 + level) / 2.0);
    q.is_finite().then_some(q)
}

impl Estimate {
    /// The interval's lower end: value − half_width, not below 0.
    pub fn low(&self) -> f64 {
        (self.value - self.half_width).max(0.0)
    }

    /// The interval's upper end: value + half_width.
    pub fn high(&self) -> f64 {
        self.value + self.half_width
    }

    /// Half-width relative to the value (0.008 for ±0.8%); infinite when value is 0 and
    /// half_width > 0, 0 when both are 0.
    pub fn relative(&self) -> f64 {
        if self.half_width == 0.0 {
            0.0
        } else if self.value == 0.0 {
            f64::INFINITY
        } else {
            self.half_width / self.value
        }
    }

    /// Whether two estimates' intervals are disjoint: only then do they differ (an overlap is
    /// never called a difference).
    pub fn differs_from(&self, other: &Estimate) -> bool {
        self.high() < other.low() || other.high() < self.low()
    }

    /// Whether `count` lies inside the interval (inclusive), for validation against an exact count.
    pub fn contains(&self, count: u64) -> bool {
        let c = count as f64;
        self.low() <= c && c <= self.high()
    }
}

/// `0.8%`, `0.05%`, `∞`: a relative half-width as a percentage, one decimal (two below 0.1%).
pub fn percent(relative: f64) -> String {
    if !relative.is_finite() {
        return "∞".to_string();
    }
    let p = relative * 100.0;
    thousands_f64(p, if p < 0.1 { 2 } else { 1 })
        .chars()
        .chain(['%'])
        .collect()
}

/// `95`, `99.9`: a confidence level as a percentage, without trailing zeros.
fn level_percent(level: f64) -> String {
    let s = format!("{:.3}", level * 100.0);
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// `62,541 ± 0.8% (95% CI, 312 units)`; an exact one:
/// `62,541 (exact: every instruction traced, 312 units)`.
impl core::fmt::Display for Estimate {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let units = match self.units {
            1 => "1 unit".to_string(),
            n => format!("{} units", crate::perf_text::thousands(n as u64)),
        };
        let value = thousands_f64(self.value, 0);
        if self.exact {
            write!(f, "{value} (exact: every instruction traced, {units})")
        } else {
            write!(
                f,
                "{value} ± {} ({}% CI, {units})",
                percent(self.relative()),
                level_percent(self.level)
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use proptest::test_runner::{RngAlgorithm, TestRng};

    fn est(value: f64, half_width: f64) -> Estimate {
        Estimate {
            value,
            half_width,
            level: 0.95,
            units: 40,
            sampled: 0.01,
            exact: false,
        }
    }

    #[test]
    fn a_small_example_by_hand() {
        // Units (x, y) = (10, 2), (20, 5), (30, 5); N = 600; 95%.
        // Σx = 60, Σy = 12, R̂ = 0.2, Ŷ = 0.2 · 600 = 120.
        // d = 2 − 2 = 0, 5 − 4 = 1, 5 − 6 = −1; Σd² = 2; s_d² = 2 / 2 = 1.
        // x̄ = 20; f = 60 / 600 = 0.1.
        // Var = 600² · 0.9 · 1 / (3 · 20²) = 324,000 / 1,200 = 270.
        // t with 2 degrees of freedom has the closed-form quantile
        // t(2, p) = (2p − 1) / √(2p(1 − p)); at p = 0.975: 0.95 / √0.04875 = 4.30265...
        // half = t · √270.
        let e = ratio_total(&[(10, 2), (20, 5), (30, 5)], 600, 0.95).unwrap();
        let p: f64 = 0.975;
        let t = (2.0 * p - 1.0) / (2.0 * p * (1.0 - p)).sqrt();
        assert!((t - 4.302_652_729_7).abs() < 1e-9, "{t}");
        let half = t * 270f64.sqrt();
        assert!((e.value - 120.0).abs() < 1e-9, "{e:?}");
        assert!(
            (e.half_width - half).abs() < 1e-9,
            "{} vs {half}",
            e.half_width
        );
        assert_eq!(e.units, 3);
        assert!((e.sampled - 0.1).abs() < 1e-12);
        assert!(!e.exact);
        assert!((e.low() - (120.0 - half)).abs() < 1e-9);
        assert!((e.high() - (120.0 + half)).abs() < 1e-9);
    }

    #[test]
    fn the_t_quantile_is_the_textbook_one() {
        // Tables: t(10, 0.975) = 2.228139, t(30, 0.995) = 2.749996.
        assert!((t_quantile(10, 0.95).unwrap() - 2.228_139).abs() < 1e-6);
        assert!((t_quantile(30, 0.99).unwrap() - 2.749_996).abs() < 1e-6);
    }

    #[test]
    fn exact_when_every_instruction_was_traced() {
        let units = [(100, 7), (50, 0), (0, 0), (250, 31)];
        let e = ratio_total(&units, 400, 0.95).unwrap();
        assert_eq!(e.value, 38.0);
        assert_eq!(e.half_width, 0.0);
        assert!(e.exact);
        assert_eq!(e.sampled, 1.0);
        assert_eq!(e.units, 4);
        assert!(e.contains(38));
        assert!(!e.contains(37) && !e.contains(39));
        // A single unit covering everything is exact too.
        let one = ratio_total(&[(400, 38)], 400, 0.95).unwrap();
        assert!(one.exact && one.value == 38.0 && one.half_width == 0.0);
    }

    #[test]
    fn nothing_to_rest_on() {
        // No unit ran at the EL though it ran.
        assert_eq!(ratio_total(&[(0, 0), (0, 0)], 100, 0.95), None);
        assert_eq!(ratio_total(&[], 100, 0.95), None);
        // More traced than ran.
        assert_eq!(ratio_total(&[(60, 1), (60, 1)], 100, 0.95), None);
        // Sums past u64 do not wrap into a plausible figure.
        assert_eq!(ratio_total(&[(u64::MAX, 1), (2, 1)], u64::MAX, 0.95), None);
        // No level.
        for level in [0.0, 1.0, -0.5, 2.0, f64::NAN, f64::INFINITY] {
            assert_eq!(ratio_total(&[(10, 1), (20, 1)], 100, level), None);
        }
        // Nothing ran: an exact 0.
        let zero = ratio_total(&[(0, 0)], 0, 0.95).unwrap();
        assert!(zero.exact && zero.value == 0.0 && zero.half_width == 0.0);
        assert_eq!(ratio_total(&[], 0, 0.95).unwrap().units, 0);
    }

    #[test]
    fn one_unit_gives_an_unbounded_interval() {
        let e = ratio_total(&[(100, 10)], 1000, 0.95).unwrap();
        assert_eq!(e.value, 100.0);
        assert_eq!(e.half_width, f64::INFINITY);
        assert_eq!(e.low(), 0.0);
        assert_eq!(e.high(), f64::INFINITY);
        assert!(e.contains(0) && e.contains(u64::MAX));
        assert_eq!(e.to_string(), "100 ± ∞ (95% CI, 1 unit)");
    }

    #[test]
    fn relative_half_width() {
        assert!((est(1000.0, 8.0).relative() - 0.008).abs() < 1e-15);
        assert_eq!(est(0.0, 5.0).relative(), f64::INFINITY);
        assert_eq!(est(0.0, 0.0).relative(), 0.0);
        assert_eq!(est(10.0, 0.0).relative(), 0.0);
    }

    #[test]
    fn only_disjoint_intervals_differ() {
        let a = est(100.0, 10.0); // [90, 110]
        // Overlapping, one inside the other, touching, the same: no difference.
        for b in [
            est(115.0, 10.0),
            est(100.0, 1.0),
            est(120.0, 10.0),
            est(80.0, 10.0),
            a,
        ] {
            assert!(!a.differs_from(&b), "{b:?}");
            assert!(!b.differs_from(&a), "{b:?}");
        }
        // Apart on either side.
        for b in [est(121.0, 10.0), est(79.0, 10.0), est(200.0, 0.0)] {
            assert!(a.differs_from(&b), "{b:?}");
            assert!(b.differs_from(&a), "{b:?}");
        }
        // An unbounded interval overlaps everything.
        let wide = est(5.0, f64::INFINITY);
        assert!(!wide.differs_from(&est(1e12, 1.0)));
        // The low end is clipped at 0, which is still inside [0, 3].
        assert!(!est(2.0, 5.0).differs_from(&est(0.0, 0.0)));
    }

    #[test]
    fn contains_is_inclusive() {
        let e = est(100.0, 10.0);
        assert!(e.contains(90) && e.contains(100) && e.contains(110));
        assert!(!e.contains(89) && !e.contains(111));
    }

    #[test]
    fn display() {
        let e = Estimate {
            value: 62_541.0,
            half_width: 62_541.0 * 0.008,
            level: 0.95,
            units: 312,
            sampled: 0.02,
            exact: false,
        };
        assert_eq!(e.to_string(), "62,541 ± 0.8% (95% CI, 312 units)");
        let exact = Estimate {
            half_width: 0.0,
            sampled: 1.0,
            exact: true,
            ..e
        };
        assert_eq!(
            exact.to_string(),
            "62,541 (exact: every instruction traced, 312 units)"
        );
        let fine = Estimate {
            value: 1_234_567.4,
            half_width: 617.0,
            level: 0.99,
            units: 1500,
            ..e
        };
        assert_eq!(fine.to_string(), "1,234,567 ± 0.05% (99% CI, 1,500 units)");
        let odd_level = Estimate { level: 0.999, ..e };
        assert_eq!(odd_level.to_string(), "62,541 ± 0.8% (99.9% CI, 312 units)");
        assert_eq!(
            est(0.0, 3.0).to_string(),
            "0 ± ∞ (95% CI, 40 units)",
            "an interval around 0 is not a precise figure"
        );
    }

    /// A synthetic phase: instructions at EL0 or EL1 in segments, each segment with its own
    /// density of counted instructions. Returns (el, counted) per instruction.
    fn population(rng: &mut TestRng) -> Vec<(u8, bool)> {
        let segments = rng.random_range(20..200);
        let mut out = Vec::new();
        for _ in 0..segments {
            let el = rng.random_range(0..2u8);
            let density: f64 = rng.random_range(0.0..1.0);
            let len = rng.random_range(50..2000);
            out.extend((0..len).map(|_| (el, rng.random_bool(density))));
        }
        out
    }

    /// Per unit of `len` consecutive instructions, (x, y) at `el`.
    fn units_of(pop: &[(u8, bool)], len: usize, el: u8) -> Vec<(u64, u64)> {
        pop.chunks(len)
            .map(|c| {
                let at: Vec<_> = c.iter().filter(|i| i.0 == el).collect();
                (at.len() as u64, at.iter().filter(|i| i.1).count() as u64)
            })
            .collect()
    }

    /// `k` distinct indices of `0..m`, at random (a partial Fisher–Yates shuffle).
    fn draw(rng: &mut TestRng, m: usize, k: usize) -> Vec<usize> {
        let mut idx: Vec<usize> = (0..m).collect();
        for i in 0..k {
            let j = rng.random_range(i..m);
            idx.swap(i, j);
        }
        idx.truncate(k);
        idx
    }

    #[test]
    fn the_95_percent_interval_covers_the_exact_total() {
        const UNIT: usize = 100;
        const POPULATIONS: usize = 400;
        let mut rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
        let (mut trials, mut covered) = ([0usize; 2], [0usize; 2]);
        let mut done = 0;
        while done < POPULATIONS {
            let pop = population(&mut rng);
            let m = pop.len().div_ceil(UNIT);
            if m <= 31 {
                continue;
            }
            done += 1;
            let n = rng.random_range(30..=200.min(m - 1));
            let picked = draw(&mut rng, m, n);
            for el in 0..2u8 {
                let all = units_of(&pop, UNIT, el);
                let big_n: u64 = all.iter().map(|u| u.0).sum();
                if big_n == 0 {
                    continue;
                }
                let exact: u64 = all.iter().map(|u| u.1).sum();
                let sample: Vec<_> = picked.iter().map(|&i| all[i]).collect();
                trials[el as usize] += 1;
                // No estimate (no sampled unit ran at the EL) counts as a miss.
                if let Some(e) = ratio_total(&sample, big_n, 0.95) {
                    assert!(!e.exact || sample.iter().map(|u| u.0).sum::<u64>() == big_n);
                    if e.contains(exact) {
                        covered[el as usize] += 1;
                    }
                }
            }
        }
        let total = covered[0] + covered[1];
        let coverage = total as f64 / (trials[0] + trials[1]) as f64;
        println!(
            "95% interval coverage: {coverage:.4} ({total} of {} intervals; EL0 {}/{}, EL1 {}/{})",
            trials[0] + trials[1],
            covered[0],
            trials[0],
            covered[1],
            trials[1]
        );
        assert!(coverage >= 0.90, "coverage {coverage}");
        for el in 0..2 {
            assert!(covered[el] as f64 / trials[el] as f64 >= 0.90, "EL{el}");
        }
    }

    proptest! {
        #[test]
        fn the_interval_holds_the_value_and_only_a_full_sample_is_exact(
            units in prop::collection::vec((0u64..500, 0u64..=100), 1..60)
                .prop_map(|v| v.into_iter().map(|(x, p)| (x, x * p / 100)).collect::<Vec<_>>()),
            order in any::<u64>(),
            level in 0.5f64..0.999,
        ) {
            let big_n: u64 = units.iter().map(|u| u.0).sum();
            let mut rng = TestRng::from_seed(RngAlgorithm::ChaCha, &{
                let mut s = [0u8; 32];
                s[..8].copy_from_slice(&order.to_le_bytes());
                s
            });
            let idx = draw(&mut rng, units.len(), units.len());
            let mut last_sampled = 0.0;
            for k in 0..=units.len() {
                let sample: Vec<_> = idx[..k].iter().map(|&i| units[i]).collect();
                let sx: u64 = sample.iter().map(|u| u.0).sum();
                let sy: u64 = sample.iter().map(|u| u.1).sum();
                let Some(e) = ratio_total(&sample, big_n, level) else {
                    prop_assert!(sx == 0 && big_n > 0, "k {}", k);
                    continue;
                };
                prop_assert!(e.value.is_finite() && e.value >= 0.0);
                prop_assert!(e.half_width >= 0.0 && !e.half_width.is_nan());
                prop_assert!(e.low() <= e.value && e.value <= e.high(), "{:?}", e);
                prop_assert_eq!(e.units, k);
                prop_assert_eq!(e.exact, sx == big_n, "k {} of {}", k, units.len());
                prop_assert!(e.sampled <= 1.0 && e.sampled >= last_sampled);
                last_sampled = e.sampled;
                if e.exact {
                    prop_assert_eq!(e.value, sy as f64);
                    prop_assert_eq!(e.half_width, 0.0);
                    prop_assert!(e.contains(sy));
                }
            }
            // Every unit drawn: exact, and the count is the population's.
            let full: Vec<_> = idx.iter().map(|&i| units[i]).collect();
            let e = ratio_total(&full, big_n, level).unwrap();
            prop_assert!(e.exact);
            prop_assert_eq!(e.value, units.iter().map(|u| u.1).sum::<u64>() as f64);
        }
    }
}
