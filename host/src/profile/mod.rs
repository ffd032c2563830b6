//! Where a traced phase's counts are: the hypervisor's per-PC records (`mtex.profile`), checked
//! against the phase's counts, and gathered by function (`functions`).

#[cfg(test)]
pub(crate) mod fixture;
pub mod flame;
pub mod folded;
pub mod functions;
pub mod stacks;
pub mod text;

use mtex_abi::report::{PcProfileEnd, StackEnd, StackNode};
use mtex_trace::counts::TraceCounts;
use mtex_trace::profile::PcEntry;
use serde::Serialize;

/// A phase's per-PC counts as the hypervisor sent them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PhaseProfile {
    /// One per PC (and EL, and unprivileged or not), in PC order.
    pub pcs: Vec<PcEntry>,
    /// What PCs that found no room in the hypervisor's table counted, by class.
    pub other: Vec<PcEntry>,
    /// The closing record; None if it never came.
    pub end: Option<PcProfileEnd>,
    /// The call stacks' tree the entries' `stack` name (`mtex.stacks=1`).
    pub stacks: Vec<StackNode>,
    /// Its closing record; None without stacks (or if it never came).
    pub stack_end: Option<StackEnd>,
}

impl PhaseProfile {
    /// Every entry: the PCs, then the `[other]` buckets.
    pub fn all(&self) -> impl Iterator<Item = &PcEntry> {
        self.pcs.iter().chain(&self.other)
    }

    /// What the entries add up to, in the trace's terms (the fields a profile keeps; the rest
    /// zero).
    pub fn sum(&self) -> TraceCounts {
        sum(self.all())
    }

    /// Why this profile cannot be shown as the phase's (`trace`, its counts), if it cannot:
    /// records lost, or entries that do not add up to the counts exactly.
    pub fn problem(&self, trace: &TraceCounts) -> Option<String> {
        let Some(end) = self.end else {
            return Some("its profile by PC was cut off (no end record)".into());
        };
        let got = self.pcs.len() + self.other.len();
        if got != end.records as usize {
            return Some(format!(
                "its profile by PC has {got} records of the {} sent",
                end.records
            ));
        }
        if let Some(p) = self.stack_problem() {
            return Some(p);
        }
        let kept = mtex_trace::profile::kept(trace);
        let sum = self.sum();
        (sum != kept).then(|| {
            format!(
                "its profile by PC does not add up to its counts: {}",
                differences(&sum, &kept).join(", ")
            )
        })
    }
}

impl PhaseProfile {
    /// Why its call stacks cannot be shown, if they cannot: nodes lost, or an entry on a
    /// stack the tree does not have.
    fn stack_problem(&self) -> Option<String> {
        // A user PC's `stack` is its address space, not a stack.
        let uses_stacks = self.pcs.iter().any(|e| e.el != 0 && e.stack != 0);
        let Some(end) = self.stack_end else {
            return uses_stacks.then(|| "its call stacks were cut off (no end record)".into());
        };
        if self.stacks.len() != end.nodes as usize {
            return Some(format!(
                "its call stacks have {} nodes of the {} sent",
                self.stacks.len(),
                end.nodes
            ));
        }
        let tree = stacks::Tree::new(&self.stacks);
        self.pcs
            .iter()
            .find(|e| e.el != 0 && tree.frames(e.stack).is_none())
            .map(|e| {
                format!(
                    "its call stack {} (pc {:#x}) is not in its tree",
                    e.stack, e.pc
                )
            })
    }
}

/// Writes the folded stacks and flame graphs of `doc`'s profiled phases under `dir`
/// (`profile/...`, see `folded`); returns the files written.
pub fn write(
    doc: &crate::model::results::Results,
    dir: &std::path::Path,
) -> anyhow::Result<Vec<std::path::PathBuf>> {
    use anyhow::Context;
    let mut files = Vec::new();
    for (rel, text) in folded::files(doc).into_iter().chain(flame::files(doc)?) {
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
        }
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        files.push(path);
    }
    Ok(files)
}

/// A phase's profile by PC, if it adds up to the phase's counts (one that does not is a
/// problem of the run, and none of its figures is shown).
pub fn of_phase(p: &crate::model::report::Phase) -> Option<&PhaseProfile> {
    let (f, t) = (p.profile.as_ref()?, p.trace.as_ref()?);
    f.problem(t).is_none().then_some(f)
}

/// What `entries` add up to, in the trace's terms (`mtex_trace::profile::sum`).
pub fn sum<'a>(entries: impl IntoIterator<Item = &'a PcEntry>) -> TraceCounts {
    mtex_trace::profile::sum(entries)
}

/// The fields where `a` and `b` differ, as `name profile X, counts Y`.
fn differences(a: &TraceCounts, b: &TraceCounts) -> Vec<String> {
    let (a, b) = (
        serde_json::to_value(a).unwrap_or_default(),
        serde_json::to_value(b).unwrap_or_default(),
    );
    let mut out = Vec::new();
    flat_diff("", &a, &b, &mut out);
    out
}

fn flat_diff(prefix: &str, a: &serde_json::Value, b: &serde_json::Value, out: &mut Vec<String>) {
    match (a, b) {
        (serde_json::Value::Object(x), serde_json::Value::Object(y)) => {
            for (k, v) in x {
                let name = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flat_diff(&name, v, &y[k], out);
            }
        }
        _ if a != b => out.push(format!("{prefix} profile {a}, counts {b}")),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(pc: u64, el: u8, insns: u64, rd_arch: u64) -> PcEntry {
        PcEntry {
            pc,
            el,
            insns,
            rd: [rd_arch, rd_arch, 0, 0, 0],
            ..PcEntry::default()
        }
    }

    fn profile(pcs: Vec<PcEntry>) -> PhaseProfile {
        let records = pcs.len() as u32;
        PhaseProfile {
            pcs,
            other: vec![],
            end: Some(PcProfileEnd {
                records,
                ..PcProfileEnd::default()
            }),
            ..PhaseProfile::default()
        }
    }

    fn counts(insns_k: u64, rd_k: u64) -> TraceCounts {
        let mut c = TraceCounts {
            instructions_el1: insns_k,
            ..TraceCounts::default()
        };
        c.accesses.rd_k = rd_k;
        c.architectural.rd_k = rd_k;
        // Counts a profile does not keep never make it disagree.
        c.dsb = 7;
        c
    }

    #[test]
    fn a_profile_that_adds_up_has_no_problem() {
        let p = profile(vec![entry(0x1000, 1, 3, 2), entry(0x1004, 1, 1, 0)]);
        assert_eq!(p.problem(&counts(4, 2)), None);
    }

    #[test]
    fn a_profile_short_of_the_counts_is_a_problem_naming_the_field() {
        let p = profile(vec![entry(0x1000, 1, 3, 2)]);
        let why = p.problem(&counts(4, 2)).unwrap();
        assert!(
            why.contains("instructions_el1 profile 3, counts 4"),
            "{why}"
        );
    }

    #[test]
    fn a_lost_record_or_end_is_a_problem() {
        let mut p = profile(vec![entry(0x1000, 1, 4, 2)]);
        p.end.as_mut().unwrap().records = 2;
        assert!(
            p.problem(&counts(4, 2))
                .unwrap()
                .contains("1 records of the 2")
        );
        p.end = None;
        assert!(p.problem(&counts(4, 2)).unwrap().contains("cut off"));
    }
}
