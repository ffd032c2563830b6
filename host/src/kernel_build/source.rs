//! Where a kernel build's source comes from: Debian's `linux-source-X` package (fetched with
//! apt, unpacked per build so that patches never touch a shared tree), or a tree of the
//! user's, built out of tree; and the patches, applied in order with GNU patch.

use crate::debian::run;
use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Debian's source package for a kernel version `6.12` or `7.3`: checked before apt runs,
/// as it becomes part of a package name.
pub fn package_for(version: &str) -> Result<String> {
    let ok = !version.is_empty()
        && version.len() <= 16
        && version.starts_with(|c: char| c.is_ascii_digit())
        && version.bytes().all(|b| b.is_ascii_digit() || b == b'.');
    if !ok {
        bail!(
            "--source {version:?}: a kernel version such as 6.12 or 7.3 (Debian's \
             linux-source-VERSION package)"
        );
    }
    Ok(format!("linux-source-{version}"))
}

/// The fetched source package: its version and the tarball it carries.
#[derive(Clone, Debug)]
pub struct Tarball {
    pub package: String,
    pub version: String,
    pub path: PathBuf,
}

/// Fetches `package` into `dir` (once) and returns its source tarball. Linux 7 and later come
/// from Debian's newer suites through mtex's own apt configuration.
pub fn fetch(package: &str, dir: &Path) -> Result<Tarball> {
    let unpacked = if major_of(package) >= 7 {
        crate::debian::suites::Apt::new(&crate::linux::work_dir())?.fetch(package, dir)?
    } else {
        crate::debian::kernel::fetch_package_any(package, dir)?
    };
    let src = unpacked.root.join("usr/src");
    let path = std::fs::read_dir(&src)
        .with_context(|| format!("{package} has no /usr/src"))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.to_string_lossy().ends_with(".tar.xz"))
        .with_context(|| format!("{package} has no /usr/src/*.tar.xz"))?;
    Ok(Tarball {
        package: package.into(),
        version: unpacked.version,
        path,
    })
}

/// Debian's own configuration of a source package's kernel, for arm64.
#[derive(Clone, Debug)]
pub struct DebianConfig {
    /// `linux-config-6.12 6.12.118-1~deb12u1`.
    pub id: String,
    /// The `.config` text.
    pub text: String,
}

/// The flavour of Debian's `linux-image-*-arm64` among `linux-config-X`'s files.
const FLAVOUR: &str = "config.arm64_none_arm64.xz";

/// Debian's configuration of the kernel `t` holds: `linux-config-X` at the source's own
/// version (a configuration of another version is not that kernel's), fetched into `dir`.
pub fn debian_config(t: &Tarball, dir: &Path) -> Result<DebianConfig> {
    let version = t.package.trim_start_matches("linux-source-");
    let pkg = format!("linux-config-{version}");
    let unpacked = if major_of(&t.package) >= 7 {
        crate::debian::suites::Apt::new(&crate::linux::work_dir())?
            .fetch_version(&pkg, &t.version, dir)
    } else {
        crate::debian::kernel::fetch_arm64_version(&pkg, &t.version, dir)
    }
    .with_context(|| {
        format!(
            "Debian's configuration of {} {} is {pkg} at the same version",
            t.package, t.version
        )
    })?;
    let xz = unpacked
        .root
        .join(format!("usr/src/linux-config-{version}"))
        .join(FLAVOUR);
    let text = run(
        Command::new("xz").arg("-dc").arg(&xz),
        &format!("xz -dc {}", xz.display()),
    )?;
    if !text.contains("CONFIG_ARM64=y") {
        bail!("{}: not an arm64 kernel configuration", xz.display());
    }
    Ok(DebianConfig {
        id: format!("{pkg} {}", t.version),
        text,
    })
}

/// The major version of `linux-source-X.Y` (0 when it does not read).
fn major_of(package: &str) -> u32 {
    package
        .trim_start_matches("linux-source-")
        .split('.')
        .next()
        .and_then(|m| m.parse().ok())
        .unwrap_or(0)
}

/// A build's own copy of the source at `into`: the tarball is unpacked once per version
/// into `pristine` (about a minute), and each build gets hard links to its files (seconds).
/// GNU patch writes a patched file anew rather than through its link, so patches change the
/// build's copy only and the pristine tree stays as unpacked.
pub fn copy_for_build(t: &Tarball, pristine: &Path, into: &Path) -> Result<()> {
    let done = pristine.join(".mtex-unpacked");
    if !done.exists() {
        let _ = std::fs::remove_dir_all(pristine);
        std::fs::create_dir_all(pristine)?;
        run(
            Command::new("tar")
                .arg("-xf")
                .arg(&t.path)
                .arg("-C")
                .arg(pristine)
                .arg("--strip-components=1"),
            &format!("tar -xf {}", t.path.display()),
        )?;
        std::fs::write(&done, &t.version)?;
    }
    let _ = std::fs::remove_dir_all(into);
    run(
        Command::new("cp").arg("-al").arg(pristine).arg(into),
        &format!("cp -al {}", pristine.display()),
    )?;
    let _ = std::fs::remove_file(into.join(".mtex-unpacked"));
    Ok(())
}

/// What is wrong with a file given as `--patch`, before anything is fetched.
pub fn check_patch(path: &Path) -> Result<Vec<u8>> {
    let bytes = crate::input::read(path, "patch", 16 << 20)?;
    let text = String::from_utf8_lossy(&bytes);
    let is_diff = text.lines().any(|l| l.starts_with("--- "))
        && text.lines().any(|l| l.starts_with("+++ "))
        && text.lines().any(|l| l.starts_with("@@ "));
    if !is_diff {
        bail!(
            "--patch {}: not a unified diff (no ---/+++ file lines and @@ hunks)",
            path.display()
        );
    }
    Ok(bytes)
}

/// Applies `patch` to the tree at `src` (`patch -p1`, as `git format-patch` output takes).
/// A patch that does not apply is an error naming it and each hunk that failed.
pub fn apply(patch: &Path, src: &Path, source: &str) -> Result<()> {
    let out = Command::new("patch")
        .args([
            "-p1",
            "--batch",
            "--forward",
            "--no-backup-if-mismatch",
            "-r",
            "-",
            "-i",
        ])
        .arg(patch)
        .current_dir(src)
        .output()
        .context("running patch (GNU patch: apt-get install patch)")?;
    if out.status.success() {
        return Ok(());
    }
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    bail!(
        "--patch {}: does not apply to {source}:\n{}",
        patch.display(),
        failed_hunks(&text).join("\n")
    )
}

/// The lines of patch's output that say what failed, each with the file it was patching.
pub fn failed_hunks(output: &str) -> Vec<String> {
    let mut file = String::new();
    let mut out = Vec::new();
    for l in output.lines() {
        if let Some(f) = l.strip_prefix("patching file ") {
            file = f.trim().to_string();
        } else if l.contains("FAILED") && l.starts_with("Hunk") {
            out.push(format!("  {file}: {}", l.trim_end_matches('.')));
        } else if l.contains("malformed")
            || l.contains("Reversed (or previously applied)")
            || l.contains("can't find file")
            || l.contains("Only garbage")
        {
            out.push(format!("  {}", l.trim()));
        }
    }
    if out.is_empty() {
        out.push(format!("  {}", output.trim()));
    }
    out
}

/// A kernel tree of the user's: a directory with Linux's top-level Makefile and arm64.
pub fn check_tree(tree: &Path) -> Result<PathBuf> {
    let t = tree
        .canonicalize()
        .with_context(|| format!("--tree {}: no such directory", tree.display()))?;
    if !t.join("Makefile").is_file() || !t.join("arch/arm64/Kconfig").is_file() {
        bail!(
            "--tree {}: not a Linux source tree (no Makefile and arch/arm64/Kconfig)",
            tree.display()
        );
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_become_package_names_and_nothing_else_does() {
        assert_eq!(package_for("6.12").unwrap(), "linux-source-6.12");
        assert_eq!(package_for("7.3").unwrap(), "linux-source-7.3");
        for bad in ["", "6.12; rm", "../x", "rt", "6.12-rt"] {
            assert!(package_for(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_failed_hunk_is_named_with_its_file() {
        let out = "patching file arch/arm64/include/asm/mte.h\n\
                   Hunk #1 succeeded at 180 (offset 2 lines).\n\
                   Hunk #2 FAILED at 201.\n\
                   1 out of 2 hunks FAILED -- saving rejects to file -\n";
        assert_eq!(
            failed_hunks(out),
            ["  arch/arm64/include/asm/mte.h: Hunk #2 FAILED at 201"]
        );
        assert_eq!(
            failed_hunks("patch: **** Only garbage was found in the patch input.\n"),
            ["  patch: **** Only garbage was found in the patch input."]
        );
    }
}
