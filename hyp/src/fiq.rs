//! Linux mode's sampling timer: the EL2 timer (CNTHP) as a Group 0 interrupt, taken to EL2 as
//! an FIQ (HCR_EL2.FMO) while a sampled window is open.
//!
//! Linux owns the GIC and takes its interrupts itself (HCR_EL2.IMO clear), so the timer that
//! begins a sampled window's units cannot be a Group 1 interrupt as for the built-in guest.
//! Linux uses Group 1 only; Group 0 is free where the non-secure side may configure it (a GIC
//! without security, GICD_CTLR.DS = 1: QEMU's virt). While the window is open:
//! - this CPU's redistributor has the timer's PPI in Group 0, enabled, at a priority above
//!   Linux's mask, and the distributor and CPU interface have Group 0 enabled;
//! - HCR_EL2.FMO sends Group 0 to EL2 whatever the guest's PSTATE.F. It also makes the guest's
//!   SGI register writes trap (its IPIs: `sysreg_trap`, passed on unchanged) and its accesses
//!   to the Group 0 and shared CPU-interface registers (PMR, CTLR, DIR) reach the virtual
//!   interface instead: Linux does not touch them after boot unless it runs with pseudo-NMIs
//!   (`irqchip.gicv3_pseudo_nmi=1`, off by default), which sampled windows do not support.
//!
//! On a GIC with security (a server's, DS = 0) Group 0 belongs to EL3: `route` says so and the
//! window is traced whole instead.

use crate::context::GuestContext;
use crate::state::Hyp;
use arm_gic::IntId;
use arm_gic::InterruptGroup;
use arm_gic::gicv3::registers::GicdCtlr;
use arm_gic::gicv3::{GicCpuInterface, GicRedistributorIterator, GicV3, Group, SecureIntGroup};
use arm_sysregs::el1::accessors::read_mpidr_el1;
use arm_sysregs::el2::accessors::{read_hcr_el2, write_cnthp_ctl_el2, write_hcr_el2};
use arm_sysregs::el2::registers::{CnthpCtlEl2, HcrEl2};
use core::ptr::NonNull;
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use mtex_platform::Gic;
use safe_mmio::UniqueMmioPointer;

/// The machine's GIC frames and the EL2 timer's INTID, kept at boot (Linux mode).
static GICD: AtomicU64 = AtomicU64::new(0);
static GICR: AtomicU64 = AtomicU64::new(0);
static GICR_SIZE: AtomicU64 = AtomicU64::new(0);
static TIMER_INTID: AtomicU32 = AtomicU32::new(0);

/// Above Linux's priority mask (0xf0) and its own interrupts' priority (0xa0).
const PRIORITY: u8 = 0x80;

/// Keeps what `route` needs (Linux mode, at boot).
pub fn init(gic: Gic, hyp_timer: u32) {
    GICD.store(gic.gicd, Ordering::Relaxed);
    GICR.store(gic.gicr, Ordering::Relaxed);
    GICR_SIZE.store(gic.gicr_size, Ordering::Relaxed);
    TIMER_INTID.store(hyp_timer, Ordering::Relaxed);
}

fn timer() -> IntId {
    IntId::ppi(TIMER_INTID.load(Ordering::Relaxed) - 16)
}

/// Routes the EL2 timer to this CPU's EL2 as an FIQ (`on`), or stops it. False when the GIC
/// does not let the non-secure side use Group 0 (nothing is changed then).
pub fn route(on: bool) -> bool {
    let gicd = GICD.load(Ordering::Relaxed);
    if gicd == 0 {
        return false;
    }
    // SAFETY: GICD_CTLR of the machine's distributor, mapped as device memory at EL2; a read
    // has no side effect. (arm-gic reads GICD_CTLR nowhere it exports.)
    let ctlr = unsafe { core::ptr::read_volatile(gicd as *const u32) };
    if ctlr & GicdCtlr::DS.bits() == 0 {
        return false;
    }
    let gicr = NonNull::new(GICR.load(Ordering::Relaxed) as *mut _).expect("GICR");
    let frames = {
        // SAFETY: the machine's redistributor region, mapped as device memory at EL2; the
        // iterator only reads GICR_TYPER and is dropped before the driver below is made.
        let it = unsafe { GicRedistributorIterator::new(gicr) }.expect("GICv3 redistributors");
        it.take((GICR_SIZE.load(Ordering::Relaxed) / 0x2_0000).max(1) as usize)
            .count()
    };
    // SAFETY: the machine's GIC frames, mapped as device memory at EL2. Linux drives them too:
    // this driver only writes the EL2 timer's PPI (which Linux, at EL1, never uses) in this
    // CPU's redistributor, and sets one enable bit of GICD_CTLR that Linux leaves alone after
    // boot; it is dropped before this exit ends, so no two instances exist in the hypervisor.
    let mut gic = unsafe {
        GicV3::new(
            UniqueMmioPointer::new(NonNull::new(gicd as *mut _).expect("GICD")),
            gicr,
            frames,
        )
    }
    .expect("GICv3 redistributor");
    let me = read_mpidr_el1().bits() & mtex_platform::machine::MPIDR_AFFINITY;
    let Some(cpu) = (0..frames).find(|&i| gic.gicr_typer(i).is_ok_and(|t| t.core_mpidr() == me))
    else {
        return false;
    };
    let t = timer();
    if on {
        let _ = gic.set_group(t, Some(cpu), Group::Secure(SecureIntGroup::Group0));
        let _ = gic.set_interrupt_priority(t, Some(cpu), PRIORITY);
        let _ = gic.enable_interrupt(t, Some(cpu), true);
        gic.gicd_set_control(GicdCtlr::EnableGrp0);
        gic.gicd_barrier();
        GicCpuInterface::enable_group0(true);
        write_cnthp_ctl_el2(CnthpCtlEl2::ENABLE);
    } else {
        write_cnthp_ctl_el2(CnthpCtlEl2::empty());
        let _ = gic.enable_interrupt(t, Some(cpu), false);
        GicCpuInterface::enable_group0(false);
    }
    let _ = gic.gicr_barrier(cpu);
    // AmpereOne AC04_CPU_23 (traps.rs): a DSB before every HCR_EL2 write; the exception
    // return to the guest synchronises it.
    aarch64_cpu::asm::barrier::dsb(aarch64_cpu::asm::barrier::SY);
    let mut hcr = read_hcr_el2();
    hcr.set(HcrEl2::FMO, on);
    // SAFETY: FMO changes only what the guest's FIQs and CPU-interface accesses reach (EL2's
    // vectors, the virtual interface: above), not EL2's own code; the rest of HCR_EL2 is
    // written back as it was.
    unsafe { write_hcr_el2(hcr) };
    true
}

/// An FIQ while the guest ran (Linux mode): the timer of a sampled window's next unit.
#[inline(never)]
pub fn exit(hyp: &mut Hyp, ctx: &mut GuestContext) {
    match GicCpuInterface::get_and_acknowledge_interrupt(InterruptGroup::Group0) {
        Some(id) if id == timer() => {
            // The timer's line drops before the interrupt ends.
            crate::watchdog::sample_in(None);
            GicCpuInterface::end_interrupt(id, InterruptGroup::Group0);
            crate::phase::sample::trigger(hyp, ctx);
        }
        Some(id) => GicCpuInterface::end_interrupt(id, InterruptGroup::Group0),
        None => {}
    }
}
