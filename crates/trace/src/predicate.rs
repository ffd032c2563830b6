//! `AArch64.AccessIsTagChecked` (Arm ARM J1, D10.4.1 "Tag Checked accesses") for the EL1&0
//! regime under a hypervisor, as a pure function of the controls and the access. TCF is not
//! a term: it only decides what a failed check does. Implementations that skip checks when
//! TCF is NONE (Arm cores, QEMU) are modelled by [`elides`].

pub use mtex_arch::MteFeatures;

/// The controls that decide tag checking for EL1 and EL0.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Controls {
    pub sctlr_el1: u64,
    pub tcr_el1: u64,
    /// HCR_EL2.ATA (and SCR_EL3.ATA where EL3 exists): allocation tag access for EL1&0.
    pub hcr_ata: bool,
    /// What the CPU implements: a control bit of a feature it lacks is RES0 and no term.
    pub features: MteFeatures,
}

/// One data access, with what the instruction form and the page say about it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Access {
    /// The EL whose controls apply: 0 for EL0 code and for unprivileged accesses (LDTR/STTR)
    /// made at EL1, else 1.
    pub el: u8,
    /// PSTATE.TCO when the instruction executes.
    pub tco: bool,
    /// The virtual address, tag included.
    pub va: u64,
    pub write: bool,
    /// The instruction form can be checked: not SP-based, not a literal, not a prefetch,
    /// not a tag load/store, not a cache operation other than DC ZVA.
    pub form_checkable: bool,
    /// The page is Tagged: stage-1 attribute 0xF0 and Normal Write-Back at stage 2.
    pub tagged_page: bool,
}

const fn bit(v: u64, n: u32) -> bool {
    (v >> n) & 1 != 0
}

impl Controls {
    /// TCR_EL1.TBI0/TBI1 for the half `va` is in (bit 55 selects TTBR1).
    pub fn tbi(&self, va: u64) -> bool {
        bit(self.tcr_el1, if bit(va, 55) { 38 } else { 37 })
    }

    /// TCR_EL1.MTX0/MTX1 (FEAT_MTE_NO_ADDRESS_TAGS) for the half `va` is in: logical address
    /// tagging even without top-byte-ignore.
    pub fn mtx(&self, va: u64) -> bool {
        self.features.no_address_tags && bit(self.tcr_el1, if bit(va, 55) { 61 } else { 60 })
    }

    /// TCR_EL1.TCMA0/TCMA1 for the half `va` is in.
    pub fn tcma(&self, va: u64) -> bool {
        bit(self.tcr_el1, if bit(va, 55) { 58 } else { 57 })
    }

    /// SCTLR_EL1.ATA (EL1) or ATA0 (EL0), and HCR_EL2.ATA.
    pub fn allocation_tag_access(&self, el: u8) -> bool {
        self.hcr_ata && bit(self.sctlr_el1, if el == 0 { 42 } else { 43 })
    }

    /// SCTLR_EL1.TCSO (EL1) or TCSO0 (EL0): FEAT_MTE_STORE_ONLY, loads are not checked.
    pub fn store_only(&self, el: u8) -> bool {
        self.features.store_only && bit(self.sctlr_el1, if el == 0 { 58 } else { 59 })
    }

    /// SCTLR_EL1.TCF (EL1) or TCF0 (EL0): 0 NONE, 1 SYNC, 2 ASYNC, 3 ASYMM.
    pub fn tcf(&self, el: u8) -> u64 {
        (self.sctlr_el1 >> if el == 0 { 38 } else { 40 }) & 3
    }
}

/// True when the architecture makes the access Tag Checked (what AmpereOne does, per the
/// seeds: whether an access is checked does not depend on TCF).
pub fn is_tag_checked(c: &Controls, a: &Access) -> bool {
    if !a.form_checkable || !a.tagged_page {
        return false;
    }
    // Without top-byte-ignore (or MTX) there is no address tag to check.
    if !c.tbi(a.va) && !c.mtx(a.va) {
        return false;
    }
    if !c.allocation_tag_access(a.el) || a.tco {
        return false;
    }
    // Match-all: TCMA set and address bits 59:55 all zeros or all ones.
    let b59_55 = (a.va >> 55) & 0x1f;
    if c.tcma(a.va) && (b59_55 == 0 || b59_55 == 0x1f) {
        return false;
    }
    if c.store_only(a.el) && !a.write {
        return false;
    }
    true
}

/// True when an implementation that skips checks while TCF/TCF0 is NONE checks the access
/// (Arm's cores and QEMU).
pub fn elides(c: &Controls, a: &Access) -> bool {
    is_tag_checked(c, a) && c.tcf(a.el) != 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const ATA: u64 = 1 << 43;
    const ATA0: u64 = 1 << 42;
    const TBI0: u64 = 1 << 37;
    const TBI1: u64 = 1 << 38;
    const TCMA0: u64 = 1 << 57;
    const TCMA1: u64 = 1 << 58;
    const SYNC: u64 = 1 << 40;

    fn on() -> Controls {
        Controls {
            sctlr_el1: ATA | ATA0 | SYNC,
            tcr_el1: TBI0 | TBI1,
            hcr_ata: true,
            features: MteFeatures::ALL,
        }
    }

    fn access(va: u64) -> Access {
        Access {
            el: 1,
            tco: false,
            va,
            write: false,
            form_checkable: true,
            tagged_page: true,
        }
    }

    #[test]
    fn each_term_can_turn_checking_off() {
        let va = 0x0300_0000_4100_0000; // tag 3, lower half
        let c = on();
        assert!(is_tag_checked(&c, &access(va)));
        let cases: [(&str, Controls, Access); 8] = [
            (
                "form",
                c,
                Access {
                    form_checkable: false,
                    ..access(va)
                },
            ),
            (
                "page",
                c,
                Access {
                    tagged_page: false,
                    ..access(va)
                },
            ),
            ("tbi0", Controls { tcr_el1: TBI1, ..c }, access(va)),
            (
                "ata",
                Controls {
                    sctlr_el1: ATA0 | SYNC,
                    ..c
                },
                access(va),
            ),
            (
                "hcr.ata",
                Controls {
                    hcr_ata: false,
                    ..c
                },
                access(va),
            ),
            (
                "tco",
                c,
                Access {
                    tco: true,
                    ..access(va)
                },
            ),
            (
                "ata0 for el0",
                Controls {
                    sctlr_el1: ATA | SYNC,
                    ..c
                },
                Access {
                    el: 0,
                    ..access(va)
                },
            ),
            (
                "store-only read",
                Controls {
                    sctlr_el1: c.sctlr_el1 | 1 << 59,
                    ..c
                },
                access(va),
            ),
        ];
        for (what, c, a) in cases {
            assert!(
                !is_tag_checked(&c, &a),
                "{what} should make the access Unchecked"
            );
        }
        // Store-only still checks writes.
        let so = Controls {
            sctlr_el1: c.sctlr_el1 | 1 << 59,
            ..c
        };
        assert!(is_tag_checked(
            &so,
            &Access {
                write: true,
                ..access(va)
            }
        ));
    }

    #[test]
    fn tcma_needs_bits_59_55_uniform() {
        let c = Controls {
            tcr_el1: TBI0 | TBI1 | TCMA0 | TCMA1,
            ..on()
        };
        assert!(!is_tag_checked(&c, &access(0x0000_0000_4100_0000))); // tag 0, lower half
        assert!(!is_tag_checked(&c, &access(0xff80_0000_0000_1000))); // tag 0xF, upper half
        assert!(is_tag_checked(&c, &access(0x0300_0000_4100_0000))); // tag 3
        assert!(is_tag_checked(&c, &access(0x0f00_0000_0000_1000))); // tag 0xF, bit 55 = 0
        // TCMA1 alone leaves lower-half tag-0 pointers checked.
        let c1 = Controls {
            tcr_el1: TBI0 | TBI1 | TCMA1,
            ..on()
        };
        assert!(is_tag_checked(&c1, &access(0x0000_0000_4100_0000)));
        assert!(!is_tag_checked(&c1, &access(0xff80_0000_0000_1000)));
    }

    #[test]
    fn tcf_is_not_a_term_but_elision_uses_it() {
        let none = Controls {
            sctlr_el1: ATA | ATA0,
            ..on()
        };
        let a = access(0x0300_0000_4100_0000);
        assert!(is_tag_checked(&none, &a));
        assert!(!elides(&none, &a));
        for tcf in 1..4u64 {
            let c = Controls {
                sctlr_el1: ATA | ATA0 | tcf << 40,
                ..on()
            };
            assert!(elides(&c, &a));
        }
        // EL0 accesses follow TCF0.
        let el0 = Access { el: 0, ..a };
        assert!(!elides(&on(), &el0));
        assert!(elides(
            &Controls {
                sctlr_el1: ATA | ATA0 | 1 << 38,
                ..on()
            },
            &el0
        ));
    }

    proptest! {
        /// The elided view never counts more than the architecture, and an access is checked
        /// only when every enabling term holds.
        #[test]
        fn views_are_ordered(sctlr: u64, tcr: u64, hcr_ata: bool, va: u64, el in 0u8..2,
                             tco: bool, write: bool, form: bool, page: bool) {
            let c = Controls { sctlr_el1: sctlr, tcr_el1: tcr, hcr_ata, features: MteFeatures::ALL };
            let a = Access { el, tco, va, write, form_checkable: form, tagged_page: page };
            let checked = is_tag_checked(&c, &a);
            prop_assert!(!elides(&c, &a) || checked);
            if checked {
                prop_assert!(form && page && hcr_ata && !tco && (c.tbi(va) || c.mtx(va)));
                prop_assert!(c.allocation_tag_access(el));
            }
        }
    }

    #[test]
    fn terms_of_absent_features_change_nothing() {
        // QEMU 10.0 keeps SCTLR_EL1.TCSO and TCR_EL1.MTX0 as written although it has neither
        // FEAT_MTE_STORE_ONLY nor FEAT_MTE_NO_ADDRESS_TAGS: they must not be terms.
        let bare = Controls {
            features: MteFeatures::default(),
            ..on()
        };
        let tcso = Controls {
            sctlr_el1: bare.sctlr_el1 | 1 << 59,
            ..bare
        };
        let va = 0x0300_0000_4100_0000;
        assert!(is_tag_checked(&tcso, &access(va)), "a load under RES0 TCSO");
        assert!(!is_tag_checked(
            &Controls {
                features: MteFeatures::ALL,
                ..tcso
            },
            &access(va)
        ));
        let mtx_no_tbi = Controls {
            tcr_el1: 1 << 60,
            ..bare
        };
        assert!(
            !is_tag_checked(&mtx_no_tbi, &access(va)),
            "RES0 MTX0 without TBI0"
        );
        assert!(is_tag_checked(
            &Controls {
                features: MteFeatures::ALL,
                ..mtx_no_tbi
            },
            &access(va)
        ));
    }
}
