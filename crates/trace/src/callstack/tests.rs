use super::*;
extern crate std;
use proptest::prelude::*;
use std::boxed::Box;
use std::collections::HashMap;
use std::vec;
use std::vec::Vec;

fn stack(nodes: usize, saved: usize) -> CallStack {
    CallStack::new(
        Box::leak(vec![NodeSlot::ZERO; nodes].into_boxed_slice()),
        Box::leak(vec![SavedStack::ZERO; saved].into_boxed_slice()),
    )
}

/// A frame of a stack as read back: unseen frames, or a known one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Item {
    Unknown,
    Frame(StackFrame),
}

/// The frames of `s`'s stack, outermost first, read back from its tree as the host does.
fn path(s: &CallStack) -> Vec<Item> {
    let tree: HashMap<u32, (u32, StackFrame)> = s.nodes().map(|(n, p, f)| (n, (p, f))).collect();
    let mut out = Vec::new();
    let mut n = s.node();
    while n >= FIRST {
        let (p, f) = tree[&n];
        out.push(Item::Frame(f));
        n = p;
    }
    if n == UNKNOWN {
        out.push(Item::Unknown);
    }
    out.reverse();
    out
}

fn call(ra: u64) -> Item {
    Item::Frame(StackFrame::call(ra))
}

const SVC: u64 = 0x400;
const EL1_IRQ: u64 = 0x280;

fn svc(nr: u64, elr: u64) -> StackFrame {
    StackFrame::entry(SVC, EC_SVC64, nr, elr)
}

#[test]
fn calls_push_and_matching_returns_pop() {
    let mut s = stack(64, 4);
    s.exception(svc(98, 0x4000), 0x9000);
    s.call(0x100, 0x8ff0);
    s.call(0x200, 0x8fd0);
    let e = Item::Frame(svc(98, 0x4000));
    assert_eq!(path(&s), [e, call(0x100), call(0x200)]);
    s.ret(0x200, 0x8fd0);
    assert_eq!(path(&s), [e, call(0x100)]);
    // The same frames again are the same node.
    let n = s.node();
    s.call(0x200, 0x8fd0);
    s.ret(0x200, 0x8fd0);
    assert_eq!(s.node(), n);
    s.ret(0x100, 0x8ff0);
    s.eret(true);
    assert_eq!(s.node(), ROOT);
    assert_eq!(s.stats(), StackStats::default());
}

#[test]
fn an_entry_frame_says_what_entered() {
    let f = svc(98, 0x4000);
    assert_eq!(
        (f.entry, f.ec, f.nr, f.from_el0(), f.kind()),
        (9, 0x15, 98, true, 0)
    );
    // An IRQ keeps neither the class nor x8.
    let irq = StackFrame::entry(EL1_IRQ, 0x15, 98, 0x5000);
    assert_eq!(
        (irq.entry, irq.ec, irq.nr, irq.from_el0(), irq.kind()),
        (6, 0, 0, false, 1)
    );
    // A data abort from EL0 keeps its class, not x8.
    let da = StackFrame::entry(SVC, 0x24, 98, 0x4000);
    assert_eq!((da.ec, da.nr), (0x24, 0));
}

#[test]
fn an_interrupt_in_the_kernel_stacks_on_what_it_interrupted() {
    let mut s = stack(64, 4);
    s.exception(svc(1, 0x4000), 0x9000);
    s.call(0x100, 0x8ff0);
    let irq = StackFrame::entry(EL1_IRQ, 0, 0, 0x180);
    s.exception(irq, 0x8e00);
    s.call(0x300, 0x8df0);
    assert_eq!(
        path(&s),
        [
            Item::Frame(svc(1, 0x4000)),
            call(0x100),
            Item::Frame(irq),
            call(0x300)
        ]
    );
    // The handler's ERET pops its frames with the entry's, wherever it returns (a fixup may
    // move ELR).
    s.eret(false);
    assert_eq!(path(&s), [Item::Frame(svc(1, 0x4000)), call(0x100)]);
}

#[test]
fn a_phase_begun_in_the_kernel_starts_unknown() {
    let mut s = stack(64, 4);
    s.reset(false);
    assert_eq!(s.node(), UNKNOWN);
    s.call(0x100, 0x8ff0);
    assert_eq!(path(&s), [Item::Unknown, call(0x100)]);
    s.ret(0x100, 0x8ff0);
    // Returning into callers never seen is expected, not a mismatch.
    s.ret(0x777, 0x9000);
    assert_eq!(s.node(), UNKNOWN);
    assert_eq!(s.stats(), StackStats::default());
}

#[test]
fn a_return_that_matches_nothing_makes_the_stack_unknown() {
    for (target, sp) in [(0x999, 0x8fd0), (0x200, 0x8fc0)] {
        let mut s = stack(64, 4);
        s.exception(svc(1, 0x4000), 0x9000);
        s.call(0x100, 0x8ff0);
        s.call(0x200, 0x8fd0);
        s.ret(target, sp);
        assert_eq!(path(&s), [Item::Unknown]);
        assert_eq!(s.stats().unmatched_returns, 1);
        // What it calls next stacks on [unknown], not on the frames it unwound past.
        s.call(0x300, 0x8fe0);
        assert_eq!(path(&s), [Item::Unknown, call(0x300)]);
    }
}

#[test]
fn a_return_to_a_saved_tasks_top_resumes_its_stack() {
    let mut s = stack(64, 4);
    // Task A: a system call that blocks, switching away at 0x500 (cpu_switch_to's return
    // address is the same for every task; only the stack differs).
    s.exception(svc(98, 0x4000), 0xa000);
    s.call(0x100, 0x9ff0);
    s.call(0x500, 0x9fc0);
    let a = path(&s);
    // cpu_switch_to returns on B's stack, never seen: unknown.
    s.ret(0x500, 0xbfc0);
    assert_eq!(path(&s), [Item::Unknown]);
    // B runs, and switches back to A with a call from the same place on its stack.
    s.call(0x500, 0xbfc0);
    s.ret(0x500, 0x9fc0);
    assert_eq!(path(&s), a[..2]);
    // A returns to user space; B, saved, resumes later just as exactly.
    s.ret(0x100, 0x9ff0);
    s.eret(true);
    s.exception(svc(98, 0x4000), 0xa000);
    s.call(0x500, 0x9fc0);
    s.ret(0x500, 0xbfc0);
    assert_eq!(path(&s), [Item::Unknown]);
    // Only the first switch to B, never seen before, found nothing to resume.
    assert_eq!(
        s.stats(),
        StackStats {
            unmatched_returns: 1,
            ..StackStats::default()
        }
    );
}

#[test]
fn a_stack_deeper_than_kept_starts_again_from_unknown() {
    let mut s = stack(1024, 4);
    s.exception(svc(1, 0x4000), 0x9000);
    for i in 0..DEPTH as u64 - 1 {
        s.call(0x1000 + 4 * i, 0x8000 - 16 * i);
    }
    assert_eq!(path(&s).len(), DEPTH);
    s.call(0x2000, 0x7000);
    assert_eq!(path(&s), [Item::Unknown, call(0x2000)]);
    assert_eq!(s.stats().too_deep, 1);
}

#[test]
fn a_full_tree_says_unknown_and_counts_it() {
    let mut s = stack(2, 4);
    s.exception(svc(1, 0x4000), 0x9000);
    s.call(0x100, 0x8ff0);
    s.call(0x200, 0x8fd0);
    assert_eq!(s.node(), UNKNOWN);
    assert_eq!(s.stats().tree_full, 1);
    // Popped back, the frames below are still the ones that were stored.
    s.ret(0x200, 0x8fd0);
    assert_eq!(path(&s), [Item::Frame(svc(1, 0x4000)), call(0x100)]);
}

#[test]
fn the_oldest_saved_stack_is_evicted_and_counted() {
    let mut s = stack(256, 1);
    for task in 0..3u64 {
        let sp = 0x10000 * (task + 1);
        s.exception(svc(1, 0x4000), sp);
        s.call(0x500, sp - 0x40);
        // Switch to a task not seen.
        s.ret(0x500, 0x1_0000_0000 + sp);
    }
    assert_eq!(s.stats().evicted, 2);
}

/// A model of tasks' kernel stacks: each known from its first entry, or unknown below what
/// was seen.
#[derive(Clone, Debug)]
enum Op {
    Call(u8),
    Ret,
    Irq,
    Eret,
    Switch(u8),
    Syscall,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..8u8).prop_map(Op::Call),
        4 => Just(Op::Ret),
        1 => Just(Op::Irq),
        1 => Just(Op::Eret),
        2 => (0..4u8).prop_map(Op::Switch),
        1 => Just(Op::Syscall),
    ]
}

const SWITCH_RA: u64 = 0x5000;

struct Task {
    /// Unknown below `frames`.
    unknown: bool,
    frames: Vec<(Item, u64, bool)>,
    at_el0: bool,
}

proptest! {
    /// Nested calls, returns, interrupts, system calls and task switches (through one call
    /// site, as `cpu_switch_to` is): the stack read back from the tree is always the model's.
    #[test]
    fn stacks_follow_nested_calls_and_task_switches(ops in proptest::collection::vec(op(), 0..300)) {
        let mut s = stack(4096, 8);
        let mut tasks: Vec<Task> = (0..4)
            .map(|t| Task { unknown: t != 0, frames: Vec::new(), at_el0: t == 0 })
            .collect();
        let mut cur = 0usize;
        let sp_of = |t: usize, depth: usize| 0x10_0000 * (t as u64 + 1) - 16 * depth as u64;
        let model = |t: &Task| -> Vec<Item> {
            let mut v: Vec<Item> = t.unknown.then_some(Item::Unknown).into_iter().collect();
            v.extend(t.frames.iter().map(|f| f.0));
            v
        };
        s.reset(true);
        for op in ops {
            let t = &mut tasks[cur];
            match op {
                Op::Syscall if t.at_el0 => {
                    let f = svc(64, 0x4000);
                    s.exception(f, sp_of(cur, 0));
                    t.at_el0 = false;
                    t.unknown = false;
                    t.frames = vec![(Item::Frame(f), 0, true)];
                }
                _ if t.at_el0 => continue,
                Op::Call(k) => {
                    if t.frames.len() >= 40 { continue; }
                    let ra = 0x100 * (k as u64 + 1);
                    let sp = sp_of(cur, t.frames.len() + 1);
                    s.call(ra, sp);
                    t.frames.push((call(ra), sp, false));
                }
                Op::Ret => match t.frames.last() {
                    Some(&(Item::Frame(f), sp, false)) => {
                        s.ret(f.addr, sp);
                        t.frames.pop();
                    }
                    _ => continue,
                },
                Op::Irq => {
                    let f = StackFrame::entry(EL1_IRQ, 0, 0, 0x6000);
                    let sp = sp_of(cur, t.frames.len() + 1);
                    s.exception(f, sp);
                    t.frames.push((Item::Frame(f), sp, true));
                }
                Op::Eret => match t.frames.iter().rposition(|f| f.2) {
                    Some(0) if !t.unknown => {
                        s.eret(true);
                        t.frames.clear();
                        t.at_el0 = true;
                    }
                    Some(i) => {
                        s.eret(false);
                        t.frames.truncate(i);
                    }
                    None => continue,
                },
                Op::Switch(to) => {
                    let to = to as usize;
                    if to == cur { continue; }
                    let sp = sp_of(cur, t.frames.len() + 1);
                    s.call(SWITCH_RA, sp);
                    t.frames.push((call(SWITCH_RA), sp, false));
                    let next = &mut tasks[to];
                    match next.frames.last() {
                        Some(&(_, sp, false)) if !next.at_el0 => {
                            s.ret(SWITCH_RA, sp);
                            next.frames.pop();
                        }
                        _ => {
                            // Never switched away from while seen (it began before, or it is
                            // in user space in the model): what returns there is not known.
                            s.ret(0x7000, sp_of(to, 1) ^ 0x8);
                            next.unknown = true;
                            next.frames.clear();
                            next.at_el0 = false;
                        }
                    }
                    cur = to;
                }
                Op::Syscall => continue,
            }
            let t = &tasks[cur];
            if t.at_el0 {
                prop_assert_eq!(s.node(), ROOT);
            } else {
                prop_assert_eq!(path(&s), model(t));
            }
        }
    }
}
