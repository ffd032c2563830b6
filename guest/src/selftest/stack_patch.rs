//! The guest rewrites the code a breakpoint run is executing, from inside the run, with a
//! store the step engine counts without its registers: an SP-based store (always Unchecked,
//! so a static instruction of the run's plan) with SP pointed at the next instruction. No
//! stepped store, no IC, no TLBI announces it. Stepped (`mtex.step=plain`), every
//! instruction is read just before it runs and the counts are exact; with breakpoint runs
//! they must be the same: no run may execute a store that reaches its own code.
//!
//! Phase 2 rewrites its code through an alias: a second, writable mapping of the code's
//! physical page at another VA (the window's page entry pointed at the code page), with
//! ordinary checkable stores. Each iteration turns an ADD into a tagged load, runs it, and
//! puts the ADD back: compared by VA, the stores never touch the code.

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

global_asm!(
    ".pushsection .text.mtex_alias_patch, \"ax\"",
    ".balign 4096",
    ".global mtex_alias_body",
    // x9 = tagged pointer, x10 = n, x11 = the site through the alias, w7 = the load,
    // w8 = the add; RET.
    "mtex_alias_body:",
    "1: str w7, [x11]",
    "dsb ish",
    "isb",
    ".global mtex_alias_site",
    "mtex_alias_site:",
    "add x12, x12, #0",
    "str w8, [x11]",
    "dsb ish",
    "isb",
    "subs x10, x10, #1",
    "b.ne 1b",
    "ret",
    ".balign 4096",
    ".global mtex_alias_window",
    "mtex_alias_window:",
    ".space 4096",
    ".popsection",
);

unsafe extern "C" {
    static mtex_stack_patch_body: u8;
    static mtex_stack_patch_site: u8;
    static mtex_alias_body: u8;
    static mtex_alias_site: u8;
    static mtex_alias_window: u8;
}

/// The page whose entry phase 2 points at its code page.
pub fn alias_window() -> usize {
    (&raw const mtex_alias_window) as usize
}

/// `ldr x12, [x9]` and `add x12, x12, #0`.
const LOAD: u32 = 0xf940_012c;
const ADD: u32 = 0x9100_018c;

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
    let (body, site, window) = (
        (&raw const mtex_alias_body) as u64,
        (&raw const mtex_alias_site) as u64,
        alias_window(),
    );
    let Some((pte, old)) = super::remap::page_entry(window) else {
        crate::println!("hostile-stack-patch: no page entry for {window:#x}");
        return 8;
    };
    let to_code = (old & !super::remap::OA_MASK) | (body & super::remap::OA_MASK);
    let tlbi_arg = (super::remap::ASID << 48) | ((window as u64) >> 12);
    // SAFETY: `pte` is the window's own level-3 entry in the live identity map (mmu.rs gives
    // it one), and the window is only ever used here: pointing it at the code page, then
    // invalidating its TLB entry, changes no other mapping.
    unsafe {
        core::arch::asm!(
            "str {to}, [{pte}]",
            "dsb ishst",
            "tlbi vae1, {arg}",
            "dsb ish",
            "isb",
            to = in(reg) to_code,
            pte = in(reg) pte,
            arg = in(reg) tlbi_arg,
        )
    };
    // Each iteration: str, dsb, isb, the load, str, dsb, isb, subs, b.ne; then ret.
    let r = phase_asm!(
        id: 2, name: "alias-patch", traced: true,
        before: [],
        body: [
            "mov x10, x17",
            "blr x16",
        ],
        in("x7") LOAD,
        in("x8") ADD,
        in("x9") tagged,
        out("x10") _,
        in("x11") window as u64 + (site - body),
        out("x12") _,
        in("x16") body,
        in("x17") HOSTILE_N,
        out("x30") _,
    );
    if r != 0 {
        return 6;
    }
    crate::hvc::exit(0)
}
