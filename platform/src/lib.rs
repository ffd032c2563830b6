//! What differs per machine, as consts on a [`Platform`] type (the shape Rusted Firmware-A
//! uses): one implementation per board, chosen at build time, so the hypervisor's core code
//! names no address.
#![no_std]

pub mod qemu_virt;

pub use qemu_virt::QemuVirt;

/// How PSCI calls reach firmware from EL2.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PsciConduit {
    Smc,
    Hvc,
}

/// A machine mtex runs on.
pub trait Platform {
    /// Name shown in reports.
    const NAME: &'static str;
    /// PL011 UART used for the console and the report stream.
    const UART_BASE: usize;
    /// GICv3 distributor and redistributor frames.
    const GICD_BASE: usize;
    const GICR_BASE: usize;
    /// Size of the MMIO window mapped for the GIC (distributor through the redistributors).
    const GIC_SIZE: usize;
    /// Start of RAM, and where the boot firmware leaves the device tree when x0 carries none.
    const RAM_BASE: usize;
    /// Where the guest kernel Image is placed before the hypervisor starts, when it is not
    /// handed over by a loader.
    const GUEST_IMAGE_ADDR: usize;
    /// PPI of the EL2 physical timer (CNTHP), the hypervisor's watchdog.
    const HYP_TIMER_INTID: u32;
    /// PPI of the EL1 virtual timer (CNTV), the guest's tick, forwarded to it.
    const GUEST_VTIMER_INTID: u32;
    /// How to call PSCI.
    const PSCI_CONDUIT: PsciConduit;
    /// AmpereOne erratum AC04_CPU_23: HCR_EL2 writes need a DSB before and an ISB after.
    const HCR_WRITE_NEEDS_BARRIERS: bool;
    /// AmpereOne erratum AC03_CPU_38: never set VTCR_EL2.HA.
    const VTCR_HA_FORBIDDEN: bool;
}
