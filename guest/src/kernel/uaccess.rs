//! Kernel access to user memory with the unprivileged LDTR/STTR, as Linux's copy routines
//! and get_user/put_user do: the accesses are checked as EL0's (TCF0, TCMA0), and only
//! while PSTATE.TCO is clear. copy_{to,from}_user and get_user/put_user do not open a
//! user_access_begin/end section (Will Deacon's point in the TCO-deferral patch's thread); the
//! `unsafe_get_user` path is used inside one.

use super::layout::USER_TOP;
use core::arch::asm;

/// The user address without its tag is below the top of user space.
pub fn access_ok(uaddr: u64, len: u64) -> bool {
    let a = uaddr & !mtex_arch::mte_bits::TOP_BYTE_MASK;
    a < USER_TOP && len <= USER_TOP - a
}

/// unsafe_get_user of a u32, inside a user_access_begin/end section.
///
/// # Safety
/// `uaddr` must pass [`access_ok`] and be mapped in the current task's address space.
pub unsafe fn unsafe_get_user_u32(uaddr: u64) -> u32 {
    let v: u32;
    // SAFETY: an unprivileged load of user memory the caller checked.
    unsafe { asm!("ldtr {v:w}, [{a}]", v = out(reg) v, a = in(reg) uaddr, options(nostack)) };
    v
}

/// copy_from_user of `n` bytes (a non-zero multiple of 8): one LDTR and one STR per 8 bytes.
/// Out of line, as Linux's `__arch_copy_from_user` is: a profile names it as the function
/// that makes the kernel's checked user reads.
///
/// # Safety
/// The user range must pass [`access_ok`] and be mapped; `kdst` must be `n` kernel bytes.
#[inline(never)]
pub unsafe fn copy_from_user(kdst: u64, usrc: u64, n: u64) {
    // SAFETY: the caller checked both ranges.
    unsafe {
        asm!(
            "1: ldtr {t}, [{s}]",
            "add {s}, {s}, #8",
            "str {t}, [{d}], #8",
            "subs {n}, {n}, #8",
            "b.ne 1b",
            t = out(reg) _,
            s = inout(reg) usrc => _,
            d = inout(reg) kdst => _,
            n = inout(reg) n => _,
            options(nostack),
        )
    };
}

/// copy_to_user of `n` bytes (a non-zero multiple of 8): one LDR and one STTR per 8 bytes.
///
/// # Safety
/// As [`copy_from_user`].
#[inline(never)]
pub unsafe fn copy_to_user(udst: u64, ksrc: u64, n: u64) {
    // SAFETY: the caller checked both ranges.
    unsafe {
        asm!(
            "1: ldr {t}, [{s}], #8",
            "sttr {t}, [{d}]",
            "add {d}, {d}, #8",
            "subs {n}, {n}, #8",
            "b.ne 1b",
            t = out(reg) _,
            s = inout(reg) ksrc => _,
            d = inout(reg) udst => _,
            n = inout(reg) n => _,
            options(nostack),
        )
    };
}
