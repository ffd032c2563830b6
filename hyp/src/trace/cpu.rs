//! What the step engine asks the CPU directly: how many breakpoints it has (runs need
//! `RUN_BREAKPOINTS`), the MTE block sizes of DC GVA/GZVA and STGM/STZGM, the guest's stack
//! pointer, and a guest address's stage-1 translation by AT. Apart from the engine: these are
//! facts about the machine, not the engine's state, and the TCO watch (`tco_watch.rs`) asks
//! them too.

use arm_sysregs::el1::accessors::{read_id_aa64dfr0_el1, read_par_el1, read_sp_el1, write_par_el1};
use arm_sysregs::el1::registers::ParEl1;
use arm_sysregs::el2::registers::SpsrEl2;
use mtex_arch::el2_bits::spsr::M_EL1H;
use mtex_trace::counts::BlockGranules;

/// Breakpoints the CPU has (ID_AA64DFR0_EL1.BRPs + 1).
pub fn breakpoints() -> usize {
    read_id_aa64dfr0_el1().brps() as usize + 1
}

/// DCZID_EL0.BS and GMID_EL1.BS, bits 3:0: log2 of the block size in 4-byte words
/// (arm-sysregs has neither register).
const BS_MASK: u64 = 0xf;

/// PAR_EL1.PA[47:12] of a successful translation: the output page's address.
const PAR_PA: u64 = ParEl1::PA_47_12_MASK << ParEl1::PA_47_12_SHIFT;
const _: () = assert!(PAR_PA == 0x0000_ffff_ffff_f000);

/// 16-byte granules in a DC GVA/GZVA block (DCZID_EL0.BS) and in an STGM/STZGM block
/// (GMID_EL1.BS); each BS is log2 of the block size in words.
pub fn block_granules() -> BlockGranules {
    let (dczid, gmid): (u64, u64);
    // SAFETY: reading DCZID_EL0 and GMID_EL1 (MTE is present) has no side effects.
    // GMID_EL1 is S3_1_C0_C0_4 (the assembler only knows its name with +mte).
    unsafe {
        core::arch::asm!("mrs {}, dczid_el0", "mrs {}, s3_1_c0_c0_4", out(reg) dczid, out(reg) gmid)
    };
    BlockGranules {
        dc: (4u64 << (dczid & BS_MASK)) / 16,
        gm: (4u64 << (gmid & BS_MASK)) / 16,
    }
}

/// Translates a guest VA through its stage 1 with AT (as EL0 or EL1 would access it) and
/// returns (IPA, PAR_EL1 as AT left it: the memory attribute and shareability). PAR_EL1 is
/// the guest's: it is restored.
pub(crate) fn translate(va: u64, as_el0: bool) -> Option<(u64, u64)> {
    let saved = read_par_el1();
    // SAFETY: AT only writes PAR_EL1, which is restored below; it does not access memory.
    unsafe {
        if as_el0 {
            core::arch::asm!("at s1e0r, {}", "isb", in(reg) va);
        } else {
            core::arch::asm!("at s1e1r, {}", "isb", in(reg) va);
        }
    }
    let par = read_par_el1();
    // SAFETY: the guest's PAR_EL1 as it was before the AT above.
    unsafe { write_par_el1(saved) };
    if par.contains(ParEl1::F) {
        return None;
    }
    Some(((par.bits() & PAR_PA) | (va & 0xfff), par.bits()))
}

/// The guest's stack pointer: SP_EL1 in EL1h, SP_EL0 in EL1t and EL0 (SPSR_EL2.M[3:0]).
pub(super) fn guest_sp(spsr: u64) -> u64 {
    if SpsrEl2::from_bits_retain(spsr).m_3_0() == M_EL1H {
        read_sp_el1().bits()
    } else {
        let sp_el0: u64;
        // SAFETY: reading SP_EL0 (arm-sysregs has no accessor for it) has no side effects.
        unsafe {
            core::arch::asm!("mrs {}, sp_el0", out(reg) sp_el0, options(nomem, nostack));
        }
        sp_el0
    }
}
