//! One cell of the probe: an untraced phase holding one LDR and one STR through a pointer,
//! at EL1 or at EL0, and what each access did: a synchronous tag-check fault (the probe's
//! vectors record it in x17 and resume after the access), an asynchronous one (TFSR_EL1 or
//! TFSRE0_EL1, read after DSB and ISB as Linux's `mte_check_tfsr_el1` does, and cleared
//! between the two accesses), or neither.
//!
//! Each phase is one asm block from PHASE_BEGIN to PHASE_END, so the PMU counts only the
//! two accesses at the cell's EL (and at EL1 the TFSR bookkeeping, which makes no access).
//! An EL0 cell enters EL0 once per access: ERET to `mtex_probe_user_load` or `_store`,
//! whose SVC comes back through `el0::el0_return` (EL1's registers restored), so that
//! TFSRE0_EL1 can be read and cleared between them.

use crate::hvc::{PHASE_END_HI, PHASE_END_LO, phase_end_call};
use aarch64_cpu::asm::barrier;
use arm_sysregs::el1::accessors::write_vbar_el1;
use arm_sysregs::el1::registers::VbarEl1;
use core::arch::{global_asm, naked_asm};
use mtex_abi::hypercall::PHASE_BEGIN;
use mtex_arch::mte_bits::tfsr;

/// What one access did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    None,
    /// A synchronous Data Abort with DFSC 0b010001 (tag check fault).
    Sync,
    /// TFSR_EL1/TFSRE0_EL1 recorded a fault for the access's half (TF1 for a TTBR1
    /// address, TF0 for TTBR0).
    Async,
}

impl Fault {
    pub fn name(self) -> &'static str {
        match self {
            Fault::None => "none",
            Fault::Sync => "sync",
            Fault::Async => "async",
        }
    }

    /// From the vector's flag (x17) and the TFSR value read after the access.
    fn of(sync: u64, tfsr_value: u64, ptr: u64) -> Self {
        let bit = if (ptr >> 55) & 1 == 1 {
            tfsr::TF1
        } else {
            tfsr::TF0
        };
        if sync != 0 {
            Fault::Sync
        } else if tfsr_value & bit != 0 {
            Fault::Async
        } else {
            Fault::None
        }
    }
}

/// One pass of a cell: the PHASE_END result, the passes the hypervisor still wants, and
/// what the load and the store did.
pub struct Pass {
    pub end: u64,
    pub more: u64,
    pub rd: Fault,
    pub wr: Fault,
}

/// Phase `id` at EL1: the load and the store through `ptr` with PSTATE.TCO = `tco`.
pub fn el1(id: u32, name: &[u64; 4], flags: u64, ptr: u64, tco: bool) -> Pass {
    let (end, more, rd_tfsr, rd_sync, wr_tfsr, wr_sync): (u64, u64, u64, u64, u64, u64);
    // SAFETY: the accesses touch only the first granule of a probe page (memory.rs), owned
    // by this program; a tag-check fault is resumed after the access by the probe's vector,
    // which changes only x9, x10 and x17 (declared); TFSR_EL1 and TCO are left clear; the
    // HVCs are mtex calls that change only x0 and x1.
    unsafe {
        core::arch::asm!(
            ".arch_extension memtag",
            "msr tfsr_el1, xzr",
            "isb",
            "hvc #0",
            "msr tco, x8",
            "ldr x13, [x12]",
            "dsb nsh",
            "isb",
            "mrs x2, tfsr_el1",
            "mov x3, x17",
            "mov x17, #0",
            "msr tfsr_el1, xzr",
            "isb",
            "str x13, [x12]",
            "dsb nsh",
            "isb",
            "mrs x4, tfsr_el1",
            "msr tco, #0",
            phase_end_call!(),
            "msr tfsr_el1, xzr",
            "isb",
            end_lo = const PHASE_END_LO,
            end_hi = const PHASE_END_HI,
            inout("x0") PHASE_BEGIN as u64 => end,
            inout("x1") id as u64 => more,
            inout("x2") name[0] => rd_tfsr,
            inout("x3") name[1] => rd_sync,
            inout("x4") name[2] => wr_tfsr,
            in("x5") name[3],
            in("x6") flags,
            in("x8") (tco as u64) << 25,
            out("x9") _,
            out("x10") _,
            in("x12") ptr,
            out("x13") _,
            in("x15") id as u64,
            inout("x17") 0u64 => wr_sync,
        )
    };
    Pass {
        end,
        more,
        rd: Fault::of(rd_sync, rd_tfsr, ptr),
        wr: Fault::of(wr_sync, wr_tfsr, ptr),
    }
}

/// Phase `id` at EL0: the load, then the store, through `ptr`, each in its own visit to EL0
/// entered with PSTATE.TCO = `tco` (SPSR_EL1.TCO) and interrupts masked.
pub fn el0(id: u32, name: &[u64; 4], flags: u64, ptr: u64, tco: bool) -> Pass {
    let (end, more, rd_tfsr, rd_sync, wr_tfsr, wr_sync): (u64, u64, u64, u64, u64, u64);
    // EL0t, D, A, I, F masked; TCO is SPSR bit 25.
    let spsr = 0x3c0 | (tco as u64) << 25;
    // SAFETY: EL0 runs only the two instructions at the entry given (the EL0 code page) and
    // an SVC, which returns here through el0_return with x19-x30 and SP restored; the access
    // touches only the first granule of a probe EL0 page; a tag-check fault is resumed after
    // it by the probe's vector (x9, x10, x17); x9, x10 and x30 are clobbered by the
    // round trip (declared); TFSRE0_EL1 is left clear; the HVCs change only x0 and x1.
    unsafe {
        core::arch::asm!(
            ".arch_extension memtag",
            "msr tfsre0_el1, xzr",
            "isb",
            "hvc #0",
            "mov x14, x8",
            "bl {call}",
            "dsb nsh",
            "isb",
            "mrs x2, tfsre0_el1",
            "mov x3, x17",
            "mov x17, #0",
            "msr tfsre0_el1, xzr",
            "isb",
            "mov x14, x11",
            "bl {call}",
            "dsb nsh",
            "isb",
            "mrs x4, tfsre0_el1",
            phase_end_call!(),
            "msr tfsre0_el1, xzr",
            "isb",
            call = sym el0_visit,
            end_lo = const PHASE_END_LO,
            end_hi = const PHASE_END_HI,
            inout("x0") PHASE_BEGIN as u64 => end,
            inout("x1") id as u64 => more,
            inout("x2") name[0] => rd_tfsr,
            inout("x3") name[1] => rd_sync,
            inout("x4") name[2] => wr_tfsr,
            in("x5") name[3],
            in("x6") flags,
            in("x7") spsr,
            in("x8") mtex_probe_user_load as *const () as u64,
            out("x9") _,
            out("x10") _,
            in("x11") mtex_probe_user_store as *const () as u64,
            in("x12") ptr,
            out("x13") _,
            out("x14") _,
            in("x15") id as u64,
            inout("x17") 0u64 => wr_sync,
            out("x30") _,
        )
    };
    Pass {
        end,
        more,
        rd: Fault::of(rd_sync, rd_tfsr, ptr),
        wr: Fault::of(wr_sync, wr_tfsr, ptr),
    }
}

/// Enters EL0 at x14 with SPSR_EL1 = x7; "returns" when EL0 makes its SVC (el0_return).
/// Clobbers x9 and x10.
#[unsafe(naked)]
unsafe extern "C" fn el0_visit() {
    naked_asm!(
        crate::el0::el0_save!("x30"),
        "msr elr_el1, x14",
        "msr spsr_el1, x7",
        "eret",
    )
}

global_asm!(
    ".pushsection .usertext, \"ax\"",
    ".balign 16",
    // x12 = the pointer; one access, then back to EL1.
    ".global mtex_probe_user_load",
    "mtex_probe_user_load:",
    "ldr x13, [x12]",
    "svc #0",
    ".global mtex_probe_user_store",
    "mtex_probe_user_store:",
    "str x13, [x12]",
    "svc #0",
    ".popsection",
);

unsafe extern "C" {
    fn mtex_probe_user_load();
    fn mtex_probe_user_store();
    static mtex_probe_vectors: u8;
}

// The probe's EL1 vectors. A tag-check fault (EC 0x25 from EL1, 0x24 from EL0; DFSC
// 0b010001) sets x17 = 1 and resumes after the access, touching no memory and only x9 and
// x10 besides; an SVC from EL0 goes back to EL1's caller (el0.rs); anything else is
// reported and ends the run.
global_asm!(
    ".pushsection .text.mtex_probe_vectors, \"ax\"",
    ".balign 0x800",
    ".global mtex_probe_vectors",
    "mtex_probe_vectors:",
    ".irp i, 0,1,2,3",
    ".balign 0x80",
    "mov x0, #\\i",
    "b {fault}",
    ".endr",
    // Current EL with SPx, synchronous.
    ".balign 0x80",
    "mrs x9, esr_el1",
    "lsr x10, x9, #26",
    "cmp x10, #0x25",
    "b.ne 9f",
    "and x10, x9, #0x3f",
    "cmp x10, #0x11",
    "b.ne 9f",
    "mrs x9, elr_el1",
    "add x9, x9, #4",
    "msr elr_el1, x9",
    "mov x17, #1",
    "eret",
    "9: mov x0, #4",
    "b {fault}",
    ".irp i, 5,6,7",
    ".balign 0x80",
    "mov x0, #\\i",
    "b {fault}",
    ".endr",
    // Lower EL (AArch64), synchronous.
    ".balign 0x80",
    "mrs x9, esr_el1",
    "lsr x10, x9, #26",
    "cmp x10, #0x15",
    "b.ne 1f",
    "b {el0_return}",
    "1: cmp x10, #0x24",
    "b.ne 9f",
    "and x10, x9, #0x3f",
    "cmp x10, #0x11",
    "b.ne 9f",
    "mrs x9, elr_el1",
    "add x9, x9, #4",
    "msr elr_el1, x9",
    "mov x17, #1",
    "eret",
    "9: mov x0, #8",
    "b {fault}",
    ".irp i, 9,10,11,12,13,14,15",
    ".balign 0x80",
    "mov x0, #\\i",
    "b {fault}",
    ".endr",
    ".popsection",
    fault = sym probe_fault,
    el0_return = sym crate::el0::el0_return,
);

/// VBAR_EL1 = the probe's vectors, for the rest of the run.
pub fn install_vectors() {
    // Only the vectors' address is taken.
    let v = &raw const mtex_probe_vectors as u64;
    // SAFETY: installs a complete, 2 KiB-aligned vector table.
    unsafe { write_vbar_el1(VbarEl1::from_bits_retain(v)) };
    barrier::isb(barrier::SY);
}

extern "C" fn probe_fault(vector: u64) -> ! {
    let (esr, elr, far): (u64, u64, u64);
    // One `asm!` for the three, as at `entry::guest_fault`.
    // SAFETY: reading the EL1 syndrome registers has no side effects.
    unsafe {
        core::arch::asm!("mrs {}, esr_el1", "mrs {}, elr_el1", "mrs {}, far_el1",
            out(reg) esr, out(reg) elr, out(reg) far)
    };
    crate::println!(
        "probe: unexpected exception, vector {vector} esr={esr:#x} elr={elr:#x} far={far:#x}"
    );
    crate::hvc::exit(0x100 | (esr >> 26))
}
