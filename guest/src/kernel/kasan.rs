//! Tag operations of the KASAN-HW-tags-like mode: a random tag from IRG on allocation (the
//! kernel's GCR_EL1 excludes 0xE and 0xF, as Linux's KASAN_TAG_MIN..KASAN_TAG_MAX), one STG per
//! 16-byte granule, and the poison tag 0xE (KASAN_TAG_INVALID) on free.

use core::arch::asm;

/// GCR_EL1 while the kernel runs with KASAN: tags 0x0..=0xD, RRND = 0 (RGSR_EL1 seeds IRG, so
/// runs repeat exactly).
pub const GCR_KERNEL: u64 =
    ((1 << TAG_INVALID) | (1 << 0xf)) & mtex_arch::mte_bits::gcr::EXCLUDE_MASK;
/// The poison tag.
pub const TAG_INVALID: u64 = 0xe;

/// `p` with a random tag (IRG, excluding what GCR_EL1 excludes).
pub fn random_tag(p: u64) -> u64 {
    let out: u64;
    // SAFETY: IRG only computes a register value.
    unsafe { asm!(".arch_extension memtag", "irg {o}, {p}", o = out(reg) out, p = in(reg) p) };
    out
}

/// `p` with tag `tag`.
pub const fn with_tag(p: u64, tag: u64) -> u64 {
    mtex_arch::mte_bits::with_tag(p, tag)
}

/// Sets the allocation tag of `[p, p + len)` to `p`'s tag: one STG per granule.
///
/// # Safety
/// The range must be kernel memory the caller owns, Tagged, `len` a non-zero multiple of 16.
pub unsafe fn set_tags(p: u64, len: u64) {
    // SAFETY: the caller owns the range; STG writes allocation tags only.
    unsafe {
        asm!(
            ".arch_extension memtag",
            "1: stg {p}, [{p}], #16",
            "subs {n}, {n}, #16",
            "b.ne 1b",
            p = inout(reg) p => _,
            n = inout(reg) len => _,
            options(nostack),
        )
    };
}

/// Zeroes `[p, p + len)` through `p` (len a non-zero multiple of 16).
///
/// # Safety
/// The range must be memory the caller owns, and `p`'s tag must match it (or be match-all).
pub unsafe fn zero(p: u64, len: u64) {
    // SAFETY: the caller owns the range.
    unsafe {
        asm!(
            "1: stp xzr, xzr, [{p}], #16",
            "subs {n}, {n}, #16",
            "b.ne 1b",
            p = inout(reg) p => _,
            n = inout(reg) len => _,
            options(nostack),
        )
    };
}
