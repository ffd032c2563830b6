//! The debug registers belong to the step engine; the guest gets a shadow of them.
//!
//! MDCR_EL2.TDA/TDOSA/TDRA trap every guest access to the debug registers and the OS locks
//! for the whole run (with TDE set, in traced phases, the architecture traps them anyway).
//! Writes go to `mtex_arch::GuestDebug` and are reported; reads return the shadow. So a guest
//! that sets the OS Double Lock or plants its own breakpoint cannot stop or confuse
//! single-stepping, and a traced phase starts from debug state the hypervisor set.

use arm_sysregs::el1::accessors::write_mdscr_el1;
use arm_sysregs::el1::registers::MdscrEl1;
use arm_sysregs::el2::accessors::{read_mdcr_el2, write_mdcr_el2};
use arm_sysregs::el2::registers::MdcrEl2;
use mtex_arch::el2_bits::{dbgbcr, osdlr, oslsr};

/// Clears the OS locks (the OS Lock is set at reset and blocks debug exceptions), starts with
/// no debug events enabled, and traps the guest's debug-register accesses.
pub fn init() {
    // SAFETY: OSLAR_EL1 and OSDLR_EL1 only control the OS Lock and the OS Double Lock
    // (arm-sysregs has no accessor for either).
    unsafe {
        core::arch::asm!("msr oslar_el1, xzr", options(nomem, nostack));
        core::arch::asm!("msr osdlr_el1, xzr");
    }
    write_mdscr_el1(MdscrEl1::empty());
    write_mdcr_el2(read_mdcr_el2() | MdcrEl2::TDA | MdcrEl2::TDOSA | MdcrEl2::TDRA);
    aarch64_cpu::asm::barrier::isb(aarch64_cpu::asm::barrier::SY);
}

/// Makes sure neither OS lock is set before single-stepping starts; true if one was (which
/// the traps should make impossible: the caller reports it).
pub fn unlock_for_step() -> bool {
    let (oslsr, osdlr): (u64, u64);
    // SAFETY: reading OSLSR_EL1 and OSDLR_EL1 has no side effects.
    unsafe {
        core::arch::asm!("mrs {}, oslsr_el1", "mrs {}, osdlr_el1", out(reg) oslsr, out(reg) osdlr)
    };
    let locked = oslsr & oslsr::OSLK != 0 || osdlr & osdlr::DLK != 0;
    if locked {
        init();
    }
    locked
}

/// DBGBCR<n>_EL1: enabled, all byte lanes, EL1 and EL0 (PMC = 0b11), address match.
pub const BCR_ENABLED: u64 = dbgbcr::BAS_ALL | dbgbcr::PMC_EL1_EL0 | dbgbcr::E;
const _: () = assert!(BCR_ENABLED == (0b1111 << 5) | (0b11 << 1) | 1);
/// Breakpoints [`set_breakpoint`] reaches (the architecture's minimum is 2, QEMU has 6).
pub const BREAKPOINTS_USED: usize = 6;

/// Sets breakpoint `n` (value and control). arm-sysregs has no accessors for the numbered
/// debug registers, and MSR needs the register number in the instruction. Callers keep `n`
/// below `crate::trace::breakpoints()`: a breakpoint the CPU lacks is UNDEFINED to write.
pub fn set_breakpoint(n: usize, addr: u64, control: u64) {
    macro_rules! bp {
        ($bvr:literal, $bcr:literal) => {
            // SAFETY: DBGBVR/DBGBCR only configure debug events, routed to EL2 (TDE); the
            // guest's own breakpoint registers are a shadow (above), never these; callers keep
            // `n` below the CPU's number of breakpoints.
            unsafe {
                core::arch::asm!(
                    concat!("msr ", $bvr, ", {a}"),
                    concat!("msr ", $bcr, ", {c}"),
                    a = in(reg) addr,
                    c = in(reg) control,
                )
            }
        };
    }
    match n {
        0 => bp!("dbgbvr0_el1", "dbgbcr0_el1"),
        1 => bp!("dbgbvr1_el1", "dbgbcr1_el1"),
        2 => bp!("dbgbvr2_el1", "dbgbcr2_el1"),
        3 => bp!("dbgbvr3_el1", "dbgbcr3_el1"),
        4 => bp!("dbgbvr4_el1", "dbgbcr4_el1"),
        5 => bp!("dbgbvr5_el1", "dbgbcr5_el1"),
        _ => {}
    }
}
