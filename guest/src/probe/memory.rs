//! The probe's address space. TTBR0: all RAM identity-mapped, Tagged Normal, for EL1 only
//! (code, stack, heap), plus one EL0 page of each kind (Tagged, Untagged) and the EL0 code
//! page. TTBR1: one EL1 page of each kind at its linear-map address (`KERNEL_LINEAR_BASE |
//! pa`, top byte 0xFF as Linux's kernel pointers), which only EL1 cells access. A page keeps
//! its attributes in both halves where both map it.

use crate::by_address::ByAddress;
use crate::mmu::Page;
use aarch64_paging::Mapping;
use aarch64_paging::descriptor::{El1Attributes, PhysicalAddress};
use aarch64_paging::idmap::{IdMap, IdTranslation};
use aarch64_paging::paging::{Constraints, El1And0, MemoryRegion, VaRange};
use alloc::boxed::Box;
use arm_sysregs::el1::accessors::write_mair_el1;
use arm_sysregs::el1::registers::MairEl1;
use mtex_abi::program::{KERNEL_LINEAR_BASE, MAIR_EL1 as MAIR};

/// The pages the cells access (their first granule) and the cost phases' tag stores use.
pub static EL1_TAGGED: ByAddress<Page> = ByAddress::new(Page([0; 4096]));
pub static EL1_UNTAGGED: ByAddress<Page> = ByAddress::new(Page([0; 4096]));
pub static EL0_TAGGED: ByAddress<Page> = ByAddress::new(Page([0; 4096]));
pub static EL0_UNTAGGED: ByAddress<Page> = ByAddress::new(Page([0; 4096]));
pub static COST_PAGE: ByAddress<Page> = ByAddress::new(Page([0; 4096]));

/// MAIR index 0: Tagged Normal (0xF0); index 1: Normal Write-Back (mtex_abi::program).
const NORMAL: El1Attributes = El1Attributes::VALID
    .union(El1Attributes::INNER_SHAREABLE)
    .union(El1Attributes::ACCESSED);
const TAGGED: El1Attributes = NORMAL.union(El1Attributes::ATTRIBUTE_INDEX_0);
const UNTAGGED: El1Attributes = NORMAL.union(El1Attributes::ATTRIBUTE_INDEX_1);
/// RAM in TTBR0 (EL1 only), and EL1's Untagged page there.
const RAM: El1Attributes = TAGGED.union(El1Attributes::NON_GLOBAL);
const RAM_UNTAGGED: El1Attributes = UNTAGGED.union(El1Attributes::NON_GLOBAL);
/// EL0 data: no execution at any EL.
const USER_DATA: El1Attributes = El1Attributes::USER
    .union(El1Attributes::UXN)
    .union(El1Attributes::PXN)
    .union(El1Attributes::NON_GLOBAL);
/// EL0 code: EL0 may execute and read it, EL1 may not execute it.
const USER_CODE: El1Attributes = UNTAGGED
    .union(El1Attributes::USER)
    .union(El1Attributes::READ_ONLY)
    .union(El1Attributes::PXN)
    .union(El1Attributes::NON_GLOBAL);
/// EL1 data in TTBR1: global (TCR_EL1.A1 = 0, one ASID for both halves), never executed.
const KERNEL_DATA: El1Attributes = El1Attributes::UXN.union(El1Attributes::PXN);

unsafe extern "C" {
    static __user_text_start: u8;
    static __user_text_end: u8;
}

/// The linear-map (TTBR1) address of `pa`.
pub const fn kva(pa: u64) -> u64 {
    KERNEL_LINEAR_BASE | pa
}

fn page(p: *mut Page) -> MemoryRegion {
    let a = p as usize;
    MemoryRegion::new(a, a + 4096)
}

/// Builds both tables and installs them in TTBR0_EL1/TTBR1_EL1, with MAIR_EL1; the MMU is
/// turned on by the caller's SCTLR_EL1 write (trapped and logged).
pub fn install(ram_base: usize, ram_size: usize) {
    let mut low = IdMap::with_asid(0, 1, El1And0);
    let ram = MemoryRegion::new(ram_base, ram_base + ram_size);
    low.map_range(&ram, RAM).expect("map RAM");
    let pages = [
        (EL0_TAGGED.ptr(), TAGGED.union(USER_DATA)),
        (EL0_UNTAGGED.ptr(), UNTAGGED.union(USER_DATA)),
        (EL1_UNTAGGED.ptr(), RAM_UNTAGGED),
    ];
    for (p, attrs) in pages {
        low.map_range(&page(p), attrs).expect("map a probe page");
    }
    // Only the addresses of the linker symbols are used.
    let (ut_start, ut_end) = (
        &raw const __user_text_start as usize,
        &raw const __user_text_end as usize,
    );
    low.map_range(&MemoryRegion::new(ut_start, ut_end), USER_CODE)
        .expect("map the EL0 code");
    let mut high =
        Mapping::with_asid_and_va_range(IdTranslation::new(), 0, 1, El1And0, VaRange::Upper);
    for (p, attrs) in [(EL1_TAGGED.ptr(), TAGGED), (EL1_UNTAGGED.ptr(), UNTAGGED)] {
        let pa = p as u64;
        high.map_range(
            &MemoryRegion::new(kva(pa) as usize, kva(pa) as usize + 4096),
            PhysicalAddress(pa as usize),
            attrs.union(KERNEL_DATA),
            Constraints::empty(),
        )
        .expect("map an EL1 page in TTBR1");
    }
    // SAFETY: the MMU is still off: MAIR_EL1 applies only once the caller turns it on, to the
    // tables below, whose attribute indexes are MAIR's.
    unsafe { write_mair_el1(MairEl1::from_bits_retain(MAIR)) };
    // The tables live as long as the program.
    let (low, high) = (Box::leak(Box::new(low)), Box::leak(Box::new(high)));
    // SAFETY: the MMU is still off, so the TTBRs take effect only when the caller turns it
    // on; TTBR0 maps all of RAM (code, data, stack, heap, the device tree) at its own
    // address, and TTBR1 only the two EL1 pages, which Rust code never references through
    // TTBR1. The tables are leaked.
    unsafe {
        low.activate();
        high.activate();
    }
    // Everything written with the caches off (the tables on the heap) is read cacheably
    // from now on: no stale line may hide it (see mmu::init_heap).
    crate::mmu::invalidate_image_data();
}
