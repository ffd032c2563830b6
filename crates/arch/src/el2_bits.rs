//! The hypervisor's own control bits: the SPSR_EL2 bits it reads and sets around an ERET, the
//! step and breakpoint controls, the fine-grained write traps, CPTR_EL2, the PMU event filters
//! and the OS locks. The guest's debug self-test names the same fields.
//!
//! The positions come from arm-sysregs, which is generated from Arm's machine-readable
//! register descriptions (AARCHMRS), as in [`crate::mte_bits`]; nothing here is a hand-typed
//! shift, except where arm-sysregs has no description of the register: DBGBCR<n>_EL1 and the
//! event number of PMEVTYPER<n>_EL0, each marked below and pinned by the tests.

use arm_sysregs::aarch32::registers::{Dbgosdlr, Dbgoslsr, Pmccfiltr};
use arm_sysregs::el1::registers::MdscrEl1;
use arm_sysregs::el2::registers::{CptrEl2, HfgwtrEl2, HpfarEl2, MdcrEl2, SpsrEl2};

/// SPSR_EL2: the PSTATE an ERET returns to.
pub mod spsr {
    use super::SpsrEl2;
    /// I: IRQs masked.
    pub const I: u64 = SpsrEl2::I.bits();
    /// SS: software step active for the instruction ERET returns to.
    pub const SS: u64 = SpsrEl2::SS.bits();
    /// UAO: LDTR/STTR at EL1 are privileged.
    pub const UAO: u64 = SpsrEl2::UAO.bits();
    /// TCO: tag checks overridden (PSTATE.TCO).
    pub const TCO: u64 = SpsrEl2::TCO.bits();
    /// M[3:0] of EL1 with its own stack pointer (EL1h).
    pub const M_EL1H: u8 = 0b0101;
    /// M[3:0] of EL1 with SP_EL0 (EL1t).
    pub const M_EL1T: u8 = 0b0100;
    /// What a guest CPU resumed on SP_EL0 starts with: EL1t, with D, A, I and F masked.
    pub const EL1T_MASKED: u64 = SpsrEl2::from_bits_retain(EL1H_MASKED)
        .with_m_3_0(M_EL1T)
        .bits();
    /// What a guest CPU starts with: EL1h, with D, A, I and F masked.
    pub const EL1H_MASKED: u64 = SpsrEl2::D
        .union(SpsrEl2::A)
        .union(SpsrEl2::I)
        .union(SpsrEl2::F)
        .with_m_3_0(M_EL1H)
        .bits();
}

/// MDSCR_EL1: the debug controls of EL1 and EL0.
pub mod mdscr {
    use super::MdscrEl1;
    /// SS: software step enabled.
    pub const SS: u64 = MdscrEl1::SS.bits();
    /// KDE: debug exceptions at EL1 (local, not routed to EL2) enabled.
    pub const KDE: u64 = MdscrEl1::KDE.bits();
    /// MDE: breakpoint and watchpoint exceptions enabled.
    pub const MDE: u64 = MdscrEl1::MDE.bits();
}

/// MDCR_EL2.
pub mod mdcr {
    use super::MdcrEl2;
    /// TDE: debug exceptions from EL1 and EL0 go to EL2.
    pub const TDE: u64 = MdcrEl2::TDE.bits();
}

/// HFGWTR_EL2: fine-grained write traps of EL1 registers.
pub mod hfgwtr {
    use super::HfgwtrEl2;
    /// Writes of SCTLR_EL1 trap.
    pub const SCTLR_EL1: u64 = HfgwtrEl2::SCTLR_EL1.bits();
    /// Writes of TCR_EL1 trap.
    pub const TCR_EL1: u64 = HfgwtrEl2::TCR_EL1.bits();
}

/// CPTR_EL2 in its E2H = 0 layout (not VHE).
pub mod cptr {
    use super::CptrEl2;
    /// The bits that are RES1 whatever the CPU implements (13, 9 and 7:0).
    pub const RES1: u64 = CptrEl2::RES1.bits();
    /// TZ: trap SVE. RES1 without FEAT_SVE.
    pub const TZ: u64 = CptrEl2::TZ.bits();
    /// TSM: trap SME. RES1 without FEAT_SME.
    pub const TSM: u64 = CptrEl2::TSM.bits();
}

/// HPFAR_EL2: the faulting IPA of a stage-2 abort.
pub mod hpfar {
    use super::HpfarEl2;
    /// FIPA: IPA[47:12] (more with larger IPAs), from this bit up.
    pub const FIPA_SHIFT: u32 = HpfarEl2::FIPA_SHIFT;
    /// The IPA of the faulting page: FIPA holds the IPA from bit 12 (the page offset is in
    /// FAR_EL2). Bits above FIPA (NS) are kept, as the raw value has them.
    pub const fn ipa_page(hpfar: u64) -> u64 {
        (hpfar >> FIPA_SHIFT) << 12
    }
}

/// PMEVTYPER<n>_EL0: an event counter's event and filters.
///
/// arm-sysregs describes no PMEVTYPER<n>. Its filter bits are PMCCFILTR's, the type register
/// of counter 31 (PMXEVTYPER_EL0 reaches it with PMSELR_EL0.SEL = 31), at the same positions;
/// AArch32 PMCCFILTR is PMCCFILTR_EL0[31:0].
pub mod pmevtyper {
    use super::Pmccfiltr;
    /// P: do not count at EL1.
    pub const P: u64 = Pmccfiltr::P.bits() as u64;
    /// U: do not count at EL0.
    pub const U: u64 = Pmccfiltr::U.bits() as u64;
    /// NSK, NSU: with EL3, Non-secure EL1 / EL0 count when equal to P / U.
    pub const NSK: u64 = Pmccfiltr::NSK.bits() as u64;
    pub const NSU: u64 = Pmccfiltr::NSU.bits() as u64;
    /// NSH: count at EL2.
    pub const NSH: u64 = Pmccfiltr::NSH.bits() as u64;
    /// evtCount, bits 15:0 (FEAT_PMUv3p1). Hand-typed: arm-sysregs has no PMEVTYPER<n>.
    pub const EVT_MASK: u64 = 0xffff;
}

/// OSLSR_EL1 (AArch32 DBGOSLSR is mapped to it bit for bit).
pub mod oslsr {
    use super::Dbgoslsr;
    /// OSLK: the OS Lock is locked.
    pub const OSLK: u64 = Dbgoslsr::OSLK.bits() as u64;
}

/// OSDLR_EL1 (AArch32 DBGOSDLR is mapped to it bit for bit).
pub mod osdlr {
    use super::Dbgosdlr;
    /// DLK: the OS Double Lock is locked.
    pub const DLK: u64 = Dbgosdlr::DLK.bits() as u64;
}

/// DBGBCR<n>_EL1: a breakpoint's control. Hand-typed from the Arm ARM: arm-sysregs has no
/// description of the numbered debug registers.
pub mod dbgbcr {
    /// E: the breakpoint is enabled.
    pub const E: u64 = 1;
    /// PMC, bits 2:1: the ELs the breakpoint matches at.
    pub const PMC_SHIFT: u32 = 1;
    /// PMC = 0b11: EL1 and EL0 (with HMC = 0, SSC = 0b00).
    pub const PMC_EL1_EL0: u64 = 0b11 << PMC_SHIFT;
    /// BAS, bits 8:5: which halfwords of an A32 instruction match.
    pub const BAS_SHIFT: u32 = 5;
    /// BAS = 0b1111: every byte lane, as an A64 instruction breakpoint requires.
    pub const BAS_ALL: u64 = 0b1111 << BAS_SHIFT;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_are_the_arm_arms() {
        // The Arm ARM's register descriptions. SPSR_EL2: I 7, SS 21, UAO 23, TCO 25.
        assert_eq!(spsr::I, 1 << 7);
        assert_eq!(spsr::SS, 1 << 21);
        assert_eq!(spsr::UAO, 1 << 23);
        assert_eq!(spsr::TCO, 1 << 25);
        // D A I F (bits 9:6) and M[3:0] = EL1h (Arm ARM C5.2.19).
        assert_eq!(spsr::EL1H_MASKED, 0b11_1100_0101);
        assert_eq!(spsr::EL1T_MASKED, 0b11_1100_0100);
        // MDSCR_EL1: SS 0, KDE 13, MDE 15.
        assert_eq!((mdscr::SS, mdscr::KDE, mdscr::MDE), (1, 1 << 13, 1 << 15));
        // MDCR_EL2.TDE 8; HFGWTR_EL2.SCTLR_EL1 29, TCR_EL1 32; CPTR_EL2 TZ 8, TSM 12;
        // HPFAR_EL2.FIPA from bit 4.
        assert_eq!(mdcr::TDE, 1 << 8);
        assert_eq!(hfgwtr::SCTLR_EL1 | hfgwtr::TCR_EL1, (1 << 29) | (1 << 32));
        assert_eq!((cptr::TZ, cptr::TSM, cptr::RES1), (1 << 8, 1 << 12, 0x22ff));
        assert_eq!(hpfar::FIPA_SHIFT, 4);
        assert_eq!(hpfar::ipa_page(0x1234_5670), 0x12_3456_7000);
        // PMEVTYPER<n>_EL0: P 31, U 30, NSH 27.
        assert_eq!(pmevtyper::P | pmevtyper::U, 3 << 30);
        assert_eq!((pmevtyper::NSK, pmevtyper::NSU), (1 << 29, 1 << 28));
        assert_eq!(pmevtyper::NSH, 1 << 27);
        // OSLSR_EL1.OSLK 1, OSDLR_EL1.DLK 0; DBGBCR<n>_EL1 BAS 8:5, PMC 2:1, E 0.
        assert_eq!((oslsr::OSLK, osdlr::DLK), (1 << 1, 1));
        assert_eq!(dbgbcr::BAS_ALL | dbgbcr::PMC_EL1_EL0 | dbgbcr::E, 0x1e7);
    }
}
