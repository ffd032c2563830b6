//! Starting the guest the way a Linux arm64 kernel is booted (Documentation/arch/arm64/
//! booting.rst): an Image with the arm64 header, entered at EL1 with the MMU off, DAIF
//! masked and x0 = the physical address of a device tree.

use crate::Board;
use crate::context::GuestContext;
use aarch64_cpu::registers::*;
use mtex_abi::options::TrapChoice;
use mtex_abi::report::TrapMode;
use mtex_platform::Platform;
use tock_registers::interfaces::{Readable, Writeable};

/// "ARM\x64", the arm64 Image magic at offset 56.
const IMAGE_MAGIC: u32 = 0x644d_5241;
/// The guest's tree must fit below the hypervisor, where QEMU left the original.
const DTB_MAX: usize = 2 << 20;

/// The device tree the firmware or QEMU left in RAM, found by [`find_dtb`] (which checked its
/// header). Its bytes are read only through [`with_dtb`], whose borrow cannot outlive the
/// call, and written only by [`hand_on_dtb`], which takes it by value: no reference to the
/// tree can be alive when it is overwritten.
pub struct Dtb {
    addr: usize,
    len: usize,
}

/// Finds the device tree: in x0 if the firmware passed one, else at the start of RAM, where
/// QEMU puts it for an ELF kernel.
pub fn find_dtb(x0: u64) -> Option<Dtb> {
    [x0 as usize, Board::RAM_BASE].into_iter().find_map(|addr| {
        if addr == 0 {
            return None;
        }
        // SAFETY: both candidates are RAM addresses (x0 from firmware, RAM_BASE from the
        // platform); reading 8 bytes of RAM has no side effects, and the slice dies here.
        let header = unsafe { core::slice::from_raw_parts(addr as *const u8, 8) };
        let len = mtex_dt::header_total_size(header).filter(|&n| (8..=DTB_MAX).contains(&n))?;
        Some(Dtb { addr, len })
    })
}

/// Runs `f` on the device tree's bytes; the slice lives only as long as the call.
pub fn with_dtb<R>(dtb: &Dtb, f: impl FnOnce(&[u8]) -> R) -> R {
    // SAFETY: find_dtb read the size in the header at this RAM address; the tree lies in RAM
    // the hypervisor alone uses while it boots (the guest has not run). Nothing writes it
    // while `f` runs: only hand_on_dtb does, and it needs the `Dtb` this call borrows.
    f(unsafe { core::slice::from_raw_parts(dtb.addr as *const u8, dtb.len) })
}

/// Writes the guest's tree (the hypervisor's memory hidden) over the original and returns
/// its address.
pub fn hand_on_dtb(dtb: Dtb) -> Result<u64, &'static str> {
    // The edited tree is a heap copy; the borrow of the original ends with this call.
    let edited = with_dtb(&dtb, |tree| {
        mtex_dt::hide_region(tree, "mtex-hyp", crate::hyp_region())
    })
    .map_err(|_| "cannot rewrite the device tree")?;
    let Dtb { addr, .. } = dtb;
    if edited.len() > DTB_MAX || addr + edited.len() > crate::hyp_region().base as usize {
        return Err("the rewritten device tree does not fit below the hypervisor");
    }
    // SAFETY: [addr, addr + len) is guest RAM below the hypervisor (checked above), where the
    // original tree was. No reference to it is alive: with_dtb's borrows end with their calls,
    // and the `Dtb` is consumed, so none can be made again.
    unsafe { core::ptr::copy_nonoverlapping(edited.as_ptr(), addr as *mut u8, edited.len()) };
    crate::mmu::clean_to_poc(addr, edited.len());
    Ok(addr as u64)
}

/// Checks the arm64 Image header at `addr`; returns the entry point (the image start).
pub fn check_image(addr: usize) -> Result<u64, &'static str> {
    // SAFETY: `addr` is the platform's guest image address in RAM, mapped at EL2; reading the
    // 64-byte header has no side effects.
    let header = unsafe { core::slice::from_raw_parts(addr as *const u8, 64) };
    let magic = u32::from_le_bytes([header[56], header[57], header[58], header[59]]);
    if magic != IMAGE_MAGIC {
        return Err("no arm64 Image (magic ARM\\x64) at the guest image address");
    }
    Ok(addr as u64)
}

/// ID_AA64MMFR0_EL1.FGT, bits 59:56.
fn has_fgt() -> bool {
    (ID_AA64MMFR0_EL1.get() >> 56) & 0xf != 0
}

/// Sets HCR_EL2 and the fine-grained traps; returns how MTE control writes are trapped.
pub fn configure_traps(choice: TrapChoice) -> TrapMode {
    let mode = if has_fgt() && choice == TrapChoice::Auto {
        TrapMode::FineGrained
    } else {
        TrapMode::Tvm
    };
    if has_fgt() {
        // No read or instruction traps; write traps only for SCTLR_EL1 (29) and TCR_EL1 (32)
        // in fine-grained mode. The negative-polarity bits (nXXX, 50..63) stay 0, so writes
        // to those newer registers would trap and end the run as unhandled exits: the guest
        // does not use them.
        HFGRTR_EL2.set(0);
        HFGITR_EL2.set(0);
        HDFGRTR_EL2.set(0);
        HDFGWTR_EL2.set(0);
        HFGWTR_EL2.set(match mode {
            TrapMode::FineGrained => (1 << 29) | (1 << 32),
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
    let hcr = HCR_EL2::RW::EL1IsAarch64
        + HCR_EL2::VM::Enable
        + HCR_EL2::TSC::SET
        + HCR_EL2::ATA::SET
        + HCR_EL2::IMO::SET
        + HCR_EL2::FMO::SET
        + HCR_EL2::AMO::SET
        + HCR_EL2::API::SET
        + HCR_EL2::APK::SET
        + HCR_EL2::TWI::SET
        + HCR_EL2::TWE::SET
        + HCR_EL2::TID3::SET
        + tvm;
    if Board::HCR_WRITE_NEEDS_BARRIERS {
        aarch64_cpu::asm::barrier::dsb(aarch64_cpu::asm::barrier::SY);
    }
    HCR_EL2.write(hcr);
    aarch64_cpu::asm::barrier::isb(aarch64_cpu::asm::barrier::SY);
    mode
}

/// Sets the EL1 state a booting kernel expects and enters it. Never returns: from here on
/// the hypervisor runs only on guest exits.
pub fn enter(entry: u64, dtb: u64) -> ! {
    // SCTLR_EL1 RES1 bits only: MMU and caches off, as booting.rst requires.
    SCTLR_EL1.set(mtex_abi::program::SCTLR_EL1_AT_ENTRY);
    // Known starting values, so every trapped write's "old" value is predictable.
    TCR_EL1.set(mtex_abi::program::TCR_EL1_AT_ENTRY);
    // Guest owns the EL1 physical timer and counter.
    CNTHCTL_EL2.set(0b11);
    CNTVOFF_EL2.set(0);
    // CPTR_EL2 (non-VHE): RES1 bits only; FP/SIMD, SVE, SME, trace and AMU not trapped.
    CPTR_EL2.set(0x22ff);
    VMPIDR_EL2.set(MPIDR_EL1.get());
    // SAFETY: VPIDR_EL2 only sets what the guest reads as MIDR_EL1 (no aarch64-cpu accessor).
    unsafe { core::arch::asm!("msr vpidr_el2, {}", in(reg) MIDR_EL1.get()) };
    aarch64_cpu::asm::barrier::isb(aarch64_cpu::asm::barrier::SY);
    let ctx = GuestContext::boot(entry, dtb);
    // SAFETY: stage 2, traps and EL1 state are set up above and in hyp_main; nothing on the
    // EL2 stack is needed any more.
    unsafe { crate::entry::enter_guest(&ctx) }
}
