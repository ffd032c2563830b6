//! A scenario's runs at several CPU counts, in text and as a plot: per window, each kernel's
//! checked accesses per operation at each CPU count (`crate::model::cpu_counts`), and a plot
//! of the kernel's checked reads per operation against the CPU count, a line per kernel.

use crate::model::cpu_counts::{COUNTERS, CpuSeries, figure};
use crate::model::results::EstimateOut;
use crate::output::text::thousands;
use anyhow::{Result, anyhow};
use plotters::prelude::*;

/// The counter the plot shows: what the kernel's own tag checking costs per operation.
pub const PLOTTED: &str = "mem_access_checked_rd:k";

/// The section's lines: a table per window, a row per kernel and CPU count.
pub fn lines(series: &[CpuSeries]) -> Vec<String> {
    let mut out = Vec::new();
    for s in series {
        out.push(String::new());
        out.push(format!(
            " By CPU count: {}, window {}: {}",
            s.run, s.window, s.label
        ));
        out.push(
            "  checked accesses per operation (the program's own count; set-up and tear-down \
             included; ± the 95% interval of a sampled window)"
                .to_string(),
        );
        let mut header = vec!["kernel", "CPUs", "operations"];
        header.extend(COUNTERS.map(short));
        let mut t = crate::output::tables::bordered(header);
        for p in &s.points {
            let mut row = vec![
                p.kernel.clone(),
                p.cpus.to_string(),
                thousands(p.operations),
            ];
            row.extend(COUNTERS.map(|c| {
                p.per_operation.get(c).map_or_else(
                    || "not measured".to_string(),
                    |e| figure(e).replace(" (not estimable)", " n/e"),
                )
            }));
            t.add_row(row);
        }
        out.extend(t.to_string().lines().map(|l| format!("  {l}")));
        out.push(
            "  n/e: not estimable (too few units met it); a kernel and CPU count not shown: \
             its window was not measured, or its program printed no operation count"
                .to_string(),
        );
    }
    out
}

/// `rd:k` for `mem_access_checked_rd:k`.
fn short(counter: &str) -> &str {
    counter
        .strip_prefix("mem_access_checked_")
        .unwrap_or(counter)
}

/// The plot's file name for a series (a run's name is letters, digits, `-` and `_`).
pub fn file_name(s: &CpuSeries) -> String {
    format!("cpus-{}-window-{}.svg", s.run, s.window)
}

fn err(e: impl std::fmt::Display) -> anyhow::Error {
    anyhow!("drawing the plot by CPU count: {e}")
}

/// One colour per kernel, in the run's order.
const COLOURS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

/// The interval of a figure per operation, as the plot draws it: its ends, or the value alone
/// where it is exact or has no interval.
fn ends(e: &EstimateOut) -> (f64, f64) {
    let h = if e.exact {
        0.0
    } else {
        e.half_width.unwrap_or(0.0)
    };
    ((e.value - h).max(0.0), e.value + h)
}

/// Kernel checked reads per operation against the CPU count, a line per kernel, each point
/// with its 95% interval (none where the window was traced whole).
pub fn svg(s: &CpuSeries) -> Result<String> {
    let mut kernels: Vec<&str> = Vec::new();
    for p in &s.points {
        if !kernels.contains(&p.kernel.as_str()) {
            kernels.push(&p.kernel);
        }
    }
    let top = s
        .points
        .iter()
        .filter_map(|p| p.per_operation.get(PLOTTED))
        .map(|e| ends(e).1)
        .fold(0.0, f64::max)
        .max(1.0);
    let most = s.points.iter().map(|p| p.cpus).max().unwrap_or(1).max(2);
    let mut text = String::new();
    {
        let area = SVGBackend::with_string(&mut text, (800, 480)).into_drawing_area();
        area.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&area)
            .caption(
                format!(
                    "{}, window {}: kernel checked reads per operation",
                    s.run, s.window
                ),
                ("sans-serif", 18),
            )
            .margin(10)
            .x_label_area_size(50)
            .y_label_area_size(80)
            .build_cartesian_2d(0.5f64..most as f64 + 0.5, 0f64..top * 1.25)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("CPUs")
            .y_desc("rd:k per operation")
            .x_labels(most as usize)
            .x_label_formatter(&|v| format!("{v:.0}"))
            .label_style(("sans-serif", 13))
            .draw()
            .map_err(err)?;
        for (k, kernel) in kernels.iter().enumerate() {
            let c = COLOURS[k % COLOURS.len()];
            let pts: Vec<(f64, &EstimateOut)> = s
                .points
                .iter()
                .filter(|p| p.kernel == *kernel)
                .filter_map(|p| Some((p.cpus as f64, p.per_operation.get(PLOTTED)?)))
                .collect();
            chart
                .draw_series(LineSeries::new(
                    pts.iter().map(|(x, e)| (*x, e.value)),
                    c.stroke_width(2),
                ))
                .map_err(err)?
                .label(*kernel)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 16, y)], c.stroke_width(2))
                });
            chart
                .draw_series(pts.iter().map(|(x, e)| {
                    let (lo, hi) = ends(e);
                    ErrorBar::new_vertical(*x, lo, e.value, hi, c.filled(), 8)
                }))
                .map_err(err)?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .label_font(("sans-serif", 13))
            .draw()
            .map_err(err)?;
        area.present().map_err(err)?;
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::cpu_counts::CpuPoint;

    fn series() -> CpuSeries {
        let point = |kernel: &str, cpus: u32, rd_k: f64, half: Option<f64>| CpuPoint {
            kernel: kernel.into(),
            cpus,
            operations: 1000,
            source: "x".into(),
            per_operation: [(
                PLOTTED.to_string(),
                EstimateOut {
                    value: rd_k,
                    half_width: half,
                    level: 0.95,
                    units: 10,
                    met: 5,
                    sampled: 0.1,
                    exact: half.is_none(),
                    not_estimable: None,
                },
            )]
            .into_iter()
            .collect(),
        };
        CpuSeries {
            run: "futex".into(),
            window: 1,
            label: "perf bench futex hash -t {cpus}".into(),
            points: vec![
                point("a", 1, 100.0, None),
                point("a", 2, 150.0, None),
                point("b", 1, 2.0, Some(0.5)),
                point("b", 2, 2.5, Some(0.5)),
            ],
        }
    }

    #[test]
    fn the_table_has_a_row_per_kernel_and_cpu_count() {
        let text = lines(&[series()]).join("\n");
        assert!(
            text.contains("By CPU count: futex, window 1: perf bench futex hash -t {cpus}"),
            "{text}"
        );
        assert!(text.contains("150.0"), "{text}");
        assert!(text.contains("2.5 ± 20"), "{text}");
        // A counter the window did not give is said, not shown as 0.
        assert!(text.contains("not measured"), "{text}");
    }

    #[test]
    fn the_plot_has_a_line_per_kernel() {
        let svg = svg(&series()).unwrap();
        assert!(svg.contains("<svg"), "{svg}");
        assert!(svg.contains("kernel checked reads per operation"), "{svg}");
        for kernel in ["a", "b"] {
            assert!(
                svg.contains(&format!(">\n{kernel}\n</text>")),
                "{kernel}: {svg}"
            );
        }
    }
}
