//! Exception entry and return, shaped like Linux's entry.S and entry-common.c: the vector
//! saves a pt_regs frame on the task's kernel stack, `el0_sync` runs
//! enter_from_user_mode → the syscall → exit_to_user_mode, and `ret_to_user` restores the
//! frame and ERETs. The MTE work of entry and exit is the policy's (mte_policy.rs).

use super::{irq, mte_policy, syscalls};
use arm_sysregs::el1::accessors::{read_esr_el1, read_far_el1};
use core::arch::global_asm;
use core::mem::offset_of;

/// The user registers saved on kernel entry.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PtRegs {
    pub x: [u64; 31],
    pub sp: u64,
    pub pc: u64,
    pub pstate: u64,
}

const _: () = assert!(offset_of!(PtRegs, sp) == 248);
const _: () = assert!(offset_of!(PtRegs, pc) == 256);
const _: () = assert!(size_of::<PtRegs>() == 272);

impl PtRegs {
    /// A fresh EL0 context: EL0t, nothing masked, at `pc` with SP_EL0 = `sp`.
    pub fn user(pc: u64, sp: u64) -> Self {
        Self {
            x: [0; 31],
            sp,
            pc,
            pstate: 0,
        }
    }
}

global_asm!(
    // kernel_entry el: the interrupted context's whole frame on the kernel stack (SP-based
    // stores: never tag checked). From EL0 the stack is the task's empty kernel stack and
    // SP_EL0 is saved too; from EL1 the frame goes below the interrupted kernel code's.
    ".macro kernel_entry el",
    "sub sp, sp, #272",
    "stp x0, x1, [sp, #0]",
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
    ".if \\el == 0",
    "mrs x21, sp_el0",
    ".else",
    "mov x21, xzr",
    ".endif",
    "stp x30, x21, [sp, #240]",
    "mrs x22, elr_el1",
    "mrs x23, spsr_el1",
    "stp x22, x23, [sp, #256]",
    ".endm",
    // kernel_exit el: the frame back, then ERET.
    ".macro kernel_exit el",
    "ldp x22, x23, [sp, #256]",
    "ldp x30, x21, [sp, #240]",
    "msr elr_el1, x22",
    "msr spsr_el1, x23",
    ".if \\el == 0",
    "msr sp_el0, x21",
    ".endif",
    "ldp x0, x1, [sp, #0]",
    "ldp x2, x3, [sp, #16]",
    "ldp x4, x5, [sp, #32]",
    "ldp x6, x7, [sp, #48]",
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
    "add sp, sp, #272",
    "eret",
    ".endm",
    ".macro kvector handler",
    ".balign 0x80",
    "b \\handler",
    ".endm",
    ".section .text.kvectors, \"ax\"",
    ".balign 0x800",
    ".global mtex_kernel_vectors",
    "mtex_kernel_vectors:",
    // Current EL with SP0: never used (the kernel runs on SP_EL1).
    ".irp i, 0,1,2,3",
    "kvector mtex_kernel_fault_vector",
    ".endr",
    // Current EL with SPx: synchronous is a kernel fault; IRQ is the tick.
    "kvector mtex_kernel_fault_vector",
    "kvector mtex_el1_irq",
    ".irp i, 6,7",
    "kvector mtex_kernel_fault_vector",
    ".endr",
    // Lower EL, AArch64: synchronous (SVC, aborts), IRQ, then FIQ/SError.
    "kvector mtex_el0_sync",
    "kvector mtex_el0_irq",
    ".irp i, 10,11",
    "kvector mtex_kernel_fault_vector",
    ".endr",
    ".text",
    "mtex_el1_irq:",
    "kernel_entry 1",
    "mov x0, sp",
    "bl {el1_irq}",
    "kernel_exit 1",
    "mtex_el0_irq:",
    "kernel_entry 0",
    "mov x0, sp",
    "bl {el0_irq}",
    "b mtex_ret_to_user",
    "mtex_el0_sync:",
    "kernel_entry 0",
    "mov x0, sp",
    "bl {el0_sync}",
    ".global mtex_ret_to_user",
    "mtex_ret_to_user:",
    "kernel_exit 0",
    "mtex_kernel_fault_vector:",
    "mov x0, sp",
    "b {fault}",
    el0_sync = sym el0_sync,
    el0_irq = sym el0_interrupt,
    el1_irq = sym el1_interrupt,
    fault = sym kernel_fault,
);

unsafe extern "C" {
    fn mtex_ret_to_user();
    pub static mtex_kernel_vectors: u8;
}

/// A new task's first instructions (cpu_switch_to returns here, SP at its pt_regs):
/// schedule_tail, then the exit-to-user work and the return to EL0.
#[unsafe(naked)]
pub unsafe extern "C" fn ret_from_fork() {
    core::arch::naked_asm!(
        "bl {tail}",
        "b {ret}",
        tail = sym schedule_tail,
        ret = sym mtex_ret_to_user,
    )
}

extern "C" fn schedule_tail() {
    exit_to_user_mode();
}

/// exit_to_user_mode: the work loop (a pending reschedule), then the MTE steps. IRQs are
/// masked.
fn exit_to_user_mode() {
    while irq::take_need_resched() {
        super::task::schedule();
    }
    mte_policy::exit_to_user_mode();
    super::smp::unlock();
}

/// el0_interrupt: an IRQ while user code ran.
extern "C" fn el0_interrupt(_regs: &mut PtRegs) {
    super::smp::lock();
    mte_policy::enter_from_user_mode();
    irq::handle();
    exit_to_user_mode();
}

/// el1_interrupt: an IRQ in the kernel (IRQs are unmasked during system calls):
/// enter_from_kernel_mode, the handler, exit_to_kernel_mode. No preemption in the kernel.
extern "C" fn el1_interrupt(_regs: &mut PtRegs) {
    mte_policy::enter_from_kernel_mode();
    irq::handle();
    mte_policy::exit_to_kernel_mode();
}

/// el0_sync: the one dispatch on ESR_EL1.EC for exceptions from EL0.
extern "C" fn el0_sync(regs: &mut PtRegs) {
    // On several CPUs, kernel code runs under the kernel lock (`smp`).
    super::smp::lock();
    let esr = read_esr_el1().bits();
    match esr >> 26 {
        0x15 => {
            // el0_svc: enter_from_user_mode, IRQs on (DAIF_PROCCTX), invoke_syscall, IRQs
            // off (local_daif_mask), exit_to_user_mode.
            mte_policy::enter_from_user_mode();
            irq::enable();
            syscalls::invoke(regs);
            irq::disable();
            exit_to_user_mode();
        }
        0x24 if is_translation_fault(esr) => {
            // el0_da: enter_from_user_mode, IRQs on, do_page_fault, IRQs off,
            // exit_to_user_mode.
            let far = read_far_el1().bits();
            mte_policy::enter_from_user_mode();
            irq::enable();
            // SAFETY: a user task's mm is live while it runs; the reference to the running
            // task lives for one field read.
            let mapped = unsafe { (*super::task::current().mm).fault_in(far) };
            irq::disable();
            if !mapped {
                super::die(format_args!(
                    "user fault outside any mapping: FAR {far:#x} PC {:#x}",
                    regs.pc
                ));
            }
            super::FAULTS.fetch_add(1, core::sync::atomic::Ordering::Relaxed);
            exit_to_user_mode();
        }
        ec => {
            let far = read_far_el1().bits();
            super::die(format_args!(
                "user fault: EC {ec:#x} ESR {esr:#x} FAR {far:#x} PC {:#x} (task {})",
                regs.pc,
                // SAFETY: one field read of the running task; nothing else refers to it here.
                unsafe { super::task::current() }.pid
            ));
        }
    }
}

/// A data abort's DFSC says translation fault (level 0..3).
fn is_translation_fault(esr: u64) -> bool {
    esr & 0x3c == 0x04
}

extern "C" fn kernel_fault(_sp: u64) -> ! {
    let (esr, elr, far): (u64, u64, u64);
    // One `asm!` for the three, as at the guest's `entry::guest_fault`: arm-sysregs' readers
    // compile this report to one instruction less, and it may run inside an open phase.
    // SAFETY: reading the syndrome registers has no side effects.
    unsafe {
        core::arch::asm!("mrs {}, esr_el1", "mrs {}, elr_el1", "mrs {}, far_el1",
            out(reg) esr, out(reg) elr, out(reg) far)
    };
    super::die(format_args!(
        "kernel fault: EC {:#x} ESR {esr:#x} ELR {elr:#x} FAR {far:#x}",
        esr >> 26
    ));
}
