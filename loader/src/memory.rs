//! Memory from UEFI: page allocations that outlive ExitBootServices, the firmware's memory
//! map as the machine's RAM, and physical memory read through UEFI's identity map.

use alloc::vec::Vec;
use mtex_loader::ram;
use mtex_platform::Region;
use uefi::boot::{self, AllocateType, MemoryType};
use uefi::mem::memory_map::{MemoryAttribute, MemoryMap as _};

use crate::Failure;
use mtex_acpi::PhysMem;

pub const PAGE: u64 = 4096;
/// Allocations stay below 2^48: the hypervisor's page tables (4 KiB granule, 4 levels)
/// reach no higher, whatever the CPU's PARange.
const MAX_ADDRESS: u64 = (1 << 48) - 1;

/// `size` bytes (at least one page) starting at an `align`-aligned address, from pages of
/// type LOADER_DATA: the firmware leaves them alone after ExitBootServices and lists them as
/// in use in the memory map it hands on. Never freed: they are the hypervisor's.
pub fn allocate(what: &str, size: u64, align: u64) -> Result<Region, Failure> {
    allocate_as(what, size, align, MemoryType::LOADER_DATA)
}

/// [`allocate`] from pages of type `ty`. Install mode takes the hypervisor's memory as
/// RESERVED: the OS the firmware boots next never uses it (Linux keeps reserved ranges out
/// of its linear map), and the firmware itself never hands it out.
pub fn allocate_as(what: &str, size: u64, align: u64, ty: MemoryType) -> Result<Region, Failure> {
    let align = align.max(PAGE);
    let size = size.max(1).next_multiple_of(PAGE);
    let pages = (size + align - PAGE) / PAGE;
    let base = boot::allocate_pages(AllocateType::MaxAddress(MAX_ADDRESS), ty, pages as usize)
        .map_err(|e| {
            fail!(
                e.status(),
                "cannot allocate {} KiB for the {what}: {}",
                pages * PAGE / 1024,
                e.status()
            )
        })?;
    let base = (base.as_ptr() as u64).next_multiple_of(align);
    Ok(Region::new(base, size))
}

/// A mutable view of an allocation made by [`allocate`].
///
/// # Safety
/// `r` must come from [`allocate`] (identity-mapped RAM owned by the loader) and no other
/// reference to it may be live.
pub unsafe fn bytes_mut(r: Region) -> &'static mut [u8] {
    // SAFETY: per the contract, `r` is loader-owned, mapped, writable memory (UEFI
    // identity-maps RAM: UEFI 2.10 §2.3.6) and not aliased. u8 has no invalid values, and
    // callers write before they read.
    unsafe { core::slice::from_raw_parts_mut(r.base as *mut u8, r.size as usize) }
}

/// The firmware's memory map, read once before the machine is discovered.
pub struct FirmwareMemory {
    /// RAM the hypervisor may use after ExitBootServices, merged.
    pub ram: Vec<Region>,
    /// Every write-back (RAM) range of the map, whatever it holds, merged: where UEFI
    /// guarantees an identity mapping, and so where [`PhysMem::read`] may look; in install
    /// mode, what stage 2 maps as Normal memory.
    pub mapped: Vec<Region>,
}

impl FirmwareMemory {
    pub fn read() -> Result<Self, Failure> {
        let map = boot::memory_map(MemoryType::LOADER_DATA).map_err(|e| {
            fail!(
                e.status(),
                "cannot read the UEFI memory map: {}",
                e.status()
            )
        })?;
        let mut ram = Vec::new();
        let mut mapped = Vec::new();
        for d in map.entries() {
            let r = Region::new(d.phys_start, d.page_count * PAGE);
            if is_free_after_exit(d.ty) {
                ram.push(r);
            }
            if d.att.contains(MemoryAttribute::WRITE_BACK) && d.ty != MemoryType::UNUSABLE {
                mapped.push(r);
            }
        }
        Ok(FirmwareMemory {
            ram: ram::merge(ram),
            mapped: ram::merge(mapped),
        })
    }
}

/// The memory types an OS may use as RAM once boot services have exited (UEFI 2.10 Table
/// 7.6, "Memory Type Usage after ExitBootServices()"): conventional memory, what boot
/// services and loaders held — the loader's own allocations included, so the hypervisor's
/// image, guest RAM and the staging buffers lie inside this RAM — and ACPI reclaim memory,
/// whose tables the loader has read into the Machine before it hands over. Runtime-services
/// memory, ACPI NVS, reserved, MMIO and persistent memory are not RAM to use.
fn is_free_after_exit(ty: MemoryType) -> bool {
    matches!(
        ty,
        MemoryType::CONVENTIONAL
            | MemoryType::BOOT_SERVICES_CODE
            | MemoryType::BOOT_SERVICES_DATA
            | MemoryType::LOADER_CODE
            | MemoryType::LOADER_DATA
            | MemoryType::ACPI_RECLAIM
    )
}

impl PhysMem for FirmwareMemory {
    /// Firmware tables (ACPI, the device tree) read in place. Only ranges inside one
    /// write-back range of the memory map are given out; anything else (an address from a
    /// corrupt table, a device) is None rather than a fault.
    fn read(&self, addr: u64, len: usize) -> Option<&[u8]> {
        let want = Region::new(addr, u64::try_from(len).ok()?);
        want.base.checked_add(want.size)?;
        if addr == 0 || !self.mapped.iter().any(|m| m.contains(&want)) {
            return None;
        }
        // SAFETY: UEFI maps all RAM its memory map describes with VA = PA (UEFI 2.10 §2.3.6,
        // AArch64 Platforms: "Any RAM defined by the UEFI memory map is identity-mapped"),
        // and the loader keeps firmware's translation tables until it hands over; `want`
        // lies inside one write-back (RAM) range of that map, so the pointer is valid for
        // `len` bytes. Nothing writes firmware tables while the loader runs (it is the only
        // code running, and it does not), so the bytes do not change under the shared
        // borrow; the machine readers return owned values, so no borrow outlives discovery.
        Some(unsafe { core::slice::from_raw_parts(addr as *const u8, len) })
    }
}
