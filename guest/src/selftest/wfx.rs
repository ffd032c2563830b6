//! WFI inside a traced phase (each one must count as an executed instruction; QEMU steps over
//! it without the trap), the same loop untraced (every WFI traps and completes), then a WFE
//! spin with every interrupt masked, which under -icount would freeze guest time — and with
//! it the watchdog — unless the hypervisor traps WFE. The run must end by the watchdog.

use super::begin_args;
use mtex_abi::program::HOSTILE_N;

pub fn run(tagged: u64) -> u64 {
    let traced = wfi_loop(1, "wfi-loop", tagged, true);
    let untraced = wfi_loop(2, "wfi-untraced", tagged, false);
    crate::println!("hostile-wfx phases ended {traced:#x} {untraced:#x}; spinning on WFE");
    loop {
        aarch64_cpu::asm::wfe();
    }
}

fn wfi_loop(id: u64, name: &str, tagged: u64, traced: bool) -> u64 {
    let (x0, x1, name, flags) = begin_args(id, name);
    let flags = if traced { flags } else { 0 };
    let r: u64;
    // SAFETY: WFI/WFE have no effect on memory; the loop loads from the guest's tagged
    // granule; the HVCs are mtex calls that change only x0.
    unsafe {
        core::arch::asm!(
            "hvc #0",
            "1: ldr x12, [x9]",
            "wfi",
            "subs x10, x10, #1",
            "b.ne 1b",
            crate::hvc::phase_end_call!(),
            end_lo = const crate::hvc::PHASE_END_LO,
            end_hi = const crate::hvc::PHASE_END_HI,
            inout("x0") x0 => r,
            inout("x1") x1 => _,
            in("x2") name[0],
            in("x3") name[1],
            in("x4") name[2],
            in("x5") name[3],
            in("x6") flags,
            in("x9") tagged,
            inout("x10") HOSTILE_N => _,
            out("x12") _,
            in("x15") id,
        )
    };
    r
}
