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
