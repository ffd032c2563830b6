//! The guest's debug registers, emulated: the step engine owns the real ones.
//!
//! The trace counter single-steps the guest and plants hardware breakpoints, through
//! MDSCR_EL1, DBGBVR/DBGBCR and the OS locks. A guest that set the OS Double Lock would stop
//! software step (1 instruction traced out of hundreds), and its own breakpoint inside a
//! traced phase would be taken by EL2 as a step. So MDCR_EL2.TDA/TDOSA/TDRA trap every guest
//! access to them, and the guest gets this shadow: what it wrote reads back, nothing reaches
//! the hardware, and the hypervisor records the writes. The guest's breakpoints, watchpoints
//! and its own single-step are therefore never delivered — said in the report, never hidden.

use crate::esr::SysRegIss;

/// Breakpoint and watchpoint slots the shadow keeps (the architecture's maximum is 16).
pub const SLOTS: usize = 16;

/// A debug register, by what a trapped MRS/MSR names (op0 = 2, Arm ARM D24.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DebugReg {
    Bvr(u8),
    Bcr(u8),
    Wvr(u8),
    Wcr(u8),
    Mdscr,
    Mdccint,
    Oseccr,
    Osdtrrx,
    Osdtrtx,
    Mdrar,
    Oslar,
    Oslsr,
    Osdlr,
    Dbgprcr,
    Claimset,
    Claimclr,
    Authstatus,
    Mdccsr,
    Dbgdtr,
    Dbgdtrrxtx,
}

impl DebugReg {
    /// The debug register a trapped access names, if it is one.
    pub const fn from_iss(s: SysRegIss) -> Option<Self> {
        if s.op0 != 2 {
            return None;
        }
        Some(match (s.op1, s.crn, s.crm, s.op2) {
            (0, 0, n, 4) => Self::Bvr(n),
            (0, 0, n, 5) => Self::Bcr(n),
            (0, 0, n, 6) => Self::Wvr(n),
            (0, 0, n, 7) => Self::Wcr(n),
            (0, 0, 2, 2) => Self::Mdscr,
            (0, 0, 2, 0) => Self::Mdccint,
            (0, 0, 6, 2) => Self::Oseccr,
            (0, 0, 0, 2) => Self::Osdtrrx,
            (0, 0, 3, 2) => Self::Osdtrtx,
            (0, 1, 0, 0) => Self::Mdrar,
            (0, 1, 0, 4) => Self::Oslar,
            (0, 1, 1, 4) => Self::Oslsr,
            (0, 1, 3, 4) => Self::Osdlr,
            (0, 1, 4, 4) => Self::Dbgprcr,
            (0, 7, 8, 6) => Self::Claimset,
            (0, 7, 9, 6) => Self::Claimclr,
            (0, 7, 14, 6) => Self::Authstatus,
            (3, 0, 1, 0) => Self::Mdccsr,
            (3, 0, 4, 0) => Self::Dbgdtr,
            (3, 0, 5, 0) => Self::Dbgdtrrxtx,
            _ => return None,
        })
    }

    /// The register's architectural name (numbered registers without their number).
    pub const fn name(self) -> &'static str {
        match self {
            Self::Bvr(_) => "DBGBVR<n>_EL1",
            Self::Bcr(_) => "DBGBCR<n>_EL1",
            Self::Wvr(_) => "DBGWVR<n>_EL1",
            Self::Wcr(_) => "DBGWCR<n>_EL1",
            Self::Mdscr => "MDSCR_EL1",
            Self::Mdccint => "MDCCINT_EL1",
            Self::Oseccr => "OSECCR_EL1",
            Self::Osdtrrx => "OSDTRRX_EL1",
            Self::Osdtrtx => "OSDTRTX_EL1",
            Self::Mdrar => "MDRAR_EL1",
            Self::Oslar => "OSLAR_EL1",
            Self::Oslsr => "OSLSR_EL1",
            Self::Osdlr => "OSDLR_EL1",
            Self::Dbgprcr => "DBGPRCR_EL1",
            Self::Claimset => "DBGCLAIMSET_EL1",
            Self::Claimclr => "DBGCLAIMCLR_EL1",
            Self::Authstatus => "DBGAUTHSTATUS_EL1",
            Self::Mdccsr => "MDCCSR_EL0",
            Self::Dbgdtr => "DBGDTR_EL0",
            Self::Dbgdtrrxtx => "DBGDTRRX/TX_EL0",
        }
    }
}

/// OSLSR_EL1.OSLM = 0b10 (OS lock implemented; bit 3 set, bit 0 clear) and OSLK, bit 1.
const OSLSR_OSLM: u64 = 1 << 3;
const OSLSR_OSLK: u64 = 1 << 1;
/// The guest's view of the debug registers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GuestDebug {
    pub bvr: [u64; SLOTS],
    pub bcr: [u64; SLOTS],
    pub wvr: [u64; SLOTS],
    pub wcr: [u64; SLOTS],
    pub mdscr: u64,
    pub mdccint: u64,
    pub oseccr: u64,
    /// The OS Lock as the guest set it (set at reset, as on the hardware).
    pub os_lock: bool,
    /// OSDLR_EL1.DLK: the OS Double Lock as the guest set it.
    pub double_lock: bool,
    pub dbgprcr: u64,
    pub claim: u64,
}

impl Default for GuestDebug {
    fn default() -> Self {
        Self {
            bvr: [0; SLOTS],
            bcr: [0; SLOTS],
            wvr: [0; SLOTS],
            wcr: [0; SLOTS],
            mdscr: 0,
            mdccint: 0,
            oseccr: 0,
            os_lock: true,
            double_lock: false,
            dbgprcr: 0,
            claim: 0,
        }
    }
}

impl GuestDebug {
    /// What a guest MRS of `reg` returns.
    pub fn read(&self, reg: DebugReg) -> u64 {
        let slot = |a: &[u64; SLOTS], n: u8| a.get(n as usize).copied().unwrap_or(0);
        match reg {
            DebugReg::Bvr(n) => slot(&self.bvr, n),
            DebugReg::Bcr(n) => slot(&self.bcr, n),
            DebugReg::Wvr(n) => slot(&self.wvr, n),
            DebugReg::Wcr(n) => slot(&self.wcr, n),
            DebugReg::Mdscr => self.mdscr,
            DebugReg::Mdccint => self.mdccint,
            DebugReg::Oseccr => self.oseccr,
            DebugReg::Oslsr => OSLSR_OSLM | if self.os_lock { OSLSR_OSLK } else { 0 },
            DebugReg::Osdlr => self.double_lock as u64,
            DebugReg::Dbgprcr => self.dbgprcr,
            DebugReg::Claimset | DebugReg::Claimclr => self.claim,
            // No debug ROM, no debug communications channel, no external debugger: RAZ.
            DebugReg::Mdrar
            | DebugReg::Authstatus
            | DebugReg::Mdccsr
            | DebugReg::Dbgdtr
            | DebugReg::Dbgdtrrxtx
            | DebugReg::Osdtrrx
            | DebugReg::Osdtrtx
            | DebugReg::Oslar => 0,
        }
    }

    /// A guest MSR of `value` to `reg`.
    pub fn write(&mut self, reg: DebugReg, value: u64) {
        let slot = |a: &mut [u64; SLOTS], n: u8| {
            if let Some(s) = a.get_mut(n as usize) {
                *s = value;
            }
        };
        match reg {
            DebugReg::Bvr(n) => slot(&mut self.bvr, n),
            DebugReg::Bcr(n) => slot(&mut self.bcr, n),
            DebugReg::Wvr(n) => slot(&mut self.wvr, n),
            DebugReg::Wcr(n) => slot(&mut self.wcr, n),
            DebugReg::Mdscr => self.mdscr = value,
            DebugReg::Mdccint => self.mdccint = value,
            DebugReg::Oseccr => self.oseccr = value,
            // OSLAR_EL1.OSLK, bit 0.
            DebugReg::Oslar => self.os_lock = value & 1 != 0,
            DebugReg::Osdlr => self.double_lock = value & 1 != 0,
            DebugReg::Dbgprcr => self.dbgprcr = value & 1,
            DebugReg::Claimset => self.claim |= value & 0xff,
            DebugReg::Claimclr => self.claim &= !(value & 0xff),
            // Read-only or absent: writes are ignored.
            DebugReg::Mdrar
            | DebugReg::Oslsr
            | DebugReg::Authstatus
            | DebugReg::Mdccsr
            | DebugReg::Dbgdtr
            | DebugReg::Dbgdtrrxtx
            | DebugReg::Osdtrrx
            | DebugReg::Osdtrtx => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iss(op1: u8, crn: u8, crm: u8, op2: u8) -> SysRegIss {
        SysRegIss::write_of(2, op1, crn, crm, op2)
    }

    #[test]
    fn decodes_the_lock_and_breakpoint_registers() {
        assert_eq!(DebugReg::from_iss(iss(0, 1, 0, 4)), Some(DebugReg::Oslar));
        assert_eq!(DebugReg::from_iss(iss(0, 1, 3, 4)), Some(DebugReg::Osdlr));
        assert_eq!(DebugReg::from_iss(iss(0, 0, 2, 2)), Some(DebugReg::Mdscr));
        assert_eq!(DebugReg::from_iss(iss(0, 0, 5, 5)), Some(DebugReg::Bcr(5)));
        assert_eq!(
            DebugReg::from_iss(iss(0, 0, 15, 4)),
            Some(DebugReg::Bvr(15))
        );
        assert_eq!(DebugReg::from_iss(iss(0, 0, 3, 7)), Some(DebugReg::Wcr(3)));
        let not_debug = SysRegIss {
            op0: 3,
            ..iss(0, 1, 0, 0)
        };
        assert_eq!(DebugReg::from_iss(not_debug), None);
    }

    #[test]
    fn shadow_reads_back_what_was_written_and_tracks_the_locks() {
        let mut d = GuestDebug::default();
        // Reset state: OS Lock set, as OSLSR_EL1 = 0xa on the hardware.
        assert_eq!(d.read(DebugReg::Oslsr), 0xa);
        d.write(DebugReg::Oslar, 0);
        assert_eq!(d.read(DebugReg::Oslsr), 0x8);
        d.write(DebugReg::Osdlr, 1);
        assert_eq!(d.read(DebugReg::Osdlr), 1);
        d.write(DebugReg::Bvr(2), 0x4000_1000);
        d.write(DebugReg::Bcr(2), 0x1e7);
        assert_eq!(d.read(DebugReg::Bvr(2)), 0x4000_1000);
        // Out-of-range slots are ignored, not a panic.
        d.write(DebugReg::Bcr(40), 1);
        assert_eq!(d.read(DebugReg::Bcr(40)), 0);
        d.write(DebugReg::Claimset, 0x3);
        d.write(DebugReg::Claimclr, 0x1);
        assert_eq!(d.read(DebugReg::Claimset), 0x2);
    }
}
