//! What the hypervisor learns at entry, from x0: a device tree (`qemu -kernel`, with the
//! guest's Image as the initrd) or the UEFI loader's `BootInfo`. Both give the same
//! [`Boot`]; nothing after this module knows which path was taken, except the Boot record.
//!
//! Runs with the MMU off, so every read here is of physical memory. Everything needed later
//! is copied out (the machine description, the options); the staged guest Image stays where
//! it is until `guest_boot::load` copies it into guest RAM.

use alloc::string::String;
use mtex_platform::boot_info::BOOT_INFO_MAGIC;
use mtex_platform::guest_vm::{self, GuestRam};
use mtex_platform::{BootInfo, BootPath, Console, Machine, Region};

/// The largest device tree accepted on the `-kernel` path.
const DTB_MAX: usize = 2 << 20;
/// The largest options string.
const CMDLINE_MAX: u64 = 64 << 10;

/// The machine and the run, however the hypervisor was started.
pub struct Boot {
    pub path: BootPath,
    pub machine: Machine,
    /// The run's options (`mtex.*`), given to the guest as its bootargs too.
    pub cmdline: String,
    /// The guest's arm64 Image as staged by QEMU or the loader (host physical).
    pub guest_image: Region,
    /// Guest RAM and the host memory behind it.
    pub guest_ram: GuestRam,
    /// Host memory read while booting (the tree or boot information, the staged Image), which
    /// EL2 must map.
    pub staging: [Region; 2],
}

/// Why the hypervisor cannot start, and the console to say it on if one was found.
pub struct BootError {
    pub console: Option<Console>,
    pub why: &'static str,
}

fn fail(console: Option<Console>, why: &'static str) -> BootError {
    BootError { console, why }
}

/// Reads x0.
pub fn discover(x0: u64) -> Result<Boot, BootError> {
    if x0 == 0 || !x0.is_multiple_of(8) {
        return Err(fail(
            None,
            "x0 holds neither a device tree nor boot information",
        ));
    }
    // SAFETY: x0 is 8-byte aligned physical memory given by the firmware or loader; with the
    // MMU off this reads RAM, without side effects.
    let magic = unsafe { core::ptr::read_volatile(x0 as *const u64) };
    if magic == BOOT_INFO_MAGIC {
        // SAFETY: the loader placed a BootInfo here (its magic says so); it lies in memory
        // the loader allocated and nothing writes it while the hypervisor boots.
        let info = unsafe { core::ptr::read_volatile(x0 as *const BootInfo) };
        from_loader(x0, &info)
    } else {
        from_device_tree(x0)
    }
}

fn from_loader(at: u64, info: &BootInfo) -> Result<Boot, BootError> {
    let console = info.machine.console.kind().map(|_| info.machine.console);
    let path = info.check().map_err(|e| fail(console, e.describe()))?;
    info.machine
        .validate()
        .map_err(|e| fail(console, e.describe()))?;
    let ram = info.guest_ram;
    if ram.size != guest_vm::RAM_SIZE || !ram.base.is_multiple_of(guest_vm::RAM_ALIGN) {
        return Err(fail(
            console,
            "boot information: guest RAM of the wrong size or alignment",
        ));
    }
    if info.cmdline.size > CMDLINE_MAX {
        return Err(fail(
            console,
            "boot information: options longer than 64 KiB",
        ));
    }
    // SAFETY: the loader staged the options in memory it allocated; read with the MMU off.
    let bytes = unsafe {
        core::slice::from_raw_parts(info.cmdline.base as *const u8, info.cmdline.size as usize)
    };
    let cmdline =
        core::str::from_utf8(bytes).map_err(|_| fail(console, "the options file is not UTF-8"))?;
    Ok(Boot {
        path,
        machine: info.machine,
        cmdline: String::from(cmdline),
        guest_image: info.guest_image,
        guest_ram: GuestRam::at(ram.base),
        staging: [
            Region::new(at, core::mem::size_of::<BootInfo>() as u64),
            info.guest_image,
        ],
    })
}

fn from_device_tree(at: u64) -> Result<Boot, BootError> {
    // SAFETY: reading the 8-byte header candidate at x0 (RAM, MMU off); the slice dies here.
    let header = unsafe { core::slice::from_raw_parts(at as *const u8, 8) };
    let len = mtex_dt::header_total_size(header)
        .filter(|&n| (8..=DTB_MAX).contains(&n))
        .ok_or(fail(
            None,
            "x0 holds neither a device tree nor boot information",
        ))?;
    // SAFETY: the header says the tree is `len` bytes at x0, in RAM QEMU filled; nothing
    // writes it while the hypervisor boots, and the slice does not outlive this function.
    let tree = unsafe { core::slice::from_raw_parts(at as *const u8, len) };
    let machine = mtex_dt::machine::machine(tree)
        .map_err(|_| fail(None, "the device tree does not describe a usable machine"))?;
    let console = machine.console.kind().map(|_| machine.console);
    machine
        .validate()
        .map_err(|e| fail(console, e.describe()))?;
    // machine() checked the tree's structure first, which the fdt crate needs to not panic.
    let info =
        mtex_dt::boot_info(tree).map_err(|_| fail(console, "the device tree does not parse"))?;
    let image = info.initrd.ok_or(fail(
        console,
        "no guest Image: on the -kernel path it is passed as the initrd (-initrd)",
    ))?;
    let tree_region = Region::new(at, len as u64);
    let avoid = [crate::hyp_region(), tree_region, image];
    let base = mtex_platform::placement::highest_free(
        machine.ram(),
        &avoid,
        guest_vm::RAM_SIZE,
        guest_vm::RAM_ALIGN,
    )
    .ok_or(fail(
        console,
        "no free RAM for the guest (it needs 256 MiB)",
    ))?;
    Ok(Boot {
        path: BootPath::KernelDtb,
        machine,
        cmdline: String::from(info.bootargs),
        guest_image: image,
        guest_ram: GuestRam::at(base),
        staging: [tree_region, image],
    })
}
