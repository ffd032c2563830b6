//! QEMU `-machine virt,virtualization=on,mte=on,gic-version=3 -cpu max` (hw/arm/virt.c), as
//! firmware describes it. The hypervisor never reads this: it discovers the machine. Host
//! tests compare what the device-tree and ACPI readers find against it.

use crate::machine::{Console, ConsoleKind, Gic, Machine, PsciConduit, Region};

/// Where QEMU's virt machine puts RAM (and `-kernel` loads an Image: here plus its
/// `text_offset`).
pub const RAM_BASE: u64 = 0x4000_0000;
pub const UART_BASE: u64 = 0x0900_0000;
pub const GICD_BASE: u64 = 0x0800_0000;
pub const GICR_BASE: u64 = 0x080a_0000;
/// virt.c VIRT_GIC_REDIST: 0xf60000 bytes (123 redistributors of 128 KiB).
pub const GICR_SIZE: u64 = 0x00f6_0000;
/// virt.c: ARCH_TIMER_NS_EL2_IRQ = 10, ARCH_TIMER_VIRT_IRQ = 11 (PPIs, INTID = 16 + n).
pub const HYP_TIMER_INTID: u32 = 26;
pub const VTIMER_INTID: u32 = 27;

/// The virt board with `ram_size` bytes of RAM at `ram_base` and one CPU.
pub fn machine(ram_base: u64, ram_size: u64) -> Machine {
    let mut m = Machine {
        console: Console::new(ConsoleKind::Pl011, UART_BASE),
        gic: Gic {
            gicd: GICD_BASE,
            gicr: GICR_BASE,
            gicr_size: GICR_SIZE,
        },
        hyp_timer_intid: HYP_TIMER_INTID,
        vtimer_intid: VTIMER_INTID,
        ..Machine::default()
    };
    // No EL3 under `virtualization=on` without `secure=on`: QEMU answers SMCs itself.
    m.set_psci(PsciConduit::Smc);
    m.push_ram(Region::new(ram_base, ram_size));
    m.push_cpu(0);
    m
}
