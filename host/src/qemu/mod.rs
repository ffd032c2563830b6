//! Booting QEMU and collecting its console, always within a time limit. When the host has to
//! end a run, it first asks QEMU (over QMP) where the guest was, so that the report says it.
//!
//! By concern: `config` is how the machine is run (the run's settings, the host's time
//! limit, QEMU's command line); `options` is the `mtex.*` line handed to hypervisor and guest,
//! checked before any boot; `console` runs QEMU and keeps what it printed; `qmp` and
//! `clock_watch` are how the host looks into a run it may have to end; `temp_dir` is the
//! scratch directory of a `--uefi` run or a snippet. Each is small enough to be read whole.

mod clock_watch;
mod config;
mod console;
mod options;
mod qmp;
mod temp_dir;

pub use clock_watch::{
    CLOCK_PAST_BUDGET_MS, CLOCK_PROGRESS_MS, CLOCK_STALL, ClockWatch, parse_clock_lag_ms,
};
pub use config::{
    BootMethod, CpuModel, EDK2_FIRMWARE, FIRMWARE_CLOCK_MS, HOST_MARGIN, RunConfig,
    WALL_PER_GUEST_ICOUNT, WALL_PER_GUEST_REALTIME, command, default_timeout, guest_time_for,
};
pub use console::{Console, run};
pub use options::{KERNEL_WATCHDOG_MS, cmdline, option_error, unknown_key_message};
pub use qmp::{CpuState, parse_registers};
pub use temp_dir::TempDir;
