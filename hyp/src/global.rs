//! The hypervisor's state, reached from the exception handlers of every CPU.

use crate::state::Hyp;
use arm_sysregs::el0::accessors::read_cntpct_el0;
use arm_sysregs::el1::accessors::read_mpidr_el1;
use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicU64, Ordering};

/// A value that exception handlers borrow one at a time, on any CPU: a ticket lock whose
/// holder is known, so that a CPU that reaches it again while holding it (re-entry from a
/// handler already using it, which EL2's masked interrupts leave as the only way) panics
/// instead of aliasing `&mut` or waiting on itself forever. Another CPU's hold is waited out,
/// in turn: a CPU that exits all the time (a guest polling AFFINITY_INFO) cannot keep taking
/// the lock ahead of one that waits for it (a CPU starting up), as it could with a plain spin
/// lock, where the waiter only wins if it looks at the right moment. (As RF-A's
/// exception-masked lock: EL2 takes no interrupt, so a holder is never preempted by one.)
/// Written here rather than taken from `spin`: its locks do not know their holder.
pub struct Global<T> {
    value: UnsafeCell<Option<T>>,
    /// [`FREE`], or the holder's [`me`].
    owner: AtomicU64,
    /// The next ticket to hand out, and the ticket whose holder may go in.
    next: AtomicU64,
    serving: AtomicU64,
}

/// The lock's value when no CPU holds it.
const FREE: u64 = 0;

/// This CPU as a lock owner: its affinity (MPIDR_EL1, unique per CPU) plus one, never
/// [`FREE`]. Read from the register, so that it works before anything per CPU is set up.
#[inline(always)]
fn me() -> u64 {
    (read_mpidr_el1().bits() & mtex_platform::machine::MPIDR_AFFINITY) + 1
}

// SAFETY: access is serialised by the lock (see above): a shared Global hands out exclusive
// access to its value to one holder at a time, which is what `T: Send` allows (as for
// `Mutex<T>`).
unsafe impl<T: Send> Sync for Global<T> {}

impl<T> Global<T> {
    pub const fn new() -> Self {
        Self {
            value: UnsafeCell::new(None),
            owner: AtomicU64::new(FREE),
            next: AtomicU64::new(0),
            serving: AtomicU64::new(0),
        }
    }

    /// Stores the value; called once, before the guest first runs.
    pub fn init(&self, v: T) {
        self.with_slot(|slot| *slot = Some(v));
    }

    /// Runs `f` with exclusive access to the value, once any other CPU has let go of it.
    /// Panics if not initialised or re-entered on this CPU.
    #[inline(always)]
    pub fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        self.with_slot(|slot| f(slot.as_mut().expect("hypervisor state not initialised")))
    }

    /// Like [`Global::with`], but None instead of a panic when the value is not initialised
    /// or this CPU already holds it (for diagnostics, which must never be the reason a run
    /// dies).
    pub fn try_with<R>(&self, f: impl FnOnce(&mut T) -> R) -> Option<R> {
        if self.owner.load(Ordering::Relaxed) == me() {
            return None;
        }
        self.with_slot(|slot| slot.as_mut().map(f))
    }

    #[inline(always)]
    fn with_slot<R>(&self, f: impl FnOnce(&mut Option<T>) -> R) -> R {
        let me = me();
        // Only this CPU can have stored its own id: if it is there, this CPU holds the lock.
        if self.owner.load(Ordering::Relaxed) == me {
            panic!("hypervisor state re-entered");
        }
        let ticket = self.next.fetch_add(1, Ordering::Relaxed);
        if self.serving.load(Ordering::Acquire) != ticket {
            self.wait_for(ticket);
        }
        self.owner.store(me, Ordering::Relaxed);
        // SAFETY: this CPU holds the lock, so no other reference to the value exists.
        let r = f(unsafe { &mut *self.value.get() });
        self.owner.store(FREE, Ordering::Relaxed);
        self.serving
            .store(ticket.wrapping_add(1), Ordering::Release);
        r
    }
}

impl<T> Global<T> {
    /// Waits until `ticket` is served, and counts the counter ticks it took in this CPU's
    /// `lock_wait_ticks` (out of line: the lock is free at most exits).
    #[cold]
    #[inline(never)]
    fn wait_for(&self, ticket: u64) {
        let from = read_cntpct_el0().bits();
        while self.serving.load(Ordering::Acquire) != ticket {
            yield_cpu();
        }
        crate::fast_step::note_lock_wait(read_cntpct_el0().bits().wrapping_sub(from));
    }
}

/// A hint that this CPU waits on another: YIELD. On silicon it only lets a sibling thread
/// run. Under QEMU's round-robin TCG (one host thread runs every vCPU in turn, as with
/// `-icount`) it hands the thread to the next vCPU at once. `core::hint::spin_loop` (an ISB
/// on AArch64) does not: a CPU waiting for a lock whose holder QEMU stopped mid-way would
/// spin out its whole turn (100 ms of guest time, over all vCPUs) before the holder can
/// let go, and CPUs that all take this lock at every step would crawl.
#[inline(always)]
pub fn yield_cpu() {
    // SAFETY: a hint instruction: no effect on memory or registers.
    unsafe { core::arch::asm!("yield", options(nomem, nostack, preserves_flags)) };
}

/// `spin`'s relax strategy for a lock another CPU may hold while QEMU has stopped it: YIELD
/// ([`yield_cpu`]), so that the holder runs again at once rather than after the waiter's
/// whole turn (`spin`'s own `Spin` is the ISB of `core::hint::spin_loop`).
pub struct YieldCpu;

impl spin::RelaxStrategy for YieldCpu {
    #[inline(always)]
    fn relax() {
        yield_cpu();
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
