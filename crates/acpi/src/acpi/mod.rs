//! The machine from ACPI: RSDP → XSDT → SPCR (console), MADT (GIC, CPUs), GTDT (timer
//! interrupts), FADT (PSCI conduit). RAM is not in ACPI: the loader takes it from the UEFI
//! memory map, so [`machine`] leaves [`Machine::ram`] empty.
//!
//! Every table's signature, length and checksum is verified before any field is read, and a
//! field is read only where the table's length covers it: revisions differ in length (QEMU's
//! SPCR is revision 2, 80 bytes; ACPI 6.5's GTDT grew to 104), so an optional field that is
//! absent is not an error unless mtex needs it. [`Machine::validate`] then judges whether what
//! was found is enough to run on (e.g. it refuses an HVC-only PSCI conduit).

mod error;
mod fadt;
mod gtdt;
mod madt;
pub mod sdt;
mod spcr;

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod testutil;

pub use error::{AcpiError, RsdpProblem};
pub use sdt::{Signature, TableProblem};

use mtex_platform::Machine;
use sdt::{HEADER_LEN, checksum, table_length, u8_at, u32_at, u64_at, verify};

/// Read access to physical memory where firmware left its tables. The UEFI loader implements
/// it over the identity map (only ranges the UEFI memory map lists); tests over byte arrays.
pub trait PhysMem {
    /// `len` bytes at physical address `addr`, or None when that range is not readable
    /// memory. A slice shorter than `len` is treated as None.
    fn read(&self, addr: u64, len: usize) -> Option<&[u8]>;
}

/// Length of an ACPI 2.0+ RSDP (with the XSDT address and extended checksum).
const RSDP_LEN: usize = 36;
/// Bytes covered by the RSDP's first (ACPI 1.0) checksum.
const RSDP_V1_LEN: usize = 20;
/// Longest RSDP accepted: the structure is 36 bytes today; its length field allows growth.
const RSDP_MAX_LEN: usize = 4096;

/// Reads the machine from the tables the RSDP at `rsdp_addr` leads to.
pub fn machine(rsdp_addr: u64, mem: &impl PhysMem) -> Result<Machine, AcpiError> {
    let xsdt_addr = xsdt_address(mem, rsdp_addr)?;
    let xsdt = load(mem, xsdt_addr, Signature::Xsdt)?;
    let mut m = Machine::default();
    spcr::read(find(mem, xsdt, Signature::Spcr)?, &mut m)?;
    madt::read(find(mem, xsdt, Signature::Madt)?, &mut m)?;
    gtdt::read(find(mem, xsdt, Signature::Gtdt)?, &mut m)?;
    fadt::read(find(mem, xsdt, Signature::Fadt)?, &mut m)?;
    Ok(m)
}

/// Exactly `len` bytes at `addr`, whatever a [`PhysMem`] returns.
fn read_exact<M: PhysMem + ?Sized>(mem: &M, addr: u64, len: usize) -> Option<&[u8]> {
    mem.read(addr, len)?.get(..len)
}

/// Reads the RSDP at `addr` and returns the XSDT address it holds.
fn xsdt_address<M: PhysMem + ?Sized>(mem: &M, addr: u64) -> Result<u64, AcpiError> {
    let unreadable = AcpiError::Rsdp(RsdpProblem::Unreadable);
    let head = read_exact(mem, addr, RSDP_LEN).ok_or(unreadable)?;
    // Read as many bytes as the length field claims when that is plausible, so the extended
    // checksum covers them; a bogus length is reported by `parse_rsdp`.
    let len = u32_at(head, 20)
        .and_then(|l| usize::try_from(l).ok())
        .filter(|l| (RSDP_LEN..=RSDP_MAX_LEN).contains(l))
        .unwrap_or(RSDP_LEN);
    let whole = read_exact(mem, addr, len).ok_or(unreadable)?;
    parse_rsdp(whole).map_err(AcpiError::Rsdp)
}

/// Checks an RSDP (ACPI 6.5 §5.2.5.3) given at least its `Length` bytes and returns the XSDT
/// address (offset 24).
fn parse_rsdp(rsdp: &[u8]) -> Result<u64, RsdpProblem> {
    if rsdp.get(..8) != Some(&b"RSD PTR "[..]) {
        return Err(RsdpProblem::Signature);
    }
    let v1 = rsdp.get(..RSDP_V1_LEN).ok_or(RsdpProblem::Length)?;
    if checksum(v1) != 0 {
        return Err(RsdpProblem::Checksum);
    }
    // Revision 0 is ACPI 1.0 (RSDT only, no length or XSDT fields); ACPI 2.0+ writes 2.
    if u8_at(rsdp, 15).unwrap_or(0) < 2 {
        return Err(RsdpProblem::Revision);
    }
    let len = u32_at(rsdp, 20)
        .and_then(|l| usize::try_from(l).ok())
        .filter(|l| (RSDP_LEN..=RSDP_MAX_LEN).contains(l))
        .ok_or(RsdpProblem::Length)?;
    let whole = rsdp.get(..len).ok_or(RsdpProblem::Length)?;
    if checksum(whole) != 0 {
        return Err(RsdpProblem::ExtendedChecksum);
    }
    match u64_at(rsdp, 24) {
        Some(0) | None => Err(RsdpProblem::NoXsdt),
        Some(xsdt) => Ok(xsdt),
    }
}

/// The table addresses an XSDT lists (64-bit entries after the header).
fn xsdt_entries(xsdt: &[u8]) -> impl Iterator<Item = u64> + '_ {
    xsdt.get(HEADER_LEN..)
        .unwrap_or_default()
        .chunks_exact(8)
        .filter_map(|e| u64_at(e, 0))
}

/// The first table the XSDT lists with signature `sig`, verified.
fn find<'m, M: PhysMem + ?Sized>(
    mem: &'m M,
    xsdt: &[u8],
    sig: Signature,
) -> Result<&'m [u8], AcpiError> {
    let addr = xsdt_entries(xsdt)
        .find(|&a| read_exact(mem, a, 4) == Some(&sig.bytes()[..]))
        .ok_or(AcpiError::Table(sig, TableProblem::Missing))?;
    load(mem, addr, sig)
}

/// Reads the table at `addr` and verifies its signature, length and checksum.
fn load<M: PhysMem + ?Sized>(mem: &M, addr: u64, sig: Signature) -> Result<&[u8], AcpiError> {
    let err = |p| AcpiError::Table(sig, p);
    let header = read_exact(mem, addr, HEADER_LEN).ok_or(err(TableProblem::Unreadable))?;
    if header.get(..4) != Some(&sig.bytes()[..]) {
        return Err(err(TableProblem::Signature));
    }
    let len = table_length(header).ok_or(err(TableProblem::Length))?;
    let bytes = read_exact(mem, addr, len).ok_or(err(TableProblem::Unreadable))?;
    verify(bytes, sig).map_err(err)
}
