//! Where an error in a scenario file is: `file:line: field: problem`, the line from a
//! value's span and, for a value of the wrong type, the field and what it takes. Apart so
//! that every check words its errors one way.

use super::ScenarioError;
use std::ops::Range;

/// 1-based line of byte offset `at` in `text`.
pub(crate) fn line_of(text: &str, at: usize) -> usize {
    text[..at.min(text.len())]
        .bytes()
        .filter(|&b| b == b'\n')
        .count()
        + 1
}

pub(super) struct Ctx<'a> {
    pub(super) file: &'a str,
    pub(super) text: &'a str,
}

impl Ctx<'_> {
    pub(super) fn at(
        &self,
        span: Range<usize>,
        field: &str,
        problem: impl std::fmt::Display,
    ) -> ScenarioError {
        ScenarioError(format!(
            "{}:{}: {field}: {problem}",
            self.file,
            line_of(self.text, span.start)
        ))
    }
}

/// What each key of the file takes, for the messages of type errors.
const ALLOWED: &[(&str, &str)] = &[
    ("version", "the number 1"),
    ("name", "a string of letters, digits, - and _"),
    ("description", "a string"),
    (
        "policies",
        "a list of strings, each policy tokens joined by +",
    ),
    ("workloads", "a list of strings, one workload each"),
    ("tcf0", "a string: none, sync, async or asymm"),
    ("hz", "a whole number, 0 to 100000"),
    ("repeat", "a whole number, 1 to 100"),
    ("backend", "a string: both, trace or pmu"),
    ("pmu_events", "a list of strings (event names or numbers)"),
    ("pmu_require", "a list of strings (event names)"),
    ("breakpoint_runs", "true or false"),
    ("trace", "true or false"),
    ("watchdog_ms", "a whole number, 1 to 3600000"),
    (
        "sample",
        "a string UNIT:GAP_US, instructions per unit and the mean gap in µs",
    ),
    ("sample_seed", "a whole number"),
    ("counter", "a string: a counter name of report.json"),
    ("workload", "a string"),
    ("from", "a string: a policy"),
    ("to", "a string: a policy"),
    ("run", "a string: a run's name"),
    ("from_run", "a string: a run's name"),
    ("to_run", "a string: a run's name"),
    ("drop_at_least", "a number, 0 to 100000 (per cent)"),
    ("rise_at_most", "a number, 0 to 100000 (per cent)"),
    ("equal", "true"),
];

/// The field at byte `at` of `text`, as errors name it (`run[1].hz`, `version`), and what it
/// takes: see [`field_path`].
pub(super) fn field_at(text: &str, at: usize) -> Option<(String, &'static str)> {
    let (field, key) = field_path(text, at)?;
    let allowed = ALLOWED.iter().find(|(k, _)| *k == key).map(|(_, a)| *a)?;
    Some((field, allowed))
}

/// The field at byte `at` of `text` (`run[1].hz`, `kernels.stock`, `version`) and its key
/// (`hz`): the key of the nearest `key =` line at or above it, in the table it is in — the
/// n-th of an array of tables (`[[run]]`), or a table (`[kernels]`).
pub(crate) fn field_path(text: &str, at: usize) -> Option<(String, String)> {
    let upto = &text[..at.min(text.len())];
    let line_start = upto.rfind('\n').map_or(0, |i| i + 1);
    let line_end = text[line_start..]
        .find('\n')
        .map_or(text.len(), |i| line_start + i);
    let mut key = None;
    let mut table = None;
    for line in text[..line_end].lines().rev() {
        let l = line.trim();
        if l.starts_with('[') {
            let h = header(l);
            let array = h.starts_with("[[");
            let name = h.trim_matches(|c| c == '[' || c == ']').trim().to_string();
            table = Some((name, array));
            break;
        }
        if key.is_none()
            && let Some((k, _)) = l.split_once('=')
        {
            let k = k.trim();
            if !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                key = Some(k.to_string());
            }
        }
    }
    let key: String = key?;
    let field = match table {
        Some((t, true)) => {
            let wanted = format!("[[{t}]]");
            let index = text[..line_start]
                .lines()
                .filter(|l| header(l.trim()) == wanted)
                .count()
                .saturating_sub(1);
            format!("{t}[{index}].{key}")
        }
        Some((t, false)) => format!("{t}.{key}"),
        None => key.clone(),
    };
    Some((field, key))
}

/// A table's header line without its comment: `[[linux]]  # …` is `[[linux]]`.
fn header(line: &str) -> &str {
    line.split_once('#').map_or(line, |(h, _)| h).trim()
}
