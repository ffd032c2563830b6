//! System description tables: the common 36-byte header, checksums, and little-endian field
//! reads that never index past what a table's length covers (ACPI 6.5 §5.2.6, "System
//! Description Table Header").

/// Size of the common header every table starts with.
pub const HEADER_LEN: usize = 36;

/// The largest table mtex reads. Real ones are far smaller (a 256-CPU MADT is about 21 KiB);
/// the cap keeps a corrupt length field from asking the loader to map gigabytes.
pub const MAX_TABLE_LEN: usize = 1 << 20;

/// The tables mtex reads, each named in its errors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signature {
    /// Extended System Description Table: the list of every other table.
    Xsdt,
    /// Serial Port Console Redirection: the console UART.
    Spcr,
    /// Multiple APIC Description Table (signature "APIC"): GIC and CPUs.
    Madt,
    /// Generic Timer Description Table: timer interrupts.
    Gtdt,
    /// Fixed ACPI Description Table (signature "FACP"): the PSCI conduit.
    Fadt,
}

impl Signature {
    /// The four signature bytes at offset 0 of the table.
    pub const fn bytes(self) -> [u8; 4] {
        match self {
            Signature::Xsdt => *b"XSDT",
            Signature::Spcr => *b"SPCR",
            Signature::Madt => *b"APIC",
            Signature::Gtdt => *b"GTDT",
            Signature::Fadt => *b"FACP",
        }
    }
}

/// Why a table's header or whole bytes cannot be trusted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TableProblem {
    /// The XSDT does not list a table with this signature.
    Missing,
    /// The loader could not read the table's memory.
    Unreadable,
    /// The bytes at the table's address carry another signature.
    Signature,
    /// The header's length is shorter than the header or longer than [`MAX_TABLE_LEN`].
    Length,
    /// The bytes do not sum to zero.
    Checksum,
}

/// Checks a table's signature, length field and checksum; `bytes` must be exactly the table
/// (as long as its length field says). Returns the bytes on success, so readers only ever see
/// verified tables.
pub fn verify(bytes: &[u8], sig: Signature) -> Result<&[u8], TableProblem> {
    if bytes.get(..4) != Some(&sig.bytes()[..]) {
        return Err(TableProblem::Signature);
    }
    match table_length(bytes) {
        Some(len) if len == bytes.len() => {}
        _ => return Err(TableProblem::Length),
    }
    if checksum(bytes) != 0 {
        return Err(TableProblem::Checksum);
    }
    Ok(bytes)
}

/// The length field of a header (offset 4) if it is plausible: at least the header itself
/// and at most [`MAX_TABLE_LEN`].
pub fn table_length(header: &[u8]) -> Option<usize> {
    let len = usize::try_from(u32_at(header, 4)?).ok()?;
    (HEADER_LEN..=MAX_TABLE_LEN).contains(&len).then_some(len)
}

/// The byte sum ACPI checksums are defined by: a table is valid when it is zero.
pub fn checksum(bytes: &[u8]) -> u8 {
    bytes.iter().fold(0u8, |sum, b| sum.wrapping_add(*b))
}

/// `N` bytes at `offset`, or None when the slice is too short.
fn array_at<const N: usize>(bytes: &[u8], offset: usize) -> Option<[u8; N]> {
    bytes.get(offset..offset.checked_add(N)?)?.try_into().ok()
}

pub fn u8_at(bytes: &[u8], offset: usize) -> Option<u8> {
    bytes.get(offset).copied()
}

pub fn u16_at(bytes: &[u8], offset: usize) -> Option<u16> {
    array_at(bytes, offset).map(u16::from_le_bytes)
}

pub fn u32_at(bytes: &[u8], offset: usize) -> Option<u32> {
    array_at(bytes, offset).map(u32::from_le_bytes)
}

/// ACPI 64-bit fields are often only 4-byte aligned (XSDT entries), so they are assembled
/// from bytes rather than read in place.
pub fn u64_at(bytes: &[u8], offset: usize) -> Option<u64> {
    array_at(bytes, offset).map(u64::from_le_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_stop_at_the_end() {
        let b = [1, 2, 3, 4, 5, 6, 7, 8];
        assert_eq!(u64_at(&b, 0), Some(0x0807_0605_0403_0201));
        assert_eq!(u64_at(&b, 1), None);
        assert_eq!(u32_at(&b, 4), Some(0x0807_0605));
        assert_eq!(u32_at(&b, 5), None);
        assert_eq!(u16_at(&b, usize::MAX), None);
        assert_eq!(u8_at(&b, 8), None);
    }

    #[test]
    fn verify_checks_signature_length_and_checksum() {
        let mut t = [0u8; 40];
        t[..4].copy_from_slice(b"GTDT");
        t[4] = 40;
        t[9] = 0u8.wrapping_sub(checksum(&t));
        assert_eq!(verify(&t, Signature::Gtdt), Ok(&t[..]));
        assert_eq!(verify(&t, Signature::Spcr), Err(TableProblem::Signature));
        assert_eq!(verify(&t[..39], Signature::Gtdt), Err(TableProblem::Length));
        t[20] ^= 1;
        assert_eq!(verify(&t, Signature::Gtdt), Err(TableProblem::Checksum));
    }
}
