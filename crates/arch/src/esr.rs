//! ESR_EL2: the syndrome of an exception taken to EL2 (Arm ARM D24.2.40 ESR_EL2).

/// The exception classes the hypervisor distinguishes, from ESR_ELx.EC (bits 31:26).
/// Every other value decodes to [`ExceptionClass::Other`] and is reported, never guessed at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExceptionClass {
    /// 0x00: unknown reason (e.g. an UNDEFINED instruction).
    Unknown,
    /// 0x01: WFI or WFE trapped.
    WfiWfe,
    /// 0x07: FP/SIMD access trapped by CPTR_EL2.
    FpAccess,
    /// 0x16: HVC from AArch64.
    Hvc64,
    /// 0x1D: an SME instruction or register access trapped by CPTR_EL2.TSM (SME is hidden
    /// from the guest).
    SmeAccess,
    /// 0x17: SMC from AArch64 (trapped by HCR_EL2.TSC).
    Smc64,
    /// 0x18: MSR, MRS or System instruction trapped (HCR_EL2.TVM, FEAT_FGT, ...).
    SysRegTrap,
    /// 0x20: instruction abort from a lower EL (stage 2 fault on fetch).
    InstructionAbortLower,
    /// 0x21: instruction abort at EL2 itself.
    InstructionAbortSame,
    /// 0x24: data abort from a lower EL (stage 2 fault on a load or store).
    DataAbortLower,
    /// 0x25: data abort at EL2 itself.
    DataAbortSame,
    /// 0x30: hardware breakpoint from a lower EL.
    BreakpointLower,
    /// 0x32: software step from a lower EL.
    SoftwareStepLower,
    /// 0x3c: BRK instruction.
    Brk64,
    /// Any class the hypervisor does not handle.
    Other(u8),
}

impl ExceptionClass {
    /// Decodes the 6-bit EC field value.
    pub const fn from_bits(ec: u8) -> Self {
        match ec {
            0x00 => Self::Unknown,
            0x01 => Self::WfiWfe,
            0x07 => Self::FpAccess,
            0x16 => Self::Hvc64,
            0x1d => Self::SmeAccess,
            0x17 => Self::Smc64,
            EC_SYSREG_TRAP => Self::SysRegTrap,
            0x20 => Self::InstructionAbortLower,
            0x21 => Self::InstructionAbortSame,
            0x24 => Self::DataAbortLower,
            0x25 => Self::DataAbortSame,
            0x30 => Self::BreakpointLower,
            0x32 => Self::SoftwareStepLower,
            0x3c => Self::Brk64,
            other => Self::Other(other & 0x3f),
        }
    }

    /// A short human name, as the reports print it.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Unknown => "unknown reason",
            Self::WfiWfe => "WFI/WFE",
            Self::FpAccess => "FP/SIMD access",
            Self::Hvc64 => "HVC",
            Self::SmeAccess => "SME instruction (SME is hidden from the guest)",
            Self::Smc64 => "SMC",
            Self::SysRegTrap => "MSR/MRS trap",
            Self::InstructionAbortLower => "instruction abort from lower EL",
            Self::InstructionAbortSame => "instruction abort at EL2",
            Self::DataAbortLower => "data abort from lower EL",
            Self::DataAbortSame => "data abort at EL2",
            Self::BreakpointLower => "breakpoint",
            Self::SoftwareStepLower => "software step",
            Self::Brk64 => "BRK",
            Self::Other(_) => "unhandled exception class",
        }
    }
}

/// ESR_ELx.EC of a trapped MSR, MRS or System instruction (EC 0x18).
pub const EC_SYSREG_TRAP: u8 = 0x18;

/// ISS.DFSC of a data abort, bits 5:0, and its value for a synchronous Tag Check Fault.
pub const DFSC_MASK: u64 = 0x3f;
pub const DFSC_TAG_CHECK: u64 = 0b01_0001;

/// ESR_ELx.IL, bit 25: the trapped instruction was 32 bits long.
pub const ESR_IL: u64 = 1 << 25;

/// ISS.Rt of EC 0x18, bits 9:5: the general-purpose register transferred.
pub const ISS_RT_MASK: u32 = 0x1f << 5;

/// A raw ESR_EL2 value with typed accessors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Esr(pub u64);

impl Esr {
    /// The 6-bit exception class value.
    pub const fn ec_bits(self) -> u8 {
        ((self.0 >> 26) & 0x3f) as u8
    }

    /// The exception class.
    pub const fn ec(self) -> ExceptionClass {
        ExceptionClass::from_bits(self.ec_bits())
    }

    /// Instruction Length: true for a 32-bit instruction.
    pub const fn il(self) -> bool {
        self.0 & (1 << 25) != 0
    }

    /// The Instruction Specific Syndrome, bits 24:0.
    pub const fn iss(self) -> u32 {
        (self.0 & 0x01ff_ffff) as u32
    }

    /// The immediate of an HVC or SMC (ISS bits 15:0).
    pub const fn imm16(self) -> u16 {
        (self.0 & 0xffff) as u16
    }

    /// The ISS of a trapped MSR/MRS (EC 0x18).
    pub const fn sysreg_iss(self) -> SysRegIss {
        SysRegIss::from_iss(self.iss())
    }

    /// The ISS of a data abort (EC 0x24/0x25).
    pub const fn data_abort_iss(self) -> DataAbortIss {
        DataAbortIss(self.iss())
    }

    /// A synchronous Tag Check Fault: a data abort (from the lower EL or the same one, as
    /// the EL that took it sees them) whose DFSC (ISS bits 5:0) is 0b010001.
    pub const fn is_tag_check_fault(self) -> bool {
        matches!(
            self.ec(),
            ExceptionClass::DataAbortLower | ExceptionClass::DataAbortSame
        ) && self.0 & DFSC_MASK == DFSC_TAG_CHECK
    }

    /// For a Software Step exception (EC 0x32): ISS.ISV, bit 24. It is 1 when an instruction
    /// was stepped and completed; 0 when the step exception was taken from the active-pending
    /// state — the first instruction of an exception handler, entered instead of (or after)
    /// the stepped instruction. The guest cannot forge it, unlike VBAR_EL1 or ELR_EL1.
    pub const fn step_completed_an_instruction(self) -> bool {
        self.0 & (1 << 24) != 0
    }
}

/// ISS of EC 0x18 (Arm ARM D24.2.40, "ISS encoding for an exception from MSR, MRS, or System
/// instruction execution in AArch64 state").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SysRegIss {
    /// Op0, bits 21:20.
    pub op0: u8,
    /// Op2, bits 19:17.
    pub op2: u8,
    /// Op1, bits 16:14.
    pub op1: u8,
    /// CRn, bits 13:10.
    pub crn: u8,
    /// The general-purpose register transferred, bits 9:5 (31 is XZR).
    pub rt: u8,
    /// CRm, bits 4:1.
    pub crm: u8,
    /// Direction, bit 0: true for a read (MRS), false for a write (MSR).
    pub is_read: bool,
}

impl SysRegIss {
    /// Splits a raw ISS into its fields.
    pub const fn from_iss(iss: u32) -> Self {
        Self {
            op0: ((iss >> 20) & 0x3) as u8,
            op2: ((iss >> 17) & 0x7) as u8,
            op1: ((iss >> 14) & 0x7) as u8,
            crn: ((iss >> 10) & 0xf) as u8,
            rt: ((iss >> 5) & 0x1f) as u8,
            crm: ((iss >> 1) & 0xf) as u8,
            is_read: iss & 1 != 0,
        }
    }

    /// A write (MSR) of X0 to the register (op0, op1, CRn, CRm, op2).
    pub const fn write_of(op0: u8, op1: u8, crn: u8, crm: u8, op2: u8) -> Self {
        Self {
            op0,
            op1,
            crn,
            crm,
            op2,
            rt: 0,
            is_read: false,
        }
    }

    /// The register encoding (op0, op1, CRn, CRm, op2) this access names.
    pub const fn encoding(self) -> crate::sysreg::Encoding {
        crate::sysreg::Encoding {
            op0: self.op0,
            op1: self.op1,
            crn: self.crn,
            crm: self.crm,
            op2: self.op2,
        }
    }
}

/// ISS of a data abort (EC 0x24/0x25).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataAbortIss(pub u32);

impl DataAbortIss {
    /// ISV: the syndrome (SAS, SRT, ...) is valid.
    pub const fn isv(self) -> bool {
        self.0 & (1 << 24) != 0
    }

    /// WnR: the access was a write.
    pub const fn is_write(self) -> bool {
        self.0 & (1 << 6) != 0
    }

    /// SAS: the access size in bytes (valid with ISV).
    pub const fn size(self) -> u8 {
        1 << ((self.0 >> 22) & 3)
    }

    /// SF: the register transferred is 64-bit (valid with ISV).
    pub const fn sixty_four(self) -> bool {
        self.0 & (1 << 15) != 0
    }

    /// S1PTW: the fault was on a stage-1 translation table walk, not the access itself.
    pub const fn stage1_walk(self) -> bool {
        self.0 & (1 << 7) != 0
    }

    /// SRT: the register transferred (valid with ISV; 31 is XZR).
    pub const fn register(self) -> u8 {
        ((self.0 >> 16) & 0x1f) as u8
    }

    /// The fault status code, DFSC bits 5:0.
    pub const fn dfsc(self) -> u8 {
        (self.0 & 0x3f) as u8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_classes_from_the_ec_field() {
        assert_eq!(Esr(0x5a00_0000).ec(), ExceptionClass::Hvc64); // EC 0x16
        assert_eq!(Esr(0x5e00_0000).ec(), ExceptionClass::Smc64); // EC 0x17
        assert_eq!(Esr(0x6200_0000).ec(), ExceptionClass::SysRegTrap); // EC 0x18
        assert_eq!(Esr(0x9200_0000).ec(), ExceptionClass::DataAbortLower); // EC 0x24
        assert_eq!(Esr(0xca00_0000).ec(), ExceptionClass::SoftwareStepLower); // EC 0x32
        assert_eq!(Esr(0x2 << 26).ec(), ExceptionClass::Other(0x2));
    }

    #[test]
    fn decodes_a_stage2_abort_of_a_64_bit_store() {
        // `str x19, [x0]` to an unmapped IPA: ISV, SAS = 3 (8 bytes), SRT = 19, SF (X
        // register), WnR, DFSC = translation fault level 1.
        let iss = DataAbortIss((1 << 24) | (3 << 22) | (19 << 16) | (1 << 15) | (1 << 6) | 0x05);
        assert!(iss.isv() && iss.is_write() && iss.sixty_four() && !iss.stage1_walk());
        assert_eq!((iss.size(), iss.register(), iss.dfsc()), (8, 19, 0x05));
        // `ldr w3, [x0]`'s stage-1 walk faulting at stage 2: a W register, S1PTW.
        let walk = DataAbortIss((1 << 24) | (2 << 22) | (3 << 16) | (1 << 7) | 0x05);
        assert!(!walk.sixty_four() && walk.stage1_walk() && !walk.is_write());
    }

    #[test]
    fn decodes_a_trapped_msr_sctlr_el1() {
        // `msr sctlr_el1, x3` trapped: op0=3 op1=0 CRn=1 CRm=0 op2=0, Rt=3, write, IL=1.
        let iss = (3 << 20) | (1 << 10) | (3 << 5);
        let esr = Esr((0x18 << 26) | (1 << 25) | iss);
        let s = esr.sysreg_iss();
        assert!(esr.il());
        assert_eq!(
            (s.op0, s.op1, s.crn, s.crm, s.op2, s.rt),
            (3, 0, 1, 0, 0, 3)
        );
        assert!(!s.is_read);
        assert_eq!(
            crate::SysReg::from_encoding(s.encoding()),
            Some(crate::SysReg::SctlrEl1)
        );
    }

    #[test]
    fn decodes_a_trapped_mrs_tcr_el1() {
        // `mrs x30, tcr_el1`: op0=3 op1=0 CRn=2 CRm=0 op2=2, Rt=30, read.
        let iss = (3 << 20) | (2 << 17) | (2 << 10) | (30 << 5) | 1;
        let s = Esr((0x18 << 26) | iss).sysreg_iss();
        assert!(s.is_read);
        assert_eq!(s.rt, 30);
        assert_eq!(
            crate::SysReg::from_encoding(s.encoding()),
            Some(crate::SysReg::TcrEl1)
        );
    }

    #[test]
    fn a_tag_check_fault_is_a_data_abort_with_its_own_status_code() {
        // EC 0x24 (from EL0, as EL1 sees it) and 0x25 (from EL1), IL set, DFSC 0b010001.
        assert!(Esr(0x9200_0011).is_tag_check_fault());
        assert!(Esr(0x9600_0011).is_tag_check_fault());
        // A translation fault (DFSC 0b000111) is not one, nor an instruction abort or an
        // SVC with the same low bits.
        assert!(!Esr(0x9600_0007).is_tag_check_fault());
        assert!(!Esr(0x8600_0011).is_tag_check_fault());
        assert!(!Esr(0x5600_0011).is_tag_check_fault());
    }

    #[test]
    fn decodes_data_abort_direction_and_status() {
        // Stage-2 translation fault level 3 on a write: DFSC 0b000111, WnR=1.
        let esr = Esr((0x24 << 26) | (1 << 6) | 0x07);
        assert!(esr.data_abort_iss().is_write());
        assert_eq!(esr.data_abort_iss().dfsc(), 0x07);
        assert_eq!(Esr(0x5a00_1234).imm16(), 0x1234);
    }

    #[test]
    fn software_step_isv_tells_a_stepped_instruction_from_an_exception_entry() {
        // EC 0x32, IL, ISV, IFSC 0x22: an instruction was stepped.
        let stepped = Esr((0x32 << 26) | (1 << 25) | (1 << 24) | 0x22);
        assert!(stepped.step_completed_an_instruction());
        // The same from the active-pending state: an exception was taken to EL1.
        let entered = Esr((0x32 << 26) | (1 << 25) | 0x22);
        assert!(!entered.step_completed_an_instruction());
    }
}
