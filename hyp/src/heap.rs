//! The hypervisor's heap: page tables, the rewritten device tree, the boot CPU's state, and
//! each secondary CPU's EL2 stack, fast-path block and trap ring, state and run tables. The
//! image carries a static part for the VM and the boot CPU; the secondary CPUs' part is
//! taken from RAM at boot, sized for the machine's CPUs (`mtex_vm::heap`).

use buddy_system_allocator::LockedHeap;
use core::cell::UnsafeCell;

const HEAP_SIZE: usize = 12 << 20;

#[repr(C, align(4096))]
struct HeapMemory(UnsafeCell<[u8; HEAP_SIZE]>);

// SAFETY: the bytes are never read or written through this static: `init` hands their
// address to the allocator once, and only the allocator's callers use the memory after.
unsafe impl Sync for HeapMemory {}

static HEAP_MEMORY: HeapMemory = HeapMemory(UnsafeCell::new([0; HEAP_SIZE]));

#[global_allocator]
static ALLOCATOR: LockedHeap<32> = LockedHeap::empty();

/// Hands the static heap area to the allocator. Called once, first thing.
pub fn init() {
    let start = HEAP_MEMORY.0.get() as usize;
    // SAFETY: HEAP_MEMORY is used by nothing but the allocator, and init runs once.
    unsafe { ALLOCATOR.lock().init(start, HEAP_SIZE) };
}

/// Adds `r` to the heap.
///
/// # Safety
///
/// `r` is RAM that nothing else uses (not the guest's, not the hypervisor's image), mapped
/// at EL2 as Normal memory with the caches on.
pub unsafe fn add(r: mtex_platform::Region) {
    // SAFETY: per the contract.
    unsafe {
        ALLOCATOR
            .lock()
            .add_to_heap(r.base as usize, (r.base + r.size) as usize)
    };
}

/// Bytes the heap holds, and those in use.
pub fn usage() -> (usize, usize) {
    let h = ALLOCATOR.lock();
    (h.stats_total_bytes(), h.stats_alloc_actual())
}
