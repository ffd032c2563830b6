//! Accesses whose address is not simply the base register plus an offset, or not on one
//! page: traced loops of `HOSTILE_N` loads through a pointer signed with the DA or DB key
//! (LDRAA/LDRAB: the access is at the authenticated address, PAC removed, tag kept), and of
//! 8-byte loads that start 4 bytes before the end of an Untagged page and end in a Tagged
//! one (the Tagged part is checked). Each load's tag matches, so every one is a checked read.
//! Then one such page-crossing load through a pointer whose tag does not match the Tagged
//! page: QEMU checks that part and faults (TCF is SYNC), which the vector resumes.

use crate::differential::DIFF_MAGIC;
use crate::hvc::phase_asm;
use crate::mmu;
use crate::programs::write_sctlr;
use mtex_abi::hypercall::ret;
use mtex_abi::program::{self, HOSTILE_N};

/// SCTLR_EL1.EnDA and EnDB: the data keys authenticate (else AUTDA/LDRAA leave the pointer
/// as it is, and PACDA inserts no code).
const SCTLR_ENDA: u64 = 1 << 27;
const SCTLR_ENDB: u64 = 1 << 13;
/// Memory tag of the Tagged page's first granule, and a pointer tag that does not match it.
const TAG: u64 = 3;
const WRONG_TAG: u64 = 5;

/// A traced phase: `1: <insn>; subs x10, x10, #1; b.ne 1b` run `HOSTILE_N` times with x9 =
/// the given pointer. Returns the PHASE_END result.
macro_rules! traced_loop {
    ($fn:ident: $insn:literal) => {
        fn $fn(id: u64, name: &str, x9: u64) -> u64 {
            // The loads read only the granule the caller's pointer designates (owned by this
            // program, tagged to match).
            phase_asm!(
                id: id, name: name, traced: true,
                before: [".arch_extension pauth"],
                body: [concat!("1: ", $insn), "subs x10, x10, #1", "b.ne 1b"],
                in("x9") x9,
                inout("x10") HOSTILE_N => _,
                out("x12") _,
            )
        }
    };
}

traced_loop!(ldraa_loop: "ldraa x12, [x9]");
traced_loop!(ldrab_loop: "ldrab x12, [x9, #8]");
traced_loop!(ldr_loop: "ldr x12, [x9]");

/// True if the CPU has FEAT_PAuth with some algorithm: ID_AA64ISAR1_EL1.APA or .API, or
/// ID_AA64ISAR2_EL1.APA3.
fn has_pauth() -> bool {
    let (isar1, isar2): (u64, u64);
    // SAFETY: reading ID registers (emulated by the hypervisor) has no side effects.
    unsafe {
        core::arch::asm!(
            "mrs {}, s3_0_c0_c6_1",
            "mrs {}, s3_0_c0_c6_2",
            out(reg) isar1,
            out(reg) isar2,
        )
    };
    (isar1 >> 4) & 0xff != 0 || (isar2 >> 12) & 0xf != 0
}

/// Sets the DA and DB keys to fixed values (the codes are then the same on every run) and
/// returns `pa` signed with the DA key and `pb` with the DB key, each with a zero modifier
/// (as LDRAA/LDRAB authenticate).
fn sign(pa: u64, pb: u64) -> (u64, u64) {
    let (sa, sb): (u64, u64);
    // SAFETY: the key registers (APDAKey{Lo,Hi}_EL1 = S3_0_C2_C2_{0,1}, APDBKey{Lo,Hi}_EL1
    // = S3_0_C2_C2_{2,3}) only decide the codes; HCR_EL2.APK lets EL1 write them. PACDZA and
    // PACDZB only compute a value.
    unsafe {
        core::arch::asm!(
            ".arch_extension pauth",
            "msr s3_0_c2_c2_0, {k0}",
            "msr s3_0_c2_c2_1, {k1}",
            "msr s3_0_c2_c2_2, {k1}",
            "msr s3_0_c2_c2_3, {k0}",
            "isb",
            "pacdza {a}",
            "pacdzb {b}",
            k0 = in(reg) 0x0123_4567_89ab_cdefu64,
            k1 = in(reg) 0xfedc_ba98_7654_3210u64,
            a = inout(reg) pa => sa,
            b = inout(reg) pb => sb,
        )
    };
    (sa, sb)
}

/// Phase `id`: one load through `ptr` (its tag wrong for the Tagged part), with the EL1
/// vector primed (x14) to resume after a tag-check fault. Returns (PHASE_END result,
/// faulted).
fn mismatch(id: u64, name: &str, ptr: u64) -> (u64, bool) {
    let fault: u64;
    // The load reads 8 bytes of SPLIT_PAGES (owned by this program); its tag-check fault is
    // resumed after the load by the EL1 vector, which changes only x16/x17.
    let r = phase_asm!(
        id: id, name: name, traced: true,
        before: [],
        body: ["ldr x12, [x9]"],
        in("x9") ptr,
        out("x12") _,
        in("x14") DIFF_MAGIC,
        out("x16") _,
        inout("x17") 0u64 => fault,
    );
    (r, fault != 0)
}

pub fn run(tagged: u64) -> u64 {
    if !has_pauth() {
        crate::println!("addresses: the CPU has no FEAT_PAuth");
        return 11;
    }
    write_sctlr(
        program::SCTLR_MMU_ON
            | program::SCTLR_ATA
            | program::SCTLR_TCF_SYNC
            | SCTLR_ENDA
            | SCTLR_ENDB,
    );
    // LDRAB adds its offset (8) to the authenticated base: sign the address 8 below.
    let (signed_a, signed_b) = sign(tagged, tagged.wrapping_sub(8));
    crate::println!("addresses: {tagged:#x} signed {signed_a:#x} / {signed_b:#x}");
    // 4 bytes before the end of the Untagged page; the Tagged page's first granule tagged.
    let tagged_page = mmu::SPLIT_PAGES.addr() + 4096;
    let across = crate::mte::tag_range(tagged_page, 16, TAG) - 4;
    let wrong = mtex_arch::mte_bits::with_tag(across, WRONG_TAG);
    let results = [
        ldraa_loop(1, "ldraa", signed_a),
        ldrab_loop(2, "ldrab-offset", signed_b),
        ldr_loop(3, "cross-page", across),
    ];
    if let Some(r) = results.iter().find(|&&r| r != ret::SUCCESS) {
        crate::println!("addresses: a phase failed: {r:#x}");
        return 6;
    }
    let (r, faulted) = mismatch(4, "cross-page-mismatch", wrong);
    crate::println!("addresses: cross-page-mismatch faulted={}", faulted as u8);
    if r != ret::SUCCESS || !faulted {
        return 7;
    }
    0
}
