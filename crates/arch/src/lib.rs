//! Pure decoders of AArch64 architectural state, shared by the hypervisor, the guest and the
//! host tools. Nothing here touches a CPU register: every function takes the raw value and is
//! tested on the host.
#![no_std]

pub mod esr;
pub mod fields;
pub mod sysreg;

pub use esr::{Esr, ExceptionClass};
pub use fields::{FieldChange, MteField};
pub use sysreg::SysReg;
