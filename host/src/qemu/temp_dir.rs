//! A scratch directory removed when dropped, named so that concurrent runs and tests never
//! share one: the ESP tree of a `--uefi` run (which QEMU's vvfat disk may write to), a
//! snippet's build. Apart because it is the one piece of this module used beyond running QEMU.

use anyhow::{Context, Result};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

/// A directory removed when dropped (the ESP of a `--uefi` run).
pub struct TempDir(PathBuf);

impl TempDir {
    /// A new directory, made here and the user's alone (mode 0700): never one that another
    /// user of the host made first under the same name, in which they could read or replace
    /// what the run puts there (a snippet's code, an object the assembler writes).
    pub fn new(what: &str) -> Result<Self> {
        use std::os::unix::fs::DirBuilderExt;
        static N: AtomicU32 = AtomicU32::new(0);
        let mut tries = 0;
        loop {
            let p = std::env::temp_dir().join(format!(
                "mtex-{what}-{}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ));
            match std::fs::DirBuilder::new().mode(0o700).create(&p) {
                Ok(()) => return Ok(TempDir(p)),
                // Taken (by an earlier process of this id, or someone else): the next name.
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && tries < 100 => {
                    tries += 1;
                }
                Err(e) => return Err(e).with_context(|| format!("creating {}", p.display())),
            }
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_temporary_directory_is_new_and_the_users_alone() {
        let a = TempDir::new("temp-test").unwrap();
        let b = TempDir::new("temp-test").unwrap();
        assert_ne!(a.path(), b.path());
        let mode = std::fs::metadata(a.path()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        let kept = a.path().to_path_buf();
        drop(a);
        assert!(!kept.exists());
    }
}
