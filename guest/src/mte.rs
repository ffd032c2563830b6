//! MTE instructions the programs use. The assembler needs `.arch_extension memtag`.

use mtex_arch::mte_bits::{tag_of, with_tag};

/// A 16-byte granule only ever accessed through a tagged pointer.
#[repr(C, align(16))]
pub struct Granule(pub [u8; 16]);

/// Tags `g` with tag 3 (ADDG from the untagged address), reads the tag back with LDG and
/// loads through the tagged pointer. Returns (pointer tag, tag read back). With tag checking
/// on, the load is checked and matches.
pub fn tagged_access(g: &mut Granule) -> (u64, u64) {
    let base = g as *mut Granule as u64;
    let (tagged, loaded_tag): (u64, u64);
    // SAFETY: STG/LDG/LDR touch only the granule `g`, which the caller owns; the memory is
    // Tagged Normal (see mmu.rs) and SCTLR_EL1.ATA is set by the phase that calls this.
    unsafe {
        core::arch::asm!(
            ".arch_extension memtag",
            "addg {p}, {b}, #0, #3",
            "stg {p}, [{p}]",
            "mov {t}, {b}",
            "ldg {t}, [{p}]",
            "ldr {v}, [{p}]",
            b = in(reg) base,
            p = out(reg) tagged,
            t = out(reg) loaded_tag,
            v = out(reg) _,
        )
    };
    (tag_of(tagged), tag_of(loaded_tag))
}

/// Sets or clears PSTATE.TCO (`msr tco, #imm`; never traps).
pub fn set_tco(on: bool) {
    // SAFETY: TCO only changes whether tag checks happen; no memory is touched.
    unsafe {
        if on {
            core::arch::asm!(".arch_extension memtag", "msr tco, #1");
        } else {
            core::arch::asm!(".arch_extension memtag", "msr tco, #0");
        }
    }
}

/// Tags the 16-byte granules of `[addr, addr + len)` with `tag` (STG through a pointer
/// carrying the tag); returns the tagged pointer to `addr`.
pub fn tag_range(addr: u64, len: u64, tag: u64) -> u64 {
    let tagged = with_tag(addr, tag);
    let mut p = tagged;
    while p < tagged + len {
        // SAFETY: STG writes only the allocation tag of the granule at `p`, inside the range
        // the caller owns; the page is Tagged and SCTLR_EL1.ATA is set by the caller.
        unsafe { core::arch::asm!(".arch_extension memtag", "stg {p}, [{p}]", p = in(reg) p) };
        p += 16;
    }
    tagged
}

/// Bytes DC ZVA zeroes (DCZID_EL0.BS: log2 of the block size in words).
pub fn zva_block_bytes() -> u64 {
    let dczid: u64;
    // SAFETY: reading DCZID_EL0 has no side effects.
    unsafe { core::arch::asm!("mrs {}, dczid_el0", out(reg) dczid) };
    4 << (dczid & 0xf)
}
