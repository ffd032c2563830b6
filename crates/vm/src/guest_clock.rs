//! The guest's clock on every CPU: which part of the machine's counter is the hypervisor's
//! own time, taken out of the guest's virtual counter (CNTVCT = CNTPCT - CNTVOFF_EL2), and
//! how each CPU's CNTVOFF_EL2 follows it. The hypervisor's exit paths apply these rules in
//! assembly (`hyp/src/guest_clock.rs`); they are stated and tested here.
//!
//! Under QEMU's `-icount` one host thread runs the CPUs in turn, and the counter advances
//! with every instruction any of them executes. An exit's span on the counter, from its
//! entry to its ERET, may therefore hold other CPUs' work: a CPU stopped in the middle of its
//! exit (its turn ran out, or it waited for a lock and yielded) resumes after another CPU
//! ran guest code and exits of its own. Charging each CPU for its exits' whole spans let the
//! CPUs' clocks drift apart without bound, until one fell behind the time Linux's
//! timekeeper had already seen and stood still.
//!
//! So the hypervisor's time is one account for the machine, [`Account`]: at each ERET, the
//! exiting CPU adds the part of its exit since the machine's last ERET (by any CPU), and
//! every CPU's clock follows the one guest time that leaves, the counter less the account.
//! Between two ERETs of the machine, the CPU that makes the second has been in EL2 since at
//! least the later of its entry and the first. On one CPU this is exactly the exit's span.
//! On several, what cannot be told apart — EL2 time before a CPU was stopped mid-exit,
//! guest time another CPU ran after its last ERET before QEMU switched — is counted the same
//! for every CPU.
//!
//! A CPU's clock also advances, while it runs its guest, with what other CPUs spend in EL2
//! meanwhile (its offset is only written at its own exits), so it may be ahead of the
//! machine's guest time when it next exits. It returns to the machine's guest time then,
//! except that it never goes back on what its guest may have seen ([`offset`]): the highest
//! clock value the guest could have read ([`seen`]), which moves up only at exits whose
//! guest interval may have looked at the clock (`mtex_trace::clock_read`; any exit the
//! hypervisor cannot vouch for).
//!
//! That rule alone does not hold while a window steps several CPUs: QEMU may then stop a
//! CPU between its offset write and its next exit at every step, and run another CPU's exits
//! meanwhile. Such a window keeps guest time from what the guest retires instead
//! ([`crate::stepped_clock`]), and hands it back to this account when it ends.

/// The machine's account of hypervisor time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Account {
    /// The offset every CPU's guest clock follows: the counter value at the guest's boot
    /// plus all hypervisor time since.
    pub offset: u64,
    /// The counter when the machine last returned to a guest (any CPU's ERET).
    pub last_eret: u64,
}

impl Account {
    /// The account as the guest starts, its virtual counter `now - offset`.
    pub fn start(offset: u64, now: u64) -> Self {
        Self {
            offset,
            last_eret: now,
        }
    }

    /// A CPU that entered EL2 at `entry` returns to its guest at `resume`: its EL2 time since
    /// the machine's last ERET is the hypervisor's.
    pub fn eret(self, entry: u64, resume: u64) -> Self {
        let start = entry.max(self.last_eret);
        Self {
            offset: self.offset + resume.saturating_sub(start),
            last_eret: resume.max(self.last_eret),
        }
    }
}

/// The highest clock value a CPU's guest may have seen, after an exit at `entry` under offset
/// `current`: unchanged if the guest interval that ended could not look at the clock
/// (`unobserved`), else the clock as the exit found it.
pub fn seen(seen: u64, entry: u64, current: u64, unobserved: bool) -> u64 {
    if unobserved {
        seen
    } else {
        seen.max(entry - current)
    }
}

/// The CPU's CNTVOFF_EL2 as it returns to its guest at `resume` (exact guest time): the
/// machine's guest time, or what its guest has `seen` if that is later (its clock then
/// stays there until the machine's catches up).
pub fn offset(resume: u64, seen: u64, account: &Account) -> u64 {
    (resume - seen).min(account.offset)
}

/// Coarse guest time (without `-icount`, where each CNTVOFF_EL2 write costs QEMU a timer
/// re-arm): the CPU's offset moves to the machine's once it is `period` ticks behind, and
/// not before (None: no write).
pub fn coarse_offset(current: u64, account: &Account, period: u64) -> Option<u64> {
    (account.offset.saturating_sub(current) >= period).then_some(account.offset)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One exit of one CPU, as the hypervisor applies the rules.
    fn exit(a: &mut Account, off: &mut u64, seen_: &mut u64, entry: u64, resume: u64, unobs: bool) {
        *a = a.eret(entry, resume);
        *seen_ = seen(*seen_, entry, *off, unobs);
        *off = offset(resume, *seen_, a);
    }

    /// One CPU: each exit's whole span is the hypervisor's, and the CPU's offset is the
    /// machine's, whether or not its guest looked at the clock.
    #[test]
    fn one_cpu_charges_each_exit_span() {
        for unobserved in [false, true] {
            let mut a = Account::start(1000, 1000);
            let (mut off, mut s) = (1000, 0);
            for (entry, resume) in [(1010, 1400), (1405, 1800), (2000, 2001)] {
                exit(&mut a, &mut off, &mut s, entry, resume, unobserved);
                assert_eq!(off, a.offset);
            }
            assert_eq!(a.offset, 1000 + 390 + 395 + 1);
            // Guest time = counter - offset = instructions outside EL2.
            assert_eq!(2001 - off, 10 + 5 + 200);
        }
    }

    /// Two CPUs in turn, as QEMU's round robin runs them: CPU 1 is stopped in the middle of
    /// an exit while CPU 0 runs its guest and an exit of its own. CPU 1 is not charged for
    /// CPU 0's guest time before that exit, nor for the exit; CPU 0's guest time after its
    /// ERET, before the switch, cannot be told from CPU 1's EL2 time and is charged (for
    /// every CPU alike). CPU 0, ahead meanwhile, comes back to the machine's time at its next
    /// exit if its guest did not look, and holds still until it catches up if it did.
    #[test]
    fn a_cpu_stopped_in_el2_is_not_charged_for_the_other_cpus_time() {
        for looked in [false, true] {
            let mut a = Account::start(0, 0);
            let (mut off, mut s) = ([0u64; 2], [0u64; 2]);
            // CPU 1 enters EL2 at 100 and is stopped at 150; CPU 0 runs its guest from 150
            // and exits at 1000, back at 1300; runs its guest to 2000, where QEMU switches.
            exit(&mut a, &mut off[0], &mut s[0], 1000, 1300, false);
            assert_eq!(off[0], 300);
            // CPU 1 resumes and returns at 2050.
            exit(&mut a, &mut off[1], &mut s[1], 100, 2050, false);
            assert_eq!(a.offset, 300 + 750);
            assert_eq!(2050 - off[1], 1000);
            // CPU 0 at 2050, no exit since: ahead by CPU 1's charge.
            assert_eq!(2050 - off[0], 1750);
            exit(&mut a, &mut off[0], &mut s[0], 2060, 2100, !looked);
            let clock0 = 2100 - off[0];
            if looked {
                assert_eq!(clock0, 1760);
            } else {
                assert_eq!(clock0, 2100 - a.offset);
            }
        }
    }

    /// A long round robin of two CPUs that exit at every instruction or every 50, the second
    /// looking at its clock every 100th interval: each CPU charged for its exits' whole
    /// spans, the clocks drift apart by whole turns; by these rules they stay within a few.
    #[test]
    fn round_robin_stepping_keeps_clocks_together() {
        const EXIT: u64 = 400;
        const GUEST: [u64; 2] = [50, 1];
        const TURN: u64 = 10_007;
        #[derive(Clone, Copy, Default)]
        struct Cpu {
            in_el2: bool,
            left: u64,
            entry: u64,
            off: u64,
            seen: u64,
            intervals: u64,
            old_off: u64,
        }
        let mut cpus = [Cpu {
            left: 1,
            ..Cpu::default()
        }; 2];
        let mut a = Account::start(0, 0);
        let mut now = 0u64;
        let (mut worst_new, mut worst_old) = (0u64, 0u64);
        let mut clock = [0u64; 2];
        for turn in 0..4000 {
            let i = turn % 2;
            let end = now + TURN;
            while now < end {
                let c = &mut cpus[i];
                let step = c.left.min(end - now);
                now += step;
                c.left -= step;
                if c.left > 0 {
                    break;
                }
                if c.in_el2 {
                    c.intervals += 1;
                    let looked = i == 1 && c.intervals % 100 == 0;
                    if looked {
                        // Never back: what the guest reads, at the end of its interval.
                        let v = c.entry - c.off;
                        assert!(v >= clock[i], "CPU {i}: {v} after {}", clock[i]);
                        clock[i] = v;
                    }
                    a = a.eret(c.entry, now);
                    c.seen = seen(c.seen, c.entry, c.off, !looked);
                    c.off = offset(now, c.seen, &a);
                    c.old_off += now - c.entry;
                    c.in_el2 = false;
                    c.left = GUEST[i];
                } else {
                    c.in_el2 = true;
                    c.entry = now;
                    c.left = EXIT;
                }
            }
            worst_new = worst_new.max(cpus[0].off.abs_diff(cpus[1].off));
            worst_old = worst_old.max(cpus[0].old_off.abs_diff(cpus[1].old_off));
        }
        assert!(worst_new <= 3 * TURN, "{worst_new}");
        assert!(worst_old > 100 * TURN, "{worst_old}");
    }

    #[test]
    fn coarse_time_moves_in_periods() {
        let a = Account {
            offset: 1000,
            last_eret: 0,
        };
        assert_eq!(coarse_offset(950, &a, 100), None);
        assert_eq!(coarse_offset(900, &a, 100), Some(1000));
    }
}
