//! The default guest program as data: the phases it opens and the MTE control writes it makes
//! in each. The guest executes this table; the host uses the same table to predict, write by
//! write, the trap log a correct hypervisor must report (old values included, since the
//! hypervisor enters the guest with the `*_AT_ENTRY` values).

/// SCTLR_EL1 when the guest is entered: RES1 bits only, MMU and caches off (booting.rst).
pub const SCTLR_EL1_AT_ENTRY: u64 = 0x30d0_0800;
/// TCR_EL1 when the guest is entered.
pub const TCR_EL1_AT_ENTRY: u64 = 0;

/// SCTLR_EL1 with the MMU (M), data cache (C) and instruction cache (I) on.
pub const SCTLR_MMU_ON: u64 = SCTLR_EL1_AT_ENTRY | (1 << 0) | (1 << 2) | (1 << 12);
/// SCTLR_EL1.ATA: EL1 may use allocation tags.
pub const SCTLR_ATA: u64 = 1 << 43;
/// SCTLR_EL1.TCF values (bits 41:40).
pub const SCTLR_TCF_SYNC: u64 = 1 << 40;
pub const SCTLR_TCF_ASYNC: u64 = 2 << 40;
pub const SCTLR_TCF_ASYMM: u64 = 3 << 40;

/// TCR_EL1 for the guest's identity map: T0SZ = 25 (39-bit), inner/outer write-back walks,
/// inner shareable, 4 KiB granule, TTBR1 walks disabled (EPD1), IPS = 40 bits.
pub const TCR_MMU: u64 = 25 | (1 << 8) | (1 << 10) | (3 << 12) | (1 << 23) | (2 << 32);
/// TCR_EL1.TBI0/TBI1: top byte ignored, so pointers can carry tags.
pub const TCR_TBI0: u64 = 1 << 37;
pub const TCR_TBI1: u64 = 1 << 38;
/// TCR_EL1.TCMA1: tag 0xF (kernel) pointers are match-all for TTBR1 addresses.
pub const TCR_TCMA1: u64 = 1 << 58;

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
/// the MMU on in it.
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
