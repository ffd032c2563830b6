//! What a kernel build shows while it works: one line per stage, and the compile's share
//! done, read from Kbuild's own short output (`  CC      path.o`). On a terminal the compile
//! line is redrawn in place; otherwise a line is printed at every tenth.

use std::io::{IsTerminal, Write};

/// A stage of the build, as shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    Fetch,
    Unpack,
    Patch,
    Config,
    Compile,
    Link,
}

impl Stage {
    pub fn name(self) -> &'static str {
        match self {
            Stage::Fetch => "fetch",
            Stage::Unpack => "unpack",
            Stage::Patch => "patch",
            Stage::Config => "config",
            Stage::Compile => "compile",
            Stage::Link => "link",
        }
    }
}

/// What one line of Kbuild's output says about progress.
#[derive(Debug, PartialEq, Eq)]
pub enum Event {
    /// A C or assembly file compiled.
    Compiled,
    /// The final link of vmlinux began.
    Linking,
    Other,
}

/// Reads one line of `make`'s output (Kbuild's quiet form: a short tag, then the target).
pub fn event(line: &str) -> Event {
    let mut words = line.split_whitespace();
    match (words.next(), words.next()) {
        (Some("CC" | "AS"), Some(t)) if t.ends_with(".o") => Event::Compiled,
        (Some("LD"), Some(t)) if t.ends_with("vmlinux") || t.contains(".tmp_vmlinux") => {
            Event::Linking
        }
        _ => Event::Other,
    }
}

/// The progress display, on stderr.
pub struct Progress {
    tty: bool,
    started: std::time::Instant,
    stage: Option<Stage>,
    what: String,
    compiled: u64,
    /// How many files the compile is expected to take (a previous build of the same
    /// configuration), for its share done; None: the count alone is shown.
    expected: Option<u64>,
    shown_tenth: u64,
}

impl Progress {
    pub fn new(expected: Option<u64>) -> Self {
        Self {
            tty: std::io::stderr().is_terminal(),
            started: std::time::Instant::now(),
            stage: None,
            what: String::new(),
            compiled: 0,
            expected,
            shown_tenth: 0,
        }
    }

    /// Begins a stage (printed at once), with what it works on; a stage goes on when it is
    /// begun again on the same thing (the link's several LD lines), not on another (a
    /// second package fetched).
    pub fn stage(&mut self, s: Stage, what: &str) {
        if self.stage == Some(s) && self.what == what {
            return;
        }
        self.end_line();
        self.stage = Some(s);
        self.what = what.to_string();
        eprintln!(
            "mtex kernel build: {:<7} {what} ({:.0} s)",
            s.name(),
            self.started.elapsed().as_secs_f64()
        );
    }

    /// Takes one line of make's output.
    pub fn line(&mut self, l: &str) {
        match event(l) {
            // The link compiles a few files of its own (kallsyms tables): still the link.
            Event::Compiled if self.stage == Some(Stage::Link) => {}
            Event::Compiled => {
                if self.stage != Some(Stage::Compile) {
                    self.stage(Stage::Compile, "");
                }
                self.compiled += 1;
                self.show_compile();
            }
            Event::Linking => self.stage(Stage::Link, "vmlinux"),
            Event::Other => {}
        }
    }

    /// Sets the compile's expected file count (known once the configuration is).
    pub fn expect(&mut self, files: Option<u64>) {
        self.expected = files;
    }

    /// Files compiled so far.
    pub fn compiled(&self) -> u64 {
        self.compiled
    }

    fn share(&self) -> Option<u64> {
        // Never 100 before the link: the expectation is a previous build's count.
        self.expected
            .filter(|e| *e > 0)
            .map(|e| (self.compiled * 100 / e).min(99))
    }

    fn show_compile(&mut self) {
        let text = match self.share() {
            Some(p) => format!(
                "{p}% ({} of about {} files)",
                self.compiled,
                self.expected.unwrap_or(0)
            ),
            None => format!("{} files", self.compiled),
        };
        if self.tty {
            eprint!(
                "\rmtex kernel build: compile {text}, {:.0} s   ",
                self.started.elapsed().as_secs_f64()
            );
            let _ = std::io::stderr().flush();
        } else {
            // Off a terminal, a line per tenth done (or per 250 files when the total is
            // not known).
            let step = self.share().map_or(self.compiled / 250, |p| p / 10);
            if step > self.shown_tenth {
                self.shown_tenth = step;
                eprintln!("mtex kernel build: compile {text}");
            }
        }
    }

    fn end_line(&mut self) {
        if self.tty && self.stage == Some(Stage::Compile) {
            eprintln!();
        }
    }

    /// Ends the display.
    pub fn done(&mut self, what: &str) {
        self.end_line();
        self.stage = None;
        eprintln!(
            "mtex kernel build: done    {what} ({:.0} s)",
            self.started.elapsed().as_secs_f64()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kbuild_lines_are_read_as_compiles_and_the_link() {
        assert_eq!(event("  CC      kernel/fork.o"), Event::Compiled);
        assert_eq!(
            event("  AS      arch/arm64/kernel/entry.o"),
            Event::Compiled
        );
        assert_eq!(
            event("  CC      scripts/mod/devicetable-offsets.s"),
            Event::Other
        );
        assert_eq!(event("  LD      .tmp_vmlinux1"), Event::Linking);
        assert_eq!(event("  LD      vmlinux"), Event::Linking);
        assert_eq!(
            event("  LD      arch/arm64/kernel/vdso/vdso.so.dbg"),
            Event::Other
        );
        assert_eq!(event("  AR      kernel/built-in.a"), Event::Other);
    }

    #[test]
    fn the_share_never_reaches_100_before_the_link() {
        let mut p = Progress::new(Some(10));
        p.compiled = 20;
        assert_eq!(p.share(), Some(99));
        p.compiled = 5;
        assert_eq!(p.share(), Some(50));
        assert_eq!(Progress::new(None).share(), None);
    }

    #[test]
    fn the_links_own_compiles_do_not_go_back_to_the_compile_stage() {
        let mut p = Progress::new(None);
        p.line("  CC      kernel/fork.o");
        p.line("  LD      .tmp_vmlinux1");
        p.line("  AS      .tmp_vmlinux1.kallsyms.o");
        assert_eq!(p.stage, Some(Stage::Link));
        assert_eq!(p.compiled(), 1);
    }
}
