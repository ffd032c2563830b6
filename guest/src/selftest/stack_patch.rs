//! The guest rewrites the code a breakpoint run is executing, from inside the run, with a
//! store the step engine counts without its registers: an SP-based store (always Unchecked,
//! so a static instruction of the run's plan) with SP pointed at the next instruction. No
//! stepped store, no IC, no TLBI announces it. Stepped (`mtex.step=plain`), every
//! instruction is read just before it runs and the counts are exact; with breakpoint runs
//! they must be the same: no run may execute a store that reaches its own code.

use crate::hvc::phase_asm;
use core::arch::global_asm;
use mtex_abi::program::HOSTILE_N;

global_asm!(
    ".pushsection .text.mtex_stack_patch_body, \"ax\"",
    ".balign 16",
    ".global mtex_stack_patch_body",
    // x9 = tagged pointer, x10 = n, x11 = the site, w18 = the word stored there; RET.
    "mtex_stack_patch_body:",
    "1: ldr x12, [x9]",
    "mov x14, sp",
    "mov sp, x11",
    "str w18, [sp]",
    "mov sp, x14",
    "b 2f",
    ".balign 16",
    ".global mtex_stack_patch_site",
    "mtex_stack_patch_site:",
    "2: add x13, x13, #1",
    "add x13, x13, #1",
    "subs x10, x10, #1",
    "b.ne 1b",
    "ret",
    ".popsection",
);

unsafe extern "C" {
    static mtex_stack_patch_body: u8;
    static mtex_stack_patch_site: u8;
}

/// `b .+8`: over the second add.
const BRANCH_OVER_ONE: u32 = 0x1400_0002;

pub fn run(tagged: u64) -> u64 {
    let body = (&raw const mtex_stack_patch_body) as u64;
    let site = (&raw const mtex_stack_patch_site) as u64;
    // The first iteration's store turns `add` into `b .+8`; every later one stores the same
    // word again. The loop body: ldr, 4 moves and stores, b, then b (patched) or add, add,
    // then subs, b.ne.
    let r = phase_asm!(
        id: 1, name: "stack-patch", traced: true,
        before: [],
        body: [
            "mov x10, x17",
            "blr x16",
        ],
        in("x9") tagged,
        out("x10") _,
        in("x11") site,
        out("x12") _,
        out("x13") _,
        out("x14") _,
        in("x16") body,
        in("x17") HOSTILE_N,
        in("x18") BRANCH_OVER_ONE,
        out("x30") _,
    );
    if r != 0 {
        return 6;
    }
    crate::hvc::exit(0)
}
