//! What the hypervisor learns at entry, from x0: a device tree (`qemu -kernel`, with the
//! guest's Image as the initrd) or the UEFI loader's `BootInfo`. Both give the same
//! [`Boot`]; nothing after this module knows which path was taken, except the Boot record.
//!
//! Runs with the MMU off, so every read here is of physical memory. Everything needed later
//! is copied out (the machine description, the options); the staged guest Image stays where
//! it is until `guest_boot::load` copies it into guest RAM.

use alloc::string::String;
use mtex_platform::boot_info::{BOOT_INFO_MAGIC, BootMode};
use mtex_platform::fw_cfg;
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
    /// Linux mode: the staged guest is a distribution kernel's bundle.
    pub linux: Option<LinuxGuest>,
    /// Install mode: the firmware goes on at EL1 as the guest.
    pub firmware: Option<FirmwareGuest>,
    /// RAM for the secondary CPUs' heap, sized for the machine's CPUs (taken at boot from
    /// RAM on the `-kernel` path, reserved by the loader on its path); None for one CPU or
    /// when RAM has no room (a CPU_ON the static heap cannot hold is then refused, and its
    /// record says so).
    pub cpu_heap: Option<Region>,
}

/// What Linux mode boots with besides the machine.
pub struct LinuxGuest {
    pub bundle: mtex_platform::linux_bundle::Header,
    /// The UART passed through to Linux (not the report console), and its SPI.
    pub uart: Region,
    pub uart_spi: u32,
}

/// Install mode: the firmware resumed at EL1, over all its memory.
pub struct FirmwareGuest {
    pub resume: mtex_platform::firmware_el1::Resume,
    /// Every write-back range of the firmware's memory map: Normal memory in stage 2.
    pub ram: alloc::vec::Vec<Region>,
    /// The doorbell page the loader reserved: left out of stage 2.
    pub doorbell: Region,
}

/// Guest RAM Linux mode accepts: at least 128 MiB, at most 3 GiB (the window at
/// `guest_vm::RAM_BASE` then stays below 4 GiB, inside stage 2's 39 bits with room to spare).
const LINUX_RAM_MIN: u64 = 128 << 20;
const LINUX_RAM_MAX: u64 = 3 << 30;

/// The staged guest's header, if it is a Linux bundle: read from physical memory (MMU off).
fn staged_bundle(
    image: Region,
) -> Option<Result<mtex_platform::linux_bundle::Header, &'static str>> {
    use mtex_platform::linux_bundle::{self, HEADER_SIZE};
    if image.size < HEADER_SIZE as u64 {
        return None;
    }
    // SAFETY: the staged guest is at least HEADER_SIZE bytes of RAM that QEMU or the loader
    // filled; read with the MMU off, and the slice dies here.
    let head = unsafe { core::slice::from_raw_parts(image.base as *const u8, HEADER_SIZE) };
    if !linux_bundle::is_bundle(head) {
        return None;
    }
    Some(
        linux_bundle::parse(head, image.size)
            .map_err(|e| e.describe())
            .and_then(|h| {
                let ok = (LINUX_RAM_MIN..=LINUX_RAM_MAX).contains(&h.ram_size)
                    && h.ram_size.is_multiple_of(guest_vm::RAM_ALIGN);
                ok.then_some(h).ok_or(
                    "the Linux bundle asks for guest RAM outside 128 MiB..3 GiB or not 2 MiB aligned",
                )
            }),
    )
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
    let cmdline = loader_options(info).map_err(|why| fail(console, why))?;
    if info.boot_mode() == Some(BootMode::Install) {
        return installed(at, info, path, cmdline).map_err(|why| fail(console, why));
    }
    let ram = info.guest_ram;
    if ram.size != guest_vm::RAM_SIZE || !ram.base.is_multiple_of(guest_vm::RAM_ALIGN) {
        return Err(fail(
            console,
            "boot information: guest RAM of the wrong size or alignment",
        ));
    }
    if staged_bundle(info.guest_image).is_some() {
        return Err(fail(
            console,
            "Linux mode boots through qemu -kernel only (not through the UEFI loader yet)",
        ));
    }
    let staged = Region::new(at, core::mem::size_of::<BootInfo>() as u64);
    let cpu_heap = loader_cpu_heap(
        info,
        info.machine.ram(),
        &[
            crate::hyp_region(),
            ram,
            staged,
            info.guest_image,
            info.cmdline,
        ],
    )
    .map_err(|why| fail(console, why))?;
    Ok(Boot {
        path,
        machine: info.machine,
        cmdline,
        guest_image: info.guest_image,
        guest_ram: GuestRam::at(ram.base),
        staging: [staged, info.guest_image],
        linux: None,
        firmware: None,
        cpu_heap,
    })
}

/// The secondary CPUs' heap the loader reserved: None if it reserved none (one CPU); an
/// error unless it lies, in whole 2 MiB blocks, inside one of `inside` and apart from
/// everything in `avoid`.
fn loader_cpu_heap(
    info: &BootInfo,
    inside: &[Region],
    avoid: &[Region],
) -> Result<Option<Region>, &'static str> {
    let h = info.cpu_heap;
    if h.size == 0 {
        return Ok(None);
    }
    let granule = mtex_vm::heap::GRANULE as u64;
    if !h.base.is_multiple_of(granule)
        || !h.size.is_multiple_of(granule)
        || h.base.checked_add(h.size).is_none()
        || !inside.iter().any(|r| r.contains(&h))
        || avoid.iter().any(|a| a.overlaps(&h))
    {
        return Err("boot information: the secondary CPUs' memory is not apart in RAM");
    }
    Ok(Some(h))
}

/// The run's options as the loader staged them.
fn loader_options(info: &BootInfo) -> Result<String, &'static str> {
    if info.cmdline.size > CMDLINE_MAX {
        return Err("boot information: options longer than 64 KiB");
    }
    // SAFETY: the loader staged the options in memory it allocated; read with the MMU off.
    let bytes = unsafe {
        core::slice::from_raw_parts(info.cmdline.base as *const u8, info.cmdline.size as usize)
    };
    let text = core::str::from_utf8(bytes).map_err(|_| "the options file is not UTF-8")?;
    Ok(String::from(text))
}

/// Install mode: the guest is the firmware, at its own addresses. Guest RAM is the firmware's
/// write-back ranges, one to one, less the hypervisor's memory (its image and its secondary
/// CPUs' heap), in as many banks as the firmware's memory map has.
fn installed(
    at: u64,
    info: &BootInfo,
    path: BootPath,
    cmdline: String,
) -> Result<Boot, &'static str> {
    let ram = info.firmware_ram();
    let in_ram = |r: &Region| ram.iter().any(|b| b.contains(r));
    if !in_ram(&crate::hyp_region()) {
        return Err("install mode: the hypervisor is not inside the firmware's RAM");
    }
    let d = info.doorbell;
    if d.size != mtex_abi::doorbell::DOORBELL_SIZE
        || !d.base.is_multiple_of(d.size)
        || !in_ram(&d)
        || d.overlaps(&crate::hyp_region())
    {
        return Err("install mode: no doorbell page (one page of the firmware's RAM, apart)");
    }
    let staged = Region::new(at, core::mem::size_of::<BootInfo>() as u64);
    let cpu_heap = loader_cpu_heap(info, ram, &[crate::hyp_region(), d, staged, info.cmdline])?;
    let holes = [crate::hyp_region(), cpu_heap.unwrap_or_default()];
    let guest_ram = GuestRam::identity(ram, &holes).ok_or(
        "install mode: the firmware's memory map has more write-back ranges than mtex holds",
    )?;
    Ok(Boot {
        path,
        machine: info.machine,
        cmdline,
        guest_image: Region::new(0, 0),
        guest_ram,
        staging: [staged, info.cmdline],
        linux: None,
        firmware: Some(FirmwareGuest {
            resume: info.resume,
            ram: ram.to_vec(),
            doorbell: d,
        }),
        cpu_heap,
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
    let linux = match staged_bundle(image) {
        None => None,
        Some(Err(why)) => return Err(fail(console, why)),
        Some(Ok(bundle)) => {
            let (uart, uart_spi) = mtex_dt::machine::spare_uart(tree).ok().flatten().ok_or(
                fail(
                    console,
                    "Linux mode needs a second UART for Linux's console (QEMU: a second -serial)",
                ),
            )?;
            Some(LinuxGuest {
                bundle,
                uart,
                uart_spi,
            })
        }
    };
    let ram_size = linux
        .as_ref()
        .map_or(guest_vm::RAM_SIZE, |l| l.bundle.ram_size);
    let tree_region = Region::new(at, len as u64);
    let avoid = [crate::hyp_region(), tree_region, image];
    let base = mtex_platform::placement::highest_free(
        machine.ram(),
        &avoid,
        ram_size,
        guest_vm::RAM_ALIGN,
    )
    .ok_or(fail(console, "no free RAM for the guest's window"))?;
    let cpu_heap = secondaries_heap(
        &machine,
        ram_size,
        &[
            crate::hyp_region(),
            tree_region,
            image,
            Region::new(base, ram_size),
        ],
    );
    let mut cmdline = String::from(info.bootargs);
    snippet_from_fw_cfg(tree, &mut cmdline).map_err(|why| fail(console, why))?;
    Ok(Boot {
        path: BootPath::KernelDtb,
        machine,
        cmdline,
        guest_image: image,
        guest_ram: GuestRam::sized(base, ram_size),
        staging: [tree_region, image],
        linux,
        firmware: None,
        cpu_heap,
    })
}

/// QEMU's fw_cfg registers (`mtex_platform::fw_cfg`), read with the MMU off: device memory.
struct FwCfgMmio(u64);

impl fw_cfg::Port for FwCfgMmio {
    fn select(&mut self, item: u16) {
        // SAFETY: the selector register of the fw_cfg device the machine's tree names, written
        // with the MMU off (a device access); selecting an item has no other effect.
        unsafe { core::ptr::write_volatile((self.0 + fw_cfg::SELECTOR) as *mut u16, item.to_be()) }
    }
    fn read(&mut self) -> u8 {
        // SAFETY: its data register, read with the MMU off; a read only moves the offset.
        unsafe { core::ptr::read_volatile((self.0 + fw_cfg::DATA) as *const u8) }
    }
}

/// A snippet's code, when the host gave it as fw_cfg's file `opt/mtex/snippet` (off QEMU's
/// command line, which every user of the host can read): added to the options as
/// `mtex.snippet=HEX`, as the guest reads it. Looked up for the snippet program only.
fn snippet_from_fw_cfg(tree: &[u8], cmdline: &mut String) -> Result<(), &'static str> {
    use core::fmt::Write as _;
    use mtex_abi::options::{SnippetOptions, value};
    if value(cmdline, "guest") != Some("snippet") {
        return Ok(());
    }
    // Registers that reach the selector, or none read.
    let Some(regs) = mtex_dt::machine::fw_cfg(tree)
        .ok()
        .flatten()
        .filter(|r| r.size >= fw_cfg::SELECTOR + 2)
    else {
        return Ok(());
    };
    let mut port = FwCfgMmio(regs.base);
    let Some(file) = fw_cfg::find(&mut port, fw_cfg::SNIPPET_FILE) else {
        return Ok(());
    };
    if value(cmdline, "snippet").is_some() {
        return Err("the snippet given twice: mtex.snippet and fw_cfg's opt/mtex/snippet");
    }
    if file.size == 0 || file.size as usize > SnippetOptions::MAX_BYTES {
        return Err("fw_cfg's opt/mtex/snippet is empty or longer than 8192 bytes");
    }
    let mut code = alloc::vec![0u8; file.size as usize];
    let n = fw_cfg::read(&mut port, file, &mut code);
    cmdline.push_str(" mtex.snippet=");
    for b in &code[..n] {
        let _ = write!(cmdline, "{b:02x}");
    }
    Ok(())
}

/// The highest free RAM that holds every secondary CPU's allocations (`smp::allocations`)
/// for a guest of `ram_size` bytes, outside `avoid`.
fn secondaries_heap(machine: &Machine, ram_size: u64, avoid: &[Region]) -> Option<Region> {
    use mtex_vm::heap;
    let per = heap::per_cpu(&crate::smp::allocations(ram_size));
    let bytes = heap::for_secondaries(machine.cpus().len(), per)? as u64;
    if bytes == 0 {
        return None;
    }
    let base =
        mtex_platform::placement::highest_free(machine.ram(), avoid, bytes, heap::GRANULE as u64)?;
    Some(Region::new(base, bytes))
}
