//! The guest switches a live code mapping under a traced phase, as a kernel does when it
//! moves or replaces a page of text: code running at VA `A` points `A`'s page entry at the
//! physical page of other code (`B`: at the same offset the same loop shape, but without
//! the load), invalidates the TLB entry (TLBI VAE1) and runs on at the same VA — now `B`'s
//! instructions. The step engine caches the translation of the code page it reads
//! instructions through; after the TLBI it must read `B`'s.
//!
//! Phase 2 does the same without a TLBI (pages `C` and `D`): it writes TCR_EL1 with the
//! value it holds, a write that can change what every address translates to (QEMU flushes
//! its TLB on it and fetches `D`'s page). The engine must drop its translation at that
//! write as at a TLBI.

use crate::hvc;
use crate::hvc::phase_asm;
use aarch64_paging::paging::MemoryRegion;
use core::arch::global_asm;
use core::sync::atomic::Ordering;
use mtex_abi::program::HOSTILE_N;

/// One of the two code pages: entered by BLR with x9 = tagged pointer, x10 = x17 = n,
/// x14 = A's page entry, x18 = that entry pointed at B, x20 = the argument of `$switch` (the
/// TLBI VAE1 argument, or TCR_EL1's value). It makes
/// n loads, switches A's entry to B's page from inside A, and goes on at the same VA: with
/// `$second` as the second loop's first instruction. B is never entered at its own address;
/// the switch may take effect at any fetch after the TLBI completes, so B repeats A's words
/// up to the second loop, and only there they differ (A loads, B adds).
macro_rules! remap_page {
    ($label:literal, $second:literal, $switch:literal) => {
        concat!(
            ".global ",
            $label,
            "\n",
            $label,
            ":\n",
            "1: ldr x12, [x9]\n",
            "subs x10, x10, #1\n",
            "b.ne 1b\n",
            "str x18, [x14]\n",
            "dsb ishst\n",
            $switch,
            "\n",
            "dsb ish\n",
            "isb\n",
            "mov x10, x17\n",
            "2: ",
            $second,
            "\n",
            "subs x10, x10, #1\n",
            "b.ne 2b\n",
            "ret\n",
            ".balign 4096\n",
        )
    };
}

global_asm!(
    ".pushsection .text.mtex_remap, \"ax\"",
    ".balign 4096",
    remap_page!("mtex_remap_a", "ldr x12, [x9]", "tlbi vae1, x20"),
    remap_page!("mtex_remap_b", "add x13, x13, #1", "tlbi vae1, x20"),
    remap_page!("mtex_remap_c", "ldr x12, [x9]", "msr tcr_el1, x20"),
    remap_page!("mtex_remap_d", "add x13, x13, #1", "msr tcr_el1, x20"),
    ".popsection",
);

unsafe extern "C" {
    static mtex_remap_a: u8;
    static mtex_remap_b: u8;
    static mtex_remap_c: u8;
    static mtex_remap_d: u8;
}

/// The code pages (identity-mapped): `A`, `B`, `C` and `D`.
pub fn pages() -> [usize; 4] {
    [
        (&raw const mtex_remap_a) as usize,
        (&raw const mtex_remap_b) as usize,
        (&raw const mtex_remap_c) as usize,
        (&raw const mtex_remap_d) as usize,
    ]
}

/// Output address bits of a page descriptor (47:12).
pub const OA_MASK: u64 = 0x0000_ffff_ffff_f000;
/// The identity map's ASID (`mmu::install_idmap`), for TLBI VAE1.
pub const ASID: u64 = 1;

/// The address of the level-3 entry that maps the page at `va` in the guest's identity map,
/// and what it holds.
pub fn page_entry(va: usize) -> Option<(u64, u64)> {
    // SAFETY: the map was installed by trace_setup and leaked; nothing else uses it now.
    let map = unsafe { crate::mmu::IDMAP.load(Ordering::Relaxed).as_mut() }?;
    let mut entry: Option<(u64, u64)> = None;
    let found = map.walk_range(&MemoryRegion::new(va, va + 4096), &mut |_, d, level| {
        if level == 3 {
            let at = d as *const _ as *const u64;
            // SAFETY: a descriptor is one 64-bit word of the table (repr(C), its AtomicUsize
            // first); reading it has no side effects (aarch64-paging keeps `bits` private).
            entry = Some((at as u64, unsafe { at.read_volatile() }));
        }
        Ok(())
    });
    entry.filter(|_| found.is_ok())
}

pub fn run(tagged: u64) -> u64 {
    let [a, b, c, d] = pages();
    // Where A's page entry is and what it holds.
    let Some((pte, old)) = page_entry(a) else {
        crate::println!("hostile-remap: no page entry for {a:#x}");
        return 8;
    };
    let to_b = (old & !OA_MASK) | (b as u64 & OA_MASK);
    let tlbi_arg = (ASID << 48) | ((a as u64) >> 12);
    // Calls A by BLR (which switches its own page entry to B's page and goes on there, see
    // above), then puts the entry back; the loops only load from the guest's tagged granule
    // or count in x13; the stores are to the guest's own page table.
    let r = phase_asm!(
        id: 1, name: "remapped-code", traced: true,
        before: [],
        body: [
            "mov x10, x17",
            "blr x16",
            "str x21, [x14]",
            "dsb ishst",
            "tlbi vae1, x20",
            "dsb ish",
            "isb",
        ],
        in("x9") tagged,
        out("x10") _,
        out("x12") _,
        out("x13") _,
        in("x14") pte,
        in("x16") a,
        in("x17") HOSTILE_N,
        in("x18") to_b,
        in("x20") tlbi_arg,
        in("x21") old,
        out("x30") _,
    );
    if r != 0 {
        return 6;
    }
    let Some((pte, old)) = page_entry(c) else {
        crate::println!("hostile-remap: no page entry for {c:#x}");
        return 8;
    };
    let to_d = (old & !OA_MASK) | (d as u64 & OA_MASK);
    let tcr = arm_sysregs::el1::accessors::read_tcr_el1().bits();
    // As phase 1, with TCR_EL1 written with its own value in place of each TLBI.
    let r = phase_asm!(
        id: 2, name: "remapped-code-tcr", traced: true,
        before: [],
        body: [
            "mov x10, x17",
            "blr x16",
            "str x21, [x14]",
            "dsb ishst",
            "msr tcr_el1, x20",
            "dsb ish",
            "isb",
        ],
        in("x9") tagged,
        out("x10") _,
        out("x12") _,
        out("x13") _,
        in("x14") pte,
        in("x16") c,
        in("x17") HOSTILE_N,
        in("x18") to_d,
        in("x20") tcr,
        in("x21") old,
        out("x30") _,
    );
    if r != 0 {
        return 6;
    }
    hvc::exit(0)
}
