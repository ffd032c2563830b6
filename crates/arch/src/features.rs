//! MTE features the CPU implements, from its ID registers, for the predicate's
//! feature-dependent terms.
//!
//! The Arm ARM pseudocode guards every such term with `IsFeatureImplemented`: SCTLR_EL1.TCSO
//! and TCR_EL1.MTX are RES0 without their features, and RES0 bits may be stateful (QEMU
//! 10.0 reads them back as written although it has neither feature). A term the CPU does not
//! implement must not change a count.

/// The MTE features that change whether an access is Tag Checked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MteFeatures {
    /// FEAT_MTE_STORE_ONLY (ID_AA64PFR2_EL1.MTESTOREONLY, bits 7:4): SCTLR_EL1.TCSO/TCSO0.
    pub store_only: bool,
    /// FEAT_MTE_NO_ADDRESS_TAGS (ID_AA64PFR1_EL1.MTEX, bits 55:52): TCR_EL1.MTX0/MTX1.
    pub no_address_tags: bool,
}

impl MteFeatures {
    /// From ID_AA64PFR1_EL1 and ID_AA64PFR2_EL1 as read at boot.
    pub const fn from_id_regs(pfr1: u64, pfr2: u64) -> Self {
        Self {
            store_only: (pfr2 >> 4) & 0xf != 0,
            no_address_tags: (pfr1 >> 52) & 0xf != 0,
        }
    }

    /// Every feature: for tests of the terms themselves.
    pub const ALL: Self = Self {
        store_only: true,
        no_address_tags: true,
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_id_fields() {
        // QEMU 10.0 -cpu max: ID_AA64PFR2_EL1 = 0; PFR1.MTE = 3 (bits 11:8), MTEX = 0.
        assert_eq!(
            MteFeatures::from_id_regs(0x3 << 8, 0),
            MteFeatures::default()
        );
        let f = MteFeatures::from_id_regs(1 << 52, 1 << 4);
        assert!(f.store_only && f.no_address_tags);
        // MTEPERM (PFR2 bits 3:0) is not store-only checking.
        assert!(!MteFeatures::from_id_regs(0, 1).store_only);
    }
}
