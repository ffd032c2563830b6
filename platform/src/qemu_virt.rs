//! QEMU `-machine virt,virtualization=on,mte=on,gic-version=3 -cpu max` (hw/arm/virt.c).

use crate::{Platform, PsciConduit};

/// The QEMU virt board.
pub struct QemuVirt;

impl Platform for QemuVirt {
    const NAME: &'static str = "qemu-virt";
    const UART_BASE: usize = 0x0900_0000;
    const GICD_BASE: usize = 0x0800_0000;
    const GICR_BASE: usize = 0x080a_0000;
    const GIC_SIZE: usize = 0x0100_0000;
    const RAM_BASE: usize = 0x4000_0000;
    /// 16 MiB into RAM, above the hypervisor (linked at 0x4020_0000, see hyp/link.ld).
    const GUEST_IMAGE_ADDR: usize = 0x4100_0000;
    /// virt.c: ARCH_TIMER_NS_EL2_IRQ = 10, a PPI (16 + 10).
    const HYP_TIMER_INTID: u32 = 26;
    /// virt.c: ARCH_TIMER_VIRT_IRQ = 11, a PPI (16 + 11).
    const GUEST_VTIMER_INTID: u32 = 27;
    /// No EL3 under `virtualization=on` without `secure=on`: QEMU answers SMCs itself.
    const PSCI_CONDUIT: PsciConduit = PsciConduit::Smc;
    const HCR_WRITE_NEEDS_BARRIERS: bool = false;
    const VTCR_HA_FORBIDDEN: bool = false;
}
