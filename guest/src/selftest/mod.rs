//! Guests that try to fool the hypervisor. Each one does something a real kernel may do (or
//! a hostile guest would) to the state the step engine and the counters depend on, around a
//! traced phase whose counts are known in advance; the QEMU tests (`host/tests/qemu/hostile.rs`)
//! hold the report to those counts.

mod addresses;
mod cpu;
mod debug;
mod every_cpu;
mod exclusive;
mod frames;
mod impdef;
mod patch;
pub mod remap;
mod sample;
mod smp;
mod spin;
mod stack_patch;
mod tco_patch;
mod uart;
mod vector;
mod wfx;

use crate::programs::{trace_setup, write_sctlr};
use fdt::Fdt;
use mtex_abi::options::GuestProgram;
use mtex_abi::program::{self, HOSTILE_N};

/// Runs the hostile program `p`; returns the exit status.
pub fn run(p: GuestProgram, fdt: &Fdt) -> u64 {
    match p {
        GuestProgram::HostileUart => return uart::run(fdt),
        GuestProgram::HostileYield => spin::yield_loop(),
        GuestProgram::EveryCpu => return every_cpu::run(fdt),
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
        GuestProgram::HostileFrames => frames::run(ptr.tagged),
        GuestProgram::HostilePatch => patch::run(ptr.tagged),
        GuestProgram::HostileStackPatch => stack_patch::run(ptr.tagged),
        GuestProgram::HostileTcoPatch => tco_patch::run(),
        GuestProgram::HostileExclusive => exclusive::run(ptr.tagged),
        GuestProgram::HostileImpdef => impdef::run(ptr.tagged),
        GuestProgram::HostileSample => sample::run(ptr.tagged),
        GuestProgram::HostileRemap => remap::run(ptr.tagged),
        GuestProgram::HostileAbortLoop => spin::abort_loop(),
        GuestProgram::HostileSmp => smp::run(ptr.tagged),
        _ => 2,
    }
}

/// The pages whose level-3 entries the programs here change while the map is live.
pub fn own_page_entries() -> [usize; 5] {
    let [a, b, c, d] = remap::pages();
    [a, b, c, d, stack_patch::alias_window()]
}

const _: () = assert!(HOSTILE_N > 0);
