//! CPU errata that change what the hypervisor does, looked up from MIDR_EL1 at boot.
//!
//! The list follows Linux's arch/arm64 (cpu_errata.c, Documentation/arch/arm64/
//! silicon-errata.rst) for the CPUs mtex targets. The hypervisor reads [`Errata`] once and
//! consults it at the writes concerned: there is no per-board constant to forget.

/// MIDR_EL1 implementer code of Ampere Computing.
pub const IMPLEMENTER_AMPERE: u64 = 0xc0;
/// Part numbers: AmpereOne and AmpereOne AC04 (Linux AMPERE_CPU_PART_AMPERE1 / _AMPERE1A).
pub const PART_AMPERE1: u64 = 0xac3;
pub const PART_AMPERE1A: u64 = 0xac4;

/// Workarounds the hypervisor applies.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Errata {
    /// AC03_CPU_38 (AmpereOne, AmpereOne AC04): hardware Access-flag updates at stage 2
    /// are unreliable; never set VTCR_EL2.HA (nor HD).
    pub vtcr_no_hardware_access_flag: bool,
    /// AC04_CPU_23 (AmpereOne AC04): a write to HCR_EL2 can corrupt a translation in
    /// flight for a load or store; a DSB before and an ISB after the write close the window.
    pub hcr_write_needs_barriers: bool,
}

impl Errata {
    pub fn for_midr(midr: u64) -> Self {
        let implementer = (midr >> 24) & 0xff;
        let part = (midr >> 4) & 0xfff;
        let ampere = implementer == IMPLEMENTER_AMPERE;
        Errata {
            vtcr_no_hardware_access_flag: ampere && (part == PART_AMPERE1 || part == PART_AMPERE1A),
            hcr_write_needs_barriers: ampere && part == PART_AMPERE1A,
        }
    }

    /// VTCR_EL2 with HA and HD cleared when the erratum forbids them.
    pub fn vtcr(&self, vtcr: u64) -> u64 {
        const HA: u64 = 1 << 21;
        const HD: u64 = 1 << 22;
        if self.vtcr_no_hardware_access_flag {
            vtcr & !(HA | HD)
        } else {
            vtcr
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn midr(implementer: u64, part: u64) -> u64 {
        (implementer << 24) | (0xf << 16) | (part << 4)
    }

    #[test]
    fn ampereone_gets_its_workarounds_and_qemu_none() {
        let a1 = Errata::for_midr(midr(0xc0, 0xac3));
        assert!(a1.vtcr_no_hardware_access_flag && !a1.hcr_write_needs_barriers);
        let a1a = Errata::for_midr(midr(0xc0, 0xac4));
        assert!(a1a.vtcr_no_hardware_access_flag && a1a.hcr_write_needs_barriers);
        // QEMU -cpu max reports implementer 0.
        assert_eq!(Errata::for_midr(midr(0, 0x51)), Errata::default());
        // Another vendor's part 0xac3 is not an AmpereOne.
        assert_eq!(Errata::for_midr(midr(0x41, 0xac3)), Errata::default());
    }

    #[test]
    fn the_vtcr_workaround_clears_ha_and_hd() {
        let e = Errata::for_midr(midr(0xc0, 0xac3));
        assert_eq!(e.vtcr(0x8000_0000 | (3 << 21)), 0x8000_0000);
        assert_eq!(Errata::default().vtcr(3 << 21), 3 << 21);
    }
}
