//! Accesses whose Tag Checked property (or whose being made at all) the Arm ARM leaves to
//! the CPU, each in its own traced phase of `HOSTILE_N` iterations on the guest's tagged
//! granule: the counts follow the architectural view, and the report must say how many
//! rest on the CPU's choice — never count them silently.
//! 1. `cas`: per iteration a CAS whose compare passes, one whose compare fails and a CASP
//!    whose compare fails (a failed compare's write may be Unchecked, or not made).
//! 2. `cas-xzr`: a CAS that discards what it read (Rs = XZR): whether it wrote cannot be
//!    known.
//! 3. `exclusive-mixed`: an LDXR Tag Checked, its STXR with PSTATE.TCO set (status UNKNOWN).
//! 4. `non-shareable`: loads from the tagged page mapped Non-shareable.
//! 5. `uncached`: loads with SCTLR_EL1.C = 0.

use crate::hvc;
use crate::hvc::phase_asm;
use mtex_abi::program::HOSTILE_N;

/// Stage-1 descriptor SH field (bits 9:8) and its Non-shareable value.
const SH_MASK: u64 = 0b11 << 8;

pub fn run(tagged: u64) -> u64 {
    // The granule holds 0 in both of its words, which every passing CAS keeps.
    // SAFETY: the guest's own tagged granule (16 bytes), through its tagged pointer.
    unsafe {
        core::ptr::write_volatile(tagged as *mut u64, 0);
        core::ptr::write_volatile((tagged + 8) as *mut u64, 0);
    }
    let r = phase_asm!(
        id: 1, name: "cas", traced: true,
        before: [".arch_extension lse"],
        body: [
            "1: mov x12, xzr",
            "cas x12, xzr, [x9]",
            "mov x13, #1",
            "cas x13, xzr, [x9]",
            "mov x12, #1",
            "mov x13, #1",
            "casp x12, x13, x16, x17, [x9]",
            "subs x10, x10, #1",
            "b.ne 1b",
        ],
        in("x9") tagged,
        inout("x10") HOSTILE_N => _,
        out("x12") _,
        out("x13") _,
        in("x16") 0u64,
        in("x17") 0u64,
    );
    if r != 0 {
        return 6;
    }
    let r = phase_asm!(
        id: 2, name: "cas-xzr", traced: true,
        before: [".arch_extension lse"],
        body: [
            "1: cas xzr, xzr, [x9]",
            "subs x10, x10, #1",
            "b.ne 1b",
        ],
        in("x9") tagged,
        inout("x10") HOSTILE_N => _,
    );
    if r != 0 {
        return 6;
    }
    let r = phase_asm!(
        id: 3, name: "exclusive-mixed", traced: true,
        before: [".arch_extension memtag"],
        body: [
            "1: ldxr x12, [x9]",
            "msr tco, #1",
            "stxr w13, x12, [x9]",
            "msr tco, #0",
            "subs x10, x10, #1",
            "b.ne 1b",
        ],
        in("x9") tagged,
        inout("x10") HOSTILE_N => _,
        out("x12") _,
        out("x13") _,
    );
    if r != 0 {
        return 6;
    }
    let page = (tagged & !mtex_arch::mte_bits::TOP_BYTE_MASK & !0xfff) as usize;
    let Some((pte, old)) = super::remap::page_entry(page) else {
        crate::println!("hostile-impdef: no page entry for {page:#x}");
        return 8;
    };
    let tlbi_arg = (super::remap::ASID << 48) | ((page as u64) >> 12);
    // The tagged page's entry made Non-shareable for the loop, then put back.
    let r = phase_asm!(
        id: 4, name: "non-shareable", traced: true,
        before: [],
        body: [
            "str x18, [x14]",
            "dsb ishst",
            "tlbi vae1, x20",
            "dsb ish",
            "isb",
            "1: ldr x12, [x9]",
            "subs x10, x10, #1",
            "b.ne 1b",
            "str x21, [x14]",
            "dsb ishst",
            "tlbi vae1, x20",
            "dsb ish",
            "isb",
        ],
        in("x9") tagged,
        inout("x10") HOSTILE_N => _,
        out("x12") _,
        in("x14") pte,
        in("x18") old & !SH_MASK,
        in("x20") tlbi_arg,
        in("x21") old,
    );
    if r != 0 {
        return 6;
    }
    let sctlr = arm_sysregs::el1::accessors::read_sctlr_el1().bits();
    let uncached = sctlr & !mtex_arch::mte_bits::sctlr::C;
    // SCTLR_EL1.C cleared for the loop, then put back.
    let r = phase_asm!(
        id: 5, name: "uncached", traced: true,
        before: [],
        body: [
            "msr sctlr_el1, x18",
            "isb",
            "1: ldr x12, [x9]",
            "subs x10, x10, #1",
            "b.ne 1b",
            "msr sctlr_el1, x21",
            "isb",
        ],
        in("x9") tagged,
        inout("x10") HOSTILE_N => _,
        out("x12") _,
        in("x18") uncached,
        in("x21") sctlr,
    );
    if r != 0 {
        return 6;
    }
    hvc::exit(0)
}
