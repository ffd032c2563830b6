//! The trap policy: which guest operations exit to EL2, set once at boot in HCR_EL2 and,
//! with FEAT_FGT, the fine-grained trap registers. Each trapped class has its handler under
//! `exits.rs` (`sysreg_trap.rs`, `psci.rs`, `id_regs.rs`, WFI/WFE); what traps, and why, is
//! decided here, apart from the guest's boot sequence, so that the policy reads in one
//! place. The debug and PMU register traps (MDCR_EL2) are set with the state they guard, in
//! `debug.rs` and `pmu.rs`.

use arm_sysregs::el1::accessors::{read_id_aa64mmfr0_el1, read_id_aa64mmfr1_el1};
use arm_sysregs::el2::accessors::{
    read_hcr_el2, write_hcr_el2, write_hcrx_el2, write_hdfgrtr_el2, write_hdfgwtr_el2,
    write_hfgitr_el2, write_hfgrtr_el2, write_hfgwtr_el2,
};
use arm_sysregs::el2::registers::{
    HcrEl2, HcrxEl2, HdfgrtrEl2, HdfgwtrEl2, HfgitrEl2, HfgrtrEl2, HfgwtrEl2,
};
use mtex_abi::options::TrapChoice;
use mtex_abi::report::TrapMode;
use mtex_platform::Errata;

/// ID_AA64MMFR0_EL1.FGT: FEAT_FGT's fine-grained trap registers exist.
pub fn has_fgt() -> bool {
    read_id_aa64mmfr0_el1().fgt() != 0
}

/// Sets HCR_EL2 and the fine-grained traps; returns how MTE control writes are trapped.
/// `linux`: Linux mode, where interrupts and WFI/WFE belong to the guest (see below).
pub fn configure_traps(choice: TrapChoice, errata: Errata, linux: bool) -> TrapMode {
    let mode = if has_fgt() && choice == TrapChoice::Auto {
        TrapMode::FineGrained
    } else {
        TrapMode::Tvm
    };
    if has_fgt() {
        // No read or instruction traps; write traps only for SCTLR_EL1 and TCR_EL1
        // in fine-grained mode. The negative-polarity bits (nXXX, 50..63) stay 0, so writes
        // to those newer registers would trap and end the run as unhandled exits: the guest
        // does not use them.
        let writes = match mode {
            TrapMode::FineGrained => HfgwtrEl2::SCTLR_EL1 | HfgwtrEl2::TCR_EL1,
            TrapMode::Tvm => HfgwtrEl2::empty(),
        };
        // SAFETY: the fine-grained traps only decide which of EL1's and EL0's accesses exit
        // to EL2; the guest has not run yet.
        unsafe {
            write_hfgrtr_el2(HfgrtrEl2::empty());
            write_hfgitr_el2(HfgitrEl2::empty());
            write_hdfgrtr_el2(HdfgrtrEl2::empty());
            write_hdfgwtr_el2(HdfgwtrEl2::empty());
            write_hfgwtr_el2(writes);
        }
    }
    // RW: EL1 is AArch64. VM: stage 2 on. TSC: trap SMC (PSCI). ATA: guest tag accesses
    // allowed (0 would trap them and disable tag checking). IMO/FMO/AMO: physical interrupts
    // to EL2 (the watchdog). API/APK: pointer authentication does not trap. TWI/TWE: a
    // WFI/WFE spin would freeze guest time under -icount (and with it every watchdog), so
    // they trap and complete at once (`exits.rs`). TID3: ID register reads are emulated, to
    // hide what the hypervisor does not support (`id_regs.rs`).
    let tvm = match mode {
        TrapMode::Tvm => HcrEl2::TVM,
        TrapMode::FineGrained => HcrEl2::empty(),
    };
    //
    // Linux mode: Linux owns the GIC and its timers (passed through), so physical
    // interrupts go straight to EL1 (IMO/FMO/AMO clear) and the hypervisor depends on none;
    // its idle WFI waits for them as on bare metal (TWI/TWE clear: QEMU's -icount then skips
    // idle time to the next timer, and a stuck guest meets the host's watch instead).
    let own = HcrEl2::RW
        | HcrEl2::VM
        | HcrEl2::TSC
        | HcrEl2::ATA
        | HcrEl2::API
        | HcrEl2::APK
        | HcrEl2::TID3
        | tvm;
    let hcr = if linux {
        own
    } else {
        own | HcrEl2::IMO | HcrEl2::FMO | HcrEl2::AMO | HcrEl2::TWI | HcrEl2::TWE
    };
    // AmpereOne AC04_CPU_23: a translation in flight for an older load or store can be
    // corrupted by the write; a DSB first lets them finish (the ISB after, done on every CPU,
    // keeps younger ones out).
    if errata.hcr_write_needs_barriers {
        aarch64_cpu::asm::barrier::dsb(aarch64_cpu::asm::barrier::SY);
    }
    // SAFETY: EL2's own code depends on none of these controls (its stage 1 is its own, E2H
    // stays 0); they set how the guest, which has not run yet, runs.
    unsafe { write_hcr_el2(hcr) };
    clear_hcrx();
    aarch64_cpu::asm::barrier::isb(aarch64_cpu::asm::barrier::SY);
    mode
}

/// HCRX_EL2, where FEAT_HCX has it (ID_AA64MMFR1_EL1.HCX, bits 43:40), cleared on this CPU:
/// its reset value is UNKNOWN where firmware runs at EL3, and its enables are what keep
/// features hidden from the guest off at EL1 and EL0 (MSCEn: FEAT_MOPS's CPY*/SET*; EnALS,
/// EnAS0, EnASR: LD64B/ST64B; TCR2En, SCTLR2En, EnFPM, D128En), whose tag checks the trace
/// counter does not model (`mtex_arch::id_regs`). Every CPU, at its start.
pub fn clear_hcrx() {
    if read_id_aa64mmfr1_el1().hcx() == 0 {
        return;
    }
    // SAFETY: clears the extended hypervisor controls: traps and enables for EL1/EL0 only,
    // none of which EL2's own code depends on.
    unsafe { write_hcrx_el2(HcrxEl2::empty()) };
}

/// Linux mode: whether the guest's WFI traps, which it does while this CPU counts a window
/// that other CPUs count too (`phase/window.rs`), or a sampled window (`phase/sample.rs`): the CPU then
/// halts for it in EL2, where its clock keeps to the machine's and a sampled unit's time
/// stands still (`guest_clock::halt_for_guest_wfi`). The exception return to the
/// guest synchronises the change.
pub fn trap_guest_wfi(on: bool) {
    // AmpereOne AC04_CPU_23 (above): a DSB before every HCR_EL2 write.
    aarch64_cpu::asm::barrier::dsb(aarch64_cpu::asm::barrier::SY);
    let mut hcr = read_hcr_el2();
    hcr.set(HcrEl2::TWI, on);
    // SAFETY: TWI only decides whether the guest's WFI exits to EL2, which handles it either
    // way; the rest of HCR_EL2 is written back as it was.
    unsafe { write_hcr_el2(hcr) };
}
