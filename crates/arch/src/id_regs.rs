//! The ID registers as the guest sees them (HCR_EL2.TID3 traps its reads of the group-3 ID
//! registers: op0 = 3, op1 = 0, CRn = 0, CRm = 1..7).
//!
//! The guest is told about a feature only when the hypervisor handles it. FEAT_MOPS
//! (CPY*/SET*, ID_AA64ISAR2_EL1.MOPS) is hidden: HCRX_EL2.MSCEn is clear, so the
//! instructions are UNDEFINED at EL1/EL0, and the trace counter does not model their
//! per-byte-range tag checks.

use crate::esr::SysRegIss;

/// True for a group-3 ID register encoding.
pub const fn is_group3(s: SysRegIss) -> bool {
    s.op0 == 3 && s.op1 == 0 && s.crn == 0 && s.crm >= 1 && s.crm <= 7
}

/// ID_AA64ISAR2_EL1 is (3, 0, 0, 6, 2); its MOPS field is bits 19:16.
const ISAR2: (u8, u8) = (6, 2);
const ISAR2_MOPS: u64 = 0xf << 16;

/// The value the guest reads for the group-3 ID register (CRm, op2) whose real value is `hw`.
pub const fn guest_view(crm: u8, op2: u8, hw: u64) -> u64 {
    if crm == ISAR2.0 && op2 == ISAR2.1 {
        hw & !ISAR2_MOPS
    } else {
        hw
    }
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
}
