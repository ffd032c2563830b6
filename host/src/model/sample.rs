//! A counter's total over a phase, estimated from sampled units, with a confidence interval.
//!
//! In sampled measurement the guest runs at full speed and the PMU gives the exact number of
//! instructions executed at each exception level (EL) over the whole phase. Short units of
//! consecutive instructions are traced exactly. For one EL, unit `i` (in the order the
//! schedule traced them) gives
//!
//! - `x_i`: the instructions executed at that EL in the unit (0 if the unit never ran there),
//! - `y_i`: the counter's count in the unit (e.g. the tag-checked kernel reads),
//!
//! and `N` is the exact number of instructions at that EL over the phase. The counter's total
//! `Y` is estimated by the ratio estimator: the counter's rate per instruction in the units,
//! scaled to all of the EL's instructions (one estimator per EL: post-stratified by EL).
//! With `n` units:
//!
//! ```text
//! R̂       = Σy / Σx                                  the count per instruction in the units
//! Ŷ       = R̂ · N                                    the estimated total
//! d_i     = y_i − R̂ · x_i                            each unit's residual (Σd = 0)
//! x̄       = Σx / n
//! f       = Σx / N                                   the share of the instructions traced
//! s²      = Σ d_i² / (n − 1)                         the units' spread, as if independent
//! s²_B    = Σ_b (D_b² / m_b) / (B − 1)               the same from B = 10 batches of
//!                                                    consecutive units (m_b units, residuals
//!                                                    summing to D_b)
//! Var(Ŷ)  = N² · (1 − f) · max(s², s²_B) / (n · x̄²)
//! ν       = n_x − 1 when s² is the larger (n_x: the units that ran at the EL),
//!           B − 1 otherwise
//! ± half  = t(ν, (1 + level) / 2) · √Var(Ŷ)
//! ```
//!
//! where `t(ν, p)` is the `p` quantile of Student's t distribution with `ν` degrees of freedom
//! (1.97 for 150 units at 95%, 2.26 for 9). `(1 − f)` is the finite-population correction: the
//! more of the EL's instructions the units traced, the narrower the interval, down to none at
//! all when they traced every one (`Σx == N`), where `Ŷ == Σy` is the exact count.
//!
//! The units are not independent draws: they follow one another in one run of the guest, and
//! where the timer lets a unit begin depends on the code (a loop's few places, a phase's
//! stages). Units next to each other in the schedule that are alike make the batches' sums
//! spread more than the units' do, and `s²_B` then carries the interval, with the few degrees
//! of freedom its 10 batches give. Taking the larger of the two never claims more than either.
//!
//! A window sampled on several CPUs, each CPU with its own schedule, gives one such estimate
//! per CPU × EL: independent strata. Their total ([`stratified`]) is the sum of their
//! estimates, with the sum of their variances, on the degrees of freedom of the
//! Welch–Satterthwaite approximation, `ν = (Σ_h Var_h)² / Σ_h (Var_h² / ν_h)`.
//!
//! An interval is a claim, and some estimates cannot back one ([`NotEstimable`]); they keep
//! their value, shown as not estimable and never as `± x%`:
//!
//! - fewer than [`MIN_UNITS`] units: the spread of a handful of units says little;
//! - fewer than [`MIN_MET`] units met the counter (counted it at least once): the estimate is
//!   then a sum of a few rare counts, far from the normal distribution the interval rests on
//!   (a counter no unit met is estimated at 0: "none seen", not "exactly none");
//! - every unit has the same rate (no residual) though the units did not trace everything:
//!   there is no spread to judge by, and an interval of 0 would claim the exact count. (A
//!   counter that is the EL's instructions themselves, `y_i == x_i`, is the exact `N`.)
//!
//! The interval still assumes that every instruction of the phase was as likely as any other
//! to be traced. What the units never met cannot show in their spread: a stretch of the phase
//! much shorter than the mean distance between units, with a rate of its own, is missed by
//! most schedules and then by the estimate (docs/sampling.md says how far that goes).

use crate::output::text::thousands_f64;
use statrs::distribution::{ContinuousCDF, Normal, StudentsT};

/// Units below which no interval is given: the interval rests on the units' spread being
/// near normal, which a handful of units cannot show — two units of a loop in its steady
/// state agree to the count and would claim a precision they do not have.
pub const MIN_UNITS: usize = 30;

/// Units that must have met a counter (counted it at least once) for it to have an interval:
/// with fewer, its estimate is a sum of a few rare counts, whose spread the normal
/// approximation does not give (measured: counters met by 1 to 4 units held their interval in
/// about 88% of synthetic trials at 95%, and counts of a few hundred or fewer in a Linux
/// window in 0 to 52% of runs).
pub const MIN_MET: usize = 10;

/// Batches of consecutive units for the batch estimate of the spread.
pub const BATCHES: usize = 10;

/// Why an estimate has no interval.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NotEstimable {
    /// Fewer units than an interval needs.
    TooFewUnits { units: usize, need: usize },
    /// Fewer units met the counter than an interval needs.
    TooFewMet { met: usize, need: usize },
    /// Every unit had the same rate: no spread to judge by.
    NoSpread,
}

impl core::fmt::Display for NotEstimable {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            NotEstimable::TooFewUnits { units, need } => {
                write!(f, "{units} unit{}, an interval needs {need}", plural(units))
            }
            NotEstimable::TooFewMet { met: 0, .. } => write!(f, "no unit met it"),
            NotEstimable::TooFewMet { met, need } => {
                write!(
                    f,
                    "{met} unit{} met it, an interval needs {need}",
                    plural(met)
                )
            }
            NotEstimable::NoSpread => write!(f, "every unit had the same rate, no spread"),
        }
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// A counter's total estimated from sampled units.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Estimate {
    /// The estimated total (R̂ · N).
    pub value: f64,
    /// Half the width of the confidence interval, in counts (0 when exact, infinite when not
    /// estimable).
    pub half_width: f64,
    /// The interval's confidence level, e.g. 0.95.
    pub level: f64,
    /// Units the estimate rests on.
    pub units: usize,
    /// Of those, the units that counted it at least once.
    pub met: usize,
    /// Fraction of the EL's instructions the units traced (Σx / N, at most 1).
    pub sampled: f64,
    /// Every instruction was traced (Σx == N): the value is the exact count.
    pub exact: bool,
    /// Why it has no interval, when it has none.
    pub not_estimable: Option<NotEstimable>,
}

/// One stratum's estimate with what it rests on, so that independent strata can be added
/// up ([`stratified`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Part {
    /// The estimate, as [`ratio_total`] gives it.
    pub estimate: Estimate,
    /// Var(Ŷ) of the module's formula: 0 when exact (or when every residual is 0),
    /// `f64::INFINITY` when the estimate has no interval (`not_estimable` is set).
    pub var: f64,
    /// ν, the degrees of freedom of `var`: `f64::INFINITY` when exact (a variance of 0 known
    /// without error), 0 when the estimate has no interval.
    pub df: f64,
    /// N, the stratum's instructions.
    pub population: u64,
    /// Σx, the stratum's instructions the units traced (at most N).
    pub traced: u64,
}

/// The ratio estimator of a total: `units` are (x_i, y_i) in the order the schedule traced
/// them, `population` is N.
/// None when there is nothing to rest on: no unit has an instruction at this EL while
/// N > 0 (Σx == 0), or Σx > N (inconsistent input).  N == 0 gives an exact 0.
/// None too when `level` is not strictly between 0 and 1.
/// The interval is the one of the module's formula; only the judgements the sample itself
/// makes are applied (fewer than 2 units, no spread): [`Estimate::judged`] applies the
/// minimum units and the minimum units met.
pub fn ratio_total(units: &[(u64, u64)], population: u64, level: f64) -> Option<Estimate> {
    ratio_part(units, population, level).map(|p| p.estimate)
}

/// [`ratio_total`] with the variance and degrees of freedom its interval rests on (the
/// module's `Var(Ŷ)` and `ν`: `half_width = t(ν, (1 + level) / 2) · √var`), N and Σx, for
/// [`stratified`]. None exactly when [`ratio_total`] is None.
pub fn ratio_part(units: &[(u64, u64)], population: u64, level: f64) -> Option<Part> {
    // statrs panics on a NaN argument, and a level of 0 or 1 has no quantile.
    if !(level > 0.0 && level < 1.0) {
        return None;
    }
    let n = units.len();
    let met = units.iter().filter(|u| u.1 > 0).count();
    // u128: a sum of u64 counts cannot overflow it.
    let sum_x: u128 = units.iter().map(|&(x, _)| u128::from(x)).sum();
    let sum_y: u128 = units.iter().map(|&(_, y)| u128::from(y)).sum();
    let big_n = u128::from(population);
    if sum_x > big_n {
        return None;
    }
    // Σx ≤ N, which is a u64.
    let traced = u64::try_from(sum_x).ok()?;
    let exact = |value: f64| Part {
        estimate: Estimate {
            value,
            half_width: 0.0,
            level,
            units: n,
            met,
            sampled: 1.0,
            exact: true,
            not_estimable: None,
        },
        var: 0.0,
        df: f64::INFINITY,
        population,
        traced,
    };
    if population == 0 {
        // Nothing ran at this EL, so nothing was counted there.
        return Some(exact(0.0));
    }
    if sum_x == 0 {
        return None;
    }
    if sum_x == big_n {
        return Some(exact(sum_y as f64));
    }
    let sampled = sum_x as f64 / population as f64;
    let r = sum_y as f64 / sum_x as f64;
    let value = r * population as f64;
    let mut p = Part {
        estimate: Estimate {
            value,
            half_width: f64::INFINITY,
            level,
            units: n,
            met,
            sampled,
            exact: false,
            not_estimable: None,
        },
        var: f64::INFINITY,
        df: 0.0,
        population,
        traced,
    };
    if n < 2 {
        p.estimate.not_estimable = Some(NotEstimable::TooFewUnits { units: n, need: 2 });
        return Some(p);
    }
    let residuals: Vec<f64> = units
        .iter()
        .map(|&(x, y)| y as f64 - r * x as f64)
        .collect();
    let srs = spread(&residuals);
    let batched = batch_spread(&residuals);
    let ran = units.iter().filter(|u| u.0 > 0).count();
    let (s2, df) = match batched {
        Some(b) if b > srs => (b, BATCHES - 1),
        _ => (srs, ran.max(2) - 1),
    };
    // Every unit at the same rate (y_i / x_i == Σy / Σx, in integers: no rounding).
    let one_rate = units.iter().all(|&(x, y)| {
        match (
            u128::from(y).checked_mul(sum_x),
            u128::from(x).checked_mul(sum_y),
        ) {
            (Some(a), Some(b)) => a == b,
            _ => false,
        }
    });
    if one_rate && units.iter().any(|&(x, y)| x != y) {
        p.estimate.not_estimable = Some(if met == 0 {
            NotEstimable::TooFewMet { met, need: 1 }
        } else {
            NotEstimable::NoSpread
        });
        return Some(p);
    }
    let nf = n as f64;
    let mean_x = sum_x as f64 / nf;
    let var = (population as f64).powi(2) * (1.0 - sampled) * s2 / (nf * mean_x * mean_x);
    p.estimate.half_width = t_quantile(df, level)? * var.sqrt();
    p.var = var;
    p.df = df as f64;
    Some(p)
}

/// The total over independent strata (e.g. each CPU × EL of a window sampled on several
/// CPUs, each CPU with its own schedule), each estimated on its own ([`ratio_part`]):
///
/// ```text
/// Ŷ       = Σ_h Ŷ_h
/// Var(Ŷ)  = Σ_h Var_h
/// ν       = (Σ_h Var_h)² / Σ_h (Var_h² / ν_h)       over the strata with Var_h > 0
///                                                   (Welch–Satterthwaite)
/// ± half  = t(ν, (1 + level) / 2) · √Var(Ŷ)
/// ```
///
/// ν is not rounded: the t quantile takes a fractional ν. It lies between the fewest
/// degrees of freedom of a stratum and their sum, nearer the fewest when one stratum's
/// variance dominates. A single stratum with a variance gives its own ν.
///
/// `units`, `met` are the strata's sums, `sampled` is Σ traced / Σ N (1 when Σ N == 0), and
/// the total is exact when every stratum is (then ± 0). When a stratum that ran (N > 0) is
/// not estimable, the total keeps its value but not its interval: it takes the first such
/// stratum's reason and an infinite half-width. The strata's estimates are taken as they
/// are: judge them ([`Estimate::judged`]) before, for the minimum units and units met to
/// apply per stratum.
///
/// None when `parts` is empty or `level` is not strictly between 0 and 1.
pub fn stratified(parts: &[Part], level: f64) -> Option<Estimate> {
    if parts.is_empty() || !(level > 0.0 && level < 1.0) {
        return None;
    }
    let value: f64 = parts.iter().map(|p| p.estimate.value).sum();
    let traced: u128 = parts.iter().map(|p| u128::from(p.traced)).sum();
    let population: u128 = parts.iter().map(|p| u128::from(p.population)).sum();
    let exact = parts.iter().all(|p| p.estimate.exact);
    let mut e = Estimate {
        value,
        half_width: 0.0,
        level,
        units: parts.iter().map(|p| p.estimate.units).sum(),
        met: parts.iter().map(|p| p.estimate.met).sum(),
        sampled: if population == 0 {
            1.0
        } else {
            traced as f64 / population as f64
        },
        exact,
        not_estimable: None,
    };
    if exact {
        return Some(e);
    }
    if let Some(why) = parts
        .iter()
        .filter(|p| p.population > 0)
        .find_map(|p| p.estimate.not_estimable)
    {
        e.not_estimable = Some(why);
        e.half_width = f64::INFINITY;
        return Some(e);
    }
    let var: f64 = parts.iter().map(|p| p.var).sum();
    if !var.is_finite() {
        // A variance given as infinite or NaN without a reason: no interval.
        e.half_width = f64::INFINITY;
        return Some(e);
    }
    if var == 0.0 {
        // Every residual 0 (the EL's instructions themselves): nothing to spread.
        return Some(e);
    }
    let varied: Vec<&Part> = parts.iter().filter(|p| p.var > 0.0).collect();
    let df = match varied[..] {
        // Its own, not v² / (v² / ν), which may round away from ν.
        [one] => one.df,
        _ => var * var / varied.iter().map(|p| p.var * p.var / p.df).sum::<f64>(),
    };
    e.half_width = match t_quantile_f64(df, level) {
        Some(t) => t * var.sqrt(),
        // No quantile (ν ≤ 0 or NaN from a part given so): no interval.
        None => f64::INFINITY,
    };
    Some(e)
}

/// The residuals' spread as if the units were independent: Σd² / (n − 1).
fn spread(d: &[f64]) -> f64 {
    d.iter().map(|d| d * d).sum::<f64>() / (d.len() - 1) as f64
}

/// The spread per unit from [`BATCHES`] batches of consecutive units (sizes differing by at
/// most one): Σ_b (D_b² / m_b) / (B − 1); None with fewer than two units a batch.
fn batch_spread(d: &[f64]) -> Option<f64> {
    let n = d.len();
    if n < 2 * BATCHES {
        return None;
    }
    let mut sum = 0.0;
    let mut at = 0;
    for b in 0..BATCHES {
        let m = n / BATCHES + usize::from(b < n % BATCHES);
        let total: f64 = d[at..at + m].iter().sum();
        sum += total * total / m as f64;
        at += m;
    }
    Some(sum / (BATCHES - 1) as f64)
}

/// Student's t quantile for a two-sided interval at `level` with `df` degrees of freedom.
fn t_quantile(df: usize, level: f64) -> Option<f64> {
    t_quantile_f64(df as f64, level)
}

/// [`t_quantile`] for any real `df` > 0, fractional ones included (Welch–Satterthwaite's),
/// and the normal quantile for an infinite `df`. None for `df` ≤ 0 or NaN.
fn t_quantile_f64(df: f64, level: f64) -> Option<f64> {
    let q = if df == f64::INFINITY {
        Normal::new(0.0, 1.0).ok()?.inverse_cdf((1.0 + level) / 2.0)
    } else {
        StudentsT::new(0.0, 1.0, df)
            .ok()?
            .inverse_cdf((1.0 + level) / 2.0)
    };
    q.is_finite().then_some(q)
}

impl Estimate {
    /// An estimate with an interval, from `units` units that all met it, for tests.
    #[cfg(test)]
    pub fn example(value: f64, half_width: f64, units: usize) -> Self {
        Estimate {
            value,
            half_width,
            level: 0.95,
            units,
            met: units,
            sampled: 0.01,
            exact: false,
            not_estimable: None,
        }
    }

    /// The estimate with the judgements of [`MIN_UNITS`] and [`MIN_MET`] (at most those given)
    /// applied: fewer units, or fewer units met, and it is not estimable. An exact one stays
    /// exact; a counter that is the EL's instructions themselves needs no unit to meet it.
    pub fn judged(mut self, min_units: usize, min_met: usize) -> Self {
        if let Some(NotEstimable::TooFewMet { met, need }) = self.not_estimable {
            self.not_estimable = Some(NotEstimable::TooFewMet {
                met,
                need: need.max(min_met),
            });
        }
        if self.exact || self.not_estimable.is_some() {
            return self;
        }
        let why = if self.units < min_units {
            Some(NotEstimable::TooFewUnits {
                units: self.units,
                need: min_units,
            })
        } else if self.met < min_met && self.half_width > 0.0 {
            Some(NotEstimable::TooFewMet {
                met: self.met,
                need: min_met,
            })
        } else {
            None
        };
        if let Some(why) = why {
            self.not_estimable = Some(why);
            self.half_width = f64::INFINITY;
        }
        self
    }

    /// Whether it has an interval: exact, or a finite interval judged sound.
    pub fn has_interval(&self) -> bool {
        self.exact || (self.not_estimable.is_none() && self.half_width.is_finite())
    }

    /// No unit met the counter: estimated at 0, which is "none seen", not "exactly none".
    pub fn none_seen(&self) -> bool {
        !self.exact && self.met == 0 && self.value == 0.0
    }

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
    /// never called a difference, and one without an interval overlaps everything).
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
/// `62,541 (exact: every instruction traced, 312 units)`; one without an interval:
/// `~62,541 (not estimable: 4 units met it, an interval needs 10)`.
impl core::fmt::Display for Estimate {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let units = match self.units {
            1 => "1 unit".to_string(),
            n => format!("{} units", crate::output::text::thousands(n as u64)),
        };
        let value = thousands_f64(self.value, 0);
        if self.exact {
            write!(f, "{value} (exact: every instruction traced, {units})")
        } else if let Some(why) = self.not_estimable {
            write!(f, "~{value} (not estimable: {why})")
        } else if !self.half_width.is_finite() {
            write!(f, "~{value} (not estimable: unbounded, {units})")
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
        Estimate::example(value, half_width, 40)
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
    fn one_unit_is_not_estimable() {
        let e = ratio_total(&[(100, 10)], 1000, 0.95).unwrap();
        assert_eq!(e.value, 100.0);
        assert_eq!(e.half_width, f64::INFINITY);
        assert_eq!(
            e.not_estimable,
            Some(NotEstimable::TooFewUnits { units: 1, need: 2 })
        );
        assert!(!e.has_interval());
        assert_eq!(e.low(), 0.0);
        assert_eq!(e.high(), f64::INFINITY);
        assert!(e.contains(0) && e.contains(u64::MAX));
        assert_eq!(
            e.to_string(),
            "~100 (not estimable: 1 unit, an interval needs 2)"
        );
    }

    /// `n` units of 100 instructions in schedule order, the first half counting `a` each and
    /// the second half `b`.
    fn two_stages(n: usize, a: u64, b: u64) -> Vec<(u64, u64)> {
        (0..n)
            .map(|i| (100, if i < n / 2 { a } else { b }))
            .collect()
    }

    #[test]
    fn units_alike_in_schedule_order_widen_the_interval_by_batches() {
        // 40 units: 20 counting 3, then 20 counting 5; N = 100,000, Σx = 4,000, f = 0.04.
        // R̂ = 160 / 4,000 = 0.04, Ŷ = 4,000; each residual is ∓1 (3 − 4, 5 − 4).
        // As if independent: s² = 40 / 39.
        // 10 batches of 4: five of residuals −1 (D = −4), five of +1 (D = +4):
        // s²_B = 10 · 16 / 4 / 9 = 40 / 9, the larger: ν = 9.
        // Var = 100,000² · 0.96 · (40 / 9) / (40 · 100²) = 1,066,666.67.
        let units = two_stages(40, 3, 5);
        let e = ratio_total(&units, 100_000, 0.95).unwrap();
        assert_eq!(e.value, 4000.0);
        let var: f64 = 1e10 * 0.96 * (40.0 / 9.0) / (40.0 * 1e4);
        let half = t_quantile(9, 0.95).unwrap() * var.sqrt();
        assert!(
            (e.half_width - half).abs() < 1e-6,
            "{} vs {half}",
            e.half_width
        );
        // The same units in an order that mixes the stages: every batch sums to 0, and the
        // units' own spread carries the interval, on 39 degrees of freedom.
        let mixed: Vec<_> = (0..40)
            .map(|i| (100, if i % 2 == 0 { 3 } else { 5 }))
            .collect();
        let m = ratio_total(&mixed, 100_000, 0.95).unwrap();
        assert_eq!(m.value, 4000.0);
        let var: f64 = 1e10 * 0.96 * (40.0 / 39.0) / (40.0 * 1e4);
        let half = t_quantile(39, 0.95).unwrap() * var.sqrt();
        assert!(
            (m.half_width - half).abs() < 1e-6,
            "{} vs {half}",
            m.half_width
        );
        assert!(e.half_width > 2.0 * m.half_width);
    }

    #[test]
    fn a_counter_few_units_met_is_not_estimable() {
        // 100 units, 9 of which met the counter once.
        let units: Vec<_> = (0..100)
            .map(|i| (1000, u64::from(i % 11 == 0 && i < 99)))
            .collect();
        let e = ratio_total(&units, 1_000_000, 0.95).unwrap();
        assert_eq!(e.met, 9);
        assert!(e.half_width.is_finite(), "the formula gives one");
        let j = e.judged(MIN_UNITS, MIN_MET);
        assert_eq!(
            j.not_estimable,
            Some(NotEstimable::TooFewMet { met: 9, need: 10 })
        );
        assert_eq!(j.value, e.value, "the value is kept");
        assert!(!j.has_interval());
        assert_eq!(
            j.to_string(),
            "~90 (not estimable: 9 units met it, an interval needs 10)"
        );
        // A tenth, and it has its interval.
        let mut ten = units.clone();
        ten[1].1 = 1;
        let t = ratio_total(&ten, 1_000_000, 0.95)
            .unwrap()
            .judged(MIN_UNITS, MIN_MET);
        assert!(t.has_interval() && t.met == 10, "{t:?}");
        assert!(t.to_string().contains(" ± "), "{t}");
    }

    #[test]
    fn too_few_units_none_met_or_no_spread_is_not_estimable() {
        let units = two_stages(29, 3, 5);
        let e = ratio_total(&units, 100_000, 0.95)
            .unwrap()
            .judged(MIN_UNITS, MIN_MET);
        assert_eq!(
            e.not_estimable,
            Some(NotEstimable::TooFewUnits {
                units: 29,
                need: 30
            })
        );
        // No unit met it: 0, none seen.
        let none = ratio_total(&two_stages(40, 0, 0), 100_000, 0.95)
            .unwrap()
            .judged(MIN_UNITS, MIN_MET);
        assert!(none.none_seen() && !none.has_interval(), "{none:?}");
        assert_eq!(none.to_string(), "~0 (not estimable: no unit met it)");
        // Every unit at the same rate, though most of the phase was not traced.
        let same = ratio_total(&two_stages(40, 4, 4), 100_000, 0.95)
            .unwrap()
            .judged(MIN_UNITS, MIN_MET);
        assert_eq!(same.not_estimable, Some(NotEstimable::NoSpread));
        assert_eq!(same.value, 4000.0);
        assert!(!same.has_interval());
        // The EL's instructions themselves: the exact N, whatever the units.
        let n = ratio_total(&[(100, 100), (0, 0), (250, 250)], 7000, 0.95)
            .unwrap()
            .judged(MIN_UNITS, MIN_MET);
        assert_eq!(
            n.not_estimable,
            Some(NotEstimable::TooFewUnits { units: 3, need: 30 })
        );
        let many: Vec<_> = (0..40).map(|i| (i * 10, i * 10)).collect();
        let n = ratio_total(&many, 100_000, 0.95)
            .unwrap()
            .judged(MIN_UNITS, MIN_MET);
        assert_eq!((n.value, n.half_width), (100_000.0, 0.0));
        assert!(n.has_interval());
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
            met: 300,
            sampled: 0.02,
            exact: false,
            not_estimable: None,
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
        assert_eq!(
            est(12.0, f64::INFINITY).to_string(),
            "~12 (not estimable: unbounded, 40 units)"
        );
        let few = Estimate {
            not_estimable: Some(NotEstimable::TooFewMet { met: 1, need: 10 }),
            half_width: f64::INFINITY,
            ..e
        };
        assert_eq!(
            few.to_string(),
            "~62,541 (not estimable: 1 unit met it, an interval needs 10)"
        );
    }

    /// A synthetic phase: instructions at EL0 or EL1 in segments, each segment with its own
    /// density of counted instructions. Returns (el, counted) per instruction.
    fn population(rng: &mut TestRng) -> Vec<(u8, bool)> {
        let segments = rng.random_range(40..200);
        // Each instruction's draw from a xorshift generator seeded by `rng`: as random for
        // this, and fast enough unoptimized for hundreds of thousands of instructions.
        let mut state: u64 = rng.random::<u64>() | 1;
        let mut out = Vec::new();
        for _ in 0..segments {
            let el = rng.random_range(0..2u8);
            let density: f64 = rng.random_range(0.0..1.0);
            let below = (density * (1u64 << 53) as f64) as u64;
            let len = rng.random_range(50..2000);
            out.extend((0..len).map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (el, state >> 11 < below)
            }));
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

    /// Over 400 synthetic phases, the share of the judged 95% intervals that hold the true
    /// total, per EL, and the share of estimates judged not estimable. `pick` chooses the
    /// units (in schedule order) among the phase's `m`.
    fn coverage(pick: impl Fn(&mut TestRng, usize) -> Vec<usize>) -> ([f64; 2], f64) {
        const UNIT: usize = 100;
        const POPULATIONS: usize = 400;
        let mut rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
        let (mut trials, mut covered, mut not_estimable) = ([0usize; 2], [0usize; 2], 0);
        let mut done = 0;
        while done < POPULATIONS {
            let pop = population(&mut rng);
            let m = pop.len().div_ceil(UNIT);
            if m <= 250 {
                continue;
            }
            done += 1;
            let picked = pick(&mut rng, m);
            for el in 0..2u8 {
                let all = units_of(&pop, UNIT, el);
                let big_n: u64 = all.iter().map(|u| u.0).sum();
                if big_n == 0 {
                    continue;
                }
                let exact: u64 = all.iter().map(|u| u.1).sum();
                let sample: Vec<_> = picked.iter().map(|&i| all[i]).collect();
                // No estimate (no sampled unit ran at the EL) is not estimable either.
                let Some(e) = ratio_total(&sample, big_n, 0.95) else {
                    not_estimable += 1;
                    continue;
                };
                let e = e.judged(MIN_UNITS, MIN_MET);
                assert!(!e.exact || sample.iter().map(|u| u.0).sum::<u64>() == big_n);
                if !e.has_interval() {
                    not_estimable += 1;
                    continue;
                }
                trials[el as usize] += 1;
                covered[el as usize] += e.contains(exact) as usize;
            }
        }
        let share = |el: usize| covered[el] as f64 / trials[el] as f64;
        let all = trials[0] + trials[1] + not_estimable;
        ([share(0), share(1)], not_estimable as f64 / all as f64)
    }

    #[test]
    fn the_95_percent_interval_covers_the_exact_total() {
        // Units drawn at random, each of the phase's as likely.
        let (by_el, not_estimable) = coverage(|rng, m| {
            let n = rng.random_range(30..=200);
            let mut picked = draw(rng, m, n);
            picked.sort_unstable();
            picked
        });
        println!("random units: coverage by EL {by_el:?}, not estimable {not_estimable:.3}");
        for (el, c) in by_el.iter().enumerate() {
            assert!(*c >= 0.93, "EL{el}: {c}");
        }
        assert!(not_estimable < 0.2, "{not_estimable}");
    }

    #[test]
    fn units_that_come_in_runs_still_get_intervals_that_hold() {
        // Units in runs of 5 neighbours (a schedule whose units are alike where they are
        // close): the units' own spread understates the estimate's, the batches' does not.
        let (by_el, not_estimable) = coverage(|rng, m| {
            let runs = rng.random_range(20..=40);
            let mut starts = draw(rng, m / 5, runs);
            starts.sort_unstable();
            starts.iter().flat_map(|s| s * 5..s * 5 + 5).collect()
        });
        println!("units in runs: coverage by EL {by_el:?}, not estimable {not_estimable:.3}");
        for (el, c) in by_el.iter().enumerate() {
            assert!(*c >= 0.90, "EL{el}: {c}");
        }
    }

    /// Stratum A of the two-strata example: units (10, 1), (10, 3), (10, 2) of N = 90.
    fn stratum_a() -> Part {
        ratio_part(&[(10, 1), (10, 3), (10, 2)], 90, 0.95).unwrap()
    }

    /// Stratum B of the two-strata example: units (10, 0), (10, 4), (10, 2) three times over,
    /// of N = 120.
    fn stratum_b() -> Part {
        let units: Vec<_> = (0..9).map(|i| (10, [0, 4, 2][i % 3])).collect();
        ratio_part(&units, 120, 0.95).unwrap()
    }

    #[test]
    fn two_strata_by_hand() {
        // A: Σx = 30, Σy = 6, R̂ = 0.2, Ŷ = 0.2 · 90 = 18; d = −1, 1, 0; s² = 2 / 2 = 1;
        // x̄ = 10, f = 30 / 90 = 1/3; Var = 90² · (2/3) · 1 / (3 · 10²) = 5,400 / 300 = 18;
        // 3 units, no batches: ν = 2.
        // B: Σx = 90, Σy = 18, R̂ = 0.2, Ŷ = 24; d = −2, 2, 0 (three times); s² = 24 / 8 = 3;
        // x̄ = 10, f = 90 / 120 = 3/4; Var = 120² · (1/4) · 3 / (9 · 10²) = 10,800 / 900 = 12;
        // 9 units, no batches: ν = 8.
        let (a, b) = (stratum_a(), stratum_b());
        assert!((a.estimate.value - 18.0).abs() < 1e-9, "{a:?}");
        assert!((a.var - 18.0).abs() < 1e-9 && a.df == 2.0, "{a:?}");
        assert!((a.population, a.traced) == (90, 30));
        assert!((b.estimate.value - 24.0).abs() < 1e-9, "{b:?}");
        assert!((b.var - 12.0).abs() < 1e-9 && b.df == 8.0, "{b:?}");
        assert!((b.population, b.traced) == (120, 90));
        // Total: Ŷ = 18 + 24 = 42; Var = 18 + 12 = 30;
        // ν = (18 + 12)² / (18² / 2 + 12² / 8) = 900 / (162 + 18) = 5
        // (not 2 + 8 = 10, nor the fewest, 2);
        // t(5, 0.975) = 2.570582 (tables); half = 2.570582 · √30 = 14.0797...
        let nu: f64 = (18.0f64 + 12.0).powi(2) / (18.0f64.powi(2) / 2.0 + 12.0f64.powi(2) / 8.0);
        assert_eq!(nu, 5.0);
        let half = 2.570_582 * 30f64.sqrt();
        let e = stratified(&[a, b], 0.95).unwrap();
        assert!((e.value - 42.0).abs() < 1e-9, "{e:?}");
        assert!(
            (e.half_width - half).abs() < 1e-5,
            "{} vs {half}",
            e.half_width
        );
        assert!((e.half_width - 14.079_7).abs() < 1e-4, "{}", e.half_width);
        // Counters: 3 + 9 units, of which 3 + 6 counted (B's y = 0 units did not);
        // traced 30 + 90 of 90 + 120 instructions.
        assert_eq!((e.units, e.met), (12, 9));
        assert!((e.sampled - 120.0 / 210.0).abs() < 1e-15);
        assert!(!e.exact && e.not_estimable.is_none() && e.has_interval());
        assert_eq!(e.level, 0.95);
        // The order of the strata does not matter.
        let ba = stratified(&[b, a], 0.95).unwrap();
        assert!((ba.half_width - e.half_width).abs() < 1e-9);
        // At 99%, the same ν: t(5, 0.995) = 4.032143 (tables).
        let e99 = stratified(&[a, b], 0.99).unwrap();
        assert!(
            (e99.half_width - 4.032_143 * 30f64.sqrt()).abs() < 1e-5,
            "{e99:?}"
        );
        assert_eq!(e99.level, 0.99);
    }

    #[test]
    fn the_t_quantile_takes_a_fractional_df() {
        // Integral df: the same as the usize one; between two, between their quantiles;
        // infinite: the normal one, 1.959964.
        assert_eq!(t_quantile_f64(9.0, 0.95), t_quantile(9, 0.95));
        let mid = t_quantile_f64(9.5, 0.95).unwrap();
        assert!(t_quantile(10, 0.95).unwrap() < mid && mid < t_quantile(9, 0.95).unwrap());
        assert!((t_quantile_f64(f64::INFINITY, 0.95).unwrap() - 1.959_964).abs() < 1e-6);
        assert_eq!(t_quantile_f64(0.0, 0.95), None);
        assert_eq!(t_quantile_f64(f64::NAN, 0.95), None);
    }

    #[test]
    fn one_stratum_is_its_own_estimate() {
        let mut one_unit = ratio_part(&[(100, 10)], 1000, 0.95).unwrap();
        let mut judged = stratum_a();
        judged.estimate = judged.estimate.judged(MIN_UNITS, MIN_MET);
        let cases: Vec<(Vec<(u64, u64)>, u64)> = vec![
            (vec![(10, 2), (20, 5), (30, 5)], 600),
            (two_stages(40, 3, 5), 100_000),
            ((0..40).map(|i| (100, [3, 5][i % 2])).collect(), 100_000),
            (vec![(100, 7), (50, 0), (0, 0), (250, 31)], 400),
            (vec![(0, 0)], 0),
            ((0..40).map(|i| (i * 10, i * 10)).collect(), 100_000),
            (two_stages(40, 4, 4), 100_000),
            (two_stages(40, 0, 0), 100_000),
            (vec![(100, 10)], 1000),
        ];
        for (units, big_n) in &cases {
            for level in [0.9, 0.95, 0.99] {
                let p = ratio_part(units, *big_n, level).unwrap();
                let e = ratio_total(units, *big_n, level).unwrap();
                assert_eq!(p.estimate, e);
                // The part's own figures give its interval.
                if e.has_interval() && !e.exact {
                    let t = t_quantile_f64(p.df, level).unwrap();
                    assert!((t * p.var.sqrt() - e.half_width).abs() <= 1e-12 * e.half_width);
                }
                assert_eq!(p.var.is_finite(), e.not_estimable.is_none(), "{p:?}");
                let s = stratified(&[p], level).unwrap();
                assert_eq!(s, e, "{units:?}");
                assert_eq!(
                    (s.value, s.half_width, s.units, s.met, s.sampled, s.exact),
                    (e.value, e.half_width, e.units, e.met, e.sampled, e.exact)
                );
            }
        }
        // The total is at the level asked for, whatever the strata's.
        one_unit.estimate.level = 0.5;
        assert_eq!(stratified(&[one_unit], 0.95).unwrap().level, 0.95);
        assert_eq!(
            stratified(&[judged], 0.95).unwrap().not_estimable,
            Some(NotEstimable::TooFewUnits { units: 3, need: 30 })
        );
        assert_eq!(stratified(&[], 0.95), None);
        assert_eq!(stratified(&[stratum_a()], 1.0), None);
        assert_eq!(stratified(&[stratum_a()], f64::NAN), None);
    }

    #[test]
    fn exact_strata_sum_exactly() {
        let full = ratio_part(&[(100, 7), (50, 0), (0, 0), (250, 31)], 400, 0.95).unwrap();
        let whole = ratio_part(&[(400, 38)], 400, 0.95).unwrap();
        let idle = ratio_part(&[(0, 0), (0, 0)], 0, 0.95).unwrap();
        assert!(full.estimate.exact && full.var == 0.0 && full.df == f64::INFINITY);
        let e = stratified(&[full, whole, idle], 0.95).unwrap();
        assert_eq!(e.value, 76.0);
        assert_eq!(e.half_width, 0.0);
        assert!(e.exact && e.has_interval() && e.not_estimable.is_none());
        assert_eq!((e.units, e.met, e.sampled), (4 + 1 + 2, 2 + 1, 1.0));
        assert_eq!(
            e.to_string(),
            "76 (exact: every instruction traced, 7 units)"
        );
        // Nothing ran anywhere: an exact 0, every instruction (none) traced.
        let none = stratified(&[idle, idle], 0.95).unwrap();
        assert!(none.exact && none.value == 0.0 && none.sampled == 1.0);
        // An exact stratum beside a sampled one adds its count and nothing to the interval,
        // nor to the degrees of freedom: A's ν = 2 is the total's.
        let a = stratum_a();
        let mixed = stratified(&[full, a, idle], 0.95).unwrap();
        assert!((mixed.value - (38.0 + 18.0)).abs() < 1e-9);
        assert_eq!(mixed.half_width, a.estimate.half_width);
        assert!(!mixed.exact);
        assert!((mixed.sampled - (400.0 + 30.0) / (400.0 + 90.0)).abs() < 1e-15);
    }

    #[test]
    fn a_not_estimable_stratum_makes_the_total_not_estimable() {
        let (a, b) = (stratum_a(), stratum_b());
        let one_unit = ratio_part(&[(100, 10)], 1000, 0.95).unwrap();
        assert_eq!(one_unit.var, f64::INFINITY);
        let same_rate = ratio_part(&two_stages(40, 4, 4), 100_000, 0.95).unwrap();
        let e = stratified(&[a, one_unit, b, same_rate], 0.95).unwrap();
        assert!(
            (e.value - (18.0 + 100.0 + 24.0 + 4000.0)).abs() < 1e-9,
            "{e:?}"
        );
        assert_eq!(e.half_width, f64::INFINITY);
        assert_eq!(
            e.not_estimable,
            Some(NotEstimable::TooFewUnits { units: 1, need: 2 }),
            "the first stratum's reason"
        );
        assert!(!e.has_interval() && !e.exact);
        assert_eq!((e.units, e.met), (3 + 1 + 9 + 40, 3 + 1 + 6 + 40));
        assert_eq!(
            e.to_string(),
            "~4,142 (not estimable: 1 unit, an interval needs 2)"
        );
        // A stratum judged not estimable after the fact, its variance still finite.
        let mut judged = b;
        judged.estimate = judged.estimate.judged(MIN_UNITS, MIN_MET);
        assert!(judged.var.is_finite());
        let j = stratified(&[a, judged], 0.95).unwrap();
        assert_eq!(
            j.not_estimable,
            Some(NotEstimable::TooFewUnits { units: 9, need: 30 })
        );
        assert_eq!(j.half_width, f64::INFINITY);
        // A variance without a reason that is not finite: unbounded, never a figure.
        let mut odd = a;
        odd.var = f64::NAN;
        let o = stratified(&[odd, b], 0.95).unwrap();
        assert!(o.half_width == f64::INFINITY && !o.has_interval(), "{o:?}");
    }

    #[test]
    fn stratified_intervals_over_cpus_cover_the_exact_total() {
        // 300 windows, each sampled on 4 CPUs. Each CPU runs its own synthetic phase (its own
        // length, segments, densities and mix of ELs), the odd CPUs counting only every other
        // counted instruction of theirs, and traces its own 50 to 70 units drawn at random.
        // The strata are the CPUs at EL0.
        const UNIT: usize = 100;
        const WINDOWS: usize = 300;
        const CPUS: usize = 4;
        let mut rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
        let (mut trials, mut covered, mut not_estimable) = (0usize, 0usize, 0usize);
        for _ in 0..WINDOWS {
            let mut exact = 0u64;
            let mut parts = Vec::new();
            for cpu in 0..CPUS {
                let pop: Vec<_> = loop {
                    let p = population(&mut rng);
                    if p.len().div_ceil(UNIT) > 250 {
                        break p;
                    }
                }
                .into_iter()
                .enumerate()
                .map(|(i, (el, c))| (el, c && i % (1 + cpu % 2) == 0))
                .collect();
                let all = units_of(&pop, UNIT, 0);
                exact += all.iter().map(|u| u.1).sum::<u64>();
                let big_n: u64 = all.iter().map(|u| u.0).sum();
                let n = rng.random_range(50..=70);
                let mut picked = draw(&mut rng, all.len(), n);
                picked.sort_unstable();
                let sample: Vec<_> = picked.iter().map(|&i| all[i]).collect();
                // No sampled unit ran at EL0 though the CPU did: no estimate for the window.
                if let Some(mut p) = ratio_part(&sample, big_n, 0.95) {
                    p.estimate = p.estimate.judged(MIN_UNITS, MIN_MET);
                    parts.push(p);
                }
            }
            let e = (parts.len() == CPUS)
                .then(|| stratified(&parts, 0.95))
                .flatten();
            let Some(e) = e.filter(|e| e.has_interval()) else {
                not_estimable += 1;
                continue;
            };
            trials += 1;
            covered += e.contains(exact) as usize;
        }
        let coverage = covered as f64 / trials as f64;
        let not_estimable = not_estimable as f64 / WINDOWS as f64;
        println!("4 CPUs: coverage {coverage:.3} of {trials}, not estimable {not_estimable:.3}");
        assert!(coverage >= 0.93, "{coverage}");
        assert!(not_estimable < 0.2, "{not_estimable}");
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
                // An interval, or a reason for none; never both.
                prop_assert_eq!(e.not_estimable.is_some(), !e.half_width.is_finite(), "{:?}", e);
                prop_assert_eq!(e.met, sample.iter().filter(|u| u.1 > 0).count());
                let j = e.judged(MIN_UNITS, MIN_MET);
                prop_assert!(j.exact == e.exact && j.value == e.value);
                prop_assert!(j.has_interval() == (e.exact
                    || (e.not_estimable.is_none() && k >= MIN_UNITS
                        && (e.met >= MIN_MET || e.half_width == 0.0))), "{:?}", j);
                if !j.has_interval() {
                    prop_assert!(j.to_string().contains("not estimable"), "{}", j);
                }
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
