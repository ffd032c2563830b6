//! The hypercall ABI a guest uses to talk to the mtex hypervisor.
//!
//! Calls follow the SMC Calling Convention (Arm DEN0028): `HVC #0` with the function ID in
//! w0 and arguments in x1..x7, results in x0 (and x1..x3). IDs are SMC64 fast calls in the
//! "vendor specific hypervisor service" range (owning entity 6), so a guest that probes them
//! on another hypervisor gets NOT_SUPPORTED instead of undefined behaviour.
//!
//! Strings travel in registers (x2..x7, little-endian, NUL-padded), never by pointer: the
//! hypervisor never has to translate or trust a guest address to serve a call.

/// SMCCC owning entity number of vendor-specific hypervisor services.
pub const OWNER_VENDOR_HYP: u32 = 6;

/// Builds the function ID of call `n`: fast call (bit 31), SMC64 (bit 30), owner in 29:24.
pub const fn function_id(n: u16) -> u32 {
    (1 << 31) | (1 << 30) | (OWNER_VENDOR_HYP << 24) | n as u32
}

/// `x0 = VERSION` → x0 = [`ABI_VERSION`].
pub const VERSION: u32 = function_id(0);
/// `x1 = phase id (non-zero), x2..x5 = name (32 bytes), x6 = flags` → SUCCESS, or
/// INVALID_PARAMETERS if the id is 0, a flag is unknown, or a phase is already open (phases
/// do not nest). With [`PHASE_TRACED`] the hypervisor single-steps the phase. With
/// [`PHASE_PARAMS`], x7..x10 carry the run's [`crate::scenario::PhaseParams`].
pub const PHASE_BEGIN: u32 = function_id(1);
/// `x1 = phase id` → SUCCESS, or INVALID_PARAMETERS if that phase is not the open one. On
/// SUCCESS, x1 = how many more untraced passes the run needs (the PMU counts its events a
/// few at a time): the guest runs the same work again that often, each as a phase opened
/// with [`PHASE_AGAIN`], before its traced phase (also opened with [`PHASE_AGAIN`]).
pub const PHASE_END: u32 = function_id(2);
/// `x1 = length (0..=48), x2..x7 = bytes` → x0 = bytes taken, or INVALID_PARAMETERS.
pub const CONSOLE_WRITE: u32 = function_id(3);
/// `x1 = status`: the guest is done; 0 means success. Does not return.
pub const EXIT: u32 = function_id(4);
/// No arguments → SUCCESS: one iteration of the open guarded phase's harness
/// ([`PHASE_GUARDED`]), counted by the hypervisor. Taken only from the one instruction the
/// harness named at PHASE_BEGIN (x11); INVALID_PARAMETERS with no guarded phase open.
pub const PHASE_ITERATION: u32 = function_id(5);

/// PHASE_BEGIN flag: single-step the phase and count every tag-checked access.
pub const PHASE_TRACED: u64 = 1 << 0;
/// PHASE_BEGIN flag: x7..x10 hold the phase's scenario parameters (policy, workload, sizes).
pub const PHASE_PARAMS: u64 = 1 << 1;

/// PHASE_BEGIN flag: this phase repeats the previous phase's run (same name and
/// parameters): its next untraced pass, or, with [`PHASE_TRACED`], its traced phase.
pub const PHASE_AGAIN: u64 = 1 << 2;

/// PHASE_BEGIN flag: the guest runs the work again as often as PHASE_END's x1 asks, so the
/// PMU's events that do not fit one pass get passes of their own. Without it, x1 is 0 and
/// those events are reported as not counted.
pub const PHASE_REPEATABLE: u64 = 1 << 3;
/// PHASE_BEGIN flag (with [`PHASE_REPEATABLE`]): after the PMU's passes, more passes watch
/// the guest image's MSR TCO sites with breakpoints (untraced runs: a traced run's trace
/// counts every MSR TCO already).
pub const PHASE_WATCH_TCO: u64 = 1 << 4;
/// PHASE_BEGIN flag (not with [`PHASE_PARAMS`]): the phase runs code its harness does not
/// trust (`mtex snippet`), and the hypervisor, not the guest, vouches for it. The harness
/// names, before that code runs: `x7..x8` and `x9..x10`, the code that may end the phase
/// (guest virtual addresses, end exclusive: its own phase end and its exception vectors);
/// `x11`, the address of the HVC that makes [`PHASE_ITERATION`] once per iteration; `x12`,
/// the iterations it makes (at least 1); `x13..x14`, guest physical memory (page-aligned)
/// that holds that code, which stage 2 makes read-only while the phase is open. While it is
/// open the hypervisor takes PHASE_END only from `x7..x10` and PHASE_ITERATION only from
/// `x11`, each only if its instruction is still where stage 1 mapped it at PHASE_BEGIN;
/// every other call (mtex's or PSCI's) is refused (NOT_SUPPORTED) and reported
/// ([`crate::report::CallRefused`]), and the phase goes on. A write to the read-only memory
/// ends the run ([`crate::report::ExitReason::ProtectedWrite`]). At the phase's end the
/// hypervisor reports the iterations it counted ([`crate::report::PhaseIterations`]).
/// INVALID_PARAMETERS when a range is empty or not aligned, a call site is not mapped into
/// the read-only memory, or the hypervisor cannot make that memory read-only.
pub const PHASE_GUARDED: u64 = 1 << 5;

/// Version of this ABI, major in bits 31:16, minor in 15:0.
pub const ABI_VERSION: u64 = 1 << 16 | 4;

/// Bytes of a phase name carried in x2..x5.
pub const PHASE_NAME_BYTES: usize = 32;
/// Bytes of console text carried in x2..x7 per call.
pub const CONSOLE_BYTES_PER_CALL: usize = 48;

/// SMCCC return values (DEN0028 "Return codes"), as the u64 a guest sees in x0.
pub mod ret {
    pub const SUCCESS: u64 = 0;
    pub const NOT_SUPPORTED: u64 = -1i64 as u64;
    pub const INVALID_PARAMETERS: u64 = -3i64 as u64;
}

/// Packs up to `8 * W` bytes into `W` registers, little-endian, NUL-padded; the rest is cut.
pub fn pack_bytes<const W: usize>(bytes: &[u8]) -> [u64; W] {
    let mut regs = [0u64; W];
    for (i, b) in bytes.iter().take(8 * W).enumerate() {
        regs[i / 8] |= (*b as u64) << (8 * (i % 8));
    }
    regs
}

/// Unpacks registers packed by [`pack_bytes`] into bytes.
pub fn unpack_bytes<const W: usize, const B: usize>(regs: &[u64; W]) -> [u8; B] {
    const { assert!(B == 8 * W) };
    let mut out = [0u8; B];
    for (i, b) in out.iter_mut().enumerate() {
        *b = (regs[i / 8] >> (8 * (i % 8))) as u8;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_smc64_fast_calls_of_the_vendor_hyp_owner() {
        for id in [VERSION, PHASE_BEGIN, PHASE_END, CONSOLE_WRITE, EXIT] {
            assert_eq!(id >> 31, 1, "fast call");
            assert_eq!((id >> 30) & 1, 1, "SMC64");
            assert_eq!((id >> 24) & 0x3f, 6, "owner: vendor hypervisor service");
            assert_eq!((id >> 16) & 0xff, 0, "bits 23:16 must be zero");
        }
        assert_eq!(PHASE_BEGIN, 0xc600_0001);
        let ids = [VERSION, PHASE_BEGIN, PHASE_END, CONSOLE_WRITE, EXIT];
        for (i, a) in ids.iter().enumerate() {
            assert!(!ids[i + 1..].contains(a), "duplicate id {a:#x}");
        }
    }

    #[test]
    fn bytes_round_trip_through_registers() {
        let regs: [u64; 4] = pack_bytes(b"tcma1-on");
        assert_eq!(regs[0], u64::from_le_bytes(*b"tcma1-on"));
        assert_eq!(regs[1], 0);
        let back: [u8; 32] = unpack_bytes(&regs);
        assert_eq!(&back[..8], b"tcma1-on");
        assert!(back[8..].iter().all(|&b| b == 0));
    }
}
