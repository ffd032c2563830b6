//! The guest takes the debug registers: the OS Double Lock and the OS Lock set before a
//! traced phase (which stop software step on silicon; QEMU honours the Double Lock), and its
//! own hardware breakpoint, enabled with MDSCR_EL1.MDE/KDE, on an instruction inside the
//! traced phase (which EL2 would take as a step and loop on).

use crate::hvc;
use crate::hvc::phase_asm;
use mtex_abi::program::HOSTILE_N;
use mtex_arch::el2_bits::{dbgbcr, mdscr};

/// DBGBCR<n>_EL1: enabled, all byte lanes, EL1 and EL0 (PMC = 0b11), address match.
const BCR_ENABLED: u64 = dbgbcr::BAS_ALL | dbgbcr::PMC_EL1_EL0 | dbgbcr::E;
/// MDSCR_EL1.MDE and KDE.
const MDSCR_MDE_KDE: u64 = mdscr::MDE | mdscr::KDE;
const _: () = assert!(BCR_ENABLED == 0x1e7 && MDSCR_MDE_KDE == (1 << 15) | (1 << 13));

pub fn run(tagged: u64) -> u64 {
    // Phase 1: both OS locks set, then HOSTILE_N tagged loads under trace. The body writes
    // only debug registers (trapped and emulated: nothing reaches the hardware) and loads
    // from the guest's tagged granule.
    let r1 = phase_asm!(
        id: 1, name: "os-locks", traced: true,
        before: ["mov x12, #1", "msr osdlr_el1, x12", "msr oslar_el1, x12", "isb"],
        body: ["1: ldr x12, [x9]", "subs x10, x10, #1", "b.ne 1b"],
        in("x9") tagged,
        inout("x10") HOSTILE_N => _,
        out("x12") _,
    );
    // Phase 2: a breakpoint of the guest's own on the load inside the traced loop. Debug
    // exceptions stay masked at EL1 (PSTATE.D) and the registers are the guest's shadow, so
    // no breakpoint is ever taken by the guest.
    let r2 = phase_asm!(
        id: 2, name: "guest-breakpoint", traced: true,
        before: [
            "adr x12, 2f",
            "msr dbgbvr0_el1, x12",
            "msr dbgbcr0_el1, x13",
            "mrs x12, mdscr_el1",
            "orr x12, x12, x14",
            "msr mdscr_el1, x12",
            "isb",
        ],
        body: ["2: ldr x12, [x9]", "subs x10, x10, #1", "b.ne 2b"],
        in("x9") tagged,
        inout("x10") HOSTILE_N => _,
        out("x12") _,
        in("x13") BCR_ENABLED,
        in("x14") MDSCR_MDE_KDE,
    );
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
