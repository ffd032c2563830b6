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
}
