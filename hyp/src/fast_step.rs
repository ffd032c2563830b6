//! The step engine's fast path, in assembly: a single-step exit whose retiring instruction
//! and next instruction are both inert (`mtex_trace::decode::is_inert`: data processing and
//! direct branches) only adds one to the instruction count, so it is handled in a few dozen
//! instructions without the full context save or the Rust dispatch. Everything else (a cache
//! miss on the code page, a memory access, a system instruction, any other exit) falls through
//! to the full path unchanged. The exactness tests prove the counts identical either way.

use core::arch::global_asm;
use core::mem::offset_of;

/// State shared by the fast path and `trace.rs`. Written by Rust only inside the hypervisor
/// state's exclusive borrow, read and written by the fast path while the guest is stopped:
/// one CPU, never concurrently.
#[repr(C)]
pub struct FastStep {
    /// 1 while the pending instruction is inert (the fast path may retire it).
    pub pending_inert: u64,
    /// PC of the pending instruction when it is inert.
    pub pending_pc: u64,
    /// The cached code page: VA page, the TTBRs and mode it was translated under, PA page.
    pub va_page: u64,
    pub ttbr0: u64,
    pub ttbr1: u64,
    /// SCTLR_EL1.M | (EL0 ? 2 : 0).
    pub mode: u64,
    /// 0 when the cache is empty.
    pub pa_page: u64,
    /// Single-step exits the fast path handled, over the run.
    pub steps: u64,
    /// Inert instructions it retired, by EL (reset per traced phase).
    pub inert_el0: u64,
    pub inert_el1: u64,
    /// CNTPCT_EL0 when the current exit entered EL2 (see `entry.rs`, guest time).
    pub exit_ts: u64,
}

const _: () = assert!(offset_of!(FastStep, pending_inert) == 0);
const _: () = assert!(offset_of!(FastStep, pending_pc) == 8);
const _: () = assert!(offset_of!(FastStep, va_page) == 16);
const _: () = assert!(offset_of!(FastStep, ttbr0) == 24);
const _: () = assert!(offset_of!(FastStep, ttbr1) == 32);
const _: () = assert!(offset_of!(FastStep, mode) == 40);
const _: () = assert!(offset_of!(FastStep, pa_page) == 48);
const _: () = assert!(offset_of!(FastStep, steps) == 56);
const _: () = assert!(offset_of!(FastStep, inert_el0) == 64);
const _: () = assert!(offset_of!(FastStep, inert_el1) == 72);
const _: () = assert!(offset_of!(FastStep, exit_ts) == 80);

#[unsafe(no_mangle)]
static mut MTEX_FAST: FastStep = FastStep {
    pending_inert: 0,
    pending_pc: 0,
    va_page: 0,
    ttbr0: 0,
    ttbr1: 0,
    mode: 0,
    pa_page: 0,
    steps: 0,
    inert_el0: 0,
    inert_el1: 0,
    exit_ts: 0,
};

/// Access to the shared state.
///
/// # Safety
///
/// Only from code running with the hypervisor state borrowed (exception handlers, boot):
/// the fast path runs only while no Rust code does.
pub unsafe fn fast() -> &'static mut FastStep {
    let state = &raw mut MTEX_FAST;
    // SAFETY: per the contract, nothing else references MTEX_FAST meanwhile.
    unsafe { &mut *state }
}

// Entered from the lower-EL synchronous vector with x0..x3 saved in a fresh context frame.
global_asm!(
    ".global mtex_fast_step",
    "mtex_fast_step:",
    "adrp x0, MTEX_FAST",
    "add x0, x0, :lo12:MTEX_FAST",
    "mrs x1, cntpct_el0",
    "sub x1, x1, #{before_sync}",
    "str x1, [x0, #80]",
    "ldr x1, [x0, #0]",
    // Not tracing an inert instruction (every exit outside traced phases): leave at once.
    "cbz x1, 9f",
    "stp x4, x5, [sp, #32]",
    "mrs x2, esr_el2",
    "lsr x1, x2, #26",
    "cmp x1, #0x32",
    "b.ne 8f",
    // ISS.ISV clear: the step was taken at an EL1 exception handler's first instruction (an
    // exception instead of, or after, the pending one): the full path decides.
    "tbz x2, #24, 8f",
    // The code page must be the cached one, under the same TTBRs and mode.
    "mrs x1, elr_el2",
    "and x2, x1, #0xfffffffffffff000",
    "ldr x3, [x0, #16]",
    "cmp x2, x3",
    "b.ne 8f",
    "mrs x2, ttbr0_el1",
    "ldr x3, [x0, #24]",
    "cmp x2, x3",
    "b.ne 8f",
    "mrs x2, ttbr1_el1",
    "ldr x3, [x0, #32]",
    "cmp x2, x3",
    "b.ne 8f",
    "mrs x2, spsr_el2",
    "mrs x3, sctlr_el1",
    "and x3, x3, #1",
    "tst x2, #0xc",
    "b.ne 1f",
    "orr x3, x3, #2",
    "1: ldr x4, [x0, #40]",
    "cmp x3, x4",
    "b.ne 8f",
    "ldr x4, [x0, #48]",
    "cbz x4, 8f",
    "and x5, x1, #0xffc",
    "ldr w5, [x4, x5]",
    // is_inert(w5): the same masks as mtex_trace::decode::is_inert.
    "and w4, w5, #0x1c000000",
    "mov w3, #0x10000000",
    "cmp w4, w3",
    "b.eq 2f",
    "and w4, w5, #0x0e000000",
    "mov w3, #0x0a000000",
    "cmp w4, w3",
    "b.eq 2f",
    "and w4, w5, #0x7c000000",
    "mov w3, #0x14000000",
    "cmp w4, w3",
    "b.eq 2f",
    "mov w3, #0x34000000",
    "cmp w4, w3",
    "b.eq 2f",
    "lsr w4, w5, #24",
    "cmp w4, #0x54",
    "b.ne 8f",
    "tbnz w5, #4, 8f",
    // Retire the pending inert instruction at the current EL (inert ones never change it),
    // make the next one pending, re-arm the step, return.
    "2: ldr x4, [x0, #56]",
    "add x4, x4, #1",
    "str x4, [x0, #56]",
    "mov x3, #64",
    "tst x2, #0xc",
    "b.eq 3f",
    "mov x3, #72",
    "3: ldr x4, [x0, x3]",
    "add x4, x4, #1",
    "str x4, [x0, x3]",
    "str x1, [x0, #8]",
    "orr x2, x2, #(1 << 21)",
    "msr spsr_el2, x2",
    // Guest time: the EL2 time of this exit is taken out of the guest's virtual counter.
    "ldr x1, [x0, #80]",
    "mrs x3, cntpct_el0",
    "sub x1, x3, x1",
    "add x1, x1, #{after_fast}",
    "mrs x3, cntvoff_el2",
    "add x3, x3, x1",
    "msr cntvoff_el2, x3",
    "ldp x4, x5, [sp, #32]",
    "ldp x2, x3, [sp, #16]",
    "ldp x0, x1, [sp, #0]",
    "add sp, sp, #{size}",
    "eret",
    // Anything else: the full path, as if the vector had gone there directly.
    "8: ldp x4, x5, [sp, #32]",
    "9: ldp x2, x3, [sp, #16]",
    "mov x0, #0",
    "b mtex_save_and_dispatch",
    size = const crate::context::CONTEXT_SIZE,
    before_sync = const crate::entry::EL2_BEFORE_ENTRY_READ_SYNC,
    after_fast = const crate::entry::EL2_AFTER_EXIT_READ_FAST,
);
