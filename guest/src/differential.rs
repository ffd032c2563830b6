//! The differential test's guest side: every `program::diff_case` runs as its own traced
//! phase holding one access through a pointer whose tag differs from the memory's, with
//! TCF/TCF0 SYNC or NONE. QEMU faults exactly when it checks; the guest records which cases
//! faulted (x17, set by its EL1 vector) and prints the bitmap. The host compares it with the
//! hypervisor's TCF-elided counts.

use crate::by_address::ByAddress;
use crate::mmu;
use crate::mte;
use crate::println;
use crate::programs::{install_idmap, write_sctlr, write_tcr};
use fdt::Fdt;
use mtex_abi::hypercall::{PHASE_BEGIN, PHASE_TRACED, pack_bytes, ret};
use mtex_abi::program::{self, DIFF_CASES, DiffKind, diff_case};

/// x14 holds this while a case runs, so the EL1 vector knows a tag-check fault is expected.
pub const DIFF_MAGIC: u64 = 0xd1f;

/// Sixteen granules tagged 0..15.
#[repr(C, align(16))]
struct Granules([u8; 256]);
static GRANULES: ByAddress<Granules> = ByAddress::new(Granules([0; 256]));

macro_rules! case {
    ($fn:ident: $access:literal) => {
        /// Runs one case; returns (PHASE_END result, faulted).
        fn $fn(id: u64, name: [u64; 4], ptr: u64, tco: bool) -> (u64, bool) {
            let (result, fault): (u64, u64);
            // SAFETY: the access touches only the granule `ptr` points at (owned for this
            // test); a tag-check fault is resumed after the access by the EL1 vector, which
            // changes only x16/x17; the HVCs are mtex calls that change only x0 and x1 (both
            // declared).
            unsafe {
                core::arch::asm!(
                    ".arch_extension memtag",
                    ".arch_extension lse",
                    "hvc #0",
                    "msr tco, x8",
                    $access,
                    "msr tco, #0",
                    crate::hvc::phase_end_call!(),
                    end_lo = const crate::hvc::PHASE_END_LO,
                    end_hi = const crate::hvc::PHASE_END_HI,
                    inout("x0") PHASE_BEGIN as u64 => result,
                    inout("x1") id => _,
                    in("x2") name[0],
                    in("x3") name[1],
                    in("x4") name[2],
                    in("x5") name[3],
                    in("x6") PHASE_TRACED,
                    in("x8") (tco as u64) << 25,
                    inout("x9") ptr => _,
                    out("x12") _,
                    inout("x13") 0u64 => _,
                    in("x14") DIFF_MAGIC,
                    in("x15") id,
                    out("x16") _,
                    inout("x17") 0u64 => fault,
                    // Only the ld1 case writes it; a clobber may name a SIMD register even
                    // on the softfloat target (an operand may not).
                    out("v0") _,
                )
            };
            (result, fault != 0)
        }
    };
}

case!(ldr: "ldr x12, [x9]");
case!(str: "str x12, [x9]");
case!(ldp: "ldp x12, x13, [x9]");
case!(stp_pre: "stp x12, x13, [x9, #0]!");
case!(ldadd: "ldadd x12, x13, [x9]");
case!(ldr_reg: "ldr x12, [x9, x13]");
// The guest is built for the softfloat target (no FP/SIMD registers, as Linux's kernel), whose
// assembler rejects SIMD mnemonics ("instruction requires: neon"): the instruction is given
// by its encoding. Clobbering v0 is harmless in any case: nothing compiled for this target
// uses a SIMD register. CPACR_EL1.FPEN stays enabled for it (guest/src/entry.rs).
case!(ld1: ".inst 0x4c407120"); // ld1 {v0.16b}, [x9]
case!(stur: "stur x12, [x9]");
case!(ldar: "ldar x12, [x9]");
case!(ldtr: "ldtr x12, [x9]");
case!(sttr: "sttr x12, [x9]");
case!(literal: "ldr x12, .");
case!(prfm: "prfm pldl1keep, [x9]");

fn run_case(kind: DiffKind, id: u64, name: [u64; 4], ptr: u64, tco: bool) -> (u64, bool) {
    let f = match kind {
        DiffKind::Ldr => ldr,
        DiffKind::Str => str,
        DiffKind::Ldp => ldp,
        DiffKind::StpPreIndex => stp_pre,
        DiffKind::Ldadd => ldadd,
        DiffKind::LdrRegOffset => ldr_reg,
        DiffKind::Ld1 => ld1,
        DiffKind::Stur => stur,
        DiffKind::Ldar => ldar,
        DiffKind::Ldtr => ldtr,
        DiffKind::Sttr => sttr,
        DiffKind::Literal => literal,
        DiffKind::Prfm => prfm,
    };
    f(id, name, ptr, tco)
}

pub fn run(fdt: &Fdt) -> u64 {
    install_idmap(fdt);
    let (mut tcr, mut sctlr) = (
        program::TCR_MMU | program::TCR_TBI0 | program::TCR_TBI1,
        program::SCTLR_MMU_ON | program::SCTLR_ATA,
    );
    write_tcr(tcr);
    write_sctlr(sctlr);
    let normal = GRANULES.addr();
    let user = mmu::USER_PAGE.addr();
    for tag in 0..16 {
        mte::tag_range(normal + 16 * tag, 16, tag);
        mte::tag_range(user + 16 * tag, 16, tag);
    }
    let mut faults = [0u64; DIFF_CASES.div_ceil(64)];
    for i in 0..DIFF_CASES {
        let c = diff_case(i);
        if c.tcr != tcr {
            tcr = c.tcr;
            write_tcr(tcr);
        }
        if c.sctlr != sctlr {
            sctlr = c.sctlr;
            write_sctlr(sctlr);
        }
        let base = if c.kind.unprivileged() { user } else { normal };
        let ptr = mtex_arch::mte_bits::with_tag(base + 16 * c.memory_tag, c.pointer_tag);
        let name = heapless_name(i);
        let id = i as u64 + 1;
        let (r, faulted) = run_case(c.kind, id, pack_bytes(name.as_str().as_bytes()), ptr, c.tco);
        if r != ret::SUCCESS {
            println!("guest: differential case {i} failed: {r:#x}");
            return 6;
        }
        faults[i / 64] |= (faulted as u64) << (i % 64);
    }
    write_sctlr(program::SCTLR_MMU_ON);
    for (w, bits) in faults.iter().enumerate() {
        println!("diff-faults {w} {bits:016x}");
    }
    println!("guest: differential done, {DIFF_CASES} cases");
    0
}

/// "d<i>" as a phase name, without an allocation.
fn heapless_name(i: usize) -> mtex_abi::ShortStr<32> {
    use core::fmt::Write;
    let mut s = mtex_abi::ShortStr::<32>::new();
    let _ = write!(Names(&mut s), "d{i}");
    s
}

struct Names<'a>(&'a mut mtex_abi::ShortStr<32>);

impl core::fmt::Write for Names<'_> {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        self.0.push_str_truncating(s);
        Ok(())
    }
}
