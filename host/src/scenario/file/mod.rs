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
//! drop_at_least = 90               # or rise_at_most, fewer_by_at_least, equal = true;
//!                                  # at_least / at_most with policy = "…" (one side)
//! ```
//!
//! Every run is checked with the parsers the guest uses, before anything is built or booted;
//! an error names the file, the line and the field.
//!
//! Here: the file as TOML gives it (the `*Raw` types, spans kept), the checked scenario, and
//! the whole file's checks (version, run names, the scenario's name). A `[[run]]` table is
//! checked in `run_table`, an `[[expect]]` table in `expect_table`, and `locate` says where
//! an error is (file, line, field): each table's rules read apart from the others'.

//! A run boots either the built-in guest (the keys above) or Linux kernels: a `[[run]]` with
//! `kernels` boots each kernel of the file's `[kernels]` table in turn with the same
//! workloads (docs/scenarios.md#runs-that-boot-kernels):
//!
//! ```toml
//! [kernels]                       # a name for each kernel
//! stock = "6.12"                  # what `mtex linux --kernel` takes (a path: from this file)
//! kasan = { kasan = "sync" }      # what `mtex kernel build` takes: source, kasan, patches, config
//!
//! [[run]]
//! name = "tfsr"
//! kernels = ["stock", "kasan"]
//! workloads = ["getpid 1000"]     # named workloads: each TCF0 mode of each, a window
//! tcf0 = ["sync"]                 # one mode or a list
//! commands = ["hello"]            # any commands, each a window of its own after them
//! packages = ["hello"]            # Debian packages for the guest (`mtex linux --packages`)
//! suite = "trixie"                # their suite (default: each kernel's)
//! env = ["NAME=VALUE"]            # the workloads' and commands' environment
//! tagged_heap = "sync"            # glibc's tagged heap for them: sync or async
//! sample = "1000:300"             # every window sampled (`mtex linux --sample`)
//! append = []                     # more kernel command-line words
//! repeat = 1                      # boots of each kernel; expectations use the mean
//! cpus = [1, 2, 4, 8]             # Linux's CPUs, or a list: a run `tfsr-Ncpu` for each,
//!                                 # `{cpus}` in workloads and commands its count
//!
//! [[expect]]
//! run = "tfsr"
//! workload = "getpid 1000"        # default: the run's first workload; tcf0: its first mode
//! counter = "tfsr_reads"
//! from = "stock"                  # the sides are kernels here, policies in a built-in run
//! to = "kasan"
//! fewer_by_at_least = 950         # or drop_at_least, rise_at_most, equal = true
//! # kernel = "kasan"              # one side: at_least / at_most (`policy` in a built-in run)
//! # per_operation = true          # each side over its window's operations
//! ```
//!
//! A file's runs are of one kind: a built-in run's options are `mtex run`'s, a kernel run's
//! `mtex linux`'s. `[[linux]]` and an expectation's `linux =` are read as `[[run]]` and
//! `run =`.

use mtex_abi::scenario::Scenario;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;
use toml::Spanned;

mod expect_table;
mod kernel_table;
#[cfg(test)]
mod kernel_tests;
pub(crate) mod locate;
mod rule;
mod run_table;
#[cfg(test)]
mod tests;

pub use expect_table::{check_percent, is_known_counter};
pub use kernel_table::{KernelRun, KernelSpec};
pub use rule::{Measured, Rule, change_percent};

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
    kernels: Option<Spanned<BTreeMap<String, Spanned<kernel_table::KernelRaw>>>>,
    #[serde(default, alias = "linux")]
    run: Vec<Spanned<RunRaw>>,
    #[serde(default)]
    expect: Vec<Spanned<ExpectRaw>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RunRaw {
    name: Option<Spanned<String>>,
    kernels: Option<Spanned<Vec<String>>>,
    append: Option<Vec<String>>,
    policies: Option<Vec<Spanned<String>>>,
    workloads: Option<Vec<Spanned<String>>>,
    /// One mode (a string), or for a run that boots kernels a list of them.
    tcf0: Option<Spanned<toml::Value>>,
    hz: Option<Spanned<u32>>,
    /// One CPU count, or for a run that boots kernels a list of them.
    cpus: Option<Spanned<toml::Value>>,
    repeat: Option<Spanned<u32>>,
    backend: Option<Spanned<String>>,
    pmu_events: Option<Spanned<Vec<String>>>,
    pmu_require: Option<Spanned<Vec<String>>>,
    breakpoint_runs: Option<bool>,
    trace: Option<bool>,
    watchdog_ms: Option<Spanned<u64>>,
    sample: Option<Spanned<String>>,
    sample_seed: Option<Spanned<u64>>,
    commands: Option<Vec<Spanned<String>>>,
    setup: Option<Vec<Spanned<String>>>,
    packages: Option<Spanned<Vec<String>>>,
    suite: Option<Spanned<String>>,
    env: Option<Spanned<Vec<String>>>,
    tagged_heap: Option<Spanned<String>>,
}

impl RunRaw {
    /// The keys of a run that boots kernels this table sets (they mean nothing to the
    /// built-in guest).
    fn kernel_keys(&self) -> Vec<&'static str> {
        set_keys([
            ("append", self.append.is_some()),
            ("commands", self.commands.is_some()),
            ("setup", self.setup.is_some()),
            ("packages", self.packages.is_some()),
            ("suite", self.suite.is_some()),
            ("env", self.env.is_some()),
            ("tagged_heap", self.tagged_heap.is_some()),
        ])
    }

    /// The built-in guest's keys this table sets, in the order the schema lists them.
    fn guest_keys(&self) -> Vec<&'static str> {
        set_keys([
            ("policies", self.policies.is_some()),
            ("hz", self.hz.is_some()),
            ("backend", self.backend.is_some()),
            ("pmu_events", self.pmu_events.is_some()),
            ("pmu_require", self.pmu_require.is_some()),
            ("breakpoint_runs", self.breakpoint_runs.is_some()),
            ("trace", self.trace.is_some()),
            ("watchdog_ms", self.watchdog_ms.is_some()),
        ])
    }
}

/// The keys of `keys` the table sets, in their order.
fn set_keys<const N: usize>(keys: [(&'static str, bool); N]) -> Vec<&'static str> {
    keys.into_iter()
        .filter_map(|(k, set)| set.then_some(k))
        .collect()
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ExpectRaw {
    counter: Spanned<String>,
    workload: Option<Spanned<String>>,
    tcf0: Option<Spanned<String>>,
    from: Option<Spanned<String>>,
    to: Option<Spanned<String>>,
    policy: Option<Spanned<String>>,
    kernel: Option<Spanned<String>>,
    #[serde(alias = "linux")]
    run: Option<Spanned<String>>,
    from_run: Option<Spanned<String>>,
    to_run: Option<Spanned<String>>,
    drop_at_least: Option<Spanned<f64>>,
    rise_at_most: Option<Spanned<f64>>,
    fewer_by_at_least: Option<Spanned<u64>>,
    equal: Option<Spanned<bool>>,
    at_least: Option<Spanned<u64>>,
    at_most: Option<Spanned<u64>>,
    /// Judged on each side's counter divided by its window's operations.
    per_operation: Option<Spanned<bool>>,
}

/// A checked scenario.
#[derive(Clone, Debug, PartialEq)]
pub struct ScenarioFile {
    pub name: String,
    /// The kernels its runs boot, by name (empty when its runs boot the built-in guest).
    pub kernels: BTreeMap<String, KernelSpec>,
    pub runs: Vec<RunSpec>,
    pub expectations: Vec<Expect>,
}

/// One run: what it boots and how many times.
#[derive(Clone, Debug, PartialEq)]
pub struct RunSpec {
    pub name: String,
    /// Boots of the guest, or of each kernel.
    pub repeat: u32,
    pub boots: Boots,
}

/// What a run boots.
#[derive(Clone, Debug, PartialEq)]
pub enum Boots {
    Guest(GuestRun),
    Kernels(Box<KernelRun>),
}

/// A run of the built-in guest: its command line and the phases it will report.
#[derive(Clone, Debug, PartialEq)]
pub struct GuestRun {
    /// `mtex.*` options for the kernel guest.
    pub cmdline: String,
    /// The phases it will report: (workload, policy) in CLI spellings.
    pub phases: Vec<(String, String)>,
    /// Its phases are traced (exact counts); otherwise PMU figures only.
    pub traced: bool,
}

impl RunSpec {
    /// The built-in guest's run, if this run boots it.
    pub fn guest(&self) -> Option<&GuestRun> {
        match &self.boots {
            Boots::Guest(g) => Some(g),
            Boots::Kernels(_) => None,
        }
    }

    /// The kernels' run, if this run boots kernels.
    pub fn kernels(&self) -> Option<&KernelRun> {
        match &self.boots {
            Boots::Kernels(k) => Some(k),
            Boots::Guest(_) => None,
        }
    }

    /// The name a boot's results carry in report.json: the run's own, or for a run that
    /// boots kernels `RUN-KERNEL` (each kernel's boots are a run of the document).
    pub fn result_name(&self, kernel: Option<&str>) -> String {
        match kernel {
            Some(k) => format!("{}-{k}", self.name),
            None => self.name.clone(),
        }
    }
}

impl ScenarioFile {
    /// Whether its runs boot kernels (`mtex linux`'s options) rather than the built-in guest.
    pub fn boots_kernels(&self) -> bool {
        self.runs.iter().any(|r| r.kernels().is_some())
    }
}

/// One side of an expectation: the phase of a run it reads.
#[derive(Clone, Debug, PartialEq)]
pub struct Side {
    pub run: String,
    /// The run of report.json its boots are (`RunSpec::result_name`).
    pub results_run: String,
    /// The policy (a built-in run) or the kernel (a run that boots kernels).
    pub of: String,
    /// The window, in a run that boots kernels.
    pub window: Option<usize>,
    /// Boots of this side: a value is the mean over all of them, or not measured.
    pub boots: u32,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Expect {
    pub counter: String,
    pub workload: String,
    /// The user tasks' TCF0 mode of the window, in a run that boots kernels.
    pub tcf0: Option<String>,
    pub from: Side,
    /// The same as `from` for an absolute rule.
    pub to: Side,
    pub rule: Rule,
    /// Each side is the counter per operation of its window (the program's own count).
    pub per_operation: bool,
}

impl Expect {
    /// The expectation in words.
    pub fn text(&self) -> String {
        let counter = if self.per_operation {
            format!("{} per operation", self.counter)
        } else {
            self.counter.clone()
        };
        let (a, b) = (&self.from, &self.to);
        if let Some(mode) = &self.tcf0 {
            let run = if a.run == b.run {
                a.run.clone()
            } else {
                format!("{} and {}", a.run, b.run)
            };
            let what = format!("{} in {run} ({}, TCF0 {mode})", counter, self.workload);
            let (a, b) = (&a.of, &b.of);
            return match self.rule {
                Rule::DropAtLeast(p) => format!("{what} drops by at least {p}% from {a} to {b}"),
                Rule::RiseAtMost(p) => format!("{what} rises by at most {p}% from {a} to {b}"),
                Rule::FewerByAtLeast(n) => {
                    format!("{what} is at least {n} fewer on {b} than {a}")
                }
                Rule::Equal => format!("{what} is equal on {a} and {b}"),
                Rule::AtLeast(n) => format!("{what} is at least {n} on {a}"),
                Rule::AtMost(n) => format!("{what} is at most {n} on {a}"),
            };
        }
        let rule = match self.rule {
            Rule::DropAtLeast(p) => format!("drops by at least {p}%"),
            Rule::RiseAtMost(p) => format!("rises by at most {p}%"),
            Rule::Equal => "stays equal".to_string(),
            Rule::FewerByAtLeast(n) => format!("falls by at least {n}"),
            Rule::AtLeast(n) => format!("is at least {n}"),
            Rule::AtMost(n) => format!("is at most {n}"),
        };
        if matches!(self.rule, Rule::AtLeast(_) | Rule::AtMost(_)) {
            return format!(
                "{} of {} {rule} under {}/{}",
                counter, self.workload, a.run, a.of
            );
        }
        format!(
            "{} of {} {rule} from {}/{} to {}/{}",
            counter, self.workload, a.run, a.of, b.run, b.of
        )
    }

    /// Judges the rule on the two values; returns whether it held and the values in words.
    pub fn judge(&self, from: f64, to: f64) -> (bool, String) {
        self.rule.judge(from, to)
    }

    /// The same on sides that may be estimates ([`Rule::judge_measured`]).
    pub fn judge_measured(&self, from: Measured, to: Measured) -> (bool, String) {
        self.rule.judge_measured(from, to)
    }
}

/// A run that boots kernels: one, or with several CPU counts one for each, named
/// `NAME-Ncpu`.
fn kernel_specs(
    cx: &Ctx<'_>,
    i: usize,
    r: &Spanned<RunRaw>,
    kernels: &BTreeMap<String, KernelSpec>,
) -> Result<Vec<RunSpec>, ScenarioError> {
    let name = run_table::run_name(cx, i, r)?;
    let repeat = run_table::repeat(cx, i, r, kernel_table::MAX_REPEAT)?;
    let field = format!("{}[{i}].cpus", cx.runs);
    let (counts, series) = match &r.get_ref().cpus {
        None => (vec![None], false),
        Some(v) => {
            let counts = run_table::cpu_counts(cx, v, &field)?;
            (
                counts.into_iter().map(Some).collect(),
                v.get_ref().is_array(),
            )
        }
    };
    counts
        .into_iter()
        .map(|cpus| {
            let mut run = kernel_table::kernel_run(cx, i, r, kernels, cpus)?;
            let name = match cpus {
                Some(n) if series => {
                    run.series = Some(name.clone());
                    format!("{name}-{n}cpu")
                }
                _ => name.clone(),
            };
            Ok(RunSpec {
                name,
                repeat,
                boots: Boots::Kernels(Box::new(run)),
            })
        })
        .collect()
}

/// Adds a run, its name and its results' names (`RUN-KERNEL`) not taken by another.
fn add_run(
    cx: &Ctx<'_>,
    i: usize,
    r: &Spanned<RunRaw>,
    runs: &mut Vec<RunSpec>,
    spec: RunSpec,
) -> Result<(), ScenarioError> {
    let runs_table = cx.runs;
    // Names are file names in the results directory and keys of the expectations; a
    // kernel's boots are the run `RUN-KERNEL` in report.json.
    let taken = |n: &str| {
        runs.iter().any(|o| {
            o.name == n
                || o.kernels()
                    .is_some_and(|k| k.kernels.iter().any(|kn| o.result_name(Some(kn)) == n))
        })
    };
    let mut names = vec![spec.name.clone()];
    if let Some(k) = spec.kernels() {
        names.extend(k.kernels.iter().map(|kn| spec.result_name(Some(kn))));
    }
    if let Some(clash) = names.iter().find(|n| taken(n) || !is_safe_name(n)) {
        let span = r.get_ref().name.as_ref().map_or(r.span(), |n| n.span());
        let problem = if is_safe_name(clash) {
            format!("{clash:?}: another run has this name")
        } else {
            format!("{clash:?}: a run's results name is at most 64 characters")
        };
        return Err(cx.at(span, &format!("{runs_table}[{i}].name"), problem));
    }
    runs.push(spec);
    Ok(())
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
            kernels: BTreeMap::new(),
            runs: vec![RunSpec {
                name: "run".to_string(),
                repeat: 1,
                boots: Boots::Guest(GuestRun {
                    traced: parsed.is_none_or(|s| s.traced),
                    cmdline,
                    phases,
                }),
            }],
            expectations: Vec::new(),
        }
    }
}

/// A run's TCF0 mode(s) as the file gives them: a string, or (`list`) a list of strings.
fn modes(
    cx: &Ctx<'_>,
    t: &Spanned<toml::Value>,
    field: &str,
    list: bool,
) -> Result<Vec<String>, ScenarioError> {
    let wrong = || {
        cx.at(
            t.span(),
            field,
            if list {
                "a mode (none, sync, async or asymm) or a list of them"
            } else {
                "a string: none, sync, async or asymm (a list is for a run that boots kernels)"
            },
        )
    };
    match t.get_ref() {
        toml::Value::String(s) => Ok(vec![s.clone()]),
        toml::Value::Array(a) if list => a
            .iter()
            .map(|v| v.as_str().map(str::to_string).ok_or_else(wrong))
            .collect(),
        _ => Err(wrong()),
    }
}

/// Reads and checks a scenario file; relative kernel and patch paths are from its directory.
pub fn load(path: &Path) -> Result<ScenarioFile, ScenarioError> {
    let text = crate::input::read_text(path, "scenario file", crate::input::SCENARIO_LIMIT)
        .map_err(|e| ScenarioError(e.0))?;
    let stem = path
        .file_stem()
        .map_or("scenario".to_string(), |s| s.to_string_lossy().into_owned());
    let base = path.parent().unwrap_or(Path::new("."));
    parse_in(&path.display().to_string(), &stem, &text, base)
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
    parse_in(file, stem, text, Path::new("."))
}

/// As [`parse`], with relative kernel and patch paths taken from `base`.
pub fn parse_in(
    file: &str,
    stem: &str,
    text: &str,
    base: &Path,
) -> Result<ScenarioFile, ScenarioError> {
    // The spelling of the run tables the file uses, for its errors.
    let runs_table = if text
        .lines()
        .any(|l| locate::header(l.trim()) == "[[linux]]")
    {
        "linux"
    } else {
        "run"
    };
    let cx = Ctx {
        file,
        text,
        runs: runs_table,
    };
    let raw: FileRaw = toml::from_str(text).map_err(|e| {
        let line = e.span().map_or(0, |s| line_of(text, s.start));
        let message = e.message().trim_end();
        // The field it is in, and for a value of the wrong type what the field takes, not
        // only serde's words.
        let at = e.span().map(|s| s.start);
        let field = at.and_then(|a| locate::field_path(text, a)).map(|f| f.0);
        let allowed = at.and_then(|a| field_at(text, a)).map(|f| f.1);
        match (field, allowed) {
            (Some(field), Some(allowed)) if message.starts_with("invalid") => ScenarioError(
                format!("{file}:{line}: {field}: {message}; {field} takes {allowed}"),
            ),
            (Some(field), _) => ScenarioError(format!("{file}:{line}: {field}: {message}")),
            (None, _) => ScenarioError(format!("{file}:{line}: {message}")),
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
            "{file}: no [[{runs_table}]]: a scenario needs at least one"
        )));
    }
    let kernels = match &raw.kernels {
        Some(k) => kernel_table::kernels(&cx, k.get_ref(), base)?,
        None => BTreeMap::new(),
    };
    let booting = raw.run.iter().filter(|r| r.get_ref().kernels.is_some());
    if let Some(k) = &raw.kernels
        && booting.clone().count() == 0
    {
        return Err(cx.at(
            k.span(),
            "kernels",
            "no run boots them (a run boots kernels with `kernels = [...]`)",
        ));
    }
    if booting.clone().count() > kernel_table::MAX_RUNS {
        return Err(ScenarioError(format!(
            "{file}: {} runs boot kernels: at most {}",
            booting.count(),
            kernel_table::MAX_RUNS
        )));
    }
    let mut runs: Vec<RunSpec> = Vec::new();
    for (i, r) in raw.run.iter().enumerate() {
        let boots_kernels = r.get_ref().kernels.is_some();
        // One kind per file: the two kinds take different boot options (`mtex run`'s and
        // `mtex linux`'s), which one command line cannot give both.
        if let Some(first) = runs.first()
            && first.kernels().is_some() != boots_kernels
        {
            let (kind, other) = if boots_kernels {
                ("boots kernels", "the built-in guest")
            } else {
                ("boots the built-in guest", "kernels")
            };
            return Err(cx.at(
                r.span(),
                &format!("{runs_table}[{i}]"),
                format!(
                    "this run {kind} and {runs_table}[0] boots {other}: a file's runs are                      of one kind (put the others in a file of their own)"
                ),
            ));
        }
        let specs = if boots_kernels {
            if raw.kernels.is_none() {
                return Err(cx.at(
                    r.span(),
                    &format!("{runs_table}[{i}].kernels"),
                    "the file has no [kernels] table to name them from",
                ));
            }
            kernel_specs(&cx, i, r, &kernels)?
        } else {
            vec![run_spec(&cx, i, r)?]
        };
        for spec in specs {
            add_run(&cx, i, r, &mut runs, spec)?;
        }
    }
    if runs.iter().filter(|r| r.kernels().is_some()).count() > kernel_table::MAX_RUNS {
        return Err(ScenarioError(format!(
            "{file}: its runs boot kernels in {} runs (a run of several CPU counts is one for \
             each): at most {}",
            runs.len(),
            kernel_table::MAX_RUNS
        )));
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
        kernels,
        runs,
        expectations,
    })
}
