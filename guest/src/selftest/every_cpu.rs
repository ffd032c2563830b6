//! A guest that starts every CPU the machine has (QEMU with many CPUs), found by asking
//! PSCI's AFFINITY_INFO about every affinity QEMU's virt machine gives CPUs (Aff0 0..15 in
//! clusters Aff1 0..31: the hypervisor's 512 CPUs; its guest tree lists one CPU, the same on
//! every machine). Each CPU turns itself off as its first act, and this CPU waits until each is off again. A CPU keeps the
//! hypervisor's memory for it (stack, block, state, run tables) over power-ups, so by the end
//! the hypervisor holds it for every CPU at once. Prints `every-cpu started N of M` and
//! `every-cpu off N of M`; status 0 only when every start succeeded and every CPU went off.

use fdt::Fdt;
use smccc::Smc;
use smccc::psci::{self, AffinityState, LowestAffinityLevel};

/// AFFINITY_INFO calls a wait for one CPU may take.
const WAIT_CALLS: u32 = 1_000_000;

pub fn run(_: &Fdt) -> u64 {
    let me = arm_sysregs::el1::accessors::read_mpidr_el1().bits() & 0xff_00ff_ffff;
    let entry = off_at_once as *const () as u64;
    let cpus: alloc::vec::Vec<u64> = (0..32u64)
        .flat_map(|aff1| (0..16u64).map(move |aff0| aff1 << 8 | aff0))
        .filter(|&id| id != me)
        .filter(|&id| psci::affinity_info::<Smc>(id, LowestAffinityLevel::All).is_ok())
        .collect();
    let others = || cpus.iter().copied();
    let total = others().count();
    let mut started = 0;
    for id in others() {
        match psci::cpu_on::<Smc>(id, entry, 0) {
            Ok(()) => started += 1,
            Err(e) => crate::println!("every-cpu CPU_ON {id:#x}: {e:?}"),
        }
    }
    crate::println!("every-cpu started {started} of {total}");
    let off = others().filter(|&id| went_off(id)).count();
    crate::println!("every-cpu off {off} of {total}");
    u64::from(started != total || off != total)
}

/// Polls AFFINITY_INFO until `id` is off, within WAIT_CALLS calls.
fn went_off(id: u64) -> bool {
    (0..WAIT_CALLS)
        .any(|_| psci::affinity_info::<Smc>(id, LowestAffinityLevel::All) == Ok(AffinityState::Off))
}

/// Where each CPU starts (EL1, MMU off): it turns itself off.
#[unsafe(naked)]
extern "C" fn off_at_once() -> ! {
    core::arch::naked_asm!(
        "movz w0, #{off_lo}",
        "movk w0, #{off_hi}, lsl #16",
        "smc #0",
        "b .",
        off_lo = const psci::PSCI_CPU_OFF & 0xffff,
        off_hi = const psci::PSCI_CPU_OFF >> 16,
    )
}
