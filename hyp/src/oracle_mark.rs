//! The bounds of a traced phase, shown to an emulator's own count of it (the `mtex-oracle`
//! QEMU plugin): a no-op marker instruction executed at EL2 with the phase id in a fixed
//! register (`mtex_abi::oracle`). On a CPU without such a plugin they cost one cycle each.

use mtex_abi::oracle::{
    CLOSE_ID_REG, CLOSE_MARKER, CPU_REG, OPEN_ID_REG, OPEN_MARKER, SHARE_CLOSE_ID_REG,
    SHARE_CLOSE_MARKER, SHARE_OPEN_ID_REG, SHARE_OPEN_MARKER,
};

// The registers named in the asm below are the ABI's.
const _: () = assert!(OPEN_ID_REG == 0 && CLOSE_ID_REG == 1 && CPU_REG == 2);
const _: () = assert!(SHARE_OPEN_ID_REG == 3 && SHARE_CLOSE_ID_REG == 4);

/// This CPU's sampled share of window `id` starts: an emulator counts its own guest
/// instructions from its next one (what an emulated PMU cannot give on several vCPUs).
#[inline(never)]
pub fn share_open(id: u32, cpu: usize) {
    // SAFETY: ORR into XZR writes nothing and reads only X3 (X2 is there for the plugin).
    unsafe {
        core::arch::asm!(".inst {m}", m = const SHARE_OPEN_MARKER, in("x3") id as u64,
            in("x2") cpu as u64, options(nomem, nostack, preserves_flags));
    }
}

/// This CPU's sampled share of window `id` stops: its last guest instruction counted has run.
#[inline(never)]
pub fn share_close(id: u32, cpu: usize) {
    // SAFETY: ORR into XZR writes nothing and reads only X4 (X2 is there for the plugin).
    unsafe {
        core::arch::asm!(".inst {m}", m = const SHARE_CLOSE_MARKER, in("x4") id as u64,
            in("x2") cpu as u64, options(nomem, nostack, preserves_flags));
    }
}

/// This CPU's trace of phase `id` starts: its next guest instruction is its first.
#[inline(never)]
pub fn open(id: u32, cpu: usize) {
    // SAFETY: ORR into XZR writes nothing and reads only X0 (X2 is there for the plugin).
    unsafe {
        core::arch::asm!(".inst {m}", m = const OPEN_MARKER, in("x0") id as u64,
            in("x2") cpu as u64, options(nomem, nostack, preserves_flags));
    }
}

/// This CPU's trace of phase `id` stops: its last guest instruction counted has run.
#[inline(never)]
pub fn close(id: u32, cpu: usize) {
    // SAFETY: ORR into XZR writes nothing and reads only X1 (X2 is there for the plugin).
    unsafe {
        core::arch::asm!(".inst {m}", m = const CLOSE_MARKER, in("x1") id as u64,
            in("x2") cpu as u64, options(nomem, nostack, preserves_flags));
    }
}
