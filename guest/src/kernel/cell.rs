//! Kernel globals. The guest kernel runs on one CPU, a context switch happens only inside
//! `schedule()` (with interrupts masked), and the timer interrupt handler — the only code
//! that can run in the middle of other kernel code — only reads globals through
//! [`KCell::ptr`]; so no global is ever accessed concurrently. This cell states that once
//! instead of at every use.

use core::cell::UnsafeCell;

pub struct KCell<T>(UnsafeCell<T>);

// SAFETY: one CPU, no interrupts (see the module comment): never two accessors at once.
unsafe impl<T> Sync for KCell<T> {}

impl<T> KCell<T> {
    pub const fn new(v: T) -> Self {
        Self(UnsafeCell::new(v))
    }

    /// The place, for the interrupt handler: it reads fields through it (never forming a
    /// reference, so it cannot alias one the interrupted code holds) and writes nothing.
    pub fn ptr(&self) -> *mut T {
        self.0.get()
    }

    /// The value. Callers keep the borrow short and never hold it across `schedule()`.
    #[allow(clippy::mut_from_ref, reason = "single CPU, see the module comment")]
    pub fn get(&self) -> &mut T {
        // SAFETY: see the module comment; no borrow is held across a call that re-enters.
        unsafe { &mut *self.0.get() }
    }
}
