//! SVG plots of a results document (plotters, SVG backend):
//!
//! - `checked-<run>-<workload>.svg`: tag-checked accesses per policy, grouped by EL and
//!   direction (rd:k, wr:k, rd:u, wr:u), the architectural view (AmpereOne-like: what perf's
//!   MEM_ACCESS_CHECKED events count) beside the TCF-elided one (Arm cores, QEMU);
//! - `timeline-<run>.svg`: the run's phases along the counter's time, each trapped write of
//!   SCTLR_EL1 / TCR_EL1 as a tick in its register's lane (red where the guest's PSTATE.TCO
//!   was set), and below, each phase's TCO changes as a bar across the phase.

use crate::model::results::{PhaseOut, Results, Run};
use crate::output::text::thousands;
use anyhow::{Context, Result, anyhow};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::{Path, PathBuf};

const EL_DIR: [&str; 4] = ["rd:k", "wr:k", "rd:u", "wr:u"];
/// One colour per EL and direction; the TCF-elided bar is the same colour, lighter.
const COLOURS: [RGBColor; 4] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
];

/// A file-name-safe form of a name.
fn slug(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn err(e: impl std::fmt::Display) -> anyhow::Error {
    anyhow!("drawing a plot: {e}")
}

/// Every plot of `doc`: its file name and its SVG text (the results page inlines them).
pub fn render(doc: &Results) -> Result<Vec<(String, String)>> {
    let mut plots = Vec::new();
    for run in doc.runs.iter().filter(|r| r.repeat == 0) {
        // Each workload once, in the order the phases first show it (the matrix is
        // policy-major, so the same workload comes back after the others).
        let mut workloads: Vec<&str> = Vec::new();
        for w in run.phases.iter().filter_map(|p| p.workload.as_deref()) {
            if !workloads.contains(&w) {
                workloads.push(w);
            }
        }
        for w in workloads {
            let phases: Vec<&PhaseOut> = run
                .phases
                .iter()
                .filter(|p| p.workload.as_deref() == Some(w) && p.traced)
                .collect();
            if phases.is_empty() {
                continue;
            }
            let svg = checked(
                &format!("{w}: tag-checked accesses ({})", run.name),
                &phases,
            )?;
            plots.push((format!("checked-{}-{}.svg", slug(&run.name), slug(w)), svg));
        }
        if !run.phases.is_empty() {
            plots.push((format!("timeline-{}.svg", slug(&run.name)), timeline(run)?));
        }
    }
    for s in &doc.by_cpus {
        plots.push((
            crate::output::cpu_counts::file_name(s),
            crate::output::cpu_counts::svg(s)?,
        ));
    }
    Ok(plots)
}

/// Writes every plot of `doc` into `dir`; returns the files.
pub fn write(doc: &Results, dir: &Path) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for (name, svg) in render(doc)? {
        let f = dir.join(name);
        std::fs::write(&f, svg).with_context(|| format!("writing {}", f.display()))?;
        files.push(f);
    }
    Ok(files)
}

/// Axis labels for milliseconds: whole ones where the axis spans more than a few.
fn ms_label(span: f64) -> impl Fn(&f64) -> String {
    move |v| {
        if span >= 10.0 {
            format!("{v:.0}")
        } else {
            format!("{v:.2}")
        }
    }
}

/// Axis labels for counts: whole numbers with thousands separators, never `1800.0`.
fn count_label(v: &f64) -> String {
    thousands(v.max(0.0).round() as u64)
}

fn counter(p: &PhaseOut, name: &str) -> u64 {
    p.counters.get(name).copied().unwrap_or(0)
}

/// Grouped bars: one group per policy, two bars (architectural, elided) per EL and direction.
fn checked(title: &str, phases: &[&PhaseOut]) -> Result<String> {
    let mut svg = String::new();
    {
        let area = SVGBackend::with_string(&mut svg, (1000, 480)).into_drawing_area();
        area.fill(&WHITE).map_err(err)?;
        let top = phases
            .iter()
            .flat_map(|p| EL_DIR.map(|d| counter(p, &format!("mem_access_checked_{d}"))))
            .max()
            .unwrap_or(0)
            .max(1);
        let n = phases.len();
        let mut chart = ChartBuilder::on(&area)
            .caption(title, ("sans-serif", 20))
            .margin(10)
            .x_label_area_size(70)
            .y_label_area_size(70)
            // Headroom above the tallest bar for the legend.
            .build_cartesian_2d(0f64..n as f64, 0f64..top as f64 * 1.5)
            .map_err(err)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(0)
            .x_desc("policy")
            .y_desc("checked accesses")
            .y_label_formatter(&count_label)
            .label_style(("sans-serif", 14))
            .draw()
            .map_err(err)?;
        // The policies under their groups, placed by hand (a numeric axis would label numbers),
        // one line per `+` token so that long combinations do not run into each other.
        for (i, p) in phases.iter().enumerate() {
            let (x, y) = chart.backend_coord(&(i as f64 + 0.5, 0.0));
            let policy = p.policy.clone().unwrap_or_default();
            for (j, part) in policy.split('+').enumerate() {
                let style = TextStyle::from(("sans-serif", 12).into_font())
                    .pos(Pos::new(HPos::Center, VPos::Top));
                let text = if j == 0 {
                    part.to_string()
                } else {
                    format!("+{part}")
                };
                area.draw(&Text::new(text, (x, y + 6 + 14 * j as i32), style))
                    .map_err(err)?;
            }
        }
        // 8 bars in the middle 80% of each unit-wide group.
        let w = 0.8 / 8.0;
        for (k, d) in EL_DIR.iter().enumerate() {
            for (view, prefix, mix) in [(0, "", 1.0), (1, "tcf_elided.", 0.45)] {
                let c = COLOURS[k].mix(mix);
                let series = phases.iter().enumerate().map(move |(i, p)| {
                    let x0 = i as f64 + 0.1 + (2 * k + view) as f64 * w;
                    let v = counter(p, &format!("{prefix}mem_access_checked_{d}")) as f64;
                    Rectangle::new([(x0, 0.0), (x0 + w * 0.9, v)], c.filled())
                });
                let name = if view == 0 {
                    format!("{d} architectural")
                } else {
                    format!("{d} TCF-elided")
                };
                chart
                    .draw_series(series)
                    .map_err(err)?
                    .label(name)
                    .legend(move |(x, y)| {
                        Rectangle::new([(x, y - 5), (x + 12, y + 5)], c.filled())
                    });
            }
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .label_font(("sans-serif", 13))
            .draw()
            .map_err(err)?;
        area.present().map_err(err)?;
    }
    Ok(svg)
}

/// The run's phases, trapped writes and TCO changes along the counter's time (ms from the
/// first phase's start). Phases are coloured by workload (or by name, for phases that are
/// not a workload's), with a legend.
fn timeline(run: &Run) -> Result<String> {
    let mut svg = String::new();
    {
        let hz = run
            .boot
            .as_ref()
            .map_or(1_000_000_000, |b| b.counter_hz.max(1)) as f64;
        let t0 = run.phases.iter().map(|p| p.begin_ts).min().unwrap_or(0);
        let ms = |ts: u64| ts.saturating_sub(t0) as f64 * 1000.0 / hz;
        let end = run
            .phases
            .iter()
            .map(|p| p.end_ts.unwrap_or(p.begin_ts))
            .chain(run.writes.iter().map(|w| w.ts))
            .max()
            .unwrap_or(t0);
        let span = ms(end).max(1e-3) * 1.02;
        // One colour per workload (or phase name), in the order they first run.
        let mut keys: Vec<&str> = Vec::new();
        for p in &run.phases {
            let k = p.workload.as_deref().unwrap_or(&p.name);
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
        let colour = |p: &PhaseOut| {
            let k = p.workload.as_deref().unwrap_or(&p.name);
            Palette99::pick(keys.iter().position(|x| *x == k).unwrap_or(0))
        };
        let area = SVGBackend::with_string(&mut svg, (1000, 560)).into_drawing_area();
        area.fill(&WHITE).map_err(err)?;
        let (upper, lower) = area.split_vertically(330);

        // Lanes: 0 phases, 1 SCTLR_EL1, 2 TCR_EL1 (other VM controls under TVM: lane 3).
        let lane = |reg: &str| match reg {
            "SCTLR_EL1" => 1.0,
            "TCR_EL1" => 2.0,
            _ => 3.0,
        };
        let mut chart = ChartBuilder::on(&upper)
            .caption(
                format!("{}: phases and trapped writes", run.name),
                ("sans-serif", 20),
            )
            .margin(10)
            .x_label_area_size(45)
            .y_label_area_size(90)
            .build_cartesian_2d(0f64..span, 0f64..4f64)
            .map_err(err)?;
        chart
            .configure_mesh()
            .disable_mesh()
            .y_labels(0)
            .x_desc("ms of the physical counter (CNTPCT_EL0: the hypervisor's time included)")
            .x_label_formatter(&ms_label(span))
            .label_style(("sans-serif", 13))
            .draw()
            .map_err(err)?;
        // Lane names beside the axis, placed by hand (the axis is numeric).
        for (y, name) in [
            (0.0, "phases"),
            (1.0, "SCTLR_EL1"),
            (2.0, "TCR_EL1"),
            (3.0, "other"),
        ] {
            let (px, py) = chart.backend_coord(&(0.0, y));
            let style = TextStyle::from(("sans-serif", 12).into_font())
                .pos(Pos::new(HPos::Right, VPos::Center));
            upper
                .draw(&Text::new(name, (px - 6, py), style))
                .map_err(err)?;
        }
        chart
            .draw_series(run.phases.iter().map(|p| {
                let x1 = ms(p.end_ts.unwrap_or(end));
                Rectangle::new(
                    [(ms(p.begin_ts), -0.3), (x1, 0.3)],
                    colour(p).mix(0.7).filled(),
                )
            }))
            .map_err(err)?;
        // The legend: an empty series per workload, labelled, with its colour.
        for (i, k) in keys.iter().enumerate() {
            let c = Palette99::pick(i).mix(0.7);
            chart
                .draw_series(std::iter::empty::<Rectangle<(f64, f64)>>())
                .map_err(err)?
                .label(*k)
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], c.filled()));
        }
        if !keys.is_empty() {
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperRight)
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .label_font(("sans-serif", 12))
                .draw()
                .map_err(err)?;
        }
        chart
            .draw_series(run.writes.iter().map(|w| {
                let y = lane(&w.register);
                let c = if w.tco { RED } else { BLACK };
                PathElement::new(
                    vec![(ms(w.ts), y - 0.3), (ms(w.ts), y + 0.3)],
                    c.stroke_width(1),
                )
            }))
            .map_err(err)?;

        let top = run
            .phases
            .iter()
            .map(|p| counter(p, "tco_changes"))
            .max()
            .unwrap_or(0)
            .max(1);
        let mut lower_chart = ChartBuilder::on(&lower)
            .caption(
                "PSTATE.TCO changes per phase (tco_changes: by MSR TCO, and by exception entry and return)",
                ("sans-serif", 16),
            )
            .margin(10)
            .x_label_area_size(45)
            .y_label_area_size(90)
            .build_cartesian_2d(0f64..span, 0f64..top as f64 * 1.1)
            .map_err(err)?;
        lower_chart
            .configure_mesh()
            .disable_x_mesh()
            .x_label_formatter(&ms_label(span))
            .x_desc("ms of the physical counter")
            .y_desc("changes of PSTATE.TCO")
            .y_label_formatter(&count_label)
            .label_style(("sans-serif", 13))
            .draw()
            .map_err(err)?;
        lower_chart
            .draw_series(run.phases.iter().map(|p| {
                let c = colour(p).filled();
                let x1 = ms(p.end_ts.unwrap_or(end));
                Rectangle::new(
                    [
                        (ms(p.begin_ts), 0.0),
                        (x1, counter(p, "tco_changes") as f64),
                    ],
                    c,
                )
            }))
            .map_err(err)?;
        area.present().map_err(err)?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::results::{PhaseOut, Run, WriteOut};
    use std::collections::BTreeMap;

    fn phase(policy: &str, rd_k: u64, elided: u64, begin: u64) -> PhaseOut {
        let mut counters = BTreeMap::new();
        counters.insert("mem_access_checked_rd:k".to_string(), rd_k);
        counters.insert("tcf_elided.mem_access_checked_rd:k".to_string(), elided);
        counters.insert("tco_changes".to_string(), 66);
        PhaseOut {
            policy: Some(policy.into()),
            workload: Some("futex-hash".into()),
            iters: Some(32),
            tcf0: Some("sync".into()),
            begin_ts: begin,
            end_ts: Some(begin + 1_000_000),
            ..PhaseOut::example("futex-hash", counters)
        }
    }

    #[test]
    fn plots_are_svg_with_every_policy_and_bar() {
        let run = Run {
            name: "matrix".into(),
            repeat: 0,
            success: true,
            end: "guest exited with status 0".into(),
            boot: None,
            phases: vec![
                phase("entry-tco", 1272, 32, 0),
                phase("tcma1", 32, 0, 2_000_000),
            ],
            writes: vec![WriteOut {
                seq: 3,
                cpu: 0,
                register: "SCTLR_EL1".into(),
                old: "0x0".into(),
                new: "0x1".into(),
                changes: vec![],
                pc: "0x41000000".into(),
                symbol: None,
                el: 1,
                tco: true,
                phase: None,
                ts: 500_000,
            }],
            console: vec![],
            power_calls: vec![],
            problems: vec![],
            notes: vec![],
        };
        let doc = Results::new(None, vec![run], vec![]);
        let dir = std::env::temp_dir().join(format!("mtex-plots-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let files = write(&doc, &dir).unwrap();
        let names: Vec<String> = files
            .iter()
            .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            ["checked-matrix-futex-hash.svg", "timeline-matrix.svg"]
        );
        let svg = std::fs::read_to_string(&files[0]).unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..80]);
        assert!(svg.contains("entry-tco") && svg.contains("tcma1"));
        assert!(svg.contains("rd:k TCF-elided"));
        // 8 bars per policy (4 EL/direction x 2 views), 2 policies, plus 8 legend swatches.
        assert!(
            svg.matches("<rect").count() >= 16,
            "{}",
            svg.matches("<rect").count()
        );
        let t = std::fs::read_to_string(&files[1]).unwrap();
        assert!(t.contains("SCTLR_EL1") && t.contains("TCO changes per phase"));
        // The matrix is policy-major: a workload comes back after the others, and still gets
        // one plot.
        let mut doc = doc;
        let mut getpid = phase("tcma1", 1, 0, 4_000_000);
        getpid.workload = Some("getpid".into());
        let again = phase("uaccess-tco", 2, 0, 6_000_000);
        doc.runs[0].phases = vec![phase("entry-tco", 1, 0, 0), getpid, again];
        let n = write(&doc, &dir).unwrap().len();
        assert_eq!(n, 3, "futex-hash, getpid, timeline");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
