//! mtex-loader: a UEFI application that chain-loads the mtex hypervisor at EL2.
//!
//! Run from the ESP (as `\EFI\BOOT\BOOTAA64.EFI` or from the shell), it reads `mtex.cfg` from
//! its own directory, checks that the firmware started it at EL2, reads the machine from the
//! firmware's ACPI tables or device tree and its RAM from the memory map, loads the
//! hypervisor (a raw arm64 Image) text_offset above a 2 MiB boundary, stages the guest image
//! and the run's options, fills a `BootInfo`, exits boot services and enters the hypervisor
//! with the MMU and caches off and x0 = the BootInfo (the contract in
//! `mtex_platform::boot_info`).
//!
//! Every message starts with `mtex-loader: `, errors with `mtex-loader: error: `; on an
//! error the loader returns the error to the firmware or, with `on_error = shutdown`, powers
//! the machine off. The pure parts live in the library (`lib.rs`); these modules talk to
//! firmware. `test/handover-stub.S`, put on the ESP as the hypervisor, checks the hand-over
//! on its own.
#![no_std]
#![no_main]

extern crate alloc;

use alloc::string::String;
use core::sync::atomic::{AtomicBool, Ordering};

use mtex_loader::config::{self, Config, Mode, OnError};
use mtex_loader::summary;
use mtex_platform::arm64_image as image;
use mtex_platform::{BootInfo, BootPath, Machine, Region, guest_vm};
use uefi::boot::MemoryType;
use uefi::prelude::*;
use uefi::runtime::{self, ResetType};

/// Why the loader stops: printed after `mtex-loader: error: `, `status` returned to firmware.
pub struct Failure {
    pub message: String,
    pub status: Status,
}

/// A [`Failure`] from a status and a message.
macro_rules! fail {
    ($status:expr, $($arg:tt)*) => {
        $crate::Failure { message: alloc::format!($($arg)*), status: $status }
    };
}

/// `println!` with the loader's prefix in scope for every module.
macro_rules! println {
    ($($arg:tt)*) => {{
        #[allow(unused_imports)]
        use mtex_loader::PREFIX;
        uefi::println!($($arg)*)
    }};
}

mod discover;
mod files;
mod handover;
mod install;
mod memory;

use files::Volume;
use handover::Handover;

/// Set once the configuration asks for a shutdown on error, for the panic handler.
static SHUTDOWN_ON_ERROR: AtomicBool = AtomicBool::new(false);
/// Set just before ExitBootServices: from then on nothing may print or return to firmware.
static BOOT_SERVICES_EXITED: AtomicBool = AtomicBool::new(false);

#[entry]
fn main() -> Status {
    let mut on_error = OnError::Return;
    let failure = match run(&mut on_error) {
        Ok(status) => return status,
        Err(f) => f,
    };
    println!("{PREFIX}error: {}", failure.message);
    if on_error == OnError::Shutdown {
        runtime::reset(ResetType::SHUTDOWN, failure.status, None);
    }
    failure.status
}

/// Loads everything and hands over; returns on failure, or in install mode once the
/// hypervisor is installed (the status for the firmware).
fn run(on_error: &mut OnError) -> Result<Status, Failure> {
    let el = handover::current_el();
    // The configuration is read before the EL is checked: it says how to end.
    let opened = Volume::open().and_then(|mut volume| {
        let config = read_config(&mut volume, on_error)?;
        Ok((volume, config))
    });
    SHUTDOWN_ON_ERROR.store(*on_error == OnError::Shutdown, Ordering::Relaxed);
    if el != 2 {
        return Err(fail!(
            Status::UNSUPPORTED,
            "started at EL{el}; mtex needs firmware that starts UEFI applications at EL2 \
             (on QEMU: -machine virtualization=on)"
        ));
    }
    let (mut volume, config) = opened?;
    if config.mode == Mode::Install {
        return install::run(&mut volume, &config);
    }

    let handover = prepare(&mut volume, &config)?;
    println!("{PREFIX}firmware at EL2, booting the hypervisor");
    // Every protocol and file is closed before boot services end.
    drop(volume);
    BOOT_SERVICES_EXITED.store(true, Ordering::Relaxed);
    // SAFETY: the volume (the only protocol held) is closed; `prepare` returned owned
    // regions only and nothing allocated in pool memory is used again.
    unsafe { handover::exit_and_enter(handover) }
}

/// `mtex.cfg`, or every default when there is none. Sets `on_error` from the file, even
/// when another line of it is wrong.
fn read_config(volume: &mut Volume, on_error: &mut OnError) -> Result<Config, Failure> {
    let path = volume.path(config::FILE_NAME);
    let Some(mut file) = volume.open_optional(config::FILE_NAME)? else {
        return Ok(Config::default());
    };
    match config::parse(&file.read_all()?) {
        Ok(c) => {
            *on_error = c.on_error;
            Ok(c)
        }
        Err(e) => {
            *on_error = e.on_error;
            Err(fail!(Status::INVALID_PARAMETER, "{path}: {e}"))
        }
    }
}

/// Reads the machine from the firmware, prints one line for each part, and checks it.
fn discover_machine() -> Result<(BootPath, Machine, memory::FirmwareMemory), Failure> {
    let firmware_memory = memory::FirmwareMemory::read()?;
    let (path, machine) = discover::machine(&firmware_memory)?;
    let mut lines = String::new();
    // Writing to a String cannot fail.
    let _ = summary::write(&mut lines, &machine, path);
    uefi::print!("{lines}");
    if let Err(e) = machine.validate() {
        return Err(fail!(Status::UNSUPPORTED, "{}", e.describe()));
    }
    Ok((path, machine, firmware_memory))
}

/// Discovers the machine, loads the images and fills the BootInfo.
fn prepare(volume: &mut Volume, config: &Config) -> Result<Handover, Failure> {
    let (path, machine, _) = discover_machine()?;
    let (hyp, entry) = load_hypervisor(volume, &config.hyp, MemoryType::LOADER_DATA)?;
    let guest_ram = memory::allocate("guest RAM", guest_vm::RAM_SIZE, guest_vm::RAM_ALIGN)?;
    let guest_image = stage_guest(volume, &config.guest)?;
    let cmdline = stage_options(volume, config)?;
    let cpu_heap = reserve_cpu_heap(&machine, MemoryType::LOADER_DATA)?;

    let info = memory::allocate("boot information", size_of::<BootInfo>() as u64, 0)?;
    let mut boot_info = BootInfo::new(path, machine);
    boot_info.cpu_heap = cpu_heap;
    boot_info.guest_ram = guest_ram;
    boot_info.guest_image = guest_image;
    boot_info.cmdline = cmdline;
    // SAFETY: `info` is a fresh page allocation, aligned and large enough for a BootInfo,
    // which is plain data; nothing else refers to it.
    unsafe { (info.base as *mut BootInfo).write(boot_info) };
    println!(
        "{PREFIX}guest RAM {} MiB at {:#x}, boot information at {:#x}",
        guest_ram.size >> 20,
        guest_ram.base,
        info.base
    );

    let own = volume.loader_image;
    Ok(Handover {
        entry,
        boot_info: info.base,
        clean: [hyp, info, guest_ram, guest_image, cmdline, own],
    })
}

/// Memory for the secondary CPUs' EL2 state, of type `ty` (`BootInfo::cpu_heap`): sized
/// for every CPU the machine lists, as the hypervisor's own image holds only a few.
fn reserve_cpu_heap(machine: &Machine, ty: MemoryType) -> Result<Region, Failure> {
    let size = mtex_platform::boot_info::cpu_heap_size(machine.cpus().len());
    if size == 0 {
        return Ok(Region::new(0, 0));
    }
    let r = memory::allocate_as("secondary CPUs' EL2 memory", size, 2 << 20, ty)?;
    println!(
        "{PREFIX}{} MiB at {:#x} for the EL2 state of {} secondary CPUs",
        r.size >> 20,
        r.base,
        machine.cpus().len() - 1
    );
    Ok(r)
}

/// Reads the hypervisor's arm64 Image to `text_offset` above a 2 MiB boundary. Returns its
/// whole reservation (pages of type `ty`) and its entry (first byte).
fn load_hypervisor(
    volume: &mut Volume,
    rel: &str,
    ty: MemoryType,
) -> Result<(Region, u64), Failure> {
    let mut file = volume.open_file(rel)?;
    let mut header = [0u8; image::HEADER_SIZE];
    let len = (file.size as usize).min(header.len());
    file.read_at(0, &mut header[..len])?;
    let h = image::parse(&header[..len], file.size)
        .map_err(|e| fail!(Status::LOAD_ERROR, "{}: {}", file.path, e.describe()))?;
    let region = memory::allocate_as("hypervisor", h.reservation(), image::BASE_ALIGN, ty)?;
    let entry = region.base + h.text_offset;
    // SAFETY: `region` was just allocated for the hypervisor and nothing else refers to it.
    let dst = unsafe { memory::bytes_mut(region) };
    let off = h.text_offset as usize;
    file.read_at(0, &mut dst[off..off + file.size as usize])?;
    println!(
        "{PREFIX}hypervisor {}: {} KiB at {entry:#x}, {} KiB reserved for it",
        file.path,
        file.size.div_ceil(1024),
        h.image_size.div_ceil(1024)
    );
    Ok((region, entry))
}

/// Copies the guest's arm64 Image into a staging buffer for the hypervisor.
fn stage_guest(volume: &mut Volume, rel: &str) -> Result<Region, Failure> {
    let mut file = volume.open_file(rel)?;
    let staging = memory::allocate("guest image", file.size, 0)?;
    // SAFETY: `staging` was just allocated and nothing else refers to it.
    let dst = unsafe { memory::bytes_mut(staging) };
    let dst = &mut dst[..file.size as usize];
    file.read_at(0, dst)?;
    image::parse(dst, file.size)
        .map_err(|e| fail!(Status::LOAD_ERROR, "{}: {}", file.path, e.describe()))?;
    println!(
        "{PREFIX}guest {}: {} KiB staged at {:#x}",
        file.path,
        file.size.div_ceil(1024),
        staging.base
    );
    Ok(Region::new(staging.base, file.size))
}

/// Copies the run's command line (the options file's line) into a staging buffer.
fn stage_options(volume: &mut Volume, config: &Config) -> Result<Region, Failure> {
    let bytes = if config.options_explicit {
        Some(volume.open_file(&config.options)?.read_all()?)
    } else {
        match volume.open_optional(&config.options)? {
            Some(mut f) => Some(f.read_all()?),
            None => None,
        }
    };
    let path = volume.path(&config.options);
    let line = match &bytes {
        Some(b) => config::command_line(b)
            .map_err(|why| fail!(Status::INVALID_PARAMETER, "{path}: {why}"))?,
        None => "",
    };
    // Checked as the hypervisor will check them, so that a mistake is reported here, before
    // anything is handed over (in install mode, with the machine as it was).
    if let Err(e) = mtex_abi::options::HypOptions::parse(line) {
        let why = mtex_abi::options::describe(e);
        return Err(fail!(Status::INVALID_PARAMETER, "{path}: {why}"));
    }
    if let Some(key) = mtex_abi::options::unknown_key(line) {
        return Err(fail!(
            Status::INVALID_PARAMETER,
            "{path}: unknown option mtex.{key}"
        ));
    }
    let staging = memory::allocate("options", line.len() as u64, 0)?;
    // SAFETY: `staging` was just allocated and nothing else refers to it.
    let dst = unsafe { memory::bytes_mut(staging) };
    dst[..line.len()].copy_from_slice(line.as_bytes());
    match bytes {
        Some(_) => println!("{PREFIX}options {path}: \"{line}\""),
        None => println!("{PREFIX}options: none ({path} absent)"),
    }
    Ok(Region::new(staging.base, line.len() as u64))
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    let shutdown = SHUTDOWN_ON_ERROR.load(Ordering::Relaxed);
    if !BOOT_SERVICES_EXITED.load(Ordering::Relaxed) {
        println!("{PREFIX}error: internal error: {info}");
        if !shutdown {
            // SAFETY: returns to the firmware's StartImage with an error, as a failed
            // application does; the loader's state is abandoned and never used again.
            let _ = unsafe {
                boot::exit(
                    boot::image_handle(),
                    Status::ABORTED,
                    0,
                    core::ptr::null_mut(),
                )
            };
        }
    }
    if shutdown {
        runtime::reset(ResetType::SHUTDOWN, Status::ABORTED, None);
    }
    loop {
        aarch64_cpu::asm::wfe();
    }
}
