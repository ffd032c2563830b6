//! The ID registers as the guest sees them (HCR_EL2.TID3 traps its reads of the group-3 ID
//! registers: op0 = 3, op1 = 0, CRn = 0, CRm = 1..7).
//!
//! The guest is told about a feature only when the hypervisor handles it. Hidden:
//!
//! - FEAT_MOPS (CPY*/SET*): HCRX_EL2.MSCEn is clear, so the instructions are UNDEFINED at
//!   EL1/EL0, and the trace counter does not model their per-byte-range tag checks.
//! - Features whose registers the fine-grained traps catch through their negative-polarity
//!   bits (HFGRTR_EL2/HFGWTR_EL2 nSMPRI_EL1, nTPIDR2_EL0, nGCS_EL0/1, nPOR_EL0/1, nS2POR_EL1,
//!   nPIR_EL1, nPIRE0_EL1, nRCWMASK_EL1, nACCDATA_EL1, nMAIR2_EL1, nAMAIR2_EL1; HDFGRTR_EL2
//!   nBRB*), left 0 so that an access the hypervisor cannot vouch for ends the run with a
//!   record rather than running unseen; or whose enables in HCRX_EL2 the hypervisor leaves
//!   clear (TCR2En, SCTLR2En, EnFPM, D128En): SME, GCS, THE, POE, S1PIE/S2PIE, AIE, LS64,
//!   BRBE, TCR2, SCTLR2, D128, MEC, FPMR and its FP8 features.
//! - FEAT_MTE_NO_ADDRESS_TAGS / FEAT_MTE_CANONICAL_TAGS (ID_AA64PFR1_EL1.MTEX): the trace
//!   counter's predicate does not model canonically tagged memory. A kernel that reads these ID
//!   registers (Linux does, before touching any of them) never uses them; one that uses them
//!   anyway stops with a named record ([`hidden_register`]).

use crate::esr::SysRegIss;

/// True for a group-3 ID register encoding.
pub const fn is_group3(s: SysRegIss) -> bool {
    s.op0 == 3 && s.op1 == 0 && s.crn == 0 && s.crm >= 1 && s.crm <= 7
}

/// A field the guest reads as 0: the register (CRm, op2), the field's lowest bit (every
/// field hidden is 4 bits wide), its name.
struct Hidden {
    crm: u8,
    op2: u8,
    lsb: u8,
    name: &'static str,
}

const fn field(crm: u8, op2: u8, lsb: u8, name: &'static str) -> Hidden {
    Hidden {
        crm,
        op2,
        lsb,
        name,
    }
}

/// Every hidden field.
const HIDDEN: &[Hidden] = &[
    // ID_AA64PFR1_EL1 (3, 0, 0, 4, 1).
    field(4, 1, 24, "ID_AA64PFR1_EL1.SME"),
    field(4, 1, 44, "ID_AA64PFR1_EL1.GCS"),
    field(4, 1, 48, "ID_AA64PFR1_EL1.THE"),
    // Canonical tag checking (TCR_EL1.MTX0/MTX1): not modelled by the predicate.
    field(4, 1, 52, "ID_AA64PFR1_EL1.MTEX"),
    // ID_AA64PFR2_EL1 (3, 0, 0, 4, 2).
    field(4, 2, 32, "ID_AA64PFR2_EL1.FPMR"),
    // ID_AA64ISAR1_EL1 (3, 0, 0, 6, 1).
    field(6, 1, 60, "ID_AA64ISAR1_EL1.LS64"),
    // ID_AA64ISAR2_EL1 (3, 0, 0, 6, 2).
    field(6, 2, 16, "ID_AA64ISAR2_EL1.MOPS"),
    // ID_AA64DFR0_EL1 (3, 0, 0, 5, 0).
    field(5, 0, 52, "ID_AA64DFR0_EL1.BRBE"),
    // ID_AA64MMFR3_EL1 (3, 0, 0, 7, 3).
    field(7, 3, 0, "ID_AA64MMFR3_EL1.TCRX"),
    field(7, 3, 4, "ID_AA64MMFR3_EL1.SCTLRX"),
    field(7, 3, 8, "ID_AA64MMFR3_EL1.S1PIE"),
    field(7, 3, 12, "ID_AA64MMFR3_EL1.S2PIE"),
    field(7, 3, 16, "ID_AA64MMFR3_EL1.S1POE"),
    field(7, 3, 20, "ID_AA64MMFR3_EL1.S2POE"),
    field(7, 3, 24, "ID_AA64MMFR3_EL1.AIE"),
    field(7, 3, 28, "ID_AA64MMFR3_EL1.MEC"),
    field(7, 3, 32, "ID_AA64MMFR3_EL1.D128"),
];

/// Registers read as 0 in whole: ID_AA64SMFR0_EL1 (4, 5, SME's own features) and
/// ID_AA64FPFR0_EL1 (4, 7, the FP8 formats FPMR selects).
const ZEROED: &[(u8, u8)] = &[(4, 5), (4, 7)];

/// The value the guest reads for the group-3 ID register (CRm, op2) whose real value is `hw`.
pub const fn guest_view(crm: u8, op2: u8, hw: u64) -> u64 {
    let mut i = 0;
    while i < ZEROED.len() {
        if ZEROED[i].0 == crm && ZEROED[i].1 == op2 {
            return 0;
        }
        i += 1;
    }
    let mut v = hw;
    let mut i = 0;
    while i < HIDDEN.len() {
        let h = &HIDDEN[i];
        if h.crm == crm && h.op2 == op2 {
            v &= !(0xf << h.lsb);
        }
        i += 1;
    }
    v
}

/// The names of the fields [`guest_view`] hides, for documentation and tests.
pub fn hidden_fields() -> impl Iterator<Item = &'static str> {
    HIDDEN.iter().map(|h| h.name)
}

/// A system register's encoding: (op0, op1, CRn, CRm, op2).
type Encoding = (u8, u8, u8, u8, u8);

/// A register of a hidden feature, by encoding: its name and the feature the guest was told
/// it does not have.
const HIDDEN_REGISTERS: &[(Encoding, &str, &str)] = &[
    ((3, 0, 1, 2, 4), "SMPRI_EL1", "FEAT_SME"),
    ((3, 0, 1, 2, 6), "SMCR_EL1", "FEAT_SME"),
    ((3, 3, 13, 0, 5), "TPIDR2_EL0", "FEAT_SME"),
    ((3, 1, 0, 0, 6), "SMIDR_EL1", "FEAT_SME"),
    ((3, 3, 4, 2, 2), "SVCR", "FEAT_SME"),
    ((3, 0, 2, 5, 0), "GCSCR_EL1", "FEAT_GCS"),
    ((3, 0, 2, 5, 1), "GCSPR_EL1", "FEAT_GCS"),
    ((3, 0, 2, 5, 2), "GCSCRE0_EL1", "FEAT_GCS"),
    ((3, 3, 2, 5, 1), "GCSPR_EL0", "FEAT_GCS"),
    ((3, 0, 10, 2, 4), "POR_EL1", "FEAT_S1POE"),
    ((3, 3, 10, 2, 4), "POR_EL0", "FEAT_S1POE"),
    ((3, 0, 10, 2, 3), "PIR_EL1", "FEAT_S1PIE"),
    ((3, 0, 10, 2, 2), "PIRE0_EL1", "FEAT_S1PIE"),
    ((3, 0, 2, 0, 3), "TCR2_EL1", "FEAT_TCR2"),
    ((3, 0, 1, 0, 3), "SCTLR2_EL1", "FEAT_SCTLR2"),
    ((3, 0, 13, 0, 6), "RCWMASK_EL1", "FEAT_THE"),
    ((3, 0, 13, 0, 3), "RCWSMASK_EL1", "FEAT_THE"),
    ((3, 0, 13, 0, 5), "ACCDATA_EL1", "FEAT_LS64_ACCDATA"),
    ((3, 0, 10, 2, 1), "MAIR2_EL1", "FEAT_AIE"),
    ((3, 0, 10, 3, 1), "AMAIR2_EL1", "FEAT_AIE"),
    ((3, 3, 4, 4, 2), "FPMR", "FEAT_FPMR"),
    ((2, 1, 9, 0, 0), "BRBCR_EL1", "FEAT_BRBE"),
    ((2, 1, 9, 2, 0), "BRBIDR0_EL1", "FEAT_BRBE"),
];

/// The register a trapped MRS/MSR names, when it belongs to a feature hidden from the guest:
/// (register, feature).
pub fn hidden_register(s: SysRegIss) -> Option<(&'static str, &'static str)> {
    HIDDEN_REGISTERS
        .iter()
        .find(|(enc, _, _)| *enc == (s.op0, s.op1, s.crn, s.crm, s.op2))
        .map(|(_, name, feature)| (*name, *feature))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mops_is_hidden_and_nothing_else_changes() {
        let isar2 = (1 << 16) | (1 << 12) | 0x1;
        assert_eq!(guest_view(6, 2, isar2), (1 << 12) | 0x1);
        // ID_AA64PFR1_EL1 (3, 0, 0, 4, 1): MTE = 3 passes through.
        assert_eq!(guest_view(4, 1, 0x300), 0x300);
        let iss = |crm| SysRegIss {
            is_read: true,
            ..SysRegIss::write_of(3, 0, 0, crm, 2)
        };
        assert!(is_group3(iss(6)) && is_group3(iss(1)));
        assert!(!is_group3(iss(0)), "MIDR/MPIDR are not group 3");
    }

    /// With every bit set, each hidden field reads 0 and every other bit stays: the MTE
    /// fields, SVE, the PAC and BTI fields the guest keeps.
    #[test]
    fn each_hidden_field_reads_zero_and_only_those() {
        let pfr1 = guest_view(4, 1, u64::MAX);
        assert_eq!(pfr1 & (0xf << 24), 0, "SME");
        assert_eq!(pfr1 & (0xf << 44), 0, "GCS");
        assert_eq!(pfr1 & (0xf << 48), 0, "THE");
        assert_eq!(pfr1 & (0xf << 52), 0, "MTEX");
        assert_eq!(pfr1 & (0xf << 8), 0xf << 8, "MTE stays");
        assert_eq!(pfr1 & (0xf << 40), 0xf << 40, "MTE_frac stays");
        assert_eq!(pfr1 & 0xf, 0xf, "BT stays");
        assert_eq!(pfr1.count_zeros(), 16);
        let mmfr3 = guest_view(7, 3, u64::MAX);
        assert_eq!(mmfr3 & 0xf_ffff_ffff, 0, "TCRX..D128");
        assert_eq!(mmfr3 >> 36, u64::MAX >> 36);
        assert_eq!(guest_view(4, 2, u64::MAX).count_zeros(), 4, "FPMR");
        assert_eq!(guest_view(6, 1, u64::MAX) >> 60, 0, "LS64");
        assert_eq!(guest_view(5, 0, u64::MAX) & (0xf << 52), 0, "BRBE");
        assert_eq!(guest_view(4, 5, u64::MAX), 0, "SMFR0");
        assert_eq!(guest_view(4, 7, u64::MAX), 0, "FPFR0");
        // SVE (PFR0), ZFR0, MMFR0..2 and ISAR0 pass through whole.
        for (crm, op2) in [(4, 0), (4, 4), (7, 0), (7, 1), (7, 2), (6, 0)] {
            assert_eq!(guest_view(crm, op2, u64::MAX), u64::MAX, "({crm}, {op2})");
        }
        assert_eq!(hidden_fields().count(), HIDDEN.len());
    }

    #[test]
    fn registers_of_hidden_features_are_named() {
        let smpri = SysRegIss::write_of(3, 0, 1, 2, 4);
        assert_eq!(hidden_register(smpri), Some(("SMPRI_EL1", "FEAT_SME")));
        let sctlr = SysRegIss::write_of(3, 0, 1, 0, 0);
        assert_eq!(hidden_register(sctlr), None);
    }
}
