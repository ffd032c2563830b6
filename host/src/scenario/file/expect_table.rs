//! An `[[expect]]` table checked against the runs it names: the runs and the one phase of
//! each side must exist (a policy's phase of the workload in a built-in run, a kernel's
//! window of the workload and mode in a run that boots kernels), the counter must be one
//! report.json holds (and one an untraced run has, for such a run), and exactly one rule
//! must be given, with the sides it needs.

use super::locate::Ctx;
use super::{Expect, ExpectRaw, Rule, RunSpec, ScenarioError, Side};
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
    let pick = |which: &Option<Spanned<String>>, field: &str| -> Result<&RunSpec, ScenarioError> {
        match which.as_ref().or(default_run) {
            Some(n) => runs.iter().find(|r| r.name == *n.get_ref()).ok_or_else(|| {
                cx.at(
                    n.span(),
                    &at(field),
                    format!("no run named {:?}", n.get_ref()),
                )
            }),
            None => Ok(&runs[0]),
        }
    };
    let from_run = pick(&raw.from_run, "from_run")?;
    let to_run = pick(&raw.to_run, "to_run")?;
    let rule = rule(cx, i, e)?;
    let absolute = matches!(rule, Rule::AtLeast(_) | Rule::AtMost(_));
    // A side is a policy in a built-in run, a kernel in a run that boots kernels.
    let kernels = from_run.kernels().is_some();
    let (one_key, not_key, what) = if kernels {
        ("kernel", &raw.policy, "kernel")
    } else {
        ("policy", &raw.kernel, "policy")
    };
    if let Some(k) = not_key {
        let key = if kernels { "policy" } else { "kernel" };
        return Err(cx.at(
            k.span(),
            &at(key),
            format!(
                "run {:?} has no {key}s: name its side with {one_key}",
                from_run.name
            ),
        ));
    }
    let one = if kernels { &raw.kernel } else { &raw.policy };
    let (from, to) = match (absolute, &raw.from, &raw.to, one) {
        (true, None, None, Some(k)) => (k, k),
        (false, Some(a), Some(b), None) => (a, b),
        _ => {
            return Err(cx.at(
                e.span(),
                &format!("expect[{i}]"),
                if absolute {
                    format!(
                        "at_least and at_most judge one {what}: give {one_key}, not from and to"
                    )
                } else {
                    format!("this rule compares two {what}s: give from and to, not {one_key}")
                },
            ));
        }
    };
    let counter = raw.counter.get_ref().clone();
    if !is_known_counter(&counter) {
        return Err(cx.at(
            raw.counter.span(),
            &at("counter"),
            format!(
                "{counter:?}: not a counter name of report.json (e.g. \
                 mem_access_checked_rd:k, tcf_elided.mem_access_checked_wr:u, dsb, \
                 tfsr_reads, pmu.instructions:k; `mtex run --format csv` lists a run's)"
            ),
        ));
    }
    let sides = [(from_run, from, "from"), (to_run, to, "to")];
    let (workload, tcf0, sides) = if kernels {
        kernel_sides(cx, i, raw, sides, one_key, absolute)?
    } else {
        guest_sides(cx, i, raw, sides, one_key, absolute, &counter)?
    };
    let [from, to] = sides;
    let per_operation = match &raw.per_operation {
        Some(p) if *p.get_ref() && !kernels => {
            return Err(cx.at(
                p.span(),
                &at("per_operation"),
                "operations are counted in a run that boots kernels, from its programs' output",
            ));
        }
        p => p.as_ref().is_some_and(|p| *p.get_ref()),
    };
    Ok(Expect {
        counter,
        workload,
        tcf0,
        from,
        to,
        rule,
        per_operation,
    })
}

type Sides<'a> = [(&'a RunSpec, &'a Spanned<String>, &'static str); 2];

/// The sides in built-in runs: one phase of the workload under each policy.
fn guest_sides(
    cx: &Ctx<'_>,
    i: usize,
    raw: &ExpectRaw,
    sides: Sides<'_>,
    one_key: &str,
    absolute: bool,
    counter: &str,
) -> Result<(String, Option<String>, [Side; 2]), ScenarioError> {
    let at = |field: &str| format!("expect[{i}].{field}");
    if let Some(t) = &raw.tcf0 {
        return Err(cx.at(
            t.span(),
            &at("tcf0"),
            "a built-in run has one mode, its own tcf0: tcf0 here is for a run that boots \
             kernels",
        ));
    }
    let Some(workload) = &raw.workload else {
        return Err(cx.at(
            raw.counter.span(),
            &at("workload"),
            "name the workload whose phase it reads",
        ));
    };
    let workload = workload.get_ref().clone();
    let mut out = Vec::new();
    for (run, policy, field) in sides {
        let field = if absolute { one_key } else { field };
        let guest = run.guest().expect("one kind per file");
        let matching = guest
            .phases
            .iter()
            .filter(|(w, p)| *w == workload && p == policy.get_ref())
            .count();
        let problem = match matching {
            0 => format!(
                "run {:?} has no phase of {workload} under {:?}",
                run.name,
                policy.get_ref()
            ),
            1 => {
                // An untraced run has only the hypervisor's and the PMU's figures.
                if !guest.traced && !untraced_has(counter) {
                    return Err(cx.at(
                        raw.counter.span(),
                        &at("counter"),
                        format!(
                            "{counter:?} is counted by the trace, and run {:?} has trace = \
                             false (untraced runs give {})",
                            run.name,
                            untraced_counters()
                        ),
                    ));
                }
                out.push(Side {
                    run: run.name.clone(),
                    results_run: run.result_name(None),
                    of: policy.get_ref().clone(),
                    window: None,
                    boots: run.repeat,
                });
                continue;
            }
            // The same workload with other parameters: which phase is meant cannot be told.
            n => format!(
                "run {:?} has {n} phases of {workload} under {:?} (the workload with \
                 different parameters): an expectation needs exactly one",
                run.name,
                policy.get_ref()
            ),
        };
        return Err(cx.at(policy.span(), &at(field), problem));
    }
    let [a, b] = <[Side; 2]>::try_from(out).expect("two sides");
    Ok((workload, None, [a, b]))
}

/// The sides in runs that boot kernels: the window of the workload and mode (each the first
/// of the `from` run unless named) on each kernel.
fn kernel_sides(
    cx: &Ctx<'_>,
    i: usize,
    raw: &ExpectRaw,
    sides: Sides<'_>,
    one_key: &str,
    absolute: bool,
) -> Result<(String, Option<String>, [Side; 2]), ScenarioError> {
    let at = |field: &str| format!("expect[{i}].{field}");
    let first = sides[0].0.kernels().expect("one kind per file");
    let workload = raw.workload.as_ref().map_or_else(
        || {
            first
                .written_workloads
                .first()
                .or(first.written_commands.first())
                .expect("a run has workloads or commands")
                .clone()
        },
        |w| w.get_ref().clone(),
    );
    // `{cpus}` is each side's run's CPU count, as in its workloads and commands.
    let filled = |k: &super::KernelRun| match k.cpus {
        Some(n) => workload.replace(super::kernel_table::CPUS_PLACEHOLDER, &n.to_string()),
        None => workload.clone(),
    };
    // A command sets its own tag checking: it has no mode of the run's.
    let command = first.is_command(&filled(first));
    if command && let Some(t) = &raw.tcf0 {
        return Err(cx.at(
            t.span(),
            &at("tcf0"),
            format!("{workload:?} is a command: it runs once, with the tag checking it sets"),
        ));
    }
    let mode = raw
        .tcf0
        .as_ref()
        .map_or(first.tcf0[0].clone(), |t| t.get_ref().clone());
    let mut out = Vec::new();
    for (run, kernel, field) in sides {
        let field = if absolute { one_key } else { field };
        let k = run.kernels().expect("one kind per file");
        let workload = filled(k);
        if !k.workloads.contains(&workload) && !k.is_command(&workload) {
            let span = raw.workload.as_ref().map_or(kernel.span(), |w| w.span());
            return Err(cx.at(
                span,
                &at("workload"),
                format!(
                    "{workload:?} is not among {}'s workloads or commands",
                    run.name
                ),
            ));
        }
        if !command && !k.tcf0.contains(&mode) {
            let span = raw.tcf0.as_ref().map_or(kernel.span(), |t| t.span());
            return Err(cx.at(
                span,
                &at("tcf0"),
                format!("{mode:?} is not among {}'s modes", run.name),
            ));
        }
        if !k.kernels.contains(kernel.get_ref()) {
            return Err(cx.at(
                kernel.span(),
                &at(field),
                format!("{:?} is not among {}'s kernels", kernel.get_ref(), run.name),
            ));
        }
        out.push(Side {
            run: run.name.clone(),
            results_run: run.result_name(Some(kernel.get_ref())),
            of: kernel.get_ref().clone(),
            window: k.window(&workload, &mode),
            boots: run.repeat,
        });
    }
    let [a, b] = <[Side; 2]>::try_from(out).expect("two sides");
    Ok((workload, (!command).then_some(mode), [a, b]))
}

/// The one rule the table gives, its per cents in bounds.
fn rule(cx: &Ctx<'_>, i: usize, e: &Spanned<ExpectRaw>) -> Result<Rule, ScenarioError> {
    let raw = e.get_ref();
    // NaN or an infinity would hold always, or never.
    let percent = |p: &Option<Spanned<f64>>, key: &str| -> Result<Option<f64>, ScenarioError> {
        p.as_ref()
            .map(|p| {
                check_percent(*p.get_ref())
                    .map_err(|problem| cx.at(p.span(), &format!("expect[{i}].{key}"), problem))
            })
            .transpose()
    };
    let count = |n: &Option<Spanned<u64>>| n.as_ref().map(|n| *n.get_ref());
    let rules: Vec<Rule> = [
        percent(&raw.drop_at_least, "drop_at_least")?.map(Rule::DropAtLeast),
        percent(&raw.rise_at_most, "rise_at_most")?.map(Rule::RiseAtMost),
        count(&raw.fewer_by_at_least).map(Rule::FewerByAtLeast),
        raw.equal
            .as_ref()
            .filter(|b| *b.get_ref())
            .map(|_| Rule::Equal),
        count(&raw.at_least).map(Rule::AtLeast),
        count(&raw.at_most).map(Rule::AtMost),
    ]
    .into_iter()
    .flatten()
    .collect();
    match rules[..] {
        [r] => Ok(r),
        _ => Err(cx.at(
            e.span(),
            &format!("expect[{i}]"),
            "give exactly one rule: drop_at_least, rise_at_most, fewer_by_at_least, equal = \
             true (with from and to), or at_least, at_most (with policy, or kernel in a run \
             that boots kernels)",
        )),
    }
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
