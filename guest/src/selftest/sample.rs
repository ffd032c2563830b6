//! A guest that behaves differently while it is traced, and so inside a sampled phase's
//! units only: each iteration tries one exclusive store, with a load between the two whose
//! address it computes from the loaded value — a sequence no breakpoint run carries, so the
//! engine steps it and the store fails (every step's exception return clears the monitor).
//! Only when the store succeeds, as untraced it does, does it make a second tagged load. An
//! estimate from the units is of the traced behaviour: the report must say it is an estimate
//! from units, and claim nothing exact.

use crate::hvc;
use crate::hvc::phase_asm;

/// Iterations: enough instructions for a few hundred short units.
const ITERATIONS: u64 = 20_000;

pub fn run(tagged: u64) -> u64 {
    let r = phase_asm!(
        id: 1, name: "tell-when-traced", traced: true,
        before: [],
        body: [
            "1: ldxr x12, [x9]",
            "add x14, x9, x12, lsr #63",
            "ldr x11, [x14]",
            "stxr w13, x12, [x9]",
            "cbnz w13, 2f",
            "ldr x16, [x9]",
            "2: subs x10, x10, #1",
            "b.ne 1b",
        ],
        in("x9") tagged,
        inout("x10") ITERATIONS => _,
        out("x12") _,
        out("x13") _,
        out("x14") _,
        out("x11") _,
        out("x16") _,
    );
    if r != 0 {
        return 6;
    }
    hvc::exit(0)
}
