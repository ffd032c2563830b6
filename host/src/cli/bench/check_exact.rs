//! `mtex run --check-exact`: a sampled run's estimates against the same run traced whole.
//! Under `-icount` the guest's clock leaves out the hypervisor's time, so the two runs
//! execute the same instructions and the whole trace's counts are the exact figures the
//! estimates estimate.

use crate::model::results::Results;
use crate::output::text::{clean, thousands};

/// The counters shown one by one (every estimated counter is in the tally).
const SHOWN: [&str; 4] = [
    "mem_access_checked_rd:k",
    "mem_access_checked_wr:k",
    "mem_access_checked_rd:u",
    "mem_access_checked_wr:u",
];

/// The tally and the lines: per sampled phase its headline estimates beside the exact
/// counts, then how many of all its intervals hold the exact count.
pub fn lines(sampled: &Results, exact: &Results) -> Vec<String> {
    let mut out = vec![
        " Check against the whole trace (--check-exact): estimate, exact, error, in the 95% interval"
            .to_string(),
    ];
    let (mut held, mut intervals, mut abs_error) = (0usize, 0usize, 0f64);
    for (rs, re) in sampled.runs.iter().zip(&exact.runs) {
        for (ps, pe) in rs.phases.iter().zip(&re.phases) {
            if ps.sampled.is_none() || ps.name != pe.name {
                continue;
            }
            out.push(format!(
                "   {}",
                clean(&crate::output::full::phase_title(ps))
            ));
            for (name, e) in &ps.estimates {
                let Some(&want) = pe.counters.get(name) else {
                    continue;
                };
                let est = e.estimate();
                let inside = est.contains(want);
                if est.has_interval() && !est.exact && want > 0 {
                    intervals += 1;
                    held += inside as usize;
                    abs_error += (est.value - want as f64).abs() / want as f64;
                }
                if SHOWN.contains(&name.as_str()) {
                    let error = if want == 0 {
                        "-".to_string()
                    } else {
                        format!("{:+.2}%", 100.0 * (est.value - want as f64) / want as f64)
                    };
                    out.push(format!(
                        "     {name:<26} {:>12} {:>12} {error:>8}  {}",
                        thousands(est.value.round() as u64),
                        thousands(want),
                        if !est.has_interval() {
                            "not estimable"
                        } else if inside {
                            "yes"
                        } else {
                            "NO"
                        }
                    ));
                }
            }
        }
    }
    if intervals > 0 {
        out.push(format!(
            "   {held} of {intervals} intervals hold the exact count ({:.1}%; at 95%, about 1 in \
             20 is expected to miss); mean |error| {:.2}%",
            100.0 * held as f64 / intervals as f64,
            100.0 * abs_error / intervals as f64
        ));
    }
    out
}

/// `cmdline` without its sampling options: the same run, traced whole.
pub fn whole(cmdline: &str) -> String {
    cmdline
        .split_ascii_whitespace()
        .filter(|w| !w.starts_with("mtex.sample=") && !w.starts_with("mtex.sample_seed="))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_whole_run_is_the_same_line_without_sampling() {
        assert_eq!(
            whole("mtex.guest=kernel mtex.sample=1000:5 mtex.hz=0 mtex.sample_seed=3"),
            "mtex.guest=kernel mtex.hz=0"
        );
    }
}
