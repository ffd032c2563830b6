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
//! repeat = 1                       # 1 to 100
//! backend = "both"                 # both (default): each run untraced for the PMU, then
//!                                  # traced; trace: traced only; pmu: untraced only
//! pmu_events = ["0x13"]            # raw PMU events to count too (at most 3)
//! pmu_require = ["mem_access_checked_rd"]  # fail at boot if the CPU lacks one
//! breakpoint_runs = true           # mtex.runs: run between breakpoints (default)
//! trace = true                     # false: as backend = "pmu"
//! watchdog_ms = 600000
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

use mtex_abi::scenario::{Policy, Scenario};
use serde::Deserialize;
use std::ops::Range;
use std::path::Path;
use toml::Spanned;

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
    repeat: Option<Spanned<u32>>,
    backend: Option<Spanned<String>>,
    pmu_events: Option<Spanned<Vec<String>>>,
    pmu_require: Option<Spanned<Vec<String>>>,
    breakpoint_runs: Option<bool>,
    trace: Option<bool>,
    watchdog_ms: Option<Spanned<u64>>,
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

/// How an expectation judges `to` against `from`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Rule {
    /// `to` at least this many percent below `from`.
    DropAtLeast(f64),
    /// `to` at most this many percent above `from`.
    RiseAtMost(f64),
    Equal,
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
        };
        format!(
            "{} of {} {rule} from {}/{} to {}/{}",
            self.counter, self.workload, self.from.0, self.from.1, self.to.0, self.to.1
        )
    }

    /// Judges the rule on the two values; returns whether it held and the values in words.
    pub fn judge(&self, from: f64, to: f64) -> (bool, String) {
        let change = if from == 0.0 {
            if to == 0.0 { 0.0 } else { f64::INFINITY }
        } else {
            (to - from) / from * 100.0
        };
        let held = match self.rule {
            Rule::DropAtLeast(p) => change <= -p,
            Rule::RiseAtMost(p) => change <= p,
            Rule::Equal => to == from,
        };
        (held, format!("{from} → {to} ({change:+.1}%)"))
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

/// 1-based line of byte offset `at` in `text`.
fn line_of(text: &str, at: usize) -> usize {
    text[..at.min(text.len())]
        .bytes()
        .filter(|&b| b == b'\n')
        .count()
        + 1
}

struct Ctx<'a> {
    file: &'a str,
    text: &'a str,
}

impl Ctx<'_> {
    fn at(
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

const BACKENDS: &str = "both, trace or pmu";

/// A PMU event as a scenario names it: perf's name of one mtex knows
/// (`mem_access_checked_rd`), or its number (`0x4025`, `17`); as `mtex.pmu_*` takes it.
fn pmu_event_number(name: &str) -> Option<String> {
    if let Some(e) = mtex_abi::report::pmu_event::by_name(name) {
        return Some(format!("{e:#x}"));
    }
    let ok = match name.strip_prefix("0x") {
        Some(hex) => u16::from_str_radix(hex, 16).is_ok(),
        None => name.parse::<u16>().is_ok(),
    };
    ok.then(|| name.to_string())
}

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

/// The field at byte `at` of `text`, as errors name it (`run[1].hz`, `version`): the key of
/// the nearest `key =` line at or above it, in the `[[run]]`/`[[expect]]` table it is in.
fn field_at(text: &str, at: usize) -> Option<(String, &'static str)> {
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
            table = Some(l.trim_matches(|c| c == '[' || c == ']').trim().to_string());
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
    let key = key?;
    let allowed = ALLOWED.iter().find(|(k, _)| *k == key).map(|(_, a)| *a)?;
    let field = match table {
        Some(t) => {
            let header = format!("[[{t}]]");
            let index = text[..line_start]
                .lines()
                .filter(|l| l.trim() == header)
                .count()
                .saturating_sub(1);
            format!("{t}[{index}].{key}")
        }
        None => key,
    };
    Some((field, allowed))
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

fn run_spec(cx: &Ctx<'_>, i: usize, r: &Spanned<RunRaw>) -> Result<RunSpec, ScenarioError> {
    let at = |field: &str| format!("run[{i}].{field}");
    let raw = r.get_ref();
    let name = raw
        .name
        .as_ref()
        .map_or(format!("run-{}", i + 1), |n| n.get_ref().clone());
    let good = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    if let Some(n) = raw
        .name
        .as_ref()
        .filter(|n| n.get_ref().is_empty() || !n.get_ref().chars().all(good))
    {
        return Err(cx.at(
            n.span(),
            &at("name"),
            format!(
                "{:?}: use letters, digits, - and _ (it names files)",
                n.get_ref()
            ),
        ));
    }
    let mut cmdline = vec!["mtex.guest=kernel".to_string()];
    if let Some(ps) = &raw.policies {
        if ps.is_empty() {
            return Err(cx.at(
                r.span(),
                &at("policies"),
                "an empty list: name at least one",
            ));
        }
        for p in ps {
            Policy::parse(p.get_ref())
                .map_err(|e| cx.at(p.span(), &at("policies"), format!("{:?}: {e}", p.get_ref())))?;
        }
        let list: Vec<&str> = ps.iter().map(|p| p.get_ref().as_str()).collect();
        cmdline.push(format!("mtex.policies={}", list.join(",")));
    }
    if let Some(ws) = &raw.workloads {
        if ws.is_empty() {
            return Err(cx.at(
                r.span(),
                &at("workloads"),
                "an empty list: name at least one",
            ));
        }
        for w in ws {
            if w.get_ref().contains([',', ' ']) {
                return Err(cx.at(w.span(), &at("workloads"), "one workload per string"));
            }
            Scenario::parse(&format!("mtex.workloads={}", w.get_ref())).map_err(|e| {
                cx.at(
                    w.span(),
                    &at("workloads"),
                    format!("{:?}: {}", w.get_ref(), e.problem),
                )
            })?;
        }
        let list: Vec<&str> = ws.iter().map(|w| w.get_ref().as_str()).collect();
        cmdline.push(format!("mtex.workloads={}", list.join(",")));
    }
    if let Some(t) = &raw.tcf0 {
        Scenario::parse(&format!("mtex.tcf0={}", t.get_ref())).map_err(|e| {
            cx.at(
                t.span(),
                &at("tcf0"),
                format!("{:?}: {}", t.get_ref(), e.problem),
            )
        })?;
        cmdline.push(format!("mtex.tcf0={}", t.get_ref()));
    }
    if let Some(h) = &raw.hz {
        Scenario::parse(&format!("mtex.hz={}", h.get_ref())).map_err(|e| {
            cx.at(
                h.span(),
                &at("hz"),
                format!("{}: {}", h.get_ref(), e.problem),
            )
        })?;
        cmdline.push(format!("mtex.hz={}", h.get_ref()));
    }
    let repeat = match &raw.repeat {
        Some(n) if !(1..=100).contains(n.get_ref()) => {
            return Err(cx.at(
                n.span(),
                &at("repeat"),
                format!("{}: expected 1 to 100", n.get_ref()),
            ));
        }
        Some(n) => *n.get_ref(),
        None => 1,
    };
    match raw.backend.as_ref().map(|b| (b, b.get_ref().as_str())) {
        None | Some((_, "both")) => {}
        Some((_, "trace")) => cmdline.push("mtex.trace=only".to_string()),
        Some((_, "pmu")) => cmdline.push("mtex.trace=0".to_string()),
        Some((b, other)) => {
            return Err(cx.at(
                b.span(),
                &at("backend"),
                format!("{other:?}: expected {BACKENDS}"),
            ));
        }
    }
    for (key, list) in [
        ("pmu_events", &raw.pmu_events),
        ("pmu_require", &raw.pmu_require),
    ] {
        let Some(list) = list else { continue };
        let mut numbers = Vec::new();
        for name in list.get_ref() {
            numbers.push(pmu_event_number(name).ok_or_else(|| {
                cx.at(
                    list.span(),
                    &at(key),
                    format!("{name:?}: expected a PMU event: cycles, instructions, mem_access_checked_rd, mem_access_checked_wr, or a number (0x4025)"),
                )
            })?);
        }
        let option = format!("mtex.{key}={}", numbers.join(","));
        // The hypervisor's own parser: at most three, each in range.
        mtex_abi::options::HypOptions::parse(&option)
            .map_err(|e| cx.at(list.span(), &at(key), e.problem))?;
        cmdline.push(option);
    }
    match raw.breakpoint_runs {
        Some(true) => cmdline.push("mtex.runs=1".to_string()),
        Some(false) => cmdline.push("mtex.runs=0".to_string()),
        None => {}
    }
    if raw.trace == Some(false) {
        cmdline.push("mtex.trace=0".to_string());
    }
    let watchdog = raw.watchdog_ms.as_ref().map_or(600_000, |w| *w.get_ref());
    if !(1..=3_600_000).contains(&watchdog) {
        let span = raw.watchdog_ms.as_ref().map_or(r.span(), |w| w.span());
        return Err(cx.at(
            span,
            &at("watchdog_ms"),
            format!("{watchdog}: expected 1 to 3600000"),
        ));
    }
    cmdline.push(format!("mtex.watchdog_ms={watchdog}"));
    let cmdline = cmdline.join(" ");
    // The whole line through the guest's own parser: what it accepts is what boots.
    let scenario = Scenario::parse(&cmdline).map_err(|e| cx.at(r.span(), &at(e.key), e.problem))?;
    Ok(RunSpec {
        name,
        cmdline,
        repeat,
        phases: phases_of(&scenario),
        traced: scenario.traced,
    })
}

/// The (workload, policy) phases a scenario reports, in CLI spellings and run order.
fn phases_of(s: &Scenario) -> Vec<(String, String)> {
    s.runs()
        .map(|p| {
            (
                p.workload.name().to_string(),
                p.policy.name().as_str().to_string(),
            )
        })
        .collect()
}

fn expect(
    cx: &Ctx<'_>,
    i: usize,
    e: &Spanned<ExpectRaw>,
    runs: &[RunSpec],
) -> Result<Expect, ScenarioError> {
    let at = |field: &str| format!("expect[{i}].{field}");
    let raw = e.get_ref();
    let default_run = raw.run.as_ref();
    let pick = |which: &Option<Spanned<String>>, field: &str| -> Result<String, ScenarioError> {
        match which.as_ref().or(default_run) {
            Some(n) => runs
                .iter()
                .find(|r| r.name == *n.get_ref())
                .map(|r| r.name.clone())
                .ok_or_else(|| {
                    cx.at(
                        n.span(),
                        &at(field),
                        format!("no run named {:?}", n.get_ref()),
                    )
                }),
            None => Ok(runs[0].name.clone()),
        }
    };
    let from_run = pick(&raw.from_run, "from_run")?;
    let to_run = pick(&raw.to_run, "to_run")?;
    let workload = raw.workload.get_ref().clone();
    for (run, policy) in [(&from_run, &raw.from), (&to_run, &raw.to)] {
        let spec = runs.iter().find(|r| r.name == *run).expect("picked above");
        let matching = spec
            .phases
            .iter()
            .filter(|(w, p)| *w == workload && p == policy.get_ref())
            .count();
        let field = if std::ptr::eq(policy, &raw.from) {
            "from"
        } else {
            "to"
        };
        let problem = match matching {
            0 => format!(
                "run {run:?} has no phase of {workload} under {:?}",
                policy.get_ref()
            ),
            1 => continue,
            // The same workload with other parameters: which phase is meant cannot be told.
            n => format!(
                "run {run:?} has {n} phases of {workload} under {:?} (the workload with \
                 different parameters): an expectation needs exactly one",
                policy.get_ref()
            ),
        };
        return Err(cx.at(policy.span(), &at(field), problem));
    }
    let counter = raw.counter.get_ref().clone();
    if !is_known_counter(&counter) {
        return Err(cx.at(
            raw.counter.span(),
            &at("counter"),
            format!(
                "{counter:?}: not a counter name of report.json (e.g. \
                 mem_access_checked_rd:k, tcf_elided.mem_access_checked_wr:u, dsb, \
                 pmu.instructions:k; `mtex run --format csv` lists a run's)"
            ),
        ));
    }
    // An untraced run has only the hypervisor's and the PMU's figures.
    let untraced = [&from_run, &to_run]
        .into_iter()
        .find(|n| runs.iter().any(|r| r.name == **n && !r.traced));
    if let Some(run) = untraced.filter(|_| !UNTRACED_COUNTERS.contains(&counter.as_str())) {
        return Err(cx.at(
            raw.counter.span(),
            &at("counter"),
            format!(
                "{counter:?} is counted by the trace, and run {run:?} has trace = false \
                 (untraced runs give {})",
                UNTRACED_COUNTERS.join(", ")
            ),
        ));
    }
    let rules: Vec<Rule> = [
        raw.drop_at_least
            .as_ref()
            .map(|p| (p, Rule::DropAtLeast(*p.get_ref()))),
        raw.rise_at_most
            .as_ref()
            .map(|p| (p, Rule::RiseAtMost(*p.get_ref()))),
    ]
    .into_iter()
    .flatten()
    .map(|(p, r)| {
        if (0.0..=100_000.0).contains(p.get_ref()) {
            Ok(r)
        } else {
            let key = match r {
                Rule::DropAtLeast(_) => "drop_at_least",
                _ => "rise_at_most",
            };
            Err(cx.at(
                p.span(),
                &at(key),
                format!("{}: expected 0 to 100000 (per cent)", p.get_ref()),
            ))
        }
    })
    .chain(
        raw.equal
            .as_ref()
            .filter(|b| *b.get_ref())
            .map(|_| Ok(Rule::Equal)),
    )
    .collect::<Result<_, _>>()?;
    let rule = match rules.as_slice() {
        [r] => *r,
        _ => {
            return Err(cx.at(
                e.span(),
                &at("rule"),
                "exactly one of drop_at_least, rise_at_most, equal = true",
            ));
        }
    };
    Ok(Expect {
        counter,
        workload,
        from: (from_run, raw.from.get_ref().clone()),
        to: (to_run, raw.to.get_ref().clone()),
        rule,
    })
}

/// The counters an untraced phase has (see `results::counters`); and every `untraced.` one.
const UNTRACED_COUNTERS: &[&str] = &[
    "untraced.instructions:k",
    "untraced.instructions:u",
    "untraced.cycles:k",
    "untraced.cycles:u",
    "untraced.mem_access_checked_rd:k",
    "untraced.mem_access_checked_wr:k",
    "untraced.mem_access_checked_rd:u",
    "untraced.mem_access_checked_wr:u",
    "pmu.instructions:k",
    "pmu.instructions:u",
    "pmu.instructions:h",
    "exits",
    "trapped_writes",
    "virtual_irqs",
    "emulated",
];

/// Whether `name` is a counter report.json can hold: one that `mtex_abi::counters` defines
/// (the trace's, the hypervisor's, the step engine's), or a PMU event's per EL (`pmu.` for a
/// traced phase's, `untraced.` for the untraced passes': a named event or `raw.0xNNNN`, then
/// `:k` or `:u`).
pub fn is_known_counter(name: &str) -> bool {
    mtex_abi::counters::lookup(name).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
version = 1
name = "t"

[[run]]
name = "a"
policies = ["entry-tco", "tcma1"]
workloads = ["getpid", "futex-hash:iters=8"]
repeat = 2

[[expect]]
counter = "mem_access_checked_rd:k"
workload = "futex-hash"
from = "entry-tco"
to = "tcma1"
drop_at_least = 90
"#;

    fn err(text: &str) -> String {
        parse("s.toml", "s", text).unwrap_err().0
    }

    #[test]
    fn a_good_file_becomes_runs_and_expectations() {
        let s = parse("s.toml", "s", GOOD).unwrap();
        assert_eq!(s.name, "t");
        assert_eq!(s.runs.len(), 1);
        let r = &s.runs[0];
        assert_eq!(r.repeat, 2);
        assert!(
            r.cmdline.contains("mtex.policies=entry-tco,tcma1"),
            "{}",
            r.cmdline
        );
        assert!(
            r.cmdline
                .contains("mtex.workloads=getpid,futex-hash:iters=8")
        );
        assert_eq!(r.phases.len(), 4);
        assert_eq!(s.expectations[0].rule, Rule::DropAtLeast(90.0));
        let (held, _) = s.expectations[0].judge(1272.0, 32.0);
        assert!(held);
        let (held, detail) = s.expectations[0].judge(100.0, 20.0);
        assert!(!held, "{detail}");
    }

    #[test]
    fn backends_and_pmu_events_become_options() {
        let run = |extra: &str| {
            let text = format!("version = 1\n[[run]]\n{extra}\n");
            parse("s.toml", "s", &text).unwrap().runs.remove(0)
        };
        assert!(!run("").cmdline.contains("mtex.trace="));
        let pmu = run("backend = \"pmu\"");
        assert!(pmu.cmdline.contains("mtex.trace=0") && !pmu.traced);
        assert!(
            run("backend = \"trace\"")
                .cmdline
                .contains("mtex.trace=only")
        );
        let events =
            run("pmu_events = [\"0x13\", \"cycles\"]\npmu_require = [\"mem_access_checked_wr\"]");
        assert!(
            events.cmdline.contains("mtex.pmu_events=0x13,0x11"),
            "{}",
            events.cmdline
        );
        assert!(
            events.cmdline.contains("mtex.pmu_require=0x4026"),
            "{}",
            events.cmdline
        );
    }

    #[test]
    fn every_error_names_file_line_and_field() {
        let cases: &[(&str, &str)] = &[
            // unknown key
            ("version = 1\n[[run]]\npolices = [\"tcma1\"]\n", "s.toml:3"),
            // wrong type
            ("version = 1\n[[run]]\nhz = \"fast\"\n", "s.toml:3"),
            // unknown policy
            (
                "version = 1\n[[run]]\npolicies = [\"kasan\"]\n",
                "s.toml:3: run[0].policies: \"kasan\"",
            ),
            // unknown workload
            (
                "version = 1\n[[run]]\nworkloads = [\"getpids\"]\n",
                "s.toml:3: run[0].workloads",
            ),
            // out of range, with the range
            (
                "version = 1\n[[run]]\nworkloads = [\"getpid:iters=0\"]\n",
                "between 1 and 100000",
            ),
            (
                "version = 1\n[[run]]\nhz = 200000\n",
                "s.toml:3: run[0].hz: 200000: expected a tick rate from 0",
            ),
            (
                "version = 1\n[[run]]\nrepeat = 0\n",
                "s.toml:3: run[0].repeat: 0: expected 1 to 100",
            ),
            // impossible combination
            (
                "version = 1\n[[run]]\npolicies = [\"entry-tco+uaccess-tco\"]\n",
                "exclude each other",
            ),
            (
                "version = 1\n[[run]]\nbackend = \"perf\"\n",
                "s.toml:3: run[0].backend",
            ),
            (
                "version = 1\n[[run]]\npmu_events = [\"0x1\", \"bogus\"]\n",
                "s.toml:3: run[0].pmu_events: \"bogus\"",
            ),
            (
                "version = 1\n[[run]]\npmu_require = [\"1\", \"2\", \"3\", \"4\"]\n",
                "s.toml:3: run[0].pmu_require: at most 3",
            ),
            // version
            (
                "version = 2\n[[run]]\n",
                "s.toml:1: version: this mtex reads version 1",
            ),
            ("[[run]]\n", "missing field `version`"),
            ("version = 1\n", "no [[run]]"),
        ];
        for (text, want) in cases {
            let e = err(text);
            assert!(e.contains(want), "{text:?}: {e:?} lacks {want:?}");
        }
    }

    #[test]
    fn expectations_must_name_what_the_runs_have() {
        let bad_policy = GOOD.replace("to = \"tcma1\"", "to = \"kasan-sync\"");
        let e = err(&bad_policy);
        assert!(e.contains("expect[0].to") && e.contains("s.toml:15"), "{e}");
        let bad_run = GOOD.replace("drop_at_least = 90", "drop_at_least = 90\nrun = \"b\"");
        assert!(err(&bad_run).contains("no run named \"b\""));
        let two_rules = GOOD.replace("drop_at_least = 90", "drop_at_least = 90\nequal = true");
        assert!(err(&two_rules).contains("exactly one of"));
        let bad_counter = GOOD.replace("mem_access_checked_rd:k", "checked_reads");
        assert!(err(&bad_counter).contains("expect[0].counter"));
    }

    #[test]
    fn run_names_are_unique_file_names_and_phases_unambiguous() {
        let two = format!("{GOOD}\n[[run]]\nname = \"a\"\n");
        assert!(
            err(&two).contains("run[1].name: \"a\": another run has this name"),
            "{}",
            err(&two)
        );
        // A default name clashing with a given one.
        let clash = GOOD.replace("name = \"a\"", "name = \"run-2\"") + "\n[[run]]\n";
        assert!(
            err(&clash).contains("another run has this name"),
            "{}",
            err(&clash)
        );
        let path = GOOD.replace("name = \"a\"", "name = \"../x\"");
        assert!(
            err(&path).contains("run[0].name: \"../x\": use letters"),
            "{}",
            err(&path)
        );
        let twice = GOOD.replace(
            "\"futex-hash:iters=8\"",
            "\"futex-hash:iters=8\", \"futex-hash:iters=64\"",
        );
        assert!(
            err(&twice).contains("has 2 phases of futex-hash"),
            "{}",
            err(&twice)
        );
    }

    #[test]
    fn an_untraced_run_has_no_trace_counter_to_expect() {
        let untraced = GOOD.replace("repeat = 2", "repeat = 2\ntrace = false");
        let e = err(&untraced);
        assert!(
            e.contains("s.toml:13: expect[0].counter") && e.contains("trace = false"),
            "{e}"
        );
        let pmu = untraced.replace("\"mem_access_checked_rd:k\"", "\"pmu.instructions:k\"");
        let s = parse("s.toml", "s", &pmu).unwrap();
        assert!(!s.runs[0].traced && s.runs[0].cmdline.contains("mtex.trace=0"));
    }

    #[test]
    fn counters_are_known_by_their_full_name() {
        for c in [
            "mem_access_checked_rd:k",
            "if_kernel_tco.mem_access_checked_wr:u",
            "mem_access_wr:k",
            "uaccess_checked_rd",
            "kernel_entries.irq_el1",
            "dsb",
            "engine.plans_made",
            "pmu.instructions:h",
            "pmu.mem_access_checked_rd:k",
            "untraced.cycles:u",
            "untraced.raw.0x0013:k",
            "untraced.tco_writes",
        ] {
            assert!(is_known_counter(c), "{c}");
        }
        for c in [
            "mem_access_checked_rd:x",
            "mem_access_checked_rd",
            "dsb_total",
            "engine.nothing",
            "pmu.bogus:k",
            "untraced.raw.0x13:k",
            "untraced.cycles",
            "",
        ] {
            assert!(!is_known_counter(c), "{c}");
        }
    }

    #[test]
    fn a_scenario_name_is_a_plain_file_name() {
        let bad = GOOD.replace("name = \"t\"", "name = \"../../../tmp/x\"");
        assert!(
            err(&bad).contains("s.toml:3: name: \"../../../tmp/x\": use letters"),
            "{}",
            err(&bad)
        );
        assert_eq!(safe_stem("my scenario.v2"), "my_scenario_v2");
        assert_eq!(safe_stem(".."), "__");
        assert_eq!(safe_stem(""), "scenario");
    }

    #[test]
    fn type_errors_name_the_field_in_its_table() {
        let text = "version = 1\n[[run]]\nname = \"a\"\n[[run]]\npolicies = [\n  1,\n]\n";
        let at = text.find("1,").unwrap();
        assert_eq!(
            field_at(text, at),
            Some((
                "run[1].policies".to_string(),
                "a list of strings, each policy tokens joined by +"
            ))
        );
        assert_eq!(field_at(text, 10).map(|f| f.0), Some("version".to_string()));
    }

    #[test]
    fn the_shipped_scenarios_are_valid() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/scenarios");
        for f in ["default.toml", "quick.toml"] {
            load(&dir.join(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
        }
    }
}
