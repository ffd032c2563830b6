//! MADT, the Multiple APIC Description Table (signature "APIC", ACPI 6.5 §5.2.12): on Arm, a
//! list of GIC structures: the distributor (GICD), redistributor ranges (GICR) and one CPU
//! interface (GICC) per CPU, which also carries the CPU's MPIDR.

use mtex_platform::Machine;
use mtex_platform::machine::MPIDR_AFFINITY;

use super::AcpiError;
use super::sdt::{u8_at, u32_at, u64_at};

/// Interrupt controller structures start after the header, Local Interrupt Controller
/// Address (4 bytes) and Flags (4 bytes).
const ENTRIES: usize = 44;

/// GIC CPU Interface (GICC) structure type.
pub const GICC: u8 = 0x0B;
/// GIC Distributor (GICD) structure type.
pub const GICD: u8 = 0x0C;
/// GIC Redistributor (GICR) structure type.
pub const GICR: u8 = 0x0E;

/// GICC fields: Flags (bit 0 Enabled), GICR Base Address, MPIDR. ACPI 5.0's 40-byte GICC
/// had no MPIDR; from 5.1 it is 76 bytes or more.
const GICC_FLAGS: usize = 12;
const GICC_ENABLED: u32 = 1 << 0;
const GICC_GICR_BASE: usize = 60;
const GICC_MPIDR: usize = 68;
const GICC_MIN_LEN: usize = GICC_MPIDR + 8;

/// GICD fields: Physical Base Address, GIC version (ACPI 5.1+; 0 = not specified).
const GICD_BASE: usize = 8;
const GICD_VERSION: usize = 20;
const GICD_MIN_LEN: usize = GICD_VERSION + 1;

/// GICR fields: Discovery Range Base Address (u64), Discovery Range Length (u32).
const GICR_BASE: usize = 4;
const GICR_LENGTH: usize = 12;
const GICR_MIN_LEN: usize = GICR_LENGTH + 4;

/// One redistributor frame pair (RD_base + SGI_base, 2 × 64 KiB): what a GICC's GICR Base
/// Address points to when no GICR structure describes a whole range.
const GICC_GICR_SIZE: u64 = 0x2_0000;

/// What the structures list, before judging it.
#[derive(Default)]
struct Found {
    /// First GICD: base address and version byte. A system has exactly one.
    gicd: Option<(u64, u8)>,
    /// First GICR discovery range: base and length.
    gicr_range: Option<(u64, u64)>,
    /// GICR Base Address of the first enabled GICC: ACPI asks firmware to list the boot
    /// processor first among the processor structures (§5.2.12).
    boot_gicr: Option<u64>,
}

/// Fills `m.gic` and `m.cpus` from a verified MADT.
pub fn read(madt: &[u8], m: &mut Machine) -> Result<(), AcpiError> {
    let found = walk(madt, m)?;
    let (gicd, version) = found.gicd.ok_or(AcpiError::MadtNoDistributor)?;
    let redistributors = found.gicr_range.or_else(|| {
        found
            .boot_gicr
            .filter(|&b| b != 0)
            .map(|b| (b, GICC_GICR_SIZE))
    });
    match (version, redistributors) {
        // Version 0 ("not specified", ACPI 5.0 tables) with redistributors listed can only be
        // a GICv3/v4: a GICv2 has none.
        (3 | 4, _) | (0, Some(_)) => {}
        (v, _) => return Err(AcpiError::MadtGicVersion(v)),
    }
    let (gicr, gicr_size) = redistributors.ok_or(AcpiError::MadtNoRedistributor)?;
    m.gic.gicd = gicd;
    m.gic.gicr = gicr;
    m.gic.gicr_size = gicr_size;
    Ok(())
}

/// Walks the structures: records the GIC's, pushes every enabled CPU's MPIDR. Later GICR
/// ranges (a machine with several, one per socket or chiplet) are not needed: the hypervisor
/// runs on the boot CPU, whose redistributor firmware places in the first.
fn walk(madt: &[u8], m: &mut Machine) -> Result<Found, AcpiError> {
    let mut found = Found::default();
    let mut offset = ENTRIES;
    while offset < madt.len() {
        let entry = entry_at(madt, offset)?;
        match u8_at(entry, 0) {
            Some(GICC) => gicc(entry, m, &mut found)?,
            Some(GICD) if found.gicd.is_none() => found.gicd = Some(gicd(entry)?),
            Some(GICR) if found.gicr_range.is_none() => found.gicr_range = Some(gicr(entry)?),
            _ => {}
        }
        offset += entry.len();
    }
    Ok(found)
}

/// The structure at `offset`: type (1 byte), length (1 byte, counting both), body.
fn entry_at(madt: &[u8], offset: usize) -> Result<&[u8], AcpiError> {
    let len = usize::from(u8_at(madt, offset + 1).ok_or(AcpiError::MadtEntryMalformed)?);
    if len < 2 {
        // A zero length would make the walk loop forever.
        return Err(AcpiError::MadtEntryMalformed);
    }
    madt.get(offset..offset + len)
        .ok_or(AcpiError::MadtEntryMalformed)
}

/// A GICD: physical base address and GIC version.
fn gicd(entry: &[u8]) -> Result<(u64, u8), AcpiError> {
    let short = AcpiError::MadtEntryTooShort(GICD);
    if entry.len() < GICD_MIN_LEN {
        return Err(short);
    }
    let base = u64_at(entry, GICD_BASE).ok_or(short)?;
    let version = u8_at(entry, GICD_VERSION).ok_or(short)?;
    Ok((base, version))
}

/// A GICR: discovery range base and length.
fn gicr(entry: &[u8]) -> Result<(u64, u64), AcpiError> {
    let short = AcpiError::MadtEntryTooShort(GICR);
    if entry.len() < GICR_MIN_LEN {
        return Err(short);
    }
    let base = u64_at(entry, GICR_BASE).ok_or(short)?;
    let len = u32_at(entry, GICR_LENGTH).ok_or(short)?;
    Ok((base, u64::from(len)))
}

/// A GICC: an enabled CPU becomes a [`Machine`] CPU; the first one is the boot CPU. Disabled
/// ones (Enabled clear, whether or not "Online Capable") are not running and are skipped.
fn gicc(entry: &[u8], m: &mut Machine, found: &mut Found) -> Result<(), AcpiError> {
    let short = AcpiError::MadtEntryTooShort(GICC);
    if entry.len() < GICC_MIN_LEN {
        return Err(short);
    }
    let flags = u32_at(entry, GICC_FLAGS).ok_or(short)?;
    if flags & GICC_ENABLED == 0 {
        return Ok(());
    }
    let mpidr = u64_at(entry, GICC_MPIDR).ok_or(short)?;
    if found.boot_gicr.is_none() {
        found.boot_gicr = Some(u64_at(entry, GICC_GICR_BASE).ok_or(short)?);
    }
    m.push_cpu(mpidr & MPIDR_AFFINITY);
    Ok(())
}
