//! The watchdog: the EL2 physical timer (CNTHP) fires through the GIC when the guest has used
//! its budget, which ends the run with a Watchdog record. The guest cannot mask it: physical
//! IRQs go to EL2 (HCR_EL2.IMO) whatever the guest's PSTATE.I.

use crate::Board;
use crate::context::GuestContext;
use crate::state::Hyp;
use aarch64_cpu::registers::{CNTFRQ_EL0, CNTHP_CTL_EL2, CNTPCT_EL0};
use arm_gic::IntId;
use arm_gic::InterruptGroup;
use arm_gic::gicv3::{GicCpuInterface, GicV3};
use core::ptr::NonNull;
use mtex_abi::report::ExitReason;
use mtex_platform::Platform;
use safe_mmio::UniqueMmioPointer;
use tock_registers::interfaces::{Readable, Writeable};

/// The counter's frequency (CNTFRQ_EL0): never assumed.
pub fn counter_hz() -> u64 {
    CNTFRQ_EL0.get()
}

/// Starts the GIC for EL2 (the watchdog's timer, and the guest's virtual timer, which is
/// forwarded to it) and arms the watchdog `ms` milliseconds of counter time from now.
pub fn arm(ms: u64) {
    GicCpuInterface::enable_system_register_el2(true);
    // SAFETY: GICD/GICR are the platform's GIC frames, identity-mapped as device memory at
    // EL2, unmapped from the guest, and this is the only driver instance.
    let mut gic = unsafe {
        GicV3::new(
            UniqueMmioPointer::new(NonNull::new(Board::GICD_BASE as *mut _).unwrap()),
            NonNull::new(Board::GICR_BASE as *mut _).unwrap(),
            1,
        )
    }
    .expect("GICv3 redistributor");
    gic.setup(0);
    let timer = IntId::ppi(Board::HYP_TIMER_INTID - 16);
    gic.set_interrupt_priority(timer, Some(0), 0x80)
        .expect("timer priority");
    gic.enable_interrupt(timer, Some(0), true)
        .expect("timer enable");
    let vtimer = IntId::ppi(Board::GUEST_VTIMER_INTID - 16);
    gic.set_interrupt_priority(vtimer, Some(0), 0xa0)
        .expect("guest timer priority");
    gic.enable_interrupt(vtimer, Some(0), true)
        .expect("guest timer enable");
    crate::vtimer::init();
    GicCpuInterface::set_priority_mask(0xff);

    let deadline = CNTPCT_EL0.get() + ms.saturating_mul(counter_hz()) / 1000;
    // SAFETY: CNTHP_CVAL_EL2 only sets when the EL2 timer fires (aarch64-cpu has no accessor).
    unsafe { core::arch::asm!("msr cnthp_cval_el2, {}", in(reg) deadline) };
    CNTHP_CTL_EL2.write(CNTHP_CTL_EL2::ENABLE::SET + CNTHP_CTL_EL2::IMASK::CLEAR);
}

/// A physical IRQ while the guest ran: the watchdog, or the guest's timer to forward.
#[inline(never)]
pub fn irq_exit(hyp: &mut Hyp, ctx: &mut GuestContext) {
    match GicCpuInterface::get_and_acknowledge_interrupt(InterruptGroup::Group1) {
        Some(id) if id == IntId::ppi(Board::HYP_TIMER_INTID - 16) => {
            hyp.finish(ExitReason::Watchdog {
                budget_ms: hyp.watchdog_ms,
                at: ctx.state(),
            })
        }
        Some(id) if id == IntId::ppi(Board::GUEST_VTIMER_INTID - 16) => {
            crate::vtimer::forward(hyp);
            GicCpuInterface::end_interrupt(id, InterruptGroup::Group1)
        }
        Some(id) => GicCpuInterface::end_interrupt(id, InterruptGroup::Group1),
        None => {}
    }
}
