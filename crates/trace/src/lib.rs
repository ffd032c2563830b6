//! The trace counter's pure logic, tested on the host:
//! - [`decode`]: which A64 instructions access memory, how, and the few system instructions
//!   that matter to MTE (TCO, SCTLR/TCR/TFSR/GCR/RGSR, barriers);
//! - [`predicate`]: `AArch64.AccessIsTagChecked` as a pure function of configuration and access;
//! - [`counts`]: what a traced phase adds up, in the architectural, TCF-elided and
//!   counterfactual views;
//! - [`profile`]: the same counts by PC;
//! - [`callstack`]: the kernel's call stacks, from the calls and returns the engine steps;
//! - [`exclusive`]: store-exclusive retry loops, which stepping never lets succeed.
//!
//! The hypervisor's step handler only reads registers and calls into this crate.
#![no_std]

pub mod callstack;
pub mod clock_read;
pub mod counts;
pub mod decode;
pub mod exclusive;
pub mod maintenance;
pub mod predicate;
pub mod profile;
pub mod run;

/// Retries of one store-exclusive the step engine lets a retry loop make before it ends the
/// run (with its counts so far): stepping clears the exclusive monitor at every ERET, so
/// under trace such a loop can never succeed.
pub const EXCLUSIVE_RETRIES: u32 = 16;
