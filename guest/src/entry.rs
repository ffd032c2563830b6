//! The Image header, the boot code and the EL1 vectors.

use core::arch::{global_asm, naked_asm};

/// The arm64 Image header (Documentation/arch/arm64/booting.rst): a branch over the header,
/// text_offset 0, the image size, flags (little-endian, 4 KiB pages) and the magic.
/// The boot code then sets the stack, zeroes .bss, enables FP/SIMD and the EL1 vectors.
/// Nothing compiled uses FP/SIMD (the softfloat target); FPEN is for the differential test's
/// one SIMD load (guest/src/differential.rs) and for EL0.
#[unsafe(naked)]
#[unsafe(no_mangle)]
#[unsafe(link_section = ".text.head")]
pub unsafe extern "C" fn _start() -> ! {
    naked_asm!(
        "b 3f",
        ".word 0",
        ".quad 0",                              // text_offset
        ".quad __image_size",                   // image_size (linker script)
        ".quad 2",                              // flags: LE, 4 KiB pages
        ".quad 0", ".quad 0", ".quad 0",
        ".ascii \"ARM\\x64\"",
        ".word 0",
        "3: msr daifset, #0xf",
        "adrp x9, __stack_top",
        "add x9, x9, :lo12:__stack_top",
        "mov sp, x9",
        "adrp x9, __bss_start",
        "add x9, x9, :lo12:__bss_start",
        "adrp x10, __bss_end",
        "add x10, x10, :lo12:__bss_end",
        "1: cmp x9, x10",
        "b.hs 2f",
        "stp xzr, xzr, [x9], #16",
        "b 1b",
        // CPACR_EL1.FPEN = 0b11: no FP/SIMD traps at EL1/EL0 (the differential test's LD1).
        "2: mov x9, #(3 << 20)",
        "msr cpacr_el1, x9",
        "adrp x9, guest_vectors",
        "add x9, x9, :lo12:guest_vectors",
        "msr vbar_el1, x9",
        "isb",
        "bl {main}",
        "b .",
        main = sym crate::guest_main,
    )
}

// Any exception the guest takes is unexpected in these programs: report it and exit.
global_asm!(
    ".macro guest_vector index",
    ".balign 0x80",
    "mov x0, #\\index",
    "b {fault}",
    ".endm",
    ".section .text.vectors, \"ax\"",
    ".balign 0x800",
    ".global guest_vectors",
    "guest_vectors:",
    ".irp i, 0,1,2,3",
    "guest_vector \\i",
    ".endr",
    // Current EL with SPx, synchronous: the differential test (x14 = DIFF_MAGIC) expects tag
    // check faults; it gets x17 = 1 and resumes after the faulting access. This path touches
    // no memory, so a traced phase counts nothing here but instructions.
    ".balign 0x80",
    "mov x16, #{magic}",
    "cmp x14, x16",
    "b.ne 9f",
    "mrs x17, esr_el1",
    "ubfx x16, x17, #26, #6",
    "cmp x16, #0x25",
    "b.ne 9f",
    "and x16, x17, #0x3f",
    "cmp x16, #0x11",
    "b.ne 9f",
    "mrs x16, elr_el1",
    "add x16, x16, #4",
    "msr elr_el1, x16",
    "mov x17, #1",
    "eret",
    "9: mov x0, #4",
    "b {fault}",
    ".irp i, 5,6,7",
    "guest_vector \\i",
    ".endr",
    // Lower EL, synchronous: an SVC from the EL0 code of el0.rs returns to its caller.
    ".balign 0x80",
    "mrs x9, esr_el1",
    "lsr x9, x9, #26",
    "cmp x9, #0x15",
    "b.ne 9f",
    "b {el0_return}",
    "9: mov x0, #8",
    "b {fault}",
    ".irp i, 9,10,11,12,13,14,15",
    "guest_vector \\i",
    ".endr",
    fault = sym guest_fault,
    magic = const crate::differential::DIFF_MAGIC,
    el0_return = sym crate::el0::el0_return,
);

pub(crate) extern "C" fn guest_fault(vector: u64) -> ! {
    let (esr, elr, far): (u64, u64, u64);
    // One `asm!` for the three rather than arm-sysregs' readers, which compile this report to
    // one instruction less: it may run inside an open phase, whose count must not move.
    // SAFETY: reading the EL1 syndrome registers has no side effects.
    unsafe {
        core::arch::asm!("mrs {}, esr_el1", "mrs {}, elr_el1", "mrs {}, far_el1",
            out(reg) esr, out(reg) elr, out(reg) far)
    };
    crate::println!("guest: exception vector {vector} esr={esr:#x} elr={elr:#x} far={far:#x}");
    crate::hvc::exit(0x100 | (esr >> 26))
}
