//! Instructions after which the step engine's caches of guest code may be stale.
//!
//! The engine caches the translation of the current code page (VA page → PA page, keyed on
//! TTBR0/TTBR1 and the MMU mode) and, for breakpoint runs, plans of inert stretches. A guest
//! that edits a live code mapping must invalidate the TLB (TLBI), and one that rewrites code
//! in place must invalidate the instruction cache (IC) — or, with CTR_EL0.DIC, need not, so
//! plans are also checked word by word before reuse (`run::Plan::still_matches`).

/// SYS with op0 = 0b01 (bits 31:19 = 1101 0101 0000 1): the encoding space of AT, DC, IC,
/// TLBI and the other system instructions.
const SYS_MASK: u32 = 0xfff8_0000;
const SYS: u32 = 0xd508_0000;

fn crn(word: u32) -> u32 {
    (word >> 12) & 0xf
}

/// TLBI (CRn = 8, or 9 for the FEAT_XS nXS forms), any operation.
pub fn is_tlbi(word: u32) -> bool {
    word & SYS_MASK == SYS && matches!(crn(word), 8 | 9)
}

/// IC IALLUIS, IALLU or IVAU (CRn = 7, CRm = 1 or 5).
pub fn is_ic(word: u32) -> bool {
    let crm = (word >> 8) & 0xf;
    word & SYS_MASK == SYS && crn(word) == 7 && matches!(crm, 1 | 5)
}

/// Either: the engine drops what it cached about guest code.
pub fn invalidates_code(word: u32) -> bool {
    word & SYS_MASK == SYS && (is_tlbi(word) || is_ic(word))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_tlbi_and_ic_and_nothing_else() {
        // Encodings from binutils' assembler.
        assert!(is_tlbi(0xd508_871f)); // tlbi vmalle1
        assert!(is_tlbi(0xd508_8720)); // tlbi vae1, x0
        assert!(is_tlbi(0xd508_831f)); // tlbi vmalle1is
        assert!(is_ic(0xd50b_7520)); // ic ivau, x0
        assert!(is_ic(0xd508_751f)); // ic iallu
        assert!(is_ic(0xd508_711f)); // ic ialluis
        assert!(invalidates_code(0xd508_871f) && invalidates_code(0xd50b_7520));
        assert!(!invalidates_code(0xd50b_7420)); // dc zva, x0
        assert!(!invalidates_code(0xd50b_7b20)); // dc cvau, x0
        assert!(!invalidates_code(0xd503_201f)); // nop
        assert!(!invalidates_code(0xd518_1000)); // msr sctlr_el1, x0
    }
}
