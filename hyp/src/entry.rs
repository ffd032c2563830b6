//! Reset entry, the EL2 exception vectors and the guest context switch. The assembly is only
//! what cannot be Rust: stack set-up, register save/restore and ERET.

use crate::context::{CONTEXT_SIZE, ELR_OFFSET, GuestContext, SPSR_OFFSET};
use core::arch::{global_asm, naked_asm};

// The arm64 Image header (Linux Documentation/arch/arm64/booting.rst), the image's first 64
// bytes: `qemu -kernel` loads an image with this header at RAM base + text_offset and enters
// it with x0 = its device tree, and the UEFI loader reads image_size from it to know how much
// memory to reserve (bss and stack included). Flags 0xa: little-endian, 4 KiB pages, may be
// placed anywhere in RAM.
global_asm!(
    ".section .text.head, \"ax\"",
    ".global mtex_image_header",
    "mtex_image_header:",
    "b _start",
    ".long 0",
    ".quad 0x200000",
    ".quad __hyp_image_size",
    ".quad 0xa",
    ".quad 0, 0, 0",
    ".ascii \"ARM\\x64\"",
    ".long 0",
);

/// ELF relocation type of every relocation a position-independent image needs (the host
/// checks at build time that the image has no other kind: `images::check_hyp_relocations`).
pub const R_AARCH64_RELATIVE: u64 = 1027;

/// The top of the boot CPU's EL2 stack (link.ld).
pub fn boot_stack_top() -> u64 {
    unsafe extern "C" {
        static __stack_top: u8;
    }
    (&raw const __stack_top) as u64
}

/// Reset entry. Entered at EL2 with the MMU off, x0 = a device tree (`qemu -kernel`) or a
/// `BootInfo` (the UEFI loader), wherever the image was loaded.
///
/// The image is linked at address 0 as a position-independent executable: code reaches
/// everything PC-relative, and the absolute addresses stored in data (vtables, pointers in
/// statics) are R_AARCH64_RELATIVE relocations, applied here before any Rust runs by adding
/// the load address. With the MMU and data cache off the stores go to memory; `mmu::
/// enable_el2` invalidates the image's lines before turning the cache on, so that no line
/// fetched before the relocation (by firmware) can be hit afterwards.
#[unsafe(naked)]
#[unsafe(no_mangle)]
#[unsafe(link_section = ".text.entry")]
pub unsafe extern "C" fn _start() -> ! {
    naked_asm!(
        "msr daifset, #0xf",
        // x9 = load address (the image is linked at 0).
        "adrp x9, __hyp_start",
        "add x9, x9, :lo12:__hyp_start",
        "adrp x10, __rela_start",
        "add x10, x10, :lo12:__rela_start",
        "adrp x11, __rela_end",
        "add x11, x11, :lo12:__rela_end",
        // Elf64_Rela: r_offset, r_info, r_addend.
        "1: cmp x10, x11",
        "b.hs 3f",
        "ldp x12, x13, [x10], #16",
        "ldr x14, [x10], #8",
        "cmp x13, #{relative}",
        // Any other type cannot be applied: stop here (the host refuses such a build).
        "2: b.ne 2b",
        "add x14, x14, x9",
        "str x14, [x12, x9]",
        "b 1b",
        "3: adrp x9, __stack_top",
        "add x9, x9, :lo12:__stack_top",
        "mov sp, x9",
        // Zero .bss (16-byte aligned by the linker script). x0 is preserved for hyp_main.
        "adrp x9, __bss_start",
        "add x9, x9, :lo12:__bss_start",
        "adrp x10, __bss_end",
        "add x10, x10, :lo12:__bss_end",
        "4: cmp x9, x10",
        "b.hs 5f",
        "stp xzr, xzr, [x9], #16",
        "b 4b",
        "5: adrp x9, mtex_vectors",
        "add x9, x9, :lo12:mtex_vectors",
        "msr vbar_el2, x9",
        "isb",
        "bl {main}",
        "b .",
        relative = const R_AARCH64_RELATIVE,
        main = sym crate::hyp_main,
    )
}

/// Guest time. Under `-icount` the counter advances with every instruction, the
/// hypervisor's included, so a single-stepped guest would see its clock run hundreds of
/// times faster than its own execution (and its timer tick would starve it). Every exit
/// therefore reads CNTPCT_EL0 on entry (vector or fast path) and before its ERET, and the
/// difference is hypervisor time, taken out of the guest's virtual counter through
/// CNTVOFF_EL2 by the exit tail every path ends in (`guest_clock.rs`, which keeps one
/// account for every CPU). The EL2 instructions of an exit outside that window are
/// accounted as constants: those before the entry read are subtracted from the timestamp it
/// stores (3 on the IRQ/other vectors, 5 on the synchronous one through the fast paths),
/// those after the tail's read are added to it (`guest_clock::EL2_AFTER_EXIT_READ`), plus
/// one for the exception entry, which QEMU's icount also counts (measured: without it the
/// guest clock ran one tick per exit fast).
///
/// Coarse guest time (`mtex.guest_time=coarse`, what the host asks for when QEMU runs
/// without `-icount`): the account is kept the same way, and a CPU's CNTVOFF_EL2 catches up
/// with it only once it is 100 µs behind. Without `-icount`, QEMU re-arms the guest's
/// virtual timer at every CNTVOFF_EL2 write and wakes its I/O thread to do it: measured on
/// the kernel matrix, 113 s with a write per exit against 7.7 s with the guest's timer off.
/// Without `-icount` guest time is not exact anyway (QEMU's own time per exit is not taken
/// out); on silicon a CNTVOFF_EL2 write is a register write.
pub const EL2_BEFORE_ENTRY_READ_VECTOR: u64 = 3;
pub const EL2_BEFORE_ENTRY_READ_SYNC: u64 = 5;

// The vector table (Arm ARM D1.3.1): 16 entries of 0x80 bytes. Exceptions from the guest
// (lower EL, AArch64) save the full context and go to `exits::dispatch`; anything taken at
// EL2 itself, or from AArch32, is a bug and goes to `exits::hyp_exception`.
global_asm!(
    ".macro hyp_fatal index",
    ".balign 0x80",
    "mov x0, #\\index",
    "b mtex_hyp_fatal",
    ".endm",
    ".macro guest_exit kind",
    ".balign 0x80",
    "sub sp, sp, #{size}",
    "stp x0, x1, [sp, #0]",
    "mrs x0, tpidr_el2",
    "mrs x1, cntpct_el0",
    "sub x1, x1, #{before_vector}",
    "str x1, [x0, #{exit_ts}]",
    "mov x0, #\\kind",
    "b mtex_save_and_dispatch",
    ".endm",
    ".section .text.vectors, \"ax\"",
    ".balign 0x800",
    ".global mtex_vectors",
    "mtex_vectors:",
    "hyp_fatal 0", "hyp_fatal 1", "hyp_fatal 2", "hyp_fatal 3",
    "hyp_fatal 4", "hyp_fatal 5", "hyp_fatal 6", "hyp_fatal 7",
    // Lower EL, synchronous: first the step engine's fast path (fast_step.rs).
    ".balign 0x80",
    "sub sp, sp, #{size}",
    "stp x0, x1, [sp, #0]",
    "stp x2, x3, [sp, #16]",
    "b mtex_fast_step",
    "guest_exit 1", "guest_exit 2", "guest_exit 3",
    "hyp_fatal 12", "hyp_fatal 13", "hyp_fatal 14", "hyp_fatal 15",
    "",
    "mtex_save_and_dispatch:",
    "stp x2, x3, [sp, #16]",
    "stp x4, x5, [sp, #32]",
    "stp x6, x7, [sp, #48]",
    "stp x8, x9, [sp, #64]",
    "stp x10, x11, [sp, #80]",
    "stp x12, x13, [sp, #96]",
    "stp x14, x15, [sp, #112]",
    "stp x16, x17, [sp, #128]",
    "stp x18, x19, [sp, #144]",
    "stp x20, x21, [sp, #160]",
    "stp x22, x23, [sp, #176]",
    "stp x24, x25, [sp, #192]",
    "stp x26, x27, [sp, #208]",
    "stp x28, x29, [sp, #224]",
    "mrs x1, elr_el2",
    "stp x30, x1, [sp, #240]",
    "mrs x1, spsr_el2",
    "str x1, [sp, #{spsr}]",
    "mov x1, sp",
    "bl {dispatch}",
    "",
    ".global mtex_restore_and_eret",
    "mtex_restore_and_eret:",
    "ldr x1, [sp, #{spsr}]",
    "msr spsr_el2, x1",
    "ldp x30, x1, [sp, #240]",
    "msr elr_el2, x1",
    "ldp x8, x9, [sp, #64]",
    "ldp x10, x11, [sp, #80]",
    "ldp x12, x13, [sp, #96]",
    "ldp x14, x15, [sp, #112]",
    "ldp x16, x17, [sp, #128]",
    "ldp x18, x19, [sp, #144]",
    "ldp x20, x21, [sp, #160]",
    "ldp x22, x23, [sp, #176]",
    "ldp x24, x25, [sp, #192]",
    "ldp x26, x27, [sp, #208]",
    "ldp x28, x29, [sp, #224]",
    // Guest time, x0..x7 and the ERET: the exit tail (`guest_clock.rs`).
    "mrs x0, tpidr_el2",
    "b mtex_eret_with_guest_time",
    "",
    // A fault at EL2 may come from a broken stack: start again from the top of it.
    "mtex_hyp_fatal:",
    "adrp x9, __stack_top",
    "add x9, x9, :lo12:__stack_top",
    "mov sp, x9",
    "mrs x1, esr_el2",
    "mrs x2, elr_el2",
    "mrs x3, far_el2",
    "bl {fatal}",
    "b .",
    size = const CONTEXT_SIZE,
    spsr = const SPSR_OFFSET,
    exit_ts = const core::mem::offset_of!(crate::fast_step::FastStep, exit_ts),
    before_vector = const EL2_BEFORE_ENTRY_READ_VECTOR,
    dispatch = sym crate::exits::dispatch,
    fatal = sym crate::exits::hyp_exception,
);

// The save sequence above stores x30 and ELR as one pair at 240.
const _: () = assert!(ELR_OFFSET == 248);

/// Runs the guest from `ctx` for the first time on this CPU. The context is copied to the
/// top of this CPU's EL2 stack (`stack_top`), where every later exception saves and restores
/// it.
///
/// # Safety
///
/// Must be called once per CPU, with the guest's stage 2, traps and EL1 state set up: the
/// EL2 stack is reset, so nothing on it may be in use afterwards, and `ctx` must not be in
/// its top `CONTEXT_SIZE` bytes (the copy would overwrite it as it reads).
#[unsafe(naked)]
pub unsafe extern "C" fn enter_guest(ctx: *const GuestContext, stack_top: u64) -> ! {
    naked_asm!(
        "sub x1, x1, #{size}",
        "mov x2, #0",
        "1: ldr x3, [x0, x2]",
        "str x3, [x1, x2]",
        "add x2, x2, #8",
        "cmp x2, #{size}",
        "b.ne 1b",
        "mov sp, x1",
        // The guest's clock starts now: no EL2 time to take out yet.
        "mrs x0, tpidr_el2",
        "mrs x1, cntpct_el0",
        "str x1, [x0, #{exit_ts}]",
        "b mtex_restore_and_eret",
        size = const CONTEXT_SIZE,
        exit_ts = const core::mem::offset_of!(crate::fast_step::FastStep, exit_ts),
    )
}
