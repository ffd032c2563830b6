//! The traced workloads: each is one asm block that opens a traced phase, repeats its body
//! `n` times and closes the phase, so the hypervisor steps exactly these instructions and no
//! compiler-generated code (see `mtex_abi::program::Body` for what each body does).

use crate::hvc::phase_asm;
use mtex_abi::program::Body;

/// The pointers the bodies use (see `Body`).
pub struct Pointers {
    pub tagged: u64,
    pub tag0: u64,
    pub untagged: u64,
    pub user: u64,
    pub zva_block: u64,
}

macro_rules! workload {
    ($(#[$doc:meta])* $fn:ident: $($body:literal),+) => {
        $(#[$doc])*
        fn $fn(id: u64, name: &str, p: &Pointers, n: u64, traced: bool) -> u64 {
            // The body accesses only the granules, pages and stack slots `Pointers`
            // describes (owned by the guest for this purpose) and restores SP.
            phase_asm!(
                id: id, name: name, traced: traced,
                before: [".arch_extension memtag", ".arch_extension lse"],
                body: ["1:", $($body,)+ "subs x10, x10, #1", "b.ne 1b"],
                in("x7") p.user,
                in("x9") p.tagged,
                inout("x10") n => _,
                in("x11") p.untagged,
                out("x12") _,
                out("x13") _,
                in("x14") p.zva_block,
                in("x16") 0u64,
                in("x17") p.tag0,
            )
        }
    };
}

workload!(load: "ldr x12, [x9]");
workload!(store: "str x12, [x9]");
workload!(load_tag0: "ldr x12, [x17]");
workload!(load_sp: "ldr x12, [sp]");
workload!(sp_writeback: "str x12, [sp, #-16]!", "ldr x12, [sp], #16");
workload!(load_sp_reg_offset: "ldr x12, [sp, x16]");
workload!(pair: "ldp x12, x13, [x9]");
workload!(atomic: "ldadd x12, x13, [x9]");
workload!(tco_toggle: "msr tco, #1", "ldr x12, [x9]", "msr tco, #0", "ldr x12, [x9]");
workload!(load_untagged_page: "ldr x12, [x11]");
workload!(literal: "ldr x12, .");
workload!(prefetch: "prfm pldl1keep, [x9]");
workload!(tag_store: "stg x9, [x9]");
workload!(dc_zva: "dc zva, x14");
workload!(ldtr: "ldtr x12, [x7]");
workload!(exclusive_increment: "3: ldaxr x12, [x9]", "add x12, x12, #1",
    "stlxr w13, x12, [x9]", "cbnz w13, 3b");
workload!(inert_stretch: "ldr x12, [x9]", "add x13, x13, #1", "add x13, x13, #1",
    "add x13, x13, #1", "add x13, x13, #1", "add x13, x13, #1", "add x13, x13, #1",
    "add x13, x13, #1", "add x13, x13, #1");

/// Runs `body` `n` times as phase `id`, traced or not; returns the PHASE_END result.
pub fn run(body: Body, id: u32, name: &str, p: &Pointers, n: u64, traced: bool) -> u64 {
    let f = match body {
        Body::Load => load,
        Body::Store => store,
        Body::LoadTag0 => load_tag0,
        Body::LoadSp => load_sp,
        Body::SpWriteback => sp_writeback,
        Body::LoadSpRegOffset => load_sp_reg_offset,
        Body::Pair => pair,
        Body::Atomic => atomic,
        Body::TcoToggle => tco_toggle,
        Body::LoadUntaggedPage => load_untagged_page,
        Body::Literal => literal,
        Body::Prefetch => prefetch,
        Body::TagStore => tag_store,
        Body::DcZva => dc_zva,
        Body::Ldtr => ldtr,
        Body::InertStretch => inert_stretch,
        Body::ExclusiveIncrement => exclusive_increment,
    };
    f(id as u64, name, p, n, traced)
}
