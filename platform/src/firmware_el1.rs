//! Install mode: the firmware goes on at EL1 with the translation regime, vectors and stack
//! it had at EL2. The loader reads its EL2 controls and converts them here (pure, tested on
//! the host); the hypervisor writes the EL1 registers and returns to the loader at EL1.
//!
//! Why a straight copy of the firmware's tables works (Arm ARM D8, stage 1 descriptors): the
//! EL2 regime (HCR_EL2.E2H = 0) and EL1&0 read a descriptor's address, attribute index,
//! shareability, AF and AP[2] the same way. Where they differ: bit 54 is XN at EL2 and UXN
//! at EL1 (EL1 may then execute what EL2 could not: less protection, never a fault); PXN
//! and nG are RES0 at EL2, so every page is global and executable at EL1; AP[1] is "EL0
//! access" at EL1, and UEFI firmware (edk2's ArmMmuLib) leaves it 0, so nothing becomes
//! EL0-writable (which would make it privileged-execute-never).

/// What the hypervisor gives EL1 when it returns to the firmware: the loader's resume point
/// and stack, and the EL1 controls converted from the firmware's EL2 ones. `#[repr(C)]`:
/// the loader's assembly stores `pc` and `sp` at their offsets.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Resume {
    /// Where EL1 resumes: the loader's return path (its assembly's label).
    pub pc: u64,
    /// The stack the loader was on as it branched to the hypervisor: SP_EL1 when `spsel` is
    /// 1 (the firmware ran on SP_EL2), SP_EL0 when it is 0 (it ran on SP_EL0, EL1t).
    pub sp: u64,
    /// SP_EL1 when `spsel` is 0: the firmware's SP_EL2, the stack its exceptions used.
    pub sp_el1: u64,
    /// PSTATE.SP at EL2: 1, resume in EL1h; 0, in EL1t.
    pub spsel: u64,
    pub sctlr_el1: u64,
    pub tcr_el1: u64,
    pub ttbr0_el1: u64,
    pub mair_el1: u64,
    pub vbar_el1: u64,
    pub cpacr_el1: u64,
}

/// The firmware's EL2 controls as the loader reads them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct El2Controls {
    pub sctlr_el2: u64,
    pub tcr_el2: u64,
    pub ttbr0_el2: u64,
    pub mair_el2: u64,
    pub vbar_el2: u64,
    pub cptr_el2: u64,
}

/// SCTLR_EL1's RES1 bits (Armv8.0: 11, 20, 22, 23, 28, 29), as a kernel enters with them.
const SCTLR_EL1_RES1: u64 = 0x30d0_0800;
/// SCTLR bits with the same meaning at EL2 (non-VHE) and EL1: M, A, C, SA, I, WXN, EE.
const SCTLR_SHARED: u64 =
    (1 << 0) | (1 << 1) | (1 << 2) | (1 << 3) | (1 << 12) | (1 << 19) | (1 << 25);

/// SCTLR_EL1 doing for EL1 what `sctlr_el2` did for EL2: MMU, caches, alignment and stack
/// checks, WXN and endianness carried over; MTE, PAN and every later feature off, as the
/// firmware had them (it never set the EL1 register).
pub const fn sctlr_el1(sctlr_el2: u64) -> u64 {
    SCTLR_EL1_RES1 | (sctlr_el2 & SCTLR_SHARED)
}

/// TCR_EL1 walking TTBR0_EL1 as TCR_EL2 walked TTBR0_EL2: T0SZ, cacheability, shareability
/// and granule copied; PS becomes IPS, TBI TBI0, HA and HD move to their EL1 places; TTBR1
/// walks are disabled (EPD1), with a valid TG1 (4 KiB) for completeness.
pub const fn tcr_el1(tcr_el2: u64) -> u64 {
    let same = tcr_el2 & 0xffff; // T0SZ, EPD0 (RES0 at EL2), IRGN0, ORGN0, SH0, TG0
    let ps = (tcr_el2 >> 16) & 0b111;
    let tbi = (tcr_el2 >> 20) & 1;
    let ha = (tcr_el2 >> 21) & 1;
    let hd = (tcr_el2 >> 22) & 1;
    const EPD1: u64 = 1 << 23;
    const TG1_4K: u64 = 0b10 << 30;
    same | EPD1 | TG1_4K | (ps << 32) | (tbi << 37) | (ha << 39) | (hd << 40)
}

/// CPACR_EL1 letting EL1 use FP/SIMD exactly when the firmware could at EL2 (CPTR_EL2.TFP
/// clear); SVE and SME stay trapped, as the firmware never enabled them for EL1.
pub const fn cpacr_el1(cptr_el2: u64) -> u64 {
    const TFP: u64 = 1 << 10;
    const FPEN_ALL: u64 = 0b11 << 20;
    if cptr_el2 & TFP == 0 { FPEN_ALL } else { 0 }
}

impl Resume {
    /// The EL1 state for firmware that ran with `el2`; `pc`, `sp`, `sp_el1` and `spsel` are
    /// the loader's assembly's to fill.
    pub const fn from_el2(el2: &El2Controls) -> Self {
        Resume {
            pc: 0,
            sp: 0,
            sp_el1: 0,
            spsel: 0,
            sctlr_el1: sctlr_el1(el2.sctlr_el2),
            tcr_el1: tcr_el1(el2.tcr_el2),
            // TTBR0_EL2 has no ASID field (RES0 bits 63:48), so this is ASID 0.
            ttbr0_el1: el2.ttbr0_el2,
            mair_el1: el2.mair_el2,
            vbar_el1: el2.vbar_el2,
            cpacr_el1: cpacr_el1(el2.cptr_el2),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A firmware's TCR_EL2: 4 KiB granule (TG0 = 0), 40-bit space,
    /// inner-shareable write-back walks, PS = 40 bits, TBI clear (RES1 bits 31, 23 set).
    #[test]
    fn firmware_el2_controls_become_the_same_walk_at_el1() {
        let tcr_el2 =
            (1 << 31) | (1 << 23) | (0b010 << 16) | (0b11 << 12) | (0b01 << 10) | (0b01 << 8) | 24;
        let tcr = tcr_el1(tcr_el2);
        assert_eq!(tcr & 0x3f, 24, "T0SZ");
        assert_eq!((tcr >> 8) & 0xff, 0b11_01_01, "SH0, ORGN0, IRGN0");
        assert_eq!((tcr >> 14) & 3, 0, "TG0 4 KiB");
        assert_eq!((tcr >> 32) & 7, 0b010, "IPS from PS");
        assert_eq!((tcr >> 23) & 1, 1, "TTBR1 walks off");
        assert_eq!((tcr >> 30) & 3, 0b10, "TG1 4 KiB");
        assert_eq!((tcr >> 37) & 1, 0, "TBI0 as TBI");
        assert_eq!(tcr >> 41, 0, "nothing above HD");
        assert_eq!(tcr_el1(1 << 20) >> 37 & 1, 1, "TBI moves to TBI0");
        assert_eq!(tcr_el1((1 << 21) | (1 << 22)) >> 39 & 3, 3, "HA, HD move");

        let sctlr_el2 = 0x30c5_0830 | (1 << 0) | (1 << 2) | (1 << 12) | (1 << 3);
        let s = sctlr_el1(sctlr_el2);
        assert_eq!(s & 0x100f, 0x100d, "M, C, SA, I kept; A clear");
        assert_eq!(s & SCTLR_EL1_RES1, SCTLR_EL1_RES1);
        // EL2 RES1 bits 4, 5, 16, 18 mean SA0, CP15BEN, nTWI, nTWE at EL1: not carried.
        assert_eq!(s & ((1 << 4) | (1 << 5) | (1 << 16) | (1 << 18)), 0);

        assert_eq!(cpacr_el1(0x33ff), 0b11 << 20);
        assert_eq!(cpacr_el1(0x33ff | (1 << 10)), 0);
        let r = Resume::from_el2(&El2Controls {
            ttbr0_el2: 0x4_7fff_0000,
            mair_el2: 0xff44_0c04,
            vbar_el2: 0x4_7000_0800,
            ..El2Controls::default()
        });
        assert_eq!(
            (r.ttbr0_el1, r.mair_el1, r.vbar_el1),
            (0x4_7fff_0000, 0xff44_0c04, 0x4_7000_0800)
        );
    }
}
