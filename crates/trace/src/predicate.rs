//! `AArch64.AccessIsTagChecked` (Arm ARM J1, D10.4.1 "Tag Checked accesses") for the EL1&0
//! regime under a hypervisor, as a pure function of the controls and the access. TCF is not
//! a term: it only decides what a failed check does. Implementations that skip checks when
//! TCF is NONE (Arm cores, QEMU) are modelled by [`elides`].

use crate::decode::DataKey;
pub use mtex_arch::MteFeatures;
use mtex_arch::mte_bits::{sctlr, tcr};

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
        self.tcr_el1 & if bit(va, 55) { tcr::TBI1 } else { tcr::TBI0 } != 0
    }

    /// TCR_EL1.MTX0/MTX1 (FEAT_MTE_NO_ADDRESS_TAGS) for the half `va` is in: logical address
    /// tagging even without top-byte-ignore.
    pub fn mtx(&self, va: u64) -> bool {
        self.features.no_address_tags
            && self.tcr_el1 & if bit(va, 55) { tcr::MTX1 } else { tcr::MTX0 } != 0
    }

    /// TCR_EL1.TCMA0/TCMA1 for the half `va` is in.
    pub fn tcma(&self, va: u64) -> bool {
        self.tcr_el1 & if bit(va, 55) { tcr::TCMA1 } else { tcr::TCMA0 } != 0
    }

    /// SCTLR_EL1.ATA (EL1) or ATA0 (EL0), and HCR_EL2.ATA.
    pub fn allocation_tag_access(&self, el: u8) -> bool {
        self.hcr_ata && self.sctlr_el1 & if el == 0 { sctlr::ATA0 } else { sctlr::ATA } != 0
    }

    /// SCTLR_EL1.TCSO (EL1) or TCSO0 (EL0): FEAT_MTE_STORE_ONLY, loads are not checked.
    pub fn store_only(&self, el: u8) -> bool {
        self.features.store_only
            && self.sctlr_el1 & if el == 0 { sctlr::TCSO0 } else { sctlr::TCSO } != 0
    }

    /// SCTLR_EL1.TCF (EL1) or TCF0 (EL0): 0 NONE, 1 SYNC, 2 ASYNC, 3 ASYMM.
    pub fn tcf(&self, el: u8) -> u64 {
        let shift = if el == 0 {
            sctlr::TCF0_SHIFT
        } else {
            sctlr::TCF_SHIFT
        };
        (self.sctlr_el1 >> shift) & sctlr::TCF_MASK
    }

    /// SCTLR_EL1.EnDA / EnDB: authentication with the data key is enabled (for EL0 and EL1
    /// alike in the EL1&0 regime; HCR_EL2.API is set, so it does not trap).
    pub fn data_key_enabled(&self, key: DataKey) -> bool {
        bit(self.sctlr_el1, if key == DataKey::A { 27 } else { 13 })
    }

    /// The lowest bit of the pointer authentication code for the half `ptr` is in:
    /// 64 - TCR_EL1.T0SZ/T1SZ (`CalculateBottomPACBit`, `AArch64.PACEffectiveTxSZ`). TxSZ
    /// is clamped to what the granule allows on the largest implementation: 12 at least with
    /// 64KB pages or TCR_EL1.DS (FEAT_LVA, FEAT_LPA2), else 16; 48 at most (47 with 64KB
    /// pages; FEAT_TTST). A value beyond what this CPU implements is CONSTRAINED
    /// UNPREDICTABLE anyway: a guest that writes one is taken to have the feature.
    pub fn bottom_pac_bit(&self, ptr: u64) -> u32 {
        let upper = bit(ptr, 55);
        let tcr = self.tcr_el1;
        let (txsz, tg) = if upper {
            ((tcr >> 16) & 0x3f, (tcr >> 30) & 3)
        } else {
            ((tcr & 0x3f), (tcr >> 14) & 3)
        };
        // TG0: 0b01 is 64KB; TG1: 0b11 is 64KB.
        let granule_64k = if upper { tg == 0b11 } else { tg == 0b01 };
        let min = if granule_64k || bit(tcr, 59) { 12 } else { 16 };
        let max = if granule_64k { 47 } else { 48 };
        64 - txsz.clamp(min, max) as u32
    }

    /// The address LDRAA/LDRAB access through the base `ptr` signed with `key` (and a zero
    /// modifier), before the offset is added: what `AArch64.Auth` returns when the code
    /// matches (`AuthDA`/`AuthDB`). The code field, bits 54 down to the bottom PAC bit, and
    /// also 63:56 without TBI (63:60 with MTX but not TBI), is replaced by copies of bit 55;
    /// the top byte (the address tag) is kept under TBI. With the key disabled
    /// (SCTLR_EL1.EnDA/EnDB clear) the pointer is used as it is.
    ///
    /// Assumed: the authentication passes. When it fails, the architecture either takes a
    /// PAC fail exception (FEAT_FPACCOMBINE) or corrupts the extension bits so that the
    /// access takes a translation fault (without FEAT_PAuth2, an error code in bits 54:53 or
    /// 62:61; with it, the code XORed in): either way the load makes no access and does not
    /// complete, so the step engine never retires what was judged here.
    pub fn authenticated(&self, ptr: u64, key: DataKey) -> u64 {
        if !self.data_key_enabled(key) {
            return ptr;
        }
        let low = (1u64 << self.bottom_pac_bit(ptr)) - 1;
        let kept = if self.tbi(ptr) {
            0xff00_0000_0000_0000 | low
        } else if self.mtx(ptr) {
            0x0f00_0000_0000_0000 | low
        } else {
            low
        };
        let extension = if bit(ptr, 55) { u64::MAX } else { 0 };
        (ptr & kept) | (extension & !kept)
    }
}

/// True when the architecture makes the access Tag Checked (what AmpereOne does, as the arm64
/// MTE patch threads report: whether an access is checked does not depend on TCF).
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

/// True when memory that stage 1 maps Tagged (PAR_EL1 `par` of a successful AT, its ATTR
/// 0xF0) is Tagged only by an IMPLEMENTATION DEFINED or CONSTRAINED UNPREDICTABLE choice
/// (Arm ARM D10.3, `AArch64.S1Translate`): it is mapped Non-shareable, or SCTLR_EL1.C is 0
/// (which makes it Non-cacheable). A CPU may treat such memory as Untagged; the
/// architectural view counts it Tagged, as QEMU does, and the report says how many accesses
/// rest on that choice.
pub fn tagged_is_impdef(c: &Controls, par: u64) -> bool {
    use mtex_arch::mte_bits::par;
    let sh = (par >> par::SH_SHIFT) & par::SH_MASK;
    sh == par::SH_NON_SHAREABLE || c.sctlr_el1 & sctlr::C == 0
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

    use mtex_arch::mte_bits::sctlr::{ATA, ATA0};
    use mtex_arch::mte_bits::tcr::{TBI0, TBI1, TCMA0, TCMA1};
    const SYNC: u64 = 1 << sctlr::TCF_SHIFT;

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
    fn tagged_memory_non_shareable_or_uncached_is_impdef() {
        // Inner Shareable (0b11), Outer (0b10): Tagged; Non-shareable (0b00) is the CPU's call.
        let cached = Controls {
            sctlr_el1: on().sctlr_el1 | sctlr::C,
            ..on()
        };
        let par = |sh: u64| 0xf0 << 56 | sh << 7;
        assert!(!tagged_is_impdef(&cached, par(0b11)));
        assert!(!tagged_is_impdef(&cached, par(0b10)));
        assert!(tagged_is_impdef(&cached, par(0b00)));
        // SCTLR_EL1.C = 0: whatever the shareability.
        assert!(tagged_is_impdef(&on(), par(0b11)));
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

    const ENDA: u64 = 1 << 27;
    const ENDB: u64 = 1 << 13;
    /// TCR_EL1 with 39-bit VAs in both halves (T0SZ = T1SZ = 25), 4KB pages.
    const VA39: u64 = 25 | 25 << 16 | 0b10 << 30;

    fn pac(tcr: u64, sctlr: u64) -> Controls {
        Controls {
            sctlr_el1: sctlr,
            tcr_el1: tcr,
            ..on()
        }
    }

    #[test]
    fn authentication_replaces_the_code_with_bit_55_and_keeps_the_tag_under_tbi() {
        let c = pac(VA39 | TBI0 | TBI1, ENDA | ENDB);
        // Lower half, tag 3, a code in bits 54:39.
        let signed = 0x0300_0000_4100_0000 | 0x007f_ab80_0000_0000;
        assert_eq!(c.bottom_pac_bit(signed), 39);
        for key in [DataKey::A, DataKey::B] {
            assert_eq!(c.authenticated(signed, key), 0x0300_0000_4100_0000);
        }
        // Upper half (bit 55 set): the field becomes ones; tag 0xF kept.
        let canonical = 0xffff_ff80_0000_1000;
        let upper = canonical ^ 0x0055_aa00_0000_0000;
        assert_eq!(c.authenticated(upper, DataKey::A), canonical);
        // Without TBI the code takes the top byte too: it is extension, not a tag.
        let no_tbi = pac(VA39, ENDA);
        assert_eq!(
            no_tbi.authenticated(0x5a2b_3c00_4100_0000, DataKey::A),
            0x0000_0000_4100_0000
        );
        assert_eq!(
            no_tbi.authenticated(0x5aab_3c00_4100_0000, DataKey::A),
            0xffff_ff80_4100_0000
        );
        // TBI is per half: TBI1 alone keeps the tag of upper-half pointers only.
        let tbi1 = pac(VA39 | TBI1, ENDA);
        assert_eq!(
            tbi1.authenticated(signed, DataKey::A),
            0x0000_0000_4100_0000
        );
        assert_eq!(tbi1.authenticated(upper, DataKey::A), canonical);
        // MTX without TBI keeps bits 59:56 (the tag), extends 63:60.
        let mtx = pac(VA39 | 1 << 60, ENDA);
        assert_eq!(
            mtx.authenticated(0x5300_0080_4100_0000, DataKey::A),
            0x0300_0000_4100_0000
        );
    }

    #[test]
    fn a_disabled_key_leaves_the_pointer_as_it_is() {
        let signed = 0x0312_3400_4100_0000;
        let only_a = pac(VA39 | TBI0, ENDA);
        assert_eq!(
            only_a.authenticated(signed, DataKey::A),
            0x0300_0000_4100_0000
        );
        assert_eq!(only_a.authenticated(signed, DataKey::B), signed);
        let only_b = pac(VA39 | TBI0, ENDB);
        assert_eq!(only_b.authenticated(signed, DataKey::A), signed);
        assert_eq!(
            only_b.authenticated(signed, DataKey::B),
            0x0300_0000_4100_0000
        );
    }

    #[test]
    fn the_code_field_follows_txsz_within_the_granules_limits() {
        let at = |tcr: u64, ptr: u64| pac(tcr, 0).bottom_pac_bit(ptr);
        let lower = 0x4100_0000;
        let upper = 0xffff_8000_0000_0000;
        assert_eq!(at(16, lower), 48);
        assert_eq!(at(16 | 39 << 16, upper), 25, "T1SZ for the upper half");
        assert_eq!(at(39 | 16 << 16, upper), 48);
        // 4KB pages: TxSZ at least 16, at most 48.
        assert_eq!(at(12, lower), 48);
        assert_eq!(at(60, lower), 16);
        // 64KB pages (TG0 = 0b01, TG1 = 0b11), or DS: down to 12 (52-bit VAs); 47 at most.
        assert_eq!(at(12 | 0b01 << 14, lower), 52);
        assert_eq!(at(60 | 0b01 << 14, lower), 17);
        assert_eq!(at(12 << 16 | 0b11 << 30, upper), 52);
        assert_eq!(at(12 << 16 | 0b10 << 30, upper), 48, "TG1 0b10 is 4KB");
        assert_eq!(at(12 | 1 << 59, lower), 52);
    }

    proptest! {
        /// Whatever the code, authentication gives a pointer whose field is the extension of
        /// bit 55 (so authenticating again changes nothing), keeps everything below the
        /// field, and keeps the top byte exactly when TBI applies.
        #[test]
        fn authentication_yields_a_canonical_pointer(ptr: u64, tcr: u64, key_a: bool) {
            let c = pac(tcr, ENDA | ENDB);
            let key = if key_a { DataKey::A } else { DataKey::B };
            let a = c.authenticated(ptr, key);
            let bottom = c.bottom_pac_bit(ptr);
            let low = (1u64 << bottom) - 1;
            prop_assert_eq!(a & low, ptr & low);
            prop_assert_eq!(c.authenticated(a, key), a);
            let b55 = (ptr >> 55) & 1;
            prop_assert_eq!((a >> 55) & 1, b55);
            let field = (a >> bottom) & ((1u64 << (55 - bottom)) - 1);
            prop_assert_eq!(field, if b55 == 1 { (1u64 << (55 - bottom)) - 1 } else { 0 });
            let ext = if b55 == 1 { 0xff } else { 0 };
            if c.tbi(ptr) {
                prop_assert_eq!(a >> 56, ptr >> 56);
            } else if c.mtx(ptr) {
                prop_assert_eq!(a >> 56, (ext & 0xf0) | ((ptr >> 56) & 0xf));
            } else {
                prop_assert_eq!(a >> 56, ext);
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
