//! The watchdog: the EL2 physical timer (CNTHP) fires through the GIC when the guest has used
//! its budget, which ends the run with a Watchdog record; it also begins a sampled phase's
//! units (`crate::sample`), whichever is due first. The guest cannot mask it: physical
//! IRQs go to EL2 (HCR_EL2.IMO) whatever the guest's PSTATE.I.

use crate::context::GuestContext;
use crate::state::Hyp;
use arm_gic::IntId;
use arm_gic::InterruptGroup;
use arm_gic::gicv3::{GicCpuInterface, GicRedistributorIterator, GicV3};
use arm_sysregs::el0::accessors::{read_cntfrq_el0, read_cntpct_el0};
use arm_sysregs::el1::accessors::read_mpidr_el1;
use arm_sysregs::el2::accessors::{write_cnthp_ctl_el2, write_cnthp_cval_el2};
use arm_sysregs::el2::registers::{CnthpCtlEl2, CnthpCvalEl2};
use core::ptr::NonNull;
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use mtex_abi::report::ExitReason;
use mtex_platform::Gic;
use mtex_vm::sample::DueBase;
use safe_mmio::UniqueMmioPointer;

/// The counter's frequency (CNTFRQ_EL0.ClockFreq, bits 31:0; the rest is RES0, so the
/// register is read whole): never assumed.
pub fn counter_hz() -> u64 {
    read_cntfrq_el0().bits()
}

/// INTIDs of the EL2 physical timer and of the EL1 virtual timer, from the machine.
static HYP_TIMER_INTID: AtomicU32 = AtomicU32::new(0);
static VTIMER_INTID: AtomicU32 = AtomicU32::new(0);

/// Starts the GIC for EL2 (the watchdog's timer, and the guest's virtual timer, which is
/// forwarded to it) and arms the watchdog `ms` milliseconds of counter time from now.
/// `hyp_timer` and `vtimer` are the machine's INTIDs (PPIs, checked by `Machine::validate`).
pub fn arm(ms: u64, gic_frames: Gic, hyp_timer: u32, vtimer: u32) {
    HYP_TIMER_INTID.store(hyp_timer, Ordering::Relaxed);
    VTIMER_INTID.store(vtimer, Ordering::Relaxed);
    GicCpuInterface::enable_system_register_el2(true);
    let gicr = NonNull::new(gic_frames.gicr as *mut _).expect("GICR");
    // How many redistributors the region holds: up to the one with GICR_TYPER.Last, never
    // past the region firmware gave (128 KiB per GICv3 frame at least).
    let frames = {
        // SAFETY: the region is the machine's redistributor region, identity-mapped as device
        // memory at EL2 and used by nothing else; the iterator is dropped before the driver
        // below takes the region.
        let it = unsafe { GicRedistributorIterator::new(gicr) }.expect("GICv3 redistributors");
        it.take((gic_frames.gicr_size / 0x2_0000).max(1) as usize)
            .count()
    };
    // SAFETY: GICD/GICR are the machine's GIC frames, identity-mapped as device memory at
    // EL2, unmapped from the guest, and this is the only driver instance.
    let mut gic = unsafe {
        GicV3::new(
            UniqueMmioPointer::new(NonNull::new(gic_frames.gicd as *mut _).expect("GICD")),
            gicr,
            frames,
        )
    }
    .expect("GICv3 redistributor");
    // This CPU's redistributor is the one whose GICR_TYPER affinity is its MPIDR (on a server
    // the boot CPU need not have the first frame).
    let me = read_mpidr_el1().bits() & mtex_platform::machine::MPIDR_AFFINITY;
    let cpu = (0..frames)
        .find(|&i| gic.gicr_typer(i).is_ok_and(|t| t.core_mpidr() == me))
        .expect("a GICv3 redistributor for this CPU's MPIDR");
    gic.setup(cpu);
    let timer = IntId::ppi(hyp_timer - 16);
    gic.set_interrupt_priority(timer, Some(cpu), 0x80)
        .expect("timer priority");
    gic.enable_interrupt(timer, Some(cpu), true)
        .expect("timer enable");
    let vtimer = IntId::ppi(vtimer - 16);
    gic.set_interrupt_priority(vtimer, Some(cpu), 0xa0)
        .expect("guest timer priority");
    gic.enable_interrupt(vtimer, Some(cpu), true)
        .expect("guest timer enable");
    crate::vtimer::init();
    GicCpuInterface::set_priority_mask(0xff);

    let deadline = read_cntpct_el0().bits() + ms.saturating_mul(counter_hz()) / 1000;
    WATCHDOG_AT.store(deadline, Ordering::Relaxed);
    set_timer();
    write_cnthp_ctl_el2(CnthpCtlEl2::ENABLE);
}

/// When the watchdog fires, in counter ticks (`u64::MAX`: never). The EL2 timer fires at the
/// earlier of this and the sampled phase's next unit: the one timer serves both, and the exit
/// tail (`guest_clock.rs`) sets it at every return to the guest.
pub static WATCHDOG_AT: AtomicU64 = AtomicU64::new(u64::MAX);

fn set_timer() {
    set_cval(WATCHDOG_AT.load(Ordering::Relaxed).min(sample_due()));
}

fn set_cval(at: u64) {
    write_cnthp_cval_el2(CnthpCvalEl2::from_bits_retain(at));
    aarch64_cpu::asm::barrier::isb(aarch64_cpu::asm::barrier::SY);
}

/// When the next sampled unit is due, as a counter value with the hypervisor's time up to now
/// (`u64::MAX`: none is due).
pub fn sample_due() -> u64 {
    let f = crate::fast_step::this_cpu();
    if f.sample_own != 0 {
        return f.sample_base.saturating_add(read_cntpct_el0().bits());
    }
    DueBase(f.sample_base).due(crate::guest_clock::machine_offset())
}

/// The next sampled unit begins after `ticks` of the guest's own execution from this exit
/// (None: no unit is due). Its due time is kept less the machine's account of hypervisor
/// time, to which the exit tail adds back the account as it stands at each return to the
/// guest, and it moves on by the time the CPU halts for the guest's WFI
/// (`sample_idle`). The gap is then counted on the guest's instructions alone (under
/// `-icount`, exactly): a unit begun on counter time would begin right after a trap or a
/// wait far more often than anywhere else, since the counter runs on through the
/// hypervisor's work and through idle time.
pub fn sample_in(ticks: Option<u64>) {
    {
        let mut f = crate::fast_step::this_cpu();
        let base = match ticks {
            Some(t) => DueBase::after(f.exit_ts, crate::guest_clock::machine_offset(), t),
            None => DueBase::NONE,
        };
        f.sample_base = base.0;
    }
    set_timer();
}

/// The CPU halted `ticks` for the guest's WFI: the next unit, if one is due, moves on by as
/// much (time asleep is not the guest's execution). Counted on the CPU's own instructions
/// (`sample_own_in`), it is due as many ticks after the return to the guest as before.
pub fn sample_idle(f: &mut crate::fast_step::FastStep, ticks: u64) {
    if f.sample_own == 0 {
        f.sample_base = DueBase(f.sample_base).idle(ticks).0;
    }
}

/// A member of a window sampled on several CPUs (`FastStep::sample_own`): its next unit is
/// due `ticks` counter ticks after this exit's return to the guest, which the exit tail sets
/// the timer to. Its gaps are counted on its own instructions (`phase::sample`), not on the
/// machine's guest time: the account of hypervisor time is shared by every CPU and charges
/// overlapping exits once, so a due time kept on it can fall before the return. Under
/// `-icount` a tick is one instruction of whichever CPU runs: the timer fires no later than
/// the CPU has executed `ticks`, and is armed again for what is left when it fires early.
pub fn sample_own_in(ticks: u64) {
    crate::fast_step::this_cpu().sample_base = ticks;
    set_timer();
}

/// While the CPU halts for the guest's WFI the EL2 timer keeps to the watchdog alone: the
/// next unit's time does not run in idle time, and the exit tail sets it again.
pub fn hold_sample() {
    set_cval(WATCHDOG_AT.load(Ordering::Relaxed));
}

/// A physical IRQ while the guest ran: the watchdog, or the guest's timer to forward.
#[inline(never)]
pub fn irq_exit(hyp: &mut Hyp, ctx: &mut GuestContext) {
    match GicCpuInterface::get_and_acknowledge_interrupt(InterruptGroup::Group1) {
        Some(id)
            if id == IntId::ppi(HYP_TIMER_INTID.load(Ordering::Relaxed) - 16)
                && read_cntpct_el0().bits() < WATCHDOG_AT.load(Ordering::Relaxed) =>
        {
            // Not the watchdog's time: a sampled unit's. The timer goes back to the
            // watchdog (its line drops) before the interrupt ends.
            sample_in(None);
            GicCpuInterface::end_interrupt(id, InterruptGroup::Group1);
            crate::phase::sample::trigger(hyp, ctx);
        }
        Some(id) if id == IntId::ppi(HYP_TIMER_INTID.load(Ordering::Relaxed) - 16) => {
            hyp.finish(ExitReason::Watchdog {
                budget_ms: hyp.watchdog_ms,
                at: ctx.state(),
            })
        }
        Some(id) if id == IntId::ppi(VTIMER_INTID.load(Ordering::Relaxed) - 16) => {
            crate::vtimer::forward(hyp);
            GicCpuInterface::end_interrupt(id, InterruptGroup::Group1)
        }
        Some(id) => GicCpuInterface::end_interrupt(id, InterruptGroup::Group1),
        None => {}
    }
}
