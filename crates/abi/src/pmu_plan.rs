//! Which PMU events a phase counts, at which EL, in which pass.
//!
//! The hypervisor keeps a few event counters for per-phase events (`slots`, after its three
//! fixed instruction counters). A run's events are cycles, the MTE events and the raw events
//! the run names, each at EL1 and at EL0. Those the CPU lacks (PMCEID0/1_EL0) are never
//! counted and are reported as not supported. The rest go `slots` at a time into passes: the
//! guest runs the same work once per pass (a deterministic re-run, not time-multiplexing).

use crate::report::{PMU_COUNTS, PMU_RAW_EVENTS, pmu_event};

/// An event counted at one EL.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Counted {
    pub event: u16,
    /// 1 (EL1) or 0 (EL0).
    pub el: u8,
    /// Named by the run rather than counted by mtex on its own.
    pub raw: bool,
}

/// The events of every phase, split into the CPU's supported ones and the others.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PmuPlan {
    supported: [Option<Counted>; PMU_COUNTS],
    unsupported: [Option<Counted>; PMU_COUNTS],
    slots: usize,
}

/// The events mtex counts on its own, in the order they take counters.
pub const STANDARD: [u16; 3] = [
    pmu_event::CPU_CYCLES,
    pmu_event::MEM_ACCESS_CHECKED_RD,
    pmu_event::MEM_ACCESS_CHECKED_WR,
];

/// Whether the CPU implements `event`, from PMCEID0_EL0 and PMCEID1_EL0. Events outside the
/// common ranges are not described there and are taken as implemented.
pub fn implemented(pmceid: [u64; 2], event: u16) -> bool {
    if !pmu_event::described_by_pmceid(event) {
        return true;
    }
    let (reg, bit) = pmu_event::pmceid_bit(event);
    pmceid[reg] >> bit & 1 != 0
}

/// The MTE event a guest's PMEVTYPER value selects, if it selects one the CPU does not
/// implement: its counter counts nothing, and perf in the guest would print 0 for it.
pub fn unimplemented_mte_event(pmceid: [u64; 2], evtyper: u64) -> Option<u16> {
    // evtCount is bits 15:0 from PMUv3p1 (9:0 before, where these events cannot be named).
    let event = (evtyper & 0xffff) as u16;
    let mte = matches!(
        event,
        pmu_event::MEM_ACCESS_CHECKED
            | pmu_event::MEM_ACCESS_CHECKED_RD
            | pmu_event::MEM_ACCESS_CHECKED_WR
    );
    (mte && !implemented(pmceid, event)).then_some(event)
}

impl PmuPlan {
    /// The plan for a CPU with `pmceid`, `slots` free counters and the run's `raw` events.
    pub fn new(pmceid: [u64; 2], slots: usize, raw: &[u16]) -> Self {
        let mut plan = Self {
            supported: [None; PMU_COUNTS],
            unsupported: [None; PMU_COUNTS],
            slots,
        };
        let (mut s, mut u) = (0, 0);
        let events = STANDARD
            .iter()
            .map(|&e| (e, false))
            .chain(raw.iter().take(PMU_RAW_EVENTS).map(|&e| (e, true)));
        for (event, raw) in events {
            for el in [1, 0] {
                let c = Counted { event, el, raw };
                // With no free counter nothing can be counted: every event is then
                // unsupported here, which the report says as such.
                if slots > 0 && implemented(pmceid, event) {
                    plan.supported[s] = Some(c);
                    s += 1;
                } else {
                    plan.unsupported[u] = Some(c);
                    u += 1;
                }
            }
        }
        plan
    }

    fn supported_len(&self) -> usize {
        self.supported.iter().flatten().count()
    }

    /// Untraced passes the events need (at least one: the phase itself).
    pub fn passes(&self) -> u8 {
        if self.slots == 0 {
            return 1;
        }
        self.supported_len().div_ceil(self.slots).max(1) as u8
    }

    /// The events pass `pass` (1-based) counts, one per free counter; none past the last.
    pub fn pass(&self, pass: u8) -> impl Iterator<Item = Counted> + '_ {
        let start = (pass.max(1) as usize - 1) * self.slots;
        self.supported
            .iter()
            .flatten()
            .skip(start)
            .take(self.slots)
            .copied()
    }

    /// What a traced phase counts on the same execution as the trace: the MTE events the CPU
    /// has, as many as there are counters (reads before writes, EL1 before EL0).
    pub fn traced(&self) -> impl Iterator<Item = Counted> + '_ {
        self.supported
            .iter()
            .flatten()
            .filter(|c| {
                !c.raw
                    && matches!(
                        c.event,
                        pmu_event::MEM_ACCESS_CHECKED_RD | pmu_event::MEM_ACCESS_CHECKED_WR
                    )
            })
            .take(self.slots)
            .copied()
    }

    /// The events the CPU does not implement (or that no counter is free for).
    pub fn unsupported(&self) -> impl Iterator<Item = Counted> + '_ {
        self.unsupported.iter().flatten().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;
    use std::vec::Vec;

    /// PMCEID of a CPU with cycles and instructions but no MTE events (QEMU).
    const NO_MTE: [u64; 2] = [1 << 0x11 | 1 << 0x08, 0];
    /// ... and one with all three MTE events (PMCEID1 bits 36-38).
    const MTE: [u64; 2] = [1 << 0x11 | 1 << 0x08, 0b111 << 36];

    #[test]
    fn pmceid_bits_follow_the_architecture() {
        assert!(implemented(MTE, pmu_event::MEM_ACCESS_CHECKED));
        assert!(implemented(MTE, pmu_event::MEM_ACCESS_CHECKED_WR));
        assert!(!implemented(NO_MTE, pmu_event::MEM_ACCESS_CHECKED_RD));
        // A guest's type with filter bits above the event: only the MTE events it lacks.
        let p = 1u64 << 31;
        assert_eq!(unimplemented_mte_event(NO_MTE, p | 0x4025), Some(0x4025));
        assert_eq!(unimplemented_mte_event(NO_MTE, 0x4024), Some(0x4024));
        assert_eq!(unimplemented_mte_event(NO_MTE, 0x4026), Some(0x4026));
        assert_eq!(unimplemented_mte_event(NO_MTE, 0x4027), None);
        assert_eq!(unimplemented_mte_event(NO_MTE, 0x0008), None);
        assert_eq!(unimplemented_mte_event(MTE, 0x4025), None);
        assert!(implemented(NO_MTE, pmu_event::CPU_CYCLES));
        assert!(!implemented(NO_MTE, 0x13));
        // IMPLEMENTATION DEFINED events are not described: taken as implemented.
        assert!(implemented(NO_MTE, 0x00c0));
    }

    #[test]
    fn missing_events_are_unsupported_never_counted() {
        let plan = PmuPlan::new(NO_MTE, 2, &[]);
        assert_eq!(plan.passes(), 1);
        let first: Vec<_> = plan.pass(1).map(|c| (c.event, c.el)).collect();
        assert_eq!(first, [(0x11, 1), (0x11, 0)]);
        let missing: Vec<_> = plan.unsupported().map(|c| (c.event, c.el)).collect();
        assert_eq!(
            missing,
            [(0x4025, 1), (0x4025, 0), (0x4026, 1), (0x4026, 0)]
        );
    }

    #[test]
    fn events_take_as_many_passes_as_the_counters_need() {
        let plan = PmuPlan::new(MTE, 2, &[0x08]);
        assert_eq!(plan.passes(), 4);
        let all: Vec<_> = (1..=4)
            .map(|p| plan.pass(p).map(|c| (c.event, c.el)).collect::<Vec<_>>())
            .collect();
        assert_eq!(
            all,
            [
                [(0x11, 1), (0x11, 0)],
                [(0x4025, 1), (0x4025, 0)],
                [(0x4026, 1), (0x4026, 0)],
                [(0x08, 1), (0x08, 0)],
            ]
        );
        assert_eq!(plan.pass(5).count(), 0);
        assert!(plan.pass(4).all(|c| c.raw));
        // With four counters free, two passes do it.
        assert_eq!(PmuPlan::new(MTE, 4, &[0x08]).passes(), 2);
    }

    #[test]
    fn a_traced_phase_counts_the_mte_events_that_fit() {
        let traced = |pmceid, slots| {
            PmuPlan::new(pmceid, slots, &[0x4025])
                .traced()
                .map(|c| (c.event, c.el))
                .collect::<Vec<_>>()
        };
        assert_eq!(traced(MTE, 2), [(0x4025, 1), (0x4025, 0)]);
        assert_eq!(
            traced(MTE, 8),
            [(0x4025, 1), (0x4025, 0), (0x4026, 1), (0x4026, 0)]
        );
        assert!(traced(NO_MTE, 8).is_empty());
    }

    #[test]
    fn no_free_counter_counts_nothing_and_says_so() {
        let plan = PmuPlan::new(MTE, 0, &[]);
        assert_eq!((plan.passes(), plan.pass(1).count()), (1, 0));
        assert_eq!(plan.unsupported().count(), 6);
    }

    #[test]
    fn every_event_fits_one_record() {
        // The first pass's record carries its counts and every unsupported event.
        for (pmceid, slots) in [(MTE, 1), (NO_MTE, 2), (MTE, 31), ([0, 0], 31), (NO_MTE, 0)] {
            let plan = PmuPlan::new(pmceid, slots, &[1, 0x13, 0xc0]);
            let n = plan.pass(1).count() + plan.unsupported().count();
            assert!(n <= PMU_COUNTS, "{n} for {slots} slots");
        }
    }
}
