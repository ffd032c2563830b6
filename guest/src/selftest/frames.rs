//! Call stacks the guest tries to fool. One traced phase, begun in the kernel (so what called
//! it is `[unknown]`), calls functions that each load the tagged granule `HOSTILE_N` times:
//!
//! 1. `mtex_hf_plain`, a normal call: the control.
//! 2. `mtex_hf_fp`, called with x29 and the frame record below SP set to garbage, and
//!    zeroing x29 itself: the stacks never read frame pointers, so its stack is the
//!    control's.
//! 3. `mtex_hf_outer` calls `mtex_hf_wrong_ret`, which returns to a place in it other than
//!    the call's return address: `mtex_hf_outer`'s loads there are on `[unknown]` alone
//!    (the frames below a return that matched no call are not trusted, not merely popped).
//! 4. `mtex_hf_deep` recurses 80 deep and its bottom calls `mtex_hf_deep_leaf`: 81 frames, more
//!    than the 64 kept, so the leaf's stack is `[unknown]` and the last 17 frames.
//!
//! Every load completes; the counts are 4 × `HOSTILE_N` checked reads whatever the stacks.

use crate::hvc::begin_args;
use core::arch::global_asm;
use mtex_abi::program::HOSTILE_N;

/// Depth of `mtex_hf_deep`'s recursion (its calls to itself after the first).
const DEEP: u64 = 79;

global_asm!(
    ".pushsection .text.mtex_hostile_frames, \"ax\"",
    ".balign 4",
    // Entered by BLR with the PHASE_BEGIN arguments in x0..x6, x9 = tagged pointer,
    // x10 = n, x15 = phase id, x16 = recursion depth.
    ".global mtex_hf_main",
    ".type mtex_hf_main, %function",
    "mtex_hf_main:",
    "stp x29, x30, [sp, #-16]!",
    "mov x29, sp",
    "mov x22, x29",
    "hvc #0",
    "bl mtex_hf_plain",
    // Garbage frame pointer, and a garbage frame record below SP.
    "movz x29, #0xdead, lsl #16",
    "stp x29, x29, [sp, #-16]!",
    "bl mtex_hf_fp",
    "add sp, sp, #16",
    "mov x29, x22",
    "bl mtex_hf_outer",
    "mov x0, x16",
    "bl mtex_hf_deep",
    "movz x0, #{end_lo}",
    "movk x0, #{end_hi}, lsl #16",
    "mov x1, x15",
    "hvc #0",
    "ldp x29, x30, [sp], #16",
    "ret",
    ".size mtex_hf_main, . - mtex_hf_main",
    //
    ".type mtex_hf_plain, %function",
    "mtex_hf_plain:",
    "mov x11, x10",
    "1: ldr x12, [x9]",
    "subs x11, x11, #1",
    "b.ne 1b",
    "ret",
    ".size mtex_hf_plain, . - mtex_hf_plain",
    //
    ".type mtex_hf_fp, %function",
    "mtex_hf_fp:",
    "mov x29, xzr",
    "mov x11, x10",
    "1: ldr x12, [x9]",
    "subs x11, x11, #1",
    "b.ne 1b",
    "ret",
    ".size mtex_hf_fp, . - mtex_hf_fp",
    //
    ".type mtex_hf_outer, %function",
    "mtex_hf_outer:",
    "stp x29, x30, [sp, #-16]!",
    "mov x29, sp",
    "bl mtex_hf_wrong_ret",
    "udf #1",
    "mtex_hf_landing:",
    "mov x11, x10",
    "1: ldr x12, [x9]",
    "subs x11, x11, #1",
    "b.ne 1b",
    "ldp x29, x30, [sp], #16",
    "ret",
    ".size mtex_hf_outer, . - mtex_hf_outer",
    //
    ".type mtex_hf_wrong_ret, %function",
    "mtex_hf_wrong_ret:",
    "adr x30, mtex_hf_landing",
    "ret",
    ".size mtex_hf_wrong_ret, . - mtex_hf_wrong_ret",
    //
    // x0 = calls to itself still to make.
    ".type mtex_hf_deep, %function",
    "mtex_hf_deep:",
    "stp x29, x30, [sp, #-16]!",
    "mov x29, sp",
    "cbz x0, 2f",
    "sub x0, x0, #1",
    "bl mtex_hf_deep",
    "b 3f",
    "2: bl mtex_hf_deep_leaf",
    "3: ldp x29, x30, [sp], #16",
    "ret",
    ".size mtex_hf_deep, . - mtex_hf_deep",
    //
    ".type mtex_hf_deep_leaf, %function",
    "mtex_hf_deep_leaf:",
    "mov x11, x10",
    "1: ldr x12, [x9]",
    "subs x11, x11, #1",
    "b.ne 1b",
    "ret",
    ".size mtex_hf_deep_leaf, . - mtex_hf_deep_leaf",
    ".popsection",
    end_lo = const crate::hvc::PHASE_END_LO,
    end_hi = const crate::hvc::PHASE_END_HI,
);

unsafe extern "C" {
    static mtex_hf_main: u8;
}

pub fn run(tagged: u64) -> u64 {
    let main = (&raw const mtex_hf_main) as u64;
    let (x0, x1, name, flags) = begin_args(1, "hostile-frames");
    let r: u64;
    // SAFETY: calls the code above by BLR; it saves and restores x29 and x30 on the stack
    // (80 frames of 16 bytes at most), returns with SP as it found it, and only loads from the
    // guest's tagged granule. Every register it writes is declared.
    unsafe {
        core::arch::asm!(
            "blr x17",
            inout("x0") x0 => r,
            inout("x1") x1 => _,
            in("x2") name[0],
            in("x3") name[1],
            in("x4") name[2],
            in("x5") name[3],
            in("x6") flags,
            in("x9") tagged,
            in("x10") HOSTILE_N,
            out("x11") _,
            out("x12") _,
            in("x15") 1u64,
            in("x16") DEEP,
            in("x17") main,
            out("x22") _,
            out("x30") _,
        )
    };
    if r != 0 {
        return 6;
    }
    crate::hvc::exit(0)
}
