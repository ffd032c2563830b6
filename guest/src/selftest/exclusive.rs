//! One LDXR/STXR pair per loop iteration, its status ignored (a counter bumped without a
//! retry): not a retry loop, so the trace must follow it to its end. Under single-step every
//! ERET may clear the exclusive monitor, so its store-exclusives may fail — and a failed one
//! makes no access and must not be counted as a write.

use super::begin_args;
use crate::hvc;
use mtex_abi::program::HOSTILE_N;

pub fn run(tagged: u64) -> u64 {
    let (x0, x1, name, flags) = begin_args(1, "exclusive-pairs");
    let r: u64;
    // SAFETY: exclusive loads and stores to the guest's own tagged granule; the HVCs are
    // mtex calls that change only x0.
    unsafe {
        core::arch::asm!(
            "hvc #0",
            "1: ldxr x12, [x9]",
            "add x12, x12, #1",
            "stxr w13, x12, [x9]",
            "subs x10, x10, #1",
            "b.ne 1b",
            crate::hvc::phase_end_call!(),
            end_lo = const crate::hvc::PHASE_END_LO,
            end_hi = const crate::hvc::PHASE_END_HI,
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
            out("x13") _,
            in("x15") 1u64,
        )
    };
    if r != 0 {
        return 6;
    }
    hvc::exit(0)
}
