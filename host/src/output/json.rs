//! `--json FILE`: opened for writing before the run, so that a path that cannot be written
//! is bad input found in a second, not after a long run; an existing file is kept until the
//! document replaces it.

use anyhow::{Context, Result};
use serde::Serialize;
use std::fs::File;
use std::io::{Seek, Write};
use std::path::{Path, PathBuf};

pub struct JsonOut {
    path: PathBuf,
    file: File,
}

impl JsonOut {
    /// Opens `path` (None: no `--json`).
    pub fn open(path: Option<&Path>) -> Result<Option<Self>> {
        path.map(|path| {
            std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(false)
                .open(path)
                .with_context(|| format!("--json {}: cannot open for writing", path.display()))
                .map(|file| Self {
                    path: path.to_path_buf(),
                    file,
                })
        })
        .transpose()
    }

    /// Replaces the file's content with `doc`, pretty-printed.
    pub fn write(&mut self, doc: &impl Serialize) -> Result<()> {
        let text = serde_json::to_string_pretty(doc)?;
        let f = &mut self.file;
        f.set_len(0)
            .and_then(|()| f.rewind())
            .and_then(|()| f.write_all(text.as_bytes()))
            .and_then(|()| f.write_all(b"\n"))
            .with_context(|| format!("writing --json {}", self.path.display()))
    }
}
