//! Kernel globals. Kernel code runs on one CPU at a time: on one CPU by construction, on
//! several under the kernel lock (`smp`), which a CPU holds whenever it runs kernel code
//! that reaches a global. A context switch happens only inside `schedule()` (with interrupts
//! masked), and the timer interrupt handler — the only code that can run in the middle of
//! other kernel code — only reads globals through [`KCell::ptr`]. Whether two borrows of one
//! global overlap is therefore a property of the call graph, which the compiler cannot see:
//! [`KCell::get`] is `unsafe`, and every caller says why its borrow is the only one. No busy
//! flag: its load and stores would add to the kernel paths whose accesses mtex counts.

use core::cell::UnsafeCell;

pub struct KCell<T>(UnsafeCell<T>);

// SAFETY: kernel code reaches the cell from one CPU at a time (the kernel lock on several
// CPUs), and `get` hands out `&mut T` only under its contract (no other borrow alive), so
// sharing the cell is sharing exclusive access one borrower at a time, which is what `Send`
// allows (as for `Mutex<T>`).
unsafe impl<T: Send> Sync for KCell<T> {}

impl<T> KCell<T> {
    pub const fn new(v: T) -> Self {
        Self(UnsafeCell::new(v))
    }

    /// The place, for the interrupt handler: it reads fields through it (never forming a
    /// reference, so it cannot alias one the interrupted code holds) and writes nothing.
    pub fn ptr(&self) -> *mut T {
        self.0.get()
    }

    /// The value.
    ///
    /// # Safety
    ///
    /// While the returned borrow is in use, no other reference to the value may be: the
    /// caller does not call `get` on the same cell again before its last use of the borrow,
    /// neither directly nor through a function it calls, and does not keep the borrow across
    /// `schedule()` (another task's kernel code runs there and may take its own).
    #[allow(clippy::mut_from_ref, reason = "exclusive by the caller's contract")]
    pub unsafe fn get(&self) -> &mut T {
        // SAFETY: the caller guarantees the borrow is the only one (see above).
        unsafe { &mut *self.0.get() }
    }
}
