//! Several kernels with the same workloads (`mtex linux --kernel A --kernel B …`): per
//! window, one row per kernel under the summary's headline columns, then what `mtex
//! compare` says between each kernel and the next.

use crate::compare::{Select, compare, headline};
use crate::model::results::Results;
use crate::output::summary;
use crate::output::text::{Lines, clean};

/// A kernel's row label: what was asked for, and what booted (`7.3 = 7.3.4+deb13-arm64`);
/// a kernel `mtex kernel build` made is named with how it was built (its KASAN mode and
/// patches), which two builds of one release differ by.
fn label(asked: &str, doc: &Results) -> String {
    let booted = doc.kernel.as_ref().map(|k| {
        if k.version.starts_with(&k.release) {
            &k.version
        } else {
            &k.release
        }
    });
    match booted {
        Some(b) if b.trim_end_matches("-arm64") != asked => {
            format!("{} = {}", clean(asked), clean(b))
        }
        _ => clean(asked).into_owned(),
    }
}

/// The side-by-side text of `runs` (what each `--kernel` asked for, and its document).
pub fn render(runs: &[(String, Results)]) -> String {
    let mut out = Lines::default();
    out.blank();
    out.push(&format!(
        "Kernels side by side ({}): each window, one row per kernel",
        runs.iter()
            .map(|(k, _)| clean(k).into_owned())
            .collect::<Vec<_>>()
            .join(", ")
    ));
    // Windows in the first kernel's order; a window some kernel lacks shows without it.
    let mut names: Vec<String> = Vec::new();
    for (_, doc) in runs {
        for p in doc.runs.iter().flat_map(|r| &r.phases) {
            if p.traced && !names.contains(&p.name) {
                names.push(p.name.clone());
            }
        }
    }
    let groups: Vec<summary::Group> = names
        .iter()
        .map(|name| {
            let rows: Vec<(&crate::model::results::PhaseOut, String)> = runs
                .iter()
                .filter_map(|(k, doc)| {
                    let p = doc
                        .runs
                        .iter()
                        .flat_map(|r| &r.phases)
                        .find(|p| &p.name == name)?;
                    Some((p, label(k, doc)))
                })
                .collect();
            summary::group_labelled(name.clone(), rows)
        })
        .collect();
    // Sampled windows: each kernel's estimates, a row each, never in the exact table.
    let all = Results::new(
        None,
        runs.iter()
            .flat_map(|(k, doc)| {
                let who = label(k, doc);
                doc.runs.iter().filter(|r| r.repeat == 0).map(move |r| {
                    let mut r = r.clone();
                    for p in &mut r.phases {
                        p.name = format!("{}, {who}", p.name);
                    }
                    r
                })
            })
            .collect(),
        Vec::new(),
    );
    let sampled = summary::sampled_table(&all, "windows", "window, kernel", |p| p.name.clone());
    if groups.is_empty() && sampled.is_empty() {
        out.push("  no window was measured on any kernel");
    }
    if !groups.is_empty() {
        out.blank();
        for l in summary::table_lines(&groups, "kernel") {
            out.push(&l);
        }
        out.blank();
        out.push(&format!("  {}", summary::LEGEND));
    }
    if !sampled.is_empty() {
        out.blank();
        for l in sampled {
            out.push(&l);
        }
    }
    let per_op = per_operation(runs);
    if !per_op.is_empty() {
        out.blank();
        out.push("Per operation, set-up and tear-down included (each command's own count)");
        for l in per_op {
            out.push(&l);
        }
    }
    for pair in runs.windows(2) {
        let ((ka, a), (kb, b)) = (&pair[0], &pair[1]);
        let c = compare(a, &Select::default(), b, &Select::default());
        out.blank();
        out.push(&format!(
            "{} → {} (mtex compare of their results directories):",
            clean(ka),
            clean(kb)
        ));
        let lines: Vec<String> = c.phases.iter().filter_map(headline).collect();
        if lines.is_empty() {
            out.push("  no window on both sides");
        }
        for l in lines {
            out.push(&format!("  {l}"));
        }
    }
    out.into_string()
}

/// Each kernel's windows whose command printed its operation count: their checked accesses
/// per operation, one line each.
fn per_operation(runs: &[(String, Results)]) -> Vec<String> {
    let mut out = Vec::new();
    for (k, doc) in runs {
        let Some(linux) = &doc.linux else { continue };
        let phases: Vec<&crate::model::results::PhaseOut> = doc
            .runs
            .iter()
            .filter(|r| r.repeat == 0)
            .flat_map(|r| &r.phases)
            .collect();
        out.extend(operation_lines(&label(k, doc), &phases, &linux.windows));
    }
    out
}

/// One kernel's lines of `per_operation`: its measured windows (traced whole, or sampled,
/// whose phase is not traced whole) with an operation count.
fn operation_lines(
    kernel: &str,
    phases: &[&crate::model::results::PhaseOut],
    windows: &[crate::model::linux::WindowInfo],
) -> Vec<String> {
    windows
        .iter()
        .filter_map(|w| {
            let ops = w.operations.as_ref()?;
            let p = phases
                .iter()
                .find(|p| p.id == w.id && (p.traced || p.sampled.is_some()))?;
            Some(format!(
                "  {}, {kernel} ({} operations, {}): {}",
                p.name,
                crate::output::text::thousands(ops.count),
                ops.source,
                super::operations::phase_figures(ops, p)
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::results::KernelId;

    fn booted(release: &str, version: &str) -> Results {
        let mut doc = Results::new(None, Vec::new(), Vec::new());
        doc.kernel = Some(KernelId {
            release: release.into(),
            package: "p".into(),
            version: version.into(),
            sha256: String::new(),
        });
        doc
    }

    #[test]
    fn a_window_with_an_operation_count_is_given_per_operation() {
        use crate::linux::operations::{Operations, test_phase};
        use crate::model::linux::WindowInfo;
        let counted = WindowInfo {
            id: 1,
            operations: Some(Operations {
                count: 10,
                source: "memcaslap's \"Ops: 10\"".into(),
            }),
            ..Default::default()
        };
        let uncounted = WindowInfo {
            id: 2,
            ..Default::default()
        };
        let mut sampled = test_phase(&[("mem_access_checked_rd:k", 25)]);
        sampled.traced = false;
        let mut other = sampled.clone();
        other.id = 2;
        // Not measured (neither traced whole nor sampled): nothing to divide.
        let lines = operation_lines("a", &[&sampled, &other], &[counted.clone(), uncounted]);
        assert!(lines.is_empty(), "{lines:?}");
        sampled.sampled = Some(crate::model::results::SampledOut {
            units: 1,
            unit_instructions: 1000,
            gap_us: 300,
            seed: 1,
            whole: true,
        });
        let lines = operation_lines("a", &[&sampled, &other], std::slice::from_ref(&counted));
        assert_eq!(lines.len(), 1);
        assert!(
            lines[0].starts_with("  window 1, a (10 operations, memcaslap's \"Ops: 10\"): "),
            "{lines:?}"
        );
        let traced = test_phase(&[("mem_access_checked_rd:k", 25)]);
        assert_eq!(
            operation_lines("a", &[&traced], &[counted]),
            [
                "  window 1, a (10 operations, memcaslap's \"Ops: 10\"): rd:k 2.5, wr:k 0.0, rd:u \
              0.0, wr:u 0.0"
            ]
        );
    }

    #[test]
    fn two_builds_of_one_release_are_told_apart_by_how_they_were_built() {
        let a = booted("6.12.118-mtex", "6.12.118-mtex, KASAN_HW_TAGS sync");
        let b = booted(
            "6.12.118-mtex",
            "6.12.118-mtex, KASAN_HW_TAGS sync, +untagged-stacks.patch",
        );
        assert_eq!(
            label("kasan", &a),
            "kasan = 6.12.118-mtex, KASAN_HW_TAGS sync"
        );
        assert_eq!(
            label("patched", &b),
            "patched = 6.12.118-mtex, KASAN_HW_TAGS sync, +untagged-stacks.patch"
        );
        // Debian's: the release, or nothing when it is what was asked for.
        let d = booted("7.3.4+deb13-arm64", "7.3.4-1~bpo13+1");
        assert_eq!(label("7.3", &d), "7.3 = 7.3.4+deb13-arm64");
        assert_eq!(label("7.3.4+deb13", &d), "7.3.4+deb13");
    }
}
