//! One LDXR/STXR pair per loop iteration, its status ignored (a counter bumped without a
//! retry): not a retry loop, so the trace must follow it to its end. Under single-step every
//! ERET may clear the exclusive monitor, so its store-exclusives may fail — and a failed one
//! makes no access and must not be counted as a write.

use crate::hvc;
use crate::hvc::phase_asm;
use mtex_abi::program::HOSTILE_N;

pub fn run(tagged: u64) -> u64 {
    // Exclusive loads and stores to the guest's own tagged granule.
    let r = phase_asm!(
        id: 1, name: "exclusive-pairs", traced: true,
        before: [],
        body: [
            "1: ldxr x12, [x9]",
            "add x12, x12, #1",
            "stxr w13, x12, [x9]",
            "subs x10, x10, #1",
            "b.ne 1b",
        ],
        in("x9") tagged,
        inout("x10") HOSTILE_N => _,
        out("x12") _,
        out("x13") _,
    );
    if r != 0 {
        return 6;
    }
    hvc::exit(0)
}
