//! Handing the machine to the hypervisor: ExitBootServices, the caches and the MMU off, the
//! jump — the entry contract of `mtex_platform::boot_info`.

use core::arch::asm;

use mtex_platform::BootInfo;
use mtex_platform::firmware_el1::Resume;

use arm_sysregs::el0::accessors::{read_ctr_el0, read_currentel, read_daif, write_daif};
use arm_sysregs::el0::registers::Daif;
use arm_sysregs::el2::accessors::{
    read_cptr_el2, read_mair_el2, read_sctlr_el2, read_tcr_el2, read_ttbr0_el2, read_vbar_el2,
};
use arm_sysregs::el2::registers::SctlrEl2;
use mtex_platform::Region;
use uefi::boot::{self, MemoryType};

/// The exception level the loader runs at.
pub fn current_el() -> u64 {
    read_currentel().el().into()
}

/// Everything the jump needs, gathered while boot services still run.
pub struct Handover {
    /// The hypervisor image's first byte, where it is entered.
    pub entry: u64,
    /// The BootInfo, passed in x0.
    pub boot_info: u64,
    /// Made coherent with memory before the caches go off: the hypervisor's allocation, the
    /// BootInfo and what it points to (guest RAM, the staged guest image and options), and
    /// the loader's own image, whose last instructions run with the caches off.
    pub clean: [Region; 6],
}

/// Exits boot services and enters the hypervisor at EL2 with x0 = the BootInfo. Never
/// returns.
///
/// # Safety
/// Nothing that needs boot services may be live: no protocol or file left open (their drop
/// would call boot services) and nothing in pool memory used again. `h` must describe
/// memory the loader allocated, with the hypervisor image copied to `h.entry`.
pub unsafe fn exit_and_enter(h: Handover) -> ! {
    // SAFETY: the caller has closed every protocol; from here the loader allocates nothing,
    // prints nothing and calls no boot service. The map stays allocated (LOADER_DATA) and
    // is never dropped, as this function does not return.
    let map = unsafe { boot::exit_boot_services(Some(MemoryType::LOADER_DATA)) };
    core::mem::forget(map);
    let sctlr = mask_and_clean(&h);

    // Why memory is right for the hypervisor once the caches are off (Arm ARM, DDI 0487: the
    // DC CIVAC, IC IALLU and DSB descriptions; SCTLR_EL2.M, .C and .I); QEMU models no
    // cache, so this is argued, not tested:
    // - The loader wrote everything it hands over with the MMU and data cache on, so those
    //   bytes may sit in dirty lines only. DC CIVAC to the point of coherency, above, writes
    //   each line back to memory and drops it; the DSB below completes them (maintenance is
    //   only guaranteed complete after a DSB).
    // - IC IALLU drops instructions cached for these addresses from earlier occupants of the
    //   memory; DSB completes it, ISB discards what was fetched before it.
    // - With SCTLR_EL2.M = 0, EL2 data accesses are Device-nGnRnE, and with I = 0 instruction
    //   fetches are Normal, Inner and Outer Non-cacheable: both go to memory, which now
    //   holds the loader's bytes.
    //   Lines refilled by speculation after the DC CIVAC, while the MMU was still on, are
    //   clean copies of those same bytes (nothing writes the handed-over ranges after their
    //   clean), so whether or not a non-cacheable access hits one, it reads the same data.
    //   Stale clean lines may therefore survive: the hypervisor must invalidate what it
    //   writes with its caches off before it turns them on, as Linux's head.S does.
    // - UEFI maps VA = PA, so the instruction after the MMU-off ISB is fetched from the same
    //   address, now physical. It is part of the loader image, cleaned to the PoC above
    //   (edk2 only cleans loaded code to the point of unification): as Linux's EFI stub did,
    //   "clean the remainder of this routine to the PoC so that we can safely disable the
    //   MMU and caches" (arch/arm64/kernel/efi-entry.S, v5.10).
    // - Nothing below touches memory: the values are in registers, no stack is used. The
    //   ISB just before the SCTLR_EL2 write is also what Linux's pre_disable_mmu_workaround
    //   puts there (Qualcomm Falkor erratum E1041).
    // x1..x3 are zero, as Linux's booting.rst asks of an arm64 Image's loader.
    //
    // SAFETY: the hypervisor image was copied to `h.entry` and `h.boot_info` holds a valid
    // BootInfo, both in memory that the loader allocated as LOADER_DATA and that stays the
    // hypervisor's; interrupts are masked, and the cache argument above holds. The branch
    // leaves Rust for good (noreturn).
    unsafe {
        asm!(
            "dsb sy",
            "ic iallu",
            "dsb sy",
            "isb",
            "msr sctlr_el2, {sctlr}",
            "isb",
            "br {entry}",
            sctlr = in(reg) sctlr,
            entry = in(reg) h.entry,
            in("x0") h.boot_info,
            in("x1") 0u64,
            in("x2") 0u64,
            in("x3") 0u64,
            options(noreturn, nostack),
        )
    }
}

/// Masks interrupts and cleans what is handed over to the point of coherency; returns
/// SCTLR_EL2 with the MMU and caches off, for the jump to write (the argument for why that
/// is enough is at `exit_and_enter`'s jump).
fn mask_and_clean(h: &Handover) -> u64 {
    // SAFETY: masking every exception the firmware could still deliver; the loader handles
    // none of them from here on, and `install_and_return` restores the mask it found.
    unsafe { write_daif(Daif::D | Daif::A | Daif::I | Daif::F) };
    let line = dcache_line();
    for r in &h.clean {
        clean_invalidate_to_poc(*r, line);
    }
    (read_sctlr_el2() - (SctlrEl2::M | SctlrEl2::C | SctlrEl2::I)).bits()
}

/// The smallest data cache line in bytes: CTR_EL0.DminLine is log2 of its words.
fn dcache_line() -> u64 {
    4 << read_ctr_el0().dminline()
}

/// DC CIVAC over `r`: every line written back to the point of coherency and invalidated.
fn clean_invalidate_to_poc(r: Region, line: u64) {
    let mut addr = r.base & !(line - 1);
    while addr < r.end() {
        // SAFETY: DC CIVAC changes no data, only where it is held; `addr` lies in memory the
        // loader allocated or was loaded into, identity-mapped by UEFI, so it cannot fault.
        // Not `nomem`: the compiler must not move the loader's writes past it.
        unsafe { asm!("dc civac, {}", in(reg) addr, options(nostack, preserves_flags)) };
        addr += line;
    }
}

/// The firmware's EL2 controls, read for install mode (`Resume::from_el2`).
pub fn el2_controls() -> mtex_platform::firmware_el1::El2Controls {
    mtex_platform::firmware_el1::El2Controls {
        sctlr_el2: read_sctlr_el2().bits(),
        tcr_el2: read_tcr_el2().bits(),
        ttbr0_el2: read_ttbr0_el2().bits(),
        mair_el2: read_mair_el2().bits(),
        vbar_el2: read_vbar_el2().bits(),
        cptr_el2: read_cptr_el2().bits(),
    }
}

/// Install mode: enters the hypervisor at EL2 as [`exit_and_enter`] does, but with boot
/// services still running; the hypervisor comes back to this call's return, at EL1, on the
/// firmware's own translation tables and stack (the assembly below stores where in the
/// BootInfo's `resume`). Returns with interrupts as they were.
///
/// # Safety
/// As for [`exit_and_enter`], except that boot services stay up: `h` describes memory the
/// loader allocated, the hypervisor image copied to `h.entry`, and `h.boot_info` a BootInfo
/// in install mode whose `resume` holds the converted EL1 controls.
pub unsafe fn install_and_return(h: &Handover) {
    let masked = read_daif();
    let sctlr = mask_and_clean(h);
    // SAFETY: per the caller's contract; `mtex_install` saves every callee-saved register
    // and returns as a C function (at EL1), and the cache argument of `exit_and_enter`
    // holds for what it hands over. What it writes after the clean (its stack frame, the
    // resume fields) is read back with caches on, except the resume fields, which it cleans
    // itself.
    unsafe { mtex_install(h.boot_info, h.entry, sctlr) };
    // SAFETY: the interrupt mask the firmware had at the call, back as it was.
    unsafe { write_daif(masked) };
}

unsafe extern "C" {
    /// x0 = the BootInfo, x1 = the hypervisor's entry, x2 = SCTLR_EL2 with the MMU and caches
    /// off. Returns at EL1.
    fn mtex_install(boot_info: u64, entry: u64, sctlr_off: u64);
}

// Why this is assembly: the stack pointer, PSTATE.SP and the return address must be taken
// as the hypervisor will find them, after the last call frame is pushed, and the jump may
// touch no memory once the MMU is off. The frame saves what AAPCS64 says a callee keeps
// (x19-x29, x30, d8-d15); the hypervisor preserves no general register, so all of them
// are restored from it at the resume label.
core::arch::global_asm!(
    ".global mtex_install",
    "mtex_install:",
    "sub sp, sp, #176",
    "stp x19, x20, [sp, #0]",
    "stp x21, x22, [sp, #16]",
    "stp x23, x24, [sp, #32]",
    "stp x25, x26, [sp, #48]",
    "stp x27, x28, [sp, #64]",
    "stp x29, x30, [sp, #80]",
    "stp d8, d9, [sp, #96]",
    "stp d10, d11, [sp, #112]",
    "stp d12, d13, [sp, #128]",
    "stp d14, d15, [sp, #144]",
    // Where EL1 resumes, with which stacks: x11 = &boot_info.resume.
    "mov x11, #{resume}",
    "add x11, x0, x11",
    "adr x9, 1f",
    "str x9, [x11, #{pc}]",
    "mov x9, sp",
    "str x9, [x11, #{sp}]",
    "mrs x10, spsel",
    "str x10, [x11, #{spsel}]",
    // On SP_EL0, read SP_EL2 (the exception stack) by switching to it for one instruction.
    "cbnz x10, 2f",
    "msr spsel, #1",
    "mov x9, sp",
    "msr spsel, #0",
    "2: str x9, [x11, #{sp_el1}]",
    // Each field to the point of coherency (a line holds at least 16 bytes, so four
    // operations cover them whatever the line size).
    "add x9, x11, #{pc}",
    "dc civac, x9",
    "add x9, x11, #{sp}",
    "dc civac, x9",
    "add x9, x11, #{sp_el1}",
    "dc civac, x9",
    "add x9, x11, #{spsel}",
    "dc civac, x9",
    "dsb sy",
    "ic iallu",
    "dsb sy",
    "isb",
    "msr sctlr_el2, x2",
    "isb",
    // x1..x3 = 0 at the hypervisor's entry, as for an arm64 Image.
    "mov x16, x1",
    "mov x1, #0",
    "mov x2, #0",
    "mov x3, #0",
    "br x16",
    // EL1, MMU and caches on with the firmware's tables, on the stack stored above.
    "1: ldp x19, x20, [sp, #0]",
    "ldp x21, x22, [sp, #16]",
    "ldp x23, x24, [sp, #32]",
    "ldp x25, x26, [sp, #48]",
    "ldp x27, x28, [sp, #64]",
    "ldp x29, x30, [sp, #80]",
    "ldp d8, d9, [sp, #96]",
    "ldp d10, d11, [sp, #112]",
    "ldp d12, d13, [sp, #128]",
    "ldp d14, d15, [sp, #144]",
    "add sp, sp, #176",
    "ret",
    resume = const RESUME,
    pc = const core::mem::offset_of!(Resume, pc),
    sp = const core::mem::offset_of!(Resume, sp),
    sp_el1 = const core::mem::offset_of!(Resume, sp_el1),
    spsel = const core::mem::offset_of!(Resume, spsel),
);

const RESUME: usize = core::mem::offset_of!(BootInfo, resume);
// `mov` takes the offset as one 16-bit immediate; the fields are 8-byte aligned for `str`.
const _: () = assert!(RESUME < 1 << 16 && RESUME.is_multiple_of(8));
