//! The `[kernels]` table and a `[[run]]` that boots them: each kernel checked as `mtex linux
//! --kernel` or `mtex kernel build` would take it, and each run's kernels, workloads and TCF0
//! modes checked into the windows /init will open.

use super::locate::Ctx;
use super::{RunRaw, ScenarioError};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use toml::Spanned;

/// At most this many runs that boot kernels, kernels in one, and workloads in one (each runs
/// in every mode of its `tcf0`, a window each).
pub const MAX_RUNS: usize = 16;
pub const MAX_KERNELS: usize = 8;
pub const MAX_WORKLOADS: usize = 32;
/// A named workload's numbers (iterations, threads, requests…): each 1 to this.
pub const MAX_COUNT: u64 = 10_000_000;
/// Boots of each kernel of a run (Linux boots take tens of seconds each).
pub const MAX_REPEAT: u32 = 20;

/// The keys a run that boots kernels takes; the others are the built-in guest's.
pub(super) const KERNEL_RUN_KEYS: &str = "name, kernels, cpus, workloads, tcf0, commands, setup, \
     packages, suite, env, tagged_heap, sample, sample_seed, append, repeat";
/// What a run's workloads, commands and set-up write for its CPU count.
pub const CPUS_PLACEHOLDER: &str = "{cpus}";
/// Commands in one run (each a window).
pub const MAX_COMMANDS: usize = 16;

/// A kernel: a string (what `mtex linux --kernel` takes) or a table (what `mtex kernel
/// build` takes). Read by hand rather than as an untagged enum, whose one error ("did not
/// match any variant") would hide which key was wrong.
#[derive(Debug)]
pub(super) enum KernelRaw {
    Given(String),
    Build(BuildRaw),
}

impl<'de> serde::Deserialize<'de> for KernelRaw {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Kernel;
        impl<'de> serde::de::Visitor<'de> for Kernel {
            type Value = KernelRaw;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str(
                    "a string (what `mtex linux --kernel` takes) or a table (what `mtex kernel \
                     build` takes: source, kasan, patches, config, debian_config)",
                )
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<KernelRaw, E> {
                Ok(KernelRaw::Given(s.to_string()))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<KernelRaw, A::Error> {
                use serde::Deserialize;
                BuildRaw::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    .map(KernelRaw::Build)
            }
        }
        d.deserialize_any(Kernel)
    }
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct BuildRaw {
    source: Option<String>,
    kasan: Option<String>,
    #[serde(default)]
    patches: Vec<String>,
    #[serde(default)]
    config: Vec<String>,
    #[serde(default)]
    debian_config: bool,
}

/// A kernel of the scenario: given as `--kernel` takes it, or built.
#[derive(Clone, Debug, PartialEq)]
pub enum KernelSpec {
    Given(String),
    Build(crate::kernel_build::Args),
}

/// A run that boots kernels: each kernel in turn (each `repeat` times), with the same
/// workloads, each workload in each TCF0 mode in a window of its own.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelRun {
    pub kernels: Vec<String>,
    pub workloads: Vec<String>,
    pub tcf0: Vec<String>,
    /// Commands measured as `mtex linux --run` measures them, each in a window of its own
    /// after the workloads'.
    pub commands: Vec<String>,
    /// Commands run before the first window, outside every window (`mtex linux --setup`).
    pub setup: Vec<String>,
    /// What `mtex linux`'s options of the same names take, for every boot of the run.
    pub packages: Vec<String>,
    pub suite: Option<String>,
    pub env: Vec<String>,
    pub tagged_heap: Option<crate::linux::tagged_heap::TaggedHeap>,
    pub sample: Option<String>,
    pub sample_seed: Option<u64>,
    /// More kernel command-line words.
    pub append: Vec<String>,
    /// The CPUs Linux boots on (`mtex linux --cpus`), where the run gives them.
    pub cpus: Option<u32>,
    /// A run given several CPU counts is one run of this kind for each: the name it was
    /// given, the same for all of them.
    pub series: Option<String>,
    /// The workloads and the commands as the file writes them (`{cpus}` kept).
    pub written_workloads: Vec<String>,
    pub written_commands: Vec<String>,
}

impl KernelRun {
    /// Each window as the file writes it (`{cpus}` kept), in the windows' order: each
    /// workload in each mode, then the commands.
    pub fn written(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .written_workloads
            .iter()
            .flat_map(|w| self.tcf0.iter().map(move |m| format!("{w}, TCF0 {m}")))
            .collect();
        out.extend(self.written_commands.iter().cloned());
        out
    }

    /// Whether `workload` is one of the run's commands rather than a named workload.
    pub fn is_command(&self, workload: &str) -> bool {
        self.commands.iter().any(|c| c == workload)
    }

    /// The window (1, 2, …) a workload runs in under a mode: workloads in order, each in
    /// every mode, then the commands (whose mode is their own: `mode` is not asked).
    pub fn window(&self, workload: &str, mode: &str) -> Option<usize> {
        if let Some(c) = self.commands.iter().position(|x| x == workload) {
            return Some(self.workloads.len() * self.tcf0.len() + c + 1);
        }
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
                    crate::linux::NAMED_WORKLOADS
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
        if !self.commands.is_empty() {
            let first = self.workloads.len() * self.tcf0.len() + 1;
            parts.push(crate::linux::run_line(&self.commands, first));
        }
        parts.join(" && ")
    }
}

/// The `[kernels]` table, each kernel checked; relative paths are taken from `base`.
pub(super) fn kernels(
    cx: &Ctx<'_>,
    table: &BTreeMap<String, Spanned<KernelRaw>>,
    base: &Path,
) -> Result<BTreeMap<String, KernelSpec>, ScenarioError> {
    let path_from = |p: &str| -> String {
        if Path::new(p).is_absolute() {
            p.to_string()
        } else {
            base.join(p).display().to_string()
        }
    };
    let mut kernels = BTreeMap::new();
    for (name, k) in table {
        let field = format!("kernels.{name}");
        if !super::is_safe_name(name) {
            return Err(cx.at(
                k.span(),
                &field,
                "a kernel's name is letters, digits, - and _",
            ));
        }
        let spec = match k.get_ref() {
            KernelRaw::Given(choice) => {
                let choice = if crate::linux::local::is_path(choice) || choice.contains('/') {
                    path_from(choice)
                } else {
                    choice.clone()
                };
                if crate::linux::local::is_path(&choice) {
                    if !Path::new(&choice).is_file() {
                        return Err(cx.at(k.span(), &field, format!("{choice}: no such file")));
                    }
                } else {
                    crate::debian::kernel::package_for(&choice)
                        .map_err(|e| cx.at(k.span(), &field, e))?;
                }
                KernelSpec::Given(choice)
            }
            KernelRaw::Build(b) => {
                if let Some(m) = &b.kasan
                    && !["sync", "async", "asymm"].contains(&m.as_str())
                {
                    return Err(cx.at(
                        k.span(),
                        &format!("{field}.kasan"),
                        format!("{m:?}: sync, async or asymm"),
                    ));
                }
                let source = b.source.clone().unwrap_or_else(|| "6.12".into());
                crate::kernel_build::source::package_for(&source)
                    .map_err(|e| cx.at(k.span(), &format!("{field}.source"), e))?;
                let patches: Vec<PathBuf> = b
                    .patches
                    .iter()
                    .map(|p| PathBuf::from(path_from(p)))
                    .collect();
                for p in &patches {
                    crate::kernel_build::source::check_patch(p).map_err(|e| {
                        cx.at(k.span(), &format!("{field}.patches"), format!("{e:#}"))
                    })?;
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
                    debian_config: b.debian_config,
                    jobs: None,
                })
            }
        };
        kernels.insert(name.clone(), spec);
    }
    Ok(kernels)
}

/// A `[[run]]` with `kernels`: the built-in guest's keys refused, the kernels named in
/// `[kernels]`, the workloads named ones, the modes TCF0's.
pub(super) fn kernel_run(
    cx: &Ctx<'_>,
    i: usize,
    r: &Spanned<RunRaw>,
    kernels: &BTreeMap<String, KernelSpec>,
    cpus: Option<u32>,
) -> Result<KernelRun, ScenarioError> {
    let at = |k: &str| format!("{}[{i}].{k}", cx.runs);
    let raw = r.get_ref();
    // `{cpus}` in a workload, command or set-up line is the run's CPU count (a thread per
    // CPU); without a count it would reach the guest as written.
    let fill = |s: &Spanned<String>, key: &str| -> Result<Spanned<String>, ScenarioError> {
        let text = s.get_ref();
        if !text.contains(CPUS_PLACEHOLDER) {
            return Ok(s.clone());
        }
        let Some(n) = cpus else {
            return Err(cx.at(
                s.span(),
                &at(key),
                format!("{text:?}: {CPUS_PLACEHOLDER} is the run's CPU count, and it gives none (cpus = ...)"),
            ));
        };
        Ok(Spanned::new(
            s.span(),
            text.replace(CPUS_PLACEHOLDER, &n.to_string()),
        ))
    };
    if let Some(key) = raw.guest_keys().first() {
        return Err(cx.at(
            cx.key_in(r.span(), key),
            &at(key),
            format!(
                "a run that boots kernels takes {KERNEL_RUN_KEYS} (its boot options are \
                 `mtex linux`'s)"
            ),
        ));
    }
    let listed = raw.kernels.as_ref().expect("a kernel run names kernels");
    let n_kernels = listed.get_ref().len();
    if !(1..=MAX_KERNELS).contains(&n_kernels) {
        return Err(cx.at(
            listed.span(),
            &at("kernels"),
            format!("{n_kernels} kernels: 1 to {MAX_KERNELS}"),
        ));
    }
    for (j, k) in listed.get_ref().iter().enumerate() {
        if !kernels.contains_key(k) {
            return Err(cx.at(
                listed.span(),
                &at("kernels"),
                format!("{k:?} is not in [kernels]"),
            ));
        }
        if listed.get_ref()[..j].contains(k) {
            return Err(cx.at(
                listed.span(),
                &at("kernels"),
                format!("{k:?} twice (repeat = N boots a kernel more than once)"),
            ));
        }
    }
    let commands = commands(cx, i, r, &fill)?;
    let no_workloads = Vec::new();
    let filled: Option<Vec<Spanned<String>>> = raw
        .workloads
        .as_ref()
        .map(|ws| ws.iter().map(|w| fill(w, "workloads")).collect())
        .transpose()?;
    let ws = match &filled {
        Some(ws) => ws,
        None if !commands.is_empty() => &no_workloads,
        None => {
            return Err(cx.at(
                r.span(),
                &at("workloads"),
                "a run that boots kernels names its workloads, or its commands",
            ));
        }
    };
    let workloads: Vec<String> = ws.iter().map(|w| w.get_ref().clone()).collect();
    let span = ws.first().map_or(r.span(), |w| w.span());
    let least = if commands.is_empty() { 1 } else { 0 };
    if !(least..=MAX_WORKLOADS).contains(&workloads.len()) {
        return Err(cx.at(
            span,
            &at("workloads"),
            format!("{} workloads: 1 to {MAX_WORKLOADS}", workloads.len()),
        ));
    }
    for (j, w) in ws.iter().enumerate() {
        if let Err(problem) = check_workload(w.get_ref()) {
            return Err(cx.at(w.span(), &at("workloads"), problem));
        }
        if workloads[..j].contains(w.get_ref()) {
            return Err(cx.at(
                w.span(),
                &at("workloads"),
                format!(
                    "{:?} twice: each workload is one window per mode",
                    w.get_ref()
                ),
            ));
        }
    }
    let tcf0 = match &raw.tcf0 {
        Some(t) => {
            let modes = super::modes(cx, t, &at("tcf0"), true)?;
            if modes.is_empty() {
                return Err(cx.at(t.span(), &at("tcf0"), "at least one mode"));
            }
            for (j, m) in modes.iter().enumerate() {
                if !["none", "sync", "async", "asymm"].contains(&m.as_str()) {
                    return Err(cx.at(
                        t.span(),
                        &at("tcf0"),
                        format!("{m:?}: none, sync, async or asymm"),
                    ));
                }
                if modes[..j].contains(m) {
                    return Err(cx.at(t.span(), &at("tcf0"), format!("{m:?} twice")));
                }
            }
            modes
        }
        None => vec!["sync".into()],
    };
    let packages = match &raw.packages {
        Some(p) => {
            for name in p.get_ref() {
                crate::debian::packages::check_name(name)
                    .map_err(|e| cx.at(p.span(), &at("packages"), e))?;
            }
            p.get_ref().clone()
        }
        None => Vec::new(),
    };
    let suite = match &raw.suite {
        Some(s) if !["bookworm", "trixie", "sid"].contains(&s.get_ref().as_str()) => {
            return Err(cx.at(
                s.span(),
                &at("suite"),
                format!("{:?}: bookworm, trixie or sid", s.get_ref()),
            ));
        }
        Some(s) if packages.is_empty() => {
            return Err(cx.at(s.span(), &at("suite"), "a suite is for the run's packages"));
        }
        s => s.as_ref().map(|s| s.get_ref().clone()),
    };
    let env = match &raw.env {
        Some(e) => {
            for v in e.get_ref() {
                crate::linux::guest_files::parse_env(v)
                    .map_err(|err| cx.at(e.span(), &at("env"), format!("{err:#}")))?;
            }
            e.get_ref().clone()
        }
        None => Vec::new(),
    };
    let tagged_heap = match &raw.tagged_heap {
        Some(h) => Some(match h.get_ref().as_str() {
            "sync" => crate::linux::tagged_heap::TaggedHeap::Sync,
            "async" => crate::linux::tagged_heap::TaggedHeap::Async,
            other => {
                return Err(cx.at(
                    h.span(),
                    &at("tagged_heap"),
                    format!("{other:?}: sync or async"),
                ));
            }
        }),
        None => None,
    };
    crate::linux::tagged_heap::environment(&env, tagged_heap).map_err(|e| {
        cx.at(
            raw.env.as_ref().map_or(r.span(), |e| e.span()),
            &at("env"),
            format!("{e:#}"),
        )
    })?;
    if let Some(sample) = &raw.sample {
        mtex_abi::options::SampleOptions::parse(&format!("mtex.sample={}", sample.get_ref()))
            .map_err(|e| cx.at(sample.span(), &at("sample"), e.problem))?;
    } else if let Some(seed) = &raw.sample_seed {
        return Err(cx.at(
            seed.span(),
            &at("sample_seed"),
            "a seed is for a sampled run",
        ));
    }
    let setup = setup(cx, i, r, &fill)?;
    Ok(KernelRun {
        kernels: listed.get_ref().clone(),
        workloads,
        tcf0,
        commands,
        setup,
        packages,
        suite,
        env,
        tagged_heap,
        sample: raw.sample.as_ref().map(|s| s.get_ref().clone()),
        sample_seed: raw.sample_seed.as_ref().map(|s| *s.get_ref()),
        append: raw.append.clone().unwrap_or_default(),
        cpus,
        series: None,
        written_workloads: written(&raw.workloads),
        written_commands: written(&raw.commands),
    })
}

/// Lines as the file writes them.
fn written(lines: &Option<Vec<Spanned<String>>>) -> Vec<String> {
    lines
        .iter()
        .flatten()
        .map(|l| l.get_ref().clone())
        .collect()
}

/// A run's `commands`: each one line, none twice, none a named workload's spelling.
type Fill<'a> = dyn Fn(&Spanned<String>, &str) -> Result<Spanned<String>, ScenarioError> + 'a;

fn commands(
    cx: &Ctx<'_>,
    i: usize,
    r: &Spanned<RunRaw>,
    fill: &Fill<'_>,
) -> Result<Vec<String>, ScenarioError> {
    let at = format!("{}[{i}].commands", cx.runs);
    let Some(cs) = &r.get_ref().commands else {
        return Ok(Vec::new());
    };
    if !(1..=MAX_COMMANDS).contains(&cs.len()) {
        return Err(cx.at(
            r.span(),
            &at,
            format!("{} commands: 1 to {MAX_COMMANDS}", cs.len()),
        ));
    }
    let mut out: Vec<String> = Vec::new();
    for c in cs {
        let c = &fill(c, "commands")?;
        let line = one_line(cx, c, &at)?;
        if out.contains(line) {
            return Err(cx.at(c.span(), &at, format!("{line:?} twice: each is one window")));
        }
        if r.get_ref()
            .workloads
            .as_ref()
            .is_some_and(|ws| ws.iter().any(|w| w.get_ref() == line))
        {
            return Err(cx.at(
                c.span(),
                &at,
                format!("{line:?} is also a workload: an expectation could not tell them apart"),
            ));
        }
        out.push(line.clone());
    }
    Ok(out)
}

/// A run's `setup`: each one line.
fn setup(
    cx: &Ctx<'_>,
    i: usize,
    r: &Spanned<RunRaw>,
    fill: &Fill<'_>,
) -> Result<Vec<String>, ScenarioError> {
    let at = format!("{}[{i}].setup", cx.runs);
    r.get_ref()
        .setup
        .iter()
        .flatten()
        .map(|c| one_line(cx, &fill(c, "setup")?, &at).cloned())
        .collect()
}

/// A command of `commands` or `setup`, refused unless it is one line.
fn one_line<'a>(
    cx: &Ctx<'_>,
    c: &'a Spanned<String>,
    at: &str,
) -> Result<&'a String, ScenarioError> {
    let line = c.get_ref();
    if !crate::linux::is_one_line(line) {
        return Err(cx.at(
            c.span(),
            at,
            format!("{line:?}: a command of one line (a program and its arguments)"),
        ));
    }
    Ok(line)
}

/// A workload of a run that boots kernels: a named workload and at most as many numbers as
/// it takes (its defaults' count), each 1 to [`MAX_COUNT`].
fn check_workload(w: &str) -> Result<(), String> {
    let named = &crate::linux::NAMED_WORKLOADS;
    let mut words = w.split_whitespace();
    let name = words.next().unwrap_or_default();
    let Some((_, defaults)) = named.iter().find(|(n, _)| *n == name) else {
        let names: Vec<&str> = named.iter().map(|(n, _)| *n).collect();
        return Err(format!(
            "{w:?}: a named workload with numeric arguments ({})",
            names.join(", ")
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
