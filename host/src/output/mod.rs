//! The forms a results document is shown in, one place for `mtex run`, `mtex parse` and
//! `mtex report`: the summary (the default), the full report, the wide matrix, CSV, JSON and
//! the results page.

pub mod csv;
pub mod full;
pub mod html;
pub mod json;
pub mod matrix;
pub mod plots;
pub mod summary;
pub mod text;

use crate::linux::report::LinuxReport;
use crate::model::report::Report;
use crate::model::results::Results;
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

/// A form of the report.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Form {
    /// The summary: per workload, policies × the headline counters; expectations; problems.
    Text,
    /// The summary, then everything: per phase every counter (perf stat's manner), the
    /// trapped writes, the guest console.
    Full,
    /// The wide tables of each boot's own report (policy matrix, trapped writes).
    Matrix,
    /// One line per phase and counter.
    Csv,
    /// report.json (schema mtex-report v1).
    Json,
    /// The results page (index.html): one file, no external assets.
    Html,
}

/// The summary followed by every run's details: what report.txt holds.
pub fn full(doc: &Results) -> String {
    format!(
        "{}\n{}",
        crate::output::summary::render(doc, None, false),
        crate::output::full::render(doc)
    )
}

/// `doc` in `form`. `reports` gives each boot's own report (only the matrix needs them);
/// `rest` says where what the summary leaves out can be read.
pub fn render(
    doc: &Results,
    form: Form,
    reports: impl FnOnce() -> Result<Vec<Report>>,
    rest: Option<&str>,
) -> Result<String> {
    Ok(match form {
        Form::Text => crate::output::summary::render(doc, rest, true),
        Form::Full => full(doc),
        Form::Matrix => reports()?.iter().map(crate::output::matrix::text).collect(),
        Form::Csv => crate::output::csv::render(doc),
        Form::Json => serde_json::to_string_pretty(doc)? + "\n",
        Form::Html => crate::output::html::page(doc)?,
    })
}

/// Where what the summary leaves out is: the results directory's report.txt, or the full
/// form.
pub fn rest(dir: &Path) -> String {
    format!(
        "all in {}, or add --verbose",
        dir.join("report.txt").display()
    )
}

/// Linux mode's run in `form`: its own report `r` and its windows as the document `doc`.
pub fn render_linux(
    r: &LinuxReport,
    doc: &Results,
    form: Form,
    rest: Option<&str>,
) -> Result<String> {
    Ok(match form {
        Form::Text => crate::linux::summary::render(r, doc, rest),
        Form::Full => linux_full(r, doc),
        Form::Matrix => anyhow::bail!(
            "--format matrix: a Linux-mode run has no policy matrix (its windows are in the \
             text, full and html forms)"
        ),
        Form::Csv => crate::output::csv::render(doc),
        Form::Json => serde_json::to_string_pretty(doc)? + "\n",
        Form::Html => crate::linux::summary::page(r, doc)?,
    })
}

/// Linux mode's report.txt: the summary, then every window in every view and every write.
pub fn linux_full(r: &LinuxReport, doc: &Results) -> String {
    format!(
        "{}\n{}",
        crate::linux::summary::render(r, doc, None),
        crate::linux::report::render(r)
    )
}

/// A results directory read back: its document, Linux mode's own report when it is a Linux
/// run's, and the directory its logs and plots are in.
pub struct Loaded {
    pub doc: Results,
    pub linux: Option<LinuxReport>,
    pub dir: PathBuf,
}

/// Reads a results directory (or a report.json / results.json in one).
pub fn load(path: &Path) -> Result<Loaded> {
    let doc = crate::compare::load(path)?;
    let dir = if path.is_dir() {
        path.to_path_buf()
    } else {
        path.parent()
            .map_or_else(|| PathBuf::from("."), |p| p.to_path_buf())
    };
    // A Linux run's directory: results.json is its windows, report.json its own report.
    let linux = if dir.join(crate::compare::RESULTS_JSON).is_file() {
        let file = dir.join("report.json");
        let text = crate::input::read_text_in_dir(
            &dir,
            "report.json",
            "Linux-mode report",
            crate::input::DOCUMENT_LIMIT,
        )?;
        Some(
            serde_json::from_str(&text)
                .with_context(|| format!("reading {} (Linux mode's report)", file.display()))?,
        )
    } else {
        None
    };
    Ok(Loaded { doc, linux, dir })
}

/// Each run's own report, parsed again from its console log in `dir` (`NAME-K.log`): read
/// from inside `dir` only, whatever the document names.
pub fn reports(doc: &Results, dir: &Path) -> Result<Vec<Report>> {
    doc.runs
        .iter()
        .map(|run| {
            let log = run.log_file().ok_or_else(|| {
                anyhow::anyhow!(
                    "run name {:?}: not a file name in {}",
                    run.name,
                    dir.display()
                )
            })?;
            let bytes =
                crate::input::read_in_dir(dir, &log, "console log", crate::input::LOG_LIMIT)?;
            Ok(crate::model::report::parse_bytes(&bytes))
        })
        .collect()
}
