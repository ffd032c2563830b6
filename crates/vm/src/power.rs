//! The guest's CPUs under PSCI (Arm DEN0022): which are on, which are being started, and what
//! CPU_ON, CPU_OFF and AFFINITY_INFO from the guest answer.
//!
//! A CPU is named by the guest as its MPIDR affinity (Aff3..Aff0), which is what its own
//! MPIDR_EL1 reads (VMPIDR_EL2): the physical CPU's in Linux mode, where the guest drives the
//! machine's own GIC redistributors, which are matched by affinity. A CPU_ON is accepted once
//! per power-up: a second one while the first is pending or done is refused as the
//! architecture says (ON_PENDING, ALREADY_ON), so a guest can never start one CPU twice nor
//! make the hypervisor enter it at an address outside its RAM.

use alloc::vec::Vec;
use mtex_platform::machine::MPIDR_AFFINITY;
use smccc::psci::{AffinityState, error::Error};

/// One CPU's power state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Power {
    Off,
    /// CPU_ON was accepted; the CPU has not yet entered the guest.
    OnPending {
        entry: u64,
        context_id: u64,
    },
    On,
}

/// A CPU_ON the hypervisor is to carry out: start physical CPU `cpu` (an index into the
/// machine's CPUs), and enter the guest there at `entry` with x0 = `context_id`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Start {
    pub cpu: usize,
    pub entry: u64,
    pub context_id: u64,
}

/// The guest's CPUs and their power states.
#[derive(Clone, Debug)]
pub struct Cpus {
    /// Each CPU's affinity (MPIDR & [`MPIDR_AFFINITY`]), in the machine's order.
    affinity: Vec<u64>,
    power: Vec<Power>,
}

impl Cpus {
    /// The machine's CPUs by their MPIDRs; `boot` (an index) is on, the rest off.
    pub fn new(mpidrs: &[u64], boot: usize) -> Self {
        assert!(boot < mpidrs.len(), "the boot CPU is one of the CPUs");
        let mut power = alloc::vec![Power::Off; mpidrs.len()];
        power[boot] = Power::On;
        Self {
            affinity: mpidrs.iter().map(|m| m & MPIDR_AFFINITY).collect(),
            power,
        }
    }

    pub fn len(&self) -> usize {
        self.power.len()
    }

    pub fn is_empty(&self) -> bool {
        self.power.is_empty()
    }

    pub fn power(&self, cpu: usize) -> Power {
        self.power[cpu]
    }

    /// The index of the CPU whose affinity is `target`; none if any other bit is set (PSCI
    /// wants them zero, and MPIDR_EL1's bit 31 is not part of a CPU's name).
    pub fn index_of(&self, target: u64) -> Option<usize> {
        let a = target & MPIDR_AFFINITY;
        (target & !MPIDR_AFFINITY == 0)
            .then(|| self.affinity.iter().position(|&x| x == a))
            .flatten()
    }

    /// CPU_ON(`target`, `entry`, `context_id`): accepted if `target` is a CPU that is off and
    /// `entry` is an instruction address (4-byte aligned) that `in_ram` accepts.
    pub fn cpu_on(
        &mut self,
        target: u64,
        entry: u64,
        context_id: u64,
        in_ram: impl Fn(u64) -> bool,
    ) -> Result<Start, Error> {
        let cpu = self.index_of(target).ok_or(Error::InvalidParameters)?;
        match self.power[cpu] {
            Power::On => return Err(Error::AlreadyOn),
            Power::OnPending { .. } => return Err(Error::OnPending),
            Power::Off => {}
        }
        if !entry.is_multiple_of(4) || !in_ram(entry) {
            return Err(Error::InvalidAddress);
        }
        self.power[cpu] = Power::OnPending { entry, context_id };
        Ok(Start {
            cpu,
            entry,
            context_id,
        })
    }

    /// CPU `cpu` entered the guest (after a CPU_ON), or its start failed (`ok` false: it is
    /// off again, and the guest sees it never came up).
    pub fn started(&mut self, cpu: usize, ok: bool) {
        if let Power::OnPending { .. } = self.power[cpu] {
            self.power[cpu] = if ok { Power::On } else { Power::Off };
        }
    }

    /// CPU_OFF from CPU `cpu`: it is off from now on (the caller parks it). Refused (DENIED)
    /// for a CPU that is not on, which cannot be the caller, and for the last CPU on (one
    /// still being started may never come): with none left the run could only hang.
    pub fn cpu_off(&mut self, cpu: usize) -> Result<(), Error> {
        if self.power[cpu] != Power::On || self.on() == 1 {
            return Err(Error::Denied);
        }
        self.power[cpu] = Power::Off;
        Ok(())
    }

    /// AFFINITY_INFO(`target`, `level`): PSCI 1.0 and later define only level 0 (one CPU).
    pub fn affinity_info(&self, target: u64, level: u64) -> Result<AffinityState, Error> {
        if level != 0 {
            return Err(Error::InvalidParameters);
        }
        let cpu = self.index_of(target).ok_or(Error::InvalidParameters)?;
        Ok(match self.power[cpu] {
            Power::Off => AffinityState::Off,
            Power::OnPending { .. } => AffinityState::OnPending,
            Power::On => AffinityState::On,
        })
    }

    /// How many CPUs are on.
    pub fn on(&self) -> usize {
        self.power.iter().filter(|p| **p == Power::On).count()
    }

    /// How many CPUs are on or being started.
    pub fn awake(&self) -> usize {
        self.power.iter().filter(|p| **p != Power::Off).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Four CPUs as a server numbers them: two clusters (Aff1) of two, and Aff3 set.
    const MPIDRS: [u64; 4] = [
        0x8000_0000 | 0x01_0000_0000,
        0x8000_0001 | 0x01_0000_0000,
        0x8000_0100 | 0x01_0000_0000,
        0x8000_0101 | 0x01_0000_0000,
    ];
    const RAM: core::ops::Range<u64> = 0x4000_0000..0x8000_0000;

    fn in_ram(a: u64) -> bool {
        RAM.contains(&a)
    }

    #[test]
    fn a_cpu_is_named_by_its_affinity_without_the_mpidr_flags() {
        let c = Cpus::new(&MPIDRS, 0);
        assert_eq!(c.index_of(0x01_0000_0101), Some(3));
        assert_eq!(c.index_of(0x01_0000_0001), Some(1));
        // Aff3 matters; bits outside the affinity are not a CPU.
        assert_eq!(c.index_of(0x0101), None);
        assert_eq!(c.index_of(0x01_0000_0101 | 1 << 31), None);
        assert_eq!(c.index_of(0x01_0000_0002), None);
    }

    #[test]
    fn cpu_on_starts_a_cpu_once_and_says_why_it_will_not() {
        let mut c = Cpus::new(&MPIDRS, 0);
        assert_eq!(
            c.cpu_on(0x01_0000_0000, 0x4008_0000, 7, in_ram),
            Err(Error::AlreadyOn),
            "the boot CPU"
        );
        assert_eq!(
            c.cpu_on(0x01_0000_0005, 0x4008_0000, 7, in_ram),
            Err(Error::InvalidParameters),
            "no such CPU"
        );
        for bad in [0x4008_0002, 0x1000, RAM.end, !3] {
            assert_eq!(
                c.cpu_on(0x01_0000_0001, bad, 7, in_ram),
                Err(Error::InvalidAddress),
                "{bad:#x}"
            );
            assert_eq!(c.power(1), Power::Off, "a refused CPU_ON changes nothing");
        }
        let s = c.cpu_on(0x01_0000_0001, 0x4008_0000, 7, in_ram).unwrap();
        assert_eq!(
            s,
            Start {
                cpu: 1,
                entry: 0x4008_0000,
                context_id: 7
            }
        );
        assert_eq!(
            c.affinity_info(0x01_0000_0001, 0),
            Ok(AffinityState::OnPending)
        );
        assert_eq!(
            c.cpu_on(0x01_0000_0001, 0x4008_0000, 7, in_ram),
            Err(Error::OnPending)
        );
        c.started(1, true);
        assert_eq!(c.affinity_info(0x01_0000_0001, 0), Ok(AffinityState::On));
        assert_eq!(
            c.cpu_on(0x01_0000_0001, 0x4008_0000, 7, in_ram),
            Err(Error::AlreadyOn)
        );
        assert_eq!(c.cpu_off(1), Ok(()));
        assert_eq!(c.affinity_info(0x01_0000_0001, 0), Ok(AffinityState::Off));
        assert_eq!(c.cpu_off(1), Err(Error::Denied));
        // The last CPU on stays on.
        assert_eq!(c.cpu_off(0), Err(Error::Denied));
        assert_eq!(c.power(0), Power::On);
        // Off again: it may be started again.
        assert!(c.cpu_on(0x01_0000_0001, 0x4000_0000, 0, in_ram).is_ok());
    }

    #[test]
    fn a_start_that_fails_leaves_the_cpu_off() {
        let mut c = Cpus::new(&MPIDRS, 2);
        let s = c.cpu_on(0x01_0000_0000, 0x4000_0000, 0, in_ram).unwrap();
        c.started(s.cpu, false);
        assert_eq!(c.power(0), Power::Off);
        assert_eq!(
            c.affinity_info(0x01_0000_0000, 1),
            Err(Error::InvalidParameters)
        );
    }

    #[derive(Clone, Debug)]
    enum Call {
        On { cpu: usize, entry: u64 },
        Started { cpu: usize, ok: bool },
        Off { cpu: usize },
    }

    fn call() -> impl Strategy<Value = Call> {
        prop_oneof![
            (
                0..5usize,
                prop::sample::select(vec![0x4000_0000u64, 0x4000_0002, 0x10, RAM.end])
            )
                .prop_map(|(cpu, entry)| Call::On { cpu, entry }),
            (0..4usize, any::<bool>()).prop_map(|(cpu, ok)| Call::Started { cpu, ok }),
            (0..4usize).prop_map(|cpu| Call::Off { cpu }),
        ]
    }

    proptest! {
        /// Against a model: every accepted CPU_ON is of a CPU that was off, to an aligned
        /// address in RAM, and AFFINITY_INFO always tells the state the calls made.
        #[test]
        fn any_sequence_of_calls_keeps_the_states_the_model_says(
            calls in prop::collection::vec(call(), 0..60)
        ) {
            let mut c = Cpus::new(&MPIDRS, 0);
            let mut model = [AffinityState::On, AffinityState::Off, AffinityState::Off,
                             AffinityState::Off];
            for call in calls {
                match call {
                    Call::On { cpu, entry } => {
                        let target = MPIDRS.get(cpu).map_or(0x7f, |m| m & MPIDR_AFFINITY);
                        let r = c.cpu_on(target, entry, 1, in_ram);
                        let want = match model.get(cpu) {
                            None => Err(Error::InvalidParameters),
                            Some(AffinityState::On) => Err(Error::AlreadyOn),
                            Some(AffinityState::OnPending) => Err(Error::OnPending),
                            Some(AffinityState::Off) if entry % 4 != 0 || !in_ram(entry) => {
                                Err(Error::InvalidAddress)
                            }
                            Some(AffinityState::Off) => {
                                model[cpu] = AffinityState::OnPending;
                                Ok(Start { cpu, entry, context_id: 1 })
                            }
                        };
                        prop_assert_eq!(r, want);
                    }
                    Call::Started { cpu, ok } => {
                        c.started(cpu, ok);
                        if model[cpu] == AffinityState::OnPending {
                            model[cpu] = if ok { AffinityState::On } else { AffinityState::Off };
                        }
                    }
                    Call::Off { cpu } => {
                        let r = c.cpu_off(cpu);
                        let on = model.iter().filter(|s| **s == AffinityState::On).count();
                        if model[cpu] == AffinityState::On && on > 1 {
                            prop_assert_eq!(r, Ok(()));
                            model[cpu] = AffinityState::Off;
                        } else {
                            prop_assert_eq!(r, Err(Error::Denied));
                        }
                    }
                }
                for (i, m) in MPIDRS.iter().enumerate() {
                    prop_assert_eq!(c.affinity_info(*m & MPIDR_AFFINITY, 0), Ok(model[i]));
                }
                prop_assert_eq!(c.on(), model.iter().filter(|s| **s == AffinityState::On).count());
                prop_assert!(c.on() >= 1, "a CPU is always on");
            }
        }
    }
}
