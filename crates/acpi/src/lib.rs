//! What the machine's firmware tells the UEFI loader about the machine, read into the plain
//! [`mtex_platform::Machine`] the hypervisor is handed.
//!
//! - [`acpi`]: the ACPI tables (SPCR, MADT, GTDT, FADT) reached from the RSDP that UEFI's
//!   configuration table points to. Server firmware (Ampere Altra, AmpereOne) describes the
//!   machine only this way; QEMU's virt board does too with `acpi=on`.
//!
//! Everything here is a pure reader over bytes the loader hands in through [`PhysMem`], so it
//! is tested on the host; it never panics on what it reads (checked by property tests).
#![cfg_attr(not(test), no_std)]

pub mod acpi;

pub use acpi::PhysMem;
