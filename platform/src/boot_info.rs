//! The boot-information structure the UEFI loader hands the hypervisor (x0 at entry).
//!
//! Entry contract (both paths; `qemu -kernel` passes a device tree in x0 instead):
//! - EL2, AArch64, interrupts masked (DAIF all set);
//! - SCTLR_EL2.M = 0 and C = 0 (MMU and data cache off); I may be on;
//! - the hypervisor image, this structure and everything it points to cleaned and
//!   invalidated to the point of coherency (DC CIVAC), and the instruction cache invalidated,
//!   so that with caches off they read what the loader wrote;
//! - the image loaded at a 2 MiB-aligned address with `image_size` bytes reserved for it
//!   (arm64 Image header, as Linux's booting.rst); the hypervisor relocates itself;
//! - install mode ([`BootMode::Install`]): boot services still run, in memory the
//!   hypervisor must not disturb; it returns to the firmware at EL1 at `resume.pc` with
//!   `resume.sp` and the controls in [`BootInfo::resume`], interrupts masked.
//!
//! The layout is `#[repr(C)]` and checked by [`BootInfo::check`]: a loader and hypervisor
//! from different builds refuse each other rather than misread fields.

use crate::firmware_el1::Resume;
use crate::machine::{MAX_RAM_REGIONS, Machine, Region};

/// "MTEXBOOT", little-endian.
pub const BOOT_INFO_MAGIC: u64 = u64::from_le_bytes(*b"MTEXBOOT");
/// Bumped on any change to [`BootInfo`] or [`Machine`].
pub const BOOT_INFO_VERSION: u32 = 5;

/// How the hypervisor was started and where its machine description came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum BootPath {
    /// `qemu -kernel`: a device tree in x0, the guest Image as the initrd.
    KernelDtb = 1,
    /// The UEFI loader, machine read from the firmware's device tree.
    UefiDtb = 2,
    /// The UEFI loader, machine read from ACPI (SPCR, MADT, GTDT, FADT).
    UefiAcpi = 3,
}

impl BootPath {
    pub fn from_u32(v: u32) -> Option<Self> {
        match v {
            1 => Some(BootPath::KernelDtb),
            2 => Some(BootPath::UefiDtb),
            3 => Some(BootPath::UefiAcpi),
            _ => None,
        }
    }
    pub const fn name(self) -> &'static str {
        match self {
            BootPath::KernelDtb => "kernel+dtb",
            BootPath::UefiDtb => "uefi+dtb",
            BootPath::UefiAcpi => "uefi+acpi",
        }
    }
}

/// What the hypervisor boots once it is installed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum BootMode {
    /// The built-in guest kernel, staged by the loader, in guest RAM of its own; the
    /// firmware is gone (boot services exited).
    Run = 0,
    /// Install: the firmware itself goes on at EL1 under the hypervisor, from
    /// [`BootInfo::resume`], over all its memory ([`BootInfo::firmware_ram`]); boot
    /// services still run, and the OS the firmware boots next is the guest.
    Install = 1,
}

/// What the loader hands over. Every region is physical and lies in memory the loader
/// allocated from UEFI (so it outlives ExitBootServices).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BootInfo {
    pub magic: u64,
    pub version: u32,
    /// `size_of::<BootInfo>()` as the loader built it.
    pub size: u32,
    /// [`BootPath`] as `u32`.
    pub path: u32,
    /// [`BootMode`] as `u32`.
    pub mode: u32,
    pub machine: Machine,
    /// Memory for the guest's RAM ([`crate::guest_vm::RAM_SIZE`] bytes, 2 MiB aligned).
    pub guest_ram: Region,
    /// The guest's arm64 Image, staged for the hypervisor to copy into guest RAM.
    pub guest_image: Region,
    /// The run's options (the `mtex.*` command line), UTF-8, not NUL-terminated.
    pub cmdline: Region,
    /// Install mode: where and how EL1 resumes the firmware.
    pub resume: Resume,
    /// Install mode: every write-back range of the firmware's memory map (whatever it holds:
    /// runtime services, ACPI tables, RAM), merged — what stage 2 maps as Normal memory.
    pub firmware_ram: [Region; MAX_RAM_REGIONS],
    pub firmware_ram_count: u32,
    /// Write-back ranges that did not fit `firmware_ram`: install mode refuses to go on.
    pub firmware_ram_dropped: u32,
    /// Install mode: the doorbell page, one page of memory the loader reserved (so that the
    /// OS never uses it, and no device is there), which stage 2 leaves unmapped. Its address
    /// reaches Linux's user space through the EFI variable `mtex_abi::doorbell::EFI_VARIABLE`.
    pub doorbell: Region,
    /// Memory the loader reserved for the secondary CPUs' EL2 state (stacks, blocks, run
    /// tables), [`CPU_HEAP_PER_CPU`] bytes for each CPU but the boot CPU; empty for one CPU.
    /// Never the guest's: install mode's stage 2 leaves it out.
    pub cpu_heap: Region,
}

/// What the loader reserves for each secondary CPU ([`BootInfo::cpu_heap`]). A CPU's EL2
/// allocations take about 0.8 MiB with the largest run tables (4 GiB of guest RAM or more);
/// the hypervisor says at boot if the machine needs more than it was given.
pub const CPU_HEAP_PER_CPU: u64 = 3 << 19;

/// [`BootInfo::cpu_heap`]'s size for a machine of `cpus` CPUs: whole 2 MiB blocks.
pub fn cpu_heap_size(cpus: usize) -> u64 {
    (cpus.saturating_sub(1) as u64 * CPU_HEAP_PER_CPU).next_multiple_of(2 << 20)
}

/// Why a boot-information structure was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BootInfoError {
    Magic,
    Version,
    Size,
    Path,
    Mode,
}

impl BootInfoError {
    pub const fn describe(self) -> &'static str {
        match self {
            BootInfoError::Magic => "boot information: bad magic",
            BootInfoError::Version => {
                "boot information: version differs (loader and hypervisor from different builds)"
            }
            BootInfoError::Size => {
                "boot information: size differs (loader and hypervisor from different builds)"
            }
            BootInfoError::Path => "boot information: unknown boot path",
            BootInfoError::Mode => "boot information: unknown boot mode",
        }
    }
}

impl BootInfo {
    pub fn new(path: BootPath, machine: Machine) -> Self {
        BootInfo {
            magic: BOOT_INFO_MAGIC,
            version: BOOT_INFO_VERSION,
            size: core::mem::size_of::<BootInfo>() as u32,
            path: path as u32,
            mode: BootMode::Run as u32,
            machine,
            guest_ram: Region::default(),
            guest_image: Region::default(),
            cmdline: Region::default(),
            resume: Resume::default(),
            firmware_ram: [Region::new(0, 0); MAX_RAM_REGIONS],
            firmware_ram_count: 0,
            firmware_ram_dropped: 0,
            doorbell: Region::new(0, 0),
            cpu_heap: Region::new(0, 0),
        }
    }

    /// The boot mode, None for a value no build knows.
    pub fn boot_mode(&self) -> Option<BootMode> {
        match self.mode {
            0 => Some(BootMode::Run),
            1 => Some(BootMode::Install),
            _ => None,
        }
    }

    /// Install mode's write-back ranges.
    pub fn firmware_ram(&self) -> &[Region] {
        &self.firmware_ram[..(self.firmware_ram_count as usize).min(MAX_RAM_REGIONS)]
    }

    /// Adds a write-back range, or counts it as dropped when the table is full.
    pub fn push_firmware_ram(&mut self, r: Region) {
        match self.firmware_ram.get_mut(self.firmware_ram_count as usize) {
            Some(slot) => {
                *slot = r;
                self.firmware_ram_count += 1;
            }
            None => self.firmware_ram_dropped += 1,
        }
    }

    /// Checks magic, version, size and path.
    pub fn check(&self) -> Result<BootPath, BootInfoError> {
        if self.magic != BOOT_INFO_MAGIC {
            return Err(BootInfoError::Magic);
        }
        if self.version != BOOT_INFO_VERSION {
            return Err(BootInfoError::Version);
        }
        if self.size as usize != core::mem::size_of::<BootInfo>() {
            return Err(BootInfoError::Size);
        }
        self.boot_mode().ok_or(BootInfoError::Mode)?;
        BootPath::from_u32(self.path).ok_or(BootInfoError::Path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_structure_from_another_build_is_refused() {
        let m = crate::qemu_virt::machine(0x4000_0000, 1 << 30);
        let b = BootInfo::new(BootPath::UefiAcpi, m);
        assert_eq!(b.check(), Ok(BootPath::UefiAcpi));
        let mut v = b;
        v.version += 1;
        assert_eq!(v.check(), Err(BootInfoError::Version));
        let mut s = b;
        s.size -= 8;
        assert_eq!(s.check(), Err(BootInfoError::Size));
        let mut g = b;
        g.magic = 0;
        assert_eq!(g.check(), Err(BootInfoError::Magic));
        let mut p = b;
        p.path = 9;
        assert_eq!(p.check(), Err(BootInfoError::Path));
        let mut m = b;
        m.mode = 7;
        assert_eq!(m.check(), Err(BootInfoError::Mode));
    }
}
