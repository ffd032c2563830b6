//! The one definition of what crosses mtex's boundaries, used by the hypervisor, the guest and
//! the host alike:
//! - [`hypercall`]: the SMCCC-style HVC calls a guest makes to the hypervisor;
//! - [`report`]: the records the hypervisor sends to the host;
//! - [`frame`]: how a record travels inside ordinary console text;
//! - [`oracle`]: the markers that show an emulator where a traced phase starts and stops;
//! - [`counters`]: every counter a report exports, defined once.
#![no_std]
#[cfg(test)]
extern crate std;

pub mod counters;
pub mod doorbell;
pub mod frame;
pub mod hypercall;
pub mod options;
pub mod oracle;
pub mod pmu_plan;
pub mod program;
pub mod report;
pub mod runs;
pub mod scenario;
pub mod text;

pub use report::Record;
pub use text::ShortStr;
