//! Install mode: the hypervisor goes under the firmware, which goes on at EL1 — to its boot
//! manager's next boot option, or to the kernel `mtex.cfg` names, started here the standard
//! way (LoadImage and StartImage, its command line as the image's load options).
//!
//! Everything that can fail is done before the install: discovery, reading the hypervisor
//! and its options, loading the kernel. A failure returns to the firmware (or powers off)
//! with the machine as it was.

use alloc::vec::Vec;
use mtex_loader::config::Config;
use mtex_platform::BootInfo;
use mtex_platform::boot_info::BootMode;
use mtex_platform::firmware_el1::Resume;
use uefi::boot::{self, LoadImageSource, MemoryType};
use uefi::proto::BootPolicy;
use uefi::proto::device_path::DevicePath;
use uefi::proto::device_path::build::{self, DevicePathBuilder};
use uefi::proto::loaded_image::LoadedImage;
use uefi::{CString16, Handle, Status};

use crate::files::Volume;
use crate::handover::{self, Handover};
use crate::{Failure, memory};

/// The doorbell's vendor GUID, as UEFI takes it.
const DOORBELL_VENDOR: uefi::Guid = uefi::Guid::parse_or_panic(mtex_abi::doorbell::EFI_VENDOR);

/// Sets the volatile EFI variable that tells Linux's user space (through efivarfs) where the
/// doorbell is. Volatile: the next boot has none.
fn publish_doorbell(at: u64) -> Result<(), Failure> {
    use uefi::runtime::{self, VariableAttributes, VariableVendor};
    let name = mtex_abi::doorbell::EFI_VARIABLE;
    let wide = CString16::try_from(name)
        .map_err(|_| fail!(Status::INVALID_PARAMETER, "EFI variable name {name}"))?;
    runtime::set_variable(
        &wide,
        &VariableVendor(DOORBELL_VENDOR),
        VariableAttributes::BOOTSERVICE_ACCESS | VariableAttributes::RUNTIME_ACCESS,
        &at.to_le_bytes(),
    )
    .map_err(|e| {
        fail!(
            e.status(),
            "setting the EFI variable {name}: {:?}",
            e.status()
        )
    })?;
    println!("{PREFIX}doorbell at {at:#x} (EFI variable {name})");
    Ok(())
}

/// Installs the hypervisor and returns to the firmware, or starts the configured kernel.
pub fn run(volume: &mut Volume, config: &Config) -> Result<Status, Failure> {
    let (path, machine, firmware_memory) = crate::discover_machine()?;
    let (hyp, entry) = crate::load_hypervisor(volume, &config.hyp, MemoryType::RESERVED)?;
    let cpu_heap = crate::reserve_cpu_heap(&machine, MemoryType::RESERVED)?;
    let cmdline = crate::stage_options(volume, config)?;
    // The doorbell: a page of memory no one else will use, left out of stage 2. Linux's user
    // space finds its address in a volatile EFI variable, and in the command line of a
    // kernel started here (`mtex.doorbell=`, Linux ignores the word).
    let doorbell = memory::allocate_as(
        "doorbell",
        mtex_abi::doorbell::DOORBELL_SIZE,
        mtex_abi::doorbell::DOORBELL_SIZE,
        MemoryType::RESERVED,
    )?;
    let kernel = match &config.kernel {
        Some(rel) => {
            let args = alloc::format!(
                "{} {}={:#x}",
                config.kernel_args,
                mtex_abi::doorbell::CMDLINE_WORD,
                doorbell.base
            );
            Some(load_kernel(volume, rel, args.trim_start())?)
        }
        None => None,
    };
    // Last of what can fail, so that a failed install leaves no variable behind.
    publish_doorbell(doorbell.base)?;

    let mut info = BootInfo::new(path, machine);
    info.mode = BootMode::Install as u32;
    info.cmdline = cmdline;
    for r in &firmware_memory.mapped {
        info.push_firmware_ram(*r);
    }
    if info.firmware_ram_dropped != 0 {
        return Err(fail!(
            Status::UNSUPPORTED,
            "the firmware's memory map has more than {} write-back ranges",
            info.firmware_ram.len()
        ));
    }
    info.doorbell = doorbell;
    info.cpu_heap = cpu_heap;
    let el2 = handover::el2_controls();
    info.resume = Resume::from_el2(&el2);
    println!(
        "{PREFIX}firmware at EL2: SCTLR {:#x} TCR {:#x} TTBR0 {:#x} MAIR {:#x} VBAR {:#x} CPTR {:#x}",
        el2.sctlr_el2, el2.tcr_el2, el2.ttbr0_el2, el2.mair_el2, el2.vbar_el2, el2.cptr_el2
    );
    let at = memory::allocate("boot information", size_of::<BootInfo>() as u64, 0)?;
    // SAFETY: `at` is a fresh page allocation, aligned and large enough for a BootInfo,
    // which is plain data; nothing else refers to it.
    unsafe { (at.base as *mut BootInfo).write(info) };
    println!("{PREFIX}installing the hypervisor at EL2; the firmware goes on at EL1");
    let h = Handover {
        entry,
        boot_info: at.base,
        clean: [hyp, at, cmdline, volume.loader_image, at, at],
    };
    // SAFETY: the hypervisor was copied to `entry`, the BootInfo is in install mode with its
    // controls converted from this CPU's EL2 ones; every region handed over is in `clean`.
    unsafe { handover::install_and_return(&h) };
    println!(
        "{PREFIX}installed: the hypervisor at {:#x}, the firmware at EL{}",
        hyp.base,
        handover::current_el()
    );
    match kernel {
        None => {
            // UEFI 2.10 §3.1.1: a boot option that returns EFI_SUCCESS may stop the boot
            // manager at its menu; any other status sends it on to the next option in
            // BootOrder, which is the point here (BootNext = mtex, then the usual OS).
            println!("{PREFIX}back to the boot manager, for its next boot option");
            Ok(Status::ABORTED)
        }
        Some(k) => start_kernel(k),
    }
}

/// A kernel loaded but not started, and its command line (kept alive until it starts).
struct Kernel {
    handle: Handle,
    path: alloc::string::String,
    _args: CString16,
}

/// Loads `rel` from the loader's volume through its full device path, so that the image's
/// LoadedImage names that volume and the kernel's EFI stub finds `initrd=` files on it.
fn load_kernel(volume: &mut Volume, rel: &str, args: &str) -> Result<Kernel, Failure> {
    let path = volume.path(rel);
    let device = {
        let me =
            boot::open_protocol_exclusive::<LoadedImage>(boot::image_handle()).map_err(|e| {
                fail!(
                    e.status(),
                    "cannot open the loader's LoadedImage: {}",
                    e.status()
                )
            })?;
        me.device()
            .ok_or_else(|| fail!(Status::NOT_FOUND, "the loader's volume has no handle"))?
    };
    let volume_path = boot::open_protocol_exclusive::<DevicePath>(device).map_err(|e| {
        fail!(
            e.status(),
            "cannot read the volume's device path: {}",
            e.status()
        )
    })?;
    let file = CString16::try_from(path.as_str())
        .map_err(|_| fail!(Status::INVALID_PARAMETER, "kernel path {path}: not UCS-2"))?;
    let mut buf = Vec::new();
    let mut builder = DevicePathBuilder::with_vec(&mut buf);
    for node in volume_path.node_iter() {
        builder = builder.push(&node).map_err(|_| {
            fail!(
                Status::OUT_OF_RESOURCES,
                "cannot build the kernel's device path"
            )
        })?;
    }
    let full = builder
        .push(&build::media::FilePath { path_name: &file })
        .and_then(|b| b.finalize())
        .map_err(|_| {
            fail!(
                Status::OUT_OF_RESOURCES,
                "cannot build the kernel's device path"
            )
        })?;
    let handle = boot::load_image(
        boot::image_handle(),
        LoadImageSource::FromDevicePath {
            device_path: full,
            boot_policy: BootPolicy::ExactMatch,
        },
    )
    .map_err(|e| fail!(e.status(), "cannot load the kernel {path}: {}", e.status()))?;
    let args16 = CString16::try_from(args)
        .map_err(|_| fail!(Status::INVALID_PARAMETER, "kernel_args: not UCS-2"))?;
    {
        let mut image = boot::open_protocol_exclusive::<LoadedImage>(handle).map_err(|e| {
            fail!(
                e.status(),
                "cannot open the kernel's LoadedImage: {}",
                e.status()
            )
        })?;
        let bytes = args16.num_bytes();
        // SAFETY: the options point at `args16`, which lives in the returned Kernel until the
        // image has started (and, as the kernel never returns on success, for good); the
        // size is its byte length, NUL included, as the UEFI specification's LoadOptions.
        unsafe { image.set_load_options(args16.as_ptr().cast(), bytes as u32) };
    }
    println!("{PREFIX}kernel {path} loaded, command line \"{args}\"");
    Ok(Kernel {
        handle,
        path,
        _args: args16,
    })
}

/// Starts the kernel; returns only if it exits (an EFI stub does on an error).
fn start_kernel(k: Kernel) -> Result<Status, Failure> {
    println!("{PREFIX}starting {}", k.path);
    match boot::start_image(k.handle) {
        Ok(()) => Ok(Status::SUCCESS),
        Err(e) => Err(fail!(
            e.status(),
            "the kernel {} returned {}",
            k.path,
            e.status()
        )),
    }
}
