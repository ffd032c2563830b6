//! Whether a PHASE_BEGIN may open a phase, and what each pass of a run is for.

use mtex_abi::hypercall as hc;

/// Every PHASE_BEGIN flag the hypervisor knows; any other bit refuses the call.
pub const KNOWN_FLAGS: u64 = hc::PHASE_TRACED
    | hc::PHASE_PARAMS
    | hc::PHASE_AGAIN
    | hc::PHASE_REPEATABLE
    | hc::PHASE_WATCH_TCO
    | hc::PHASE_GUARDED;

/// Why a PHASE_BEGIN was refused (the guest gets INVALID_PARAMETERS for each).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// An id of 0, or wider than 32 bits.
    BadId,
    /// A phase is open (phases do not nest).
    AlreadyOpen,
    /// A flag bit the hypervisor does not know.
    UnknownFlags,
    /// PHASE_GUARDED with PHASE_PARAMS: both use x7..x10.
    GuardedWithParams,
    /// More CPUs than the caller are on or starting (how many): a phase counts the
    /// instructions of the CPU that opened it only. The hypervisor records this one.
    OtherCpusOn(usize),
}

/// PHASE_BEGIN with `id_reg` in x1 and `flags` in x6, while a phase is `open` or not and
/// `cpus_awake` CPUs are on or starting: the phase's id, or why not. The mistakes of the
/// call itself come before the state of the machine.
pub fn check_begin(id_reg: u64, flags: u64, open: bool, cpus_awake: usize) -> Result<u32, Refusal> {
    let id = u32::try_from(id_reg)
        .ok()
        .filter(|&id| id != 0)
        .ok_or(Refusal::BadId)?;
    if open {
        return Err(Refusal::AlreadyOpen);
    }
    if flags & !KNOWN_FLAGS != 0 {
        return Err(Refusal::UnknownFlags);
    }
    if flags & hc::PHASE_GUARDED != 0 && flags & hc::PHASE_PARAMS != 0 {
        return Err(Refusal::GuardedWithParams);
    }
    if cpus_awake > 1 {
        return Err(Refusal::OtherCpusOn(cpus_awake));
    }
    Ok(id)
}

/// The untraced passes of a run: first those the PMU's events need, then those of the TCO
/// watch. Pass numbers are 1-based; pass 0 is the run's traced phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Passes {
    pub pmu: u8,
    pub tco: u8,
}

impl Passes {
    pub fn total(self) -> u8 {
        self.pmu.saturating_add(self.tco)
    }

    /// Which of the TCO watch's passes `pass` is (0-based), if it is one.
    pub fn watch_index(self, pass: u8) -> Option<usize> {
        (pass > self.pmu && pass - self.pmu <= self.tco).then(|| (pass - self.pmu - 1) as usize)
    }

    /// How many passes the run still wants after `pass` (none after its traced phase).
    pub fn more_after(self, pass: u8) -> u8 {
        if pass == 0 {
            0
        } else {
            self.total().saturating_sub(pass)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn each_mistake_is_named_before_the_machines_state() {
        assert_eq!(check_begin(0, 0, false, 1), Err(Refusal::BadId));
        assert_eq!(check_begin(1 << 32, 0, false, 1), Err(Refusal::BadId));
        assert_eq!(check_begin(1, 0, true, 2), Err(Refusal::AlreadyOpen));
        assert_eq!(check_begin(1, 1 << 6, false, 2), Err(Refusal::UnknownFlags));
        let both = hc::PHASE_GUARDED | hc::PHASE_PARAMS;
        assert_eq!(
            check_begin(1, both, false, 2),
            Err(Refusal::GuardedWithParams)
        );
        assert_eq!(
            check_begin(7, hc::PHASE_TRACED, false, 3),
            Err(Refusal::OtherCpusOn(3))
        );
        assert_eq!(
            check_begin(u32::MAX as u64, KNOWN_FLAGS & !both, false, 1),
            Ok(u32::MAX)
        );
    }

    #[test]
    fn a_run_of_two_pmu_passes_and_three_watch_passes() {
        let p = Passes { pmu: 2, tco: 3 };
        let watch: Vec<Option<usize>> = (0..=6).map(|pass| p.watch_index(pass)).collect();
        assert_eq!(watch, [None, None, None, Some(0), Some(1), Some(2), None]);
        let more: Vec<u8> = (0..=5).map(|pass| p.more_after(pass)).collect();
        assert_eq!(more, [0, 4, 3, 2, 1, 0]);
    }

    proptest! {
        #[test]
        fn a_phase_opens_exactly_when_nothing_is_wrong(
            id_reg in prop_oneof![Just(0u64), 1..=u32::MAX as u64, any::<u64>()],
            flags in prop_oneof![0..64u64, any::<u64>()],
            open: bool,
            cpus_awake in 1..5usize,
        ) {
            let fine = id_reg != 0
                && id_reg <= u32::MAX as u64
                && !open
                && flags & !KNOWN_FLAGS == 0
                && flags & (hc::PHASE_GUARDED | hc::PHASE_PARAMS)
                    != hc::PHASE_GUARDED | hc::PHASE_PARAMS
                && cpus_awake == 1;
            let r = check_begin(id_reg, flags, open, cpus_awake);
            prop_assert_eq!(r.is_ok(), fine);
            if let Ok(id) = r {
                prop_assert_eq!(id as u64, id_reg);
            }
        }

        #[test]
        fn the_watch_passes_follow_the_pmus_in_order(pmu in 0..8u8, tco in 0..8u8) {
            let p = Passes { pmu, tco };
            let watch: Vec<usize> = (1..=p.total()).filter_map(|pass| p.watch_index(pass)).collect();
            prop_assert_eq!(watch, (0..tco as usize).collect::<Vec<_>>());
            for pass in 1..=p.total() {
                // The last pass wants no more; each wants the rest.
                prop_assert_eq!(p.more_after(pass), p.total() - pass);
                prop_assert_eq!(p.watch_index(pass).is_some(), pass > pmu);
            }
            prop_assert_eq!(p.more_after(0), 0);
            prop_assert_eq!(p.watch_index(0), None);
        }
    }
}
