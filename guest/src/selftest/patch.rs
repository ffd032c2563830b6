//! The guest rewrites its own code while it is traced, as Linux's alternatives, jump labels
//! and ftrace do — here with a plain store, DSB and ISB, as a CPU with CTR_EL0.DIC permits
//! (no IC the step engine could notice). A loop with a long inert stretch (worth a breakpoint
//! run under `mtex.runs=1`) runs; then the stretch's first instruction becomes a branch over
//! it and the loop runs again; then it is put back and runs a third time, all in one traced
//! phase. A run planned for the old code must not be reused for the new.

use crate::hvc;
use crate::hvc::phase_asm;
use core::arch::global_asm;
use mtex_abi::program::HOSTILE_N;

global_asm!(
    ".pushsection .text.mtex_patch_body, \"ax\"",
    ".balign 4",
    ".global mtex_patch_body",
    // x9 = tagged pointer, x10 = n; returns with RET.
    "mtex_patch_body:",
    "1: ldr x12, [x9]",
    ".global mtex_patch_site",
    "mtex_patch_site:",
    "add x13, x13, #1",
    "add x13, x13, #1",
    "add x13, x13, #1",
    "add x13, x13, #1",
    "add x13, x13, #1",
    "add x13, x13, #1",
    "add x13, x13, #1",
    "add x13, x13, #1",
    "subs x10, x10, #1",
    "b.ne 1b",
    "ret",
    ".popsection",
);

unsafe extern "C" {
    static mtex_patch_body: u8;
    static mtex_patch_site: u8;
}

/// `b .+32`: over the eight adds, to the `subs`.
const BRANCH_OVER: u32 = 0x1400_0008;
/// `add x13, x13, #1`.
const ADD: u32 = 0x9100_05ad;

pub fn run(tagged: u64) -> u64 {
    let body = (&raw const mtex_patch_body) as u64;
    let site = (&raw const mtex_patch_site) as u64;
    // Runs the loop above by BLR three times, rewriting one of its instructions (in the
    // guest's own RWX image, not executing meanwhile) between the runs and putting it back;
    // the loop only loads from the guest's tagged granule and counts in x13.
    let r = phase_asm!(
        id: 1, name: "patched-in-phase", traced: true,
        before: [],
        body: [
            "mov x10, x17",
            "blr x16",
            "str w18, [x14]",
            "dsb ish",
            "isb",
            "mov x10, x17",
            "blr x16",
            "str w20, [x14]",
            "dsb ish",
            "isb",
            "mov x10, x17",
            "blr x16",
        ],
        in("x9") tagged,
        out("x10") _,
        out("x12") _,
        out("x13") _,
        in("x14") site,
        in("x16") body,
        in("x17") HOSTILE_N,
        in("x18") BRANCH_OVER,
        in("x20") ADD,
        out("x30") _,
    );
    if r != 0 {
        return 6;
    }
    hvc::exit(0)
}
