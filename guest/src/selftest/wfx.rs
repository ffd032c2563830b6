//! WFI inside a traced phase (each one must count as an executed instruction; QEMU steps over
//! it without the trap), the same loop untraced (every WFI traps and completes), then a WFE
//! spin with every interrupt masked, which the watchdog must end.

use crate::hvc::phase_asm;
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
    // WFI has no effect on memory; the loop loads from the guest's tagged granule.
    phase_asm!(
        id: id, name: name, traced: traced,
        before: [],
        body: ["1: ldr x12, [x9]", "wfi", "subs x10, x10, #1", "b.ne 1b"],
        in("x9") tagged,
        inout("x10") HOSTILE_N => _,
        out("x12") _,
    )
}
