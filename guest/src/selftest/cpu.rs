//! The guest takes the PMU, as Linux's perf does at boot (PMCR_EL0.P), and then some: inside
//! a traced phase, and again inside an untraced one (where the hypervisor's per-phase
//! counters count cycles), it resets every counter, disables all of them, and writes counter
//! 5 (one of the hypervisor's on QEMU) through PMSELR/PMXEVCNTR and directly. It also reads
//! ID_AA64ISAR2_EL1, where FEAT_MOPS must be hidden (the hypervisor neither enables nor
//! counts CPY*/SET*).

use crate::hvc;
use crate::hvc::phase_asm;
use mtex_abi::program::HOSTILE_N;

/// PMCR_EL0 E | P | C.
const PMCR_RESET_ALL: u64 = 0b111;

pub fn run(tagged: u64) -> u64 {
    let traced = reset_in_phase(1, "pmu-reset", true, tagged);
    let untraced = reset_in_phase(2, "pmu-reset-untraced", false, tagged);
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
    if traced != 0 || untraced != 0 {
        return 6;
    }
    hvc::exit(0)
}

/// Phase `id`: the PMU taken over, then HOSTILE_N loads. The body writes only PMU registers
/// (trapped and emulated) and loads from the guest's tagged granule.
fn reset_in_phase(id: u64, name: &str, traced: bool, tagged: u64) -> u64 {
    phase_asm!(
        id: id, name: name, traced: traced,
        before: [],
        body: [
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
        ],
        in("x9") tagged,
        inout("x10") HOSTILE_N => _,
        out("x12") _,
        in("x13") PMCR_RESET_ALL,
        in("x14") u64::MAX,
    )
}
