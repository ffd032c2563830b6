//! What the hypervisor counts at a CPU's exits, and the one conversion of those counts into
//! a phase's `PhaseStats` (a phase on one CPU and a window summed over several both use it).

use mtex_abi::report::PhaseStats;

/// Event counts over the whole run; a phase's figures are the difference between its end
/// and its begin.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Exits other than single-step exits.
    pub exits: u64,
    pub step_exits: u64,
    pub exits_with_tco: u64,
    pub sysreg_writes: u64,
    /// Virtual interrupts injected (the guest's timer).
    pub virqs: u64,
    /// Guest instructions emulated after a trap; of those, PMU and debug-register accesses
    /// and WFI/WFE.
    pub emulated: u64,
    pub guest_pmu_accesses: u64,
    pub guest_debug_accesses: u64,
    pub wfx_traps: u64,
    /// Counter ticks (CNTPCT_EL0) the CPU spent at EL2 waiting for the hypervisor's lock
    /// while another CPU held it.
    pub lock_wait_ticks: u64,
}

/// The hypervisor's PMU figures for a phase, beside its counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PmuFigures {
    /// Instructions at EL2, EL1 and EL0 (None: not counted, or withheld).
    pub instructions: Option<[u64; 3]>,
    /// Of the EL2 instructions, those spent framing records.
    pub report: Option<u64>,
    /// The counters were disturbed during the phase (the figures are withheld).
    pub disturbed: bool,
}

impl PmuFigures {
    /// No PMU figure: none counted, or none that stands for the phase (a window over several
    /// CPUs, where the PMU counts the CPU it is on).
    pub const NONE: Self = Self {
        instructions: None,
        report: None,
        disturbed: false,
    };
}

impl Counters {
    /// What happened since `earlier` (a snapshot of the same CPU's counters). Every field
    /// is named, so that a new one cannot be left out.
    pub fn since(&self, earlier: &Counters) -> Counters {
        self.zip(earlier, |now, then| now - then)
    }

    /// Adds `o` to these (one CPU's share of a window to the window's).
    pub fn add(&mut self, o: &Counters) {
        *self = self.zip(o, |a, b| a + b);
    }

    /// Each field of `self` and `o` through `f`.
    fn zip(&self, o: &Counters, f: impl Fn(u64, u64) -> u64) -> Counters {
        let Counters {
            exits,
            step_exits,
            exits_with_tco,
            sysreg_writes,
            virqs,
            emulated,
            guest_pmu_accesses,
            guest_debug_accesses,
            wfx_traps,
            lock_wait_ticks,
        } = *o;
        Counters {
            exits: f(self.exits, exits),
            step_exits: f(self.step_exits, step_exits),
            exits_with_tco: f(self.exits_with_tco, exits_with_tco),
            sysreg_writes: f(self.sysreg_writes, sysreg_writes),
            virqs: f(self.virqs, virqs),
            emulated: f(self.emulated, emulated),
            guest_pmu_accesses: f(self.guest_pmu_accesses, guest_pmu_accesses),
            guest_debug_accesses: f(self.guest_debug_accesses, guest_debug_accesses),
            wfx_traps: f(self.wfx_traps, wfx_traps),
            lock_wait_ticks: f(self.lock_wait_ticks, lock_wait_ticks),
        }
    }

    /// A phase's figures: these counters (the phase's own, from [`Counters::since`]) and
    /// the PMU's.
    pub fn stats(&self, pmu: PmuFigures) -> PhaseStats {
        let Counters {
            exits,
            step_exits,
            exits_with_tco,
            sysreg_writes,
            virqs,
            emulated,
            guest_pmu_accesses,
            guest_debug_accesses,
            wfx_traps,
            // Sent as its own record (`LockWait`), which older hosts need not read.
            lock_wait_ticks: _,
        } = *self;
        let el = |i: usize| pmu.instructions.map(|c| c[i]);
        PhaseStats {
            exits,
            step_exits,
            exits_with_tco,
            sysreg_writes,
            virqs,
            el2_instructions: el(0),
            el1_instructions: el(1),
            el0_instructions: el(2),
            el2_report_instructions: pmu.report,
            pmu_disturbed: pmu.disturbed,
            emulated,
            guest_pmu_accesses,
            guest_debug_accesses,
            wfx_traps,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counters whose every field is different, from `base`.
    fn distinct(base: u64) -> Counters {
        Counters {
            exits: base + 1,
            step_exits: base + 2,
            exits_with_tco: base + 3,
            sysreg_writes: base + 4,
            virqs: base + 5,
            emulated: base + 6,
            guest_pmu_accesses: base + 7,
            guest_debug_accesses: base + 8,
            wfx_traps: base + 9,
            lock_wait_ticks: base + 10,
        }
    }

    #[test]
    fn every_counter_reaches_its_own_field_of_the_phase_figures() {
        let s = distinct(0).stats(PmuFigures {
            instructions: Some([100, 200, 300]),
            report: Some(50),
            disturbed: false,
        });
        assert_eq!(
            (
                s.exits,
                s.step_exits,
                s.exits_with_tco,
                s.sysreg_writes,
                s.virqs
            ),
            (1, 2, 3, 4, 5)
        );
        assert_eq!(
            (
                s.emulated,
                s.guest_pmu_accesses,
                s.guest_debug_accesses,
                s.wfx_traps
            ),
            (6, 7, 8, 9)
        );
        assert_eq!(
            (s.el2_instructions, s.el1_instructions, s.el0_instructions),
            (Some(100), Some(200), Some(300))
        );
        assert_eq!(s.el2_report_instructions, Some(50));
        let none = distinct(0).stats(PmuFigures::NONE);
        assert_eq!(
            (
                none.el2_instructions,
                none.el2_report_instructions,
                none.pmu_disturbed
            ),
            (None, None, false)
        );
    }

    #[test]
    fn a_phase_is_its_end_less_its_begin_and_shares_add_up() {
        let (begin, end) = (distinct(10), distinct(1000));
        assert_eq!(
            end.since(&begin),
            Counters {
                exits: 990,
                step_exits: 990,
                exits_with_tco: 990,
                sysreg_writes: 990,
                virqs: 990,
                emulated: 990,
                guest_pmu_accesses: 990,
                guest_debug_accesses: 990,
                wfx_traps: 990,
                lock_wait_ticks: 990,
            }
        );
        let mut sum = Counters::default();
        sum.add(&distinct(0));
        sum.add(&distinct(10));
        assert_eq!(
            sum,
            Counters {
                exits: 12,
                step_exits: 14,
                exits_with_tco: 16,
                sysreg_writes: 18,
                virqs: 20,
                emulated: 22,
                guest_pmu_accesses: 24,
                guest_debug_accesses: 26,
                wfx_traps: 28,
                lock_wait_ticks: 30,
            }
        );
    }
}
