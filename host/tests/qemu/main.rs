//! The tests that build the images and boot them under QEMU, `-icount shift=0`: one module
//! per subject. They run in the full `./scripts/test` (`cargo test --features qemu-tests`);
//! the host tests beside this folder need no QEMU.

mod addresses;
mod browser;
mod builtin_guest;
mod code_writes;
mod cpu_counts;
mod equality;
mod guest_pmu;
mod hostile;
mod install;
mod kernel;
mod kernel_build;
mod linux;
mod oracle;
mod packages;
mod pmu;
mod probe;
mod profile;
mod results;
mod sample;
mod scenario;
mod snippet;
mod stacks;
mod trap_path;
mod uefi;
