//! `mtex snippet`: the user's own code, assembled on the host and carried here as data
//! (`mtex.snippet`, hex bytes on the command line), run as one traced phase in a fixed
//! environment. The image is never rebuilt for a snippet.
//!
//! The snippet is a leaf AAPCS64 function entered by BLR at its first byte, `mtex.snippet_iters`
//! times in the one phase, each time with:
//!
//! | register | value |
//! | --- | --- |
//! | x0 | a tagged buffer: at EL1 `BUFFER`, 4096 bytes, page-aligned, every granule allocation tag 3, pointer tag 3; at EL0 the user buffer (= x2) |
//! | x1 | x0's size: 4096 at EL1, 2048 at EL0 |
//! | x2 | the user buffer: the first 2048 bytes of `mmu::USER_PAGE` (EL0 read/write, Tagged), allocation tag 3, pointer tag 3: the target of LDTR/STTR |
//! | x3 | `BUFFER`'s upper-half (TTBR1) alias, pointer tag 3 (top byte 0xF3); tag 0xF (`orr x9, x3, #0x0f00000000000000`) is the match-all kernel pointer under TCMA1. EL1 only |
//! | x4 | `mmu::UNTAGGED_PAGE`: 4096 bytes of Normal memory without the Tagged attribute, pointer tag 0. EL1 only |
//! | SP | 16-byte aligned top of a stack of allocation tag 0: at EL1 `STACK` (4096 bytes), at EL0 the user page's top (2048 bytes above the user buffer) |
//! | x30 | the return address: the snippet ends with `ret` |
//!
//! It may clobber x0–x18 and x30 and the flags, and must give back x19–x29 and SP as it found
//! them (the harness keeps its own state in x20–x28). PSTATE.TCO is clear on entry.
//!
//! Controls: SCTLR_EL1 = MMU and caches on, ATA, ATA0, TCF = `mtex.snippet_tcf`, TCF0 =
//! `mtex.snippet_tcf0`; TCR_EL1 = 39-bit TTBR0 and TTBR1 ranges, TBI0, TBI1, TCMA1 when
//! `mtex.snippet_tcma1=1`; GCR_EL1 = RRND 0, tag 0 excluded; RGSR_EL1 seeded (IRG's tags are
//! the same on every run).
//!
//! The code page (`CODE`, 8 KiB) is ordinary guest RAM in the identity map: RW at EL1 and
//! executable at EL1 and — its UXN bit being clear — at EL0, where it is execute-only (not
//! EL0-readable: a literal load faults at EL0; the step engine reads EL0 code as EL1 does).
//!
//! While the phase is open, VBAR_EL1 is the harness's own vector table: any exception but
//! the harness's SVC back from EL0 ends the phase at once (`mtex_snippet_vectors`), then goes
//! to the guest's fault report. The phase's counts stop there: they hold the snippet up to
//! its exception, never the guest's handler (which prints, and ends the run).
//!
//! The phase is guarded (`PHASE_GUARDED`, `mtex_vm::guard`): while it is open the hypervisor
//! takes PHASE_END only from the harness's phase end and its vector table, PHASE_ITERATION
//! only from the harness's one iteration call, and nothing else, so the snippet can neither
//! end the phase (nor open another), nor end the run, nor write the console; it counts the
//! iterations itself (after each call: at EL1 the loop's HVC, at EL0 the vector table's on
//! the loop's SVC), so a loop cut short or run longer is a count that is not
//! `mtex.snippet_iters`; and the guest's code and read-only data (`read_only`) are
//! read-only at stage 2, so that the snippet can rewrite neither the harness nor the guest's
//! fault report or exit that run after it (a write ends the run).
//!
//! What the harness adds to the phase's counts (no memory access at EL1, none checked):
//! - EL1: per iteration 11 instructions (five MOVs, BLR, the three of PHASE_ITERATION, SUBS,
//!   B.NE), then 5 to close the phase;
//! - EL0: per iteration 9 at EL0 (five MOVs, BLR, SVC, SUBS, B.NE) and 14 at EL1 (the
//!   vector's 10 that tell the iteration's SVC, the three of PHASE_ITERATION, ERET), then one
//!   SVC; at EL1 the ERET in, the vector's 11 and `el0::el0_return`'s 12 (7 loads,
//!   unchecked: PSTATE.TCO is set by the exception entry; one MSR TCO), then 5 to close the
//!   phase;
//! - after an exception: the vector's 4 that end the phase (from EL0: 8, the first 4 telling
//!   an SVC from the rest), in place of the 5 that close it.

use crate::by_address::ByAddress;
use crate::hvc::{PHASE_END_HI, PHASE_END_LO, phase_end_call};
use crate::programs::{install_idmap, write_sctlr, write_tcr};
use crate::{mmu, mte, println};
use aarch64_cpu::asm::barrier;
use aarch64_paging::Mapping;
use aarch64_paging::descriptor::{El1Attributes, PhysicalAddress};
use aarch64_paging::idmap::IdTranslation;
use aarch64_paging::paging::{Constraints, El1And0, MemoryRegion, VaRange};
use alloc::boxed::Box;
use arm_sysregs::el0::accessors::read_ctr_el0;
use arm_sysregs::el1::accessors::{
    read_elr_el1, read_tfsr_el1, read_tfsre0_el1, write_gcr_el1, write_rgsr_el1, write_ttbr1_el1,
    write_vbar_el1,
};
use arm_sysregs::el1::registers::{GcrEl1, RgsrEl1, Ttbr1El1, VbarEl1};
use core::arch::{asm, global_asm};
use fdt::Fdt;
use mtex_abi::hypercall::{
    PHASE_BEGIN, PHASE_GUARDED, PHASE_ITERATION, PHASE_TRACED, pack_bytes, ret,
};
use mtex_abi::options::{SnippetOptions, snippet_code};
use mtex_abi::program as p;
use mtex_arch::mte_bits::{sctlr, tcr, tfsr, with_tag};

#[repr(C, align(4096))]
struct Pages<const N: usize>([u8; N]);

/// The snippet's code.
static CODE: ByAddress<Pages<{ SnippetOptions::MAX_BYTES }>> =
    ByAddress::new(Pages([0; SnippetOptions::MAX_BYTES]));
/// x0 at EL1 (and x3's physical page).
static BUFFER: ByAddress<Pages<4096>> = ByAddress::new(Pages([0; 4096]));
/// SP at EL1.
static STACK: ByAddress<Pages<4096>> = ByAddress::new(Pages([0; 4096]));
/// x19, x29 and SP of the Rust code around an EL1 snippet (x19 and x29 cannot be asm
/// operands; a snippet that breaks the convention must not break the guest).
#[repr(C, align(16))]
struct Save([u64; 4]);
static SAVE: ByAddress<Save> = ByAddress::new(Save([0; 4]));

/// Allocation and pointer tag of the buffers.
const TAG: u64 = 3;
/// The upper range (T1SZ = 25): `BUFFER`'s alias is `UPPER | pa`.
const UPPER: u64 = 0xffff_ff80_0000_0000;
/// The user page: the buffer below, the EL0 stack above.
const USER_BUFFER: u64 = 2048;

/// TCR_EL1: the identity map's 39-bit TTBR0 range, and a 39-bit TTBR1 range for x3.
const TCR: u64 = p::TCR_BOTH_HALVES;

/// `BUFFER`'s upper-half alias: Tagged Normal, EL1 only, never executable.
const UPPER_RAM: El1Attributes = El1Attributes::VALID
    .union(El1Attributes::ATTRIBUTE_INDEX_0)
    .union(El1Attributes::INNER_SHAREABLE)
    .union(El1Attributes::ACCESSED)
    .union(El1Attributes::UXN)
    .union(El1Attributes::PXN);

// The EL0 side of the harness: x20 = snippet, x21..x25 = x0..x4, x27 = iterations. It is in
// the image's RAM, which the identity map leaves executable at EL0 (UXN clear). After each
// call an SVC takes it to the phase's vector table, which counts the iteration with the
// hypervisor (PHASE_ITERATION: EL0 cannot make HVCs) and returns; the last SVC returns
// through the vector table and `el0::el0_return` to the EL1 side.
global_asm!(
    ".pushsection .text.mtex_snippet_el0, \"ax\"",
    ".balign 64",
    ".global mtex_snippet_el0",
    "mtex_snippet_el0:",
    "1: mov x0, x21",
    "mov x1, x22",
    "mov x2, x23",
    "mov x3, x24",
    "mov x4, x25",
    "blr x20",
    ".global mtex_snippet_el0_iteration",
    "mtex_snippet_el0_iteration:",
    "svc #0",
    "subs x27, x27, #1",
    "b.ne 1b",
    ".global mtex_snippet_el0_svc",
    "mtex_snippet_el0_svc:",
    "svc #0",
    ".popsection",
);

/// The snippet phase's id (x28 of the harness; the vectors' PHASE_END).
const PHASE_ID: u64 = 1;

// The vector table of the phase. Each entry ends the phase (the same four instructions as
// `phase_end_call!`, no memory touched), then reports the fault as the guest's own vectors
// do. The lower-EL synchronous entry first lets the harness's SVCs through: the one after
// each call (its ELR_EL1, which EL0 cannot set, says which) makes the EL0 phase's
// PHASE_ITERATION (`mtex_snippet_iteration`) and returns to EL0; any other goes to
// `el0_return` (the last one back to the EL1 side; one of the snippet's own ends its loop
// early, which the count shows). The other lower-EL entries take as many instructions before
// ending the phase as that entry takes to tell an SVC from the rest, so that any exception
// from EL0 costs the phase the same 8.
global_asm!(
    ".macro mtex_snippet_cut index",
    "movz x0, #{end_lo}",
    "movk x0, #{end_hi}, lsl #16",
    "mov x1, #{id}",
    "hvc #0",
    "mov x0, #\\index",
    "b {fault}",
    ".endm",
    ".pushsection .text.mtex_snippet_vectors, \"ax\"",
    ".balign 0x800",
    ".global mtex_snippet_vectors",
    "mtex_snippet_vectors:",
    ".irp i, 0,1,2,3,4,5,6,7",
    ".balign 0x80",
    "mtex_snippet_cut \\i",
    ".endr",
    ".balign 0x80",
    "mrs x9, esr_el1",
    "lsr x9, x9, #26",
    "cmp x9, #0x15",
    "b.ne 9f",
    "mrs x9, elr_el1",
    "adrp x10, mtex_snippet_el0_iteration",
    "add x10, x10, :lo12:mtex_snippet_el0_iteration",
    "add x10, x10, #4",
    "cmp x9, x10",
    "b.ne 8f",
    "movz x0, #{iteration_lo}",
    "movk x0, #{iteration_hi}, lsl #16",
    ".global mtex_snippet_iteration",
    "mtex_snippet_iteration:",
    "hvc #0",
    "eret",
    "8: b {el0_return}",
    "9: mtex_snippet_cut 8",
    ".irp i, 9,10,11",
    ".balign 0x80",
    "nop",
    "nop",
    "nop",
    "nop",
    "mtex_snippet_cut \\i",
    ".endr",
    ".irp i, 12,13,14,15",
    ".balign 0x80",
    "mtex_snippet_cut \\i",
    ".endr",
    ".balign 0x80",
    ".global mtex_snippet_vectors_end",
    "mtex_snippet_vectors_end:",
    ".popsection",
    end_lo = const PHASE_END_LO,
    end_hi = const PHASE_END_HI,
    id = const PHASE_ID,
    iteration_lo = const ITERATION_LO,
    iteration_hi = const ITERATION_HI,
    fault = sym crate::entry::guest_fault,
    el0_return = sym crate::el0::el0_return,
);

/// PHASE_ITERATION's function ID in the two halves a `movz`/`movk` pair takes.
const ITERATION_LO: u32 = PHASE_ITERATION & 0xffff;
const ITERATION_HI: u32 = PHASE_ITERATION >> 16;

unsafe extern "C" {
    static mtex_snippet_el0: u8;
    static mtex_snippet_el0_svc: u8;
    static mtex_snippet_iteration: u8;
    static mtex_snippet_vectors: u8;
    static mtex_snippet_vectors_end: u8;
    static guest_vectors: u8;
    static __image_start: u8;
    static __data_start: u8;
}

/// Sets VBAR_EL1.
fn set_vbar(at: u64) {
    // SAFETY: `at` is a vector table of this image (2 KiB aligned); the ISB makes the next
    // exception use it.
    unsafe { write_vbar_el1(VbarEl1::from_bits_retain(at)) };
    barrier::isb(barrier::SY);
}

/// The vector table's range: calls of the guarded phase may come from it.
fn vectors() -> (u64, u64) {
    (
        (&raw const mtex_snippet_vectors) as u64,
        (&raw const mtex_snippet_vectors_end) as u64,
    )
}

/// The guest's code and read-only data (the image up to its writable data, page-aligned by
/// link.ld; the identity map makes these guest physical addresses too): read-only at stage 2
/// while the snippet's phase is open, so that the snippet can rewrite neither the harness nor
/// anything of the guest's that runs after it.
fn read_only() -> (u64, u64) {
    (
        (&raw const __image_start) as u64,
        (&raw const __data_start) as u64,
    )
}

/// Runs the snippet; returns the exit status (0: it ran every iteration and returned, with no
/// asynchronous tag-check fault recorded).
pub fn run(opts: &SnippetOptions, fdt: &Fdt) -> u64 {
    let bootargs = fdt.chosen().bootargs().unwrap_or("");
    let code_at = CODE.addr();
    // SAFETY: CODE is used by this program only, which runs on one CPU: the snippet is
    // written in here, before anything reaches the page through its address, and the slice
    // is not used after this statement.
    let code = unsafe { &mut (*CODE.ptr()).0 };
    let Some(len) = snippet_code(bootargs, code) else {
        println!("snippet: no code (mtex.snippet)");
        return 2;
    };

    install_idmap(fdt);
    let buffer = BUFFER.addr();
    if install_upper_alias(buffer).is_none() {
        println!("snippet: cannot map the upper-half alias");
        return 2;
    }
    // The tables were written with the MMU off: no stale line may hide them (mmu.rs).
    mmu::invalidate_heap();
    write_tcr(TCR);
    write_sctlr(p::SCTLR_MMU_ON | sctlr::ATA | sctlr::ATA0);

    let user = mmu::USER_PAGE.addr();
    let stack = STACK.addr();
    let env = [
        mte::tag_range(buffer, 4096, TAG),
        4096,
        mte::tag_range(user, USER_BUFFER, TAG),
        with_tag(UPPER | buffer, TAG),
        mmu::UNTAGGED_PAGE.addr(),
    ];
    mte::tag_range(user + USER_BUFFER, 4096 - USER_BUFFER, 0);
    mte::tag_range(stack, 4096, 0);
    let (x0, x1) = if opts.el == 0 {
        (env[2], USER_BUFFER)
    } else {
        (env[0], env[1])
    };
    let regs = [x0, x1, env[2], env[3], env[4]];
    let sp = if opts.el == 0 {
        user + 4096
    } else {
        stack + 4096
    };
    sync_icache(code_at, len as u64);
    // MTE system registers of this CPU: IRG's exclusion and seed, and the fault status
    // registers cleared so that what the snippet leaves there is its own.
    // SAFETY: GCR_EL1 only steers IRG: tag 0 excluded.
    unsafe { write_gcr_el1(GcrEl1::empty().with_exclude(1)) };
    write_rgsr_el1(RgsrEl1::empty().with_seed(0x5a5a));
    // SAFETY: clears the fault status registers (`msr ..., xzr`: arm-sysregs' writers would
    // take the zero in a register).
    unsafe {
        asm!(
            ".arch_extension memtag",
            "msr tfsr_el1, xzr",
            "msr tfsre0_el1, xzr",
            "isb"
        )
    };
    if opts.el == 0 {
        // An EL0 snippet may use the PMU, as a task does that perf lets read its counters
        // (PMUSERENR_EL0.EN); the hypervisor emulates each access. Set before the phase:
        // not in its counts. arm-sysregs has no accessor for it.
        // SAFETY: PMUSERENR_EL0 only decides whether EL0's PMU accesses trap to EL1.
        unsafe { asm!("msr pmuserenr_el0, {}", "isb", in(reg) 1u64) };
    }
    let tcr_v = TCR | if opts.tcma1 { tcr::TCMA1 } else { 0 };
    let sctlr_v = p::SCTLR_MMU_ON
        | sctlr::ATA
        | sctlr::ATA0
        | (opts.tcf << sctlr::TCF_SHIFT)
        | (opts.tcf0 << sctlr::TCF0_SHIFT);
    if tcr_v != TCR {
        write_tcr(tcr_v);
    }
    write_sctlr(sctlr_v);
    println!(
        "snippet: {len} bytes at {code_at:#x}, EL{}, {} iteration(s); SCTLR_EL1 {sctlr_v:#x}, TCR_EL1 {tcr_v:#x}",
        opts.el, opts.iters
    );
    println!(
        "snippet: x0 {:#x} x1 {} x2 {:#x} x3 {:#x} x4 {:#x} sp {sp:#x}",
        regs[0], regs[1], regs[2], regs[3], regs[4]
    );

    set_vbar(vectors().0);
    let r = if opts.el == 0 {
        phase_el0(code_at, &regs, sp, opts.iters)
    } else {
        phase_el1(code_at, &regs, sp, opts.iters)
    };
    set_vbar((&raw const guest_vectors) as u64);
    if r != ret::SUCCESS {
        println!("snippet: the phase did not close ({r:#x})");
        return 6;
    }
    if opts.el == 0 {
        // ELR_EL1, set by the SVC that brought EL0 back.
        let elr = read_elr_el1().bits();
        let expected = (&raw const mtex_snippet_el0_svc) as u64 + 4;
        if elr != expected {
            println!(
                "snippet: an SVC at EL0 (pc {:#x}) ended the snippet early",
                elr - 4
            );
            return 5;
        }
    }
    // The tag-check fault status registers, read after a DSB, as Linux's mte_check_tfsr_el1
    // does, so that asynchronous faults have reached them.
    barrier::dsb(barrier::NSH);
    barrier::isb(barrier::SY);
    let (tfsr1, tfsr0) = (read_tfsr_el1().bits(), read_tfsre0_el1().bits());
    let mask = tfsr::TF0 | tfsr::TF1;
    if (tfsr1 | tfsr0) & mask != 0 {
        println!(
            "snippet: asynchronous tag-check fault recorded: TFSR_EL1 {tfsr1:#x}, TFSRE0_EL1 {tfsr0:#x}"
        );
        return 3;
    }
    println!("snippet: done");
    0
}

/// Maps `buffer`'s page at `UPPER | buffer` in a TTBR1 table of its own (installed while the
/// MMU is still off).
fn install_upper_alias(buffer: u64) -> Option<()> {
    let mut map =
        Mapping::with_asid_and_va_range(IdTranslation::new(), 0, 1, El1And0, VaRange::Upper);
    let va = (UPPER | buffer) as usize;
    map.map_range(
        &MemoryRegion::new(va, va + 4096),
        PhysicalAddress(buffer as usize),
        UPPER_RAM,
        Constraints::empty(),
    )
    .ok()?;
    let root = map.root_address().0 as u64;
    // The table lives as long as the run.
    Box::leak(Box::new(map));
    // SAFETY: the MMU is off; TTBR1 takes effect when it is turned on (TCR enables its walks).
    unsafe { write_ttbr1_el1(Ttbr1El1::from_bits_retain(root)) };
    barrier::isb(barrier::SY);
    Some(())
}

/// Makes the `len` bytes just written at `at` visible to instruction fetch: clean the data
/// cache to the point of unification, invalidate the instruction cache there (Arm ARM
/// B2.4.4). QEMU models no cache; silicon needs exactly this (the copy was made with the
/// caches on, and the I-cache could hold the page's zeros from speculative fetches).
fn sync_icache(at: u64, len: u64) {
    let ctr = read_ctr_el0();
    let dline = 4u64 << ctr.dminline();
    let iline = 4u64 << ctr.iminline();
    let end = at + len;
    let mut a = at & !(dline - 1);
    while a < end {
        // SAFETY: cache maintenance of the guest's own code page; no data changes.
        unsafe { asm!("dc cvau, {}", in(reg) a) };
        a += dline;
    }
    // SAFETY: a barrier.
    unsafe { asm!("dsb ish") };
    let mut a = at & !(iline - 1);
    while a < end {
        // SAFETY: invalidates instruction cache lines of the code page.
        unsafe { asm!("ic ivau, {}", in(reg) a) };
        a += iline;
    }
    // SAFETY: barriers.
    unsafe { asm!("dsb ish", "isb") };
}

const NAME: &str = "snippet";

/// The phase at EL1: SP = the snippet's stack, then `iters` calls, each followed by the
/// PHASE_ITERATION that counts it; x19, x29 and SP of the caller are kept in `SAVE` outside
/// the phase. Returns the PHASE_END result. From its PHASE_BEGIN to its PHASE_END the code
/// is one 128-byte block: the loop, its iteration call and its phase end lie in one page,
/// whose mapping the hypervisor checks at each call.
fn phase_el1(code: u64, regs: &[u64; 5], sp: u64, iters: u64) -> u64 {
    let name: [u64; 4] = pack_bytes(NAME.as_bytes());
    let vectors = vectors();
    let read_only = read_only();
    let r: u64;
    // SAFETY: the snippet is called as an AAPCS64 function on its own stack; every register
    // it may change is declared clobbered, and x19, x29 and SP, which cannot be, are restored
    // from SAVE after the phase whatever it did. The HVCs are mtex calls. The alignment's
    // padding runs before the phase opens.
    unsafe {
        asm!(
            "adrp x16, {save}",
            "add x16, x16, :lo12:{save}",
            "mov x17, sp",
            "stp x19, x29, [x16]",
            "str x17, [x16, #16]",
            "mov sp, x26",
            // The guard: the phase end below (3:) and the vector table end the phase; the
            // HVC at 2: counts an iteration, of x12.
            "adr x7, 3f",
            "add x8, x7, #16",
            "adr x11, 2f",
            "mov x12, x27",
            ".balign 128",
            "hvc #0",
            "1: mov x0, x21",
            "mov x1, x22",
            "mov x2, x23",
            "mov x3, x24",
            "mov x4, x25",
            "blr x20",
            "movz x0, #{iteration_lo}",
            "movk x0, #{iteration_hi}, lsl #16",
            "2: hvc #0",
            "subs x27, x27, #1",
            "b.ne 1b",
            "mov x15, x28",
            "3:",
            phase_end_call!(),
            "adrp x9, {save}",
            "add x9, x9, :lo12:{save}",
            "ldp x19, x29, [x9]",
            "ldr x10, [x9, #16]",
            "mov sp, x10",
            save = sym SAVE,
            end_lo = const PHASE_END_LO,
            end_hi = const PHASE_END_HI,
            iteration_lo = const ITERATION_LO,
            iteration_hi = const ITERATION_HI,
            inout("x0") PHASE_BEGIN as u64 => r,
            inout("x1") PHASE_ID => _,
            inout("x2") name[0] => _,
            inout("x3") name[1] => _,
            inout("x4") name[2] => _,
            inout("x5") name[3] => _,
            inout("x6") PHASE_TRACED | PHASE_GUARDED => _,
            out("x7") _, out("x8") _,
            inout("x9") vectors.0 => _, inout("x10") vectors.1 => _,
            out("x11") _, out("x12") _,
            inout("x13") read_only.0 => _, inout("x14") read_only.1 => _,
            out("x15") _, out("x16") _,
            out("x17") _, out("x18") _,
            inout("x20") code => _,
            inout("x21") regs[0] => _,
            inout("x22") regs[1] => _,
            inout("x23") regs[2] => _,
            inout("x24") regs[3] => _,
            inout("x25") regs[4] => _,
            inout("x26") sp => _,
            inout("x27") iters => _,
            inout("x28") PHASE_ID => _,
            out("x30") _,
        )
    };
    r
}

/// The phase at EL0: `el0::EL0_SAVE` is filled outside the phase as `el0_call` fills it (so
/// that the last SVC comes back to label 2 through `el0_return`), then the phase ERETs to the
/// EL0 loop, SP_EL0 = `sp`, interrupts masked. Each iteration's SVC is counted by the vector
/// table's PHASE_ITERATION. Returns the PHASE_END result.
fn phase_el0(code: u64, regs: &[u64; 5], sp: u64, iters: u64) -> u64 {
    let name: [u64; 4] = pack_bytes(NAME.as_bytes());
    let vectors = vectors();
    let read_only = read_only();
    let r: u64;
    // SAFETY: EL0 runs the harness loop and the snippet (user memory only: EL1's is not
    // EL0-accessible) and comes back by SVC through el0_return, which restores x19–x30 and
    // SP from EL0_SAVE as saved here; everything else is declared clobbered. The HVCs are
    // mtex calls.
    unsafe {
        asm!(
            "adr x11, 2f",
            crate::el0::el0_save!("x11"),
            "msr elr_el1, x14",
            "mov x11, #0x3c0",
            "msr spsr_el1, x11",
            "msr sp_el0, x26",
            // The guard: the phase end below (3:) and the vector table end the phase; the
            // vector table's HVC at `mtex_snippet_iteration` counts an iteration, of x12.
            "adr x7, 3f",
            "add x8, x7, #16",
            "mov x9, x16",
            "mov x10, x17",
            "mov x11, x18",
            "mov x12, x27",
            "mov x14, x15",
            "hvc #0",
            "eret",
            "2: mov x15, x28",
            "3:",
            phase_end_call!(),
            end_lo = const PHASE_END_LO,
            end_hi = const PHASE_END_HI,
            inout("x0") PHASE_BEGIN as u64 => r,
            inout("x1") PHASE_ID => _,
            inout("x2") name[0] => _,
            inout("x3") name[1] => _,
            inout("x4") name[2] => _,
            inout("x5") name[3] => _,
            inout("x6") PHASE_TRACED | PHASE_GUARDED => _,
            out("x7") _, out("x8") _, out("x9") _, out("x10") _, out("x11") _, out("x12") _,
            inout("x13") read_only.0 => _,
            inout("x14") (&raw const mtex_snippet_el0) as u64 => _,
            inout("x15") read_only.1 => _,
            inout("x16") vectors.0 => _, inout("x17") vectors.1 => _,
            inout("x18") (&raw const mtex_snippet_iteration) as u64 => _,
            inout("x20") code => _,
            inout("x21") regs[0] => _,
            inout("x22") regs[1] => _,
            inout("x23") regs[2] => _,
            inout("x24") regs[3] => _,
            inout("x25") regs[4] => _,
            inout("x26") sp => _,
            inout("x27") iters => _,
            inout("x28") PHASE_ID => _,
            out("x30") _,
        )
    };
    r
}
