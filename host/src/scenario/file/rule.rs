//! How an expectation judges two measured values, one rule set for built-in and Linux
//! scenarios alike (a built-in scenario's file asks for the relative rules only).

/// How an expectation judges `to` against `from` (an absolute rule judges `from` alone).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Rule {
    /// `to` at least this many percent below `from`.
    DropAtLeast(f64),
    /// `to` at most this many percent above `from`.
    RiseAtMost(f64),
    /// `to` at least this many below `from`.
    FewerByAtLeast(u64),
    Equal,
    /// `from` at least this many.
    AtLeast(u64),
    /// `from` at most this many.
    AtMost(u64),
}

impl Rule {
    /// Judges the rule on the two values; whether it held and the values in words.
    pub fn judge(self, from: f64, to: f64) -> (bool, String) {
        let change = change_percent(from, to);
        let relative = format!("{from} → {to} ({change:+.1}%)");
        match self {
            Rule::DropAtLeast(p) => (change <= -p, relative),
            Rule::RiseAtMost(p) => (change <= p, relative),
            Rule::FewerByAtLeast(n) => (
                from - to >= n as f64,
                format!("{relative}, {} fewer", from - to),
            ),
            Rule::Equal => (from == to, relative),
            Rule::AtLeast(n) => (from >= n as f64, format!("{from}")),
            Rule::AtMost(n) => (from <= n as f64, format!("{from}")),
        }
    }
}

/// A side's value: a count (every boot's phase traced whole), or an estimate with its 95%
/// confidence interval (a sampled window).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Measured {
    pub value: f64,
    /// The interval's bounds: both `value` for a count.
    pub lo: f64,
    pub hi: f64,
}

impl Measured {
    pub fn exact(value: f64) -> Self {
        Self {
            value,
            lo: value,
            hi: value,
        }
    }

    pub fn is_exact(&self) -> bool {
        self.lo == self.hi
    }

    fn words(&self) -> String {
        // Figures per operation are small: two decimals below 100, whole numbers above.
        let d = if self.value.abs() < 100.0 { 2 } else { 0 };
        if self.is_exact() && self.value.fract() == 0.0 {
            format!("{}", self.value)
        } else if self.is_exact() {
            format!("{:.d$}", self.value)
        } else {
            format!("≈{:.d$} [{:.d$}, {:.d$}]", self.value, self.lo, self.hi)
        }
    }
}

impl Rule {
    /// Judges the rule on two sides that may be estimates: it holds only where it holds for
    /// every value of both intervals (a drop from the lowest `from` to the highest `to`,
    /// an at-most of the highest, ...), so an estimate never passes on its luck; equality
    /// of estimates is never shown. On counts this is [`Rule::judge`].
    pub fn judge_measured(self, from: Measured, to: Measured) -> (bool, String) {
        if from.is_exact() && to.is_exact() {
            return self.judge(from.value, to.value);
        }
        let words = format!(
            "{} → {} (95% intervals; judged at their far ends)",
            from.words(),
            to.words()
        );
        let held = match self {
            Rule::DropAtLeast(p) => change_percent(from.lo, to.hi) <= -p,
            Rule::RiseAtMost(p) => change_percent(from.lo, to.hi) <= p,
            Rule::FewerByAtLeast(n) => from.lo - to.hi >= n as f64,
            Rule::Equal => false,
            Rule::AtLeast(n) => from.lo >= n as f64,
            Rule::AtMost(n) => from.hi <= n as f64,
        };
        let words = match self {
            Rule::AtLeast(_) | Rule::AtMost(_) => from.words() + " (95% interval)",
            Rule::Equal => format!("{words}: estimates are never shown equal"),
            _ => words,
        };
        (held, words)
    }
}

/// `to` against `from` in per cent: 0 when both are 0, infinite when only `from` is.
pub fn change_percent(from: f64, to: f64) -> f64 {
    if from == 0.0 {
        if to == 0.0 { 0.0 } else { f64::INFINITY }
    } else {
        (to - from) / from * 100.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_rule_holds_exactly_where_it_says() {
        assert!(Rule::DropAtLeast(50.0).judge(100.0, 50.0).0);
        assert!(!Rule::DropAtLeast(50.0).judge(100.0, 51.0).0);
        assert!(Rule::RiseAtMost(10.0).judge(100.0, 110.0).0);
        assert!(!Rule::RiseAtMost(10.0).judge(100.0, 111.0).0);
        assert!(Rule::FewerByAtLeast(5).judge(10.0, 5.0).0);
        assert!(!Rule::FewerByAtLeast(5).judge(10.0, 6.0).0);
        assert!(Rule::Equal.judge(3.0, 3.0).0 && !Rule::Equal.judge(3.0, 4.0).0);
        assert!(Rule::AtLeast(3).judge(3.0, 0.0).0 && !Rule::AtLeast(3).judge(2.0, 9.0).0);
        assert!(Rule::AtMost(0).judge(0.0, 9.0).0 && !Rule::AtMost(0).judge(1.0, 0.0).0);
        // From nothing, any rise is infinite: never within a bound.
        assert!(!Rule::RiseAtMost(1000.0).judge(0.0, 1.0).0);
        assert_eq!(Rule::Equal.judge(100.0, 100.0).1, "100 → 100 (+0.0%)");
    }

    #[test]
    fn an_estimate_holds_a_rule_only_across_its_whole_interval() {
        let est = |value: f64, half: f64| Measured {
            value,
            lo: value - half,
            hi: value + half,
        };
        let n = Measured::exact;
        // 100 → 8 is a 92% drop; with 100 ± 5 and 8 ± 2 the far ends are 95 → 10: 89.5%.
        assert!(
            Rule::DropAtLeast(89.0)
                .judge_measured(est(100.0, 5.0), est(8.0, 2.0))
                .0
        );
        assert!(
            !Rule::DropAtLeast(90.0)
                .judge_measured(est(100.0, 5.0), est(8.0, 2.0))
                .0
        );
        assert!(Rule::DropAtLeast(90.0).judge_measured(n(100.0), n(8.0)).0);
        assert!(
            !Rule::RiseAtMost(1.0)
                .judge_measured(est(100.0, 1.0), est(100.0, 1.0))
                .0
        );
        assert!(
            Rule::RiseAtMost(5.0)
                .judge_measured(est(100.0, 1.0), est(100.0, 1.0))
                .0
        );
        assert!(
            !Rule::FewerByAtLeast(80)
                .judge_measured(est(100.0, 5.0), est(10.0, 6.0))
                .0
        );
        assert!(
            Rule::FewerByAtLeast(79)
                .judge_measured(est(100.0, 5.0), est(10.0, 6.0))
                .0
        );
        assert!(!Rule::AtLeast(96).judge_measured(est(100.0, 5.0), n(0.0)).0);
        assert!(Rule::AtLeast(95).judge_measured(est(100.0, 5.0), n(0.0)).0);
        assert!(!Rule::AtMost(104).judge_measured(est(100.0, 5.0), n(0.0)).0);
        let (held, words) = Rule::Equal.judge_measured(est(100.0, 0.5), est(100.0, 0.5));
        assert!(!held && words.contains("never shown equal"), "{words}");
        assert_eq!(
            Rule::AtMost(200).judge_measured(est(100.0, 5.0), n(0.0)).1,
            "≈100 [95, 105] (95% interval)"
        );
    }
}
