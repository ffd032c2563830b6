//! Pure decoders of AArch64 architectural state, shared by the hypervisor, the guest and the
//! host tools. Nothing here touches a CPU register: every function takes the raw value and is
//! tested on the host.
#![no_std]

pub mod counter_regs;
pub mod debug_regs;
pub mod el2_bits;
pub mod esr;
pub mod features;
pub mod fields;
pub mod gic_regs;
pub mod id_regs;
pub mod mte_bits;
pub mod pmu_regs;
pub mod stage1;
pub mod sysreg;

pub use debug_regs::{DebugReg, GuestDebug};
pub use esr::{Esr, ExceptionClass};
pub use features::MteFeatures;
pub use fields::{FieldChange, MteField};
pub use gic_regs::SgiReg;
pub use pmu_regs::{GuestPmu, PmuReg};
pub use sysreg::SysReg;
