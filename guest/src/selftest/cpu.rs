//! The guest takes the PMU, as Linux's perf does at boot (PMCR_EL0.P), and then some: inside
//! a traced phase it resets every counter, disables all of them, and writes counter 5 (one
//! of the hypervisor's on QEMU) through PMSELR/PMXEVCNTR and directly. It also reads
//! ID_AA64ISAR2_EL1, where FEAT_MOPS must be hidden (the hypervisor neither enables nor
//! counts CPY*/SET*).

use super::begin_args;
use crate::hvc;
use mtex_abi::program::HOSTILE_N;

/// PMCR_EL0 E | P | C.
const PMCR_RESET_ALL: u64 = 0b111;

pub fn run(tagged: u64) -> u64 {
    let (x0, x1, name, flags) = begin_args(1, "pmu-reset");
    let r: u64;
    // SAFETY: writes only PMU registers (trapped and emulated by the hypervisor) and loads
    // from the guest's tagged granule; the HVCs are mtex calls that change only x0.
    unsafe {
        core::arch::asm!(
            "hvc #0",
            "msr pmcr_el0, x13",
            "msr pmcntenclr_el0, x14",
            "mov x12, #5",
            "msr pmselr_el0, x12",
            "msr pmxevcntr_el0, xzr",
            "msr pmxevtyper_el0, xzr",
            "msr pmevcntr5_el0, xzr",
            "1: ldr x12, [x9]",
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
            in("x13") PMCR_RESET_ALL,
            in("x14") u64::MAX,
            in("x15") 1u64,
        )
    };
    let (pmcr, isar2): (u64, u64);
    // SAFETY: reading PMCR_EL0 (emulated) and ID_AA64ISAR2_EL1 (S3_0_C0_C6_2) has no side
    // effects.
    unsafe {
        core::arch::asm!(
            "mrs {}, pmcr_el0",
            "mrs {}, s3_0_c0_c6_2",
            out(reg) pmcr,
            out(reg) isar2,
        )
    };
    crate::println!(
        "hostile-cpu pmcr.n={} isar2.mops={}",
        (pmcr >> 11) & 0x1f,
        (isar2 >> 16) & 0xf
    );
    if r != 0 {
        return 6;
    }
    hvc::exit(0)
}
