//! Every MTE control bit and field, defined once, for the predicate, the trap decoder, the
//! guest programs and the guest kernel alike.
//!
//! The positions come from arm-sysregs, which is generated from Arm's machine-readable
//! register descriptions (AARCHMRS); nothing here is a hand-typed shift.

use arm_sysregs::el1::registers::{GcrEl1, ParEl1, SctlrEl1, TcrEl1, TfsrEl1};

/// SCTLR_EL1.
pub mod sctlr {
    use super::SctlrEl1;
    /// ATA: allocation tag access at EL1.
    pub const ATA: u64 = SctlrEl1::ATA.bits();
    /// ATA0: allocation tag access at EL0 (and for unprivileged accesses).
    pub const ATA0: u64 = SctlrEl1::ATA0.bits();
    /// ITFSB: exception entry synchronises TFSR_EL1/TFSRE0_EL1.
    pub const ITFSB: u64 = SctlrEl1::ITFSB.bits();
    /// TCSO/TCSO0: store-only tag checking at EL1/EL0 (FEAT_MTE_STORE_ONLY).
    pub const TCSO: u64 = SctlrEl1::TCSO.bits();
    pub const TCSO0: u64 = SctlrEl1::TCSO0.bits();
    /// TCF/TCF0: the tag-check-fault mode at EL1/EL0 (2 bits each).
    pub const TCF_SHIFT: u32 = SctlrEl1::TCF_SHIFT;
    pub const TCF0_SHIFT: u32 = SctlrEl1::TCF0_SHIFT;
    pub const TCF_MASK: u64 = SctlrEl1::TCF_MASK;
    pub const TCF0_MASK: u64 = SctlrEl1::TCF0_MASK;
    /// C: data accesses cacheable; with C = 0 Normal memory is Non-cacheable at stage 1, and
    /// whether Tagged memory stays Tagged is CONSTRAINED UNPREDICTABLE.
    pub const C: u64 = SctlrEl1::C.bits();
}

/// PAR_EL1 after a successful AT: what decides whether the memory is Tagged.
pub mod par {
    use super::ParEl1;
    /// ATTR: the stage-1 memory attribute (MAIR_EL1 encoding; 0xF0 is Tagged).
    pub const ATTR_SHIFT: u32 = ParEl1::ATTR_SHIFT;
    /// SH: the shareability (0b00 Non-shareable), which decides whether Tagged memory
    /// mapped Non-shareable is Tagged (IMPLEMENTATION DEFINED).
    pub const SH_SHIFT: u32 = ParEl1::SH_SHIFT;
    pub const SH_MASK: u64 = ParEl1::SH_MASK;
    pub const SH_NON_SHAREABLE: u64 = 0b00;
}

/// TCR_EL1.
pub mod tcr {
    use super::TcrEl1;
    /// TBI0/TBI1: top-byte ignore for the lower/upper half.
    pub const TBI0: u64 = TcrEl1::TBI0.bits();
    pub const TBI1: u64 = TcrEl1::TBI1.bits();
    /// TBID0/TBID1: top-byte ignore for data accesses only.
    pub const TBID0: u64 = TcrEl1::TBID0.bits();
    pub const TBID1: u64 = TcrEl1::TBID1.bits();
    /// TCMA0/TCMA1: tag 0 (lower half) / tag 0xF (upper half) pointers are match-all.
    pub const TCMA0: u64 = TcrEl1::TCMA0.bits();
    pub const TCMA1: u64 = TcrEl1::TCMA1.bits();
    /// MTX0/MTX1: address tags without top-byte ignore (FEAT_MTE_NO_ADDRESS_TAGS).
    pub const MTX0: u64 = TcrEl1::MTX0.bits();
    pub const MTX1: u64 = TcrEl1::MTX1.bits();
    /// T0SZ/T1SZ: the size offsets of the two halves.
    pub const T0SZ_SHIFT: u32 = TcrEl1::T0SZ_SHIFT;
    pub const T1SZ_SHIFT: u32 = TcrEl1::T1SZ_SHIFT;
}

/// GCR_EL1: which tags IRG may choose.
pub mod gcr {
    use super::GcrEl1;
    /// RRND: random tag generation is IMPLEMENTATION DEFINED (not the RGSR_EL1 seed).
    pub const RRND: u64 = GcrEl1::RRND.bits();
    /// Exclude: tags IRG never generates, one bit per tag.
    pub const EXCLUDE_MASK: u64 = GcrEl1::EXCLUDE_MASK << GcrEl1::EXCLUDE_SHIFT;
}

/// TFSR_EL1 / TFSRE0_EL1: asynchronous tag-check faults seen.
pub mod tfsr {
    use super::TfsrEl1;
    /// TF0/TF1: a fault on the lower/upper half.
    pub const TF0: u64 = TfsrEl1::TF0.bits();
    pub const TF1: u64 = TfsrEl1::TF1.bits();
}

/// A pointer's logical tag is its bits 59:56 (Arm ARM D10.2).
pub const TAG_SHIFT: u32 = 56;
/// Bits 59:56.
pub const TAG_MASK: u64 = 0xf << TAG_SHIFT;
/// The top byte, which TBI ignores in translation (bits 63:56).
pub const TOP_BYTE_MASK: u64 = 0xff << TAG_SHIFT;

/// The pointer `addr` with logical tag `tag`.
pub const fn with_tag(addr: u64, tag: u64) -> u64 {
    (addr & !TAG_MASK) | ((tag & 0xf) << TAG_SHIFT)
}

/// The logical tag of `addr`.
pub const fn tag_of(addr: u64) -> u64 {
    (addr & TAG_MASK) >> TAG_SHIFT
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_are_the_arm_arms() {
        // Arm ARM D24.2: SCTLR_EL1.ATA is bit 43, TCF 41:40, TCF0 39:38; TCR_EL1.TCMA1 58.
        assert_eq!(sctlr::ATA, 1 << 43);
        assert_eq!((sctlr::TCF_SHIFT, sctlr::TCF0_SHIFT), (40, 38));
        assert_eq!(tcr::TCMA1, 1 << 58);
        assert_eq!(tcr::TBI0 | tcr::TBI1, 3 << 37);
        assert_eq!(gcr::EXCLUDE_MASK, 0xffff);
        // SCTLR_EL1.C is bit 2; PAR_EL1.SH 8:7 and ATTR 63:56.
        assert_eq!(sctlr::C, 1 << 2);
        assert_eq!((par::SH_SHIFT, par::SH_MASK, par::ATTR_SHIFT), (7, 3, 56));
        assert_eq!(tag_of(with_tag(0x4100_0000, 0x13)), 3);
    }
}
