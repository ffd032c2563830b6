//! The text report in `perf stat`'s manner, fitting [`WIDTH`](crate::output::text::WIDTH) columns: per run and phase one
//! counter per line under perf's names with thousands separators, then the run's trapped
//! writes, problems and how it ended; the scenario's expectations last.
//!
//! Every string of the document is shown through [`clean`] and every line through [`Lines`],
//! so that no document — whatever its names, console or problems hold — can exceed the width,
//! move the terminal's cursor, or make this panic.

use crate::model::results::{PhaseOut, Results, Run, WriteOut};
use crate::output::text::{Lines, WRITES_LISTED, clean, signed_thousands, thousands};
use mtex_abi::scenario::Workload;
use std::collections::BTreeSet;

/// Where the counter names start on a counter line (perf stat's layout: the value
/// right-aligned in 18 columns, then 6 spaces).
const VALUE_COLUMNS: usize = 18;
/// The width the names are padded to, so that the notes line up: the longest standard name
/// (`if_kernel_tco.mem_access_checked_rd:k`).
const NAME_COLUMNS: usize = 37;

/// `futex-hash i=32 s=16 t=16 tcf0=sync`: the workload and the parameters that mean
/// something for it (all those given, for a workload this mtex does not know), or None for a
/// phase that is not a (policy, workload) run.
pub fn workload_label(p: &PhaseOut) -> Option<String> {
    let name = p.workload.as_deref()?;
    let known = Workload::ALL
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, w)| *w);
    // `-` in units: the parameter means nothing for the workload.
    let (size_unit, tasks_unit) = known.map_or(("", ""), |w| w.units());
    let mut s = clean(name).into_owned();
    for (key, v, unit) in [
        ("i", p.iters, ""),
        ("s", p.size, size_unit),
        ("t", p.tasks, tasks_unit),
    ] {
        if let Some(v) = v
            && unit != "-"
        {
            s.push_str(&format!(" {key}={v}"));
        }
    }
    if let Some(t) = &p.tcf0 {
        s.push_str(&format!(" tcf0={}", clean(t)));
    }
    // Counted on several CPUs: the workload ran once on each, and the figures are the sum.
    if p.cpus.len() > 1 {
        s.push_str(&format!(", once on each of {} CPUs (summed)", p.cpus.len()));
    }
    Some(s)
}

/// `'futex-hash i=32 s=16 t=16 tcf0=sync' under entry-tco`, or `phase 'mte-sync'` for a
/// phase that is not a (policy, workload) run.
pub fn phase_title(p: &PhaseOut) -> String {
    let what = match workload_label(p) {
        Some(l) if l.split(' ').next() == Some(&*clean(&p.name)) => format!("'{l}'"),
        // A scenario that named the phase itself: both names.
        Some(l) => format!("'{}' ({l})", clean(&p.name)),
        None => format!("phase '{}'", clean(&p.name)),
    };
    match &p.policy {
        Some(pol) => format!("{what} under {}", clean(pol)),
        None => what,
    }
}

/// `run 1/1`, `baseline 2/3`: the run's name, its repeat and how many repeats of it the
/// document holds.
pub fn run_label(doc: &Results, run: &Run) -> String {
    let of = doc.runs.iter().filter(|r| r.name == run.name).count() as u64;
    let nth = u64::from(run.repeat) + 1;
    format!("{} {nth}/{}", clean(&run.name), of.max(nth))
}

/// Which counters a phase's block shows, in order, under a note on the group's first shown
/// line; `true`: shown even when zero (when the phase has the counter at all).
const GROUPS: &[(&str, &[(&str, bool)])] = &[
    (
        "architectural (AmpereOne-like)",
        &[
            ("mem_access_checked_rd:k", true),
            ("mem_access_checked_wr:k", true),
            ("mem_access_checked_rd:u", true),
            ("mem_access_checked_wr:u", true),
        ],
    ),
    (
        "where TCF ≠ NONE (Arm cores, QEMU)",
        &[
            ("tcf_elided.mem_access_checked_rd:k", true),
            ("tcf_elided.mem_access_checked_wr:k", true),
            ("tcf_elided.mem_access_checked_rd:u", true),
            ("tcf_elided.mem_access_checked_wr:u", true),
        ],
    ),
    (
        "LDTR/STTR at EL1, checked, in :k",
        &[("uaccess_checked_rd", true), ("uaccess_checked_wr", true)],
    ),
    (
        "LDTR/STTR at EL1, all",
        &[("uaccess_rd", false), ("uaccess_wr", false)],
    ),
    (
        "traced, per EL",
        &[("instructions:k", true), ("instructions:u", true)],
    ),
    (
        "PMU, per EL",
        &[("pmu.instructions:k", true), ("pmu.instructions:u", true)],
    ),
    (
        "PMU, untraced pass (full speed)",
        &[
            ("untraced.cycles:k", true),
            ("untraced.cycles:u", true),
            ("untraced.instructions:k", true),
            ("untraced.instructions:u", true),
        ],
    ),
    (
        "this CPU's PMU, traced phase",
        &[
            ("pmu.mem_access_checked_rd:k", true),
            ("pmu.mem_access_checked_wr:k", true),
            ("pmu.mem_access_checked_rd:u", true),
            ("pmu.mem_access_checked_wr:u", true),
        ],
    ),
    (
        "this CPU's PMU, untraced",
        &[
            ("untraced.mem_access_checked_rd:k", true),
            ("untraced.mem_access_checked_wr:k", true),
            ("untraced.mem_access_checked_rd:u", true),
            ("untraced.mem_access_checked_wr:u", true),
        ],
    ),
    (
        "MSR TCO, breakpoints, untraced",
        &[("untraced.tco_writes", true), ("untraced.tco_sites", false)],
    ),
    ("untraced passes", &[("untraced.passes", false)]),
    ("MSR TCO executed", &[("tco_writes", true)]),
    ("PSTATE.TCO changes", &[("tco_changes", false)]),
    (
        "system calls, EL0 aborts",
        &[("kernel_entries.sync_el0", true)],
    ),
    ("interrupts from EL0", &[("kernel_entries.irq_el0", true)]),
    ("EL1 faults", &[("kernel_entries.sync_el1", false)]),
    ("interrupts from EL1", &[("kernel_entries.irq_el1", false)]),
    ("FIQ, SError, AArch32", &[("kernel_entries.other", false)]),
    ("MRS TFSR_EL1/TFSRE0_EL1", &[("tfsr_reads", true)]),
    ("barriers", &[("dsb", true), ("isb", true), ("dmb", false)]),
    ("STG, DC GVA …", &[("tag_store_insns", false)]),
    ("16-byte granules", &[("granules_tagged", false)]),
    ("SCTLR_EL1/TCR_EL1 writes", &[("trapped_writes", true)]),
    (
        "trapped, emulated",
        &[
            ("pmu_register_accesses", false),
            ("debug_register_accesses", false),
            ("wfx_traps", false),
        ],
    ),
    ("synchronous, taken", &[("tag_check_faults", true)]),
    (
        "had TCR_EL1.TCMA1 been set",
        &[
            ("if_tcma1.mem_access_checked_rd:k", false),
            ("if_tcma1.mem_access_checked_wr:k", false),
            ("if_tcma1.mem_access_checked_rd:u", false),
            ("if_tcma1.mem_access_checked_wr:u", false),
        ],
    ),
    (
        "had EL1 kept PSTATE.TCO set",
        &[
            ("if_kernel_tco.mem_access_checked_rd:k", false),
            ("if_kernel_tco.mem_access_checked_wr:k", false),
            ("if_kernel_tco.mem_access_checked_rd:u", false),
            ("if_kernel_tco.mem_access_checked_wr:u", false),
        ],
    ),
    (
        "every data access",
        &[
            ("mem_access_rd:k", false),
            ("mem_access_wr:k", false),
            ("mem_access_rd:u", false),
            ("mem_access_wr:u", false),
        ],
    ),
    (
        "hypervisor (EL2), PMU",
        &[
            ("pmu.instructions:h", false),
            ("untraced.instructions:h", false),
        ],
    ),
    ("guest exits to EL2", &[("exits", false)]),
    ("of them single steps", &[("step_exits", false)]),
    ("", &[("virtual_irqs", false), ("emulated", false)]),
    (
        "not in the access counts",
        &[("failed_store_exclusives", false)],
    ),
];

/// The first counter of the group after which the CPU's missing events are listed.
const SILICON_FIRST: &str = "untraced.mem_access_checked_rd:k";

/// One counter line: `             1,272      mem_access_checked_rd:k   #  note`.
fn counter_line(value: u64, name: &str, note: &str) -> String {
    let mut l = format!(
        "{:>VALUE_COLUMNS$}      {:<NAME_COLUMNS$}",
        thousands(value),
        clean(name)
    );
    if !note.is_empty() {
        l.push_str("  #  ");
        l.push_str(note);
    }
    l
}

/// A phase's block: its title, its counters, the guest time it took.
fn phase_block(out: &mut Lines, doc: &Results, run: &Run, p: &PhaseOut) {
    out.blank();
    out.push(&format!(
        " Performance counter stats for {} ({}):",
        phase_title(p),
        run_label(doc, run)
    ));
    if p.partial {
        out.push("   (partial: the run ended inside this phase; its counts go up to there)");
    }
    match &p.sampled {
        Some(s) => sampled_lines(out, s, &p.estimates),
        None if !p.traced => out.push("   (not traced: the hypervisor's own counters only)"),
        None => {}
    }
    out.blank();
    let mut listed = BTreeSet::new();
    for (note, members) in GROUPS {
        let mut note = *note;
        for (name, always) in *members {
            listed.insert(*name);
            let Some(&v) = p.counters.get(*name) else {
                continue;
            };
            if v != 0 || *always {
                out.push(&counter_line(v, name, note));
                note = "";
            }
        }
        if members.first().map(|m| m.0) == Some(SILICON_FIRST) {
            // Events the CPU does not have (perf's own words), or whose pass never ran: never
            // a 0.
            let missing = p.not_supported.iter().map(|n| ("<not supported>", n));
            let uncounted = p.not_counted.iter().map(|n| ("<not counted>", n));
            for (what, name) in missing.chain(uncounted) {
                let mut l = format!(
                    "{:>VALUE_COLUMNS$}      {:<NAME_COLUMNS$}",
                    what,
                    clean(name)
                );
                if !note.is_empty() {
                    l.push_str("  #  ");
                    l.push_str(note);
                    note = "";
                }
                out.push(&l);
            }
            for line in silicon_vs_model(p) {
                out.push(&line);
            }
        }
    }
    // Counters this renderer has no place for (a newer mtex's): none is hidden.
    let mut zero = 0;
    for (name, &v) in &p.counters {
        if listed.contains(name.as_str()) {
            if v == 0
                && !GROUPS
                    .iter()
                    .any(|(_, m)| m.contains(&(name.as_str(), true)))
            {
                zero += 1;
            }
        } else if v != 0 {
            out.push(&counter_line(v, name, ""));
        } else {
            zero += 1;
        }
    }
    if zero > 0 {
        out.push(&format!(
            "{:VALUE_COLUMNS$}      ({zero} other counter{} zero)",
            "",
            if zero == 1 { "" } else { "s" }
        ));
    }
    if !p.cpus.is_empty() {
        out.blank();
        out.push(&format!(
            "   counted on {} CPUs, each its own share (the figures above are their sum):",
            p.cpus.len()
        ));
        for share in &p.cpus {
            let v = |n: &str| share.counters.get(n).copied().unwrap_or(0);
            out.push(&format!(
                "   CPU {:<3} instr. {}:k {}:u; checked rd:k {} wr:k {} rd:u {} wr:u {}",
                share.cpu,
                thousands(v("instructions:k")),
                thousands(v("instructions:u")),
                thousands(v("mem_access_checked_rd:k")),
                thousands(v("mem_access_checked_wr:k")),
                thousands(v("mem_access_checked_rd:u")),
                thousands(v("mem_access_checked_wr:u")),
            ));
        }
    }
    if let Some(secs) = elapsed(run, p) {
        out.blank();
        out.push(&format!(
            "{secs:>VALUE_COLUMNS$.9} seconds guest time elapsed"
        ));
    }
    let by_function = crate::profile::text::section(
        &p.functions,
        &p.stacks,
        p.profile
            .as_ref()
            .and_then(|f| f.stack_end)
            .map(|e| e.stats),
    );
    if !by_function.is_empty() {
        out.blank();
    }
    for l in by_function {
        out.push(&l);
    }
}

/// A sampled phase's estimates, in the counters' table order, each with its interval; then
/// (in the block below) its exact counters, the PMU's and the hypervisor's own.
fn sampled_lines(
    out: &mut Lines,
    s: &crate::model::results::SampledOut,
    estimates: &std::collections::BTreeMap<String, crate::model::results::EstimateOut>,
) {
    if s.whole {
        out.push(&format!(
            "   (sampled whole: {} units of {} instructions back to back; every instruction traced)",
            thousands(s.units as u64),
            thousands(s.unit_instructions as u64)
        ));
    } else {
        out.push(&format!(
            "   (sampled: {} units of {} instructions, random gaps of 0-{} µs, seed {}; \
             estimates with their 95% confidence intervals)",
            thousands(s.units as u64),
            thousands(s.unit_instructions as u64),
            thousands(2 * s.gap_us as u64),
            s.seed
        ));
    }
    out.blank();
    let mut zero = 0;
    for c in mtex_abi::counters::all() {
        let Some(e) = estimates.get(c.name) else {
            continue;
        };
        let est = e.estimate();
        if est.none_seen() {
            zero += 1;
            continue;
        }
        if est.exact {
            out.push(&counter_line(
                est.value.round() as u64,
                c.name,
                "exact: every instruction traced",
            ));
            continue;
        }
        let shown = est.to_string();
        // `62,541 ± 0.8% (95% CI, 312 units)`: the figure in the value column, the rest as
        // the note (`~62,541 (not estimable: ...)` for one without an interval).
        let (value, note) = shown.split_once(' ').unwrap_or((shown.as_str(), ""));
        let mut l = format!(
            "{:>VALUE_COLUMNS$}      {:<NAME_COLUMNS$}",
            value,
            clean(c.name)
        );
        l.push_str("  #  ");
        l.push_str(note);
        out.push(&l);
    }
    if zero > 0 {
        out.push(&format!(
            "{:VALUE_COLUMNS$}      ({zero} other estimate{} 0 in every unit)",
            "",
            if zero == 1 { " is" } else { "s are" }
        ));
    }
}

/// Where the CPU's PMU counted the MTE events and the phase was traced: the silicon's counts
/// against the model's two views, so that a run shows which one this CPU follows (AmpereOne
/// checks kernel accesses with TCF=NONE: the architectural view; Arm cores do not: the
/// TCF-elided one). The traced phase's own count (`pmu.`, the same execution) is preferred;
/// else the untraced pass's (`untraced.`, the same work at full speed, where a small
/// difference is an interrupt landing elsewhere).
pub fn silicon_vs_model(p: &PhaseOut) -> Vec<String> {
    let mut out = Vec::new();
    for suffix in ["rd:k", "wr:k", "rd:u", "wr:u"] {
        let get = |prefix: &str| {
            p.counters
                .get(&format!("{prefix}mem_access_checked_{suffix}"))
                .copied()
        };
        let (Some(silicon), Some(arch), Some(elided)) = (
            get("pmu.").or_else(|| get("untraced.")),
            get(""),
            get("tcf_elided."),
        ) else {
            continue;
        };
        let diff = |model: u64| signed_thousands(i128::from(silicon) - i128::from(model));
        out.push(format!(
            "{:VALUE_COLUMNS$}      silicon − model, {suffix}: {} against architectural, {} against TCF-elided",
            "",
            diff(arch),
            diff(elided)
        ));
    }
    out
}

/// The phase's length in seconds of the guest's counter, when it ended and the counter's
/// frequency is known.
fn elapsed(run: &Run, p: &PhaseOut) -> Option<f64> {
    let hz = run.boot.as_ref()?.counter_hz;
    let ticks = p.end_ts?.checked_sub(p.begin_ts)?;
    (hz > 0).then(|| ticks as f64 / hz as f64)
}

/// `EL1`.
fn el(e: u8) -> String {
    format!("EL{e}")
}

/// The run's trapped writes: the first [`WRITES_LISTED`], each with the MTE fields it
/// changed on a second line; past them, all of them by place.
fn trap_log(out: &mut Lines, doc: &Results, run: &Run) {
    if run.writes.is_empty() {
        return;
    }
    out.blank();
    out.push(&format!(
        " Trapped writes ({}): {}; old → new, EL, PSTATE.TCO, pc; MTE fields changed (phase)",
        run_label(doc, run),
        thousands(run.writes.len() as u64)
    ));
    out.blank();
    for w in run.writes.iter().take(WRITES_LISTED) {
        write_lines(out, w);
    }
    if run.writes.len() > WRITES_LISTED {
        out.push(&format!(
            "{:>8}  … {} more (all in report.json); all {} by place:",
            "",
            thousands((run.writes.len() - WRITES_LISTED) as u64),
            thousands(run.writes.len() as u64)
        ));
        let sites: Vec<crate::output::tables::WriteSite> = run
            .writes
            .iter()
            .map(|w| crate::output::tables::WriteSite {
                register: &w.register,
                changes: &w.changes,
                place: w.symbol.clone().unwrap_or_else(|| w.pc.clone()),
                cpu: w.cpu,
            })
            .collect();
        for l in crate::output::tables::writes_by_site(&sites)
            .to_string()
            .lines()
        {
            out.push(&clean(l));
        }
    }
}

/// One trapped write, on two lines: `      19  TCR_EL1    0x62b5193519 → 0x4000062b5193519
/// EL1 TCO=0  pc 0xffffff8041005998`, then the fields changed and the phase it was in.
fn write_lines(out: &mut Lines, w: &WriteOut) {
    out.push(&format!(
        "{:>8}  {:<10} {:<39}  {} TCO={}  pc {}",
        w.seq,
        clean(&w.register),
        format!("{} → {}", clean(&w.old), clean(&w.new)),
        el(w.el),
        u8::from(w.tco),
        clean(&w.pc),
    ));
    if let Some(sym) = &w.symbol {
        out.push(&format!("{:10}in {}", "", clean(sym)));
    }
    let mut changes = if w.changes.is_empty() {
        "no MTE field changed".to_string()
    } else {
        w.changes
            .iter()
            .map(|c| clean(c))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if let Some(p) = &w.phase {
        changes.push_str(&format!("  (in {})", clean(p)));
    }
    out.push(&format!("{:10}{changes}", ""));
}

/// One run: its boot, its phases' blocks, its trapped writes, console, problems and end.
fn run_text(out: &mut Lines, doc: &Results, run: &Run) {
    let label = run_label(doc, run);
    out.blank();
    match &run.boot {
        Some(b) => out.push(&format!(
            "mtex {label}: {}, MIDR_EL1 {} ({}), traps {}, counter at {} Hz",
            clean(&b.path),
            clean(&b.midr),
            if b.emulator { "an emulator" } else { "silicon" },
            clean(&b.traps),
            thousands(b.counter_hz),
        )),
        None => out.push(&format!("mtex {label}: no boot record")),
    }
    for p in &run.phases {
        phase_block(out, doc, run, p);
    }
    trap_log(out, doc, run);
    if !run.console.is_empty() {
        out.blank();
        out.push(&format!(" Guest console ({label}):"));
        for l in &run.console {
            out.push(&format!("   {}", clean(l)));
        }
    }
    if !run.problems.is_empty() || !run.notes.is_empty() {
        out.blank();
    }
    for p in &run.problems {
        out.push(&format!("PROBLEM: {}", clean(p)));
    }
    for n in &run.notes {
        out.push(&format!("NOTE: {}", clean(n)));
    }
    out.blank();
    out.push(&format!(
        " {label} ended: {} — {}",
        clean(&run.end),
        if run.success { "success" } else { "FAILED" }
    ));
}

/// The whole document as text, every line at most [`WIDTH`](crate::output::text::WIDTH) columns.
pub fn render(doc: &Results) -> String {
    let mut out = Lines::default();
    let n = doc.runs.len();
    out.push(&format!(
        "mtex {} report ({} v{}): {} run{}{}",
        clean(&doc.mtex),
        clean(&doc.schema),
        doc.version,
        n,
        if n == 1 { "" } else { "s" },
        doc.scenario
            .as_deref()
            .map_or(String::new(), |s| format!(" of scenario {}", clean(s)))
    ));
    for run in &doc.runs {
        run_text(&mut out, doc, run);
    }
    if !doc.expectations.is_empty() {
        out.blank();
        out.push(" Expectations:");
        out.blank();
        for e in &doc.expectations {
            out.push(&expectation_line(e));
        }
    }
    out.blank();
    out.push(doc.verdict_line());
    out.into_string()
}

/// An expectation as the text forms list it: its verdict, its words, the values it was judged on.
pub fn expectation_line(e: &crate::model::results::Expectation) -> String {
    format!(
        "   {}  {} ({})",
        e.verdict(),
        clean(&e.text),
        clean(&e.detail)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The text shows only counters the one table defines: a renamed or removed counter
    /// cannot linger here under a name that no longer says what it holds.
    #[test]
    fn every_counter_shown_is_defined() {
        for (_, members) in GROUPS {
            for (name, _) in *members {
                assert!(
                    mtex_abi::counters::lookup(name).is_some(),
                    "{name} is not in mtex_abi::counters"
                );
            }
        }
    }
}
