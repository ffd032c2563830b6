//! The forms a results document is shown in, one place for `mtex run`, `mtex parse` and
//! `mtex report`: the summary (the default), the full report, the wide matrix, CSV, JSON and
//! the results page.

pub mod cpu_counts;
pub mod csv;
pub mod full;
pub mod html;
pub mod json;
pub mod matrix;
pub mod plots;
pub mod summary;
pub mod tables;
pub mod text;

use crate::linux::report::LinuxView;
use crate::model::report::Report;
use crate::model::results::Results;
use anyhow::Result;
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
    /// report.json (schema mtex-report v2).
    Json,
    /// The results page (index.html): one file, no external assets.
    Html,
}

/// The summary followed by every run's details: what report.txt holds. A Linux-mode run's
/// details are its windows in every view and every trapped write.
pub fn full(doc: &Results) -> String {
    if let Some(r) = LinuxView::of(doc) {
        return format!(
            "{}\n{}",
            crate::linux::summary::render(&r, None),
            crate::linux::report::render(&r)
        );
    }
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
    let linux = LinuxView::of(doc);
    Ok(match (form, &linux) {
        (Form::Text, Some(r)) => crate::linux::summary::render(r, rest),
        (Form::Html, Some(r)) => crate::linux::summary::page(r)?,
        (Form::Matrix, Some(_)) => anyhow::bail!(
            "--format matrix: a Linux-mode run has no policy matrix (its windows are in the \
             text, full and html forms)"
        ),
        (Form::Text, None) => crate::output::summary::render(doc, rest, true),
        (Form::Full, _) => full(doc),
        (Form::Matrix, None) => reports()?.iter().map(crate::output::matrix::text).collect(),
        (Form::Csv, _) => crate::output::csv::render(doc),
        (Form::Json, _) => serde_json::to_string_pretty(doc)? + "\n",
        (Form::Html, None) => crate::output::html::page(doc)?,
    })
}

/// The results page of `doc` (index.html), for either guest.
pub fn html_page(doc: &Results) -> Result<String> {
    render(doc, Form::Html, || Ok(Vec::new()), None)
}

/// Where what the summary leaves out is: the results directory's report.txt, or the full
/// form.
pub fn rest(dir: &Path) -> String {
    format!(
        "all in {}, or add --verbose",
        dir.join("report.txt").display()
    )
}

/// A results directory read back: its document, and the directory its logs and plots are in.
pub struct Loaded {
    pub doc: Results,
    pub dir: PathBuf,
}

/// Reads a results directory (or a report.json in one).
pub fn load(path: &Path) -> Result<Loaded> {
    let doc = crate::compare::load(path)?;
    let dir = if path.is_dir() {
        path.to_path_buf()
    } else {
        path.parent()
            .map_or_else(|| PathBuf::from("."), |p| p.to_path_buf())
    };
    Ok(Loaded { doc, dir })
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
