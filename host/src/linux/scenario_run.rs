//! Running a scenario whose runs boot kernels: its kernels fetched or built once, each run
//! booted kernel by kernel (and repeat by repeat) with the same workloads, then one
//! side-by-side table per run, and one results document: every boot's windows as the run
//! `RUN-KERNEL`, the expectations judged on them as a built-in scenario's are.

use super::{Args, check_args, run_one};
use crate::model::results::{self, Results};
use crate::output::text::Lines;
use crate::scenario::file::{KernelRun, KernelSpec, RunSpec, ScenarioFile};
use anyhow::{Context, Result, bail};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::ExitCode;

/// The `mtex linux` arguments for one boot of a scenario's kernel.
fn boot_args(base: &Args, spec: &RunSpec, run: &KernelRun, kernel: &str, out: &Path) -> Args {
    Args {
        kernel: vec![kernel.to_string()],
        workload: Some(run.line()),
        setup: run.setup.clone(),
        append: base.append.iter().chain(&run.append).cloned().collect(),
        // The run's user space and sampling, where it says; else the command line's.
        packages: if run.packages.is_empty() {
            base.packages.clone()
        } else {
            run.packages.clone()
        },
        suite: run.suite.clone().or_else(|| base.suite.clone()),
        env: base.env.iter().chain(&run.env).cloned().collect(),
        tagged_heap: run.tagged_heap.or(base.tagged_heap),
        sample: run.sample.clone().or_else(|| base.sample.clone()),
        sample_seed: run.sample_seed.or(base.sample_seed),
        cpus: run.cpus.unwrap_or(base.cpus),
        out: out.join(&spec.name),
        json: None,
        scenario: None,
        build_only: false,
        quiet: true,
        verbose: false,
        ..base.clone()
    }
}

/// The runs of a scenario, each with the kernels it boots; refused when its runs boot the
/// built-in guest.
fn kernel_runs<'a>(s: &'a ScenarioFile, file: &Path) -> Result<Vec<(&'a RunSpec, &'a KernelRun)>> {
    if !s.boots_kernels() {
        bail!(
            "{}: its runs boot the built-in guest, not kernels: `mtex run {}` runs it",
            file.display(),
            file.display()
        );
    }
    Ok(s.runs
        .iter()
        .filter_map(|r| Some((r, r.kernels()?)))
        .collect())
}

/// A boot that could not run, as a run of the document: failed, with why.
fn not_run(name: String, repeat: u32, why: String) -> results::Run {
    results::Run {
        name,
        repeat,
        success: false,
        end: "did not run".to_string(),
        boot: None,
        phases: Vec::new(),
        writes: Vec::new(),
        console: Vec::new(),
        power_calls: Vec::new(),
        problems: vec![format!("the boot did not run: {why}")],
        notes: Vec::new(),
    }
}

/// The runs given several CPU counts: each window with an operation count, per kernel and
/// CPU count, from each kernel's first boot at that count.
fn by_cpus(
    runs: &[(&RunSpec, &KernelRun)],
    first: &BTreeMap<(String, String), Results>,
) -> Vec<crate::model::cpu_counts::CpuSeries> {
    let mut out = Vec::new();
    let mut done: Vec<&str> = Vec::new();
    for (_, run) in runs {
        let Some(name) = run.series.as_deref() else {
            continue;
        };
        if done.contains(&name) {
            continue;
        }
        done.push(name);
        let members: Vec<&(&RunSpec, &KernelRun)> = runs
            .iter()
            .filter(|(_, r)| r.series.as_deref() == Some(name))
            .collect();
        for (w, label) in (1..).zip(run.written()) {
            let points: Vec<_> = run
                .kernels
                .iter()
                .flat_map(|k| {
                    members.iter().filter_map(move |(spec, r)| {
                        let doc = first.get(&(spec.name.clone(), k.clone()))?;
                        crate::model::cpu_counts::point(k, r.cpus?, doc, w)
                    })
                })
                .collect();
            if !points.is_empty() {
                out.push(crate::model::cpu_counts::CpuSeries {
                    run: name.to_string(),
                    window: w,
                    label,
                    points,
                });
            }
        }
    }
    out
}

/// Runs `mtex linux --scenario FILE` (and `mtex run FILE` for a file whose runs boot
/// kernels).
pub fn run(base: &Args, file: &Path) -> Result<ExitCode> {
    let s = crate::scenario::file::load(file)?;
    let runs = kernel_runs(&s, file)?;
    // Every boot's options are checked before anything is built or booted.
    for (spec, run) in &runs {
        let a = boot_args(base, spec, run, "6.12", &base.out);
        check_args(&a).with_context(|| format!("{}: run {}", file.display(), spec.name))?;
    }
    if base.build_only {
        for (name, k) in &s.kernels {
            if let KernelSpec::Build(a) = k {
                eprintln!("mtex: kernel {name}: mtex kernel build");
                crate::kernel_build::build(a)
                    .with_context(|| format!("{}: kernels.{name}", file.display()))?;
            }
        }
        return Ok(ExitCode::SUCCESS);
    }
    let dir = crate::scenario::run::results_dir(&base.out, &s.name).with_context(|| {
        format!(
            "--out {}: cannot make a results directory there",
            base.out.display()
        )
    })?;
    // Each kernel the runs use, fetched by `mtex linux` itself or built here, once.
    let mut kernels: BTreeMap<String, String> = BTreeMap::new();
    for name in runs.iter().flat_map(|(_, r)| &r.kernels) {
        if kernels.contains_key(name) {
            continue;
        }
        let choice = match &s.kernels[name] {
            KernelSpec::Given(c) => c.clone(),
            KernelSpec::Build(a) => {
                eprintln!("mtex: kernel {name}: mtex kernel build");
                let (d, _) = crate::kernel_build::build(a)
                    .with_context(|| format!("{}: kernels.{name}", file.display()))?;
                d.join("Image").display().to_string()
            }
        };
        kernels.insert(name.clone(), choice);
    }
    let mut measured: Vec<results::Run> = Vec::new();
    let mut first: BTreeMap<(String, String), Results> = BTreeMap::new();
    let mut operations = crate::scenario::run::WindowOperations::new();
    let mut out = Lines::default();
    out.push(&format!("mtex scenario {} ({})", file.display(), s.name));
    let boots: u32 = runs
        .iter()
        .map(|(spec, r)| spec.repeat * r.kernels.len() as u32)
        .sum();
    let mut n = 0;
    for (spec, run) in &runs {
        for rep in 0..spec.repeat {
            for k in &run.kernels {
                n += 1;
                eprintln!(
                    "mtex: boot {n}/{boots}: {} on kernel {k}{}",
                    spec.name,
                    if spec.repeat > 1 {
                        format!(", repeat {}", rep + 1)
                    } else {
                        String::new()
                    }
                );
                let a = boot_args(base, spec, run, &kernels[k], &dir);
                let name = spec.result_name(Some(k));
                match run_one(&a) {
                    Ok((_, doc)) => {
                        let windows = doc.linux.iter().flat_map(|l| &l.windows);
                        for w in windows {
                            if let Some(ops) = &w.operations {
                                operations.insert((name.clone(), rep, w.id), ops.count);
                            }
                        }
                        first
                            .entry((spec.name.clone(), k.clone()))
                            .or_insert_with(|| doc.clone());
                        // Each boot is one run of the document, named for its run and
                        // kernel; its own directory keeps the Linux section.
                        measured.extend(doc.runs.into_iter().map(|mut r| {
                            r.name = name.clone();
                            r.repeat = rep;
                            r
                        }));
                    }
                    // A boot that could not run is said, and the others go on; its windows
                    // count as not measured.
                    Err(e) => measured.push(not_run(name, rep, format!("{e:#}"))),
                }
            }
        }
        out.blank();
        out.push(&format!(
            "run {}: kernels {}",
            spec.name,
            run.kernels.join(", ")
        ));
        for w in &run.workloads {
            for m in &run.tcf0 {
                out.push(&format!(
                    "  window {}: {w}, TCF0 {m}",
                    run.window(w, m).expect("its own")
                ));
            }
        }
        for c in &run.commands {
            out.push(&format!(
                "  window {}: {c}{}",
                run.window(c, "").expect("its own"),
                run.tagged_heap.map_or(String::new(), |h| format!(
                    ", glibc's tagged heap {}",
                    h.name()
                ))
            ));
        }
        let docs: Vec<(String, Results)> = run
            .kernels
            .iter()
            .filter_map(|k| {
                let d = first.get(&(spec.name.clone(), k.clone()))?;
                Some((k.clone(), d.clone()))
            })
            .collect();
        for l in super::ab::render(&docs).lines() {
            out.push(l);
        }
    }
    let judged: Vec<results::Expectation> = s
        .expectations
        .iter()
        .map(|e| crate::scenario::run::judge_with(e, &measured, &operations))
        .collect();
    let mut doc = Results::new(Some(s.name.clone()), measured, judged);
    doc.by_cpus = by_cpus(&runs, &first);
    for l in crate::output::cpu_counts::lines(&doc.by_cpus) {
        out.push(&l);
    }
    if !doc.expectations.is_empty() {
        out.blank();
        out.push(" Expectations:");
        for e in &doc.expectations {
            out.push(&crate::output::full::expectation_line(e));
        }
    }
    let failed: Vec<String> = doc
        .runs
        .iter()
        .filter(|r| !r.success)
        .map(|r| format!("FAILED ({} {}): {}", r.name, r.repeat + 1, r.end))
        .collect();
    if !failed.is_empty() {
        out.blank();
        for f in &failed {
            out.push(f);
        }
        out.push("  (each boot's problems: its directory's report.txt)");
    }
    out.blank();
    out.push(doc.verdict_line());
    let text = out.into_string();
    print!("{text}");
    crate::scenario::run::write_outputs(&doc, &dir)?;
    std::fs::write(dir.join("summary.txt"), &text)?;
    eprintln!("mtex: results in {}", dir.display());
    Ok(if doc.success {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
