//! Scenario files: their schema and checks, and the runner that boots their runs and judges
//! their expectations.

pub mod file;
pub mod run;
