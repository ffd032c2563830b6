//! The trap policy: which guest operations exit to EL2, set once at boot in HCR_EL2 and,
//! with FEAT_FGT, the fine-grained trap registers. Each trapped class has its handler under
//! `exits.rs` (`sysreg_trap.rs`, `psci.rs`, `id_regs.rs`, WFI/WFE); what traps, and why, is
//! decided here, apart from the guest's boot sequence, so that the policy reads in one
//! place. The debug and PMU register traps (MDCR_EL2) are set with the state they guard, in
//! `debug.rs` and `pmu.rs`.

use aarch64_cpu::registers::*;
use mtex_abi::options::TrapChoice;
use mtex_abi::report::TrapMode;
use mtex_arch::el2_bits::hfgwtr;
use mtex_platform::Errata;
use tock_registers::interfaces::{Readable, Writeable};

/// ID_AA64MMFR0_EL1.FGT, bits 59:56.
pub fn has_fgt() -> bool {
    (ID_AA64MMFR0_EL1.get() >> 56) & 0xf != 0
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
        HFGRTR_EL2.set(0);
        HFGITR_EL2.set(0);
        HDFGRTR_EL2.set(0);
        HDFGWTR_EL2.set(0);
        HFGWTR_EL2.set(match mode {
            TrapMode::FineGrained => hfgwtr::SCTLR_EL1 | hfgwtr::TCR_EL1,
            TrapMode::Tvm => 0,
        });
    }
    // RW: EL1 is AArch64. VM: stage 2 on. TSC: trap SMC (PSCI). ATA: guest tag accesses
    // allowed (0 would trap them and disable tag checking). IMO/FMO/AMO: physical interrupts
    // to EL2 (the watchdog). API/APK: pointer authentication does not trap. TWI/TWE: a
    // WFI/WFE spin would freeze guest time under -icount (and with it every watchdog), so
    // they trap and complete at once (`exits.rs`). TID3: ID register reads are emulated, to
    // hide what the hypervisor does not support (`id_regs.rs`).
    let tvm = match mode {
        TrapMode::Tvm => HCR_EL2::TVM::EnableTrapTVM,
        TrapMode::FineGrained => HCR_EL2::TVM::DisableTrapTVM,
    };
    //
    // Linux mode: Linux owns the GIC and its timers (passed through), so physical
    // interrupts go straight to EL1 (IMO/FMO/AMO clear) and the hypervisor depends on none;
    // its idle WFI waits for them as on bare metal (TWI/TWE clear: QEMU's -icount then skips
    // idle time to the next timer, and a stuck guest meets the host's watch instead).
    let own = HCR_EL2::RW::EL1IsAarch64
        + HCR_EL2::VM::Enable
        + HCR_EL2::TSC::SET
        + HCR_EL2::ATA::SET
        + HCR_EL2::API::SET
        + HCR_EL2::APK::SET
        + HCR_EL2::TID3::SET
        + tvm;
    let hcr = if linux {
        own
    } else {
        own + HCR_EL2::IMO::SET
            + HCR_EL2::FMO::SET
            + HCR_EL2::AMO::SET
            + HCR_EL2::TWI::SET
            + HCR_EL2::TWE::SET
    };
    // AmpereOne AC04_CPU_23: a translation in flight for an older load or store can be
    // corrupted by the write; a DSB first lets them finish (the ISB after, done on every CPU,
    // keeps younger ones out).
    if errata.hcr_write_needs_barriers {
        aarch64_cpu::asm::barrier::dsb(aarch64_cpu::asm::barrier::SY);
    }
    HCR_EL2.write(hcr);
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
    if (ID_AA64MMFR1_EL1.get() >> 40) & 0xf == 0 {
        return;
    }
    // SAFETY: clears the extended hypervisor controls: traps and enables for EL1/EL0 only,
    // none of which EL2's own code depends on.
    unsafe {
        arm_sysregs::el2::accessors::write_hcrx_el2(arm_sysregs::el2::registers::HcrxEl2::empty())
    };
}

/// Linux mode: whether the guest's WFI traps, which it does while this CPU counts a window
/// that other CPUs count too (`phase/window.rs`), or a sampled window (`phase/sample.rs`): the CPU then
/// halts for it in EL2, where its clock keeps to the machine's and a sampled unit's time
/// stands still (`guest_clock::halt_for_guest_wfi`). The exception return to the
/// guest synchronises the change.
pub fn trap_guest_wfi(on: bool) {
    // AmpereOne AC04_CPU_23 (above): a DSB before every HCR_EL2 write.
    aarch64_cpu::asm::barrier::dsb(aarch64_cpu::asm::barrier::SY);
    if on {
        HCR_EL2.modify(HCR_EL2::TWI::SET);
    } else {
        HCR_EL2.modify(HCR_EL2::TWI::CLEAR);
    }
}
