//! The hypervisor's single global: its state, reached from the exception handlers.

use crate::state::Hyp;
use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicBool, Ordering};

/// A value that exception handlers borrow one at a time.
///
/// mtex runs on one CPU and EL2 runs with all interrupts masked, so the only way to reach
/// the value twice at once is re-entry from a handler that is already using it; the busy
/// flag turns that into a panic instead of aliasing `&mut`.
pub struct Global<T> {
    value: UnsafeCell<Option<T>>,
    busy: AtomicBool,
}

// SAFETY: access is serialised by the busy flag, and mtex uses a single CPU (see above): a
// shared Global hands out exclusive access to its value one borrower at a time, which is
// what `T: Send` allows (as for `Mutex<T>`).
unsafe impl<T: Send> Sync for Global<T> {}

impl<T> Global<T> {
    pub const fn new() -> Self {
        Self {
            value: UnsafeCell::new(None),
            busy: AtomicBool::new(false),
        }
    }

    /// Stores the value; called once, before the guest first runs.
    pub fn init(&self, v: T) {
        self.with_slot(|slot| *slot = Some(v));
    }

    /// Runs `f` with exclusive access to the value. Panics if not initialised or re-entered.
    #[inline(always)]
    pub fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        self.with_slot(|slot| f(slot.as_mut().expect("hypervisor state not initialised")))
    }

    /// Like [`Global::with`], but None instead of a panic when the value is not initialised
    /// or already borrowed (for diagnostics, which must never be the reason a run dies).
    pub fn try_with<R>(&self, f: impl FnOnce(&mut T) -> R) -> Option<R> {
        if self.busy.load(Ordering::Relaxed) {
            return None;
        }
        self.with_slot(|slot| slot.as_mut().map(f))
    }

    #[inline(always)]
    fn with_slot<R>(&self, f: impl FnOnce(&mut Option<T>) -> R) -> R {
        // One CPU, no EL2 interrupts: a relaxed load/store pair is enough to catch re-entry.
        if self.busy.load(Ordering::Relaxed) {
            panic!("hypervisor state re-entered");
        }
        self.busy.store(true, Ordering::Relaxed);
        // SAFETY: the busy flag guarantees no other reference to the value exists.
        let r = f(unsafe { &mut *self.value.get() });
        self.busy.store(false, Ordering::Relaxed);
        r
    }
}

/// The hypervisor's state.
pub static HYP: Global<Hyp> = Global::new();

impl<T> Global<T> {
    /// The value for the dying path (panic, EL2 exception), even if a handler holds it.
    ///
    /// # Safety
    ///
    /// The caller never returns to the code that may hold the other reference: it powers the
    /// machine off, so that reference is never used again.
    #[allow(
        clippy::mut_from_ref,
        reason = "the dying path's deliberate escape hatch"
    )]
    pub unsafe fn take_for_shutdown(&self) -> Option<&mut T> {
        // SAFETY: per this function's contract, any other reference is dead.
        unsafe { (*self.value.get()).as_mut() }
    }
}
