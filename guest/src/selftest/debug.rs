//! The guest takes the debug registers: the OS Double Lock and the OS Lock set before a
//! traced phase (which stop software step on silicon; QEMU honours the Double Lock), and its
//! own hardware breakpoint, enabled with MDSCR_EL1.MDE/KDE, on an instruction inside the
//! traced phase (which EL2 would take as a step and loop on).

use super::begin_args;
use crate::hvc;
use mtex_abi::program::HOSTILE_N;

/// DBGBCR<n>_EL1: enabled, all byte lanes, EL1 and EL0 (PMC = 0b11), address match.
const BCR_ENABLED: u64 = (0b1111 << 5) | (0b11 << 1) | 1;
/// MDSCR_EL1.MDE (bit 15) and KDE (bit 13).
const MDSCR_MDE_KDE: u64 = (1 << 15) | (1 << 13);

pub fn run(tagged: u64) -> u64 {
    // Phase 1: both OS locks set, then HOSTILE_N tagged loads under trace.
    let (x0, x1, name, flags) = begin_args(1, "os-locks");
    let r1: u64;
    // SAFETY: writes only debug registers (trapped and emulated by the hypervisor: nothing
    // reaches the hardware) and loads from the guest's tagged granule; the HVCs are mtex
    // calls that change only x0.
    unsafe {
        core::arch::asm!(
            "mov x12, #1",
            "msr osdlr_el1, x12",
            "msr oslar_el1, x12",
            "isb",
            "hvc #0",
            "1: ldr x12, [x9]",
            "subs x10, x10, #1",
            "b.ne 1b",
            crate::hvc::phase_end_call!(),
            end_lo = const crate::hvc::PHASE_END_LO,
            end_hi = const crate::hvc::PHASE_END_HI,
            inout("x0") x0 => r1,
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
        )
    };
    // Phase 2: a breakpoint of the guest's own on the load inside the traced loop.
    let (x0, x1, name, flags) = begin_args(2, "guest-breakpoint");
    let r2: u64;
    // SAFETY: as above; debug exceptions stay masked at EL1 (PSTATE.D) and the registers
    // are the guest's shadow, so no breakpoint is ever taken by the guest.
    unsafe {
        core::arch::asm!(
            "adr x12, 2f",
            "msr dbgbvr0_el1, x12",
            "msr dbgbcr0_el1, x13",
            "mrs x12, mdscr_el1",
            "orr x12, x12, x14",
            "msr mdscr_el1, x12",
            "isb",
            "hvc #0",
            "2: ldr x12, [x9]",
            "subs x10, x10, #1",
            "b.ne 2b",
            crate::hvc::phase_end_call!(),
            end_lo = const crate::hvc::PHASE_END_LO,
            end_hi = const crate::hvc::PHASE_END_HI,
            inout("x0") x0 => r2,
            inout("x1") x1 => _,
            in("x2") name[0],
            in("x3") name[1],
            in("x4") name[2],
            in("x5") name[3],
            in("x6") flags,
            in("x9") tagged,
            inout("x10") HOSTILE_N => _,
            out("x12") _,
            in("x13") BCR_ENABLED,
            in("x14") MDSCR_MDE_KDE,
            in("x15") 2u64,
        )
    };
    // What the guest reads back is its own shadow.
    let (oslsr, osdlr, bcr0): (u64, u64, u64);
    // SAFETY: reading debug registers (emulated) has no side effects.
    unsafe {
        core::arch::asm!(
            "mrs {}, oslsr_el1",
            "mrs {}, osdlr_el1",
            "mrs {}, dbgbcr0_el1",
            out(reg) oslsr,
            out(reg) osdlr,
            out(reg) bcr0,
        )
    };
    crate::println!("hostile-debug oslsr={oslsr:#x} osdlr={osdlr:#x} dbgbcr0={bcr0:#x}");
    if r1 != 0 || r2 != 0 {
        return 6;
    }
    hvc::exit(0)
}
