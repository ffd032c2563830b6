//! The subcommands, one module each; `main.rs` only dispatches to them.

pub mod bench;
pub mod esp;
pub mod parse;
pub mod probe;
pub mod report;
pub mod run;
pub mod snippet;

/// Writes a report to stdout. A reader that stops early (`mtex report DIR | head`) is not an
/// error of mtex's: the write ends quietly there.
pub fn write_stdout(text: &str) {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
        && e.kind() != std::io::ErrorKind::BrokenPipe
    {
        eprintln!("mtex: writing the report: {e}");
    }
}
