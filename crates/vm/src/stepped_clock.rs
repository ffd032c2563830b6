//! The machine's guest time while a window steps several CPUs: what each CPU's guest reads
//! from its virtual counter then, and what its timer is compared against.
//!
//! Outside such a window the hypervisor takes its own time out of the counter
//! ([`crate::guest_clock`]): it measures each exit's span on the counter and charges it.
//! Stepping several CPUs breaks that measure. Under QEMU's `-icount` one host thread runs the
//! CPUs in turn, and with every instruction stepped, every exit of one CPU can contain
//! another's: a CPU waiting for the hypervisor's lock yields, and QEMU also stops a CPU right
//! after an offset write that makes its timer the machine's next deadline. A span on the
//! counter then holds the other CPU's guest instruction as well as EL2 time, and nothing
//! tells them apart. Measured on 2 CPUs: the account charged 85% of the guest's instructions
//! as the hypervisor's (0.058 ms of guest time for 398,202 instructions), and a CPU's own
//! counter, read between two of its exits, ran up to seconds ahead of the machine's.
//!
//! So a stepped window keeps guest time from what the guest does, not from spans:
//!
//! - every instruction a member CPU retires is one tick (under `-icount shift=0` at the
//!   counter's 1 GHz, exactly what it costs on the counter without the hypervisor);
//! - while every member CPU is halted in its guest's WFI, the counter's own advance (QEMU
//!   warps it to the next timer deadline) is idle time, and counts whole;
//! - the window's guest time is the machine's guest time at its opening plus both.
//!
//! A CPU's own clock may run ahead of the machine's ([`crate::guest_clock`]: it stands still
//! at what its guest has seen until the machine's catches up). So do the window's reads: they
//! are answered with the window's time or, if later, the latest any member's guest had seen
//! of its own clock when it joined ([`Stepped::read`]), one value for every member. Answered
//! each with its own CPU's, one CPU would read below what another had already read.
//!
//! It is one value for the machine at any moment, and it never goes back: the member CPUs'
//! counter reads trap (FEAT_ECV's CNTHCTL_EL2.EL1TVCT) and are answered with it, and each
//! member returns to its guest with its offset set to it (its timer then fires when the
//! machine's guest time reaches the compare value, give or take what another CPU runs
//! before its next exit; an early interrupt is one Linux finds nothing due for).

/// The window's account: [`Stepped::now`] is its guest time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stepped {
    /// Guest time at the opening (the machine's, from its account of hypervisor time).
    base: u64,
    /// Instructions retired by member CPUs since.
    retired: u64,
    /// Counter ticks during which every member CPU was halted, since.
    idle: u64,
    /// Member CPUs, and of them those not halted in their guest's WFI.
    members: u32,
    awake: u32,
    /// The counter when the last member halted, while none is awake.
    idle_since: u64,
    /// The latest any member's guest had seen of its own clock when it joined: no read in
    /// the window is answered below it.
    floor: u64,
}

impl Default for Stepped {
    fn default() -> Self {
        Self::new()
    }
}

impl Stepped {
    /// No window, no members.
    pub const fn new() -> Self {
        Self {
            base: 0,
            retired: 0,
            idle: 0,
            members: 0,
            awake: 0,
            idle_since: 0,
            floor: 0,
        }
    }

    /// Guest time at counter value `counter`.
    pub fn now(&self, counter: u64) -> u64 {
        let idling = if self.members > 0 && self.awake == 0 {
            counter.saturating_sub(self.idle_since)
        } else {
            0
        };
        self.base + self.retired + self.idle + idling
    }

    /// What a member's read of its clock is answered with at counter value `counter`: the
    /// window's time, or what a member had seen when it joined if that is later.
    pub fn read(&self, counter: u64) -> u64 {
        self.now(counter).max(self.floor)
    }

    /// A CPU joins at counter value `counter`, its guest having seen its own clock up to
    /// `seen`; the first starts the account at `machine`, the machine's guest time then.
    pub fn join(&mut self, counter: u64, machine: u64, seen: u64) {
        if self.members == 0 {
            *self = Self {
                base: machine,
                idle_since: counter,
                ..Self::new()
            };
        }
        self.members += 1;
        self.floor = self.floor.max(seen);
        self.wake(counter);
    }

    /// A member CPU (awake: it leaves at an exit) leaves at counter value `counter`; the
    /// guest time then.
    pub fn leave(&mut self, counter: u64) -> u64 {
        let now = self.now(counter);
        self.members = self.members.saturating_sub(1);
        self.awake = self.awake.saturating_sub(1);
        if self.members > 0 && self.awake == 0 {
            self.idle_since = counter;
        }
        now
    }

    /// A member CPU retired `n` more instructions.
    pub fn retire(&mut self, n: u64) {
        self.retired += n;
    }

    /// A member CPU halts for its guest's WFI at counter value `counter`.
    pub fn halt(&mut self, counter: u64) {
        self.awake = self.awake.saturating_sub(1);
        if self.awake == 0 {
            self.idle_since = counter;
        }
    }

    /// A member CPU is awake again (from a halt, or joining) at counter value `counter`.
    pub fn wake(&mut self, counter: u64) {
        if self.awake == 0 && self.members > 0 {
            self.idle += counter.saturating_sub(self.idle_since);
        }
        self.awake = (self.awake + 1).min(self.members);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Two CPUs joined at counter value 0, the window starting at guest time `base`.
    fn two_members(base: u64) -> Stepped {
        let mut s = Stepped::new();
        s.join(0, base, 0);
        s.join(0, base, 0);
        s
    }

    /// Two CPUs stepped in turn, each exit 400 ticks of EL2 time and each step one tick of
    /// guest: the window's guest time is the instructions both retired, however the exits
    /// interleave; the same as one CPU retiring them all.
    #[test]
    fn guest_time_is_the_instructions_every_cpu_retired() {
        let mut s = Stepped::new();
        let mut counter = 10_000u64;
        s.join(counter, 5_000, 0);
        s.join(counter + 3, 5_000, 0);
        for _ in 0..1000 {
            for _cpu in 0..2 {
                counter += 1 + 400;
                s.retire(1);
            }
        }
        assert_eq!(s.now(counter), 5_000 + 2_000);
        assert_eq!(s.leave(counter), 7_000);
        assert_eq!(s.leave(counter + 50), 7_000);
    }

    /// While every member is halted the counter's advance is guest time, and only then: one
    /// CPU asleep while the other steps adds nothing, both asleep adds the warp.
    #[test]
    fn idle_counts_only_while_every_member_is_halted() {
        let mut s = two_members(100);
        s.halt(10);
        s.retire(5);
        assert_eq!(s.now(1_000), 105, "one awake: no idle time");
        s.halt(1_000);
        assert_eq!(s.now(1_000), 105);
        assert_eq!(s.now(4_000), 3_105, "both halted: the warp counts");
        s.wake(4_000);
        assert_eq!(s.now(9_000), 3_105);
        s.wake(9_000);
        assert_eq!(s.now(9_500), 3_105);
    }

    /// A CPU that goes off (leaves while the other is halted) leaves the machine idle.
    #[test]
    fn the_last_awake_member_leaving_starts_idle_time() {
        let mut s = two_members(0);
        s.halt(100);
        assert_eq!(s.leave(200), 0);
        assert_eq!(s.now(700), 500);
        s.wake(700);
        assert_eq!(s.leave(800), 500);
    }

    /// A new account for each window, from the machine's time at its opening.
    #[test]
    fn a_new_window_starts_from_the_machine_time() {
        let mut s = Stepped::new();
        s.join(0, 0, 400);
        s.retire(9);
        s.leave(10);
        s.join(20, 500, 0);
        assert_eq!(s.now(30), 500);
        assert_eq!(s.read(30), 500, "the last window's floor is gone");
    }

    /// Members whose guests had seen later than the window's time: every member's read is at
    /// least the latest of them until the window's time passes it, so no CPU reads below what
    /// another has read; the window's own time (its length) is the instructions alone.
    #[test]
    fn reads_never_go_below_what_a_member_had_seen() {
        let mut s = Stepped::new();
        s.join(1_000, 500, 560);
        assert_eq!(s.read(1_000), 560, "the opener had seen 560");
        s.retire(10);
        assert_eq!(s.read(1_050), 560);
        s.join(1_100, 500, 900);
        assert_eq!(s.read(1_100), 900, "the second had seen 900");
        s.retire(3);
        assert_eq!((s.now(1_200), s.read(1_200)), (513, 900));
        s.retire(400);
        assert_eq!(s.read(1_300), 913, "the window's time passed it");
        s.join(1_400, 500, 100);
        assert_eq!(s.read(1_400), 913, "a third behind it changes nothing");
    }

    proptest! {
        /// Whatever the order of joins, steps, halts, wakes and leaves, guest time never
        /// goes back as the counter advances, and never runs ahead of the counter's own
        /// advance (the guest cannot be given more time than passed).
        #[test]
        fn guest_time_never_goes_back_nor_outruns_the_counter(
            ops in proptest::collection::vec((0u8..5, 0u64..1_000), 1..200)
        ) {
            let mut s = Stepped::new();
            let (mut counter, mut halted, mut awake) = (0u64, 0u32, 0u32);
            s.join(counter, 0, 0);
            awake += 1;
            let (mut last, mut last_read) = (s.now(counter), s.read(counter));
            for (op, dt) in ops {
                counter += dt + 1;
                match op {
                    0 if awake > 0 => s.retire(1),
                    1 if awake > 0 => { s.halt(counter); awake -= 1; halted += 1; }
                    2 if halted > 0 => { s.wake(counter); halted -= 1; awake += 1; }
                    // A CPU's own clock is never ahead of the counter.
                    3 => {
                        let seen = dt.min(counter);
                        s.join(counter, 0, seen);
                        awake += 1;
                        prop_assert!(s.read(counter) >= seen, "a read below what it saw");
                    }
                    4 if awake > 1 => { s.leave(counter); awake -= 1; }
                    _ => {}
                }
                let now = s.now(counter);
                prop_assert!(now >= last, "went back: {last} -> {now}");
                prop_assert!(now <= counter, "ahead of the counter: {now} > {counter}");
                let read = s.read(counter);
                prop_assert!(read >= last_read, "a read went back: {last_read} -> {read}");
                prop_assert!(read >= now && read <= counter);
                (last, last_read) = (now, read);
            }
        }
    }
}
