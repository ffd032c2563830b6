//! An `[[expect]]` table checked against the runs it names: the runs and the one phase of
//! each side must exist, the counter must be one report.json holds (and one an untraced run
//! has, for such a run), and exactly one rule must be given.

use super::locate::Ctx;
use super::{Expect, ExpectRaw, Rule, RunSpec, ScenarioError};
use toml::Spanned;

pub(super) fn expect(
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
    if let Some(run) = untraced.filter(|_| !untraced_has(&counter)) {
        return Err(cx.at(
            raw.counter.span(),
            &at("counter"),
            format!(
                "{counter:?} is counted by the trace, and run {run:?} has trace = false \
                 (untraced runs give {})",
                untraced_counters()
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
    .map(|(p, r)| match check_percent(*p.get_ref()) {
        Ok(_) => Ok(r),
        Err(problem) => {
            let key = match r {
                Rule::DropAtLeast(_) => "drop_at_least",
                _ => "rise_at_most",
            };
            Err(cx.at(p.span(), &at(key), problem))
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

/// A rule's per cent (`drop_at_least`, `rise_at_most`): 0 to 100000. NaN and the infinities
/// are outside it — a drop of at least -inf% would hold whatever was measured, and NaN never.
pub fn check_percent(p: f64) -> Result<f64, String> {
    if (0.0..=100_000.0).contains(&p) {
        Ok(p)
    } else {
        Err(format!("{p}: expected 0 to 100000 (per cent)"))
    }
}

/// Whether an untraced phase has counter `name` (see `results::counters`): the phase's
/// statistics (exits, the PMU's instructions...) and its untraced passes (every `untraced.`
/// counter), as the counters' table says where each comes from.
fn untraced_has(name: &str) -> bool {
    use mtex_abi::counters::Source;
    name.starts_with("untraced.")
        || mtex_abi::counters::lookup(name).is_some_and(|c| matches!(c.source, Source::Stats(_)))
}

/// The counters an untraced phase has, by name, for the error that names them.
fn untraced_counters() -> String {
    let stats = mtex_abi::counters::all()
        .filter(|c| untraced_has(c.name) && !c.name.starts_with("untraced."))
        .map(|c| c.name);
    let mut names: Vec<&str> = stats.collect();
    names.push("untraced.* (instructions, cycles, the MTE events, per EL)");
    names.join(", ")
}

/// Whether `name` is a counter report.json can hold: one that `mtex_abi::counters` defines
/// (the trace's, the hypervisor's, the step engine's), or a PMU event's per EL (`pmu.` for a
/// traced phase's, `untraced.` for the untraced passes': a named event or `raw.0xNNNN`, then
/// `:k` or `:u`).
pub fn is_known_counter(name: &str) -> bool {
    mtex_abi::counters::lookup(name).is_some()
}
