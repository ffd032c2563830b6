//! Translation: the hypervisor's own EL2 stage 1 (identity map of just what it uses) and the
//! guest's stage 2 (guest RAM at `guest_vm`'s fixed addresses, backed by host memory wherever
//! it was found). Tables come from aarch64-paging; this file chooses ranges and attributes.

use aarch64_cpu::asm::barrier;
use aarch64_paging::Mapping;
use aarch64_paging::descriptor::{El23Attributes, PhysicalAddress, Stage2Attributes};
use aarch64_paging::idmap::{IdMap, IdTranslation};
use aarch64_paging::paging::{Constraints, El2, MemoryRegion, Stage2};
use alloc::boxed::Box;
use arm_sysregs::el1::accessors::read_id_aa64mmfr0_el1;
use arm_sysregs::el2::accessors::{write_mair_el2, write_sctlr_el2, write_tcr_el2, write_vtcr_el2};
use arm_sysregs::el2::registers::{MairEl2, SctlrEl2, TcrEl2, VtcrEl2};
use core::sync::atomic::{AtomicPtr, Ordering};
use mtex_platform::guest_vm::GuestRam;
use mtex_platform::{Errata, Region};

/// EL2 stage 1: a level-0 root and 48-bit addresses (T0SZ = 16), because servers put
/// devices high (an Altra's console UART is at 0x1000_0262_0000).
const EL2_ROOT_LEVEL: usize = 0;
const EL2_T0SZ: u8 = 16;
/// Stage 2: the guest's addresses are mtex's small fixed layout; 39 bits (level-1 root,
/// T0SZ = 25) hold it.
const S2_ROOT_LEVEL: usize = 1;
const S2_T0SZ: u8 = 25;

/// TCR_EL2.TG0 / VTCR_EL2.TG0: the 4 KiB granule.
const TG0_4K: u8 = 0b00;
/// SH0: table walks Inner Shareable.
const SH0_INNER: u8 = 0b11;
/// IRGN0 / ORGN0: table walks Normal, Write-Back Read-Allocate Write-Allocate Cacheable.
const WALK_WBRAWA: u8 = 0b01;
/// VTCR_EL2.SL0 with the 4 KiB granule: the root's level (1 for 39 bits, 0 for 48).
const SL0_4K_LEVEL1: u8 = 0b01;
const SL0_4K_LEVEL0: u8 = 0b10;

/// MAIR_EL2's attributes: Device-nGnRE, and Normal Write-Back Non-transient Read-Allocate
/// Write-Allocate, inner and outer.
const ATTR_DEVICE_NGNRE: u8 = 0b0000_0100;
const ATTR_NORMAL_WB: u8 = 0b1111_1111;

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

/// A device passed through to the guest (Linux mode): Device-nGnRE, never executable.
const S2_DEVICE: Stage2Attributes = Stage2Attributes::VALID
    .union(Stage2Attributes::MEMATTR_DEVICE_nGnRE)
    .union(Stage2Attributes::S2AP_ACCESS_RW)
    .union(Stage2Attributes::ACCESS_FLAG)
    .union(Stage2Attributes::XN);

/// ID_AA64MMFR0_EL1.PARange capped at 48 bits, as a TCR_EL2.PS / VTCR_EL2.PS value.
fn phys_size_field() -> u8 {
    read_id_aa64mmfr0_el1().parange().min(5)
}

/// Page-aligned cover of `r`.
fn pages(r: Region) -> MemoryRegion {
    let start = r.base & !0xfff;
    let end = (r.base + r.size + 0xfff) & !0xfff;
    MemoryRegion::new(start as usize, end as usize)
}

/// Identity-maps `normal` (the hypervisor's image, guest RAM, what firmware staged) as
/// Normal memory and `devices` (console, GIC) as Device memory at EL2, then turns the MMU and
/// caches on. Runs once, with the MMU off.
pub fn enable_el2(normal: &[Region], devices: &[Region]) {
    let mut map = IdMap::new(EL2_ROOT_LEVEL, El2);
    for r in normal {
        map.map_range(&pages(*r), EL2_NORMAL)
            .expect("map memory at EL2");
    }
    for r in devices {
        map.map_range(&pages(*r), EL2_DEVICE)
            .expect("map a device at EL2");
    }
    // Index 0 Device-nGnRE, index 1 Normal Write-Back (inner and outer).
    const MAIR: MairEl2 = MairEl2::empty()
        .with_attr(0, ATTR_DEVICE_NGNRE)
        .with_attr(1, ATTR_NORMAL_WB);
    const _: () = assert!(MAIR.bits() == 0xff04);
    // TCR_EL2 (non-VHE): RES1 bits 31 and 23, then the walk: 4 KiB granule, inner-shareable
    // write-back table walks.
    const _: () = assert!(TcrEl2::RES1.bits() == (1 << 31) | (1 << 23));
    let tcr = TcrEl2::RES1
        .with_ps(phys_size_field())
        .with_tg0(TG0_4K)
        .with_sh0(SH0_INNER)
        .with_orgn0(WALK_WBRAWA)
        .with_irgn0(WALK_WBRAWA)
        .with_t0sz(EL2_T0SZ);
    // SAFETY: the MMU is still off: these take effect with `activate` below, whose tables use
    // these attribute indices and this walk.
    unsafe {
        write_mair_el2(MAIR);
        write_tcr_el2(tcr);
    }
    barrier::isb(barrier::SY);
    let map = Box::leak(Box::new(map));
    // SAFETY: the map covers all memory the hypervisor uses (its image, stack and heap are
    // in `normal`, its devices in `devices`), identity-mapped, and is leaked so it lives
    // forever.
    unsafe { map.activate() };
    // SAFETY: invalidating EL2 TLB entries has no effect on memory.
    unsafe { core::arch::asm!("tlbi alle2", "dsb nsh", "isb") };
    // Everything the hypervisor wrote so far (relocations, bss, heap, these tables) went to
    // memory, the data cache being off. A line for those addresses may still be in the cache,
    // fetched speculatively while firmware still ran with its caches on after the loader's
    // clean; once the cache is on it would be hit and hide the newer memory (the Arm ARM's
    // rules on mismatched attributes allow a hit even for the Non-cacheable accesses made so
    // far). Invalidate them first: memory holds the truth, so nothing is lost.
    invalidate_to_poc(crate::hyp_region());
    // SCTLR_EL2 (non-VHE): RES1 bits, then M (MMU), C (data cache), SA (stack alignment)
    // and I (instruction cache). The RES1 bits (4, 5, 11, 16, 18, 22, 23, 28, 29) are
    // hand-typed: arm-sysregs names them by their E2H = 1 fields (SA0, CP15BEN, EOS...).
    const SCTLR_RES1: u64 = 0x30c5_0830;
    let on = SctlrEl2::from_bits_retain(SCTLR_RES1)
        | SctlrEl2::M
        | SctlrEl2::C
        | SctlrEl2::SA
        | SctlrEl2::I;
    // SAFETY: the tables activated above identity-map everything the hypervisor uses, and
    // the cache holds nothing stale for it (invalidated above).
    unsafe { write_sctlr_el2(on) };
    barrier::isb(barrier::SY);
}

/// Builds the guest's stage 2: its RAM window mapped onto the host memory behind it, and
/// `devices` at their own addresses (Linux mode's pass-through; none for the built-in
/// guest), so every other guest address (the hypervisor, the report console, other devices)
/// faults to EL2.
pub fn enable_stage2(guest: GuestRam, devices: &[Region], errata: Errata) {
    let mut map = Mapping::new(IdTranslation::new(), S2_ROOT_LEVEL, Stage2);
    let ipa = guest.ipa;
    // The first pages of the guest's image in pages of their own: a guarded phase makes
    // some of them read-only while it is open (`protect`), which then changes page entries'
    // permissions alone, as the architecture allows on a live table. Mapped before the rest
    // of RAM, which leaves pages it finds as they are (a block already mapping the same
    // would not be split).
    let image = PROTECTABLE;
    if ipa.contains(&image) {
        let pa = guest.pa + (image.base - ipa.base);
        map.map_range(
            &MemoryRegion::new(image.base as usize, image.end() as usize),
            PhysicalAddress(pa as usize),
            S2_RAM,
            Constraints::NO_BLOCK_MAPPINGS,
        )
        .expect("map the guest image's first pages");
    }
    map.map_range(
        &MemoryRegion::new(ipa.base as usize, ipa.end() as usize),
        PhysicalAddress(guest.pa as usize),
        S2_RAM,
        Constraints::empty(),
    )
    .expect("map guest RAM");
    for d in devices {
        assert!(
            !d.overlaps(&ipa),
            "a passed-through device inside guest RAM"
        );
        let r = pages(*d);
        map.map_range(
            &r,
            PhysicalAddress(r.start().0),
            S2_DEVICE,
            Constraints::empty(),
        )
        .expect("map a passed-through device");
    }
    // The UART is not mapped for the guest: it carries the report stream, and a guest that
    // owned it could disable it (stopping EL2's output), loop it back or forge frames. The
    // guest's console is the CONSOLE_WRITE hypercall.
    let map = activate_stage2(map, vtcr(SL0_4K_LEVEL1, S2_T0SZ, errata));
    GUEST_STAGE2.store(map, Ordering::Relaxed);
}

/// What a guarded phase may make read-only: the first 2 MiB of the guest's image (the
/// built-in guest's code and read-only data are a fraction of it).
const PROTECTABLE: Region = Region::new(mtex_platform::guest_vm::IMAGE_ADDR, 2 << 20);

/// Stage 2 as `enable_stage2` built it (null in install mode, whose stage 2 is the
/// firmware's map and is never changed).
static GUEST_STAGE2: AtomicPtr<Mapping<IdTranslation<Stage2Attributes>, Stage2>> =
    AtomicPtr::new(core::ptr::null_mut());

/// Makes guest RAM `[start, end)` (page-aligned) read-only at stage 2, or read-write again:
/// the code of a guarded phase's harness, and the guest's, while the phase is open. False,
/// with nothing changed, outside [`PROTECTABLE`] or in install mode.
///
/// Only the permission bits of page entries change (the pages were split at boot), so the
/// table stays live; the library invalidates each page's stage-2 TLB entries, and the VM's
/// combined stage-1-and-2 entries go here, on every CPU. The lower levels of the table are
/// shared by every CPU's root (`stage2_roots`): each CPU sees the change.
pub fn protect((start, end): (u64, u64), read_only: bool) -> bool {
    let map = GUEST_STAGE2.load(Ordering::Relaxed);
    if map.is_null() || start < PROTECTABLE.base || end > PROTECTABLE.end() || start >= end {
        return false;
    }
    // SAFETY: the mapping was leaked at boot and is changed only here, by the CPU that holds
    // the hypervisor state (every caller does), so this is the only reference in use.
    let map = unsafe { &mut *map };
    let access = if read_only {
        Stage2Attributes::S2AP_ACCESS_RO
    } else {
        Stage2Attributes::S2AP_ACCESS_RW
    };
    let done = map
        .modify_range(&MemoryRegion::new(start as usize, end as usize), &|_, d| {
            if d.level() != 3 {
                return Err(());
            }
            let flags = d.flags().difference(Stage2Attributes::S2AP_ACCESS_RW) | access;
            d.set(d.output_address(), flags)
        })
        .is_ok();
    // SAFETY: invalidating this VMID's stage-1&2 TLB entries on every CPU has no effect on
    // memory.
    unsafe { core::arch::asm!("dsb ishst", "tlbi vmalls12e1is", "dsb ish", "isb") };
    done
}

/// VTCR_EL2: RES1 bit 31, 4 KiB granule, inner-shareable write-back walks, the root level
/// `sl0` and `t0sz`. HA and HD stay 0: mtex does not use hardware Access-flag updates, and
/// AmpereOne forbids them (erratum AC03_CPU_38) — `Errata::vtcr` enforces that on every CPU
/// it applies to, should a later change set them.
fn vtcr(sl0: u8, t0sz: u8, errata: Errata) -> VtcrEl2 {
    let v = VtcrEl2::RES1
        .with_ps(phys_size_field())
        .with_tg0(TG0_4K)
        .with_sh0(SH0_INNER)
        .with_orgn0(WALK_WBRAWA)
        .with_irgn0(WALK_WBRAWA)
        .with_sl0(sl0)
        .with_t0sz(t0sz);
    VtcrEl2::from_bits_retain(errata.vtcr(v.bits()))
}

/// Install mode's device space: Device-nGnRE as [`S2_DEVICE`], but executable, because
/// firmware runs code from its flash: edk2 calls the copy of its live page-table update
/// routine (ArmReplaceLiveTranslationEntry) that stays in the execute-in-place image, since
/// that routine turns the MMU off for a moment. What is executable is the firmware's own
/// stage 1 to decide.
const S2_DEVICE_EXEC: Stage2Attributes = Stage2Attributes::VALID
    .union(Stage2Attributes::MEMATTR_DEVICE_nGnRE)
    .union(Stage2Attributes::S2AP_ACCESS_RW)
    .union(Stage2Attributes::ACCESS_FLAG);

/// Install mode's stage 2: the firmware's whole physical address space, one to one — its
/// write-back ranges (`ram`) as Normal memory, everything else up to the CPU's physical
/// address size as Device memory (the console, the GIC, PCIe, flash: whatever the firmware
/// and the OS it boots drive) — except `holes` (the hypervisor, the doorbell page), which
/// fault to EL2. A level-0 root: servers' devices lie far above 39 bits.
pub fn enable_stage2_identity(ram: &[Region], holes: &[Region], errata: Errata) {
    let pa_bits = [32u8, 36, 40, 42, 44, 48][phys_size_field() as usize];
    let mut map = Mapping::new(IdTranslation::new(), 0, Stage2);
    let id = |map: &mut Mapping<IdTranslation<Stage2Attributes>, Stage2>,
              r: MemoryRegion,
              a: Stage2Attributes| {
        map.map_range(&r, PhysicalAddress(r.start().0), a, Constraints::empty())
            .expect("map the firmware's address space");
    };
    id(&mut map, MemoryRegion::new(0, 1 << pa_bits), S2_DEVICE_EXEC);
    for r in ram {
        id(&mut map, pages(*r), S2_RAM);
    }
    for h in holes.iter().filter(|h| h.size != 0) {
        id(&mut map, pages(*h), Stage2Attributes::empty());
    }
    let vtcr = vtcr(SL0_4K_LEVEL0, 64 - pa_bits, errata);
    activate_stage2(map, vtcr);
}

/// Sets VTCR_EL2, makes `map` the guest's stage 2 for good, and copies its root per CPU.
/// Returns the map, leaked.
fn activate_stage2(
    map: Mapping<IdTranslation<Stage2Attributes>, Stage2>,
    vtcr: VtcrEl2,
) -> &'static mut Mapping<IdTranslation<Stage2Attributes>, Stage2> {
    // SAFETY: stage 2 only affects the guest, which has not run yet; `activate` below gives
    // it the table this walk describes.
    unsafe { write_vtcr_el2(vtcr) };
    barrier::isb(barrier::SY);
    let map = Box::leak(Box::new(map));
    // SAFETY: stage 2 only affects the guest, which has not run yet; the map is leaked.
    unsafe { map.activate() };
    // SAFETY: invalidating stage-1&2 TLB entries of this VMID has no effect on memory.
    unsafe { core::arch::asm!("tlbi vmalls12e1", "dsb nsh", "isb") };
    // Each CPU walks a copy of this root (`stage2_roots`).
    crate::stage2_roots::set_template();
    map
}

/// CTR_EL0.DminLine: the smallest data cache line, in bytes.
fn dcache_line() -> usize {
    4usize << arm_sysregs::el0::accessors::read_ctr_el0().dminline()
}

/// Runs one data-cache maintenance instruction over every line of `r`, then a DSB.
macro_rules! by_line {
    ($op:literal, $r:expr) => {{
        let r: Region = $r;
        let line = dcache_line();
        let end = (r.base + r.size) as usize;
        let mut a = r.base as usize & !(line - 1);
        while a < end {
            // SAFETY: data-cache maintenance by address on memory EL2 maps or, with the MMU
            // off, on physical memory: no effect on memory contents as this EL sees them
            // (an invalidate is only used where memory is already up to date).
            unsafe { core::arch::asm!(concat!("dc ", $op, ", {}"), in(reg) a) };
            a += line;
        }
        barrier::dsb(barrier::SY);
    }};
}

/// Cleans and invalidates `r` to the point of coherency: what EL2 wrote through its cache
/// reaches memory, and no line remains to be written back later over what a reader with its
/// caches off (the guest at entry) writes.
pub fn clean_invalidate_to_poc(r: Region) {
    by_line!("civac", r)
}

/// Invalidates `r` to the point of coherency, dropping cached copies of memory that was
/// written with the data cache off.
pub fn invalidate_to_poc(r: Region) {
    by_line!("ivac", r)
}

/// Invalidates the whole instruction cache to the point of unification, after instructions
/// were written as data (the guest's Image).
pub fn invalidate_icache() {
    // SAFETY: instruction-cache invalidation has no effect on memory.
    unsafe { core::arch::asm!("ic iallu", "dsb sy", "isb") };
}
