//! The parts of the mtex UEFI loader that do not touch firmware: its configuration file, the
//! RAM list built from the UEFI memory map and the
//! summary it prints. Pure and `no_std`, tested on the host (`cargo test -p mtex-loader`);
//! the UEFI application in `main.rs` feeds them what it reads from firmware.
#![cfg_attr(not(test), no_std)]

extern crate alloc;

pub mod config;
pub mod ram;
pub mod summary;

/// Every message the loader prints starts with this.
pub const PREFIX: &str = "mtex-loader: ";
