//! mtex-guest: a small kernel booted like Linux arm64 (Image header, EL1, x0 = device tree)
//! that exercises MTE configurations in named phases and tells the hypervisor through the
//! mtex hypercall ABI.
#![no_std]
#![no_main]

extern crate alloc;

mod by_address;
mod console;
mod differential;
mod el0;
mod entry;
mod hvc;
mod kernel;
mod mmu;
mod mte;
mod probe;
mod programs;
mod selftest;
mod snippet;
mod workloads;

use mtex_abi::options::GuestOptions;

/// Rust entry, called by `entry::_start` with FP enabled and x0 = the device tree.
extern "C" fn guest_main(dtb: usize) -> ! {
    mmu::init_heap();
    // SAFETY: the hypervisor passes a valid device tree in x0 (booting.rst); nothing writes it.
    let fdt = match unsafe { fdt::Fdt::from_ptr(dtb as *const u8) } {
        Ok(f) => f,
        Err(_) => {
            println!("guest: no device tree at {dtb:#x}");
            hvc::exit(2)
        }
    };
    let bootargs = fdt.chosen().bootargs().unwrap_or("");
    let opts = match GuestOptions::parse(bootargs) {
        Ok(o) => o,
        Err(e) => {
            println!("guest: {}", mtex_abi::options::describe(e));
            hvc::exit(2)
        }
    };
    console::init_log(opts.log);
    println!("guest: booted, program {}", opts.program.name());
    log::debug!("device tree at {dtb:#x}, bootargs {bootargs:?}");
    let status = programs::run(&opts, &fdt);
    hvc::exit(status)
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    println!("guest: panic: {info}");
    hvc::exit(101)
}
