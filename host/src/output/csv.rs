//! The document as CSV (RFC 4180): one row per (run, repeat, phase, counter), long format,
//! so that a spreadsheet or pandas can pivot it any way.
//!
//! `phase_index` (1-based, the phase's place in its run) tells apart phases that share a name,
//! a policy and a workload (`getpid` and `getpid:tcf0=asymm` in one scenario); the parameters
//! themselves are in report.json.

use crate::model::results::Results;

/// The header row.
///
/// `kind` says what `value` is: `exact`, a count of every event; `estimate`, a sampled
/// phase's estimate (rounded to a whole count), with its 95% confidence interval in
/// `ci_low`/`ci_high` (empty for an exact count); or `not_estimable`, a sampled phase's
/// estimate without an interval (too few units, or too few that met the counter), which is no
/// figure to stand by.
pub const HEADER: &str =
    "run,repeat,phase_index,phase,policy,workload,counter,value,kind,ci_low,ci_high";

/// One field, quoted when it must be (a comma, a quote, CR or LF; RFC 4180 §2.6), with its
/// quotes doubled (§2.7). A leading or trailing space is quoted too, as some readers trim it.
pub fn field(s: &str) -> String {
    let needs = s.contains([',', '"', '\r', '\n']) || s.starts_with(' ') || s.ends_with(' ');
    if needs {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// The rows; empty fields for a phase that is not a (policy, workload) run. Lines end in LF,
/// not RFC 4180's CRLF: awk, cut and grep would keep the CR in the last field, and CSV readers
/// take either.
pub fn render(doc: &Results) -> String {
    let mut out = String::new();
    out.push_str(HEADER);
    out.push('\n');
    for run in &doc.runs {
        for (i, p) in run.phases.iter().enumerate() {
            let prefix = [
                field(&run.name),
                run.repeat.to_string(),
                (i + 1).to_string(),
                field(&p.name),
                field(p.policy.as_deref().unwrap_or("")),
                field(p.workload.as_deref().unwrap_or("")),
            ]
            .join(",");
            for (counter, value) in &p.counters {
                out.push_str(&prefix);
                out.push(',');
                out.push_str(&field(counter));
                out.push(',');
                out.push_str(&value.to_string());
                out.push_str(",exact,,\n");
            }
            for (counter, e) in &p.estimates {
                let est = e.estimate();
                // One without an interval is said so: its value is no figure to stand by.
                let (kind, bounds) = if est.has_interval() {
                    (
                        "estimate",
                        format!("{:.0},{:.0}", est.low().floor(), est.high().ceil()),
                    )
                } else {
                    ("not_estimable", ",".to_string())
                };
                out.push_str(&format!(
                    "{prefix},{},{:.0},{kind},{bounds}\n",
                    field(counter),
                    est.value.round()
                ));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_quoted_only_when_they_must_be() {
        assert_eq!(field("mem_access_checked_rd:k"), "mem_access_checked_rd:k");
        assert_eq!(
            field("kasan-sync+tfsr-sync-skip"),
            "kasan-sync+tfsr-sync-skip"
        );
        assert_eq!(field("a,b"), "\"a,b\"");
        assert_eq!(field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(field("two\nlines"), "\"two\nlines\"");
        assert_eq!(field(" x"), "\" x\"");
        assert_eq!(field(""), "");
    }
}
