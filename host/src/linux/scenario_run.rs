//! Running a Linux scenario file: its kernels fetched or built once, each `[[linux]]` booted
//! kernel by kernel (and repeat by repeat) with the same workloads, then one side-by-side
//! table per `[[linux]]` and the expectations judged on the windows' counters.

use super::scenario::{self, KernelSpec};
use super::{Args, check_args, run_one};
use crate::model::results::Results;
use crate::output::text::Lines;
use anyhow::{Context, Result};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::ExitCode;

/// The `mtex linux` arguments for one boot of a scenario's kernel.
fn boot_args(base: &Args, run: &scenario::LinuxRun, kernel: &str, out: &Path) -> Args {
    Args {
        kernel: vec![kernel.to_string()],
        workload: Some(run.line()),
        append: base.append.iter().chain(&run.append).cloned().collect(),
        out: out.join(&run.name),
        json: None,
        scenario: None,
        build_only: false,
        quiet: true,
        verbose: false,
        ..base.clone()
    }
}

/// A window's counter in a results document, if that window was measured.
fn value(doc: &Results, window: usize, counter: &str) -> Option<u64> {
    doc.runs
        .iter()
        .flat_map(|r| &r.phases)
        .find(|p| p.id as usize == window && p.end_ts.is_some())
        .and_then(|p| p.counters.get(counter).copied())
}

/// Runs `mtex linux --scenario FILE`.
pub fn run(base: &Args, file: &Path) -> Result<ExitCode> {
    let s = scenario::load(file)?;
    // Every boot's options are checked before anything is built or booted.
    for run in &s.runs {
        let mut a = boot_args(base, run, "6.12", &base.out);
        a.kernel = vec!["6.12".into()];
        check_args(&a).with_context(|| format!("{}: [[linux]] {}", file.display(), run.name))?;
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
    for name in s.runs.iter().flat_map(|r| &r.kernels) {
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
    let mut docs: BTreeMap<(String, String), Vec<Results>> = BTreeMap::new();
    let mut all_ok = true;
    let mut failed: Vec<String> = Vec::new();
    let mut out = Lines::default();
    out.push(&format!(
        "mtex linux --scenario {} ({})",
        file.display(),
        s.name
    ));
    let boots: u32 = s
        .runs
        .iter()
        .map(|r| r.repeat * r.kernels.len() as u32)
        .sum();
    let mut n = 0;
    for run in &s.runs {
        for rep in 0..run.repeat {
            for k in &run.kernels {
                n += 1;
                eprintln!(
                    "mtex: boot {n}/{boots}: {} on kernel {k}{}",
                    run.name,
                    if run.repeat > 1 {
                        format!(", repeat {}", rep + 1)
                    } else {
                        String::new()
                    }
                );
                let a = boot_args(base, run, &kernels[k], &dir);
                let entry = docs.entry((run.name.clone(), k.clone())).or_default();
                match run_one(&a) {
                    Ok((code, doc)) => {
                        all_ok &= code == ExitCode::SUCCESS;
                        entry.push(doc);
                    }
                    // A boot that could not run is said, and the others go on; its windows
                    // count as not measured.
                    Err(e) => {
                        all_ok = false;
                        failed.push(format!("{} on kernel {k}: {e:#}", run.name));
                    }
                }
            }
        }
        out.blank();
        out.push(&format!(
            "[[linux]] {}: kernels {}",
            run.name,
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
        let first: Vec<(String, Results)> = run
            .kernels
            .iter()
            .filter_map(|k| {
                let d = docs.get(&(run.name.clone(), k.clone()))?.first()?;
                Some((k.clone(), d.clone()))
            })
            .collect();
        for l in super::ab::render(&first).lines() {
            out.push(l);
        }
    }
    out.blank();
    out.push("Expectations");
    let mut held_all = true;
    for e in &s.expectations {
        let run = s.runs.iter().find(|r| r.name == e.linux).expect("checked");
        let w = run.window(&e.workload, &e.tcf0).expect("checked");
        // The mean over every boot of the kernel; None unless every boot ran and measured
        // the window.
        let mean = |k: &str| -> Option<f64> {
            let ds = docs.get(&(run.name.clone(), k.to_string()))?;
            let vals: Vec<u64> = ds.iter().filter_map(|d| value(d, w, &e.counter)).collect();
            (!vals.is_empty() && vals.len() as u32 == run.repeat)
                .then(|| vals.iter().sum::<u64>() as f64 / vals.len() as f64)
        };
        let (a, b) = &e.kernels;
        let (held, detail) = match (mean(a), mean(b)) {
            (Some(x), Some(y)) => e.judge(x, y),
            _ => (false, format!("window {w} was not measured on every boot")),
        };
        held_all &= held;
        out.push(&format!(
            "  {} {}: {detail}",
            if held { "held  " } else { "FAILED" },
            e.text()
        ));
    }
    if s.expectations.is_empty() {
        out.push("  none");
    }
    for f in &failed {
        out.push(&format!("  PROBLEM: a boot did not run: {f}"));
    }
    if !all_ok && failed.is_empty() {
        out.push("  PROBLEM: a boot had problems: see its results directory");
    }
    out.push(&format!("mtex: results in {}", dir.display()));
    let text = out.into_string();
    print!("{text}");
    std::fs::write(dir.join("report.txt"), &text)?;
    Ok(if held_all && all_ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
