//! The PMU registers a guest can reach, and what the guest may see of them once the
//! hypervisor keeps the top counters for itself (MDCR_EL2.HPMN).
//!
//! With MDCR_EL2.TPM/TPMCR every guest access to a PMU register traps (EC 0x18). The
//! hypervisor then emulates the PMU the architecture promises the guest: `HPMN` event
//! counters, the cycle counter, and nothing of the counters at or above `HPMN` — which QEMU
//! does not enforce on its own (PMCR_EL0.P from EL1 resets every counter there).

use crate::esr::SysRegIss;

/// A PMU register, by what a trapped MRS/MSR names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PmuReg {
    Pmcr,
    Pmcntenset,
    Pmcntenclr,
    Pmovsclr,
    Pmswinc,
    Pmselr,
    Pmceid0,
    Pmceid1,
    Pmccntr,
    Pmxevtyper,
    Pmxevcntr,
    Pmuserenr,
    Pmintenset,
    Pmintenclr,
    Pmovsset,
    Pmmir,
    /// PMEVCNTR<n>_EL0, n in 0..=30.
    Pmevcntr(u8),
    /// PMEVTYPER<n>_EL0, n in 0..=30.
    Pmevtyper(u8),
    Pmccfiltr,
}

impl PmuReg {
    /// The PMU register a trapped access names, if it is one (Arm ARM D24.5).
    pub const fn from_iss(s: SysRegIss) -> Option<Self> {
        if s.op0 != 3 {
            return None;
        }
        Some(match (s.op1, s.crn, s.crm, s.op2) {
            (3, 9, 12, 0) => Self::Pmcr,
            (3, 9, 12, 1) => Self::Pmcntenset,
            (3, 9, 12, 2) => Self::Pmcntenclr,
            (3, 9, 12, 3) => Self::Pmovsclr,
            (3, 9, 12, 4) => Self::Pmswinc,
            (3, 9, 12, 5) => Self::Pmselr,
            (3, 9, 12, 6) => Self::Pmceid0,
            (3, 9, 12, 7) => Self::Pmceid1,
            (3, 9, 13, 0) => Self::Pmccntr,
            (3, 9, 13, 1) => Self::Pmxevtyper,
            (3, 9, 13, 2) => Self::Pmxevcntr,
            (3, 9, 14, 0) => Self::Pmuserenr,
            (0, 9, 14, 1) => Self::Pmintenset,
            (0, 9, 14, 2) => Self::Pmintenclr,
            (3, 9, 14, 3) => Self::Pmovsset,
            (0, 9, 14, 6) => Self::Pmmir,
            (3, 14, 15, 7) => Self::Pmccfiltr,
            // PMEVCNTR<n>: CRm = 0b10:n[4:3], op2 = n[2:0]; PMEVTYPER<n>: CRm = 0b11:n[4:3].
            (3, 14, crm @ 8..=11, op2) => Self::Pmevcntr(((crm & 3) << 3) | op2),
            (3, 14, crm @ 12..=15, op2) => Self::Pmevtyper(((crm & 3) << 3) | op2),
            _ => return None,
        })
    }
}

/// PMCR_EL0 fields the emulation touches.
pub mod pmcr {
    /// E: enable (counters below HPMN; the hypervisor's follow MDCR_EL2.HPME).
    pub const E: u64 = 1 << 0;
    /// P: event counter reset.
    pub const P: u64 = 1 << 1;
    /// C: cycle counter reset.
    pub const C: u64 = 1 << 2;
    /// N, bits 15:11: number of event counters.
    pub const N_SHIFT: u32 = 11;
    pub const N_MASK: u64 = 0x1f << N_SHIFT;
}

/// PMEVTYPER<n>_EL0.NSH, bit 27: count at EL2. A guest counter never counts the hypervisor.
pub const PMEVTYPER_NSH: u64 = 1 << 27;
/// PMCCNTR_EL0's bit in PMCNTENSET/CLR, PMOVS*, PMINTEN*.
pub const CYCLE_COUNTER_BIT: u64 = 1 << 31;

/// What the guest may see of the PMU: `hpmn` event counters and the cycle counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GuestPmu {
    pub hpmn: u8,
}

impl GuestPmu {
    /// Bits of PMCNTEN*/PMOVS*/PMINTEN* that belong to the guest.
    pub const fn counter_mask(self) -> u64 {
        ((1u64 << self.hpmn) - 1) | CYCLE_COUNTER_BIT
    }

    /// PMSWINC_EL0 has no cycle-counter bit.
    pub const fn swinc_mask(self) -> u64 {
        (1u64 << self.hpmn) - 1
    }

    /// Event counter `n` belongs to the guest.
    pub const fn owns(self, n: u8) -> bool {
        n < self.hpmn
    }

    /// PMCR_EL0 as the guest reads it: N says `hpmn`, as the architecture makes it at EL1.
    pub const fn pmcr_read(self, hw: u64) -> u64 {
        (hw & !pmcr::N_MASK) | ((self.hpmn as u64) << pmcr::N_SHIFT)
    }

    /// PMCR_EL0 as written to the hardware for a guest write `v`: P is done by the
    /// hypervisor counter by counter (from EL2 it would reset the hypervisor's counters too);
    /// N is read-only.
    pub const fn pmcr_write(self, v: u64) -> u64 {
        v & !(pmcr::P | pmcr::N_MASK)
    }

    /// A guest event-type write, without the EL2 filter bit.
    pub const fn evtyper_write(self, v: u64) -> u64 {
        v & !PMEVTYPER_NSH
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iss(op1: u8, crn: u8, crm: u8, op2: u8) -> SysRegIss {
        SysRegIss::write_of(3, op1, crn, crm, op2)
    }

    #[test]
    fn decodes_numbered_counters() {
        // PMEVCNTR0_EL0 = S3_3_C14_C8_0, PMEVCNTR30_EL0 = S3_3_C14_C11_6.
        assert_eq!(
            PmuReg::from_iss(iss(3, 14, 8, 0)),
            Some(PmuReg::Pmevcntr(0))
        );
        assert_eq!(
            PmuReg::from_iss(iss(3, 14, 11, 6)),
            Some(PmuReg::Pmevcntr(30))
        );
        assert_eq!(
            PmuReg::from_iss(iss(3, 14, 12, 5)),
            Some(PmuReg::Pmevtyper(5))
        );
        assert_eq!(PmuReg::from_iss(iss(3, 14, 15, 7)), Some(PmuReg::Pmccfiltr));
        assert_eq!(PmuReg::from_iss(iss(3, 9, 12, 0)), Some(PmuReg::Pmcr));
        assert_eq!(PmuReg::from_iss(iss(0, 9, 14, 1)), Some(PmuReg::Pmintenset));
        // SCTLR_EL1 is not a PMU register.
        assert_eq!(PmuReg::from_iss(iss(0, 1, 0, 0)), None);
    }

    #[test]
    fn guest_view_hides_reserved_counters() {
        let g = GuestPmu { hpmn: 3 };
        assert_eq!(g.counter_mask(), 0b111 | (1 << 31));
        assert!(g.owns(2) && !g.owns(3));
        // QEMU's PMCR_EL0.N is 6: the guest reads 3.
        let hw = (6 << 11) | pmcr::E;
        assert_eq!(g.pmcr_read(hw), (3 << 11) | pmcr::E);
        assert_eq!(g.pmcr_write(pmcr::P | pmcr::C | pmcr::E), pmcr::C | pmcr::E);
        assert_eq!(g.evtyper_write(PMEVTYPER_NSH | 0x08), 0x08);
    }
}
