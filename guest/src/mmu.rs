//! The guest's heap and its identity map: all RAM as Tagged Normal memory (MAIR 0xF0), so
//! every RAM access can be tag checked.

use crate::by_address::ByAddress;
use aarch64_paging::descriptor::El1Attributes;
use aarch64_paging::idmap::IdMap;
use aarch64_paging::paging::{El1And0, MemoryRegion};
use alloc::boxed::Box;
use arm_sysregs::el0::accessors::read_ctr_el0;
use arm_sysregs::el1::accessors::write_mair_el1;
use arm_sysregs::el1::registers::MairEl1;
use buddy_system_allocator::LockedHeap;

const HEAP_SIZE: usize = 1 << 20;

#[repr(C, align(4096))]
struct HeapMemory([u8; HEAP_SIZE]);

static HEAP_MEMORY: ByAddress<HeapMemory> = ByAddress::new(HeapMemory([0; HEAP_SIZE]));

#[global_allocator]
static ALLOCATOR: LockedHeap<32> = LockedHeap::empty();

pub fn init_heap() {
    let start = HEAP_MEMORY.ptr() as usize;
    // Page tables are built here with the MMU (and so the caches) off, then walked
    // cacheably: no line of the heap may be in a cache, before (a dirty one would later be
    // written back over a table) or after (the walker would read a stale one). Linux's
    // head.S does the same around its early tables.
    invalidate_heap();
    // SAFETY: HEAP_MEMORY's range is used by nothing but the allocator, which is handed its
    // address here, and this runs once.
    unsafe { ALLOCATOR.lock().init(start, HEAP_SIZE) };
}

/// Removes the heap's lines from the data caches (see [`dcache_inval_poc`]).
pub fn invalidate_heap() {
    let start = HEAP_MEMORY.addr();
    dcache_inval_poc(start, start + HEAP_SIZE as u64);
}

unsafe extern "C" {
    static __data_start: u8;
    static __bss_end: u8;
}

/// Removes the lines of the image's writable data (.data and .bss, the heap included) from
/// the data caches (see [`dcache_inval_poc`]).
pub fn invalidate_image_data() {
    // Only the symbols' addresses are used.
    let (s, e) = (&raw const __data_start as u64, &raw const __bss_end as u64);
    dcache_inval_poc(s, e);
}

/// Removes the lines of `[start, end)` from the data caches, to the point of coherency
/// (DC IVAC, which EL1 under stage 2 performs as clean-and-invalidate). Used while the MMU
/// is off, on memory written only with the caches off.
pub fn dcache_inval_poc(start: u64, end: u64) {
    // CTR_EL0.DminLine: log2 of the smallest data cache line, in words.
    let line = 4u64 << read_ctr_el0().dminline();
    let mut a = start & !(line - 1);
    while a < end {
        // SAFETY: cache maintenance of the guest's own memory; no data changes meaning.
        unsafe { core::arch::asm!("dc ivac, {}", in(reg) a) };
        a += line;
    }
    // SAFETY: a barrier.
    unsafe { core::arch::asm!("dsb sy") };
}

use mtex_abi::program::MAIR_EL1 as MAIR;

const TAGGED_RAM: El1Attributes = El1Attributes::VALID
    .union(El1Attributes::NON_GLOBAL)
    .union(El1Attributes::ATTRIBUTE_INDEX_0)
    .union(El1Attributes::INNER_SHAREABLE)
    .union(El1Attributes::ACCESSED);

/// A page EL0 may access (LDTR/STTR targets), Tagged.
#[repr(C, align(4096))]
pub struct Page(pub [u8; 4096]);

pub static USER_PAGE: ByAddress<Page> = ByAddress::new(Page([0; 4096]));
/// A page mapped Normal Write-Back without the Tagged attribute.
pub static UNTAGGED_PAGE: ByAddress<Page> = ByAddress::new(Page([0; 4096]));

/// An Untagged page (`.0`) and right after it a Tagged one (`.1`), for accesses that cross
/// from one into the other.
#[repr(C, align(4096))]
pub struct SplitPages(pub Page, pub Page);

pub static SPLIT_PAGES: ByAddress<SplitPages> =
    ByAddress::new(SplitPages(Page([0; 4096]), Page([0; 4096])));

const USER_RAM: El1Attributes = TAGGED_RAM
    .union(El1Attributes::USER)
    .union(El1Attributes::UXN);
const UNTAGGED_RAM: El1Attributes = El1Attributes::VALID
    .union(El1Attributes::NON_GLOBAL)
    .union(El1Attributes::ATTRIBUTE_INDEX_1)
    .union(El1Attributes::INNER_SHAREABLE)
    .union(El1Attributes::ACCESSED);

/// EL0 code: EL0 may execute and read it, EL1 may read it but not execute it.
const USER_CODE: El1Attributes = El1Attributes::VALID
    .union(El1Attributes::NON_GLOBAL)
    .union(El1Attributes::ATTRIBUTE_INDEX_1)
    .union(El1Attributes::INNER_SHAREABLE)
    .union(El1Attributes::ACCESSED)
    .union(El1Attributes::USER)
    .union(El1Attributes::READ_ONLY)
    .union(El1Attributes::PXN);

unsafe extern "C" {
    static __user_text_start: u8;
    static __user_text_end: u8;
}

fn page_region(p: *mut Page) -> MemoryRegion {
    let a = p as usize;
    MemoryRegion::new(a, a + 4096)
}

/// Builds the identity map of `[base, base + size)` and installs it in TTBR0_EL1. The MMU is
/// turned on later by the program's SCTLR_EL1 write, which the hypervisor traps.
/// The identity map once installed (null before): the remap self-test looks up an entry.
pub static IDMAP: core::sync::atomic::AtomicPtr<IdMap<El1And0>> =
    core::sync::atomic::AtomicPtr::new(core::ptr::null_mut());

pub fn install_idmap(base: usize, size: usize) {
    let mut map = IdMap::with_asid(0, 1, El1And0);
    map.map_range(&MemoryRegion::new(base, base + size), TAGGED_RAM)
        .expect("map RAM");
    // Pages with other attributes, remapped before the table is live.
    map.map_range(&page_region(USER_PAGE.ptr()), USER_RAM)
        .expect("map the user page");
    map.map_range(&page_region(UNTAGGED_PAGE.ptr()), UNTAGGED_RAM)
        .expect("map the untagged page");
    map.map_range(&page_region(SPLIT_PAGES.ptr().cast()), UNTAGGED_RAM)
        .expect("map the untagged half of the split pages");
    // Only the addresses of the linker symbols are used.
    let (ut_start, ut_end) = (
        &raw const __user_text_start as usize,
        &raw const __user_text_end as usize,
    );
    map.map_range(&MemoryRegion::new(ut_start, ut_end), USER_CODE)
        .expect("map the EL0 code page");
    // The pages whose entries the self-tests change (remapped code, an alias window) get
    // page entries of their own (same attributes), so that one entry can be changed while
    // the table is live.
    for page in crate::selftest::own_page_entries() {
        map.map_range(&MemoryRegion::new(page, page + 4096), TAGGED_RAM)
            .expect("map a remap test page");
    }
    // SAFETY: the MMU is still off: MAIR_EL1 applies only once the program turns it on, to
    // this map, whose attribute indexes are MAIR's.
    unsafe { write_mair_el1(MairEl1::from_bits_retain(MAIR)) };
    let map = Box::leak(Box::new(map));
    // SAFETY: the MMU is still off, so installing TTBR0_EL1 changes nothing yet; the map
    // covers all of RAM (code, data, stack, heap, device tree) and is leaked.
    unsafe { map.activate() };
    IDMAP.store(map, core::sync::atomic::Ordering::Relaxed);
    // No line the walker could read stale (see init_heap).
    invalidate_heap();
}
