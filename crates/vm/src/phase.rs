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
    /// More CPUs than the caller are on or starting (how many), and the phase cannot be
    /// counted on all of them: one is still starting, or the phase is untraced or repeats
    /// for its run's passes (the PMU and the TCO watch count one CPU), or a per-CPU
    /// instrument (the per-PC profile, call stacks) is asked for. The hypervisor records
    /// this one.
    OtherCpusOn(usize),
}

/// The machine as a PHASE_BEGIN finds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cpus {
    /// CPUs on, and those on or starting.
    pub on: usize,
    pub awake: usize,
    /// The run keeps a per-PC profile or call stacks, which follow one CPU.
    pub instruments: bool,
}

impl Cpus {
    /// One CPU on, nothing starting.
    pub const ONE: Self = Self {
        on: 1,
        awake: 1,
        instruments: false,
    };
}

/// PHASE_BEGIN with `id_reg` in x1 and `flags` in x6, while a phase is `open` or not, with
/// `cpus`: the phase's id, or why not. The mistakes of the call itself come before the
/// state of the machine. With other CPUs on, a phase that opens is counted on every CPU
/// (the hypervisor opens it as a window).
pub fn check_begin(id_reg: u64, flags: u64, open: bool, cpus: Cpus) -> Result<u32, Refusal> {
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
    let on_every_cpu = cpus.awake == cpus.on
        && flags & hc::PHASE_TRACED != 0
        && flags & hc::PHASE_REPEATABLE == 0
        && !cpus.instruments;
    if cpus.awake > 1 && !on_every_cpu {
        return Err(Refusal::OtherCpusOn(cpus.awake));
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

    fn cpus(on: usize, awake: usize, instruments: bool) -> Cpus {
        Cpus {
            on,
            awake,
            instruments,
        }
    }

    #[test]
    fn each_mistake_is_named_before_the_machines_state() {
        let two = cpus(1, 2, false);
        assert_eq!(check_begin(0, 0, false, Cpus::ONE), Err(Refusal::BadId));
        assert_eq!(
            check_begin(1 << 32, 0, false, Cpus::ONE),
            Err(Refusal::BadId)
        );
        assert_eq!(check_begin(1, 0, true, two), Err(Refusal::AlreadyOpen));
        assert_eq!(
            check_begin(1, 1 << 6, false, two),
            Err(Refusal::UnknownFlags)
        );
        let both = hc::PHASE_GUARDED | hc::PHASE_PARAMS;
        assert_eq!(
            check_begin(1, both, false, two),
            Err(Refusal::GuardedWithParams)
        );
        assert_eq!(
            check_begin(7, hc::PHASE_TRACED, false, cpus(2, 3, false)),
            Err(Refusal::OtherCpusOn(3))
        );
        assert_eq!(
            check_begin(u32::MAX as u64, KNOWN_FLAGS & !both, false, Cpus::ONE),
            Ok(u32::MAX)
        );
    }

    #[test]
    fn with_other_cpus_on_only_a_plain_traced_phase_opens() {
        let t = hc::PHASE_TRACED;
        assert_eq!(check_begin(7, t, false, cpus(4, 4, false)), Ok(7));
        assert_eq!(
            check_begin(
                7,
                t | hc::PHASE_PARAMS | hc::PHASE_AGAIN,
                false,
                cpus(4, 4, false)
            ),
            Ok(7)
        );
        let refused = Err(Refusal::OtherCpusOn(4));
        assert_eq!(check_begin(7, 0, false, cpus(4, 4, false)), refused);
        assert_eq!(
            check_begin(7, t | hc::PHASE_REPEATABLE, false, cpus(4, 4, false)),
            refused
        );
        assert_eq!(check_begin(7, t, false, cpus(4, 4, true)), refused);
        assert_eq!(check_begin(7, t, false, cpus(3, 4, false)), refused);
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
            on in 1..5usize,
            starting in 0..2usize,
            instruments: bool,
        ) {
            let c = cpus(on, on + starting, instruments);
            let fine = id_reg != 0
                && id_reg <= u32::MAX as u64
                && !open
                && flags & !KNOWN_FLAGS == 0
                && flags & (hc::PHASE_GUARDED | hc::PHASE_PARAMS)
                    != hc::PHASE_GUARDED | hc::PHASE_PARAMS
                && (c.awake == 1
                    || (starting == 0
                        && !instruments
                        && flags & hc::PHASE_TRACED != 0
                        && flags & hc::PHASE_REPEATABLE == 0));
            let r = check_begin(id_reg, flags, open, c);
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
