//! Starting the guest the way a Linux arm64 kernel is booted (Documentation/arch/arm64/
//! booting.rst): an Image with the arm64 header, entered at EL1 with the MMU off, DAIF
//! masked and x0 = the physical address of a device tree.

use crate::boot::Boot;
use crate::context::GuestContext;
use arm_sysregs::el0::accessors::read_cntpct_el0;
use arm_sysregs::el1::accessors::{
    read_icc_sre_el1, read_id_aa64pfr0_el1, read_midr_el1, read_mpidr_el1, write_cpacr_el1,
    write_icc_sre_el1, write_mair_el1, write_sctlr_el1, write_sp_el1, write_tcr_el1,
    write_ttbr0_el1, write_vbar_el1,
};
use arm_sysregs::el1::registers::{
    CpacrEl1, IccSreEl1, MairEl1, SctlrEl1, SpEl1, TcrEl1, Ttbr0El1, VbarEl1,
};
use arm_sysregs::el2::accessors::{
    write_cnthctl_el2, write_cntvoff_el2, write_cptr_el2, write_vmpidr_el2, write_vpidr_el2,
};
use arm_sysregs::el2::registers::{CnthctlEl2, CntvoffEl2, CptrEl2, VmpidrEl2, VpidrEl2};
use mtex_platform::{arm64_image, guest_vm};

/// Puts the guest in its RAM: the staged Image at `guest_vm::IMAGE_ADDR` and a device tree
/// of the guest's machine at `guest_vm::DTB_ADDR`. Returns the entry point and the tree's
/// address (both guest addresses). Runs with the EL2 MMU on.
pub fn load(boot: &Boot) -> Result<(u64, u64), &'static str> {
    let ram = boot.guest_ram;
    let image = boot.guest_image;
    let room = guest_vm::RAM_BASE + guest_vm::RAM_SIZE - guest_vm::IMAGE_ADDR;
    if image.size < 64 || image.size > room {
        return Err("the guest Image is smaller than its header or larger than guest RAM");
    }
    // SAFETY: the staged Image is in memory QEMU or the loader filled and EL2 maps as Normal
    // (boot.staging); nothing writes it while this slice lives.
    let bytes =
        unsafe { core::slice::from_raw_parts(image.base as *const u8, image.size as usize) };
    let header = arm64_image::parse(bytes, image.size).map_err(|e| e.describe())?;
    // image_size covers the guest's bss: it must fit too.
    if header.text_offset + header.image_size > room {
        return Err("the guest Image's image_size is larger than guest RAM");
    }
    let uart = boot.machine.console.base;
    let tree = mtex_dt::guest_tree::build(&mtex_dt::guest_tree::GuestTree {
        ram: ram.ipa,
        bootargs: &boot.cmdline,
        uart: Some(uart),
        timer_ppis: guest_vm::TIMER_PPIS,
    })
    .map_err(|_| "cannot write the guest's device tree")?;
    if tree.len() as u64 > guest_vm::DTB_MAX {
        return Err("the guest's device tree is larger than its slot");
    }
    let image_pa = ram
        .pa_of(guest_vm::IMAGE_ADDR, image.size)
        .ok_or("image outside guest RAM")?;
    let tree_pa = ram
        .pa_of(guest_vm::DTB_ADDR, tree.len() as u64)
        .ok_or("tree outside guest RAM")?;
    // SAFETY: both destinations are in the host memory behind guest RAM (pa_of checked the
    // ranges), identity-mapped at EL2, which nothing else references: the guest has not run,
    // and the staged Image never lies inside it (the loader allocated them apart; on the
    // -kernel path the placement avoided the initrd).
    unsafe {
        core::ptr::copy_nonoverlapping(bytes.as_ptr(), image_pa as *mut u8, bytes.len());
        core::ptr::copy_nonoverlapping(tree.as_ptr(), tree_pa as *mut u8, tree.len());
    }
    // The guest starts with its MMU and caches off: its loads and instruction fetches read
    // memory, not EL2's cache. Clean what was written to the point of coherency, and
    // invalidate every line of its RAM, so that no stale dirty line (firmware's, from before)
    // is written back later over what the guest writes with its caches off. Instructions were
    // written as data: invalidate the instruction cache.
    crate::mmu::clean_invalidate_to_poc(ram.host());
    crate::mmu::invalidate_icache();
    Ok((guest_vm::IMAGE_ADDR, guest_vm::DTB_ADDR))
}

/// Sets the EL1 state a booting kernel expects and enters it. Never returns: from here on
/// the hypervisor runs only on guest exits.
pub fn enter(entry: u64, dtb: u64) -> ! {
    // SAFETY: EL1's translation controls, which EL2 (E2H = 0) does not use; the guest has not
    // run yet.
    unsafe {
        // SCTLR_EL1 RES1 bits only: MMU and caches off, as booting.rst requires.
        write_sctlr_el1(SctlrEl1::from_bits_retain(
            mtex_abi::program::SCTLR_EL1_AT_ENTRY,
        ));
        // Known starting values, so every trapped write's "old" value is predictable.
        write_tcr_el1(TcrEl1::from_bits_retain(
            mtex_abi::program::TCR_EL1_AT_ENTRY,
        ));
    }
    // The guest's virtual counter starts at 0, whatever time firmware took before it: the
    // guest's clock, and so where its ticks fall, is the same on every boot path.
    write_cntvoff_el2(CntvoffEl2::from_bits_retain(read_cntpct_el0().bits()));
    crate::guest_clock::start();
    el2_for_el1();
    // On the heap: `enter_guest` copies it to the top of the stack, where it must not be.
    let ctx = alloc::boxed::Box::leak(alloc::boxed::Box::new(GuestContext::boot(entry, dtb)));
    // SAFETY: stage 2, traps and EL1 state are set up above and in hyp_main; nothing on the
    // EL2 stack is needed any more; the context is not on it.
    unsafe { crate::entry::enter_guest(ctx, crate::entry::boot_stack_top()) }
}

/// Install mode: returns to the firmware at EL1 where the loader left it, with the EL1
/// controls the loader converted from the firmware's EL2 ones (`mtex_platform::
/// firmware_el1`), on the stack it was on, interrupts masked (the loader unmasks them).
/// The virtual counter's offset is left as the firmware had it: its clock runs on unbroken.
pub fn resume(r: &mtex_platform::firmware_el1::Resume) -> ! {
    // SAFETY: the firmware's own EL1 state, as it ran with it at EL2 (its tables, vectors and
    // stack, which the hypervisor's memory is kept out of); EL2 (E2H = 0) uses none of these
    // registers, and the firmware runs again only at the ERET below.
    unsafe {
        write_mair_el1(MairEl1::from_bits_retain(r.mair_el1));
        write_tcr_el1(TcrEl1::from_bits_retain(r.tcr_el1));
        write_ttbr0_el1(Ttbr0El1::from_bits_retain(r.ttbr0_el1));
        write_vbar_el1(VbarEl1::from_bits_retain(r.vbar_el1));
        write_cpacr_el1(CpacrEl1::from_bits_retain(r.cpacr_el1));
        if r.spsel == 1 {
            write_sp_el1(SpEl1::from_bits_retain(r.sp));
        } else {
            // SP_EL0 (arm-sysregs has no accessor for it): EL2 runs on SP_EL2.
            core::arch::asm!("msr sp_el0, {}", in(reg) r.sp, options(nomem, nostack));
            write_sp_el1(SpEl1::from_bits_retain(r.sp_el1));
        }
    }
    // The firmware reached the GIC's CPU interface through system registers at EL2
    // (ICC_SRE_EL2.SRE); at EL1 that takes ICC_SRE_EL1.SRE too (set before EL1's MMU and
    // the rest, which it does not affect).
    // SAFETY: only selects the system-register interface for EL1, which the firmware and
    // Linux both use; the GIC's state is untouched.
    unsafe { write_icc_sre_el1(read_icc_sre_el1() | IccSreEl1::SRE) };
    aarch64_cpu::asm::barrier::isb(aarch64_cpu::asm::barrier::SY);
    // SAFETY: as above: the firmware's EL1 MMU and caches, over the tables set above.
    unsafe { write_sctlr_el1(SctlrEl1::from_bits_retain(r.sctlr_el1)) };
    el2_for_el1();
    let mut ctx = GuestContext::boot(r.pc, 0);
    if r.spsel == 0 {
        ctx.spsr = mtex_arch::el2_bits::spsr::EL1T_MASKED;
    }
    let ctx = alloc::boxed::Box::leak(alloc::boxed::Box::new(ctx));
    crate::guest_clock::start();
    // SAFETY: stage 2 over the firmware's memory, the traps and the EL1 state are set; the
    // context is on the heap, not the EL2 stack.
    unsafe { crate::entry::enter_guest(ctx, crate::entry::boot_stack_top()) }
}

/// The EL2 controls every way into EL1 shares: timers, FP, the IDs EL1 reads.
fn el2_for_el1() {
    // Guest owns the EL1 physical timer and counter: EL1PCTEN and EL1PCEN, bits 0 and 1 with
    // E2H = 0 (arm-sysregs names bit 0 by its E2H = 1 field, EL0PCTEN).
    const EL1_OWNS_PHYSICAL: CnthctlEl2 = CnthctlEl2::EL0PCTEN.union(CnthctlEl2::EL1PCEN);
    const _: () = assert!(EL1_OWNS_PHYSICAL.bits() == 0b11);
    write_cnthctl_el2(EL1_OWNS_PHYSICAL);
    // CPTR_EL2 (non-VHE): FP/SIMD, SVE, trace and AMU not trapped; SME trapped. TZ and TSM
    // are trap controls only with FEAT_SVE / FEAT_SME and RES1 without them (QEMU's max CPU
    // has both, AmpereOne neither): write 1 where RES1. SME is hidden from the guest
    // (`mtex_arch::id_regs`) because whether its Streaming SVE mode's loads and stores are
    // Tag Checked is IMPLEMENTATION DEFINED (Arm ARM D10): no count of them could be vouched
    // for. TSM makes SMSTART and every other SME instruction exit to EL2 (EC 0x1D), where the
    // run ends with a record naming it, instead of running unseen.
    const _: () = assert!(
        CptrEl2::RES1.bits() == 0x22ff
            && CptrEl2::TZ.bits() == 1 << 8
            && CptrEl2::TSM.bits() == 1 << 12
    );
    let has_sve = read_id_aa64pfr0_el1().sve() != 0;
    let tz = if has_sve {
        CptrEl2::empty()
    } else {
        CptrEl2::TZ
    };
    // SAFETY: CPTR_EL2 only traps the guest's FP, SVE and SME use; EL2's own code is built
    // without FP/SIMD (softfloat).
    unsafe { write_cptr_el2(CptrEl2::RES1 | tz | CptrEl2::TSM) };
    write_vmpidr_el2(VmpidrEl2::from_bits_retain(read_mpidr_el1().bits()));
    write_vpidr_el2(VpidrEl2::from_bits_retain(read_midr_el1().bits()));
    aarch64_cpu::asm::barrier::isb(aarch64_cpu::asm::barrier::SY);
}
