//! The virtual counter's registers: CNTVCT_EL0 and CNTVCTSS_EL0 (op0 3, op1 3, CRn 14,
//! CRm 0, op2 2 and 6). With FEAT_ECV, CNTHCTL_EL2.EL1TVCT makes the guest's reads of them,
//! at EL0 and EL1, trap to EL2 (Arm ARM, CNTHCTL_EL2.EL1TVCT), where the hypervisor answers
//! with the guest's time (`mtex_vm::stepped_clock`).

use crate::esr::SysRegIss;

/// A trapped MRS of the guest's virtual counter, self-synchronised or not.
pub const fn is_virtual_count_read(s: SysRegIss) -> bool {
    s.is_read && s.op0 == 3 && s.op1 == 3 && s.crn == 14 && s.crm == 0 && matches!(s.op2, 2 | 6)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mrs(crm: u8, op2: u8, is_read: bool) -> SysRegIss {
        SysRegIss {
            op0: 3,
            op2,
            op1: 3,
            crn: 14,
            rt: 0,
            crm,
            is_read,
        }
    }

    #[test]
    fn both_counter_reads_and_nothing_near_them() {
        assert!(is_virtual_count_read(mrs(0, 2, true)), "CNTVCT_EL0");
        assert!(is_virtual_count_read(mrs(0, 6, true)), "CNTVCTSS_EL0");
        // CNTPCT_EL0 (op2 1), CNTPCTSS_EL0 (op2 5), CNTFRQ_EL0 (op2 0).
        for op2 in [0, 1, 5] {
            assert!(!is_virtual_count_read(mrs(0, op2, true)), "op2 {op2}");
        }
        // CNTV_TVAL_EL0 (CRm 3, op2 0), CNTV_CTL_EL0 (CRm 3, op2 1), CNTV_CVAL_EL0 (op2 2).
        assert!(!is_virtual_count_read(mrs(3, 2, true)));
        assert!(!is_virtual_count_read(mrs(0, 2, false)), "no such write");
        assert!(!is_virtual_count_read(SysRegIss {
            op1: 4,
            ..mrs(0, 2, true)
        }));
    }
}
