//! The TCO watch against a guest that rewrites a watched MSR TCO. Two untraced runs, each
//! repeated as often as the hypervisor asks (PHASE_REPEATABLE, PHASE_WATCH_TCO): in `tco-loop` a loop writes
//! PSTATE.TCO `HOSTILE_N` times at one site, and the watch must count exactly that; in
//! `tco-rewritten` the loop runs, then its MSR TCO becomes a NOP (a plain store, DSB, ISB, as
//! a kernel patching itself does) and the loop runs again, then it is put back. The watch
//! must notice that the site it watches no longer holds MSR TCO and say its count is short,
//! never give it as the run's total.

use crate::hvc;
use core::arch::global_asm;
use mtex_abi::hypercall::{PHASE_AGAIN, PHASE_REPEATABLE, PHASE_WATCH_TCO};
use mtex_abi::program::HOSTILE_N;

global_asm!(
    ".pushsection .text.mtex_tco_body, \"ax\"",
    ".balign 4",
    ".global mtex_tco_body",
    // x10 = n; returns with RET. The MSR TCO, #0 is written as its encoding (the assembler
    // knows it only with +mte).
    "mtex_tco_body:",
    "1:",
    ".global mtex_tco_site",
    "mtex_tco_site:",
    ".inst 0xd503409f",
    "subs x10, x10, #1",
    "b.ne 1b",
    "ret",
    ".popsection",
);

unsafe extern "C" {
    static mtex_tco_body: u8;
    static mtex_tco_site: u8;
}

/// `msr tco, #0` and `nop`.
const MSR_TCO_0: u32 = 0xd503_409f;
const NOP: u32 = 0xd503_201f;

/// Runs the loop `HOSTILE_N` times.
fn body() {
    let body = (&raw const mtex_tco_body) as u64;
    // SAFETY: the body only counts x10 down and writes PSTATE.TCO; x10 and x30 are declared.
    unsafe {
        core::arch::asm!(
            "blr {body}",
            body = in(reg) body,
            inout("x10") HOSTILE_N => _,
            out("x30") _,
        )
    };
}

/// Writes `word` over the loop's MSR TCO and makes it visible to instruction fetch.
fn patch(word: u32) {
    let site = (&raw const mtex_tco_site) as *mut u32;
    // SAFETY: the site is an instruction of this image, which the guest maps writable (RWX),
    // and nothing executes it meanwhile; DSB then ISB make the store visible to fetch on a
    // CPU with CTR_EL0.DIC/IDC (QEMU), as hostile-patch relies on.
    unsafe {
        core::ptr::write_volatile(site, word);
        core::arch::asm!("dsb ish", "isb");
    }
}

/// One run named `name` (first phase `id`), as many passes as asked; returns the next id.
fn run_passes(mut id: u32, name: &str, rewrite: bool) -> Result<u32, u64> {
    let mut flags = PHASE_REPEATABLE | PHASE_WATCH_TCO;
    loop {
        if hvc::phase_begin_flags(id, name, flags) != 0 {
            return Err(6);
        }
        body();
        if rewrite {
            patch(NOP);
            body();
            patch(MSR_TCO_0);
        }
        let more = hvc::phase_end_passes(id).map_err(|_| 7u64)?;
        id += 1;
        flags |= PHASE_AGAIN;
        if more == 0 {
            return Ok(id);
        }
    }
}

pub fn run() -> u64 {
    let done =
        run_passes(1, "tco-loop", false).and_then(|id| run_passes(id, "tco-rewritten", true));
    match done {
        Ok(_) => hvc::exit(0),
        Err(status) => status,
    }
}
