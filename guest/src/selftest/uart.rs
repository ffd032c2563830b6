//! The guest writes the report UART directly, as a kernel that probes the device tree's
//! PL011 would: the hypervisor keeps it (stage 2 leaves it unmapped), so the store is a
//! stage-2 fault that ends the run with a record, and no byte of the guest's reaches the
//! report stream.

use fdt::Fdt;

pub fn run(fdt: &Fdt) -> u64 {
    let Some(base) = fdt
        .find_compatible(&["arm,pl011"])
        .and_then(|n| n.reg())
        .and_then(|mut r| r.next())
        .map(|r| r.starting_address as usize)
    else {
        crate::println!("hostile-uart: no PL011 in the device tree");
        return 8;
    };
    crate::println!("hostile-uart: writing UARTDR at {base:#x}");
    // SAFETY: deliberately writes a device the guest does not own; stage 2 has no mapping
    // there, so the store traps to EL2 and never returns.
    unsafe { core::ptr::write_volatile(base as *mut u32, u32::from(b'@')) };
    crate::println!("hostile-uart: the UART took the write");
    9
}
