//! Linux mode's answer first: the kernel and how the boot went, the windows side by side
//! (the same headline columns as `mtex run`'s summary, from the same counters), the trapped
//! writes counted, the problems; everything else is in report.txt.

use super::report::LinuxView;
use crate::output::summary;
use crate::output::text::{Lines, clean};

/// A window's row label: `window 1: mtex-work --window 1 getpid --tcf0 sync`.
fn window_label(r: &LinuxView, p: &crate::model::results::PhaseOut) -> String {
    let name = &p.name;
    match r.label(p.id) {
        Some(l) => format!("{}: {}", clean(name), clean(l)),
        None => clean(name).into_owned(),
    }
}

/// The windows' table.
fn windows(r: &LinuxView) -> summary::Group {
    let phases = r
        .doc
        .runs
        .iter()
        .filter(|run| run.repeat == 0)
        .flat_map(|run| run.phases.iter().filter(|p| p.traced));
    summary::group("windows".into(), phases, |p| window_label(r, p))
}

/// The first two lines: the kernel, and how far it got.
fn preface(r: &LinuxView) -> [String; 2] {
    [
        format!(
            "mtex linux: {} {} ({}, Image sha256 {}), {}, {}",
            clean(&r.kernel.package),
            clean(&r.kernel.version),
            clean(&r.kernel.release),
            clean(&r.kernel.sha256[..r.kernel.sha256.len().min(16)]),
            super::report::cpus(r),
            super::report::how_booted(r)
        ),
        format!(
            "  /init reached: {}; workload status: {}; ended: {}; TCR_EL1.TCMA1 {}",
            if r.reached_init { "yes" } else { "no" },
            r.workload_status.map_or("-".into(), |s| s.to_string()),
            clean(&r.exit),
            if super::report::tcma1_set(r) {
                "set by the kernel"
            } else {
                "clear"
            }
        ),
    ]
}

/// The results page of a Linux-mode run.
pub fn page(r: &LinuxView) -> anyhow::Result<String> {
    let mut lines = preface(r).to_vec();
    lines.extend(
        r.unclosed_windows
            .iter()
            .map(|w| format!("window {}: NEVER CLOSED, not measured (no counts)", w.id)),
    );
    crate::output::html::page_with(r.doc, &[windows(r)], "window", &lines)
}

/// The summary of a Linux-mode run; `rest` says where the full report is.
pub fn render(r: &LinuxView, rest: Option<&str>) -> String {
    let mut out = Lines::default();
    for l in preface(r) {
        out.push(&l);
    }
    let g = windows(r);
    if !g.rows.is_empty() {
        out.blank();
        for l in summary::table_lines(std::slice::from_ref(&g), "window") {
            out.push(&l);
        }
        out.blank();
        out.push(&format!("  {}", summary::LEGEND));
    }
    // Sampled windows: estimates with their intervals, never in the exact table.
    let sampled = summary::sampled_table(r.doc, "windows", "window", |p| window_label(r, p));
    if !sampled.is_empty() {
        out.blank();
        for l in sampled {
            out.push(&l);
        }
    }
    for w in &r.unclosed_windows {
        out.push(&format!(
            "  window {}{}: NEVER CLOSED, not measured (no counts)",
            w.id,
            w.label
                .as_deref()
                .map_or(String::new(), |l| format!(" ({})", clean(l)))
        ));
    }
    let count = |name: &str| r.writes.iter().filter(|w| w.register == name).count();
    out.blank();
    out.push(&format!(
        "MTE control writes trapped: {} (SCTLR_EL1 {}, TCR_EL1 {}); kernel symbols: {}",
        r.writes.len(),
        count("SCTLR_EL1"),
        count("TCR_EL1"),
        r.symbols
    ));
    if !r.problems().is_empty() || !r.notes().is_empty() {
        out.blank();
    }
    for p in r.problems() {
        out.push(&format!("PROBLEM: {}", clean(p)));
    }
    for n in r.notes() {
        out.push(&format!("NOTE: {}", clean(n)));
    }
    if let Some(rest) = rest {
        out.blank();
        out.push(&format!(
            "Not shown here: each window's counters in every view, the trapped writes by \
             kernel function, the registers' last values, the workload's output ({}).",
            clean(rest)
        ));
    }
    out.into_string()
}
