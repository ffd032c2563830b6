//! The hypervisor's decisions about its virtual machine, kept apart from the code that needs
//! the CPU so that they build and are tested on the host: what a CPU's exits count and a
//! phase's figures made of them ([`counters`]), what a PSCI call from the guest
//! does to its CPUs ([`power`]), which calls a guarded phase takes and the iterations its
//! harness made ([`guard`]), whether a PHASE_BEGIN may open a phase and what each pass of
//! a run is for ([`phase`]), who counts a window that every CPU counts and when a tracing CPU's steps may go without the
//! hypervisor's lock ([`window`]), which
//! emulation a trapped MSR or MRS takes and what a control write leaves ([`sysreg`]), what the
//! guest reads back of the records ([`results`]), when a sampled phase traces ([`sample`]), which MSR TCO sites the TCO watch takes
//! ([`tco_scan`]), which part of the counter is the hypervisor's
//! time and how each CPU's guest clock follows the machine's ([`guest_clock`]). The
//! hypervisor applies a decision (starts a physical CPU, answers the guest); it does not make
//! it.
#![cfg_attr(not(test), no_std)]

extern crate alloc;

pub mod counters;
pub mod guard;
pub mod guest_clock;
pub mod guest_events;
pub mod heap;
pub mod phase;
pub mod power;
pub mod results;
pub mod sample;
pub mod stepped_clock;
pub mod sysreg;
pub mod tco_scan;
pub mod window;
