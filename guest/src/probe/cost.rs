//! The cost phases: a baseline loop `1: subs x10, x10, #1; b.ne 1b` run `COST_N` times,
//! and the same loop with the measured operation in front of `subs`. Every phase is one asm
//! block from PHASE_BEGIN to PHASE_END with the same framing, so the host takes the cost of
//! one operation as (EL1 cycles of the phase − EL1 cycles of the baseline) / operations:
//! under QEMU's `-icount shift=0`, one cycle per instruction, so an operation of k
//! instructions costs exactly k.

use crate::hvc::{PHASE_END_HI, PHASE_END_LO, phase_end_call};
use mtex_abi::hypercall::PHASE_BEGIN;

/// Iterations of each loop.
pub const COST_N: u64 = 1000;

/// One cost phase: the PHASE_END result and the passes the hypervisor still wants.
type Phase = fn(u32, &[u64; 4], u64, u64, u64) -> (u64, u64);

macro_rules! cost_loop {
    ($fn:ident: $($op:literal),*) => {
        /// Phase `id`: `n` iterations with x9 = `ptr` (a Tagged page the probe owns).
        fn $fn(id: u32, name: &[u64; 4], flags: u64, n: u64, ptr: u64) -> (u64, u64) {
            let (end, more): (u64, u64);
            // SAFETY: the operations write only allocation tags and data of the cost page
            // (memory.rs, used by nothing else) and PSTATE.TCO, which they leave clear, or
            // read TFSR_EL1; the HVCs are mtex calls that change only x0 and x1.
            unsafe {
                core::arch::asm!(
                    ".arch_extension memtag",
                    "hvc #0",
                    "1:",
                    $($op,)*
                    "subs x10, x10, #1",
                    "b.ne 1b",
                    phase_end_call!(),
                    end_lo = const PHASE_END_LO,
                    end_hi = const PHASE_END_HI,
                    inout("x0") PHASE_BEGIN as u64 => end,
                    inout("x1") id as u64 => more,
                    in("x2") name[0],
                    in("x3") name[1],
                    in("x4") name[2],
                    in("x5") name[3],
                    in("x6") flags,
                    in("x9") ptr,
                    inout("x10") n => _,
                    out("x12") _,
                    in("x15") id as u64,
                )
            };
            (end, more)
        }
    };
}

cost_loop!(baseline:);
cost_loop!(tco_write: "msr tco, #1", "msr tco, #0");
cost_loop!(tfsr_read: "dsb nsh", "mrs x12, tfsr_el1", "isb");
cost_loop!(stg: "stg x9, [x9]");
cost_loop!(st2g: "st2g x9, [x9]");
cost_loop!(dc_gzva: "dc gzva, x9");

/// The cost phases: what the host calls each (phase `cost/<what>`), the loop, and the
/// operations per iteration.
pub const PHASES: [(&str, Phase, u64); 6] = [
    ("baseline", baseline, 0),
    ("tco-write", tco_write, 2),
    ("tfsr-read", tfsr_read, 1),
    ("stg", stg, 1),
    ("st2g", st2g, 1),
    ("dc-gzva", dc_gzva, 1),
];

/// DCZID_EL0.DZP: DC ZVA and DC GZVA are prohibited.
pub fn zva_prohibited() -> bool {
    let dczid: u64;
    // SAFETY: reading DCZID_EL0 has no side effects.
    unsafe { core::arch::asm!("mrs {}, dczid_el0", out(reg) dczid) };
    dczid & (1 << 4) != 0
}
