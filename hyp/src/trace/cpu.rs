//! What the step engine asks the CPU directly: how many breakpoints it has (runs need
//! `RUN_BREAKPOINTS`), the MTE block sizes of DC GVA/GZVA and STGM/STZGM, the guest's stack
//! pointer, and a guest address's stage-1 translation by AT. Apart from the engine: these are
//! facts about the machine, not the engine's state, and the TCO watch (`tco_watch.rs`) asks
//! them too.

use aarch64_cpu::registers::*;
use mtex_trace::counts::BlockGranules;
use tock_registers::interfaces::{Readable, Writeable};

/// Breakpoints the CPU has (ID_AA64DFR0_EL1.BRPs + 1).
pub fn breakpoints() -> usize {
    ((ID_AA64DFR0_EL1.get() >> 12) & 0xf) as usize + 1
}

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
        dc: (4u64 << (dczid & 0xf)) / 16,
        gm: (4u64 << (gmid & 0xf)) / 16,
    }
}

/// Translates a guest VA through its stage 1 with AT (as EL0 or EL1 would access it) and
/// returns (IPA, PAR_EL1 as AT left it: the memory attribute and shareability). PAR_EL1 is
/// the guest's: it is restored.
pub(crate) fn translate(va: u64, as_el0: bool) -> Option<(u64, u64)> {
    let saved = PAR_EL1.get();
    // SAFETY: AT only writes PAR_EL1, which is restored below; it does not access memory.
    unsafe {
        if as_el0 {
            core::arch::asm!("at s1e0r, {}", "isb", in(reg) va);
        } else {
            core::arch::asm!("at s1e1r, {}", "isb", in(reg) va);
        }
    }
    let par = PAR_EL1.get();
    PAR_EL1.set(saved);
    if par & 1 != 0 {
        return None;
    }
    Some(((par & 0x0000_ffff_ffff_f000) | (va & 0xfff), par))
}

/// The guest's stack pointer: SP_EL1 in EL1h, SP_EL0 in EL1t and EL0 (SPSR_EL2.M[3:0]).
pub(super) fn guest_sp(spsr: u64) -> u64 {
    if spsr & 0xf == 0b0101 {
        SP_EL1.get()
    } else {
        SP_EL0.get()
    }
}
