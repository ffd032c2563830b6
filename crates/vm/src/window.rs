//! Who counts a window that every CPU counts, and when its figures are whole; and what a
//! tracing CPU's step exits may do without the hypervisor's lock ([`steps`]).
//!
//! The window opens on one CPU (the opener). Every other CPU joins at its next exit: the
//! hypervisor makes sure there is one before that CPU runs another instruction, so each
//! counts from its first instruction after the open. It closes on any CPU; each CPU that had
//! joined leaves at its next exit after the close (or as it goes off), and hands in its share.
//! The window's figures are whole, and its records go out, when the last one has left.
//!
//! A CPU joins once: a CPU that left (it went off) stays out until the window is over.

use alloc::vec::Vec;

/// One CPU's place in the window, with what it kept when it joined (`S`: its counters).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Member<S> {
    /// Has not joined (it has not exited since the open, or it is off).
    Out,
    /// Counting since it joined.
    In(S),
    /// Has handed in its share.
    Left,
}

/// A window's members, by CPU index.
#[derive(Clone, Debug)]
pub struct Window<S> {
    pub id: u32,
    members: Vec<Member<S>>,
    closed: bool,
}

impl<S> Window<S> {
    /// Window `id`, opened by CPU `opener` (which joins at once, with `at_open`) on a
    /// machine of `cpus` CPUs.
    pub fn open(id: u32, cpus: usize, opener: usize, at_open: S) -> Self {
        assert!(opener < cpus, "the opener is one of the CPUs");
        let mut members: Vec<Member<S>> = (0..cpus).map(|_| Member::Out).collect();
        members[opener] = Member::In(at_open);
        Self {
            id,
            members,
            closed: false,
        }
    }

    /// Whether `cpu` joins at this exit: the window is open, and the CPU has not joined
    /// before. It then joins with `at_join`.
    pub fn join(&mut self, cpu: usize, at_join: impl FnOnce() -> S) -> bool {
        let joins = !self.closed && matches!(self.members.get(cpu), Some(Member::Out));
        if joins {
            self.members[cpu] = Member::In(at_join());
        }
        joins
    }

    /// `cpu` is counting.
    pub fn counting(&self, cpu: usize) -> bool {
        matches!(self.members.get(cpu), Some(Member::In(_)))
    }

    /// `cpu` must leave at this exit: the window closed while it counted.
    pub fn must_leave(&self, cpu: usize) -> bool {
        self.closed && self.counting(cpu)
    }

    /// `cpu` leaves (the window closed, or the CPU goes off): what it kept when it joined,
    /// None if it was not counting.
    pub fn leave(&mut self, cpu: usize) -> Option<S> {
        match self.members.get_mut(cpu) {
            Some(m @ Member::In(_)) => match core::mem::replace(m, Member::Left) {
                Member::In(s) => Some(s),
                _ => None,
            },
            _ => None,
        }
    }

    /// Closes the window: no CPU joins from now on. Returns the CPUs still counting, which
    /// leave at their next exit (the hypervisor makes sure they take one soon).
    pub fn close(&mut self) -> Vec<usize> {
        self.closed = true;
        (0..self.members.len())
            .filter(|&c| self.counting(c))
            .collect()
    }

    pub fn closed(&self) -> bool {
        self.closed
    }

    /// Closed, and every CPU that joined has left: the figures are whole.
    pub fn done(&self) -> bool {
        self.closed && !self.members.iter().any(|m| matches!(m, Member::In(_)))
    }

    /// The CPUs that joined (counting or left), in order.
    pub fn joined(&self) -> impl Iterator<Item = usize> + '_ {
        self.members
            .iter()
            .enumerate()
            .filter(|(_, m)| !matches!(m, Member::Out))
            .map(|(c, _)| c)
    }
}

/// What a tracing CPU's step exits need of the VM's shared state, decided at the end of every
/// exit that holds the hypervisor's lock and kept for the step exits that follow it: a step
/// reaches only its CPU's own counters, step engine and MTE controls, and a stepped window's
/// clock, unless one of the cases below shares more.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Steps {
    /// Every exit takes the lock.
    Locked = 0,
    /// A step needs nothing shared.
    Alone = 1,
    /// A step needs nothing shared but the clock of a window that steps several CPUs, of
    /// which a CPU that traces is a member.
    AloneInWindow = 2,
}

/// The window, as [`steps`] needs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WindowState {
    /// No window is open.
    None,
    /// Open: every CPU that traces counts in it (phases are the machine's, one at a time,
    /// so a CPU traces because it joined).
    Open,
    /// Closed, with CPUs still to hand in their shares: each does so at its next exit, which
    /// must therefore take the lock.
    Closing,
}

/// What the step exits after this one may do without the lock. `sampled`: a sampled phase
/// is open (its units end at steps, under the lock); `instruments`: per-PC instruments are
/// on, which move to the CPU that opens the next phase, so on a machine of several `cpus`
/// no step may touch them unlocked.
pub fn steps(sampled: bool, instruments: bool, cpus: usize, window: WindowState) -> Steps {
    if sampled || instruments && cpus > 1 {
        return Steps::Locked;
    }
    match window {
        WindowState::None => Steps::Alone,
        WindowState::Closing => Steps::Locked,
        WindowState::Open if cpus > 1 => Steps::AloneInWindow,
        WindowState::Open => Steps::Alone,
    }
}

impl Steps {
    /// The value stored by [`Steps`]'s `u8` (anything else: [`Steps::Locked`]).
    pub const fn from_u8(v: u8) -> Self {
        match v {
            1 => Self::Alone,
            2 => Self::AloneInWindow,
            _ => Self::Locked,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn each_cpu_joins_once_and_the_window_is_done_when_the_last_leaves() {
        let mut w = Window::open(7, 4, 1, 10u64);
        assert!(w.counting(1));
        assert!(w.join(0, || 20));
        assert!(!w.join(0, || 21), "joined already");
        assert!(!w.join(1, || 22), "the opener is in");
        assert!(!w.join(9, || 23), "no such CPU");
        assert_eq!(w.close(), [0, 1]);
        assert!(!w.join(2, || 30), "closed: no CPU joins");
        assert!(!w.done());
        assert!(w.must_leave(0) && w.must_leave(1) && !w.must_leave(2));
        assert_eq!(w.leave(1), Some(10));
        assert_eq!(w.leave(1), None);
        assert!(!w.done());
        assert_eq!(w.leave(0), Some(20));
        assert!(w.done());
        assert_eq!(w.joined().collect::<Vec<_>>(), [0, 1]);
    }

    #[test]
    fn a_cpu_that_goes_off_leaves_and_does_not_come_back() {
        let mut w = Window::open(1, 2, 0, ());
        assert!(w.join(1, || ()));
        assert_eq!(w.leave(1), Some(()));
        assert!(!w.join(1, || ()), "left: out until the window is over");
        assert!(!w.done(), "not closed");
        assert_eq!(w.close(), [0]);
        assert_eq!(w.leave(0), Some(()));
        assert!(w.done());
    }

    #[derive(Clone, Debug)]
    enum Event {
        Exit(usize),
        Off(usize),
        Close,
    }

    proptest! {
        /// Whatever the order of exits, power-offs and the close: every CPU hands in at most
        /// one share, the one it kept when it joined; none joins after the close; and the
        /// window is done exactly when it is closed and nobody counts.
        #[test]
        fn shares_are_handed_in_once_and_done_means_nobody_counts(
            cpus in 1usize..6,
            events in proptest::collection::vec(
                prop_oneof![
                    (0usize..6).prop_map(Event::Exit),
                    (0usize..6).prop_map(Event::Off),
                    Just(Event::Close),
                ],
                0..40,
            ),
        ) {
            let mut w = Window::open(3, cpus, 0, 0usize);
            let mut handed = alloc::vec![0u32; cpus];
            for e in events {
                match e {
                    Event::Exit(c) => {
                        if w.must_leave(c) {
                            prop_assert_eq!(w.leave(c), Some(c));
                            handed[c] += 1;
                        } else {
                            let was_closed = w.closed();
                            if w.join(c, || c) {
                                prop_assert!(!was_closed);
                            }
                        }
                    }
                    Event::Off(c) => {
                        if let Some(s) = w.leave(c) {
                            prop_assert_eq!(s, c);
                            handed[c] += 1;
                        }
                    }
                    Event::Close => {
                        let _ = w.close();
                    }
                }
                prop_assert!(handed.iter().all(|&h| h <= 1));
                prop_assert_eq!(
                    w.done(),
                    w.closed() && (0..cpus).all(|c| !w.counting(c))
                );
            }
        }
    }

    /// A step goes without the lock only with no sampled phase, no window closing and no
    /// per-PC instruments that could move to another CPU; in an open window on several CPUs
    /// it keeps the window's clock.
    #[test]
    fn steps_go_without_the_lock_only_when_nothing_shared_is_theirs() {
        use Steps::*;
        use WindowState::{Closing, Open};
        let none = WindowState::None;
        for (sampled, instruments, cpus, window, expect) in [
            (false, false, 1, none, Alone),
            (false, false, 4, none, Alone),
            (false, false, 1, Open, Alone),
            (false, false, 2, Open, AloneInWindow),
            (false, false, 4, Open, AloneInWindow),
            (false, false, 1, Closing, Locked),
            (false, false, 4, Closing, Locked),
            (true, false, 1, none, Locked),
            (true, false, 4, Open, Locked),
            (false, true, 1, none, Alone),
            (false, true, 1, Open, Alone),
            (false, true, 2, none, Locked),
            (false, true, 4, Open, Locked),
        ] {
            let s = steps(sampled, instruments, cpus, window);
            assert_eq!(s, expect, "{sampled} {instruments} {cpus} {window:?}");
            assert_eq!(Steps::from_u8(s as u8), s, "the stored value reads back");
        }
        assert_eq!(Steps::from_u8(7), Locked, "an unknown value takes the lock");
    }
}
