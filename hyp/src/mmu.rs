//! Translation: the hypervisor's own EL2 stage 1 (identity map) and the guest's stage 2.
//! Tables come from aarch64-paging; this file only chooses the ranges and the attributes.

use crate::Board;
use aarch64_cpu::asm::barrier;
use aarch64_cpu::registers::*;
use aarch64_paging::descriptor::{El23Attributes, Stage2Attributes};
use aarch64_paging::idmap::IdMap;
use aarch64_paging::paging::{El2, MemoryRegion, Stage2};
use alloc::boxed::Box;
use mtex_dt::Region;
use mtex_platform::Platform;
use tock_registers::interfaces::{Readable, Writeable};

/// Level-1 root: 39-bit address spaces (T0SZ = 25), enough for QEMU virt's RAM and MMIO.
const ROOT_LEVEL: usize = 1;
const T0SZ: u64 = 25;

/// MAIR_EL2: index 0 Device-nGnRE, index 1 Normal Write-Back (inner and outer).
const MAIR: u64 = 0x04 | (0xff << 8);

const EL2_DEVICE: El23Attributes = El23Attributes::VALID
    .union(El23Attributes::ATTRIBUTE_INDEX_0)
    .union(El23Attributes::ACCESSED)
    .union(El23Attributes::XN);
const EL2_NORMAL: El23Attributes = El23Attributes::VALID
    .union(El23Attributes::ATTRIBUTE_INDEX_1)
    .union(El23Attributes::INNER_SHAREABLE)
    .union(El23Attributes::ACCESSED);

/// Guest RAM: Normal Write-Back, the only memory type on which MTE tags work (DESIGN.md).
const S2_RAM: Stage2Attributes = Stage2Attributes::VALID
    .union(Stage2Attributes::MEMATTR_NORMAL_INNER_WB)
    .union(Stage2Attributes::MEMATTR_NORMAL_OUTER_WB)
    .union(Stage2Attributes::S2AP_ACCESS_RW)
    .union(Stage2Attributes::SH_INNER)
    .union(Stage2Attributes::ACCESS_FLAG);

/// PARange capped at 40 bits, as a TCR_EL2.PS / VTCR_EL2.PS value.
fn phys_size_field() -> u64 {
    (ID_AA64MMFR0_EL1.get() & 0xf).min(2)
}

fn region(base: usize, size: usize) -> MemoryRegion {
    MemoryRegion::new(base, base + size)
}

/// Identity-maps RAM (normal) and the console and GIC (device) at EL2, then turns the MMU
/// and caches on. Runs once, with the MMU off.
pub fn enable_el2(ram: Region) {
    let mut map = IdMap::new(ROOT_LEVEL, El2);
    map.map_range(&region(ram.base as usize, ram.size as usize), EL2_NORMAL)
        .expect("map RAM at EL2");
    map.map_range(&region(Board::UART_BASE, 0x1000), EL2_DEVICE)
        .expect("map UART at EL2");
    map.map_range(&region(Board::GICD_BASE, Board::GIC_SIZE), EL2_DEVICE)
        .expect("map GIC at EL2");
    MAIR_EL2.set(MAIR);
    // TCR_EL2 (non-VHE): RES1 bits 31 and 23, PS, 4 KiB granule, inner-shareable WB walks.
    TCR_EL2.set(
        (1 << 31) | (1 << 23) | (phys_size_field() << 16) | (3 << 12) | (1 << 10) | (1 << 8) | T0SZ,
    );
    barrier::isb(barrier::SY);
    let map = Box::leak(Box::new(map));
    // SAFETY: the map covers all memory the hypervisor uses (its image, stack and heap are in
    // RAM; its devices are mapped), identity-mapped, and is leaked so it lives forever.
    unsafe { map.activate() };
    // SAFETY: invalidating EL2 TLB entries has no effect on memory.
    unsafe { core::arch::asm!("tlbi alle2", "dsb nsh", "isb") };
    // SCTLR_EL2 (non-VHE): RES1 bits, then M (MMU), C (data cache), SA (stack alignment) and
    // I (instruction cache).
    const RES1: u64 = 0x30c5_0830;
    SCTLR_EL2.set(RES1 | (1 << 0) | (1 << 2) | (1 << 3) | (1 << 12));
    barrier::isb(barrier::SY);
}

/// Builds the guest's stage 2: RAM identity-mapped except the hypervisor's own memory, and
/// the console. Everything else (GIC, other devices, the hypervisor) faults to EL2.
pub fn enable_stage2(ram: Region, hyp: Region) {
    let mut map = IdMap::new(ROOT_LEVEL, Stage2);
    let (ram_end, hyp_end) = (ram.base + ram.size, hyp.base + hyp.size);
    if hyp.base > ram.base {
        map.map_range(
            &region(ram.base as usize, (hyp.base - ram.base) as usize),
            S2_RAM,
        )
        .expect("map guest RAM below the hypervisor");
    }
    if ram_end > hyp_end {
        map.map_range(
            &region(hyp_end as usize, (ram_end - hyp_end) as usize),
            S2_RAM,
        )
        .expect("map guest RAM above the hypervisor");
    }
    // The UART is not mapped for the guest: it carries the report stream, and a guest that
    // owned it could disable it (stopping EL2's output), loop it back or forge frames. The
    // guest's console is the CONSOLE_WRITE hypercall; a direct access is a stage-2 fault
    // that ends the run with a record.
    // VTCR_EL2: RES1 bit 31, PS, 4 KiB granule, inner-shareable WB walks, start level 1
    // (SL0 = 1), T0SZ. HA stays 0 (also required by AmpereOne erratum AC03_CPU_38).
    let _ = Board::VTCR_HA_FORBIDDEN;
    VTCR_EL2.set(
        (1 << 31) | (phys_size_field() << 16) | (3 << 12) | (1 << 10) | (1 << 8) | (1 << 6) | T0SZ,
    );
    barrier::isb(barrier::SY);
    let map = Box::leak(Box::new(map));
    // SAFETY: stage 2 only affects the guest, which has not run yet; the map is leaked.
    unsafe { map.activate() };
    // SAFETY: invalidating stage-1&2 TLB entries of this VMID has no effect on memory.
    unsafe { core::arch::asm!("tlbi vmalls12e1", "dsb nsh", "isb") };
}

/// Cleans `[start, start + len)` to the point of coherency, so that a guest running with its
/// MMU and caches off (as Linux is entered) sees what EL2 wrote through its caches.
pub fn clean_to_poc(start: usize, len: usize) {
    // CTR_EL0.DminLine: log2 of the smallest data cache line in words.
    let ctr: u64;
    // SAFETY: reading CTR_EL0 has no side effects.
    unsafe { core::arch::asm!("mrs {}, ctr_el0", out(reg) ctr) };
    let line = 4usize << ((ctr >> 16) & 0xf);
    let mut a = start & !(line - 1);
    while a < start + len {
        // SAFETY: cleaning a cache line by address is a maintenance operation with no effect
        // on the contents of memory as seen by this EL.
        unsafe { core::arch::asm!("dc cvac, {}", in(reg) a) };
        a += line;
    }
    barrier::dsb(barrier::SY);
}
