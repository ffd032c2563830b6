//! The device tree the hypervisor gives its guest, written from scratch: the guest's machine
//! is mtex's (`mtex_platform::guest_vm`), not the host's, so the tree is the same on every
//! host and boot path and the guest's counts cannot depend on what firmware described.

use crate::{DtError, Region};
use alloc::vec::Vec;
use vm_fdt::FdtWriter;

/// What the guest's tree says.
#[derive(Clone, Copy, Debug)]
pub struct GuestTree<'a> {
    /// The guest's RAM (intermediate physical addresses).
    pub ram: Region,
    /// `/chosen/bootargs`: the run's options.
    pub bootargs: &'a str,
    /// The report UART's address, listed as a PL011 the guest does not own (stage 2 leaves
    /// it unmapped, so a guest that probes it ends the run with a record; the hostile-uart
    /// self-test checks exactly that). None when that address would fall inside guest RAM.
    pub uart: Option<u64>,
    /// PPI numbers (INTID - 16) of the secure, non-secure physical, virtual and hypervisor
    /// timers, in the order of the arm,armv8-timer binding.
    pub timer_ppis: [u32; 4],
}

/// Writes the guest's tree.
pub fn build(t: &GuestTree<'_>) -> Result<Vec<u8>, DtError> {
    let mut w = FdtWriter::new().map_err(|_| DtError::Write)?;
    let e = |_| DtError::Write;
    let root = w.begin_node("").map_err(e)?;
    w.property_u32("#address-cells", 2).map_err(e)?;
    w.property_u32("#size-cells", 2).map_err(e)?;
    w.property_string("compatible", "mtex,guest-vm")
        .map_err(e)?;
    w.property_string("model", "mtex guest").map_err(e)?;

    let chosen = w.begin_node("chosen").map_err(e)?;
    w.property_string("bootargs", t.bootargs).map_err(e)?;
    w.end_node(chosen).map_err(e)?;

    crate::nodes::memory(&mut w, t.ram)?;

    let cpus = w.begin_node("cpus").map_err(e)?;
    w.property_u32("#address-cells", 1).map_err(e)?;
    w.property_u32("#size-cells", 0).map_err(e)?;
    let cpu = w.begin_node("cpu@0").map_err(e)?;
    w.property_string("device_type", "cpu").map_err(e)?;
    w.property_string("compatible", "arm,armv8").map_err(e)?;
    w.property_u32("reg", 0).map_err(e)?;
    w.property_string("enable-method", "psci").map_err(e)?;
    w.end_node(cpu).map_err(e)?;
    w.end_node(cpus).map_err(e)?;

    // PSCI through SMC, which HCR_EL2.TSC traps to the hypervisor (psci.rs).
    let psci = w.begin_node("psci").map_err(e)?;
    w.property_string("compatible", "arm,psci-1.0").map_err(e)?;
    w.property_string("method", "smc").map_err(e)?;
    w.end_node(psci).map_err(e)?;

    crate::nodes::timer(&mut w, t.timer_ppis, false)?;

    if let Some(base) = t.uart.filter(|&b| !t.ram.overlaps(&Region::new(b, 0x1000))) {
        let uart = w.begin_node(&alloc::format!("pl011@{base:x}")).map_err(e)?;
        w.property_string("compatible", "arm,pl011").map_err(e)?;
        w.property_array_u64("reg", &[base, 0x1000]).map_err(e)?;
        w.end_node(uart).map_err(e)?;
    }
    w.end_node(root).map_err(e)?;
    w.finish().map_err(e)
}

#[cfg(test)]
mod tests {
    use super::*;
    use fdt::Fdt;

    fn tree(uart: Option<u64>) -> Vec<u8> {
        build(&GuestTree {
            ram: Region::new(0x4000_0000, 256 << 20),
            bootargs: "mtex.guest=kernel mtex.hz=100",
            uart,
            timer_ppis: [13, 14, 11, 10],
        })
        .unwrap()
    }

    #[test]
    fn the_guest_reads_its_machine_back() {
        let bytes = tree(Some(0x0900_0000));
        let fdt = Fdt::new(&bytes).unwrap();
        assert_eq!(
            fdt.chosen().bootargs(),
            Some("mtex.guest=kernel mtex.hz=100")
        );
        let mem = fdt.memory().regions().next().unwrap();
        assert_eq!(
            (mem.starting_address as u64, mem.size),
            (0x4000_0000, Some(256 << 20))
        );
        let uart = fdt.find_compatible(&["arm,pl011"]).unwrap();
        assert_eq!(
            uart.reg().unwrap().next().unwrap().starting_address as u64,
            0x0900_0000
        );
        assert_eq!(
            fdt.find_node("/psci")
                .unwrap()
                .property("method")
                .unwrap()
                .as_str(),
            Some("smc")
        );
        // The hypervisor's own memory is nowhere in the guest's tree.
        assert!(fdt.find_node("/reserved-memory").is_none());
    }

    #[test]
    fn a_uart_inside_guest_ram_is_left_out() {
        let bytes = tree(Some(0x4800_0000));
        assert!(
            Fdt::new(&bytes)
                .unwrap()
                .find_compatible(&["arm,pl011"])
                .is_none()
        );
    }

    #[test]
    fn the_same_inputs_give_the_same_bytes() {
        assert_eq!(tree(Some(0x0900_0000)), tree(Some(0x0900_0000)));
    }
}
