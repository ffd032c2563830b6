//! Spins that under -icount could freeze guest time, and with it every counter-based
//! watchdog: a YIELD loop, and an exception loop at EL1 (VBAR_EL1 pointing at unmapped
//! memory, so every exception entry faults again on its own vector, retiring nothing). The
//! first must meet the watchdog; the second cannot be stopped from EL2 (no instruction
//! retires and nothing traps), so the host's time limit ends it — and the report must still
//! say where the guest was.

/// A YIELD spin with every interrupt masked.
pub fn yield_loop() -> ! {
    loop {
        // SAFETY: YIELD is a hint with no effect on memory.
        unsafe { core::arch::asm!("yield") };
    }
}

/// Points VBAR_EL1 at an address no stage-1 mapping covers and takes an exception.
pub fn abort_loop() -> ! {
    // Far above the guest's RAM, in the lower half: unmapped in the identity map.
    const NOWHERE: u64 = 0x7f_0000_0000;
    // SAFETY: deliberately makes every further exception recurse at EL1; the guest never
    // comes back from the UDF (this is the test).
    unsafe {
        core::arch::asm!(
            "msr vbar_el1, {v}",
            "isb",
            "udf #0",
            v = in(reg) NOWHERE,
            options(noreturn)
        )
    }
}
