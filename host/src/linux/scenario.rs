//! Linux scenario files: kernels, the workloads run on each, and expectations on what the
//! windows count, in the TOML family of `scripts/scenarios/` (docs/linux.md#scenario-files):
//!
//! ```toml
//! version = 1
//! name = "kernel-patches"
//!
//! [kernels]                       # a name for each kernel
//! stock = "6.12"                  # what `mtex linux --kernel` takes (a path: from this file)
//! kasan = { kasan = "sync" }      # what `mtex kernel build` takes: source, kasan, patches, config
//!
//! [[linux]]                       # the kernels booted in turn with the same workloads
//! name = "tfsr"
//! kernels = ["stock", "kasan"]
//! workloads = ["getpid 1000"]     # named workloads: each TCF0 mode of each, a window
//! tcf0 = ["sync"]
//! append = []                     # more kernel command-line words
//! repeat = 1                      # boots of each kernel; expectations use the mean
//!
//! [[expect]]
//! linux = "tfsr"                  # default: the first [[linux]]
//! workload = "getpid 1000"        # default: its first workload; tcf0: its first mode
//! counter = "tfsr_reads"
//! from = "stock"                  # two kernels: drop_at_least / rise_at_most (per cent),
//! to = "kasan"                    #   fewer_by_at_least (a count), equal = true
//! # kernel = "kasan"              # one kernel: at_least / at_most (a count)
//! ```
//!
//! Everything is checked before any kernel is built or booted; an error names the file, the
//! line and the field.

pub use crate::scenario::file::Rule;
use crate::scenario::file::locate::{field_path, line_of};
use crate::scenario::file::{check_percent, is_known_counter, is_safe_name, safe_stem};
use anyhow::{Result, bail};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use toml::Spanned;

/// At most this many `[[linux]]` tables, kernels in one, and workloads in one (each runs in
/// every mode of its `tcf0`, a window each).
pub const MAX_RUNS: usize = 16;
pub const MAX_KERNELS: usize = 8;
pub const MAX_WORKLOADS: usize = 32;
/// A named workload's numbers (iterations, threads, requests…): each 1 to this.
pub const MAX_COUNT: u64 = 10_000_000;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileRaw {
    version: Spanned<u32>,
    name: Option<Spanned<String>>,
    #[allow(dead_code, reason = "documentation for the reader of the file")]
    description: Option<String>,
    kernels: Spanned<BTreeMap<String, Spanned<KernelRaw>>>,
    #[serde(default)]
    linux: Vec<Spanned<LinuxRaw>>,
    #[serde(default)]
    expect: Vec<Spanned<ExpectRaw>>,
}

/// A kernel: a string (what `mtex linux --kernel` takes) or a table (what `mtex kernel
/// build` takes). Read by hand rather than as an untagged enum, whose one error ("did not
/// match any variant") would hide which key was wrong.
#[derive(Debug)]
enum KernelRaw {
    Given(String),
    Build(BuildRaw),
}

impl<'de> Deserialize<'de> for KernelRaw {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Kernel;
        impl<'de> serde::de::Visitor<'de> for Kernel {
            type Value = KernelRaw;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str(
                    "a string (what `mtex linux --kernel` takes) or a table (what `mtex kernel \
                     build` takes: source, kasan, patches, config)",
                )
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<KernelRaw, E> {
                Ok(KernelRaw::Given(s.to_string()))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<KernelRaw, A::Error> {
                BuildRaw::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    .map(KernelRaw::Build)
            }
        }
        d.deserialize_any(Kernel)
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BuildRaw {
    source: Option<String>,
    kasan: Option<String>,
    #[serde(default)]
    patches: Vec<String>,
    #[serde(default)]
    config: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LinuxRaw {
    name: Spanned<String>,
    kernels: Spanned<Vec<String>>,
    workloads: Spanned<Vec<String>>,
    tcf0: Option<Spanned<Vec<String>>>,
    #[serde(default)]
    append: Vec<String>,
    repeat: Option<Spanned<u32>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ExpectRaw {
    linux: Option<Spanned<String>>,
    workload: Option<Spanned<String>>,
    tcf0: Option<Spanned<String>>,
    counter: Spanned<String>,
    from: Option<Spanned<String>>,
    to: Option<Spanned<String>>,
    kernel: Option<Spanned<String>>,
    drop_at_least: Option<Spanned<f64>>,
    rise_at_most: Option<Spanned<f64>>,
    fewer_by_at_least: Option<u64>,
    equal: Option<bool>,
    at_least: Option<u64>,
    at_most: Option<u64>,
}

/// A kernel of the scenario: given as `--kernel` takes it, or built.
#[derive(Clone, Debug, PartialEq)]
pub enum KernelSpec {
    Given(String),
    Build(crate::kernel_build::Args),
}

/// One `[[linux]]`: kernels × workloads × modes.
#[derive(Clone, Debug, PartialEq)]
pub struct LinuxRun {
    pub name: String,
    pub kernels: Vec<String>,
    pub workloads: Vec<String>,
    pub tcf0: Vec<String>,
    pub append: Vec<String>,
    pub repeat: u32,
}

impl LinuxRun {
    /// The window (1, 2, …) a workload runs in under a mode: workloads in order, each in
    /// every mode.
    pub fn window(&self, workload: &str, mode: &str) -> Option<usize> {
        let w = self.workloads.iter().position(|x| x == workload)?;
        let m = self.tcf0.iter().position(|x| x == mode)?;
        Some(w * self.tcf0.len() + m + 1)
    }

    /// The line /init runs: each workload in each mode, in its own window.
    pub fn line(&self) -> String {
        let mut parts = Vec::new();
        for w in &self.workloads {
            for m in &self.tcf0 {
                let n = self.window(w, m).expect("its own workload and mode");
                let mut words = w.split_whitespace();
                let name = words.next().unwrap_or_default();
                let given: Vec<&str> = words.collect();
                let args = if given.is_empty() {
                    super::NAMED_WORKLOADS
                        .iter()
                        .find(|(n, _)| *n == name)
                        .map_or("", |(_, d)| d)
                        .to_string()
                } else {
                    given.join(" ")
                };
                parts.push(
                    format!("mtex-work --tcf0 {m} --window {n} {name} {args}")
                        .trim_end()
                        .to_string(),
                );
            }
        }
        parts.join(" && ")
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Expect {
    pub linux: String,
    pub workload: String,
    pub tcf0: String,
    pub counter: String,
    /// (from, to) kernels, or the one kernel twice for an absolute rule.
    pub kernels: (String, String),
    pub rule: Rule,
}

impl Expect {
    pub fn text(&self) -> String {
        let (a, b) = &self.kernels;
        let what = format!(
            "{} in {} ({}, TCF0 {})",
            self.counter, self.linux, self.workload, self.tcf0
        );
        match self.rule {
            Rule::DropAtLeast(p) => format!("{what} drops by at least {p}% from {a} to {b}"),
            Rule::RiseAtMost(p) => format!("{what} rises by at most {p}% from {a} to {b}"),
            Rule::FewerByAtLeast(n) => format!("{what} is at least {n} fewer on {b} than {a}"),
            Rule::Equal => format!("{what} is equal on {a} and {b}"),
            Rule::AtLeast(n) => format!("{what} is at least {n} on {a}"),
            Rule::AtMost(n) => format!("{what} is at most {n} on {a}"),
        }
    }

    /// Judges the rule on the from and to values (the same for an absolute rule).
    pub fn judge(&self, from: f64, to: f64) -> (bool, String) {
        self.rule.judge(from, to)
    }
}

/// A checked Linux scenario.
#[derive(Clone, Debug, PartialEq)]
pub struct LinuxScenario {
    pub name: String,
    pub kernels: BTreeMap<String, KernelSpec>,
    pub runs: Vec<LinuxRun>,
    pub expectations: Vec<Expect>,
}

/// Reads and checks a Linux scenario file.
pub fn load(path: &Path) -> Result<LinuxScenario> {
    let text = crate::input::read_text(path, "scenario file", crate::input::SCENARIO_LIMIT)
        .map_err(|e| anyhow::anyhow!(e.0))?;
    let stem = path
        .file_stem()
        .map_or("linux".to_string(), |s| s.to_string_lossy().into_owned());
    let base = path.parent().unwrap_or(Path::new("."));
    parse(&path.display().to_string(), &stem, &text, base)
}

/// Checks a Linux scenario given as text; relative kernel and patch paths are taken from
/// `base` (the file's directory).
pub fn parse(file: &str, stem: &str, text: &str, base: &Path) -> Result<LinuxScenario> {
    let at = |span: std::ops::Range<usize>, field: &str, problem: String| {
        anyhow::anyhow!("{file}:{}: {field}: {problem}", line_of(text, span.start))
    };
    let raw: FileRaw = toml::from_str(text).map_err(|e| toml_error(file, text, &e))?;
    if raw.linux.len() > MAX_RUNS {
        bail!(
            "{file}: {} [[linux]] tables: at most {MAX_RUNS}",
            raw.linux.len()
        );
    }
    if *raw.version.get_ref() != 1 {
        return Err(at(
            raw.version.span(),
            "version",
            format!(
                "this mtex reads version 1 (given {})",
                raw.version.get_ref()
            ),
        ));
    }
    let path_from = |p: &str| -> String {
        if Path::new(p).is_absolute() {
            p.to_string()
        } else {
            base.join(p).display().to_string()
        }
    };
    let mut kernels = BTreeMap::new();
    for (name, k) in raw.kernels.get_ref() {
        let field = format!("kernels.{name}");
        if !is_safe_name(name) {
            return Err(at(
                k.span(),
                &field,
                "a kernel's name is letters, digits, - and _".into(),
            ));
        }
        let spec = match k.get_ref() {
            KernelRaw::Given(choice) => {
                let choice = if super::local::is_path(choice) || choice.contains('/') {
                    path_from(choice)
                } else {
                    choice.clone()
                };
                if super::local::is_path(&choice) {
                    if !Path::new(&choice).is_file() {
                        return Err(at(k.span(), &field, format!("{choice}: no such file")));
                    }
                } else {
                    crate::debian::kernel::package_for(&choice)
                        .map_err(|e| at(k.span(), &field, e.to_string()))?;
                }
                KernelSpec::Given(choice)
            }
            KernelRaw::Build(b) => {
                if let Some(m) = &b.kasan
                    && !["sync", "async", "asymm"].contains(&m.as_str())
                {
                    return Err(at(
                        k.span(),
                        &format!("{field}.kasan"),
                        format!("{m:?}: sync, async or asymm"),
                    ));
                }
                let source = b.source.clone().unwrap_or_else(|| "6.12".into());
                crate::kernel_build::source::package_for(&source)
                    .map_err(|e| at(k.span(), &format!("{field}.source"), e.to_string()))?;
                let patches: Vec<PathBuf> = b
                    .patches
                    .iter()
                    .map(|p| PathBuf::from(path_from(p)))
                    .collect();
                for p in &patches {
                    crate::kernel_build::source::check_patch(p)
                        .map_err(|e| at(k.span(), &format!("{field}.patches"), format!("{e:#}")))?;
                }
                KernelSpec::Build(crate::kernel_build::Args {
                    source,
                    tree: None,
                    kasan: b.kasan.clone(),
                    patches,
                    configs: b
                        .config
                        .iter()
                        .map(|p| PathBuf::from(path_from(p)))
                        .collect(),
                    jobs: None,
                })
            }
        };
        kernels.insert(name.clone(), spec);
    }
    if raw.linux.is_empty() {
        bail!("{file}: no [[linux]]: a Linux scenario needs at least one");
    }
    let mut runs: Vec<LinuxRun> = Vec::new();
    for (i, r) in raw.linux.iter().enumerate() {
        let r = r.get_ref();
        let f = |k: &str| format!("linux[{i}].{k}");
        let name = r.name.get_ref().clone();
        if !is_safe_name(&name) || runs.iter().any(|o| o.name == name) {
            return Err(at(
                r.name.span(),
                &f("name"),
                format!("{name:?}: letters, digits, - and _, one name per [[linux]]"),
            ));
        }
        let n_kernels = r.kernels.get_ref().len();
        if !(1..=MAX_KERNELS).contains(&n_kernels) {
            return Err(at(
                r.kernels.span(),
                &f("kernels"),
                format!("{n_kernels} kernels: 1 to {MAX_KERNELS}"),
            ));
        }
        for (j, k) in r.kernels.get_ref().iter().enumerate() {
            if !kernels.contains_key(k) {
                return Err(at(
                    r.kernels.span(),
                    &f("kernels"),
                    format!("{k:?} is not in [kernels]"),
                ));
            }
            if r.kernels.get_ref()[..j].contains(k) {
                return Err(at(
                    r.kernels.span(),
                    &f("kernels"),
                    format!("{k:?} twice (repeat = N boots a kernel more than once)"),
                ));
            }
        }
        let n_workloads = r.workloads.get_ref().len();
        if !(1..=MAX_WORKLOADS).contains(&n_workloads) {
            return Err(at(
                r.workloads.span(),
                &f("workloads"),
                format!("{n_workloads} workloads: 1 to {MAX_WORKLOADS}"),
            ));
        }
        for (j, w) in r.workloads.get_ref().iter().enumerate() {
            if let Err(problem) = check_workload(w) {
                return Err(at(r.workloads.span(), &f("workloads"), problem));
            }
            if r.workloads.get_ref()[..j].contains(w) {
                return Err(at(
                    r.workloads.span(),
                    &f("workloads"),
                    format!("{w:?} twice: each workload is one window per mode"),
                ));
            }
        }
        let tcf0 = match &r.tcf0 {
            Some(t) => {
                for m in t.get_ref() {
                    if !["none", "sync", "async", "asymm"].contains(&m.as_str()) {
                        return Err(at(
                            t.span(),
                            &f("tcf0"),
                            format!("{m:?}: none, sync, async or asymm"),
                        ));
                    }
                }
                if t.get_ref().is_empty() {
                    return Err(at(t.span(), &f("tcf0"), "at least one mode".into()));
                }
                for (j, m) in t.get_ref().iter().enumerate() {
                    if t.get_ref()[..j].contains(m) {
                        return Err(at(t.span(), &f("tcf0"), format!("{m:?} twice")));
                    }
                }
                t.get_ref().clone()
            }
            None => vec!["sync".into()],
        };
        let repeat = match &r.repeat {
            Some(n) if !(1..=20).contains(n.get_ref()) => {
                return Err(at(
                    n.span(),
                    &f("repeat"),
                    format!("{}: 1 to 20", n.get_ref()),
                ));
            }
            Some(n) => *n.get_ref(),
            None => 1,
        };
        runs.push(LinuxRun {
            name,
            kernels: r.kernels.get_ref().clone(),
            workloads: r.workloads.get_ref().clone(),
            tcf0,
            append: r.append.clone(),
            repeat,
        });
    }
    let mut expectations = Vec::new();
    for (i, e) in raw.expect.iter().enumerate() {
        let span = e.span();
        let e = e.get_ref();
        let f = |k: &str| format!("expect[{i}].{k}");
        let run = match &e.linux {
            Some(n) => runs
                .iter()
                .find(|r| r.name == *n.get_ref())
                .ok_or_else(|| {
                    at(
                        n.span(),
                        &f("linux"),
                        format!("no [[linux]] named {:?}", n.get_ref()),
                    )
                })?,
            None => &runs[0],
        };
        let workload = match &e.workload {
            Some(w) if !run.workloads.contains(w.get_ref()) => {
                return Err(at(
                    w.span(),
                    &f("workload"),
                    format!("{:?} is not among {}'s workloads", w.get_ref(), run.name),
                ));
            }
            Some(w) => w.get_ref().clone(),
            None => run.workloads[0].clone(),
        };
        let tcf0 = match &e.tcf0 {
            Some(t) if !run.tcf0.contains(t.get_ref()) => {
                return Err(at(
                    t.span(),
                    &f("tcf0"),
                    format!("{:?} is not among {}'s modes", t.get_ref(), run.name),
                ));
            }
            Some(t) => t.get_ref().clone(),
            None => run.tcf0[0].clone(),
        };
        let counter = e.counter.get_ref().clone();
        if !is_known_counter(&counter) {
            return Err(at(
                e.counter.span(),
                &f("counter"),
                format!(
                    "{counter:?}: not a counter name of report.json (e.g. mem_access_checked_rd:k, tfsr_reads, granules_tagged)"
                ),
            ));
        }
        let kernel_of = |k: &Option<Spanned<String>>, field: &str| -> Result<Option<String>> {
            match k {
                Some(k) if !run.kernels.contains(k.get_ref()) => Err(at(
                    k.span(),
                    &f(field),
                    format!("{:?} is not among {}'s kernels", k.get_ref(), run.name),
                )),
                Some(k) => Ok(Some(k.get_ref().clone())),
                None => Ok(None),
            }
        };
        let (from, to, one) = (
            kernel_of(&e.from, "from")?,
            kernel_of(&e.to, "to")?,
            kernel_of(&e.kernel, "kernel")?,
        );
        // The built-in scenarios' check: NaN or an infinity would hold always, or never.
        let percent = |p: &Option<Spanned<f64>>, key: &str| -> Result<Option<f64>> {
            p.as_ref()
                .map(|p| check_percent(*p.get_ref()).map_err(|e| at(p.span(), &f(key), e)))
                .transpose()
        };
        let rules: Vec<Rule> = [
            percent(&e.drop_at_least, "drop_at_least")?.map(Rule::DropAtLeast),
            percent(&e.rise_at_most, "rise_at_most")?.map(Rule::RiseAtMost),
            e.fewer_by_at_least.map(Rule::FewerByAtLeast),
            e.equal.filter(|b| *b).map(|_| Rule::Equal),
            e.at_least.map(Rule::AtLeast),
            e.at_most.map(Rule::AtMost),
        ]
        .into_iter()
        .flatten()
        .collect();
        let [rule] = rules[..] else {
            return Err(at(span, &format!("expect[{i}]"), "give exactly one rule: drop_at_least, rise_at_most, fewer_by_at_least, equal (with from and to), or at_least, at_most (with kernel)".into()));
        };
        let absolute = matches!(rule, Rule::AtLeast(_) | Rule::AtMost(_));
        let kernels = match (absolute, from, to, one) {
            (true, None, None, Some(k)) => (k.clone(), k),
            (false, Some(a), Some(b), None) => (a, b),
            _ => {
                return Err(at(
                    span,
                    &format!("expect[{i}]"),
                    if absolute {
                        "at_least and at_most judge one kernel: give kernel, not from and to".into()
                    } else {
                        "this rule compares two kernels: give from and to, not kernel".into()
                    },
                ));
            }
        };
        expectations.push(Expect {
            linux: run.name.clone(),
            workload,
            tcf0,
            counter,
            kernels,
            rule,
        });
    }
    let name = match raw.name {
        Some(n) if !is_safe_name(n.get_ref()) => {
            return Err(at(
                n.span(),
                "name",
                format!("{:?}: letters, digits, - and _, at most 64", n.get_ref()),
            ));
        }
        Some(n) => n.into_inner(),
        None => safe_stem(stem),
    };
    Ok(LinuxScenario {
        name,
        kernels,
        runs,
        expectations,
    })
}

/// A `[[linux]]` workload: a named workload and at most as many numbers as it takes (its
/// defaults' count), each 1 to [`MAX_COUNT`].
fn check_workload(w: &str) -> std::result::Result<(), String> {
    let mut words = w.split_whitespace();
    let name = words.next().unwrap_or_default();
    let names = || {
        super::NAMED_WORKLOADS
            .iter()
            .map(|(n, _)| *n)
            .collect::<Vec<_>>()
            .join(", ")
    };
    let Some((_, defaults)) = super::NAMED_WORKLOADS.iter().find(|(n, _)| *n == name) else {
        return Err(format!(
            "{w:?}: a named workload with numeric arguments ({})",
            names()
        ));
    };
    let numbers: Vec<&str> = words.collect();
    let takes = defaults.split_whitespace().count();
    if numbers.len() > takes {
        return Err(format!(
            "{w:?}: {name} takes {takes} number{} ({})",
            if takes == 1 { "" } else { "s" },
            if takes == 0 {
                "none".to_string()
            } else {
                format!("default {defaults}")
            }
        ));
    }
    for n in numbers {
        let ok = n.bytes().all(|b| b.is_ascii_digit())
            && n.parse::<u64>().is_ok_and(|v| (1..=MAX_COUNT).contains(&v));
        if !ok {
            return Err(format!(
                "{w:?}: {n}: a workload's numbers are whole numbers, 1 to {MAX_COUNT}"
            ));
        }
    }
    Ok(())
}

/// A TOML error of the file, with its line and the field it is in (`linux[0].repeat`), and
/// for a value of the wrong type what the field takes.
fn toml_error(file: &str, text: &str, e: &toml::de::Error) -> anyhow::Error {
    let message = e.message().trim_end();
    let Some(span) = e.span() else {
        return anyhow::anyhow!("{file}: {message}");
    };
    let line = line_of(text, span.start);
    match field_path(text, span.start) {
        Some((field, key)) => {
            let takes = match takes(&field, &key) {
                Some(t) if message.starts_with("invalid") => format!("; {field} takes {t}"),
                _ => String::new(),
            };
            anyhow::anyhow!("{file}:{line}: {field}: {message}{takes}")
        }
        None => anyhow::anyhow!("{file}:{line}: {message}"),
    }
}

/// What a field of a Linux scenario takes, for the messages of type errors.
fn takes(field: &str, key: &str) -> Option<&'static str> {
    let table = field.split(['[', '.']).next().unwrap_or_default();
    Some(match (table, key) {
        (_, "version") if field == "version" => "the number 1",
        (_, "name") if field == "name" => "a string of letters, digits, - and _",
        (_, "description") if field == "description" => "a string",
        ("linux", "name") => "a string of letters, digits, - and _",
        ("linux", "kernels") => "a list of names from [kernels]",
        ("linux", "workloads") => "a list of strings, each a named workload and its numbers",
        ("linux", "tcf0") => "a list of modes: none, sync, async, asymm",
        ("linux", "append") => "a list of strings, one kernel command-line word each",
        ("linux", "repeat") => "a whole number, 1 to 20",
        ("expect", "drop_at_least" | "rise_at_most") => "a number, 0 to 100000 (per cent)",
        ("expect", "fewer_by_at_least" | "at_least" | "at_most") => "a whole number, at least 0",
        ("expect", "equal") => "true",
        ("expect", _) => "a string",
        ("kernels", "source" | "kasan") => "a string",
        ("kernels", "patches" | "config") => "a list of file paths",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
version = 1
[kernels]
a = "6.12"
b = { kasan = "sync" }
[[linux]]
name = "ab"
kernels = ["a", "b"]
workloads = ["getpid 1000", "fork"]
tcf0 = ["none", "sync"]
[[expect]]
workload = "fork"
tcf0 = "sync"
counter = "granules_tagged"
from = "a"
to = "b"
fewer_by_at_least = 10
[[expect]]
counter = "tfsr_reads"
kernel = "b"
at_most = 0
"#;

    #[test]
    fn a_scenario_reads_with_its_windows_in_order() {
        let s = parse("t.toml", "t", GOOD, Path::new("/x")).unwrap();
        assert_eq!(s.name, "t");
        let r = &s.runs[0];
        assert_eq!(r.window("getpid 1000", "none"), Some(1));
        assert_eq!(r.window("fork", "sync"), Some(4));
        assert_eq!(
            r.line(),
            "mtex-work --tcf0 none --window 1 getpid 1000 && \
             mtex-work --tcf0 sync --window 2 getpid 1000 && \
             mtex-work --tcf0 none --window 3 fork 20 && \
             mtex-work --tcf0 sync --window 4 fork 20"
        );
        assert_eq!(s.expectations[0].rule, Rule::FewerByAtLeast(10));
        assert_eq!(s.expectations[1].kernels, ("b".into(), "b".into()));
        assert_eq!(s.expectations[1].workload, "getpid 1000");
        assert!(
            matches!(s.kernels["b"], KernelSpec::Build(ref a) if a.kasan.as_deref() == Some("sync"))
        );
    }

    /// Each text is refused with an error that says `want`.
    fn assert_refused(cases: &[(String, &str)]) {
        for (text, want) in cases {
            let e = format!(
                "{:#}",
                parse("t.toml", "t", text, Path::new("/x")).unwrap_err()
            );
            assert!(e.contains(want), "{e}\n  wanted {want}");
        }
    }

    #[test]
    fn mistakes_are_named_with_their_line_before_anything_runs() {
        let cases = [
            (
                GOOD.replace("kernels = [\"a\", \"b\"]", "kernels = [\"a\", \"c\"]"),
                "t.toml:8: linux[0].kernels: \"c\" is not in [kernels]",
            ),
            (
                GOOD.replace("counter = \"tfsr_reads\"", "counter = \"tfsr\""),
                "expect[1].counter: \"tfsr\"",
            ),
            (
                GOOD.replace("at_most = 0", "at_most = 0\nat_least = 1"),
                "expect[1]: give exactly one rule",
            ),
            (
                GOOD.replace("kernel = \"b\"", "from = \"b\"\nto = \"a\""),
                "at_least and at_most judge one kernel",
            ),
            (
                GOOD.replace("\"fork\"]", "\"fork; rm\"]"),
                "linux[0].workloads: \"fork; rm\"",
            ),
            (
                GOOD.replace("kasan = \"sync\"", "kasan = \"fast\""),
                "kernels.b.kasan: \"fast\"",
            ),
            (
                GOOD.replace("a = \"6.12\"", "a = \"6.12; x\""),
                "kernels.a: ",
            ),
            (
                GOOD.replace("tcf0 = \"sync\"", "tcf0 = \"asymm\""),
                "expect[0].tcf0: \"asymm\" is not among ab's modes",
            ),
        ];
        assert_refused(&cases);
    }

    /// Each value that would pass vacuously, never hold, or run without end is refused by the
    /// check of the whole file, and every error names the file and the field.
    #[test]
    fn bounds_and_types_are_checked_naming_the_field() {
        let many: Vec<String> = (0..10_000)
            .map(|i| format!("\"getpid {}\"", i + 1))
            .collect();
        let cases = [
            (
                GOOD.replace("fewer_by_at_least = 10", "drop_at_least = -inf"),
                "t.toml:17: expect[0].drop_at_least: -inf: expected 0 to 100000 (per cent)",
            ),
            (
                GOOD.replace("fewer_by_at_least = 10", "rise_at_most = inf"),
                "t.toml:17: expect[0].rise_at_most: inf: expected 0 to 100000",
            ),
            (
                GOOD.replace("fewer_by_at_least = 10", "drop_at_least = nan"),
                "expect[0].drop_at_least: NaN: expected 0 to 100000",
            ),
            (
                GOOD.replace(
                    "\"getpid 1000\"",
                    "\"getpid 10000000000000000000000000000\"",
                ),
                "t.toml:9: linux[0].workloads: \"getpid 10000000000000000000000000000\": \
                 10000000000000000000000000000: a workload's numbers are whole numbers, 1 to \
                 10000000",
            ),
            (
                GOOD.replace("\"getpid 1000\"", "\"getpid 0\""),
                "1 to 10000000",
            ),
            (
                GOOD.replace("\"getpid 1000\"", "\"getpid 1 2\""),
                "\"getpid 1 2\": getpid takes 1 number (default 1000)",
            ),
            (
                GOOD.replace("\"getpid 1000\", \"fork\"", &many.join(", ")),
                "t.toml:9: linux[0].workloads: 10000 workloads: 1 to 32",
            ),
            (
                GOOD.replace("\"fork\"]", "\"getpid 1000\"]"),
                "linux[0].workloads: \"getpid 1000\" twice",
            ),
            (
                GOOD.replace("a = \"6.12\"", "stock = 612"),
                "t.toml:4: kernels.stock: invalid type: integer `612`, expected a string (what \
                 `mtex linux --kernel` takes) or a table",
            ),
            (
                GOOD.replace("kasan = \"sync\"", "kasan = \"sync\", patchs = []"),
                "t.toml:5: kernels.b: unknown field `patchs`, expected one of",
            ),
            (
                GOOD.replace("tcf0 = [\"none\", \"sync\"]", "repeat = -1"),
                "t.toml:10: linux[0].repeat: invalid value: integer `-1`, expected u32; \
                 linux[0].repeat takes a whole number, 1 to 20",
            ),
            (
                GOOD.replace("[[expect]]\nworkload", "[[expect]]\npatchs = 1\nworkload"),
                "t.toml:12: expect[0].patchs: unknown field `patchs`",
            ),
        ];
        assert_refused(&cases);
    }

    #[test]
    fn the_patch_scenario_is_within_every_bound() {
        let file = crate::images::workspace_root().join("scripts/scenarios/kernel-patches.toml");
        let s = load(&file).unwrap();
        assert!(!s.runs.is_empty() && !s.expectations.is_empty());
    }

    #[test]
    fn rules_judge_what_they_say() {
        let mut e = parse("t.toml", "t", GOOD, Path::new("/x"))
            .unwrap()
            .expectations[0]
            .clone();
        assert!(e.judge(100.0, 90.0).0);
        assert!(!e.judge(100.0, 91.0).0);
        e.rule = Rule::DropAtLeast(95.0);
        assert!(e.judge(68168.0, 800.0).0);
        assert!(!e.judge(800.0, 800.0).0);
        e.rule = Rule::AtMost(0);
        assert!(e.judge(0.0, 0.0).0 && !e.judge(1.0, 1.0).0);
    }
}
