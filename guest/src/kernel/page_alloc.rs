//! The page allocator (buddy, from buddy_system_allocator) and kmalloc (a second buddy heap
//! over pages of the first), both KASAN-HW-tags-like when the policy enables KASAN: a random
//! tag for each allocation, set on every granule, and the poison tag on free. Allocations
//! made with [`Gfp::SkipKasan`] (kernel stacks and page tables under
//! `skip-tag-stacks-pgtables`, user pages always) store no tags and are reached through
//! match-all (tag 0xF) pointers, as Linux's __GFP_SKIP_KASAN.

use super::cell::KCell;
use super::kasan;
use super::layout::{THREAD_ORDER, untagged};
use buddy_system_allocator::Heap;
use core::alloc::Layout;
use core::ptr::NonNull;

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Gfp {
    /// Tagged when KASAN is on.
    Kasan,
    /// Never tagged (__GFP_SKIP_KASAN).
    SkipKasan,
}

/// Kernel stack and page-table bytes allocated and freed since the last [`take_stats`].
#[derive(Clone, Copy, Default)]
pub struct Stats {
    pub stack_bytes: u64,
    pub pgtable_bytes: u64,
    pub stack_freed: u64,
    pub pgtable_freed: u64,
}

struct Allocators {
    pages: Heap<33>,
    slab: Heap<24>,
    stats: Stats,
}

static ALLOC: KCell<Allocators> = KCell::new(Allocators {
    pages: Heap::empty(),
    slab: Heap::empty(),
    stats: Stats {
        stack_bytes: 0,
        pgtable_bytes: 0,
        stack_freed: 0,
        pgtable_freed: 0,
    },
});

/// Hands `[start, start + size)` (kernel addresses) to the allocators: `slab` bytes of it to
/// kmalloc, the rest to the page allocator.
///
/// # Safety
/// The range must be unused RAM mapped by the kernel's linear map, for the allocators alone.
pub unsafe fn init(start: u64, size: u64, slab: u64) {
    // SAFETY: boot, before any allocation; the heaps' init reaches no KCell.
    let a = unsafe { ALLOC.get() };
    // SAFETY: the caller gives the range to the allocators alone.
    unsafe {
        a.slab.init(start as usize, slab as usize);
        a.pages
            .init((start + slab) as usize, (size - slab) as usize);
    }
}

fn kasan_on(gfp: Gfp) -> bool {
    gfp == Gfp::Kasan && super::policy().kasan != mtex_abi::scenario::Tcf::None
}

/// `4096 << order` bytes, page aligned; the pointer carries the allocation's tag.
pub fn alloc_pages(order: u32, gfp: Gfp) -> u64 {
    let size = 4096u64 << order;
    let layout = Layout::from_size_align(size as usize, size as usize).expect("page layout");
    // SAFETY: the borrow ends with this statement; the heap's alloc reaches no KCell.
    let p = unsafe { ALLOC.get() }
        .pages
        .alloc(layout)
        .expect("out of pages")
        .as_ptr() as u64;
    let p = untagged(p);
    if kasan_on(gfp) {
        let t = kasan::random_tag(p);
        // SAFETY: the pages were just allocated to this caller; they are Tagged RAM.
        unsafe { kasan::set_tags(t, size) };
        t
    } else {
        p
    }
}

/// Frees what [`alloc_pages`] returned, poisoning it when it was tagged.
pub fn free_pages(p: u64, order: u32, gfp: Gfp) {
    let size = 4096u64 << order;
    if kasan_on(gfp) {
        // SAFETY: the caller owned the pages and gives them up.
        unsafe { kasan::set_tags(kasan::with_tag(p, kasan::TAG_INVALID), size) };
    }
    let layout = Layout::from_size_align(size as usize, size as usize).expect("page layout");
    let nn = NonNull::new(untagged(p) as *mut u8).expect("non-null page");
    // SAFETY: `p` came from alloc_pages with this order, and the caller gives it up; the
    // borrow of ALLOC ends with this statement, and dealloc reaches no KCell.
    unsafe { ALLOC.get().pages.dealloc(nn, layout) };
}

/// A kernel stack (THREAD_SIZE bytes): its memory is tagged unless the policy skips
/// stacks, but it is always used through a match-all pointer (the KASAN series that leaves
/// them untagged: "stacks and page tables are always accessed with the match-all tag").
pub fn alloc_stack() -> u64 {
    // SAFETY: a counter update whose borrow ends here.
    unsafe { ALLOC.get() }.stats.stack_bytes += 4096 << THREAD_ORDER;
    untagged(alloc_pages(THREAD_ORDER, stack_gfp()))
}

pub fn free_stack(p: u64) {
    // SAFETY: a counter update whose borrow ends here.
    unsafe { ALLOC.get() }.stats.stack_freed += 4096 << THREAD_ORDER;
    free_pages(p, THREAD_ORDER, stack_gfp())
}

/// How kernel stacks and page tables are allocated under the current policy.
pub fn stack_gfp() -> Gfp {
    if super::policy().skip_tag_stacks_pgtables {
        Gfp::SkipKasan
    } else {
        Gfp::Kasan
    }
}

/// A zeroed page-table page (zeroed through its tagged address, as clear_page through
/// page_address), returned as the match-all pointer __va(phys) gives.
pub fn alloc_pgtable() -> u64 {
    // SAFETY: a counter update whose borrow ends here.
    unsafe { ALLOC.get() }.stats.pgtable_bytes += 4096;
    let p = alloc_pages(0, stack_gfp());
    // SAFETY: the page was just allocated; `p` carries its tag.
    unsafe { kasan::zero(p, 4096) };
    untagged(p)
}

pub fn free_pgtable(p: u64) {
    // SAFETY: a counter update whose borrow ends here.
    unsafe { ALLOC.get() }.stats.pgtable_freed += 4096;
    free_pages(p, 0, stack_gfp())
}

/// Returns and clears the allocation figures.
pub fn take_stats() -> Stats {
    // SAFETY: the borrow ends here.
    core::mem::take(&mut unsafe { ALLOC.get() }.stats)
}

/// kmalloc: `size` bytes (rounded up to whole granules), 16-byte aligned, tagged under KASAN.
pub fn kmalloc(size: u64) -> u64 {
    let size = size.div_ceil(16) * 16;
    let layout = Layout::from_size_align(size as usize, 16).expect("kmalloc layout");
    let p = untagged(
        // SAFETY: the borrow ends with this statement; the heap's alloc reaches no KCell.
        unsafe { ALLOC.get() }
            .slab
            .alloc(layout)
            .expect("kmalloc: out of memory")
            .as_ptr() as u64,
    );
    if kasan_on(Gfp::Kasan) {
        let t = kasan::random_tag(p);
        // SAFETY: just allocated to this caller, Tagged RAM.
        unsafe { kasan::set_tags(t, size) };
        t
    } else {
        p
    }
}

/// kmalloc, zeroed.
pub fn kzalloc(size: u64) -> u64 {
    let p = kmalloc(size);
    // SAFETY: just allocated; `p` carries its tag.
    unsafe { kasan::zero(p, size.div_ceil(16) * 16) };
    p
}

pub fn kfree(p: u64, size: u64) {
    let size = size.div_ceil(16) * 16;
    if kasan_on(Gfp::Kasan) {
        // SAFETY: the caller owned the object and gives it up.
        unsafe { kasan::set_tags(kasan::with_tag(p, kasan::TAG_INVALID), size) };
    }
    let layout = Layout::from_size_align(size as usize, 16).expect("kmalloc layout");
    let nn = NonNull::new(untagged(p) as *mut u8).expect("non-null object");
    // SAFETY: `p` came from kmalloc with this size, and the caller gives it up; the borrow of
    // ALLOC ends with this statement, and dealloc reaches no KCell.
    unsafe { ALLOC.get().slab.dealloc(nn, layout) };
}
