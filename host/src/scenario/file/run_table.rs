//! A `[[run]]` table checked into the guest's command line: each field through the parser
//! the guest or hypervisor uses for its `mtex.*` option, then the whole line through the
//! guest's, so that what is accepted here is what boots.

use super::locate::Ctx;
use super::{Boots, GuestRun, RunRaw, RunSpec, ScenarioError};
use mtex_abi::scenario::{MAX_KERNEL_CPUS, Policy, Scenario};
use toml::Spanned;

const BACKENDS: &str = "both, trace or pmu";
/// Boots of one built-in run.
const MAX_REPEAT: u32 = 100;

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

/// A run's `cpus`: one CPU count, or a list of them (distinct, in the order given), each 1 to
/// [`MAX_KERNEL_CPUS`].
pub(super) fn cpu_counts(
    cx: &Ctx<'_>,
    v: &Spanned<toml::Value>,
    field: &str,
) -> Result<Vec<u32>, ScenarioError> {
    let takes = format!(
        "a whole number, 1 to {MAX_KERNEL_CPUS} (a list of them in a run that boots kernels)"
    );
    let one = |x: &toml::Value| -> Result<u32, String> {
        let Some(n) = x.as_integer() else {
            return Err(format!("{x}: {takes}"));
        };
        u32::try_from(n)
            .ok()
            .filter(|n| (1..=MAX_KERNEL_CPUS).contains(n))
            .ok_or_else(|| format!("{n}: expected 1 to {MAX_KERNEL_CPUS} CPUs"))
    };
    let counts = match v.get_ref() {
        toml::Value::Array(xs) if xs.is_empty() => Err(format!("an empty list: {takes}")),
        toml::Value::Array(xs) => xs.iter().map(one).collect::<Result<Vec<u32>, _>>(),
        x => one(x).map(|n| vec![n]),
    }
    .map_err(|problem| cx.at(v.span(), field, problem))?;
    if let Some((_, n)) = counts
        .iter()
        .enumerate()
        .find(|(j, n)| counts[..*j].contains(n))
    {
        return Err(cx.at(v.span(), field, format!("{n} twice")));
    }
    Ok(counts)
}

/// A run's name: the one given (letters, digits, `-` and `_`: it names files), or `run-N`.
pub(super) fn run_name(
    cx: &Ctx<'_>,
    i: usize,
    r: &Spanned<RunRaw>,
) -> Result<String, ScenarioError> {
    let raw = r.get_ref();
    let good = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    if let Some(n) = raw
        .name
        .as_ref()
        .filter(|n| n.get_ref().is_empty() || !n.get_ref().chars().all(good))
    {
        return Err(cx.at(
            n.span(),
            &format!("{}[{i}].name", cx.runs),
            format!(
                "{:?}: use letters, digits, - and _ (it names files)",
                n.get_ref()
            ),
        ));
    }
    Ok(raw
        .name
        .as_ref()
        .map_or(format!("run-{}", i + 1), |n| n.get_ref().clone()))
}

/// A run's repeats: 1 to `max`, 1 when not given.
pub(super) fn repeat(
    cx: &Ctx<'_>,
    i: usize,
    r: &Spanned<RunRaw>,
    max: u32,
) -> Result<u32, ScenarioError> {
    match &r.get_ref().repeat {
        Some(n) if !(1..=max).contains(n.get_ref()) => Err(cx.at(
            n.span(),
            &format!("{}[{i}].repeat", cx.runs),
            format!("{}: expected 1 to {max}", n.get_ref()),
        )),
        Some(n) => Ok(*n.get_ref()),
        None => Ok(1),
    }
}

/// A run of the built-in guest, checked into its command line.
pub(super) fn run_spec(
    cx: &Ctx<'_>,
    i: usize,
    r: &Spanned<RunRaw>,
) -> Result<RunSpec, ScenarioError> {
    let at = |field: &str| format!("{}[{i}].{field}", cx.runs);
    let raw = r.get_ref();
    let name = run_name(cx, i, r)?;
    if let Some(key) = raw.kernel_keys().first() {
        return Err(cx.at(
            cx.key_in(r.span(), key),
            &at(key),
            "this key is for a run that boots kernels (`kernels = [...]`); the built-in \
             guest's options are its run's keys",
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
        let mode = super::modes(cx, t, &at("tcf0"), false)?.remove(0);
        Scenario::parse(&format!("mtex.tcf0={mode}"))
            .map_err(|e| cx.at(t.span(), &at("tcf0"), format!("{mode:?}: {}", e.problem)))?;
        cmdline.push(format!("mtex.tcf0={mode}"));
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
    let cpus = match &raw.cpus {
        Some(v) => match cpu_counts(cx, v, &at("cpus"))?[..] {
            [n] => Some(n),
            _ => {
                return Err(cx.at(
                    v.span(),
                    &at("cpus"),
                    "a run of the built-in guest boots one CPU count: a list is for a run \
                     that boots kernels",
                ));
            }
        },
        None => None,
    };
    if let Some(n) = cpus {
        // Its combinations with hz and backend are the whole line's to check, below.
        cmdline.push(format!("mtex.cpus={n}"));
    }
    let repeat = repeat(cx, i, r, MAX_REPEAT)?;
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
    if let Some(sample) = &raw.sample {
        let mut option = format!("mtex.sample={}", sample.get_ref());
        if let Some(seed) = &raw.sample_seed {
            option.push_str(&format!(" mtex.sample_seed={}", seed.get_ref()));
        }
        mtex_abi::options::SampleOptions::parse(&option)
            .map_err(|e| cx.at(sample.span(), &at("sample"), e.problem))?;
        // Only traced phases are sampled, and only on one CPU (the EL2 timer is one CPU's).
        let why = if cpus.is_some_and(|n| n > 1) {
            Some("sampling runs on one CPU: leave cpus at 1")
        } else if raw.trace == Some(false)
            || raw.backend.as_ref().is_some_and(|b| b.get_ref() == "pmu")
        {
            Some("sampling samples traced phases: this run has none (backend = \"pmu\")")
        } else {
            None
        };
        if let Some(why) = why {
            return Err(cx.at(sample.span(), &at("sample"), why));
        }
        cmdline.push(option);
    } else if let Some(seed) = &raw.sample_seed {
        return Err(cx.at(
            seed.span(),
            &at("sample_seed"),
            "a seed for the random schedule of `sample`, which this run does not set",
        ));
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
    // Its problems name options; here they are said in the file's own keys.
    let scenario = Scenario::parse(&cmdline).map_err(|e| {
        let problem = e
            .problem
            .replace("mtex.hz=0", "hz = 0")
            .replace("mtex.trace=only", "backend = \"trace\"");
        cx.at(r.span(), &at(e.key), problem)
    })?;
    Ok(RunSpec {
        name,
        repeat,
        boots: Boots::Guest(GuestRun {
            cmdline,
            phases: phases_of(&scenario),
            traced: scenario.traced,
        }),
    })
}

/// The (workload, policy) phases a scenario reports, in CLI spellings and run order.
pub(super) fn phases_of(s: &Scenario) -> Vec<(String, String)> {
    s.runs()
        .map(|p| {
            (
                p.workload.name().to_string(),
                p.policy.name().as_str().to_string(),
            )
        })
        .collect()
}
