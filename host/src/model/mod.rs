//! What a run measured: the hypervisor's report stream parsed, the results document every
//! form is rendered from, and the sampling estimates.

pub mod cpu_counts;
pub mod linux;
pub mod report;
pub mod results;
pub mod sample;
