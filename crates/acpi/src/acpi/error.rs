//! Why the machine could not be read from the ACPI tables. Each error names the table and the
//! field, since the person reading it is looking at a firmware dump (`acpidump`, `iasl -d`).

use core::fmt;

use super::sdt::{Signature, TableProblem};

/// What is wrong with the RSDP, the root the loader finds in the UEFI configuration table
/// (ACPI 6.5 §5.2.5.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RsdpProblem {
    Unreadable,
    Signature,
    Checksum,
    /// Revision 0: an ACPI 1.0 RSDP, which has no XSDT address.
    Revision,
    Length,
    ExtendedChecksum,
    /// The XSDT address (offset 24) is zero.
    NoXsdt,
}

/// Why [`super::machine`] failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AcpiError {
    Rsdp(RsdpProblem),
    /// A table's header, length or checksum is unusable, or the table is absent.
    Table(Signature, TableProblem),
    /// SPCR ends before its base address (offset 40, 12 bytes).
    SpcrTooShort,
    /// SPCR's base address is 0, which the SPCR specification defines as "console
    /// redirection disabled".
    SpcrDisabled,
    /// SPCR's base address is not in system memory space (its GAS address space id).
    SpcrAddressSpace(u8),
    /// SPCR's interface type is a UART mtex does not drive.
    SpcrInterfaceType(u8),
    /// An MADT structure's length is below 2 or runs past the table's end.
    MadtEntryMalformed,
    /// An MADT structure of this type is too short for a field mtex reads.
    MadtEntryTooShort(u8),
    /// The MADT lists no GIC distributor.
    MadtNoDistributor,
    /// The GIC distributor's version is not 3 or 4.
    MadtGicVersion(u8),
    /// A GICv3 without a redistributor range or a GICR base in the boot CPU's GICC.
    MadtNoRedistributor,
    /// GTDT ends before the virtual timer's GSIV (offset 64).
    GtdtTooShort,
    /// FADT ends before the Arm boot architecture flags (offset 129, ACPI 5.1 and later).
    FadtTooShort,
}

/// One message per table for a [`TableProblem`].
macro_rules! per_table {
    ($sig:expr, $what:literal) => {
        match $sig {
            Signature::Xsdt => concat!("XSDT: ", $what),
            Signature::Spcr => concat!("SPCR: ", $what),
            Signature::Madt => concat!("APIC (MADT): ", $what),
            Signature::Gtdt => concat!("GTDT: ", $what),
            Signature::Fadt => concat!("FACP (FADT): ", $what),
        }
    };
}

impl AcpiError {
    /// What is wrong, naming the table and field.
    pub fn describe(&self) -> &'static str {
        match *self {
            AcpiError::Rsdp(p) => match p {
                RsdpProblem::Unreadable => "RSDP: not readable at the address UEFI gave",
                RsdpProblem::Signature => "RSDP: signature is not \"RSD PTR \"",
                RsdpProblem::Checksum => "RSDP: checksum of its first 20 bytes is not zero",
                RsdpProblem::Revision => {
                    "RSDP: revision 0 (ACPI 1.0) has no XSDT; mtex needs ACPI 2.0+"
                }
                RsdpProblem::Length => "RSDP: length field (offset 20) is below 36 or implausible",
                RsdpProblem::ExtendedChecksum => "RSDP: extended checksum (whole RSDP) is not zero",
                RsdpProblem::NoXsdt => "RSDP: XSDT address (offset 24) is 0",
            },
            AcpiError::Table(sig, p) => match p {
                TableProblem::Missing => per_table!(sig, "not listed in the XSDT"),
                TableProblem::Unreadable => {
                    per_table!(sig, "not readable at the address the XSDT gives")
                }
                TableProblem::Signature => per_table!(
                    sig,
                    "the XSDT entry points at a table with another signature"
                ),
                TableProblem::Length => {
                    per_table!(sig, "header length field is below 36 bytes or implausible")
                }
                TableProblem::Checksum => per_table!(sig, "checksum is not zero"),
            },
            AcpiError::SpcrTooShort => {
                "SPCR: too short for the interface type and base address (needs 52 bytes)"
            }
            AcpiError::SpcrDisabled => "SPCR: base address is 0 (console redirection disabled)",
            AcpiError::SpcrAddressSpace(_) => {
                "SPCR: base address is not in system memory (GAS address space id is not 0)"
            }
            AcpiError::SpcrInterfaceType(t) => spcr_interface_type(t),
            AcpiError::MadtEntryMalformed => {
                "APIC (MADT): an interrupt controller structure's length is below 2 or runs past the table"
            }
            AcpiError::MadtEntryTooShort(t) => match t {
                super::madt::GICC => {
                    "APIC (MADT): a GICC structure is too short for its MPIDR (offset 68)"
                }
                super::madt::GICD => {
                    "APIC (MADT): the GICD structure is too short for its GIC version (offset 20)"
                }
                _ => {
                    "APIC (MADT): a GICR structure is too short for its discovery range (offset 4, 12)"
                }
            },
            AcpiError::MadtNoDistributor => "APIC (MADT): no GIC distributor (GICD) structure",
            AcpiError::MadtGicVersion(v) => match v {
                0 => {
                    "APIC (MADT): GIC version unspecified and no redistributors: a GICv2; mtex needs GICv3"
                }
                1 | 2 => {
                    "APIC (MADT): GICD version is GICv1/v2; mtex needs GICv3 (system-register CPU interface)"
                }
                _ => "APIC (MADT): GICD version field is not a known GIC version",
            },
            AcpiError::MadtNoRedistributor => {
                "APIC (MADT): no GICR structure and the boot CPU's GICC has no GICR base address"
            }
            AcpiError::GtdtTooShort => "GTDT: too short for the virtual timer GSIV (offset 64)",
            AcpiError::FadtTooShort => {
                "FACP (FADT): too short for the Arm boot architecture flags (offset 129, ACPI 5.1+)"
            }
        }
    }

    /// The raw value an error is about, for [`fmt::Display`].
    fn value(&self) -> Option<u8> {
        match *self {
            AcpiError::SpcrAddressSpace(v)
            | AcpiError::SpcrInterfaceType(v)
            | AcpiError::MadtEntryTooShort(v)
            | AcpiError::MadtGicVersion(v) => Some(v),
            _ => None,
        }
    }
}

/// Names the SPCR interface types (Microsoft DBG2 table, "Serial Port Subtypes") a user is
/// likely to meet instead of a PL011 or SBSA UART.
fn spcr_interface_type(t: u8) -> &'static str {
    match t {
        0x00 | 0x01 | 0x12 => {
            "SPCR: interface type is a 16550-family UART; mtex drives PL011 (0x03) and SBSA generic (0x0D/0x0E) UARTs only"
        }
        0x0F => "SPCR: interface type is the Arm DCC (0x0F), not a memory-mapped UART",
        _ => "SPCR: interface type is neither PL011 (0x03) nor SBSA generic UART (0x0D/0x0E)",
    }
}

impl fmt::Display for AcpiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.describe())?;
        match self.value() {
            Some(v) => write!(f, " (value {v:#04x})"),
            None => Ok(()),
        }
    }
}
