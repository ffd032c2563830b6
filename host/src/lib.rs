//! Host side of mtex: builds the images, boots QEMU, reads the report stream.

pub mod bench;
pub mod compare;
pub mod csv_out;
pub mod equality;
pub mod esp;
pub mod forms;
pub mod html;
pub mod images;
pub mod input;
pub mod json_out;
pub mod kernel_build;
pub mod linux;
pub mod oracle_check;
pub mod perf_text;
pub mod plots;
pub mod probe;
pub mod profile;
pub mod qemu;
pub mod render;
pub mod report;
pub mod results;
pub mod scenario_file;
pub mod scenario_run;
pub mod snippet;
pub mod summary;
pub mod symbols;
