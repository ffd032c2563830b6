//! What differs per machine, discovered at boot rather than compiled in.
//!
//! The hypervisor is one binary for every board. What it needs to know about the machine it
//! runs on — console, interrupt controller, timers, PSCI conduit, CPUs, memory — arrives as a
//! [`Machine`], read from the device tree (`qemu -kernel`, `mtex_dt::machine`) or from ACPI
//! by the UEFI loader (`mtex_acpi`), inside a versioned [`BootInfo`]. What depends on the
//! CPU rather than the board (errata) is looked up from MIDR_EL1 by [`Errata::for_midr`].
//!
//! [`guest_vm`] is the other side: the machine mtex shows its guest, the same on every host,
//! so that a run's counts do not depend on where firmware put things.
//! [`qemu_virt`] describes QEMU's virt board, for host tests and as the reference the
//! discovery code is checked against; the hypervisor itself never reads it.
#![cfg_attr(not(test), no_std)]

pub mod arm64_image;
pub mod boot_info;
pub mod errata;
pub mod firmware_el1;
pub mod fw_cfg;
pub mod guest_vm;
pub mod linux_bundle;
pub mod machine;
pub mod placement;
pub mod qemu_virt;

pub use boot_info::{BootInfo, BootPath};
pub use errata::Errata;
pub use machine::{Console, ConsoleKind, Gic, Machine, PsciConduit, Region};
