//! The per-PC profile's table (`mtex.profile=1`) and the call stacks' storage
//! (`mtex.stacks=1`): 20 MiB and 1.6 MiB in the image's .bss rather than on the heap, whose
//! buddy allocator would round such blocks up to the next power of two. Handed out once.

use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicBool, Ordering};
use mtex_trace::profile::PcSlot;

/// Slots of the profile's table: a Linux futex-hash window of 4 × 200 waits executes about
/// 35,000 distinct instructions (thread creation and exit, mmap, faults, the scheduler, the
/// user's program), and with call stacks a PC takes a slot per stack it runs on (at a
/// quarter of this, a fifth of that window's checked reads went to `[other]`). The profile
/// uses a quarter of it by default, all of it with stacks (`mtex.profile_slots`); what finds no
/// room goes to `[other]`, still counted.
pub const SLOTS: usize = mtex_abi::options::HypOptions::STACK_PROFILE_SLOTS as usize;

struct Table(UnsafeCell<[PcSlot; SLOTS]>);

// SAFETY: the slots are reached only through the one `&'static mut` that `take` hands out,
// never through the static itself, so no two references to them ever exist.
unsafe impl Sync for Table {}

/// All zero, so that it lives in .bss (`PcTable::new` clears the slots it is given).
static TABLE: Table = Table(UnsafeCell::new([PcSlot::ZERO; SLOTS]));
static TAKEN: AtomicBool = AtomicBool::new(false);

/// The table, the first time; None after.
pub fn take() -> Option<&'static mut [PcSlot]> {
    if TAKEN.swap(true, Ordering::AcqRel) {
        return None;
    }
    // SAFETY: TAKEN was false, so this is the only reference to the table there will be.
    Some(unsafe { &mut *TABLE.0.get() })
}

/// The call stacks' storage (`mtex.stacks=1`): the tree of frames and the tasks' saved
/// stacks, in .bss for the same reason. Handed out once.
pub mod stacks {
    use core::cell::UnsafeCell;
    use core::sync::atomic::{AtomicBool, Ordering};
    use mtex_trace::callstack::{NodeSlot, SavedStack};

    /// Distinct stacks (tree nodes) per phase: a Linux futex-hash window makes a few
    /// thousand.
    pub const NODES: usize = 1 << 16;
    /// Tasks whose kernel stacks are kept while another runs.
    pub const SAVED: usize = 64;

    struct Storage(UnsafeCell<([NodeSlot; NODES], [SavedStack; SAVED])>);

    // SAFETY: as for the profile's table: only the references `take` hands out, once.
    unsafe impl Sync for Storage {}

    static STORAGE: Storage = Storage(UnsafeCell::new((
        [NodeSlot::ZERO; NODES],
        [SavedStack::ZERO; SAVED],
    )));
    static TAKEN: AtomicBool = AtomicBool::new(false);

    /// The storage, the first time; None after.
    pub fn take() -> Option<(&'static mut [NodeSlot], &'static mut [SavedStack])> {
        if TAKEN.swap(true, Ordering::AcqRel) {
            return None;
        }
        // SAFETY: TAKEN was false, so this is the only reference to the storage there will be.
        let (nodes, saved) = unsafe { &mut *STORAGE.0.get() };
        Some((nodes, saved))
    }
}
