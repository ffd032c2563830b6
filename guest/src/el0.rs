//! Running code at EL0 inside a traced phase, so the step engine is exercised across an
//! ERET to EL0, EL0 accesses (counted under `:u`), an SVC back to EL1, and the exception
//! entry that sets PSTATE.TCO (cleared again as Linux's entry code does).
//!
//! `el0_call` saves EL1's callee-saved registers and SP (seven stores), ERETs to the user
//! code, which loads `n` times through a tagged pointer and makes an SVC; the EL1 vector
//! (entry.rs) jumps to `el0_return`, which restores them (seven loads, with TCO set by the
//! exception entry), clears TCO and returns to `el0_call`'s caller.

use crate::by_address::ByAddress;
use core::arch::{global_asm, naked_asm};
use mtex_abi::hypercall::{PHASE_BEGIN, PHASE_TRACED, pack_bytes};

/// EL1's callee-saved registers and SP while EL0 runs.
#[repr(C, align(16))]
struct SaveArea([u64; 14]);
#[unsafe(no_mangle)]
static EL0_SAVE: ByAddress<SaveArea> = ByAddress::new(SaveArea([0; 14]));

/// Fills `EL0_SAVE` as `el0_return` reads it back: x19–x29, then `$ret` in x30's slot (where
/// `el0_return` returns to), then SP. Clobbers x9 and x10. One definition of the area's
/// layout for `el0_call` and the snippet harness (snippet.rs), which returns elsewhere.
macro_rules! el0_save {
    ($ret:literal) => {
        concat!(
            "adrp x9, EL0_SAVE\n",
            "add x9, x9, :lo12:EL0_SAVE\n",
            "mov x10, sp\n",
            "stp x19, x20, [x9, #0]\n",
            "stp x21, x22, [x9, #16]\n",
            "stp x23, x24, [x9, #32]\n",
            "stp x25, x26, [x9, #48]\n",
            "stp x27, x28, [x9, #64]\n",
            "stp x29, ",
            $ret,
            ", [x9, #80]\n",
            "str x10, [x9, #96]"
        )
    };
}
pub(crate) use el0_save;

global_asm!(
    ".section .usertext, \"ax\"",
    ".balign 4096",
    ".global mtex_user_loads",
    // x1 = n, x3 = pointer: n loads, then back to EL1.
    "mtex_user_loads:",
    "1: ldr x12, [x3]",
    "subs x1, x1, #1",
    "b.ne 1b",
    "svc #0",
);

/// Enters EL0 at x0 with SP_EL0 = x2 (x1, x3 passed through); returns when EL0 makes an SVC.
#[unsafe(naked)]
unsafe extern "C" fn el0_call() {
    naked_asm!(
        el0_save!("x30"),
        "msr elr_el1, x0",
        "msr spsr_el1, xzr", // EL0t, nothing masked
        "msr sp_el0, x2",
        "eret",
    )
}

/// Reached from the EL1 lower-EL synchronous vector on the SVC: back to `el0_call`'s caller.
#[unsafe(naked)]
pub unsafe extern "C" fn el0_return() {
    naked_asm!(
        "adrp x9, EL0_SAVE",
        "add x9, x9, :lo12:EL0_SAVE",
        "ldp x19, x20, [x9, #0]",
        "ldp x21, x22, [x9, #16]",
        "ldp x23, x24, [x9, #32]",
        "ldp x25, x26, [x9, #48]",
        "ldp x27, x28, [x9, #64]",
        "ldp x29, x30, [x9, #80]",
        "ldr x10, [x9, #96]",
        "mov sp, x10",
        ".arch_extension memtag",
        "msr tco, #0",
        "ret",
    )
}

unsafe extern "C" {
    fn mtex_user_loads();
}

/// Runs `n` EL0 loads through `ptr` as traced phase `id`, with SP_EL0 = `user_sp`; returns
/// the PHASE_END result.
pub fn traced_loads(id: u64, name: &str, ptr: u64, n: u64, user_sp: u64) -> u64 {
    let name: [u64; 4] = pack_bytes(name.as_bytes());
    let result: u64;
    // SAFETY: el0_call runs the user code (its own EL0-executable page, loading only through
    // `ptr`, an EL0-accessible granule) and returns here with callee-saved registers and SP
    // restored; the HVCs are mtex calls. Everything else is declared clobbered.
    unsafe {
        core::arch::asm!(
            "hvc #0",
            "mov x0, x14",
            "mov x1, x11",
            "mov x2, x16",
            "mov x3, x17",
            "bl {call}",
            crate::hvc::phase_end_call!(),
            call = sym el0_call,
            end_lo = const crate::hvc::PHASE_END_LO,
                    end_hi = const crate::hvc::PHASE_END_HI,
                    inout("x0") PHASE_BEGIN as u64 => result,
            inout("x1") id => _,
            inout("x2") name[0] => _,
            inout("x3") name[1] => _,
            inout("x4") name[2] => _,
            inout("x5") name[3] => _,
            inout("x6") PHASE_TRACED => _,
            out("x7") _, out("x8") _, out("x9") _, out("x10") _,
            in("x11") n,
            out("x12") _, out("x13") _,
            in("x14") mtex_user_loads as *const () as u64,
            in("x15") id,
            in("x16") user_sp,
            in("x17") ptr,
            out("x18") _,
            out("x30") _,
        )
    };
    result
}
