//! Nodes both written trees have (the built-in guest's and Linux mode's): written once.

use crate::{DtError, Region};
use alloc::vec::Vec;
use vm_fdt::FdtWriter;

/// GIC binding: interrupt type PPI = 1; flags level-high = 4 (the arm,armv8-timer binding).
pub(crate) const PPI: u32 = 1;
pub(crate) const LEVEL_HIGH: u32 = 4;

/// `memory@BASE` with `ram` as its one `reg` entry (2 address and 2 size cells).
pub(crate) fn memory(w: &mut FdtWriter, ram: Region) -> Result<(), DtError> {
    let e = |_| DtError::Write;
    let mem = w
        .begin_node(&alloc::format!("memory@{:x}", ram.base))
        .map_err(e)?;
    w.property_string("device_type", "memory").map_err(e)?;
    w.property_array_u64("reg", &[ram.base, ram.size])
        .map_err(e)?;
    w.end_node(mem).map_err(e)
}

/// The arm,armv8-timer node: `ppis` are the secure, non-secure physical, virtual and
/// hypervisor timers' PPI numbers (INTID - 16), level-high. `always_on`: the timer keeps
/// counting in every power state (what Linux wants to hear on a virtual machine).
pub(crate) fn timer(w: &mut FdtWriter, ppis: [u32; 4], always_on: bool) -> Result<(), DtError> {
    let e = |_| DtError::Write;
    let timer = w.begin_node("timer").map_err(e)?;
    w.property_string("compatible", "arm,armv8-timer")
        .map_err(e)?;
    if always_on {
        w.property_null("always-on").map_err(e)?;
    }
    let mut irqs = Vec::new();
    for ppi in ppis {
        irqs.extend_from_slice(&[PPI, ppi, LEVEL_HIGH]);
    }
    w.property_array_u32("interrupts", &irqs).map_err(e)?;
    w.end_node(timer).map_err(e)
}
