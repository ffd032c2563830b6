//! A phase's profile by call stack (`mtex.stacks=1`): every PC's counts under the kernel
//! stack it ran on, as the hypervisor followed it (`mtex_trace::callstack`), its frames named
//! by the guest's symbols. Rows are [`FunctionRow`]s whose `stack` holds the frames above
//! the function, outermost first; each counter's rows add up to the phase's figure, as the
//! functions' do.
//!
//! Frames: a call is the function that made it; an exception entry from EL0 is
//! `[syscall N]` (`[syscall N NAME]` for Linux, from arm64's table) or `[el0 KIND]`; one taken in the kernel is the function it interrupted,
//! then `[el1 KIND]`; frames below what was seen are [`UNKNOWN`].

use super::PhaseProfile;
use super::functions::{FunctionRow, NO_SYMBOL};
use crate::symbols::Symbols;
use mtex_abi::report::StackNode;
use mtex_trace::callstack::{EC_SVC64, ROOT, StackFrame, UNKNOWN as UNKNOWN_NODE};
use std::collections::{BTreeMap, HashMap};

/// Frames below what the hypervisor saw (a window begun in the kernel, a task first seen
/// when it resumed, a return that matched no call).
pub const UNKNOWN: &str = "[unknown]";

/// The tree of a phase's stacks, by node.
pub struct Tree(HashMap<u32, (u32, StackFrame)>);

impl Tree {
    pub fn new(nodes: &[StackNode]) -> Self {
        Self(
            nodes
                .iter()
                .map(|n| (n.node, (n.parent, n.frame)))
                .collect(),
        )
    }

    /// The frames of `node`, outermost first; None if a node on the way is missing (or the
    /// way loops: the hypervisor's parents are always older nodes, but a log may lie).
    pub fn frames(&self, node: u32) -> Option<(bool, Vec<StackFrame>)> {
        let mut out = Vec::new();
        let mut n = node;
        while n != ROOT && n != UNKNOWN_NODE {
            let &(parent, frame) = self.0.get(&n)?;
            out.push(frame);
            if out.len() > self.0.len() {
                return None;
            }
            n = parent;
        }
        out.reverse();
        Some((n == UNKNOWN_NODE, out))
    }
}

/// Whose system calls an `[syscall N]` frame names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Syscalls {
    /// Linux on arm64: numbers from its table, named.
    Linux,
    /// The built-in kernel's own numbers, shown as numbers.
    Numbers,
}

impl Syscalls {
    fn label(self, nr: u32) -> String {
        let name = match self {
            Syscalls::Linux => syscalls::aarch64::Sysno::new(nr as usize).map(|s| s.name()),
            Syscalls::Numbers => None,
        };
        match name {
            Some(n) => format!("[syscall {nr} {n}]"),
            None => format!("[syscall {nr}]"),
        }
    }
}

/// The name of `frame` (an entry from EL1 is two: what it interrupted, then the entry).
fn frame_names(frame: &StackFrame, symbols: &Symbols, calls: Syscalls, out: &mut Vec<String>) {
    let name = |pc: u64| {
        symbols
            .function(pc)
            .map_or_else(|| NO_SYMBOL.to_string(), |(n, _)| n)
    };
    if frame.entry == 0 {
        out.push(name(frame.addr.wrapping_sub(4)));
        return;
    }
    let kind = ["sync", "irq", "fiq", "serror"][frame.kind() as usize];
    if frame.from_el0() {
        out.push(match (frame.kind(), frame.ec) {
            (0, EC_SVC64) => calls.label(frame.nr),
            (0, 0x24) => "[el0 data abort]".into(),
            (0, 0x20) => "[el0 instruction abort]".into(),
            (0, ec) => format!("[el0 sync ec {ec:#x}]"),
            _ => format!("[el0 {kind}]"),
        });
    } else {
        out.push(name(frame.addr));
        out.push(match (frame.kind(), frame.ec) {
            (0, 0x25) => "[el1 data abort]".into(),
            (0, ec) => format!("[el1 sync ec {ec:#x}]"),
            _ => format!("[el1 {kind}]"),
        });
    }
}

/// `profile` by (stack, function), ordered by EL, stack, name, unprivileged; empty when the
/// phase kept no stacks. A PC whose stack is not in the tree counts under [`UNKNOWN`] (the
/// profile's check has already made that a problem).
pub fn by_stack(profile: &PhaseProfile, symbols: &Symbols, calls: Syscalls) -> Vec<FunctionRow> {
    if profile.stack_end.is_none() {
        return Vec::new();
    }
    let tree = Tree::new(&profile.stacks);
    let mut names: HashMap<u32, Vec<String>> = HashMap::new();
    super::functions::gather(profile, symbols, |e| {
        if e.el == 0 {
            return Vec::new();
        }
        names
            .entry(e.stack)
            .or_insert_with(|| match tree.frames(e.stack) {
                Some((unknown, frames)) => {
                    let mut v = Vec::new();
                    if unknown {
                        v.push(UNKNOWN.to_string());
                    }
                    for f in &frames {
                        frame_names(f, symbols, calls, &mut v);
                    }
                    v
                }
                None => vec![UNKNOWN.to_string()],
            })
            .clone()
    })
}

/// Where a stack was entered from: its outermost entry frame (`el0 irq`), a system call as
/// `futex (syscall 98)` when its frame or the kernel's handler (`__arm64_sys_futex`) names
/// it; `[unknown]` when its bottom was not seen; None for a stack with no frame.
pub fn reached_from(stack: &[String]) -> Option<String> {
    let first = stack.first()?;
    if first == UNKNOWN {
        return Some(UNKNOWN.into());
    }
    let entry = stack.iter().find(|f| f.starts_with('['))?;
    let bare = entry.trim_start_matches('[').trim_end_matches(']');
    let mut words = bare.splitn(3, ' ');
    if let (Some("syscall"), Some(nr)) = (words.next(), words.next()) {
        let name = words.next().or_else(|| {
            stack.iter().find_map(|f| {
                f.strip_prefix("__arm64_sys_")
                    .or_else(|| f.strip_prefix("__se_sys_"))
            })
        });
        return Some(match name {
            Some(n) => format!("{n} (syscall {nr})"),
            None => format!("syscall {nr}"),
        });
    }
    Some(bare.to_string())
}

/// Of `rows` by stack, the entries each function's `counter` was reached from, largest
/// first: function label → [(entry, count)]. Rows without a stack are left out, so a
/// function's entries may add up to less than its count.
pub fn entries_by_function(
    rows: &[FunctionRow],
    counter: &str,
) -> HashMap<String, Vec<(String, u64)>> {
    let mut by: HashMap<String, BTreeMap<String, u64>> = HashMap::new();
    for r in rows {
        let v = r.get(counter);
        if v == 0 {
            continue;
        }
        // Rows with no stack (`[other]`, whose stacks were not kept) say nothing.
        let Some(from) = reached_from(&r.stack) else {
            continue;
        };
        *by.entry(r.label()).or_default().entry(from).or_default() += v;
    }
    by.into_iter()
        .map(|(f, m)| {
            let mut v: Vec<_> = m.into_iter().collect();
            v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
            (f, v)
        })
        .collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use mtex_abi::report::StackEnd;
    use mtex_trace::profile::PcEntry;

    fn node(node: u32, parent: u32, frame: StackFrame) -> StackNode {
        StackNode {
            id: 1,
            node,
            parent,
            frame,
        }
    }

    pub(crate) fn symbols() -> Symbols {
        Symbols::from_funcs(vec![
            (0x1000, 0x100, "el0t_64_sync".into()),
            (0x1100, 0x100, "__arm64_sys_futex".into()),
            (0x1200, 0x100, "futex_get_value_locked".into()),
            (0x1300, 0x100, "handle_irq".into()),
            (0x2000, 0x100, "main".into()),
        ])
    }

    /// A futex system call reading twice in its uaccess routine, an interrupt in it reading
    /// once, and a stack whose bottom was not seen reading four times.
    pub(crate) fn profile() -> PhaseProfile {
        let svc = StackFrame::entry(0x400, EC_SVC64, 98, 0x2004);
        let irq = StackFrame::entry(0x280, 0, 0, 0x1208);
        let entry = |pc, stack, rd| PcEntry {
            pc,
            el: 1,
            stack,
            insns: rd,
            rd: [rd, rd, 0, 0, 0],
            ..PcEntry::default()
        };
        PhaseProfile {
            pcs: vec![
                entry(0x1208, 4, 2),
                entry(0x1304, 5, 1),
                entry(0x1204, 6, 4),
                PcEntry {
                    pc: 0x2000,
                    el: 0,
                    insns: 9,
                    ..PcEntry::default()
                },
            ],
            stacks: vec![
                node(2, ROOT, svc),
                node(3, 2, StackFrame::call(0x1004)),
                node(4, 3, StackFrame::call(0x1104)),
                node(5, 4, irq),
                node(6, UNKNOWN_NODE, StackFrame::call(0x1104)),
            ],
            stack_end: Some(StackEnd {
                id: 1,
                nodes: 5,
                ..StackEnd::default()
            }),
            ..PhaseProfile::default()
        }
    }

    #[test]
    fn rows_carry_their_named_frames_and_add_up() {
        let rows = by_stack(&profile(), &symbols(), Syscalls::Numbers);
        let got: Vec<_> = rows
            .iter()
            .map(|r| {
                (
                    r.stack.join(";"),
                    r.label(),
                    r.get("mem_access_checked_rd:k"),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                (String::new(), "main".into(), 0),
                (
                    "[syscall 98];el0t_64_sync;__arm64_sys_futex".into(),
                    "futex_get_value_locked".into(),
                    2
                ),
                (
                    "[syscall 98];el0t_64_sync;__arm64_sys_futex;futex_get_value_locked;[el1 irq]"
                        .into(),
                    "handle_irq".into(),
                    1
                ),
                (
                    "[unknown];__arm64_sys_futex".into(),
                    "futex_get_value_locked".into(),
                    4
                ),
            ]
        );
    }

    #[test]
    fn each_function_says_what_it_was_reached_from() {
        let rows = by_stack(&profile(), &symbols(), Syscalls::Numbers);
        let by = entries_by_function(&rows, "mem_access_checked_rd:k");
        assert_eq!(
            by["futex_get_value_locked"],
            [("[unknown]".into(), 4), ("futex (syscall 98)".into(), 2)]
        );
        assert_eq!(by["handle_irq"], [("futex (syscall 98)".into(), 1)]);
    }

    #[test]
    fn linux_system_calls_are_named_from_arm64s_table() {
        let mut p = profile();
        p.stacks[0].frame.nr = 220;
        let rows = by_stack(&p, &symbols(), Syscalls::Linux);
        assert_eq!(rows[1].stack[0], "[syscall 220 clone]");
        assert_eq!(
            reached_from(&rows[1].stack).as_deref(),
            Some("clone (syscall 220)")
        );
        // A number the table does not have stays a number.
        assert_eq!(Syscalls::Linux.label(100_000), "[syscall 100000]");
    }

    #[test]
    fn a_missing_or_looping_node_is_not_followed() {
        let mut nodes = profile().stacks;
        assert!(Tree::new(&nodes).frames(9).is_none());
        nodes.push(node(7, 8, StackFrame::call(4)));
        nodes.push(node(8, 7, StackFrame::call(8)));
        assert!(Tree::new(&nodes).frames(7).is_none());
    }

    #[test]
    fn a_phase_without_stacks_has_no_rows_by_stack() {
        let p = PhaseProfile {
            stack_end: None,
            ..profile()
        };
        assert!(by_stack(&p, &symbols(), Syscalls::Numbers).is_empty());
    }
}
