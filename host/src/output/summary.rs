//! The answer first: per workload, one table of policies × the headline counters, then the
//! expectations and the problems. The text report and the results page both draw it from
//! [`tables`]; every figure in it is a sum of counters named in `mtex_abi::counters`, so that
//! a column says exactly what the per-phase blocks, the JSON and the CSV hold.

use crate::model::results::{PhaseOut, Results, Run};
use crate::output::full::{phase_title, run_label, workload_label};
use crate::output::text::{Lines, WIDTH, clean, thousands};

/// A column of the summary: a header in two lines and the counters it adds up (all of them
/// must be in the phase for the cell to show a figure; else `-`, never a 0).
pub struct Column {
    pub top: &'static str,
    pub bottom: &'static str,
    pub counters: &'static [&'static str],
}

/// The headline counters, in the order shown.
pub const COLUMNS: &[Column] = &[
    Column {
        top: "checked",
        bottom: "rd:k",
        counters: &["mem_access_checked_rd:k"],
    },
    Column {
        top: "",
        bottom: "wr:k",
        counters: &["mem_access_checked_wr:k"],
    },
    Column {
        top: "",
        bottom: "rd:u",
        counters: &["mem_access_checked_rd:u"],
    },
    Column {
        top: "",
        bottom: "wr:u",
        counters: &["mem_access_checked_wr:u"],
    },
    Column {
        top: "elided",
        bottom: ":k",
        counters: &[
            "tcf_elided.mem_access_checked_rd:k",
            "tcf_elided.mem_access_checked_wr:k",
        ],
    },
    Column {
        top: "TCMA1",
        bottom: ":k",
        counters: &[
            "if_tcma1.mem_access_checked_rd:k",
            "if_tcma1.mem_access_checked_wr:k",
        ],
    },
    Column {
        top: "MSR",
        bottom: "TCO",
        counters: &["tco_writes"],
    },
    Column {
        top: "instr.",
        bottom: "k+u",
        counters: &["instructions:k", "instructions:u"],
    },
];

/// What the change column compares: the checked kernel accesses, reads and writes.
const CHANGE_OF: &[&str] = &["mem_access_checked_rd:k", "mem_access_checked_wr:k"];

/// What the columns mean, under the tables.
pub const LEGEND: &str = "Exact counts of every traced instruction. checked = \
    architecturally tag-checked, as AmpereOne's mem_access_checked_* count (TCF does not \
    matter); elided :k = checked rd+wr where the EL's TCF is not NONE (Arm cores, QEMU); TCMA1 \
    :k = checked rd+wr had TCR_EL1.TCMA1 been set; vs first = checked rd+wr :k against the \
    first row; * = partial.";

/// One row: a policy (or a phase) and its cells, one per [`COLUMNS`] entry, then the change.
pub struct Row {
    pub label: String,
    pub cells: Vec<Option<u64>>,
    /// Against the group's first row (`=` for the first itself).
    pub change: String,
}

/// The rows of one workload (with its parameters and user mode) in one run.
pub struct Group {
    pub title: String,
    pub rows: Vec<Row>,
}

/// The sum of `names` in `p`, or None when one of them is not there.
fn sum(p: &PhaseOut, names: &[&str]) -> Option<u64> {
    names.iter().try_fold(0u64, |acc, n| {
        Some(acc.saturating_add(*p.counters.get(*n)?))
    })
}

/// The change from `base` to `n`, as perf prints it: `-97.5%`, `+0.0%`; `n/a` from zero.
pub fn change(base: u64, n: u64) -> String {
    if base == 0 {
        return if n == 0 { "+0.0%".into() } else { "n/a".into() };
    }
    let pct = (n as f64 - base as f64) * 100.0 / base as f64;
    format!("{pct:+.1}%")
}

/// How a run's groups are titled: the workload with its parameters, or the run's phases.
fn group_title(doc: &Results, run: &Run, p: &PhaseOut) -> String {
    let what = workload_label(p).unwrap_or_else(|| "phases".to_string());
    let several = doc.runs.iter().filter(|r| r.repeat == 0).count() > 1;
    if several {
        format!("{what} ({})", clean(&run.name))
    } else {
        what
    }
}

/// A row's label: the policy (with the phase's own name where the scenario gave one), or
/// the phase's name.
fn row_label(p: &PhaseOut) -> String {
    let mut l = match &p.policy {
        Some(pol) if p.workload.is_some() => clean(pol).into_owned(),
        _ => phase_title(p),
    };
    if p.partial {
        l.push_str(" *");
    }
    l
}

/// One group of rows, each compared with the first: `label` names a phase's row.
pub fn group<'a>(
    title: String,
    phases: impl IntoIterator<Item = &'a PhaseOut>,
    label: impl Fn(&PhaseOut) -> String,
) -> Group {
    let mut g = Group {
        title,
        rows: Vec::new(),
    };
    let mut base = None;
    for p in phases {
        push_row(&mut g, &mut base, p, label(p));
    }
    g
}

/// One group of rows given with their labels, each compared with the first.
pub fn group_labelled(title: String, rows: Vec<(&PhaseOut, String)>) -> Group {
    let mut g = Group {
        title,
        rows: Vec::new(),
    };
    let mut base = None;
    for (p, label) in rows {
        push_row(&mut g, &mut base, p, label);
    }
    g
}

/// Adds `p`'s row to `g`; `base` is the group's first row's checked :k (None until there
/// is a first row, or when it had none).
fn push_row(g: &mut Group, base: &mut Option<u64>, p: &PhaseOut, label: String) {
    let k = sum(p, CHANGE_OF);
    let change = if g.rows.is_empty() {
        *base = k;
        if k.is_some() { "=" } else { "-" }.to_string()
    } else {
        match (*base, k) {
            (Some(b), Some(k)) => change(b, k),
            _ => "-".to_string(),
        }
    };
    g.rows.push(Row {
        label,
        cells: COLUMNS.iter().map(|c| sum(p, c.counters)).collect(),
        change,
    });
}

/// The traced phases of each run's first repeat, grouped by workload in the order they first
/// ran; the rows of a group in phase order.
pub fn tables(doc: &Results) -> Vec<Group> {
    let mut groups: Vec<Group> = Vec::new();
    for run in doc.runs.iter().filter(|r| r.repeat == 0) {
        let first = groups.len();
        let mut bases: Vec<Option<u64>> = Vec::new();
        for p in run.phases.iter().filter(|p| p.traced) {
            let title = group_title(doc, run, p);
            let i = match groups[first..].iter().position(|g| g.title == title) {
                Some(i) => i,
                None => {
                    groups.push(Group {
                        title,
                        rows: Vec::new(),
                    });
                    bases.push(None);
                    groups.len() - 1 - first
                }
            };
            push_row(&mut groups[first + i], &mut bases[i], p, row_label(p));
        }
    }
    groups
}

/// A cell as text: the figure with thousands separators, or `-` when not counted.
fn cell(v: Option<u64>) -> String {
    v.map_or_else(|| "-".to_string(), thousands)
}

/// The tables as text lines of at most [`WIDTH`] columns: one header, then per group its
/// title and its rows. A label too long for the label column goes on a line of its own.
pub fn table_lines(groups: &[Group], label_header: &str) -> Vec<String> {
    let change_header = ("vs", "first");
    let widths: Vec<usize> = COLUMNS
        .iter()
        .enumerate()
        .map(|(i, c)| {
            groups
                .iter()
                .flat_map(|g| &g.rows)
                .map(|r| cell(r.cells[i]).chars().count())
                .chain([c.top.chars().count(), c.bottom.chars().count()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let change_width = groups
        .iter()
        .flat_map(|g| &g.rows)
        .map(|r| r.change.chars().count())
        .chain([change_header.0.len(), change_header.1.len()])
        .max()
        .unwrap_or(0);
    // Rows are indented under their group's title by 3.
    let longest = groups
        .iter()
        .flat_map(|g| &g.rows)
        .map(|r| r.label.chars().count() + 3)
        .max()
        .unwrap_or(0);
    let figures = |gap: usize| widths.iter().map(|w| w + gap).sum::<usize>() + change_width + gap;
    // Two spaces between columns where every label still fits, else one.
    let gap = if longest + figures(2) <= WIDTH { 2 } else { 1 };
    let label_width = longest.min(WIDTH.saturating_sub(figures(gap))).max(12);
    let line = |label: &str, cells: Vec<String>, change: &str| {
        let mut l = format!("{label:<label_width$}");
        for (c, w) in cells.iter().zip(&widths) {
            l.push_str(&format!("{:>width$}", c, width = w + gap));
        }
        l.push_str(&format!("{:>width$}", change, width = change_width + gap));
        l
    };
    let mut out = vec![
        line(
            "",
            COLUMNS.iter().map(|c| c.top.to_string()).collect(),
            change_header.0,
        ),
        line(
            &format!(" {label_header}"),
            COLUMNS.iter().map(|c| c.bottom.to_string()).collect(),
            change_header.1,
        ),
    ];
    for g in groups {
        out.push(format!(" {}", g.title));
        for r in &g.rows {
            let label = format!("   {}", r.label);
            let cells = r.cells.iter().map(|v| cell(*v)).collect();
            if label.chars().count() > label_width {
                out.push(label);
                out.push(line("", cells, &r.change));
            } else {
                out.push(line(&label, cells, &r.change));
            }
        }
    }
    out
}

/// The checked accesses the sampled table shows, as estimates.
pub const SAMPLED_COLUMNS: &[(&str, &str)] = &[
    ("rd:k", "mem_access_checked_rd:k"),
    ("wr:k", "mem_access_checked_wr:k"),
    ("rd:u", "mem_access_checked_rd:u"),
    ("wr:u", "mem_access_checked_wr:u"),
];

/// The sampled phases of each run's first repeat, one line each: every headline checked
/// count as an estimate with its interval, never in the exact tables.
pub fn sampled_lines(doc: &Results) -> Vec<String> {
    sampled_table(doc, "phases", "phase", |p| match workload_label(p) {
        Some(w) => format!("{} {}", row_label(p), w),
        None => row_label(p),
    })
}

/// The table of [`sampled_lines`], its title naming the `things` sampled (`windows` in
/// Linux mode), its last column headed `what` and labelled by `label`.
pub fn sampled_table(
    doc: &Results,
    things: &str,
    what: &str,
    label: impl Fn(&PhaseOut) -> String,
) -> Vec<String> {
    let mut rows = Vec::new();
    for run in doc.runs.iter().filter(|r| r.repeat == 0) {
        for p in run.phases.iter().filter(|p| p.sampled.is_some()) {
            let cells = |estimates: &std::collections::BTreeMap<
                String,
                crate::model::results::EstimateOut,
            >|
             -> Vec<String> {
                SAMPLED_COLUMNS
                    .iter()
                    .map(|(_, name)| match estimates.get(*name) {
                        Some(e) => {
                            let e = e.estimate();
                            if e.exact {
                                thousands(e.value.round() as u64)
                            } else if e.none_seen() {
                                // No unit met one: none seen, which is not "exactly none".
                                "0 seen".to_string()
                            } else if e.has_interval() {
                                format!(
                                    "{} ±{}",
                                    thousands(e.value.round() as u64),
                                    crate::model::sample::percent(e.relative())
                                )
                            } else {
                                // Too few units, or too few that met it: no figure to stand by.
                                "not estimable".to_string()
                            }
                        }
                        None => "-".to_string(),
                    })
                    .collect()
            };
            let units = p.sampled.as_ref().map_or(0, |s| s.units);
            rows.push((label(p), cells(&p.estimates), units));
            // Sampled on several CPUs: each CPU's share, from its own units.
            for c in &p.cpu_estimates {
                rows.push((format!("  CPU {}", c.cpu), cells(&c.estimates), c.units));
            }
        }
    }
    if rows.is_empty() {
        return Vec::new();
    }
    let mut out = vec![format!(
        " Sampled {things}: estimates, ± the 95% confidence interval (checked accesses)"
    )];
    let widths: Vec<usize> = (0..SAMPLED_COLUMNS.len())
        .map(|i| {
            rows.iter()
                .map(|r| r.1[i].chars().count())
                .chain([SAMPLED_COLUMNS[i].0.len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut header = String::from("   ");
    for ((h, _), w) in SAMPLED_COLUMNS.iter().zip(&widths) {
        header.push_str(&format!("{h:>w$}  "));
    }
    header.push_str(&format!("units  {what}"));
    out.push(header);
    for (label, cells, units) in rows {
        let mut l = String::from("   ");
        for (c, w) in cells.iter().zip(&widths) {
            l.push_str(&format!("{c:>w$}  "));
        }
        l.push_str(&format!(
            "{:>5}  {}",
            thousands(units as u64),
            clean(&label)
        ));
        out.push(l);
    }
    out
}

/// What the full report has that the summary leaves out, in words (`56 per-phase counter
/// blocks, 20 trapped writes, 112 lines of guest console`), or None when nothing is.
pub fn left_out(doc: &Results) -> Option<String> {
    let phases: usize = doc.runs.iter().map(|r| r.phases.len()).sum();
    let writes: usize = doc.runs.iter().map(|r| r.writes.len()).sum();
    let console: usize = doc.runs.iter().map(|r| r.console.len()).sum();
    let plural = |n: usize, one: &str, many: &str| {
        format!(
            "{} {}",
            thousands(n as u64),
            if n == 1 { one } else { many }
        )
    };
    let parts: Vec<String> = [
        (
            phases,
            "per-phase counter block",
            "per-phase counter blocks",
        ),
        (writes, "trapped write", "trapped writes"),
        (console, "line of guest console", "lines of guest console"),
    ]
    .into_iter()
    .filter(|(n, _, _)| *n > 0)
    .map(|(n, one, many)| plural(n, one, many))
    .collect();
    (!parts.is_empty()).then(|| parts.join(", "))
}

/// The summary as text: the tables, the expectations, every run's problems and notes, and
/// (when `rest` says where the rest is: `all in DIR/report.txt, or add --verbose`) one line
/// saying what is left out and where; the verdict last, when `verdict`.
pub fn render(doc: &Results, rest: Option<&str>, verdict: bool) -> String {
    let mut out = Lines::default();
    let n = doc.runs.len();
    out.push(&format!(
        "mtex {}: {} run{}{}",
        clean(&doc.mtex),
        n,
        if n == 1 { "" } else { "s" },
        doc.scenario
            .as_deref()
            .map_or(String::new(), |s| format!(" of scenario {}", clean(s)))
    ));
    let groups = tables(doc);
    let sampled = sampled_lines(doc);
    if groups.is_empty() && sampled.is_empty() {
        out.blank();
        out.push(" No traced phase: no table of counts.");
    }
    if !sampled.is_empty() {
        out.blank();
        for l in sampled {
            out.push(&l);
        }
    }
    if !groups.is_empty() {
        out.blank();
        for l in table_lines(&groups, "policy") {
            out.push(&l);
        }
        out.blank();
        out.push(&format!("  {LEGEND}"));
    }
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
    let several = n > 1;
    let mut first = true;
    for run in &doc.runs {
        let who = if several {
            format!(" ({})", run_label(doc, run))
        } else {
            String::new()
        };
        let ended = (!run.success).then(|| format!("FAILED{who}: {}", clean(&run.end)));
        let lines = ended
            .into_iter()
            .chain(
                run.problems
                    .iter()
                    .map(|p| format!("PROBLEM{who}: {}", clean(p))),
            )
            .chain(run.notes.iter().map(|p| format!("NOTE{who}: {}", clean(p))));
        for l in lines {
            if first {
                out.blank();
                first = false;
            }
            out.push(&l);
        }
    }
    if let (Some(rest), Some(what)) = (rest, left_out(doc)) {
        out.blank();
        out.push(&format!("Not shown here: {what} ({}).", clean(rest)));
    }
    if verdict {
        out.blank();
        out.push(doc.verdict_line());
    }
    out.into_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every column adds up counters the one table defines: a renamed counter cannot leave a
    /// column showing a figure under a name that no longer says what it holds.
    #[test]
    fn every_column_is_made_of_defined_counters() {
        for name in COLUMNS.iter().flat_map(|c| c.counters).chain(CHANGE_OF) {
            assert!(
                mtex_abi::counters::lookup(name).is_some(),
                "{name} is not in mtex_abi::counters"
            );
        }
    }

    fn phase(policy: &str, workload: &str, rd_k: u64) -> PhaseOut {
        let mut counters = std::collections::BTreeMap::new();
        for c in COLUMNS.iter().flat_map(|c| c.counters) {
            counters.insert(c.to_string(), 1);
        }
        counters.insert("mem_access_checked_rd:k".into(), rd_k);
        PhaseOut {
            policy: Some(policy.into()),
            workload: Some(workload.into()),
            iters: Some(8),
            tcf0: Some("sync".into()),
            ..PhaseOut::example(workload, counters)
        }
    }

    fn doc(phases: Vec<PhaseOut>) -> Results {
        let run = Run {
            name: "matrix".into(),
            repeat: 0,
            success: true,
            end: "guest exited with status 0".into(),
            boot: None,
            phases,
            writes: vec![],
            console: vec!["kernel: tick".into()],
            power_calls: vec![],
            problems: vec![],
            notes: vec![],
        };
        Results::new(None, vec![run], vec![])
    }

    /// Rows group by workload in the order workloads first ran (the matrix is policy-major),
    /// each row compared with its group's first; the sums are the counters named.
    #[test]
    fn rows_group_by_workload_and_compare_with_the_first() {
        let d = doc(vec![
            phase("entry-tco", "getpid", 1000),
            phase("entry-tco", "futex-hash", 10),
            phase("tcma1", "getpid", 24),
            phase("tcma1", "futex-hash", 10),
        ]);
        let g = tables(&d);
        let titles: Vec<&str> = g.iter().map(|g| g.title.as_str()).collect();
        assert_eq!(titles, ["getpid i=8 tcf0=sync", "futex-hash i=8 tcf0=sync"]);
        let getpid: Vec<(&str, &str)> = g[0]
            .rows
            .iter()
            .map(|r| (r.label.as_str(), r.change.as_str()))
            .collect();
        // checked :k = rd:k + wr:k (1 each): 1001 then 25.
        assert_eq!(getpid, [("entry-tco", "="), ("tcma1", "-97.5%")]);
        assert_eq!(g[0].rows[0].cells[0], Some(1000));
        // elided :k adds two counters of 1.
        assert_eq!(g[0].rows[0].cells[4], Some(2));
        assert_eq!(g[1].rows[1].change, "+0.0%");
    }

    /// A counter the phase lacks shows `-`, never 0; an untraced phase has no row; a partial
    /// one is marked.
    #[test]
    fn missing_counters_are_dashes_and_partial_phases_are_marked() {
        let mut a = phase("entry-tco", "getpid", 5);
        a.counters.remove("tco_writes");
        let mut b = phase("tcma1", "getpid", 5);
        b.partial = true;
        let mut c = phase("kasan-sync", "getpid", 5);
        c.traced = false;
        let text = render(&doc(vec![a, b, c]), Some("all in X/report.txt"), true);
        let rows: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("   ") && !l.starts_with("    "))
            .collect();
        assert_eq!(rows.len(), 2, "{text}");
        let tco = COLUMNS
            .iter()
            .position(|c| c.counters == ["tco_writes"])
            .unwrap();
        let cells: Vec<&str> = rows[0].split_whitespace().collect();
        assert_eq!(cells[1 + tco], "-", "{text}");
        assert!(rows[1].starts_with("   tcma1 *"), "{text}");
        assert!(
            text.contains("Not shown here: 3 per-phase counter blocks, 1 line of guest console (all in X/report.txt)."),
            "{text}"
        );
        assert!(text.ends_with("mtex: success\n"), "{text}");
    }

    /// However long a policy's name and however large the figures, no line passes the width;
    /// a name that does not fit beside its figures gets a line of its own.
    #[test]
    fn every_line_fits_and_long_names_get_their_own_line() {
        let long = "kasan-sync+skip-tag-stacks-pgtables+tfsr-sync-skip+more";
        let d = doc(vec![
            phase("entry-tco", "memcached", u64::MAX / 4),
            phase(long, "memcached", 12),
        ]);
        let text = render(&d, None, true);
        for l in text.lines() {
            assert!(
                l.chars().count() <= WIDTH,
                "{} columns: {l}",
                l.chars().count()
            );
        }
        let at = text.lines().position(|l| l.trim() == long).expect(&text);
        let next = text.lines().nth(at + 1).unwrap();
        assert!(next.trim_start().starts_with("12 "), "{text}");
    }

    #[test]
    fn changes_read_as_perf_prints_them() {
        assert_eq!(change(1000, 25), "-97.5%");
        assert_eq!(change(0, 0), "+0.0%");
        assert_eq!(change(0, 3), "n/a");
    }
}
