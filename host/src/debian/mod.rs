//! Debian packages through apt, for any suite mtex reads (the machine's own apt for bookworm,
//! mtex's own configuration under `target/linux/apt/` for the newer suites): the one way a
//! package is downloaded and unpacked, and the tool runner both use.

pub mod kernel;
pub mod packages;
pub mod suites;

use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};
use std::process::Command;

/// An unpacked package.
#[derive(Clone, Debug)]
pub struct Unpacked {
    /// `name` as apt knows it (without `:arm64`).
    pub name: String,
    /// The package's version.
    pub version: String,
    /// Where its files are (its `/` tree).
    pub root: PathBuf,
}

/// Runs a tool; its stdout, or an error with what it said on stderr.
pub fn run(cmd: &mut Command, what: &str) -> Result<String> {
    let out = cmd
        .output()
        .with_context(|| format!("{what}: cannot start"))?;
    if !out.status.success() {
        bail!(
            "{what} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Where `pkg` `version` is unpacked under `dir` (a version's `:` is `%3a`, as in a .deb's
/// name).
fn unpacked_root(dir: &Path, pkg: &str, version: &str) -> PathBuf {
    dir.join(format!("{pkg}_{}", version.replace(':', "%3a")))
}

/// `pkg` at `version` (apt's name for it `qualified`, e.g. `name:arm64`), unpacked under
/// `dir`: downloaded with `apt-get` and `apt_options` (`-o` pairs) and unpacked with
/// `dpkg-deb`, unless a `.unpacked` marker says it already is. The .deb is removed once
/// unpacked. `announce` prints a line before a download.
pub fn download_unpack(
    apt_options: &[String],
    qualified: &str,
    pkg: &str,
    version: String,
    dir: &Path,
    announce: bool,
) -> Result<Unpacked> {
    let root = unpacked_root(dir, pkg, &version);
    if root.join(".unpacked").exists() {
        return Ok(Unpacked {
            name: pkg.into(),
            version,
            root,
        });
    }
    let debs = dir.join("debs");
    std::fs::create_dir_all(&debs)?;
    if announce {
        eprintln!("mtex: downloading {pkg} {version}");
    }
    // apt's download sandbox user cannot write into target/: download as the caller.
    run(
        Command::new("apt-get")
            .args(apt_options)
            .args(["download", "-qq", "-o", "APT::Sandbox::User=root"])
            .arg(format!("{qualified}={version}"))
            .current_dir(&debs),
        &format!("apt-get download {qualified}"),
    )?;
    let deb = std::fs::read_dir(&debs)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&format!("{pkg}_")) && n.ends_with(".deb"))
        })
        .with_context(|| format!("apt-get download left no {pkg} .deb"))?;
    let _ = std::fs::remove_dir_all(&root);
    run(
        Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&root),
        "dpkg-deb -x",
    )?;
    std::fs::write(root.join(".unpacked"), &version)?;
    let _ = std::fs::remove_file(&deb);
    Ok(Unpacked {
        name: pkg.into(),
        version,
        root,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unpacked_package_is_found_without_apt() {
        let dir = std::env::temp_dir().join(format!("mtex-debian-{}", std::process::id()));
        let root = unpacked_root(&dir, "busybox-static", "1:1.35.0-4");
        assert!(root.ends_with("busybox-static_1%3a1.35.0-4"));
        std::fs::create_dir_all(&root).expect("dir");
        std::fs::write(root.join(".unpacked"), "1:1.35.0-4").expect("marker");
        // No apt-get would run with these options: the marker answers first.
        let u = download_unpack(
            &["--no-such-option".into()],
            "busybox-static:arm64",
            "busybox-static",
            "1:1.35.0-4".into(),
            &dir,
            false,
        )
        .expect("found unpacked");
        assert_eq!((u.name.as_str(), u.root), ("busybox-static", root));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
