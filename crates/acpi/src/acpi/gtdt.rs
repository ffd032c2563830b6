//! GTDT, the Generic Timer Description Table (ACPI 6.5 §5.2.25): the interrupts (GSIVs) of
//! the per-CPU architected timers. For these PPIs a GSIV is the GIC INTID.

use mtex_platform::Machine;

use super::AcpiError;
use super::sdt::u32_at;

/// Virtual EL1 Timer GSIV: the guest's tick (CNTV). In every GTDT revision.
const VIRTUAL_EL1_GSIV: usize = 64;
/// Non-Secure EL2 Timer GSIV: the hypervisor's watchdog (CNTHP). Also in every revision
/// (revision 1 called it "Non-Secure PL2"), but firmware may leave it 0.
const NS_EL2_GSIV: usize = 72;

/// The INTID SBSA (Arm DEN0029, "PPI assignments") mandates for the non-secure EL2 physical
/// timer. Used when firmware leaves the GTDT's EL2 GSIV at 0, as firmware written for OSes
/// that never run at EL2 may; the virtual timer's is 27 there, and the GTDT always has it.
pub const SBSA_NS_EL2_TIMER_INTID: u32 = 26;

/// Fills `m.vtimer_intid` and `m.hyp_timer_intid` from a verified GTDT. Whether they are
/// PPIs is for [`Machine::validate`] to judge.
pub fn read(gtdt: &[u8], m: &mut Machine) -> Result<(), AcpiError> {
    m.vtimer_intid = u32_at(gtdt, VIRTUAL_EL1_GSIV).ok_or(AcpiError::GtdtTooShort)?;
    m.hyp_timer_intid = match u32_at(gtdt, NS_EL2_GSIV) {
        Some(0) | None => SBSA_NS_EL2_TIMER_INTID,
        Some(gsiv) => gsiv,
    };
    Ok(())
}
