//! Call stacks of a traced phase's kernel code, from the branches the step engine sees rather
//! than from the guest's memory: every call the kernel made (BL, BLR) and has not returned
//! from is a frame, and so is every exception entry. Nothing is read from the guest's stack,
//! so frame pointers and frame records, however corrupt (a cycle, a chain of any length,
//! pointers to untagged, unmapped or device memory, unaligned), change nothing; what was not
//! seen is `[unknown]`, never guessed. A return the follower cannot recognise makes the stack
//! `[unknown]` from there, never leaves a frame that is gone.
//!
//! - A call that completes at EL1 pushes its return address and the SP it was made with. A
//!   call made with the return address and SP of a frame still live is that call again: its
//!   callee left by a return not recognised (a branch that looked like a jump or a tail call,
//!   below), so the stack becomes `[unknown]` before the call is pushed.
//! - A return (RET, RETAA, RETAB) pops the top frame when it goes to that frame's return
//!   address with that frame's SP (AAPCS64: a callee returns with the SP it was called with).
//!   A return that matches instead the top of a stack saved earlier brings that stack back:
//!   the kernel switched tasks (`cpu_switch_to` returns on the next task's stack), and the one
//!   left is saved in turn. Any other return ends what is known: the stack becomes
//!   `[unknown]`.
//! - An indirect branch that is not a call (BR, BRAA, BRAB, BRAAZ, BRABZ) leaves the stack as
//!   it is where the follower can vouch that the code is still in the top frame's callee: a
//!   jump within it, or a tail call ([`judge_jump`]). Any other is taken for a return: it pops
//!   the top frame if it goes to its return address with its SP (`br x30` in place of
//!   `ret`), and otherwise the stack becomes `[unknown]` (a branch to a return address deeper
//!   in the stack included: frames are never popped past unmatched). The kernel switches
//!   tasks by RET, so a branch never resumes a saved stack.
//! - Any other instruction that arrives at the top frame's return address with its SP (a
//!   direct branch back into the caller) returns from it.
//! - An exception taken to EL1 pushes an entry frame; taken from EL0, the kernel's stack
//!   starts at it.
//! - An exception return to EL0 empties the stack; one within EL1 pops to and including the
//!   newest entry frame.
//!
//! A stack is a node of a tree of frames (its parent is the stack without its top frame), so
//! the per-PC table keys each PC by one number. The tree is bounded; a frame without room in
//! it, a stack deeper than [`DEPTH`], or a task evicted from the saved stacks, starts again
//! from `[unknown]`, and is counted ([`StackStats`]).

use serde::{Deserialize, Serialize};

/// Frames kept live: a Linux interrupt taken in a system call is about 30 deep.
pub const DEPTH: usize = 64;
/// The stack no frame is known in: the kernel's when entered from EL0 has none, and EL0
/// code's stack is not followed (its instructions all have this node).
pub const ROOT: u32 = 0;
/// Frames below that were not seen (a phase begun in the kernel, a return no frame matched,
/// an eviction, an overflow).
pub const UNKNOWN: u32 = 1;
/// Nodes below this are not in the tree.
const FIRST: u32 = 2;
/// Slots probed for a node before it is given up.
const PROBES: usize = 32;

/// One frame: a call's return address, or an exception entry.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct StackFrame {
    /// A call: its return address. An entry: ELR_EL1, where the interrupted code resumes.
    pub addr: u64,
    /// 0: a call. Otherwise an exception entry: 1 + its vector's offset from VBAR_EL1 / 0x80
    /// (so 1-4 are the current EL with SP0, 5-8 with SPx, 9-12 from AArch64 EL0, each
    /// synchronous, IRQ, FIQ, SError).
    pub entry: u8,
    /// A synchronous entry: ESR_EL1.EC.
    pub ec: u8,
    /// An SVC from EL0: x8, the system call's number.
    pub nr: u32,
}

/// The vector offset of a synchronous exception from a lower EL using AArch64.
pub const LOWER_SYNC: u8 = 9;
/// ESR_ELx.EC of an SVC executed in AArch64.
pub const EC_SVC64: u8 = 0x15;

impl StackFrame {
    /// A call's frame.
    pub fn call(ra: u64) -> Self {
        Self {
            addr: ra,
            ..Self::default()
        }
    }

    /// An exception entry at `offset` from VBAR_EL1, with ESR_EL1's class `ec` and x8 `x8`
    /// (kept only for an SVC from EL0), returning to `elr`.
    pub fn entry(offset: u64, ec: u8, x8: u64, elr: u64) -> Self {
        let entry = 1 + (offset >> 7) as u8;
        let sync = (entry - 1) & 3 == 0;
        Self {
            addr: elr,
            entry,
            ec: if sync { ec } else { 0 },
            nr: if entry == LOWER_SYNC && ec == EC_SVC64 {
                x8 as u32
            } else {
                0
            },
        }
    }

    /// An exception entry from EL0: the bottom of a kernel stack.
    pub fn from_el0(&self) -> bool {
        self.entry >= LOWER_SYNC
    }

    /// The entry's kind: 0 synchronous, 1 IRQ, 2 FIQ, 3 SError.
    pub fn kind(&self) -> u8 {
        self.entry.wrapping_sub(1) & 3
    }
}

/// The newest live frame, as [`judge_jump`] reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Top {
    /// A call: its return address and the SP it was made with.
    Call { ra: u64, sp: u64 },
    /// An exception entry: the SP after it, and whether it was taken from EL0.
    Entry { sp: u64, from_el0: bool },
}

/// What an indirect branch that is not a call is to the stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Jump {
    /// A jump within the running code, or a tail call: the frames stay.
    Within,
    /// Taken for a return: the top frame is popped if the branch goes to its return address
    /// with its SP, otherwise the stack becomes `[unknown]`.
    Return,
}

/// The bits of a kernel code address that pointer authentication leaves alone: it puts its
/// code in bits 54:48 (and 63:56 without TBI) of an address of at most 48 bits of VA, never
/// in bit 55, which says which half of the address space the address is in.
const UNSIGNED: u64 = ((1 << 48) - 1) | 1 << 55;

/// The rule for an indirect branch that is not a call (BR, BRAA, BRAB, BRAAZ, BRABZ),
/// completed at EL1 to `target` with SP `sp` and x30 `x30`, the newest live frame being
/// `top`. The branch is kept as a jump only where the follower can vouch that the code has
/// not left the top frame's callee:
///
/// - with SP below the SP the top call was made with: the callee's frame is still on the
///   stack (AAPCS64: a return restores the SP the call was made with), so this is a jump
///   within it (a switch's jump table);
/// - with that SP and x30 still holding the call's return address (compared without the
///   pointer authentication code, which may sign it): the state is the callee's on entry, so
///   this is a tail call, or a jump before its prologue or after its epilogue, and whatever
///   runs there returns where the call would;
/// - with an exception entry on top: taken from EL0 (a branch cannot return to EL0), or with
///   SP below the entry's (the handler's frame is on the stack);
/// - with no frame live (nothing known to lose).
///
/// Anything else is taken for a return, and so is a branch to the top call's return address
/// whatever the SP: it pops the top frame when the SP is the call's (`br x30` in place of
/// `ret`), and otherwise the stack becomes `[unknown]`. A return to somewhere else in the
/// caller made with the callee's entry state cannot be told from a tail call; should the
/// caller then make the same call again, [`CallStack::call`] finds it still live, and the
/// stack becomes `[unknown]` there.
pub fn judge_jump(top: Option<Top>, target: u64, sp: u64, x30: u64) -> Jump {
    let within = match top {
        None => true,
        Some(Top::Call { ra, sp: at }) => {
            target != ra && (sp < at || (sp == at && (x30 ^ ra) & UNSIGNED == 0))
        }
        Some(Top::Entry { sp: at, from_el0 }) => from_el0 || sp < at,
    };
    if within { Jump::Within } else { Jump::Return }
}

/// A node of the tree as stored: its parent and its top frame.
#[derive(Clone, Copy, Debug)]
#[repr(C)]
pub struct NodeSlot {
    /// 0: empty (no node has parent 0 and is stored: ROOT's children have parent ROOT, so
    /// the stored parent is the node + 1).
    parent1: u32,
    frame: StackFrame,
}

impl NodeSlot {
    /// An empty slot: all zero, so that a static table of them needs no bytes in an image.
    pub const ZERO: NodeSlot = NodeSlot {
        parent1: 0,
        frame: StackFrame {
            addr: 0,
            entry: 0,
            ec: 0,
            nr: 0,
        },
    };
}

/// A live frame: its node, and what a return must match to pop it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Live {
    node: u32,
    /// An exception entry (popped by ERET, never by a return).
    entry: bool,
    /// An exception entry taken from EL0.
    from_el0: bool,
    ra: u64,
    sp: u64,
}

/// A task's stack, saved when the kernel switched away from it.
#[derive(Clone, Copy, Debug)]
pub struct SavedStack {
    base: u32,
    depth: u32,
    /// When it was saved (the oldest is evicted first).
    age: u64,
    live: [Live; DEPTH],
}

impl SavedStack {
    /// An empty one, all zero (for a static).
    pub const ZERO: SavedStack = SavedStack {
        base: 0,
        depth: 0,
        age: 0,
        live: [Live {
            node: 0,
            entry: false,
            from_el0: false,
            ra: 0,
            sp: 0,
        }; DEPTH],
    };
}

/// What the stacks could not follow in a phase (each made a stack start from `[unknown]`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StackStats {
    /// Returns that matched no frame (nor a saved stack's top).
    pub unmatched_returns: u32,
    /// Exception returns within EL1 with no entry frame to pop.
    pub unmatched_erets: u32,
    /// Calls made with [`DEPTH`] frames live.
    pub too_deep: u32,
    /// Frames the tree had no room for.
    pub tree_full: u32,
    /// Saved stacks evicted for want of room.
    pub evicted: u32,
}

/// The call stack of the running kernel code, and the tree its nodes are in.
pub struct CallStack {
    nodes: &'static mut [NodeSlot],
    shift: u32,
    used: u32,
    saved: &'static mut [SavedStack],
    clock: u64,
    base: u32,
    depth: usize,
    live: [Live; DEPTH],
    stats: StackStats,
}

impl CallStack {
    /// Over `nodes` (a power of two) and room for `saved.len()` suspended tasks; both are
    /// cleared.
    pub fn new(nodes: &'static mut [NodeSlot], saved: &'static mut [SavedStack]) -> Self {
        assert!(nodes.len().is_power_of_two() && nodes.len() >= 2);
        assert!(nodes.len() < (u32::MAX - FIRST) as usize);
        let shift = 64 - nodes.len().trailing_zeros();
        nodes.fill(NodeSlot::ZERO);
        let mut s = Self {
            nodes,
            shift,
            used: 0,
            saved,
            clock: 0,
            base: ROOT,
            depth: 0,
            live: [Live::default(); DEPTH],
            stats: StackStats::default(),
        };
        s.reset(true);
        s
    }

    /// A new phase: no node, no saved stack. At EL0 the kernel's stack is empty; in the
    /// kernel, what called the code running now was not seen.
    pub fn reset(&mut self, at_el0: bool) {
        if self.used != 0 {
            self.nodes.fill(NodeSlot::ZERO);
        }
        self.used = 0;
        for s in self.saved.iter_mut() {
            s.age = 0;
        }
        self.clock = 0;
        self.base = if at_el0 { ROOT } else { UNKNOWN };
        self.depth = 0;
        self.stats = StackStats::default();
    }

    /// The node of the stack as it is now.
    #[inline]
    pub fn node(&self) -> u32 {
        match self.depth {
            0 => self.base,
            d => self.live[d - 1].node,
        }
    }

    /// A call completed at EL1, made with SP `sp`; it returns to `ra`.
    pub fn call(&mut self, ra: u64, sp: u64) {
        if self.live[..self.depth]
            .iter()
            .any(|l| !l.entry && l.ra == ra && l.sp == sp)
        {
            // The same call again while it is live: no callee calls from its caller's own
            // call site on its caller's SP, so that frame's callee has left, by a return the
            // stack did not see. Whatever stands on it is not known.
            self.stats.unmatched_returns += 1;
            self.base = UNKNOWN;
            self.depth = 0;
        }
        self.push(StackFrame::call(ra), false, sp);
    }

    /// An exception was taken to EL1 (`frame` from [`StackFrame::entry`]), with SP `sp`
    /// after it.
    pub fn exception(&mut self, frame: StackFrame, sp: u64) {
        if frame.from_el0() {
            // The kernel's stack starts here, whatever was thought live.
            self.base = ROOT;
            self.depth = 0;
        }
        self.push(frame, true, sp);
    }

    fn push(&mut self, frame: StackFrame, entry: bool, sp: u64) {
        if self.depth == DEPTH {
            self.stats.too_deep += 1;
            self.base = UNKNOWN;
            self.depth = 0;
        }
        let node = self.intern(self.node(), frame);
        self.live[self.depth] = Live {
            node,
            entry,
            from_el0: entry && frame.from_el0(),
            ra: frame.addr,
            sp,
        };
        self.depth += 1;
    }

    /// A return at EL1 went to `target` with SP `sp`.
    pub fn ret(&mut self, target: u64, sp: u64) {
        if let Some(top) = self.depth.checked_sub(1).map(|d| self.live[d])
            && !top.entry
            && top.ra == target
            && top.sp == sp
        {
            self.depth -= 1;
            return;
        }
        // Another task's stack, saved when the kernel left it?
        let found = self.saved.iter().position(|s| {
            s.age != 0 && s.depth != 0 && {
                let top = s.live[s.depth as usize - 1];
                !top.entry && top.ra == target && top.sp == sp
            }
        });
        match found {
            Some(i) => {
                // The stack left is saved where the one resumed was.
                self.clock += 1;
                let s = &mut self.saved[i];
                let resumed = (s.base, s.depth as usize - 1);
                s.live.swap_with_slice(&mut self.live);
                (s.base, s.depth) = (self.base, self.depth as u32);
                s.age = if self.depth != 0 { self.clock } else { 0 };
                (self.base, self.depth) = resumed;
            }
            None => {
                if self.depth != 0 {
                    self.save();
                }
                if self.depth != 0 || self.base != UNKNOWN {
                    self.stats.unmatched_returns += 1;
                }
                self.base = UNKNOWN;
                self.depth = 0;
            }
        }
    }

    /// An indirect branch that is not a call (BR and its authenticated forms) completed at
    /// EL1, to `target`, with SP `sp` and x30 `x30`: kept as a jump or a tail call where
    /// [`judge_jump`] vouches for it, otherwise taken for a return. It pops the top frame if
    /// it matches it; if not, the stack becomes `[unknown]`. (The kernel switches tasks by
    /// RET: a branch never resumes a saved stack, nor saves this one.)
    pub fn jump(&mut self, target: u64, sp: u64, x30: u64) {
        if judge_jump(self.top(), target, sp, x30) == Jump::Within {
            return;
        }
        if let Some(Top::Call { ra, sp: at }) = self.top()
            && ra == target
            && at == sp
        {
            self.depth -= 1;
            return;
        }
        self.stats.unmatched_returns += 1;
        self.base = UNKNOWN;
        self.depth = 0;
    }

    /// Any other instruction completed at EL1 and the next one is at `target`, with SP `sp()`
    /// (read only when `target` is the top call's return address): arriving there with the SP
    /// the call was made with, the code is back in the caller (a direct branch there is a
    /// return).
    #[inline]
    pub fn arrive(&mut self, target: u64, sp: impl FnOnce() -> u64) {
        if let Some(top) = self.depth.checked_sub(1).map(|d| self.live[d])
            && !top.entry
            && top.ra == target
            && top.sp == sp()
        {
            self.depth -= 1;
        }
    }

    /// The newest live frame; None when none is (the stack is `[unknown]`, or empty).
    pub fn top(&self) -> Option<Top> {
        let l = self.live[..self.depth].last()?;
        Some(if l.entry {
            Top::Entry {
                sp: l.sp,
                from_el0: l.from_el0,
            }
        } else {
            Top::Call { ra: l.ra, sp: l.sp }
        })
    }

    /// Keeps the stack as it is, in a free or the oldest saved slot.
    fn save(&mut self) {
        let Some(i) = (0..self.saved.len()).min_by_key(|&i| self.saved[i].age) else {
            return;
        };
        if self.saved[i].age != 0 {
            self.stats.evicted += 1;
        }
        self.clock += 1;
        let s = &mut self.saved[i];
        s.age = self.clock;
        s.base = self.base;
        s.depth = self.depth as u32;
        s.live[..self.depth].copy_from_slice(&self.live[..self.depth]);
    }

    /// An exception return completed, to EL0 (`to_el0`) or within EL1.
    pub fn eret(&mut self, to_el0: bool) {
        if to_el0 {
            self.base = ROOT;
            self.depth = 0;
            return;
        }
        match self.live[..self.depth].iter().rposition(|l| l.entry) {
            Some(i) => self.depth = i,
            None => {
                self.stats.unmatched_erets += 1;
                self.base = UNKNOWN;
                self.depth = 0;
            }
        }
    }

    /// The node for `frame` above `parent`: its own, made if new; [`UNKNOWN`] if the tree
    /// has no room (the stack then starts again from there).
    fn intern(&mut self, parent: u32, frame: StackFrame) -> u32 {
        let mask = self.nodes.len() - 1;
        let h = frame
            .addr
            .wrapping_add((parent as u64) << 40 ^ (frame.entry as u64) << 32 ^ frame.nr as u64)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let mut i = (h >> self.shift) as usize;
        for _ in 0..PROBES {
            let s = &mut self.nodes[i];
            if s.parent1 == 0 {
                *s = NodeSlot {
                    parent1: parent + 1,
                    frame,
                };
                self.used += 1;
                return i as u32 + FIRST;
            }
            if s.parent1 == parent + 1 && s.frame == frame {
                return i as u32 + FIRST;
            }
            i = (i + 1) & mask;
        }
        self.stats.tree_full += 1;
        UNKNOWN
    }

    /// Every node made in the phase: (node, parent, top frame).
    pub fn nodes(&self) -> impl Iterator<Item = (u32, u32, StackFrame)> + '_ {
        self.nodes
            .iter()
            .enumerate()
            .filter(|(_, s)| s.parent1 != 0)
            .map(|(i, s)| (i as u32 + FIRST, s.parent1 - 1, s.frame))
    }

    /// Nodes made in the phase.
    pub fn used(&self) -> u32 {
        self.used
    }

    pub fn stats(&self) -> StackStats {
        self.stats
    }
}

#[cfg(test)]
mod tests;
