//! Statics that are memory reached by address: pages the identity map remaps, granules the
//! programs tag and access through tagged pointers, save areas the assembly loads and stores,
//! the heap the allocator is given. Rust code takes their address and hands it on; what
//! reads and writes the memory is the guest's assembly, the MMU or the allocator.

use core::cell::UnsafeCell;

/// Memory used only through its address. `repr(transparent)`: the static has `T`'s size and
/// alignment, and its symbol is `T`'s first byte (the assembly names some of them).
#[repr(transparent)]
pub struct ByAddress<T>(UnsafeCell<T>);

// SAFETY: `ByAddress` gives out nothing but a raw pointer, so no Rust reference to the
// contents is formed through it: the memory is reached through its address by the guest's
// assembly, the MMU's tables or the allocator it is handed to, and any code that
// dereferences the pointer does so in an `unsafe` block of its own that shows it is the only
// user of the memory. Sharing the static therefore shares nothing Rust code could race on.
// `T: Send`: whoever reaches the memory through the pointer may be on any CPU.
unsafe impl<T: Send> Sync for ByAddress<T> {}

impl<T> ByAddress<T> {
    pub const fn new(v: T) -> Self {
        Self(UnsafeCell::new(v))
    }

    /// The memory's address, as a pointer.
    pub const fn ptr(&self) -> *mut T {
        self.0.get()
    }

    /// The memory's address.
    pub fn addr(&self) -> u64 {
        self.ptr() as u64
    }
}
