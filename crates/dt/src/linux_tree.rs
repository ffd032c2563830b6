//! The device tree Linux mode gives a distribution kernel: the guest's RAM window (as for the
//! built-in guest, `mtex_platform::guest_vm`), and the host's own GIC, timers and a UART
//! passed through — Linux drives them directly, the hypervisor never touches them.
//!
//! The UART is not the report UART: the hypervisor keeps the console it booted with for its
//! records, and Linux gets the machine's other PL011 (QEMU virt's second `-serial`), so that
//! kernel text and report frames never share a byte stream. Nothing of the hypervisor is in
//! the guest's RAM window (stage 2 maps only the window), so no `reserved-memory` is needed:
//! the hypervisor is hidden by not being there.

use crate::{DtError, Region};
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use mtex_platform::Gic;
use vm_fdt::FdtWriter;

/// What the tree says.
#[derive(Clone, Copy, Debug)]
pub struct LinuxTree<'a> {
    /// Guest RAM (intermediate physical addresses).
    pub ram: Region,
    /// `/chosen/bootargs`: the kernel command line.
    pub bootargs: &'a str,
    /// Where the initramfs was put in guest RAM.
    pub initrd: Option<Region>,
    /// The UART Linux owns, and its SPI number (INTID - 32).
    pub uart: Region,
    pub uart_spi: u32,
    /// The host's GICv3 frames, passed through.
    pub gic: Gic,
    /// PPI numbers (INTID - 16) of the secure, non-secure physical, virtual and hypervisor
    /// timers, in the order of the arm,armv8-timer binding.
    pub timer_ppis: [u32; 4],
    /// The PMU's overflow interrupt, a PPI number (INTID - 16): Linux's perf drives the PMU
    /// (an arm,armv8-pmuv3 node) only when the tree names one. None: no PMU node.
    pub pmu_ppi: Option<u32>,
    /// Every CPU's MPIDR affinity, the boot CPU's among them (Linux matches its CPU node by
    /// it): the others are off, for Linux to start through PSCI.
    pub cpus: &'a [u64],
}

const GIC_PHANDLE: u32 = 1;
const CLOCK_PHANDLE: u32 = 2;
/// GIC binding: interrupt type SPI = 0.
const SPI: u32 = 0;
use crate::nodes::LEVEL_HIGH;
/// The PL011 binding's clock, as QEMU's virt board describes it.
const UART_CLOCK_HZ: u32 = 24_000_000;

/// Writes the tree.
pub fn build(t: &LinuxTree<'_>) -> Result<Vec<u8>, DtError> {
    let mut w = FdtWriter::new().map_err(|_| DtError::Write)?;
    let e = |_| DtError::Write;
    let uart_path = alloc::format!("/pl011@{:x}", t.uart.base);
    let root = w.begin_node("").map_err(e)?;
    w.property_u32("#address-cells", 2).map_err(e)?;
    w.property_u32("#size-cells", 2).map_err(e)?;
    w.property_u32("interrupt-parent", GIC_PHANDLE).map_err(e)?;
    w.property_string("compatible", "linux,dummy-virt")
        .map_err(e)?;
    w.property_string("model", "mtex linux mode").map_err(e)?;

    let chosen = w.begin_node("chosen").map_err(e)?;
    w.property_string("bootargs", t.bootargs).map_err(e)?;
    w.property_string("stdout-path", &uart_path).map_err(e)?;
    if let Some(i) = t.initrd {
        w.property_u64("linux,initrd-start", i.base).map_err(e)?;
        w.property_u64("linux,initrd-end", i.end()).map_err(e)?;
    }
    w.end_node(chosen).map_err(e)?;

    crate::nodes::memory(&mut w, t.ram)?;

    let cpus = w.begin_node("cpus").map_err(e)?;
    w.property_u32("#address-cells", 2).map_err(e)?;
    w.property_u32("#size-cells", 0).map_err(e)?;
    for &mpidr in t.cpus {
        let cpu = w.begin_node(&alloc::format!("cpu@{mpidr:x}")).map_err(e)?;
        w.property_string("device_type", "cpu").map_err(e)?;
        w.property_string("compatible", "arm,armv8").map_err(e)?;
        w.property_array_u32("reg", &[(mpidr >> 32) as u32, mpidr as u32])
            .map_err(e)?;
        w.property_string("enable-method", "psci").map_err(e)?;
        w.end_node(cpu).map_err(e)?;
    }
    w.end_node(cpus).map_err(e)?;

    // PSCI through SMC, which HCR_EL2.TSC traps: the hypervisor sees SYSTEM_OFF (the run's
    // end) and forwards what only informs.
    let psci = w.begin_node("psci").map_err(e)?;
    w.property_string_list(
        "compatible",
        vec![String::from("arm,psci-1.0"), String::from("arm,psci-0.2")],
    )
    .map_err(e)?;
    w.property_string("method", "smc").map_err(e)?;
    w.end_node(psci).map_err(e)?;

    let gic = w
        .begin_node(&alloc::format!("intc@{:x}", t.gic.gicd))
        .map_err(e)?;
    w.property_string("compatible", "arm,gic-v3").map_err(e)?;
    w.property_u32("#interrupt-cells", 3).map_err(e)?;
    w.property_null("interrupt-controller").map_err(e)?;
    w.property_u32("#redistributor-regions", 1).map_err(e)?;
    w.property_array_u64("reg", &[t.gic.gicd, 0x1_0000, t.gic.gicr, t.gic.gicr_size])
        .map_err(e)?;
    w.property_phandle(GIC_PHANDLE).map_err(e)?;
    w.end_node(gic).map_err(e)?;

    crate::nodes::timer(&mut w, t.timer_ppis, true)?;
    if let Some(ppi) = t.pmu_ppi {
        let pmu = w.begin_node("pmu").map_err(e)?;
        w.property_string("compatible", "arm,armv8-pmuv3")
            .map_err(e)?;
        w.property_array_u32("interrupts", &[crate::nodes::PPI, ppi, LEVEL_HIGH])
            .map_err(e)?;
        w.end_node(pmu).map_err(e)?;
    }

    let clk = w.begin_node("apb-pclk").map_err(e)?;
    w.property_string("compatible", "fixed-clock").map_err(e)?;
    w.property_u32("#clock-cells", 0).map_err(e)?;
    w.property_u32("clock-frequency", UART_CLOCK_HZ)
        .map_err(e)?;
    w.property_string("clock-output-names", "clk24mhz")
        .map_err(e)?;
    w.property_phandle(CLOCK_PHANDLE).map_err(e)?;
    w.end_node(clk).map_err(e)?;

    let uart = w.begin_node(&uart_path[1..]).map_err(e)?;
    w.property_string_list(
        "compatible",
        vec![String::from("arm,pl011"), String::from("arm,primecell")],
    )
    .map_err(e)?;
    w.property_array_u64("reg", &[t.uart.base, t.uart.size])
        .map_err(e)?;
    w.property_array_u32("interrupts", &[SPI, t.uart_spi, LEVEL_HIGH])
        .map_err(e)?;
    w.property_array_u32("clocks", &[CLOCK_PHANDLE, CLOCK_PHANDLE])
        .map_err(e)?;
    w.property_string_list(
        "clock-names",
        vec![String::from("uartclk"), String::from("apb_pclk")],
    )
    .map_err(e)?;
    w.end_node(uart).map_err(e)?;

    w.end_node(root).map_err(e)?;
    w.finish().map_err(e)
}

#[cfg(test)]
mod tests {
    use super::*;
    use fdt::Fdt;

    fn tree() -> Vec<u8> {
        build(&LinuxTree {
            ram: Region::new(0x4000_0000, 512 << 20),
            bootargs: "console=ttyAMA0 nokaslr",
            initrd: Some(Region::new(0x5000_0000, 0x1234)),
            uart: Region::new(0x0904_0000, 0x1000),
            uart_spi: 8,
            gic: Gic {
                gicd: 0x0800_0000,
                gicr: 0x080a_0000,
                gicr_size: 0xf6_0000,
            },
            timer_ppis: [13, 14, 11, 10],
            pmu_ppi: Some(7),
            cpus: &[0, 1, 0x100],
        })
        .unwrap()
    }

    #[test]
    fn linux_reads_its_machine_back() {
        let bytes = tree();
        let fdt = Fdt::new(&bytes).unwrap();
        assert_eq!(fdt.chosen().bootargs(), Some("console=ttyAMA0 nokaslr"));
        assert_eq!(
            fdt.chosen().stdout().unwrap().name,
            "pl011@9040000",
            "Linux's console is the passed-through UART"
        );
        let initrd = crate::boot_info(&bytes).unwrap().initrd.unwrap();
        assert_eq!((initrd.base, initrd.size), (0x5000_0000, 0x1234));
        let mem = fdt.memory().regions().next().unwrap();
        assert_eq!(
            (mem.starting_address as u64, mem.size),
            (0x4000_0000, Some(512 << 20))
        );
        // The machine reader (the hypervisor's own) finds the same GIC, timers and PSCI.
        let m = crate::machine::machine(&bytes).unwrap();
        assert_eq!((m.gic.gicd, m.gic.gicr), (0x0800_0000, 0x080a_0000));
        assert_eq!((m.vtimer_intid, m.hyp_timer_intid), (27, 26));
        assert_eq!(m.console.base, 0x0904_0000);
        assert_eq!(m.cpus(), &[0, 1, 0x100], "every CPU, by its affinity");
        let interrupts = |node: fdt::node::FdtNode<'_, '_>| -> Vec<u32> {
            node.property("interrupts")
                .unwrap()
                .value
                .chunks(4)
                .map(|c| u32::from_be_bytes(c.try_into().unwrap()))
                .collect()
        };
        let uart = fdt.find_node("/pl011@9040000").unwrap();
        assert_eq!(interrupts(uart), vec![0, 8, 4]);
        // The PMU, for perf: its overflow interrupt a level-high PPI.
        let pmu = fdt
            .find_compatible(&["arm,armv8-pmuv3"])
            .expect("a PMU node");
        assert_eq!(interrupts(pmu), vec![1, 7, 4]);
    }
}
