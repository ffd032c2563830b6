//! `mtex parse`: a saved console log (from QEMU or from hardware) read as a run's report.

use crate::cli::write_stdout;
use crate::images;
use crate::model::report;
use crate::model::results::Results;
use crate::output::{self, Form};
use anyhow::Result;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    pub file: PathBuf,
    /// Print report.json (schema mtex-report v2) instead of text: a log captured on
    /// hardware becomes the same document a run writes (--format json).
    #[arg(long)]
    pub json: bool,
    /// The report's form, as for run: text, full, matrix, csv, json, html.
    #[arg(long, value_enum, default_value = "text", conflicts_with = "json")]
    pub format: Form,
    /// Print the full report (--format full).
    #[arg(long, short, conflicts_with_all = ["format", "json"])]
    pub verbose: bool,
    /// The kernel's symbols, to name its trapped writes and profiles by function: a dump of
    /// /proc/kallsyms taken as root on the machine measured (its addresses are the running
    /// kernel's, KASLR included), or a System.map for a kernel booted with nokaslr.
    /// Without it, the guest kernel of this tree names them.
    #[arg(long, value_name = "FILE")]
    pub symbols: Option<PathBuf>,
}

pub fn run(args: Args) -> Result<ExitCode> {
    let Args {
        file,
        json,
        format,
        verbose,
        symbols,
    } = args;
    let symbols = match &symbols {
        Some(path) => crate::symbols::Symbols::from_symbol_file(path)?,
        // The log came from this tree's guest, when it has been built here.
        None => crate::symbols::Symbols::load(&images::guest_elf_path()),
    };
    // Bytes, not text: one byte that is not UTF-8 must not cost the whole log.
    let bytes = crate::input::read(&file, "console log", crate::input::LOG_LIMIT)?;
    let r = report::parse_bytes(&bytes);
    let mut doc = Results::single(&r);
    doc.symbolize(&symbols);
    let form = match (json, verbose) {
        (true, _) => Form::Json,
        (_, true) => Form::Full,
        _ => format,
    };
    write_stdout(&output::render(
        &doc,
        form,
        || Ok(vec![r.clone()]),
        Some("all of it: add --verbose"),
    )?);
    Ok(if r.succeeded() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
