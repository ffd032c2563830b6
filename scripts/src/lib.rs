//! Host side of mtex: builds the images, boots QEMU, reads the report stream.

pub mod bench;
pub mod esp;
pub mod images;
pub mod qemu;
pub mod render;
pub mod report;
