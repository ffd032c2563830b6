//! Host side of mtex: builds the images, boots QEMU, reads the report stream.

pub mod cli;
pub mod compare;
pub mod debian;
pub mod images;
pub mod input;
pub mod kernel_build;
pub mod linux;
pub mod model;
pub mod oracle_check;
pub mod output;
pub mod profile;
pub mod qemu;
pub mod scenario;
pub mod symbols;
