//! FADT, the Fixed ACPI Description Table (signature "FACP", ACPI 6.5 §5.2.9): on Arm only its
//! ARM_BOOT_ARCH flags matter to mtex, saying whether and how PSCI is reached.

use mtex_platform::{Machine, PsciConduit};

use super::AcpiError;
use super::sdt::u16_at;

/// ARM_BOOT_ARCH, the "Arm Architecture Boot Flags" (u16, added in ACPI 5.1).
const ARM_BOOT_ARCH: usize = 129;
const PSCI_COMPLIANT: u16 = 1 << 0;
const PSCI_USE_HVC: u16 = 1 << 1;

/// Sets `m.psci` from a verified FADT: SMC or HVC when firmware is PSCI compliant, left
/// unset otherwise ([`Machine::validate`] names both the absence and HVC, which EL2 cannot
/// use to reach firmware).
pub fn read(fadt: &[u8], m: &mut Machine) -> Result<(), AcpiError> {
    let flags = u16_at(fadt, ARM_BOOT_ARCH).ok_or(AcpiError::FadtTooShort)?;
    if flags & PSCI_COMPLIANT != 0 {
        m.set_psci(if flags & PSCI_USE_HVC != 0 {
            PsciConduit::Hvc
        } else {
            PsciConduit::Smc
        });
    }
    Ok(())
}
