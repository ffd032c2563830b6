//! mtex-oracle: a QEMU TCG plugin that counts what mtex's trace counts, from QEMU's own
//! instrumentation, so that a Linux window, where no arithmetic predicts the figures, can be
//! checked against something independent of the trace.
//!
//! The hypervisor marks where each traced phase starts and stops (`mtex_abi::oracle`);
//! inside, this counts by EL the instructions begun and those that read or wrote memory
//! ([`count`] gives the rules that bring QEMU's hooks to the trace's unit), and writes one
//! line per phase to the file given as `out=PATH` when QEMU exits.
//!
//! With `shares=on` it counts nothing of the phases, only each CPU's own guest instructions in
//! its sampled share of a window on several CPUs ([`share`]): cheap enough to run under a
//! whole sampled benchmark, where an emulated PMU would count every vCPU's instructions.
//!
//! Use: `qemu-system-aarch64 ... -plugin target/release/libmtex_oracle.so,out=PATH`.

pub mod classify;
pub mod count;
#[cfg(not(test))]
mod plugin;
pub mod share;
