//! The guest's timer: the EL1 virtual timer's interrupt (a PPI) arrives at EL2 (HCR_EL2.IMO)
//! and is forwarded to the guest as a virtual interrupt through a GICv3 list register, which
//! the guest acknowledges and ends through its virtual CPU interface (ICC_* registers at EL1
//! are the ICV_* ones when IMO is set).
//!
//! The timer's output is level-sensitive: before ending the physical interrupt the
//! hypervisor masks it at the source (CNTV_CTL_EL0.IMASK), and the guest's handler, which
//! re-arms the timer by writing CNTV_CTL_EL0, unmasks it again — the scheme small
//! hypervisors use instead of hardware-linked (HW = 1) list registers.

use crate::state::Hyp;
use arm_sysregs::el0::accessors::{read_cntv_ctl_el0, write_cntv_ctl_el0};
use arm_sysregs::el0::registers::CntvCtlEl0;
use mtex_platform::guest_vm;

/// ICH_LR<n>_EL2 fields: State (63:62) pending = 0b01, Group (60), Priority (55:48),
/// vINTID (31:0).
const LR_PENDING: u64 = 1 << 62;
const LR_ACTIVE: u64 = 2 << 62;
const LR_STATE_MASK: u64 = 3 << 62;
const LR_GROUP1: u64 = 1 << 60;
const LR_PRIORITY: u64 = 0xa0 << 48;

/// Enables the virtual CPU interface (ICH_HCR_EL2.En), so list registers are delivered.
pub fn init() {
    use arm_sysregs::el2::registers::IchHcrEl2;
    // SAFETY: ICH_HCR_EL2 only controls the guest's virtual CPU interface.
    unsafe { arm_sysregs::el2::accessors::write_ich_hcr_el2(IchHcrEl2::EN) };
    aarch64_cpu::asm::barrier::isb(aarch64_cpu::asm::barrier::SY);
}

/// The guest's virtual timer fired: mask it at the source and make it pending in LR0, as the
/// INTID of the guest's machine (the host's may differ).
pub fn forward(hyp: &mut Hyp) {
    // With E2H = 0, CNTV_CTL_EL0 at EL2 is the guest's virtual timer control; only its
    // interrupt mask changes.
    write_cntv_ctl_el0(read_cntv_ctl_el0() | CntvCtlEl0::IMASK);
    aarch64_cpu::asm::barrier::isb(aarch64_cpu::asm::barrier::SY);
    // SAFETY: LR0 holds only the timer's interrupt: free, it becomes pending; still active
    // (the guest re-armed the timer before its EOI and it fired again), pending and active,
    // so the tick is not lost; already pending, it stays so.
    unsafe {
        let lr: u64;
        core::arch::asm!("mrs {}, ich_lr0_el2", out(reg) lr);
        let state = match lr & LR_STATE_MASK {
            0 => LR_PENDING,
            LR_ACTIVE => LR_PENDING | LR_ACTIVE,
            other => other,
        };
        let v = state | LR_GROUP1 | LR_PRIORITY | guest_vm::VTIMER_INTID as u64;
        core::arch::asm!("msr ich_lr0_el2, {}", "isb", in(reg) v);
    }
    let v = hyp.vcpu();
    v.counters.virqs += 1;
    v.tracer.note_virq();
}

/// LR0 still holds an interrupt the guest has not acknowledged (pending, or pending and
/// active).
pub fn virq_still_pending() -> bool {
    let lr: u64;
    // SAFETY: reading ICH_LR0_EL2 has no side effects.
    unsafe { core::arch::asm!("mrs {}, ich_lr0_el2", out(reg) lr) };
    lr & LR_PENDING != 0
}
