//! Guests that try to fool the hypervisor. Each one does something a real kernel may do (or
//! a hostile guest would) to the state the step engine and the counters depend on, around a
//! traced phase whose counts are known in advance; the QEMU tests (`scripts/tests/hostile.rs`)
//! hold the report to those counts.

mod addresses;
mod cpu;
mod debug;
mod exclusive;
mod patch;
pub mod remap;
mod spin;
mod uart;
mod vector;
mod wfx;

use crate::programs::{trace_setup, write_sctlr};
use fdt::Fdt;
use mtex_abi::hypercall::{PHASE_BEGIN, PHASE_TRACED, pack_bytes};
use mtex_abi::options::GuestProgram;
use mtex_abi::program::{self, HOSTILE_N};

/// Runs the hostile program `p`; returns the exit status.
pub fn run(p: GuestProgram, fdt: &Fdt) -> u64 {
    match p {
        GuestProgram::HostileUart => return uart::run(fdt),
        GuestProgram::HostileYield => spin::yield_loop(),
        _ => {}
    }
    let ptr = trace_setup(fdt);
    write_sctlr(program::SCTLR_MMU_ON | program::SCTLR_ATA | program::SCTLR_TCF_SYNC);
    match p {
        GuestProgram::HostileDebug => debug::run(ptr.tagged),
        GuestProgram::HostileCpu => cpu::run(ptr.tagged),
        GuestProgram::Addresses => addresses::run(ptr.tagged),
        GuestProgram::HostileWfx => wfx::run(ptr.tagged),
        GuestProgram::HostileVector => vector::run(ptr.tagged),
        GuestProgram::HostilePatch => patch::run(ptr.tagged),
        GuestProgram::HostileExclusive => exclusive::run(ptr.tagged),
        GuestProgram::HostileRemap => remap::run(ptr.tagged),
        GuestProgram::HostileAbortLoop => spin::abort_loop(),
        _ => 2,
    }
}

/// PHASE_BEGIN's arguments for traced phase `id` named `name`: (x0, x1, x2..x5, x6).
fn begin_args(id: u64, name: &str) -> (u64, u64, [u64; 4], u64) {
    (
        PHASE_BEGIN as u64,
        id,
        pack_bytes(name.as_bytes()),
        PHASE_TRACED,
    )
}

/// One phase in a single asm block, so that no compiler-generated instruction is in it: the
/// lines of `before` (outside the phase), the PHASE_BEGIN call, the lines of `body`, and the
/// phase-end call (`hvc::phase_end_call!`). x0..x6 and x15 carry the calls' arguments; the
/// operands that follow are the body's own (explicit registers). Evaluates to the
/// PHASE_BEGIN result (SUCCESS, 0, when the phase ran).
macro_rules! phase_asm {
    (
        id: $id:expr, name: $name:expr, traced: $traced:expr,
        before: [$($before:expr),* $(,)?],
        body: [$($body:expr),+ $(,)?],
        $($operands:tt)*
    ) => {{
        let (x0, id, name, flags) = $crate::selftest::begin_args($id, $name);
        let flags = if $traced { flags } else { 0 };
        let r: u64;
        // SAFETY: the HVCs are mtex calls that change only x0; what the body touches is said
        // by each caller (only memory this program owns, and registers declared here).
        unsafe {
            core::arch::asm!(
                $($before,)*
                "hvc #0",
                $($body,)+
                $crate::hvc::phase_end_call!(),
                end_lo = const $crate::hvc::PHASE_END_LO,
                end_hi = const $crate::hvc::PHASE_END_HI,
                inout("x0") x0 => r,
                inout("x1") id => _,
                in("x2") name[0],
                in("x3") name[1],
                in("x4") name[2],
                in("x5") name[3],
                in("x6") flags,
                in("x15") id,
                $($operands)*
            )
        };
        r
    }};
}
pub(crate) use phase_asm;

const _: () = assert!(HOSTILE_N > 0);
