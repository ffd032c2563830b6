//! `mtex report`: a results directory shown again in any form, nothing run.

use crate::cli::write_stdout;
use crate::output::{self, Form};
use anyhow::Result;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// A results directory (`mtex-results/NAME-N`) or a report.json.
    pub dir: PathBuf,
    /// The form, as for run.
    #[arg(long, value_enum, default_value = "text")]
    pub format: Form,
    /// Print the full report (--format full).
    #[arg(long, short, conflicts_with = "format")]
    pub verbose: bool,
}

pub fn run(args: Args) -> Result<ExitCode> {
    let Args {
        dir,
        format,
        verbose,
    } = args;
    let output::Loaded { doc, dir } = output::load(&dir)?;
    let form = if verbose { Form::Full } else { format };
    let rest = output::rest(&dir);
    let text = output::render(&doc, form, || output::reports(&doc, &dir), Some(&rest))?;
    write_stdout(&text);
    Ok(if doc.success {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
