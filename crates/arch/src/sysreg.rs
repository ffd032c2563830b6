//! System registers the hypervisor traps, by their architectural encoding.

use serde::{Deserialize, Serialize};

/// An (op0, op1, CRn, CRm, op2) system-register encoding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Encoding {
    pub op0: u8,
    pub op1: u8,
    pub crn: u8,
    pub crm: u8,
    pub op2: u8,
}

/// The ISS bits of EC 0x18 that name a register (all but Rt and the direction).
pub const ISS_REGISTER_MASK: u32 = 0x003f_fc1e;

impl Encoding {
    /// The encoding as it sits in an EC 0x18 ISS (Arm ARM D24.2.40), Rt and direction zero.
    pub const fn iss_key(self) -> u32 {
        ((self.op0 as u32) << 20)
            | ((self.op2 as u32) << 17)
            | ((self.op1 as u32) << 14)
            | ((self.crn as u32) << 10)
            | ((self.crm as u32) << 1)
    }

    /// One hex digit per field: op0, op1, CRn, CRm, op2.
    pub const fn packed(self) -> u32 {
        ((self.op0 as u32) << 16)
            | ((self.op1 as u32) << 12)
            | ((self.crn as u32) << 8)
            | ((self.crm as u32) << 4)
            | self.op2 as u32
    }
}

/// The EL1 registers whose writes HCR_EL2.TVM traps (Arm ARM D24.2.48, HCR_EL2.TVM), of which
/// SCTLR_EL1 and TCR_EL1 carry the MTE controls. With FEAT_FGT only those two are trapped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SysReg {
    SctlrEl1,
    Ttbr0El1,
    Ttbr1El1,
    TcrEl1,
    Afsr0El1,
    Afsr1El1,
    EsrEl1,
    FarEl1,
    MairEl1,
    AmairEl1,
    ContextidrEl1,
}

impl SysReg {
    /// Every register in this set, in a fixed order.
    pub const ALL: [SysReg; 11] = [
        Self::SctlrEl1,
        Self::Ttbr0El1,
        Self::Ttbr1El1,
        Self::TcrEl1,
        Self::Afsr0El1,
        Self::Afsr1El1,
        Self::EsrEl1,
        Self::FarEl1,
        Self::MairEl1,
        Self::AmairEl1,
        Self::ContextidrEl1,
    ];

    /// The architectural encoding of the register.
    pub const fn encoding(self) -> Encoding {
        let (op0, op1, crn, crm, op2) = match self {
            Self::SctlrEl1 => (3, 0, 1, 0, 0),
            Self::Ttbr0El1 => (3, 0, 2, 0, 0),
            Self::Ttbr1El1 => (3, 0, 2, 0, 1),
            Self::TcrEl1 => (3, 0, 2, 0, 2),
            Self::Afsr0El1 => (3, 0, 5, 1, 0),
            Self::Afsr1El1 => (3, 0, 5, 1, 1),
            Self::EsrEl1 => (3, 0, 5, 2, 0),
            Self::FarEl1 => (3, 0, 6, 0, 0),
            Self::MairEl1 => (3, 0, 10, 2, 0),
            Self::AmairEl1 => (3, 0, 10, 3, 0),
            Self::ContextidrEl1 => (3, 0, 13, 0, 1),
        };
        Encoding {
            op0,
            op1,
            crn,
            crm,
            op2,
        }
    }

    /// The register with this encoding, if it is one the hypervisor traps. A `match` on the
    /// packed encoding (not a search of `ALL`): this runs on every trapped write.
    #[inline]
    pub const fn from_encoding(e: Encoding) -> Option<Self> {
        Some(match e.packed() {
            0x3_0_1_0_0 => Self::SctlrEl1,
            0x3_0_2_0_0 => Self::Ttbr0El1,
            0x3_0_2_0_1 => Self::Ttbr1El1,
            0x3_0_2_0_2 => Self::TcrEl1,
            0x3_0_5_1_0 => Self::Afsr0El1,
            0x3_0_5_1_1 => Self::Afsr1El1,
            0x3_0_5_2_0 => Self::EsrEl1,
            0x3_0_6_0_0 => Self::FarEl1,
            0x3_0_a_2_0 => Self::MairEl1,
            0x3_0_a_3_0 => Self::AmairEl1,
            0x3_0_d_0_1 => Self::ContextidrEl1,
            _ => return None,
        })
    }

    /// The register a trapped MSR/MRS names, straight from its ISS: the two MTE control
    /// registers are tested first, since they are what traps under FEAT_FGT.
    #[inline(always)]
    pub fn from_iss(iss: u32) -> Option<Self> {
        const SCTLR: u32 = SysReg::SctlrEl1.encoding().iss_key();
        const TCR: u32 = SysReg::TcrEl1.encoding().iss_key();
        match iss & ISS_REGISTER_MASK {
            SCTLR => Some(Self::SctlrEl1),
            TCR => Some(Self::TcrEl1),
            _ => Self::from_encoding(crate::esr::SysRegIss::from_iss(iss).encoding()),
        }
    }

    /// ESR_EL2 of a trapped `MSR <reg>, X0` (EC 0x18, IL 1, a write): the syndrome of every
    /// trapped write of the register once ISS.Rt is cleared (`esr::ISS_RT_MASK`).
    pub const fn msr_esr(self) -> u64 {
        ((crate::esr::EC_SYSREG_TRAP as u64) << 26)
            | crate::esr::ESR_IL
            | self.encoding().iss_key() as u64
    }

    /// The register's architectural name.
    pub const fn name(self) -> &'static str {
        match self {
            Self::SctlrEl1 => "SCTLR_EL1",
            Self::Ttbr0El1 => "TTBR0_EL1",
            Self::Ttbr1El1 => "TTBR1_EL1",
            Self::TcrEl1 => "TCR_EL1",
            Self::Afsr0El1 => "AFSR0_EL1",
            Self::Afsr1El1 => "AFSR1_EL1",
            Self::EsrEl1 => "ESR_EL1",
            Self::FarEl1 => "FAR_EL1",
            Self::MairEl1 => "MAIR_EL1",
            Self::AmairEl1 => "AMAIR_EL1",
            Self::ContextidrEl1 => "CONTEXTIDR_EL1",
        }
    }

    /// Whether the register holds MTE controls (the ones the report decodes field by field).
    pub const fn has_mte_fields(self) -> bool {
        matches!(self, Self::SctlrEl1 | Self::TcrEl1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodings_are_distinct_and_round_trip() {
        for r in SysReg::ALL {
            assert_eq!(SysReg::from_encoding(r.encoding()), Some(r), "{}", r.name());
        }
    }

    #[test]
    fn iss_decoding_agrees_with_field_decoding() {
        for r in SysReg::ALL {
            for rt in [0u32, 19, 31] {
                let iss = r.encoding().iss_key() | (rt << 5);
                assert_eq!(SysReg::from_iss(iss), Some(r));
                assert_eq!(
                    SysReg::from_iss(iss | 1),
                    Some(r),
                    "direction is not part of the name"
                );
            }
        }
        assert_eq!(SysReg::from_iss(0), None);
    }

    #[test]
    fn msr_syndromes_decode_back_to_the_register_written() {
        // `msr sctlr_el1, xN` and `msr tcr_el1, xN` as ESR_EL2 reports them, Rt cleared.
        assert_eq!(SysReg::SctlrEl1.msr_esr(), 0x6230_0400);
        assert_eq!(SysReg::TcrEl1.msr_esr(), 0x6234_0800);
        for r in SysReg::ALL {
            let esr = crate::Esr(r.msr_esr() | (7 << 5));
            assert_eq!(esr.ec(), crate::ExceptionClass::SysRegTrap);
            assert!(esr.il());
            let iss = esr.sysreg_iss();
            assert!(!iss.is_read);
            assert_eq!(iss.rt, 7);
            assert_eq!(SysReg::from_iss(esr.iss()), Some(r));
            assert_eq!(
                r.msr_esr() & crate::esr::ISS_RT_MASK as u64,
                0,
                "Rt is cleared"
            );
        }
    }

    #[test]
    fn unknown_encoding_is_none() {
        // TFSR_EL1 is (3, 0, 5, 6, 0): not a TVM register.
        let e = Encoding {
            op0: 3,
            op1: 0,
            crn: 5,
            crm: 6,
            op2: 0,
        };
        assert_eq!(SysReg::from_encoding(e), None);
    }
}
