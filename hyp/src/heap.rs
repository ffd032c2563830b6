//! The hypervisor's heap: page tables, the rewritten device tree, and each secondary CPU's
//! EL2 stack (128 KiB) and fast-path block (its trap ring, 32 KiB).

use buddy_system_allocator::LockedHeap;

const HEAP_SIZE: usize = 12 << 20;

#[repr(C, align(4096))]
struct HeapMemory([u8; HEAP_SIZE]);

static mut HEAP_MEMORY: HeapMemory = HeapMemory([0; HEAP_SIZE]);

#[global_allocator]
static ALLOCATOR: LockedHeap<32> = LockedHeap::empty();

/// Hands the static heap area to the allocator. Called once, first thing.
pub fn init() {
    let start = (&raw mut HEAP_MEMORY) as usize;
    // SAFETY: HEAP_MEMORY is used by nothing but the allocator, and init runs once.
    unsafe { ALLOCATOR.lock().init(start, HEAP_SIZE) };
}
