//! Debian's arm64 packages for Linux mode, through apt: the kernel (`linux-image-*-arm64`)
//! and `busybox-static`. Downloaded once into `target/linux/` and unpacked there; quiet when
//! already there. Needs root the first time (the arm64 architecture is added to dpkg and
//! apt's lists refreshed); nothing else on the host changes, and nothing is installed.

use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};
use std::process::Command;

pub use super::{Unpacked, run};

/// The distribution kernel to boot.
#[derive(Clone, Debug)]
pub struct Kernel {
    pub package: Unpacked,
    /// The kernel release, e.g. `6.12.117+deb12-arm64` (the Image's `vmlinuz-<release>`).
    pub release: String,
    /// The arm64 Image.
    pub image: PathBuf,
    /// Its build configuration (`/boot/config-<release>`).
    pub config: PathBuf,
    /// SHA-256 of the Image, hex: what tells two builds with one release string apart (set
    /// when the Image is read).
    pub sha256: String,
    /// Words it must be booted with (a kernel `mtex kernel build` made with KASAN:
    /// its mode), before the user's `--append`.
    pub append: Vec<String>,
}

/// The package name for a `--kernel` choice: `6.12` (the newest 6.12 in bookworm-backports,
/// through its meta-package), or a release such as `6.12.117+deb12` or `6.1.0-47`; Linux 7
/// and later (`7.3`, `7.3.4+deb13`) from Debian's newer suites.
/// Checked before dpkg or apt is run: the choice becomes part of a package name.
pub fn package_for(choice: &str) -> Result<String> {
    let ok = choice.len() <= 64
        && choice.starts_with(|c: char| c.is_ascii_digit())
        && choice
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || ".+-~".contains(c));
    if !ok {
        bail!(
            "--kernel {choice:?}: expected a Debian kernel version such as 6.12, 6.12.117+deb12 \
             or 6.1.0-47 (up to 64 characters: digits first, then letters, digits and . + - ~)"
        );
    }
    // `linux-image-6.12-arm64` is the meta-package; the others are images themselves.
    Ok(format!("linux-image-{choice}-arm64"))
}

/// dpkg knows arm64 and apt has its package lists.
fn ensure_arm64_lists() -> Result<()> {
    let archs = run(
        Command::new("dpkg").arg("--print-foreign-architectures"),
        "dpkg --print-foreign-architectures",
    )?;
    if !archs.lines().any(|a| a.trim() == "arm64") {
        eprintln!("mtex: adding the arm64 architecture to dpkg (for Debian's arm64 kernel)");
        run(
            Command::new("dpkg").args(["--add-architecture", "arm64"]),
            "dpkg --add-architecture arm64 (run as root)",
        )?;
        update_lists()?;
    }
    Ok(())
}

fn update_lists() -> Result<()> {
    run(
        Command::new("apt-get").args(["update", "-qq"]),
        "apt-get update",
    )
    .map(|_| ())
}

/// The candidate version of `pkg` (arch-qualified, `name:arm64`, or not), or None if apt does
/// not know it.
fn candidate(pkg: &str) -> Result<Option<String>> {
    let out = run(
        Command::new("apt-cache").args(["policy", pkg]),
        "apt-cache policy",
    )?;
    Ok(out
        .lines()
        .find_map(|l| l.trim().strip_prefix("Candidate:"))
        .map(|v| v.trim().to_string())
        .filter(|v| v != "(none)"))
}

/// What a meta-package depends on first (e.g. `linux-image-6.12-arm64` on the newest image).
fn meta_target(pkg: &str) -> Result<Option<String>> {
    let out = run(
        Command::new("apt-cache").args(["depends", &format!("{pkg}:arm64")]),
        "apt-cache depends",
    )?;
    Ok(out.lines().find_map(|l| {
        let dep = l.trim().strip_prefix("Depends:")?.trim();
        let name = dep.split(':').next()?;
        name.starts_with("linux-image-").then(|| name.to_string())
    }))
}

/// Downloads and unpacks `pkg` (arm64) under `dir`, unless already there.
fn fetch_package(pkg: &str, dir: &Path) -> Result<Unpacked> {
    fetch_qualified(pkg, ":arm64", dir)
}

/// Downloads and unpacks `pkg` of any architecture (the host's or `all`, as Debian's
/// `linux-source-*` is) under `dir`, unless already there.
pub(crate) fn fetch_package_any(pkg: &str, dir: &Path) -> Result<Unpacked> {
    fetch_qualified(pkg, "", dir)
}

/// `pkg` (arm64) at exactly `version`, from the machine's apt sources, under `dir`.
pub(crate) fn fetch_arm64_version(pkg: &str, version: &str, dir: &Path) -> Result<Unpacked> {
    ensure_arm64_lists()?;
    let qualified = format!("{pkg}:arm64");
    crate::debian::download_unpack(&[], &qualified, pkg, version.into(), dir, false)
}

/// `fetch_package` for `pkg` with `arch` (`:arm64`, or empty for apt's default).
fn fetch_qualified(pkg: &str, arch: &str, dir: &Path) -> Result<Unpacked> {
    let qualified = format!("{pkg}{arch}");
    let mut version = candidate(&qualified)?;
    if version.is_none() {
        update_lists()?;
        version = candidate(&qualified)?;
    }
    let Some(version) = version else {
        bail!("apt has no package {qualified} (is bookworm-backports in the apt sources?)");
    };
    crate::debian::download_unpack(&[], &qualified, pkg, version, dir, false)
}

/// The `--kernel` choices among apt's package names (`apt-cache pkgnames linux-image-`):
/// the arm64 kernel images and their meta-packages of the generic flavour (not -cloud or
/// -rt, built for other machines and uses), oldest first.
pub fn kernel_choices(pkgnames: &str) -> Vec<String> {
    let mut v: Vec<String> = pkgnames
        .lines()
        .filter_map(|l| {
            l.trim()
                .strip_prefix("linux-image-")?
                .strip_suffix("-arm64")
        })
        .filter(|c| package_for(c).is_ok() && !c.ends_with("-cloud") && !c.ends_with("-rt"))
        .map(str::to_string)
        .collect();
    // Numerically by each run of digits: 6.1.0-47 before 6.12, 6.12.9 before 6.12.10.
    let key = |c: &String| -> Vec<(u64, String)> {
        let mut parts: Vec<(u64, String)> = Vec::new();
        let mut digits = true;
        for ch in c.chars() {
            match parts.last_mut() {
                Some((n, _)) if digits && ch.is_ascii_digit() => {
                    *n = n
                        .saturating_mul(10)
                        .saturating_add(u64::from(ch as u8 - b'0'))
                }
                Some((_, t)) if !ch.is_ascii_digit() => {
                    digits = false;
                    t.push(ch)
                }
                _ => {
                    digits = ch.is_ascii_digit();
                    parts.push(if digits {
                        (u64::from(ch as u8 - b'0'), String::new())
                    } else {
                        (0, ch.to_string())
                    })
                }
            }
        }
        parts
    };
    v.sort_by_key(key);
    v.dedup();
    v
}

/// apt knows no such kernel: the error says which it knows.
fn no_such_kernel(choice: &str, pkg: &str) -> anyhow::Error {
    let names = run(
        Command::new("apt-cache").args(["pkgnames", "linux-image-"]),
        "apt-cache pkgnames",
    )
    .unwrap_or_default();
    let known = kernel_choices(&names);
    if known.is_empty() {
        anyhow::anyhow!(
            "--kernel {choice}: apt has no arm64 package {pkg}, nor any arm64 kernel (is \
             bookworm-backports in the apt sources?)"
        )
    } else {
        anyhow::anyhow!(
            "--kernel {choice}: apt has no arm64 package {pkg}; the kernels it has: {}",
            known.join(", ")
        )
    }
}

/// Linux 7 and later come from Debian's newer suites ([`super::suites`]), earlier releases
/// from bookworm and bookworm-backports.
pub(crate) fn from_newer_suites(choice: &str) -> bool {
    choice
        .split('.')
        .next()
        .and_then(|m| m.parse::<u32>().ok())
        .is_some_and(|major| major >= 7)
}

/// The kernel for `choice` (see [`package_for`]), fetched into `dir`.
pub fn kernel(choice: &str, dir: &Path) -> Result<Kernel> {
    if from_newer_suites(choice) {
        let apt = super::suites::Apt::new(dir)?;
        return match apt.resolve(choice)? {
            Some(release) => apt.kernel(&release, dir),
            None => bail!(
                "--kernel {choice}: Debian's newer suites have no such arm64 kernel; they have: {}",
                apt.releases()?.join(", ")
            ),
        };
    }
    ensure_arm64_lists()?;
    let chosen = package_for(choice)?;
    // Known to apt first: `apt-cache depends` fails on a name it does not know.
    let mut version = candidate(&format!("{chosen}:arm64"))?;
    if version.is_none() {
        update_lists()?;
        version = candidate(&format!("{chosen}:arm64"))?;
    }
    if version.is_none() {
        return Err(no_such_kernel(choice, &chosen));
    }
    let pkg = meta_target(&chosen)?.unwrap_or(chosen);
    let package = fetch_package(&pkg, dir)?;
    let boot = package.root.join("boot");
    let image = std::fs::read_dir(&boot)
        .with_context(|| format!("{} has no /boot", package.name))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("vmlinuz-"))
        })
        .with_context(|| format!("{} has no /boot/vmlinuz-*", package.name))?;
    let release = image
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_prefix("vmlinuz-"))
        .unwrap_or_default()
        .to_string();
    let config = boot.join(format!("config-{release}"));
    Ok(Kernel {
        package,
        release,
        image,
        config,
        sha256: String::new(),
        append: Vec::new(),
    })
}

/// busybox-static (arm64), fetched into `dir`; returns the binary.
pub fn busybox(dir: &Path) -> Result<PathBuf> {
    ensure_arm64_lists()?;
    let p = fetch_package("busybox-static", dir)?;
    let bin = p.root.join("bin/busybox");
    if !bin.exists() {
        bail!("busybox-static has no /bin/busybox");
    }
    Ok(bin)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_choices_name_packages_and_refuse_shell_words() {
        assert_eq!(package_for("6.12").unwrap(), "linux-image-6.12-arm64");
        assert_eq!(
            package_for("6.12.117+deb12").unwrap(),
            "linux-image-6.12.117+deb12-arm64"
        );
        assert_eq!(
            package_for("6.1.0-47").unwrap(),
            "linux-image-6.1.0-47-arm64"
        );
        assert!(package_for("6.12; rm -rf /").is_err());
        assert!(package_for("").is_err());
        // Paths, spaces and words that are not versions never reach dpkg or apt.
        for bad in [
            "../../etc/passwd",
            "6.12 extra",
            "rt",
            "-6.12",
            &"6".repeat(65),
        ] {
            let e = package_for(bad).unwrap_err().to_string();
            assert!(e.starts_with(&format!("--kernel {bad:?}: ")), "{e}");
            assert!(e.contains("digits first"), "{e}");
        }
    }

    #[test]
    fn kernel_choices_are_apt_arm64_kernels_in_version_order() {
        let names = "linux-image-6.12.117+deb12-arm64\nlinux-image-6.1.0-47-arm64\n\
                     linux-image-6.12-arm64\nlinux-image-6.1.0-47-amd64\n\
                     linux-image-arm64\nlinux-image-6.12.9+deb12-arm64\n\
                     linux-image-6.1.0-47-arm64-dbg\nlinux-image-rt-arm64\n\
                     linux-image-6.1.0-47-cloud-arm64\nlinux-image-6.12-rt-arm64\n";
        assert_eq!(
            kernel_choices(names),
            ["6.1.0-47", "6.12", "6.12.9+deb12", "6.12.117+deb12"]
        );
    }
}
