//! The TCO watch against a guest that rewrites or moves a watched MSR TCO. Three untraced
//! runs, each repeated as often as the hypervisor asks (PHASE_REPEATABLE, PHASE_WATCH_TCO),
//! of a loop that writes PSTATE.TCO `HOSTILE_N` times at one site:
//! - `tco-loop`: untouched; the watch must count exactly that;
//! - `tco-rewritten`: inside each pass the loop runs, then its MSR TCO becomes a NOP (a plain
//!   store, DSB, ISB, as a kernel patching itself does) and the loop runs again, then it is
//!   put back: the watch must notice that the site it watches no longer holds MSR TCO;
//! - `tco-moved`: between the first pass (which the scan reads) and the others, the MSR TCO
//!   moves into a second copy of the loop, which the later passes run instead: the old site
//!   never executes again, so only a new scan can tell the watch passes that the sites moved
//!   (watching the old place alone would count nothing and call it the total).
//!
//! Either way the run's count is short and must be said to be, never given as its total.

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
    // The same loop with a NOP where `tco-moved` puts the MSR TCO.
    ".global mtex_tco_body_alt",
    "mtex_tco_body_alt:",
    "1:",
    ".global mtex_tco_site_alt",
    "mtex_tco_site_alt:",
    "nop",
    "subs x10, x10, #1",
    "b.ne 1b",
    "ret",
    ".popsection",
);

unsafe extern "C" {
    static mtex_tco_body: u8;
    static mtex_tco_site: u8;
    static mtex_tco_body_alt: u8;
    static mtex_tco_site_alt: u8;
}

/// `msr tco, #0` and `nop`.
const MSR_TCO_0: u32 = 0xd503_409f;
const NOP: u32 = 0xd503_201f;

/// What a run does to the loop's code.
#[derive(Clone, Copy, PartialEq)]
enum Hostility {
    None,
    RewriteInPass,
    MoveAfterFirstPass,
}

/// Runs the loop (or its copy, `alt`) `HOSTILE_N` times.
fn body(alt: bool) {
    let body = if alt {
        (&raw const mtex_tco_body_alt) as u64
    } else {
        (&raw const mtex_tco_body) as u64
    };
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

/// Writes `words` over the loop's MSR TCO and its copy's NOP, and makes them visible to
/// instruction fetch.
fn patch(words: [u32; 2]) {
    let sites = [&raw const mtex_tco_site, &raw const mtex_tco_site_alt];
    // SAFETY: the two words are instructions of this image, which the guest maps writable
    // (RWX), and nothing executes them meanwhile; DSB then ISB make the stores visible to
    // fetch on a CPU with CTR_EL0.DIC/IDC (QEMU), as hostile-patch relies on.
    unsafe {
        for (site, word) in sites.into_iter().zip(words) {
            core::ptr::write_volatile(site as *mut u32, word);
        }
        core::arch::asm!("dsb ish", "isb");
    }
}

/// One run named `name` (first phase `id`), as many passes as asked; returns the next id.
fn run_passes(mut id: u32, name: &str, hostility: Hostility) -> Result<u32, u64> {
    let mut flags = PHASE_REPEATABLE | PHASE_WATCH_TCO;
    let mut alt = false;
    let result = loop {
        if hvc::phase_begin_flags(id, name, flags) != 0 {
            break Err(6);
        }
        body(alt);
        if hostility == Hostility::RewriteInPass {
            patch([NOP, NOP]);
            body(alt);
            patch([MSR_TCO_0, NOP]);
        }
        let Ok(more) = hvc::phase_end_passes(id) else {
            break Err(7);
        };
        if hostility == Hostility::MoveAfterFirstPass {
            patch([NOP, MSR_TCO_0]);
            alt = true;
        }
        id += 1;
        flags |= PHASE_AGAIN;
        if more == 0 {
            break Ok(id);
        }
    };
    patch([MSR_TCO_0, NOP]);
    result
}

pub fn run() -> u64 {
    let done = run_passes(1, "tco-loop", Hostility::None)
        .and_then(|id| run_passes(id, "tco-rewritten", Hostility::RewriteInPass))
        .and_then(|id| run_passes(id, "tco-moved", Hostility::MoveAfterFirstPass));
    match done {
        Ok(_) => hvc::exit(0),
        Err(status) => status,
    }
}
