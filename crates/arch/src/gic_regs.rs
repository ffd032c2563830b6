//! The GICv3 CPU interface's SGI registers (ICC_SGI0R_EL1, ICC_SGI1R_EL1, ICC_ASGI1R_EL1):
//! with HCR_EL2.IMO or FMO set, the guest's writes of them trap to EL2 (GICv3 architecture,
//! 12.2), and the hypervisor sends the interrupt on its behalf.

use crate::esr::SysRegIss;

/// An SGI generation register: op0 3, op1 0, CRn 12, CRm 11, op2 below.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SgiReg {
    /// ICC_SGI1R_EL1 (op2 5): Group 1 for the current security state (Linux's IPIs).
    Sgi1r,
    /// ICC_ASGI1R_EL1 (op2 6): Group 1 for the other security state.
    Asgi1r,
    /// ICC_SGI0R_EL1 (op2 7): Group 0.
    Sgi0r,
}

impl SgiReg {
    /// The register a trapped MSR names, if it is one of these (a write: they are write-only).
    pub const fn from_iss(s: SysRegIss) -> Option<Self> {
        if s.is_read || s.op0 != 3 || s.op1 != 0 || s.crn != 12 || s.crm != 11 {
            return None;
        }
        match s.op2 {
            5 => Some(Self::Sgi1r),
            6 => Some(Self::Asgi1r),
            7 => Some(Self::Sgi0r),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msr(op2: u8, is_read: bool) -> SysRegIss {
        SysRegIss {
            op0: 3,
            op2,
            op1: 0,
            crn: 12,
            rt: 1,
            crm: 11,
            is_read,
        }
    }

    #[test]
    fn the_three_sgi_registers_and_nothing_near_them() {
        assert_eq!(SgiReg::from_iss(msr(5, false)), Some(SgiReg::Sgi1r));
        assert_eq!(SgiReg::from_iss(msr(6, false)), Some(SgiReg::Asgi1r));
        assert_eq!(SgiReg::from_iss(msr(7, false)), Some(SgiReg::Sgi0r));
        // ICC_DIR_EL1 (op2 1) and ICC_RPR_EL1 (op2 3) share the encoding space.
        assert_eq!(SgiReg::from_iss(msr(1, false)), None);
        assert_eq!(SgiReg::from_iss(msr(3, true)), None);
        assert_eq!(SgiReg::from_iss(msr(5, true)), None, "write-only");
        assert_eq!(
            SgiReg::from_iss(SysRegIss {
                crm: 12,
                ..msr(5, false)
            }),
            None
        );
    }
}
