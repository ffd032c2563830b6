//! Kernel globals. The guest kernel runs on one CPU with interrupts masked, and a context
//! switch happens only inside `schedule()`, so a global is never accessed concurrently; this
//! cell states that once instead of at every use.

use core::cell::UnsafeCell;

pub struct KCell<T>(UnsafeCell<T>);

// SAFETY: one CPU, no interrupts (see the module comment): never two accessors at once.
unsafe impl<T> Sync for KCell<T> {}

impl<T> KCell<T> {
    pub const fn new(v: T) -> Self {
        Self(UnsafeCell::new(v))
    }

    /// The value. Callers keep the borrow short and never hold it across `schedule()`.
    #[allow(clippy::mut_from_ref, reason = "single CPU, see the module comment")]
    pub fn get(&self) -> &mut T {
        // SAFETY: see the module comment; no borrow is held across a call that re-enters.
        unsafe { &mut *self.0.get() }
    }
}
