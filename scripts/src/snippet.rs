//! `mtex snippet` — being written.

use std::process::ExitCode;

/// Its command-line arguments.
#[derive(clap::Args, Debug)]
pub struct Args {}

/// Runs it.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("mtex snippet is not written yet")
}
