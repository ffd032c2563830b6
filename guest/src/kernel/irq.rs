//! The timer tick: the EL1 virtual timer, delivered by the hypervisor as a virtual interrupt
//! through the GICv3 CPU interface (arm-gic). The handler only re-arms the timer and asks
//! for a reschedule, which happens on the way back to user space (exit_to_user_mode), as
//! with Linux's PREEMPT_NONE.

use arm_gic::gicv3::GicCpuInterface;
use arm_gic::{IntId, InterruptGroup};
use arm_sysregs::el0::accessors::{
    read_cntfrq_el0, read_daif, write_cntv_ctl_el0, write_cntv_tval_el0,
};
use arm_sysregs::el0::registers::{CntvCtlEl0, CntvTvalEl0, Daif};
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// virt's (and SBSA's) EL1 virtual timer PPI.
const VTIMER: IntId = IntId::ppi(11);

static PERIOD: AtomicU64 = AtomicU64::new(0);
static NEED_RESCHED: AtomicBool = AtomicBool::new(false);
pub static TICKS: AtomicU64 = AtomicU64::new(0);

/// Enables the CPU interface for group 1 and starts a tick of `hz` (none if 0).
pub fn init(hz: u32) {
    if hz == 0 {
        return;
    }
    GicCpuInterface::enable_system_register_el1();
    GicCpuInterface::set_priority_mask(0xff);
    GicCpuInterface::enable_group1(true);
    PERIOD.store(read_cntfrq_el0().bits() / hz as u64, Ordering::Relaxed);
    rearm();
}

fn rearm() {
    write_cntv_tval_el0(CntvTvalEl0::from_bits_retain(
        PERIOD.load(Ordering::Relaxed),
    ));
    write_cntv_ctl_el0(CntvCtlEl0::ENABLE);
}

/// handle_arch_irq: acknowledge, handle the tick, end.
pub fn handle() {
    let Some(id) = GicCpuInterface::get_and_acknowledge_interrupt(InterruptGroup::Group1) else {
        return;
    };
    if id == VTIMER {
        TICKS.fetch_add(1, Ordering::Relaxed);
        NEED_RESCHED.store(true, Ordering::Relaxed);
        rearm();
    }
    GicCpuInterface::end_interrupt(id, InterruptGroup::Group1);
}

/// Takes the reschedule request (TIF_NEED_RESCHED).
pub fn take_need_resched() -> bool {
    NEED_RESCHED.swap(false, Ordering::Relaxed)
}

/// local_irq_enable / local_irq_disable.
pub fn enable() {
    // SAFETY: unmasks IRQs; the handler is safe to run anywhere IRQs are enabled.
    unsafe { core::arch::asm!("msr daifclr, #2") };
}

pub fn disable() {
    // SAFETY: masks IRQs.
    unsafe { core::arch::asm!("msr daifset, #2") };
}

/// Masks IRQs, returning whether they were unmasked (local_irq_save).
pub fn save() -> bool {
    let daif = read_daif();
    // SAFETY: masks IRQs.
    unsafe { core::arch::asm!("msr daifset, #2") };
    !daif.contains(Daif::I)
}

/// local_irq_restore.
pub fn restore(enabled: bool) {
    if enabled {
        enable();
    }
}
