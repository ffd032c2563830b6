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

#[test]
fn ten_thousand_nested_calls_keep_at_most_depth_frames_over_unknown() {
    let mut s = stack(1024, 4);
    s.exception(svc(1, 0x4000), 0x10_0000);
    let sp = |i: u64| 0x10_0000 - 16 * (i + 1);
    for i in 0..10_000u64 {
        s.call(0x1000 + 4 * (i % 7), sp(i));
        if i % 61 == 0 {
            let p = path(&s);
            assert!(p.len() <= DEPTH + 1, "{i}: {} frames", p.len());
            assert_eq!(p.last(), Some(&call(0x1000 + 4 * (i % 7))));
        }
    }
    assert_eq!(s.stats().tree_full, 0);
    // 10,001 frames, kept 64 at a time: a new start over [unknown] every 64 calls.
    assert_eq!(s.stats().too_deep, 10_001 / DEPTH as u32);
    let kept = (10_001 % DEPTH) as u64;
    assert_eq!(path(&s).len() as u64, kept + 1);
    // Unwound all the way: the frames kept pop, what is below was never known, and no return
    // into it is a mismatch.
    for i in (0..10_000u64).rev() {
        s.ret(0x1000 + 4 * (i % 7), sp(i));
    }
    assert_eq!(path(&s), [Item::Unknown]);
    assert_eq!(s.stats().unmatched_returns, 0);
}

const RA: u64 = 0xffff_8000_1000_0104;
const SP: u64 = 0xffff_8000_2000_3f00;

#[test]
fn an_indirect_branch_is_a_jump_only_where_it_can_be_vouched_for() {
    let call = Some(Top::Call { ra: RA, sp: SP });
    let signed = RA | 0x002a_0000_0000_0000;
    let elsewhere = 0xffff_8000_1000_0800;
    for (top, target, sp, x30, want) in [
        // br x30, br x16, braa x30, sp in place of ret: a return.
        (call, RA, SP, RA, Jump::Return),
        (call, RA, SP, 0x1234, Jump::Return),
        (call, RA, SP, signed, Jump::Return),
        // To the return address on another SP: a return that will not match.
        (call, RA, SP - 0x40, RA, Jump::Return),
        // Below the call's SP: the callee's frame is there, a jump within it.
        (call, elsewhere, SP - 0x40, 0x1234, Jump::Within),
        // The call's SP and its return address in x30, signed or not: a tail call.
        (call, elsewhere, SP, RA, Jump::Within),
        (call, elsewhere, SP, signed, Jump::Within),
        // The call's SP and another x30, or above the call's SP: the callee has left.
        (call, elsewhere, SP, RA + 4, Jump::Return),
        (call, elsewhere, SP, 0, Jump::Return),
        (call, elsewhere, SP + 0x10, RA, Jump::Return),
        (call, RA + 0x100, SP + 0x40, RA, Jump::Return),
        // An entry from EL0: a branch cannot return there.
        (
            Some(Top::Entry {
                sp: SP,
                from_el0: true,
            }),
            elsewhere,
            SP,
            0,
            Jump::Within,
        ),
        // An entry within EL1: inside the handler's frame, or back out of it.
        (
            Some(Top::Entry {
                sp: SP,
                from_el0: false,
            }),
            elsewhere,
            SP - 0x150,
            0,
            Jump::Within,
        ),
        (
            Some(Top::Entry {
                sp: SP,
                from_el0: false,
            }),
            elsewhere,
            SP,
            0,
            Jump::Return,
        ),
        // Nothing known to lose.
        (None, elsewhere, SP, 0, Jump::Within),
    ] {
        assert_eq!(
            judge_jump(top, target, sp, x30),
            want,
            "{top:x?} to {target:#x} sp {sp:#x} x30 {x30:#x}"
        );
    }
}

#[test]
fn br_x30_in_place_of_ret_pops_its_frame() {
    let mut s = stack(64, 4);
    s.exception(svc(1, 0x4000), 0x9000);
    s.call(0x100, 0x8ff0);
    let caller = path(&s);
    for _ in 0..10 {
        s.call(0x200, 0x8fd0);
        assert_eq!(path(&s).len(), 3);
        s.jump(0x200, 0x8fd0, 0x200);
        assert_eq!(path(&s), caller);
    }
    // A direct branch back to the return address with the call's SP returns as well; to it
    // on another SP it is a jump inside the callee.
    s.call(0x200, 0x8fd0);
    s.arrive(0x200, || 0x8fb0);
    assert_eq!(path(&s).len(), 3);
    s.arrive(0x200, || 0x8fd0);
    assert_eq!(path(&s), caller);
    assert_eq!(s.stats(), StackStats::default());
}

#[test]
fn an_indirect_branch_it_cannot_vouch_for_makes_the_stack_unknown() {
    // Elsewhere in the caller, with the callee's frame released and x30 not the return
    // address; to a return address deeper in the stack; to the return address on another SP.
    for (target, sp, x30) in [
        (0x150, 0x8fd0, 0x150),
        (0x100, 0x8ff0, 0x100),
        (0x200, 0x8fe0, 0x200),
    ] {
        let mut s = stack(64, 4);
        s.exception(svc(1, 0x4000), 0x9000);
        s.call(0x100, 0x8ff0);
        s.call(0x200, 0x8fd0);
        s.jump(target, sp, x30);
        assert_eq!(path(&s), [Item::Unknown], "{target:#x} {sp:#x}");
        assert_eq!(s.stats().unmatched_returns, 1);
        // Never the frames below, guessed.
        s.call(0x300, 0x8fe0);
        assert_eq!(path(&s), [Item::Unknown, call(0x300)]);
    }
}

#[test]
fn jumps_and_tail_calls_keep_the_stack() {
    let mut s = stack(64, 4);
    let e = Item::Frame(svc(1, 0x4000));
    s.exception(svc(1, 0x4000), 0x9000);
    // The entry code's own jumps, inside its frame.
    s.jump(0x4100, 0x8ed0, 0);
    s.call(0x100, 0x8ed0);
    // A jump table inside the callee's frame; then its epilogue and a tail call through x16.
    s.jump(0x640, 0x8e90, 0x7777);
    s.jump(0x700, 0x8ed0, 0x100);
    assert_eq!(path(&s), [e, call(0x100)]);
    // The tail callee returns to where the call would have.
    s.ret(0x100, 0x8ed0);
    assert_eq!(path(&s), [e]);
    assert_eq!(s.stats(), StackStats::default());
}

#[test]
fn the_same_call_again_while_it_is_live_makes_the_stack_unknown() {
    // The callee went back into its caller with its return address still in x30 (a tail call
    // as far as the branch shows), and the caller makes the same call again.
    let mut s = stack(64, 4);
    s.exception(svc(1, 0x4000), 0x9000);
    s.call(0x100, 0x8ff0);
    s.call(0x200, 0x8fd0);
    s.jump(0x1f0, 0x8fd0, 0x200);
    assert_eq!(path(&s).len(), 3);
    s.call(0x200, 0x8fd0);
    assert_eq!(path(&s), [Item::Unknown, call(0x200)]);
    assert_eq!(s.stats().unmatched_returns, 1);
    // A recursion's calls from one site are made on different SPs: each a frame.
    let mut s = stack(64, 4);
    s.exception(svc(1, 0x4000), 0x9000);
    for i in 0..10 {
        s.call(0x200, 0x8fd0 - 0x20 * i);
    }
    assert_eq!(path(&s).len(), 11);
    assert_eq!(s.stats(), StackStats::default());
}

/// How code moves between functions, for [`the_stack_is_never_deeper_than_the_calls`]. Call
/// sites and branch targets are small numbers, made addresses by [`site`] and [`body`].
#[derive(Clone, Debug)]
enum Move {
    Call(u8),
    /// RET.
    Ret,
    /// BR to the return address with the call's SP, x30 as in [`X30`].
    BrRet(X30),
    /// A direct branch to the return address with the call's SP.
    BRet,
    /// BR inside the callee's frame (a jump table).
    Jump(u8, X30),
    /// BR with the callee's entry state (SP and x30 its call's) to another function.
    TailCall(u8, bool),
    /// A return elsewhere into the caller by BR: SP restored, x30 not the return address.
    BrElsewhere(u8),
    /// A return to a frame below the top (`longjmp`): BR to its return address with its SP.
    BrDeeper(u8),
}

/// What x30 holds at a branch.
#[derive(Clone, Copy, Debug)]
enum X30 {
    Ra,
    Signed,
    Other,
}

fn x30_strategy() -> impl Strategy<Value = X30> {
    prop_oneof![Just(X30::Ra), Just(X30::Signed), Just(X30::Other)]
}

fn moves() -> impl Strategy<Value = Move> {
    prop_oneof![
        6 => (0..6u8).prop_map(Move::Call),
        2 => Just(Move::Ret),
        3 => x30_strategy().prop_map(Move::BrRet),
        1 => Just(Move::BRet),
        2 => (any::<u8>(), x30_strategy()).prop_map(|(t, x)| Move::Jump(t, x)),
        1 => (any::<u8>(), any::<bool>()).prop_map(|(t, s)| Move::TailCall(t, s)),
        1 => any::<u8>().prop_map(Move::BrElsewhere),
        1 => any::<u8>().prop_map(Move::BrDeeper),
    ]
}

const KERNEL: u64 = 0xffff_8000_1000_0000;

/// The return address of call site `k`.
fn site(k: u8) -> u64 {
    KERNEL + 0x1000 * (k as u64 + 1) + 0x24
}

/// A branch target that is no call's return address.
fn body(t: u8) -> u64 {
    KERNEL + 0x10_0000 + 8 * t as u64
}

proptest! {
    /// Calls, and returns by RET, by `br x30` (and `br x16`, `braa`), by a direct branch; jumps
    /// within functions, tail calls, returns elsewhere into the caller and to a frame further
    /// down, on a stack whose SP each function lowers below the SP it was called with. The
    /// stack read back is always the real one, or `[unknown]` under the real one's top frames:
    /// never a frame that is not live, so never deeper than the real calls.
    #[test]
    fn the_stack_is_never_deeper_than_the_calls(moves in proptest::collection::vec(moves(), 0..200)) {
        let mut s = stack(2048, 4);
        s.reset(false);
        // (return address, SP the call was made with); the code at depth d runs on sp_of(d).
        let mut real: Vec<(u64, u64)> = Vec::new();
        let sp_of = |d: usize| 0xffff_8000_2000_8000 - 0x40 * d as u64;
        let x30_of = |x: X30, ra: u64| match x {
            X30::Ra => ra,
            X30::Signed => ra | 0x0055_0000_0000_0000 & !(1 << 55),
            X30::Other => ra ^ 0x8,
        };
        for m in moves {
            let d = real.len();
            let top = real.last().copied();
            match (m, top) {
                (Move::Call(k), _) => {
                    if d >= 50 { continue; }
                    s.call(site(k), sp_of(d));
                    real.push((site(k), sp_of(d)));
                }
                (Move::Ret, Some((ra, sp))) => {
                    s.ret(ra, sp);
                    real.pop();
                }
                (Move::BrRet(x), Some((ra, sp))) => {
                    s.jump(ra, sp, x30_of(x, ra));
                    real.pop();
                }
                (Move::BRet, Some((ra, sp))) => {
                    s.arrive(ra, || sp);
                    real.pop();
                }
                (Move::Jump(t, x), top) => {
                    let ra = top.map_or(0, |f| f.0);
                    s.jump(body(t), sp_of(d), x30_of(x, ra));
                    // A direct branch inside the function too: it moves nothing.
                    s.arrive(body(t) + 4, || sp_of(d));
                }
                (Move::TailCall(t, signed), Some((ra, sp))) => {
                    s.jump(body(t), sp, x30_of(if signed { X30::Signed } else { X30::Ra }, ra));
                }
                (Move::BrElsewhere(t), Some((ra, sp))) => {
                    s.jump(body(t), sp, ra ^ 0x8);
                    real.pop();
                }
                (Move::BrDeeper(i), Some(_)) => {
                    let i = i as usize % d;
                    let (ra, sp) = real[i];
                    s.jump(ra, sp, ra);
                    real.truncate(i);
                }
                _ => continue,
            }
            let got = path(&s);
            let want: Vec<Item> = real.iter().map(|f| call(f.0)).collect();
            let known = match got.first() {
                Some(Item::Unknown) => &got[1..],
                _ => &got[..],
            };
            prop_assert!(known.len() <= want.len(), "{got:x?} deeper than {want:x?}");
            prop_assert_eq!(known, &want[want.len() - known.len()..]);
            if got.first() != Some(&Item::Unknown) {
                prop_assert_eq!(&got, &want);
            }
        }
    }
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
