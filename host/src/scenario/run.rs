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
use crate::scenario::file::{Expect, Measured, ScenarioFile, Side};
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

/// The expectation's counter in one side's phase, meaned over every boot of the side, or why
/// there is none: a boot that did not measure it, or a sampled phase whose estimate has no
/// interval. A sampled phase gives its estimate and 95% interval; the mean of several boots'
/// has the means of their bounds (each boot's interval is its own).
fn value(
    runs: &[results::Run],
    ops: &WindowOperations,
    e: &Expect,
    side: &Side,
) -> Result<Measured, String> {
    let not_measured = || match side.window {
        Some(w) => format!("window {w} was not measured on every boot"),
        None => "no such counter in the results of every boot (did a run fail?)".to_string(),
    };
    let mut v: Vec<Measured> = Vec::new();
    for r in runs.iter().filter(|r| r.name == side.results_run) {
        let Some(p) = r.phases.iter().find(|p| match side.window {
            // A window that never closed was not measured.
            Some(w) => p.id as usize == w && p.end_ts.is_some(),
            None => {
                p.workload.as_deref() == Some(e.workload.as_str())
                    && p.policy.as_deref() == Some(side.of.as_str())
            }
        }) else {
            continue;
        };
        // Per operation: the boot's value over its window's own count, interval and all.
        let per = if e.per_operation {
            let Some(&n) = ops.get(&(r.name.clone(), r.repeat, p.id)) else {
                return Err(format!(
                    "window {} on {} has no operation count (its program printed none that \
                     mtex reads)",
                    p.id, side.of
                ));
            };
            n as f64
        } else {
            1.0
        };
        let mut push = |m: Measured| {
            v.push(Measured {
                value: m.value / per,
                lo: m.lo / per,
                hi: m.hi / per,
            })
        };
        if let Some(&c) = p.counters.get(&e.counter) {
            push(Measured::exact(c as f64));
            continue;
        }
        let Some(est) = p.estimates.get(&e.counter) else {
            continue;
        };
        if est.exact {
            push(Measured::exact(est.value));
            continue;
        }
        let Some(half) = est.half_width else {
            return Err(format!(
                "{} on {} is an estimate without an interval ({} of its {} units met it): a \
                 sampled window cannot bound a count so rare",
                e.counter, side.of, est.met, est.units
            ));
        };
        push(Measured {
            value: est.value,
            lo: (est.value - half).max(0.0),
            hi: est.value + half,
        });
    }
    if v.is_empty() || v.len() as u32 != side.boots {
        return Err(not_measured());
    }
    let n = v.len() as f64;
    Ok(Measured {
        value: v.iter().map(|m| m.value).sum::<f64>() / n,
        lo: v.iter().map(|m| m.lo).sum::<f64>() / n,
        hi: v.iter().map(|m| m.hi).sum::<f64>() / n,
    })
}

/// Judges one expectation on the runs' results: the same for built-in runs and for runs
/// that boot kernels.
pub fn judge(e: &Expect, runs: &[results::Run]) -> Expectation {
    judge_with(e, runs, &WindowOperations::new())
}

/// Each boot's windows' operation counts, by (its run in report.json, repeat, window): what
/// an expectation per operation divides by.
pub type WindowOperations = std::collections::BTreeMap<(String, u32, u32), u64>;

/// [`judge`], with the operations of the windows of boots that counted them.
pub fn judge_with(e: &Expect, runs: &[results::Run], ops: &WindowOperations) -> Expectation {
    let (held, detail) = match (value(runs, ops, e, &e.from), value(runs, ops, e, &e.to)) {
        (Ok(a), Ok(b)) => e.judge_measured(a, b),
        (Err(why), _) | (_, Err(why)) => (false, why),
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
    use crate::scenario::file::Rule;

    /// A kernel run's two boots, each with window 1 holding `rd:k` as a count or, sampled,
    /// as an estimate of ±10%.
    fn boots(values: [(u64, bool); 2]) -> Vec<results::Run> {
        let template = crate::profile::fixture::results().runs[0].clone();
        values
            .iter()
            .enumerate()
            .map(|(i, &(v, sampled))| {
                let mut r = template.clone();
                r.name = format!("t-{}", ["a", "b"][i]);
                r.phases.truncate(1);
                let p = &mut r.phases[0];
                p.id = 1;
                p.counters.remove("mem_access_checked_rd:k");
                if sampled {
                    p.estimates.insert(
                        "mem_access_checked_rd:k".into(),
                        results::EstimateOut {
                            value: v as f64,
                            half_width: Some(v as f64 / 10.0),
                            level: 0.95,
                            units: 100,
                            met: 100,
                            sampled: 0.1,
                            exact: false,
                            not_estimable: None,
                        },
                    );
                } else {
                    p.counters.insert("mem_access_checked_rd:k".into(), v);
                }
                r
            })
            .collect()
    }

    fn drop_at_least(p: f64) -> Expect {
        let side = |k: &str| Side {
            run: "t".into(),
            results_run: format!("t-{k}"),
            of: k.into(),
            window: Some(1),
            boots: 1,
        };
        Expect {
            per_operation: false,
            counter: "mem_access_checked_rd:k".into(),
            workload: "perf bench futex hash".into(),
            tcf0: None,
            from: side("a"),
            to: side("b"),
            rule: Rule::DropAtLeast(p),
        }
    }

    #[test]
    fn a_sampled_window_is_judged_on_its_interval() {
        // Counts: 1000 → 80 is a 92% drop.
        let counted = boots([(1000, false), (80, false)]);
        assert!(judge(&drop_at_least(92.0), &counted).held);
        // Estimates of the same: 900 → 88 at the far ends, a 90.2% drop.
        let sampled = boots([(1000, true), (80, true)]);
        let e = judge(&drop_at_least(92.0), &sampled);
        assert!(!e.held, "{e:?}");
        assert!(e.detail.contains("95% intervals"), "{e:?}");
        assert!(judge(&drop_at_least(90.0), &sampled).held);
        // An estimate without an interval bounds nothing: the rule does not hold, and says why.
        let mut rare = boots([(1000, true), (80, true)]);
        let est = rare[1].phases[0]
            .estimates
            .get_mut("mem_access_checked_rd:k")
            .unwrap();
        est.half_width = None;
        est.met = 3;
        let e = judge(&drop_at_least(10.0), &rare);
        assert!(!e.held, "{e:?}");
        assert!(
            e.detail.contains("without an interval (3 of its 100 units"),
            "{e:?}"
        );
    }

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
