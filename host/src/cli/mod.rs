//! The subcommands that are more than a dispatch: benchmarks, snippets, the probe, the
//! UEFI system partition.

pub mod bench;
pub mod esp;
pub mod probe;
pub mod snippet;
