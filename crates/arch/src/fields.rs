//! The MTE control fields of SCTLR_EL1 and TCR_EL1, decoded by name so a report can say
//! "TCF: NONE -> SYNC" instead of printing two 64-bit numbers.
//!
//! Bit positions: `crate::mte_bits` (Arm ARM D24.2.166 SCTLR_EL1 and D24.2.181 TCR_EL1).

use crate::SysReg;
use crate::mte_bits::{sctlr, tcr};

/// One named field of a register.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MteField {
    /// The field's architectural name.
    pub name: &'static str,
    /// Lowest bit.
    pub lsb: u8,
    /// Width in bits.
    pub width: u8,
    /// How its values read.
    pub kind: FieldKind,
}

/// How a field's value is shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldKind {
    /// A single enable bit.
    Flag,
    /// A tag-check-fault mode (SCTLR_ELx.TCF/TCF0): NONE, SYNC, ASYNC, ASYMM.
    TagCheckFault,
}

/// A one-bit field, given by its mask (`mte_bits`).
const fn flag(name: &'static str, mask: u64) -> MteField {
    MteField {
        name,
        lsb: mask.trailing_zeros() as u8,
        width: 1,
        kind: FieldKind::Flag,
    }
}

const fn tcf(name: &'static str, shift: u32) -> MteField {
    MteField {
        name,
        lsb: shift as u8,
        width: 2,
        kind: FieldKind::TagCheckFault,
    }
}

/// SCTLR_EL1 MTE controls.
pub const SCTLR_EL1_MTE: [MteField; 7] = [
    flag("ATA", sctlr::ATA),
    flag("ATA0", sctlr::ATA0),
    tcf("TCF", sctlr::TCF_SHIFT),
    tcf("TCF0", sctlr::TCF0_SHIFT),
    flag("ITFSB", sctlr::ITFSB),
    flag("TCSO", sctlr::TCSO),
    flag("TCSO0", sctlr::TCSO0),
];

/// TCR_EL1 MTE-relevant controls: top-byte ignore, its data-only variant, the match-all
/// tag controls and the no-address-tags controls.
pub const TCR_EL1_MTE: [MteField; 8] = [
    flag("TBI0", tcr::TBI0),
    flag("TBI1", tcr::TBI1),
    flag("TBID0", tcr::TBID0),
    flag("TBID1", tcr::TBID1),
    flag("TCMA0", tcr::TCMA0),
    flag("TCMA1", tcr::TCMA1),
    flag("MTX0", tcr::MTX0),
    flag("MTX1", tcr::MTX1),
];

impl MteField {
    /// The field's value in a register value.
    pub const fn extract(&self, reg: u64) -> u64 {
        (reg >> self.lsb) & ((1 << self.width) - 1)
    }

    /// The name of a value of this field.
    pub const fn value_name(&self, value: u64) -> &'static str {
        match self.kind {
            FieldKind::Flag => {
                if value != 0 {
                    "1"
                } else {
                    "0"
                }
            }
            FieldKind::TagCheckFault => tcf_name(value),
        }
    }
}

/// Name of a TCF/TCF0 value (Arm ARM D10.6, "Tag Check Fault handling").
pub const fn tcf_name(value: u64) -> &'static str {
    match value & 3 {
        0 => "NONE",
        1 => "SYNC",
        2 => "ASYNC",
        _ => "ASYMM",
    }
}

/// The MTE fields of a register (empty for registers without any).
pub const fn mte_fields(reg: SysReg) -> &'static [MteField] {
    match reg {
        SysReg::SctlrEl1 => &SCTLR_EL1_MTE,
        SysReg::TcrEl1 => &TCR_EL1_MTE,
        _ => &[],
    }
}

/// One field whose value differs between two register values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FieldChange {
    pub field: &'static MteField,
    pub old: u64,
    pub new: u64,
}

/// The MTE fields that differ between `old` and `new`, in table order.
pub fn changed_fields(reg: SysReg, old: u64, new: u64) -> impl Iterator<Item = FieldChange> {
    mte_fields(reg).iter().filter_map(move |f| {
        let (o, n) = (f.extract(old), f.extract(new));
        (o != n).then_some(FieldChange {
            field: f,
            old: o,
            new: n,
        })
    })
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use proptest::prelude::*;
    use std::vec::Vec;

    fn names(reg: SysReg, old: u64, new: u64) -> Vec<(&'static str, &'static str, &'static str)> {
        changed_fields(reg, old, new)
            .map(|c| {
                (
                    c.field.name,
                    c.field.value_name(c.old),
                    c.field.value_name(c.new),
                )
            })
            .collect()
    }

    #[test]
    fn sctlr_tcf_sync_and_ata() {
        let old = 0x30d0_0980; // an ordinary reset-like SCTLR_EL1, no MTE bits
        let new = old | (1 << 43) | (1 << 40); // ATA=1, TCF=SYNC
        assert_eq!(
            names(SysReg::SctlrEl1, old, new),
            [("ATA", "0", "1"), ("TCF", "NONE", "SYNC")]
        );
    }

    #[test]
    fn sctlr_tcf_modes_and_el0_fields() {
        let old = 1 << 40; // TCF=SYNC
        let new = (3 << 40) | (2 << 38) | (1 << 58) | (1 << 37);
        assert_eq!(
            names(SysReg::SctlrEl1, old, new),
            [
                ("TCF", "SYNC", "ASYMM"),
                ("TCF0", "NONE", "ASYNC"),
                ("ITFSB", "0", "1"),
                ("TCSO0", "0", "1")
            ]
        );
    }

    #[test]
    fn tcr_tcma1_and_tbi() {
        let new = (1 << 58) | (1 << 37) | (1 << 38);
        assert_eq!(
            names(SysReg::TcrEl1, 0, new),
            [("TBI0", "0", "1"), ("TBI1", "0", "1"), ("TCMA1", "0", "1")]
        );
    }

    #[test]
    fn other_registers_have_no_mte_fields() {
        assert!(names(SysReg::MairEl1, 0, u64::MAX).is_empty());
    }

    proptest! {
        /// A field is reported changed exactly when its bits differ, and non-MTE bits never
        /// produce a change.
        #[test]
        fn changes_match_bit_differences(old: u64, new: u64) {
            for reg in [SysReg::SctlrEl1, SysReg::TcrEl1] {
                let mask: u64 = mte_fields(reg).iter()
                    .map(|f| ((1u64 << f.width) - 1) << f.lsb).fold(0, |a, b| a | b);
                let changed = changed_fields(reg, old, new).count();
                prop_assert_eq!(changed == 0, (old ^ new) & mask == 0);
                prop_assert_eq!(changed_fields(reg, old, old ^ (new & !mask)).count(), 0);
            }
        }
    }
}
