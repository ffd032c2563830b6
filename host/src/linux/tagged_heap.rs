//! glibc's tagged heap on request (`--tagged-heap`), and what user space asked for as the
//! hypervisor saw it. glibc reads its `glibc.mem.tagging` tunable at start-up: bit 0 makes
//! malloc take its heap from `mmap(PROT_MTE)` and tag every block; with bit 1 ld.so asks the
//! kernel for synchronous tag-check faults (`PR_SET_TAGGED_ADDR_CTRL` with
//! `PR_MTE_TCF_SYNC`), without it for asynchronous ones. The kernel answers by writing the
//! task's TCF0 into SCTLR_EL1, and again at every switch between tasks whose TCF0 differ: the
//! hypervisor traps each of those writes, so a window's writes say which modes its tasks ran
//! with, whatever mtex meant to set.

use crate::model::linux::WindowInfo;
use crate::model::report::Write;
use anyhow::{Result, bail};

/// The tag-check mode asked of glibc for the measured commands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum TaggedHeap {
    /// `glibc.mem.tagging=3`: a tagged heap, synchronous tag-check faults.
    Sync,
    /// `glibc.mem.tagging=1`: a tagged heap, asynchronous tag-check faults.
    Async,
}

impl TaggedHeap {
    /// The tunable's value.
    pub fn tunable(self) -> u8 {
        match self {
            Self::Sync => 3,
            Self::Async => 1,
        }
    }

    /// The TCF0 a task running with it has, as the report names TCF0's values.
    pub fn tcf0(self) -> &'static str {
        match self {
            Self::Sync => "SYNC",
            Self::Async => "ASYNC",
        }
    }

    /// As the option takes it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Sync => "sync",
            Self::Async => "async",
        }
    }
}

const TUNABLES: &str = "GLIBC_TUNABLES=";
const TAGGING: &str = "glibc.mem.tagging=";

/// The measured commands' environment (`--env`'s `NAME=VALUE`s) with the tagged heap's
/// tunable added: to a `GLIBC_TUNABLES` the user gives (glibc's list is `:`-separated), else
/// as one of its own. A `GLIBC_TUNABLES` that already sets the tunable is refused: the two
/// would say different things, and only one would count.
pub fn environment(env: &[String], heap: Option<TaggedHeap>) -> Result<Vec<String>> {
    let mut out = env.to_vec();
    let Some(heap) = heap else {
        return Ok(out);
    };
    let tunable = format!("{TAGGING}{}", heap.tunable());
    match out.iter_mut().find(|e| e.starts_with(TUNABLES)) {
        Some(e) if e.contains(TAGGING) => bail!(
            "--tagged-heap {} with --env {e}: both set glibc.mem.tagging; give one of them",
            heap.name()
        ),
        Some(e) if e.len() == TUNABLES.len() => e.push_str(&tunable),
        Some(e) => {
            e.push(':');
            e.push_str(&tunable);
        }
        None => out.push(format!("{TUNABLES}{tunable}")),
    }
    Ok(out)
}

/// The TCF0 values the SCTLR_EL1 writes trapped in phase `phase` set, each once, in the
/// order first set.
pub fn tcf0_set(writes: &[Write], phase: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let set = writes
        .iter()
        .filter(|w| w.register == "SCTLR_EL1" && w.phase.as_deref() == Some(phase))
        .flat_map(|w| w.changes.iter().filter(|c| c.field == "TCF0"));
    for c in set {
        if !out.iter().any(|v| v == c.new) {
            out.push(c.new.to_string());
        }
    }
    out
}

/// What the report says of a run given `--tagged-heap`: a problem for each window in which
/// no task's TCF0 was set to the mode asked (its program did not turn glibc's tagging on:
/// not linked with glibc, a glibc built without memory tagging, or a kernel without MTE for
/// user space), since its figures are not those of a tagged heap.
pub fn problems(heap: Option<TaggedHeap>, windows: &[WindowInfo]) -> Vec<String> {
    let Some(heap) = heap else {
        return Vec::new();
    };
    windows
        .iter()
        .filter(|w| !w.user_tcf0.iter().any(|v| v == heap.tcf0()))
        .map(|w| {
            format!(
                "--tagged-heap {}: no SCTLR_EL1 write in window {}{} set TCF0 to {}: its \
                 program did not turn glibc's tagged heap on (not linked with glibc, or a \
                 glibc or kernel without memory tagging for user space), so its figures are \
                 not those of a tagged heap",
                heap.name(),
                w.id,
                w.label
                    .as_ref()
                    .map_or(String::new(), |l| format!(" ({l})")),
                heap.tcf0(),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::report::FieldChange;

    #[test]
    fn the_tunable_is_added_to_the_environment_once() {
        let env = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            environment(&env(&["A=1"]), Some(TaggedHeap::Sync)).unwrap(),
            env(&["A=1", "GLIBC_TUNABLES=glibc.mem.tagging=3"])
        );
        assert_eq!(
            environment(
                &env(&["GLIBC_TUNABLES=glibc.malloc.check=3"]),
                Some(TaggedHeap::Async)
            )
            .unwrap(),
            env(&["GLIBC_TUNABLES=glibc.malloc.check=3:glibc.mem.tagging=1"])
        );
        assert_eq!(
            environment(&env(&["GLIBC_TUNABLES="]), Some(TaggedHeap::Sync)).unwrap(),
            env(&["GLIBC_TUNABLES=glibc.mem.tagging=3"])
        );
        assert_eq!(environment(&env(&["A=1"]), None).unwrap(), env(&["A=1"]));
        let e = environment(
            &env(&["GLIBC_TUNABLES=glibc.mem.tagging=1"]),
            Some(TaggedHeap::Sync),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("both set glibc.mem.tagging"), "{e}");
    }

    fn write(
        register: &'static str,
        phase: Option<&str>,
        tcf0: (&'static str, &'static str),
    ) -> Write {
        Write {
            seq: 0,
            cpu: 0,
            register,
            old: 0,
            new: 0,
            changes: vec![FieldChange {
                field: "TCF0",
                old: tcf0.0,
                new: tcf0.1,
            }],
            at: Default::default(),
            ts: 0,
            phase: phase.map(str::to_string),
        }
    }

    #[test]
    fn a_window_shows_the_modes_its_writes_set_and_a_missing_one_is_a_problem() {
        let writes = [
            write("SCTLR_EL1", Some("window 1"), ("NONE", "SYNC")),
            write("SCTLR_EL1", Some("window 1"), ("SYNC", "NONE")),
            write("SCTLR_EL1", Some("window 1"), ("NONE", "SYNC")),
            // Outside the window, or not SCTLR_EL1: not the window's.
            write("SCTLR_EL1", None, ("NONE", "ASYNC")),
            write("TCR_EL1", Some("window 2"), ("NONE", "ASYNC")),
        ];
        assert_eq!(tcf0_set(&writes, "window 1"), ["SYNC", "NONE"]);
        assert!(tcf0_set(&writes, "window 2").is_empty());
        let windows = [1, 2].map(|id| WindowInfo {
            id,
            user_tcf0: tcf0_set(&writes, &format!("window {id}")),
            ..Default::default()
        });
        assert!(problems(Some(TaggedHeap::Sync), &windows[..1]).is_empty());
        let p = problems(Some(TaggedHeap::Sync), &windows);
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(p[0].contains("window 2 set TCF0 to SYNC"), "{p:?}");
        // Async asked, sync seen: not what was asked.
        assert_eq!(problems(Some(TaggedHeap::Async), &windows[..1]).len(), 1);
        assert!(problems(None, &windows).is_empty());
    }
}
