//! Scenario files: a set of runs described once, in TOML, with expectations that decide the
//! exit status. Schema version 1 (documented in docs/scenarios.md):
//!
//! ```toml
//! version = 1                      # required
//! name = "quick"                   # default: the file's stem
//! description = "…"
//!
//! [[run]]                          # one boot of the guest kernel per repeat
//! name = "matrix"                  # unique; default run-1, run-2, …
//! policies = ["entry-tco", "tcma1"]             # default: all eight
//! workloads = ["getpid", "futex-hash:iters=64"] # default: all seven
//! tcf0 = "sync"                    # user tasks' mode: none, sync, async, asymm
//! hz = 250                         # the kernel's tick, 0 to 100000
//! cpus = 1                         # CPUs the kernel runs on, 1 to 8 (more than 1: hz = 0,
//!                                  # backend = "trace")
//! repeat = 1                       # 1 to 100
//! backend = "both"                 # both (default): each run untraced for the PMU, then
//!                                  # traced; trace: traced only; pmu: untraced only
//! pmu_events = ["0x13"]            # raw PMU events to count too (at most 3)
//! pmu_require = ["mem_access_checked_rd"]  # fail at boot if the CPU lacks one
//! breakpoint_runs = true           # mtex.runs: run between breakpoints (default)
//! trace = true                     # false: as backend = "pmu"
//! watchdog_ms = 600000
//! sample = "1000:250"              # traced phases sampled: units of 1000 instructions,
//! sample_seed = 1                  #   random gaps of 0-500 µs (docs/sampling.md)
//!
//! [[expect]]                       # judged after all runs; a failure exits 1
//! counter = "mem_access_checked_rd:k"
//! workload = "futex-hash"          # the phase: this workload …
//! from = "entry-tco"               # … under this policy …
//! to = "tcma1"                     # … against this one
//! run = "matrix"                   # default: the first run (from_run / to_run to differ)
//! drop_at_least = 90               # percent; or rise_at_most = P, or equal = true
//! ```
//!
//! Every run is checked with the parsers the guest uses, before anything is built or booted;
//! an error names the file, the line and the field.
//!
//! Here: the file as TOML gives it (the `*Raw` types, spans kept), the checked scenario, and
//! the whole file's checks (version, run names, the scenario's name). A `[[run]]` table is
//! checked in `run_table`, an `[[expect]]` table in `expect_table`, and `locate` says where
//! an error is (file, line, field): each table's rules read apart from the others'.

use mtex_abi::scenario::Scenario;
use serde::Deserialize;
use std::path::Path;
use toml::Spanned;

mod expect_table;
pub(crate) mod locate;
mod rule;
mod run_table;
#[cfg(test)]
mod tests;

pub use expect_table::{check_percent, is_known_counter};
pub use rule::{Rule, change_percent};

use expect_table::expect;
use locate::{Ctx, field_at, line_of};
use run_table::{phases_of, run_spec};

pub const VERSION: u32 = 1;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileRaw {
    version: Spanned<u32>,
    name: Option<Spanned<String>>,
    #[allow(dead_code, reason = "documentation for the reader of the file")]
    description: Option<String>,
    #[serde(default)]
    run: Vec<Spanned<RunRaw>>,
    #[serde(default)]
    expect: Vec<Spanned<ExpectRaw>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RunRaw {
    name: Option<Spanned<String>>,
    policies: Option<Vec<Spanned<String>>>,
    workloads: Option<Vec<Spanned<String>>>,
    tcf0: Option<Spanned<String>>,
    hz: Option<Spanned<u32>>,
    cpus: Option<Spanned<u32>>,
    repeat: Option<Spanned<u32>>,
    backend: Option<Spanned<String>>,
    pmu_events: Option<Spanned<Vec<String>>>,
    pmu_require: Option<Spanned<Vec<String>>>,
    breakpoint_runs: Option<bool>,
    trace: Option<bool>,
    watchdog_ms: Option<Spanned<u64>>,
    sample: Option<Spanned<String>>,
    sample_seed: Option<Spanned<u64>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ExpectRaw {
    counter: Spanned<String>,
    workload: Spanned<String>,
    from: Spanned<String>,
    to: Spanned<String>,
    run: Option<Spanned<String>>,
    from_run: Option<Spanned<String>>,
    to_run: Option<Spanned<String>>,
    drop_at_least: Option<Spanned<f64>>,
    rise_at_most: Option<Spanned<f64>>,
    equal: Option<Spanned<bool>>,
}

/// A checked scenario.
#[derive(Clone, Debug, PartialEq)]
pub struct ScenarioFile {
    pub name: String,
    pub runs: Vec<RunSpec>,
    pub expectations: Vec<Expect>,
}

/// One run: the guest's command line and how many times to boot it.
#[derive(Clone, Debug, PartialEq)]
pub struct RunSpec {
    pub name: String,
    /// `mtex.*` options for the kernel guest.
    pub cmdline: String,
    pub repeat: u32,
    /// The phases it will report: (workload, policy) in CLI spellings.
    pub phases: Vec<(String, String)>,
    /// Its phases are traced (exact counts); otherwise PMU figures only.
    pub traced: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Expect {
    pub counter: String,
    pub workload: String,
    pub from: (String, String),
    pub to: (String, String),
    pub rule: Rule,
}

impl Expect {
    /// The expectation in words.
    pub fn text(&self) -> String {
        let rule = match self.rule {
            Rule::DropAtLeast(p) => format!("drops by at least {p}%"),
            Rule::RiseAtMost(p) => format!("rises by at most {p}%"),
            Rule::Equal => "stays equal".to_string(),
            Rule::FewerByAtLeast(n) => format!("falls by at least {n}"),
            Rule::AtLeast(n) => format!("is at least {n}"),
            Rule::AtMost(n) => format!("is at most {n}"),
        };
        format!(
            "{} of {} {rule} from {}/{} to {}/{}",
            self.counter, self.workload, self.from.0, self.from.1, self.to.0, self.to.1
        )
    }

    /// Judges the rule on the two values; returns whether it held and the values in words.
    pub fn judge(&self, from: f64, to: f64) -> (bool, String) {
        self.rule.judge(from, to)
    }
}

/// An error in a scenario file, with where it is.
#[derive(Debug)]
pub struct ScenarioError(pub String);

impl std::fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ScenarioError {}

impl ScenarioFile {
    /// A one-run scenario of a guest command line (`mtex run --guest … --opt …`).
    pub fn single(name: &str, cmdline: String) -> Self {
        let parsed = Scenario::parse(&cmdline).ok();
        let phases = parsed.as_ref().map(phases_of).unwrap_or_default();
        ScenarioFile {
            name: name.to_string(),
            runs: vec![RunSpec {
                name: "run".to_string(),
                traced: parsed.is_none_or(|s| s.traced),
                cmdline,
                repeat: 1,
                phases,
            }],
            expectations: Vec::new(),
        }
    }
}

/// Reads and checks a scenario file.
pub fn load(path: &Path) -> Result<ScenarioFile, ScenarioError> {
    let text = crate::input::read_text(path, "scenario file", crate::input::SCENARIO_LIMIT)
        .map_err(|e| ScenarioError(e.0))?;
    let stem = path
        .file_stem()
        .map_or("scenario".to_string(), |s| s.to_string_lossy().into_owned());
    parse(&path.display().to_string(), &stem, &text)
}

/// A name that is a plain file name everywhere: letters, digits, `-` and `_`.
pub fn is_safe_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// The file's stem as a default scenario name: any other character becomes `_` (the stem
/// was not chosen as a name, so it is made one rather than refused).
pub fn safe_stem(stem: &str) -> String {
    let s: String = stem
        .chars()
        .take(64)
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() { "scenario".into() } else { s }
}

/// Checks a scenario given as text (`file` names it in errors, `stem` is its default name).
pub fn parse(file: &str, stem: &str, text: &str) -> Result<ScenarioFile, ScenarioError> {
    let cx = Ctx { file, text };
    let raw: FileRaw = toml::from_str(text).map_err(|e| {
        let line = e.span().map_or(0, |s| line_of(text, s.start));
        let message = e.message().trim_end();
        // A value of the wrong type: the field and what it takes, not only serde's words.
        match e.span().and_then(|s| field_at(text, s.start)) {
            Some((field, allowed)) if message.starts_with("invalid") => ScenarioError(format!(
                "{file}:{line}: {field}: {message}; {field} takes {allowed}"
            )),
            _ => ScenarioError(format!("{file}:{line}: {message}")),
        }
    })?;
    if *raw.version.get_ref() != VERSION {
        return Err(cx.at(
            raw.version.span(),
            "version",
            format!(
                "this mtex reads version {VERSION} (given {})",
                raw.version.get_ref()
            ),
        ));
    }
    if raw.run.is_empty() {
        return Err(ScenarioError(format!(
            "{file}: no [[run]]: a scenario needs at least one"
        )));
    }
    let mut runs = Vec::new();
    for (i, r) in raw.run.iter().enumerate() {
        let spec = run_spec(&cx, i, r)?;
        // Names are file names in the results directory and keys of the expectations.
        if runs.iter().any(|o: &RunSpec| o.name == spec.name) {
            let span = r.get_ref().name.as_ref().map_or(r.span(), |n| n.span());
            return Err(cx.at(
                span,
                &format!("run[{i}].name"),
                format!("{:?}: another run has this name", spec.name),
            ));
        }
        runs.push(spec);
    }
    let mut expectations = Vec::new();
    for (i, e) in raw.expect.iter().enumerate() {
        expectations.push(expect(&cx, i, e, &runs)?);
    }
    // The name names the results directory inside --out: a plain file name, or it could
    // reach outside. A name written in the file is refused (what the user chose is not
    // silently changed); the file's stem, not chosen as a name, is made safe.
    let name = match raw.name {
        Some(n) if !is_safe_name(n.get_ref()) => {
            return Err(cx.at(
                n.span(),
                "name",
                format!(
                    "{:?}: use letters, digits, - and _, at most 64 (it names the results \
                     directory)",
                    n.get_ref()
                ),
            ));
        }
        Some(n) => n.into_inner(),
        None => safe_stem(stem),
    };
    Ok(ScenarioFile {
        name,
        runs,
        expectations,
    })
}
