//! Running a scenario file: every run and repeat booted in turn (a failed run is reported and
//! the rest go on), progress on a terminal, the expectations judged, and a results directory:
//!
//! ```text
//! DIR/report.json     every run (schema mtex-report v2, results.rs)
//! DIR/report.txt      the text report
//! DIR/report.csv      one row per counter
//! DIR/*.svg           the plots
//! DIR/profile/        a profiled phase's folded stacks and flame graphs (profile::folded)
//! DIR/<run>-<k>.log   each boot's raw serial console (for `mtex parse`)
//! ```

use crate::images::Images;
use crate::model::report::Report;
use crate::model::results::{self, Expectation, Results};
use crate::qemu::{self, RunConfig};
use crate::scenario::file::{Expect, ScenarioFile, Side};
use anyhow::{Context, Result};
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// A fresh directory under `base` named after the scenario: `base/NAME-1`, `-2`, …
pub fn results_dir(base: &Path, name: &str) -> Result<PathBuf> {
    // A name with a separator or `..` would put the directory elsewhere than in `base`.
    anyhow::ensure!(
        crate::scenario::file::is_safe_name(name),
        "{name:?}: not a results directory name (letters, digits, - and _, at most 64)"
    );
    std::fs::create_dir_all(base).with_context(|| format!("creating {}", base.display()))?;
    for n in 1.. {
        let d = base.join(format!("{name}-{n}"));
        match std::fs::create_dir(&d) {
            Ok(()) => return Ok(d),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e).with_context(|| format!("creating {}", d.display())),
        }
    }
    unreachable!("an unbounded range")
}

/// What `configure` may keep alive for the length of one boot (the ESP of a UEFI run).
pub type Keep = Option<qemu::TempDir>;

/// Boots every run of `s` (each repeat) with `configure` applied to its QEMU settings, writes
/// the logs into `dir`, and returns the judged results and each boot's parsed report.
pub fn run(
    s: &ScenarioFile,
    images: &Images,
    dir: &Path,
    configure: &dyn Fn(RunConfig) -> Result<(RunConfig, Keep)>,
) -> Result<(Results, Vec<Report>)> {
    let total: u32 = s.runs.iter().map(|r| r.repeat).sum();
    let show = std::io::stderr().is_terminal();
    let start = Instant::now();
    let mut done = 0u32;
    let mut out = Vec::new();
    let mut reports = Vec::new();
    for spec in &s.runs {
        let Some(guest) = spec.guest() else {
            anyhow::bail!(
                "run {:?} boots kernels: `mtex linux --scenario` runs it",
                spec.name
            );
        };
        for k in 0..spec.repeat {
            if show {
                let elapsed = start.elapsed().as_secs_f64();
                let left = if done == 0 {
                    String::new()
                } else {
                    format!(
                        ", about {:.0} s left",
                        elapsed / f64::from(done) * f64::from(total - done)
                    )
                };
                eprint!(
                    "\rmtex: run {}/{total} {} ({}/{}): {elapsed:.0} s{left}   ",
                    done + 1,
                    spec.name,
                    k + 1,
                    spec.repeat
                );
                let _ = std::io::stderr().flush();
            }
            let (cfg, _keep) =
                configure(RunConfig::with_default_limits(guest.cmdline.clone(), true))?;
            let console = qemu::run(images, &cfg)?;
            let log = dir.join(format!("{}-{}.log", spec.name, k + 1));
            std::fs::write(&log, &console.bytes)
                .with_context(|| format!("writing {}", log.display()))?;
            let report = console.report();
            out.push(results::run(&spec.name, k, &report));
            reports.push(report);
            done += 1;
        }
    }
    if show {
        eprintln!(
            "\rmtex: {total} runs in {:.1} s{:30}",
            start.elapsed().as_secs_f64(),
            ""
        );
    }
    let judged = s.expectations.iter().map(|e| judge(e, &out)).collect();
    let mut doc = Results::new(Some(s.name.clone()), out, judged);
    doc.symbolize(&crate::symbols::Symbols::load(&images.guest_elf));
    Ok((doc, reports))
}

/// The mean of the expectation's counter in one side's phase over every boot of the side,
/// or `None` unless every boot measured it.
fn value(runs: &[results::Run], e: &Expect, side: &Side) -> Option<f64> {
    let v: Vec<u64> = runs
        .iter()
        .filter(|r| r.name == side.results_run)
        .filter_map(|r| {
            r.phases
                .iter()
                .find(|p| match side.window {
                    // A window that never closed was not measured.
                    Some(w) => p.id as usize == w && p.end_ts.is_some(),
                    None => {
                        p.workload.as_deref() == Some(e.workload.as_str())
                            && p.policy.as_deref() == Some(side.of.as_str())
                    }
                })
                .and_then(|p| p.counters.get(&e.counter).copied())
        })
        .collect();
    (!v.is_empty() && v.len() as u32 == side.boots)
        .then(|| v.iter().sum::<u64>() as f64 / v.len() as f64)
}

/// Judges one expectation on the runs' results: the same for built-in runs and for runs
/// that boot kernels.
pub fn judge(e: &Expect, runs: &[results::Run]) -> Expectation {
    let (held, detail) = match (value(runs, e, &e.from), value(runs, e, &e.to)) {
        (Some(a), Some(b)) => e.judge(a, b),
        _ => (
            false,
            match e.from.window {
                Some(w) => format!("window {w} was not measured on every boot"),
                None => {
                    "no such counter in the results of every boot (did a run fail?)".to_string()
                }
            },
        ),
    };
    Expectation {
        text: e.text(),
        held,
        detail,
    }
}

/// Writes the document and its renderings into `dir`; returns the files written.
pub fn write_outputs(doc: &Results, dir: &Path) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    let mut put = |name: &str, text: String| -> Result<()> {
        let p = dir.join(name);
        std::fs::write(&p, text).with_context(|| format!("writing {}", p.display()))?;
        files.push(p);
        Ok(())
    };
    put("report.json", serde_json::to_string_pretty(doc)? + "\n")?;
    put("report.txt", crate::output::full(doc))?;
    put("report.csv", crate::output::csv::render(doc))?;
    put("index.html", crate::output::html_page(doc)?)?;
    files.extend(crate::output::plots::write(doc, dir)?);
    files.extend(crate::profile::write(doc, dir)?);
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_profiled_phase_gets_its_folded_stacks_and_flame_graphs() {
        let doc = crate::profile::fixture::results();
        let dir = std::env::temp_dir().join(format!("mtex-outputs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let files = write_outputs(&doc, &dir).unwrap();
        let phase = dir.join("profile/run-1/1-futex-hash");
        for f in [
            "mem_access_checked_rd_k.folded",
            "mem_access_checked_rd_k.svg",
        ] {
            assert!(files.contains(&phase.join(f)), "{f}: {files:?}");
            assert!(phase.join(f).is_file(), "{f}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
