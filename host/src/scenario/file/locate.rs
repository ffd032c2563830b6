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
    /// The run tables' spelling in this file: `run`, or `linux` as older files wrote it.
    pub(super) runs: &'a str,
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

impl Ctx<'_> {
    /// Where `key =` is written in the table whose span is `table` (a table's span may be
    /// its header alone: the search goes on to the next header), or the table's own span:
    /// for the errors about a key whose value carries no span of its own.
    pub(super) fn key_in(&self, table: Range<usize>, key: &str) -> Range<usize> {
        let start = table.start.min(self.text.len());
        let mut at = start;
        for (n, line) in self.text[start..].split_inclusive('\n').enumerate() {
            let l = line.trim_start();
            if n > 0 && l.starts_with('[') {
                break;
            }
            if l.strip_prefix(key)
                .is_some_and(|rest| rest.trim_start().starts_with('='))
            {
                return at..at + line.len();
            }
            at += line.len();
        }
        table
    }
}

/// What each key of the file takes, for the messages of type errors: (table, key, what);
/// the table is `run` (also `linux`), `expect`, `kernels`, or empty for the top level.
const ALLOWED: &[(&str, &str, &str)] = &[
    ("", "version", "the number 1"),
    ("", "name", "a string of letters, digits, - and _"),
    ("", "description", "a string"),
    ("run", "name", "a string of letters, digits, - and _"),
    ("run", "kernels", "a list of names from [kernels]"),
    (
        "run",
        "append",
        "a list of strings, one kernel command-line word each",
    ),
    (
        "run",
        "policies",
        "a list of strings, each policy tokens joined by +",
    ),
    ("run", "workloads", "a list of strings, one workload each"),
    (
        "run",
        "tcf0",
        "a string: none, sync, async or asymm (a list of them in a run that boots kernels)",
    ),
    ("run", "hz", "a whole number, 0 to 100000"),
    (
        "run",
        "cpus",
        "a whole number, 1 to 8 (a list of them in a run that boots kernels)",
    ),
    (
        "run",
        "repeat",
        "a whole number, 1 to 100 (1 to 20 in a run that boots kernels)",
    ),
    ("run", "backend", "a string: both, trace or pmu"),
    (
        "run",
        "pmu_events",
        "a list of strings (event names or numbers)",
    ),
    ("run", "pmu_require", "a list of strings (event names)"),
    ("run", "breakpoint_runs", "true or false"),
    ("run", "trace", "true or false"),
    ("run", "watchdog_ms", "a whole number, 1 to 3600000"),
    (
        "run",
        "sample",
        "a string UNIT:GAP_US, instructions per unit and the mean gap in µs",
    ),
    ("run", "sample_seed", "a whole number"),
    (
        "run",
        "commands",
        "a list of strings, one command line each",
    ),
    ("run", "setup", "a list of strings, one command line each"),
    (
        "run",
        "packages",
        "a list of strings, Debian package names (NAME, NAME/SUITE or NAME=VERSION)",
    ),
    ("run", "suite", "a string: bookworm, trixie or sid"),
    ("run", "env", "a list of strings, NAME=VALUE each"),
    ("run", "tagged_heap", "a string: sync or async"),
    (
        "expect",
        "counter",
        "a string: a counter name of report.json",
    ),
    ("expect", "workload", "a string"),
    ("expect", "tcf0", "a string: none, sync, async or asymm"),
    ("expect", "from", "a string: a policy, or a kernel"),
    ("expect", "to", "a string: a policy, or a kernel"),
    ("expect", "policy", "a string: a policy"),
    ("expect", "kernel", "a string: a kernel's name"),
    ("expect", "run", "a string: a run's name"),
    ("expect", "linux", "a string: a run's name"),
    ("expect", "from_run", "a string: a run's name"),
    ("expect", "to_run", "a string: a run's name"),
    (
        "expect",
        "drop_at_least",
        "a number, 0 to 100000 (per cent)",
    ),
    ("expect", "rise_at_most", "a number, 0 to 100000 (per cent)"),
    ("expect", "fewer_by_at_least", "a whole number, at least 0"),
    ("expect", "at_least", "a whole number, at least 0"),
    ("expect", "at_most", "a whole number, at least 0"),
    ("expect", "equal", "true"),
    ("expect", "per_operation", "true or false"),
    ("kernels", "source", "a string"),
    ("kernels", "kasan", "a string"),
    ("kernels", "patches", "a list of file paths"),
    ("kernels", "config", "a list of file paths"),
];

/// The field at byte `at` of `text`, as errors name it (`run[1].hz`, `version`), and what it
/// takes: see [`field_path`].
pub(super) fn field_at(text: &str, at: usize) -> Option<(String, &'static str)> {
    let (field, key) = field_path(text, at)?;
    // The table the field is in, as ALLOWED names it: `linux[0].hz` is in `run`.
    let table = match field.split(['[', '.']).next().unwrap_or_default() {
        _ if field == key => "",
        "linux" => "run",
        t => t,
    };
    let allowed = ALLOWED
        .iter()
        .find(|(t, k, _)| *t == table && *k == key)
        .map(|(_, _, a)| *a)?;
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
pub(super) fn header(line: &str) -> &str {
    line.split_once('#').map_or(line, |(h, _)| h).trim()
}
