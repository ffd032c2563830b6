//! The default guest program as data: the phases it opens and the MTE control writes it makes
//! in each. The guest executes this table; the host uses the same table to predict, write by
//! write, the trap log a correct hypervisor must report (old values included, since the
//! hypervisor enters the guest with the `*_AT_ENTRY` values).

/// SCTLR_EL1 when the guest is entered: RES1 bits only, MMU and caches off (booting.rst).
pub const SCTLR_EL1_AT_ENTRY: u64 = 0x30d0_0800;

/// The guest kernel's linear map in the upper half (T1SZ = 25): a kernel virtual address is
/// this | the guest physical address, like Linux's PAGE_OFFSET map. The host reads PCs back
/// to the image's link addresses with it (symbols in the trap log).
pub const KERNEL_LINEAR_BASE: u64 = 0xffff_ff80_0000_0000;
/// Where the guest kernel maps its user programs (the image's `.usertext` page) in every
/// process, read-only and executable at EL0.
pub const USER_CODE_VA: u64 = 0x0020_0000;
/// TCR_EL1 when the guest is entered.
pub const TCR_EL1_AT_ENTRY: u64 = 0;

/// SCTLR_EL1 with the MMU (M), data cache (C) and instruction cache (I) on.
pub const SCTLR_MMU_ON: u64 = SCTLR_EL1_AT_ENTRY | (1 << 0) | (1 << 2) | (1 << 12);
// The MTE control bits the programs write, from their one definition (`mtex_arch::mte_bits`).
use mtex_arch::mte_bits::{sctlr, tcr};

/// SCTLR_EL1.ITFSB: exception entry synchronises asynchronous tag-check faults into
/// TFSR_EL1/TFSRE0_EL1 (Linux sets it with MTE).
pub const SCTLR_ITFSB: u64 = sctlr::ITFSB;
/// SCTLR_EL1.ATA: EL1 may use allocation tags.
pub const SCTLR_ATA: u64 = sctlr::ATA;
/// SCTLR_EL1.TCF values.
pub const SCTLR_TCF_SYNC: u64 = 1 << sctlr::TCF_SHIFT;
pub const SCTLR_TCF_ASYNC: u64 = 2 << sctlr::TCF_SHIFT;
pub const SCTLR_TCF_ASYMM: u64 = 3 << sctlr::TCF_SHIFT;

/// TCR_EL1 for the guest's identity map: T0SZ = 25 (39-bit), inner/outer write-back walks,
/// inner shareable, 4 KiB granule, TTBR1 walks disabled (EPD1), IPS = 40 bits.
pub const TCR_MMU: u64 = 25 | (1 << 8) | (1 << 10) | (3 << 12) | (1 << 23) | (2 << 32);
/// TCR_EL1 with both halves: [`TCR_MMU`]'s TTBR0 range and a 39-bit TTBR1 range like it (T1SZ
/// 25, inner/outer write-back walks, inner shareable, 4 KiB granule: TG1 = 0b10) with its
/// walks enabled (EPD1 clear); TBI0 and TBI1. The snippet and probe programs use it.
pub const TCR_BOTH_HALVES: u64 = (TCR_MMU & !(1 << 23))
    | (25 << tcr::T1SZ_SHIFT)
    | (1 << 24)
    | (1 << 26)
    | (3 << 28)
    | (2 << 30)
    | tcr::TBI0
    | tcr::TBI1;
/// TCR_EL1.TBI0/TBI1: top byte ignored, so pointers can carry tags.
pub const TCR_TBI0: u64 = tcr::TBI0;
pub const TCR_TBI1: u64 = tcr::TBI1;
/// TCR_EL1.TCMA1: tag 0xF (kernel) pointers are match-all for TTBR1 addresses.
pub const TCR_TCMA1: u64 = tcr::TCMA1;

/// MAIR_EL1 of the guest's identity map: index 0 Tagged Normal Write-Back (0xF0, the only
/// attribute under which accesses can be tag checked), 1 Normal Write-Back, 2 Device-nGnRE.
pub const MAIR_EL1: u64 = 0xf0 | (0xff << 8) | (0x04 << 16);

/// One thing a phase does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    WriteSctlr(u64),
    WriteTcr(u64),
    /// `msr tco, #imm`: never traps; the hypervisor sees it in SPSR_EL2 at the next exit.
    SetTco(bool),
    /// Tag a granule with STG, read the tag back with LDG, load through the tagged pointer.
    TaggedAccess,
}

/// A named phase and its actions, run in order.
pub struct Phase {
    pub name: &'static str,
    pub actions: &'static [Action],
}

use Action::*;

const MTE: u64 = SCTLR_MMU_ON | SCTLR_ATA;
const TBI: u64 = TCR_MMU | TCR_TBI0 | TCR_TBI1;

/// The default program. The guest builds its identity map before the first phase and turns
/// the MMU on in it. Every phase is traced: the report shows its tag-checked accesses too.
pub const DEFAULT: &[Phase] = &[
    Phase {
        name: "mmu-on",
        actions: &[WriteTcr(TCR_MMU), WriteSctlr(SCTLR_MMU_ON)],
    },
    Phase {
        name: "tbi-on",
        actions: &[WriteTcr(TBI)],
    },
    Phase {
        name: "mte-sync",
        actions: &[WriteSctlr(MTE | SCTLR_TCF_SYNC), TaggedAccess],
    },
    Phase {
        name: "mte-async",
        actions: &[WriteSctlr(MTE | SCTLR_TCF_ASYNC), TaggedAccess],
    },
    Phase {
        name: "mte-asymm",
        actions: &[WriteSctlr(MTE | SCTLR_TCF_ASYMM), TaggedAccess],
    },
    Phase {
        name: "tcma1-on",
        actions: &[WriteTcr(TBI | TCR_TCMA1)],
    },
    Phase {
        name: "tco-set",
        actions: &[SetTco(true)],
    },
    Phase {
        name: "tco-clear",
        actions: &[SetTco(false)],
    },
    Phase {
        name: "tcma1-off",
        actions: &[WriteTcr(TBI)],
    },
    Phase {
        name: "mte-off",
        actions: &[WriteSctlr(SCTLR_MMU_ON)],
    },
];

/// SCTLR_EL1.ATA0: EL0 (and unprivileged accesses) may use allocation tags.
pub const SCTLR_ATA0: u64 = sctlr::ATA0;
/// SCTLR_EL1.TCF0 = SYNC.
pub const SCTLR_TCF0_SYNC: u64 = 1 << sctlr::TCF0_SHIFT;
/// TCR_EL1.TCMA0: tag-0 pointers to the lower half are match-all.
pub const TCR_TCMA0: u64 = tcr::TCMA0;
/// SCTLR_EL1.TCSO: store-only checking at EL1 (FEAT_MTE_STORE_ONLY).
pub const SCTLR_TCSO: u64 = sctlr::TCSO;
/// TCR_EL1.MTX0: address tags without TBI0 (FEAT_MTE_NO_ADDRESS_TAGS).
pub const TCR_MTX0: u64 = tcr::MTX0;

/// The instruction sequence a traced workload repeats (guest/src/workloads.rs has the asm).
/// Pointers: `tagged` points at a granule tagged 3 through a pointer tagged 3; `tag0` is a
/// tag-0 pointer to tag-0 memory; `untagged` points into a page mapped without the Tagged
/// attribute; `user` is a tag-3 pointer into a page EL0 may access, tagged 3.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Body {
    /// `ldr x12, [tagged]`
    Load,
    /// `str x12, [tagged]`
    Store,
    /// `ldr x12, [tag0]`
    LoadTag0,
    /// `ldr x12, [sp]`: SP base, immediate offset, no writeback.
    LoadSp,
    /// `str x12, [sp, #-16]!` then `ldr x12, [sp], #16`: SP base with writeback.
    SpWriteback,
    /// `ldr x12, [sp, x16]` with x16 = 0: SP base with a register offset.
    LoadSpRegOffset,
    /// `ldp x12, x13, [tagged]`
    Pair,
    /// `ldadd x12, x13, [tagged]`: atomic read-modify-write.
    Atomic,
    /// `msr tco, #1; ldr x12, [tagged]; msr tco, #0; ldr x12, [tagged]`
    TcoToggle,
    /// `ldr x12, [untagged]`
    LoadUntaggedPage,
    /// `ldr x12, .`: literal.
    Literal,
    /// `prfm pldl1keep, [tagged]`
    Prefetch,
    /// `stg x9, [tagged]`: one tag-granule store.
    TagStore,
    /// `dc zva, zva_block` (a tag-3 pointer to a block tagged 3 throughout).
    DcZva,
    /// `ldtr x12, [user]`: unprivileged load at EL1.
    Ldtr,
    /// `ldr x12, [tagged]` then eight `add x13, x13, #1`: a stretch of inert instructions
    /// long enough for a run (`mtex.runs=1`).
    InertStretch,
    /// An LDAXR/STLXR increment loop: cannot complete under single-step (not in `TRACE`;
    /// the `exclusive-loop` program shows how the trace counter refuses it).
    ExclusiveIncrement,
}

/// What one iteration of a body does, as the workload's own arithmetic.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PerIteration {
    /// Instructions in the body.
    pub instructions: u64,
    /// Data-access instructions, by direction (an atomic counts one read and one write).
    pub reads: u64,
    pub writes: u64,
    /// Of those, the ones whose form and page allow checking (the rest are never checked).
    pub checkable_reads: u64,
    pub checkable_writes: u64,
    pub tco_writes: u64,
    pub granules_tagged: u64,
}

impl Body {
    pub const fn per_iteration(self) -> PerIteration {
        let p = PerIteration {
            instructions: 1,
            reads: 0,
            writes: 0,
            checkable_reads: 0,
            checkable_writes: 0,
            tco_writes: 0,
            granules_tagged: 0,
        };
        match self {
            Body::Load | Body::LoadTag0 | Body::LoadSpRegOffset | Body::Pair | Body::Ldtr => {
                PerIteration {
                    reads: 1,
                    checkable_reads: 1,
                    ..p
                }
            }
            Body::Store | Body::DcZva => PerIteration {
                writes: 1,
                checkable_writes: 1,
                ..p
            },
            Body::LoadSp | Body::LoadUntaggedPage | Body::Literal => PerIteration { reads: 1, ..p },
            Body::SpWriteback => PerIteration {
                instructions: 2,
                reads: 1,
                writes: 1,
                checkable_reads: 1,
                checkable_writes: 1,
                ..p
            },
            Body::Atomic => PerIteration {
                reads: 1,
                writes: 1,
                checkable_reads: 1,
                checkable_writes: 1,
                ..p
            },
            Body::TcoToggle => PerIteration {
                instructions: 4,
                reads: 2,
                checkable_reads: 1,
                tco_writes: 2,
                ..p
            },
            Body::InertStretch => PerIteration {
                instructions: 9,
                reads: 1,
                checkable_reads: 1,
                ..p
            },
            Body::ExclusiveIncrement => PerIteration {
                instructions: 4,
                reads: 1,
                writes: 1,
                checkable_reads: 1,
                checkable_writes: 1,
                ..p
            },
            Body::Prefetch => p,
            Body::TagStore => PerIteration {
                granules_tagged: 1,
                ..p
            },
        }
    }
}

/// A traced phase: the controls written before it, the body repeated `n` times, and whether
/// the workload's author expects its checkable accesses to be checked by the architecture
/// and by an implementation that elides checks when TCF is NONE.
pub struct TracedPhase {
    pub name: &'static str,
    pub sctlr: u64,
    pub tcr: u64,
    pub body: Body,
    pub n: u64,
    pub checked: bool,
    pub elided_checked: bool,
}

/// Instructions of the loop around a body (`subs`, `b.ne`) and of the phase-end call that
/// follows the loop (`movz`, `movk`, `mov`, `hvc`).
pub const LOOP_OVERHEAD: u64 = 2;
/// Iterations of the hostile programs' traced loops (`guest/src/selftest/`).
pub const HOSTILE_N: u64 = 100;
pub const END_CALL_INSTRUCTIONS: u64 = 4;

const SYNC_ALL: u64 = SCTLR_MMU_ON | SCTLR_ATA | SCTLR_ATA0 | SCTLR_TCF_SYNC | SCTLR_TCF0_SYNC;
const NONE_ALL: u64 = SCTLR_MMU_ON | SCTLR_ATA | SCTLR_ATA0;

const fn traced(
    name: &'static str,
    sctlr: u64,
    tcr: u64,
    body: Body,
    n: u64,
    checked: bool,
    elided_checked: bool,
) -> TracedPhase {
    TracedPhase {
        name,
        sctlr,
        tcr,
        body,
        n,
        checked,
        elided_checked,
    }
}

/// The trace program (`mtex.guest=trace`): every term of the predicate, with counts known in
/// advance.
pub const TRACE: &[TracedPhase] = &[
    traced("t-load-sync", SYNC_ALL, TBI, Body::Load, 100, true, true),
    traced(
        "t-load-tcf-none",
        NONE_ALL,
        TBI,
        Body::Load,
        100,
        true,
        false,
    ),
    traced(
        "t-load-no-ata",
        SCTLR_MMU_ON | SCTLR_TCF_SYNC,
        TBI,
        Body::Load,
        50,
        false,
        false,
    ),
    traced(
        "t-load-no-tbi",
        SYNC_ALL,
        TCR_MMU,
        Body::LoadTag0,
        50,
        false,
        false,
    ),
    traced(
        "t-load-tcma0",
        SYNC_ALL,
        TBI | TCR_TCMA0,
        Body::LoadTag0,
        50,
        false,
        false,
    ),
    traced("t-load-tag0", SYNC_ALL, TBI, Body::LoadTag0, 50, true, true),
    traced("t-store-sync", SYNC_ALL, TBI, Body::Store, 70, true, true),
    traced("t-sp", SYNC_ALL, TBI, Body::LoadSp, 40, true, true),
    traced(
        "t-sp-writeback",
        SYNC_ALL,
        TBI,
        Body::SpWriteback,
        40,
        true,
        true,
    ),
    traced(
        "t-sp-regoffset",
        SYNC_ALL,
        TBI,
        Body::LoadSpRegOffset,
        40,
        true,
        true,
    ),
    traced("t-pair", SYNC_ALL, TBI, Body::Pair, 30, true, true),
    traced("t-atomic", SYNC_ALL, TBI, Body::Atomic, 30, true, true),
    traced(
        "t-tco-toggle",
        SYNC_ALL,
        TBI,
        Body::TcoToggle,
        25,
        true,
        true,
    ),
    traced(
        "t-untagged-page",
        SYNC_ALL,
        TBI,
        Body::LoadUntaggedPage,
        20,
        true,
        true,
    ),
    traced("t-literal", SYNC_ALL, TBI, Body::Literal, 20, true, true),
    traced("t-prefetch", SYNC_ALL, TBI, Body::Prefetch, 20, true, true),
    traced("t-tag-store", SYNC_ALL, TBI, Body::TagStore, 20, true, true),
    traced("t-dc-zva", SYNC_ALL, TBI, Body::DcZva, 10, true, true),
    traced("t-ldtr-sync", SYNC_ALL, TBI, Body::Ldtr, 30, true, true),
    traced(
        "t-ldtr-tcf0-none",
        SCTLR_MMU_ON | SCTLR_ATA | SCTLR_ATA0 | SCTLR_TCF_SYNC,
        TBI,
        Body::Ldtr,
        30,
        true,
        false,
    ),
    traced(
        "t-ldtr-no-ata0",
        SCTLR_MMU_ON | SCTLR_ATA | SCTLR_TCF_SYNC | SCTLR_TCF0_SYNC,
        TBI,
        Body::Ldtr,
        30,
        false,
        false,
    ),
    // SCTLR_EL1.TCSO and TCR_EL1.MTX0 are RES0 on a CPU without FEAT_MTE_STORE_ONLY and
    // FEAT_MTE_NO_ADDRESS_TAGS (QEMU 10.0, where the tests run), even though QEMU reads them
    // back as written: loads stay checked, and without TBI there is still no address tag.
    traced(
        "t-load-tcso-res0",
        SYNC_ALL | SCTLR_TCSO,
        TBI,
        Body::Load,
        40,
        true,
        true,
    ),
    traced(
        "t-load-mtx-res0",
        SYNC_ALL,
        TCR_MMU | TCR_MTX0,
        Body::LoadTag0,
        40,
        false,
        false,
    ),
    traced(
        "t-inert-stretch",
        SYNC_ALL,
        TBI,
        Body::InertStretch,
        30,
        true,
        true,
    ),
];

/// An access kind of the differential test against QEMU's own tag checking.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DiffKind {
    Ldr,
    Str,
    Ldp,
    StpPreIndex,
    Ldadd,
    LdrRegOffset,
    Ld1,
    Stur,
    Ldar,
    Ldtr,
    Sttr,
    Literal,
    Prfm,
}

impl DiffKind {
    pub const ALL: [DiffKind; 13] = [
        DiffKind::Ldr,
        DiffKind::Str,
        DiffKind::Ldp,
        DiffKind::StpPreIndex,
        DiffKind::Ldadd,
        DiffKind::LdrRegOffset,
        DiffKind::Ld1,
        DiffKind::Stur,
        DiffKind::Ldar,
        DiffKind::Ldtr,
        DiffKind::Sttr,
        DiffKind::Literal,
        DiffKind::Prfm,
    ];

    /// LDTR/STTR: an unprivileged access, to the page EL0 may use.
    pub const fn unprivileged(self) -> bool {
        matches!(self, DiffKind::Ldtr | DiffKind::Sttr)
    }
}

/// One case: the controls, PSTATE.TCO, the pointer's tag and the memory's tag (always
/// different, so a checked access must fault under TCF/TCF0 = SYNC).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DiffCase {
    pub kind: DiffKind,
    pub sctlr: u64,
    pub tcr: u64,
    pub tco: bool,
    pub pointer_tag: u64,
    pub memory_tag: u64,
}

/// Control configurations (ATA, TCF, ATA0, TCF0, TBI0, TCMA0, TCO drawn per configuration).
const DIFF_CONFIGS: usize = 80;
/// Number of differential cases.
pub const DIFF_CASES: usize = DIFF_CONFIGS * DiffKind::ALL.len();

/// A fixed, well-mixed 64-bit value for `n` (splitmix64's finaliser): the cases' controls are
/// drawn from it so that checked and unchecked outcomes both occur often.
const fn mix(n: u64) -> u64 {
    let mut z = n.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Case `i` of the differential test (kinds vary fastest, so controls change every 13 cases).
/// Each enabling control is on in 3 of 4 configurations, TCO is set in 1 of 4, TCMA0 in 1 of 2.
pub fn diff_case(i: usize) -> DiffCase {
    let kind = DiffKind::ALL[i % DiffKind::ALL.len()];
    let cfg = (i / DiffKind::ALL.len()) as u64;
    let r = mix(cfg);
    let likely = |n: u32| (r >> (2 * n)) & 3 != 0; // on 3 times in 4
    let mut sctlr = SCTLR_MMU_ON;
    if likely(0) {
        sctlr |= SCTLR_ATA;
    }
    if likely(1) {
        sctlr |= SCTLR_TCF_SYNC;
    }
    if likely(2) {
        sctlr |= SCTLR_ATA0;
    }
    if likely(3) {
        sctlr |= SCTLR_TCF0_SYNC;
    }
    let tbi0 = likely(4);
    let tcma0 = (r >> 10) & 1 == 1;
    let tco = (r >> 11) & 3 == 0;
    let mut tcr = TCR_MMU | TCR_TBI1;
    if tbi0 {
        tcr |= TCR_TBI0;
    }
    if tcma0 {
        tcr |= TCR_TCMA0;
    }
    // Without TBI a tagged pointer does not translate: use tag 0 then. With TCMA0, every
    // other case uses tag 0 to exercise match-all.
    let pointer_tag = if !tbi0 || (tcma0 && i.is_multiple_of(2)) {
        0
    } else {
        ((i * 7) % 15 + 1) as u64
    };
    let memory_tag = (pointer_tag + 1 + (i % 14) as u64) % 16;
    DiffCase {
        kind,
        sctlr,
        tcr,
        tco,
        pointer_tag,
        memory_tag,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn differential_cases_always_mismatch_tags_and_cover_every_control() {
        const { assert!(DIFF_CASES >= 1000) };
        let mut seen_tags = [[false; 16]; 16];
        for i in 0..DIFF_CASES {
            let c = diff_case(i);
            assert_ne!(c.pointer_tag, c.memory_tag, "case {i}");
            assert!(c.pointer_tag < 16 && c.memory_tag < 16);
            if c.tcr & TCR_TBI0 == 0 {
                assert_eq!(c.pointer_tag, 0, "untagged pointers without TBI");
            }
            seen_tags[c.pointer_tag as usize][c.memory_tag as usize] = true;
        }
        let pairs = seen_tags.iter().flatten().filter(|s| **s).count();
        assert!(pairs > 100, "only {pairs} tag pairs");
        for bit in [SCTLR_ATA, SCTLR_TCF_SYNC, SCTLR_ATA0, SCTLR_TCF0_SYNC] {
            assert!((0..DIFF_CASES).any(|i| diff_case(i).sctlr & bit != 0));
            assert!((0..DIFF_CASES).any(|i| diff_case(i).sctlr & bit == 0));
        }
        for bit in [TCR_TBI0, TCR_TCMA0] {
            assert!((0..DIFF_CASES).any(|i| diff_case(i).tcr & bit != 0));
            assert!((0..DIFF_CASES).any(|i| diff_case(i).tcr & bit == 0));
        }
        assert!((0..DIFF_CASES).any(|i| diff_case(i).tco));
        assert!((0..DIFF_CASES).any(|i| !diff_case(i).tco));
    }
}
