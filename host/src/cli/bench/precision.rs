//! `mtex run --precision P%`: whether each sampled phase's headline estimate reached the
//! precision asked for, and, where it did not, how many units would: the interval narrows
//! as the square root of the units, so `n · (reached / target)²` of them, which a gap about
//! as many times shorter gives. The units stay spread over the whole phase at one rate:
//! stopping once a precision is met would sample the phase's beginning only.

use crate::model::results::Results;
use crate::output::full::phase_title;
use crate::output::text::{clean, thousands};

/// The counter the precision is asked of: the kernel's checked reads, the MTE threads'
/// headline.
pub const HEADLINE: &str = "mem_access_checked_rd:k";

/// `1%`, `0.5`, `2.5%`: a precision in per cent, more than 0 and at most 100.
pub fn parse(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .trim_end_matches('%')
        .parse()
        .map_err(|_| format!("{s:?}: expected a percentage, e.g. 1% or 0.5"))?;
    if !(v > 0.0 && v <= 100.0) {
        return Err(format!("{s:?}: expected more than 0% and at most 100%"));
    }
    Ok(v / 100.0)
}

/// One line per sampled phase of the first repeats: reached, or what would reach it.
pub fn lines(doc: &Results, target: f64) -> Vec<String> {
    let mut out = Vec::new();
    for run in doc.runs.iter().filter(|r| r.repeat == 0) {
        for p in &run.phases {
            let (Some(s), Some(e)) = (&p.sampled, p.estimates.get(HEADLINE)) else {
                continue;
            };
            let est = e.estimate();
            let what = clean(&phase_title(p)).into_owned();
            let reached = est.relative();
            out.push(format!("   {what}"));
            let line = if est.exact || reached <= target {
                format!(
                    "     {HEADLINE} ± {} reached (asked: ± {})",
                    crate::model::sample::percent(reached),
                    crate::model::sample::percent(target)
                )
            } else if !est.has_interval() || !reached.is_finite() || s.units == 0 {
                let why = est
                    .not_estimable
                    .map_or(format!("{} units", s.units), |w| w.to_string());
                format!("     {HEADLINE} has no interval ({why}): lower the gap")
            } else {
                let factor = (reached / target).powi(2);
                let units = (s.units as f64 * factor).ceil() as u64;
                let gap = (s.gap_us as f64 / factor).floor() as u64;
                let how = if gap == 0 {
                    format!(
                        "more than gaps of 1 µs give; trace the phase whole (sample={}:0)",
                        s.unit_instructions
                    )
                } else {
                    format!("e.g. sample={}:{gap}", s.unit_instructions)
                };
                out.push(format!(
                    "     {HEADLINE} ± {}, not reached (asked: ± {})",
                    crate::model::sample::percent(reached),
                    crate::model::sample::percent(target),
                ));
                format!("       about {} units would: {how}", thousands(units))
            };
            out.push(line);
        }
    }
    if !out.is_empty() {
        out.insert(0, " Precision (--precision):".to_string());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn precisions_parse_in_per_cent_and_a_bad_one_is_named() {
        assert_eq!(parse("1%"), Ok(0.01));
        assert_eq!(parse("0.5"), Ok(0.005));
        assert!(parse("0").is_err());
        assert!(parse("150%").is_err());
        assert!(parse("one").unwrap_err().contains("\"one\""));
    }
}
