//! A scratch directory removed when dropped, named so that concurrent runs and tests never
//! share one: the ESP tree of a `--uefi` run (which QEMU's vvfat disk may write to), a
//! snippet's build. Apart because it is the one piece of this module used beyond running QEMU.

use anyhow::{Context, Result};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

/// A directory removed when dropped (the ESP of a `--uefi` run).
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(what: &str) -> Result<Self> {
        static N: AtomicU32 = AtomicU32::new(0);
        let p = std::env::temp_dir().join(format!(
            "mtex-{what}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&p).with_context(|| format!("creating {}", p.display()))?;
        Ok(TempDir(p))
    }
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
