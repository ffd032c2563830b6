//! The guest aliases its exception vector onto a traced load, so that by the old inference
//! ("landed on a VBAR_EL1 vector with ELR_EL1 at the instruction") every load looks like an
//! exception taken instead of completing: VBAR_EL1 points 0x1fc bytes before the loop's
//! load, so the load's fall-through is VBAR_EL1 + 0x200 (the current-EL synchronous vector),
//! and ELR_EL1 holds the load's address. No exception is ever taken: every load completes.

use crate::hvc;
use crate::hvc::begin_args;
use core::arch::global_asm;
use mtex_abi::program::HOSTILE_N;

global_asm!(
    ".pushsection .text.mtex_alias_vector, \"ax\"",
    ".balign 2048",
    ".global mtex_alias_vector",
    "mtex_alias_vector:",
    // Entered by BLR with the PHASE_BEGIN arguments in x0..x6, x9 = tagged pointer,
    // x10 = n, x15 = phase id.
    "hvc #0",
    "b 1f",
    ".org mtex_alias_vector + 0x1fc",
    "1: ldr x12, [x9]",
    // VBAR_EL1 + 0x200: the fall-through of the load.
    "subs x10, x10, #1",
    "b.ne 1b",
    "movz x0, #{end_lo}",
    "movk x0, #{end_hi}, lsl #16",
    "mov x1, x15",
    "hvc #0",
    "ret",
    ".popsection",
    end_lo = const crate::hvc::PHASE_END_LO,
    end_hi = const crate::hvc::PHASE_END_HI,
);

unsafe extern "C" {
    static mtex_alias_vector: u8;
}

pub fn run(tagged: u64) -> u64 {
    let base = (&raw const mtex_alias_vector) as u64;
    let (x0, x1, name, flags) = begin_args(1, "aliased-vector");
    let r: u64;
    // SAFETY: points VBAR_EL1 at code that is never entered as a vector (every interrupt is
    // masked and the loop's accesses do not fault), runs it by BLR (it returns with RET, x30
    // intact) and restores VBAR_EL1; the loop only loads from the guest's tagged granule.
    unsafe {
        core::arch::asm!(
            "mrs x20, vbar_el1",
            "msr vbar_el1, x16",
            "add x12, x16, #0x1fc",
            "msr elr_el1, x12",
            "isb",
            "blr x16",
            "msr vbar_el1, x20",
            "isb",
            inout("x0") x0 => r,
            inout("x1") x1 => _,
            in("x2") name[0],
            in("x3") name[1],
            in("x4") name[2],
            in("x5") name[3],
            in("x6") flags,
            in("x9") tagged,
            inout("x10") HOSTILE_N => _,
            out("x12") _,
            in("x15") 1u64,
            in("x16") base,
            out("x20") _,
            out("x30") _,
        )
    };
    if r != 0 {
        return 6;
    }
    hvc::exit(0)
}
