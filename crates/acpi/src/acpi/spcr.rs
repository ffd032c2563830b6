//! SPCR, the Serial Port Console Redirection table (Microsoft "SPCR" specification): the UART
//! firmware's console is on, which becomes mtex's report stream.

use mtex_platform::{Console, ConsoleKind, Machine};

use super::AcpiError;
use super::sdt::{u8_at, u64_at};

/// Interface type (offset 36): the UART's programming model, from the DBG2 "Serial Port
/// Subtypes" list.
const INTERFACE_TYPE: usize = 36;
/// Base address (offset 40): a 12-byte Generic Address Structure (ACPI 6.5 §5.2.3.2).
const BASE_ADDRESS: usize = 40;
const GAS_LEN: usize = 12;

const TYPE_PL011: u8 = 0x03;
/// "ARM SBSA (2.x only) Generic UART supporting only 32-bit accesses" (deprecated type).
const TYPE_SBSA_32BIT: u8 = 0x0D;
const TYPE_SBSA: u8 = 0x0E;

/// GAS address space id of system memory (MMIO).
const SYSTEM_MEMORY: u8 = 0;

/// Fills `m.console` from a verified SPCR.
pub fn read(spcr: &[u8], m: &mut Machine) -> Result<(), AcpiError> {
    // Only the interface type and base address are needed; the fields after them (interrupt,
    // baud rate, PCI location, and in revision 3+ the clock and namespace string) are the
    // ones table revisions disagree on, and firmware has already programmed the UART.
    if spcr.len() < BASE_ADDRESS + GAS_LEN {
        return Err(AcpiError::SpcrTooShort);
    }
    let kind = match u8_at(spcr, INTERFACE_TYPE).ok_or(AcpiError::SpcrTooShort)? {
        TYPE_PL011 => ConsoleKind::Pl011,
        TYPE_SBSA | TYPE_SBSA_32BIT => ConsoleKind::SbsaGeneric,
        other => return Err(AcpiError::SpcrInterfaceType(other)),
    };
    let space = u8_at(spcr, BASE_ADDRESS).ok_or(AcpiError::SpcrTooShort)?;
    if space != SYSTEM_MEMORY {
        return Err(AcpiError::SpcrAddressSpace(space));
    }
    // GAS: space id, register bit width, bit offset, access size, then the 64-bit address.
    match u64_at(spcr, BASE_ADDRESS + 4).ok_or(AcpiError::SpcrTooShort)? {
        0 => Err(AcpiError::SpcrDisabled),
        base => {
            m.console = Console::new(kind, base);
            Ok(())
        }
    }
}
