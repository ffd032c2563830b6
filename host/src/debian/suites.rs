//! Kernels of Debian's newer suites (trixie-backports, sid: Linux 7.x), through an apt
//! configuration of mtex's own under `target/linux/apt/`: its sources, lists and cache live
//! there, for arm64 only, so that nothing is added to the machine's /etc (neither a suite
//! nor dpkg's arm64 architecture). The mirror is the one the machine's apt sources already
//! use.
//!
//! These packages are laid out differently from bookworm's: `linux-image-RELEASE` depends on
//! `linux-binary-RELEASE`, which holds the Image as `/usr/lib/modules/RELEASE/vmlinuz` and
//! the configuration beside it as `config`.

use super::kernel::{Kernel, Unpacked, kernel_choices, run};
use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The suites searched for kernels, newest kernels last.
const SUITES: &[&str] = &["trixie-backports", "sid"];

/// An apt configuration of mtex's own, under `target/linux/`, for some suites of Debian's
/// arm64 archive.
pub struct Apt {
    root: PathBuf,
    suites: Vec<String>,
}

/// The first Debian mirror URI in the machine's apt sources (one-line or deb822 format).
pub fn mirror_of(sources: &str) -> Option<String> {
    sources.lines().find_map(|l| {
        let l = l.trim();
        let uri = if let Some(rest) = l.strip_prefix("URIs:") {
            rest.split_whitespace().next()?
        } else if let Some(rest) = l.strip_prefix("deb ") {
            let rest = rest.trim_start();
            let rest = if rest.starts_with('[') {
                rest.split_once(']')?.1.trim_start()
            } else {
                rest
            };
            rest.split_whitespace().next()?
        } else {
            return None;
        };
        let path = uri.trim_end_matches('/');
        (path.ends_with("/debian") && !uri.contains("security")).then(|| uri.to_string())
    })
}

/// Every apt source file of the machine, concatenated.
fn machine_sources() -> String {
    let mut text = std::fs::read_to_string("/etc/apt/sources.list").unwrap_or_default();
    if let Ok(dir) = std::fs::read_dir("/etc/apt/sources.list.d") {
        let mut files: Vec<PathBuf> = dir.filter_map(|e| e.ok().map(|e| e.path())).collect();
        files.sort();
        for f in files {
            let name = f.to_string_lossy();
            if name.ends_with(".list") || name.ends_with(".sources") {
                text.push('\n');
                text.push_str(&std::fs::read_to_string(&f).unwrap_or_default());
            }
        }
    }
    text
}

impl Apt {
    /// The configuration for the newer suites' kernels under `dir` (`target/linux`),
    /// written on first use.
    pub fn new(dir: &Path) -> Result<Self> {
        Self::for_suites(dir, "apt", SUITES)
    }

    /// A configuration named `name` under `dir` for `suites`, written on first use.
    pub fn for_suites(dir: &Path, name: &str, suites: &[&str]) -> Result<Self> {
        let root = dir.join(name);
        let apt = Self {
            root,
            suites: suites.iter().map(|s| s.to_string()).collect(),
        };
        let list = apt.root.join("etc/sources.list");
        if !list.exists() {
            let mirror = mirror_of(&machine_sources()).context(
                "no Debian mirror in /etc/apt/sources* to take Debian's newer suites from",
            )?;
            for d in [
                "etc/sources.list.d",
                "etc/preferences.d",
                "lists/partial",
                "cache/archives/partial",
            ] {
                std::fs::create_dir_all(apt.root.join(d))?;
            }
            std::fs::write(apt.root.join("status"), "")?;
            let lines: String = suites
                .iter()
                .map(|s| {
                    format!(
                        "deb [arch=arm64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] \
                         {mirror} {s} main\n"
                    )
                })
                .collect();
            std::fs::write(&list, lines)?;
        }
        Ok(apt)
    }

    /// The suites it reads, in words (`trixie-backports and sid`).
    pub fn suites(&self) -> String {
        self.suites.join(" and ")
    }

    /// apt's options that make it use this configuration alone.
    pub fn options(&self) -> Vec<String> {
        let r = self.root.display();
        [
            format!("Dir::Etc={r}/etc"),
            format!("Dir::Etc::SourceList={r}/etc/sources.list"),
            format!("Dir::Etc::SourceParts={r}/etc/sources.list.d"),
            format!("Dir::Etc::Preferences={r}/etc/preferences"),
            format!("Dir::Etc::PreferencesParts={r}/etc/preferences.d"),
            format!("Dir::State::Lists={r}/lists"),
            format!("Dir::Cache={r}/cache"),
            format!("Dir::State::status={r}/status"),
            "APT::Architecture=arm64".into(),
            "APT::Architectures::=arm64".into(),
            "APT::Sandbox::User=root".into(),
            "Debug::NoLocking=1".into(),
        ]
        .into_iter()
        .flat_map(|o| ["-o".to_string(), o])
        .collect()
    }

    pub fn apt(&self, tool: &str, args: &[&str]) -> Result<String> {
        run(
            Command::new(tool).args(self.options()).args(args),
            &format!(
                "{tool} {} (mtex's apt configuration for {})",
                args.join(" "),
                self.suites.join(", ")
            ),
        )
    }

    /// Refreshes the lists when they are missing (the first use) or `force`.
    pub fn update(&self, force: bool) -> Result<()> {
        let empty = std::fs::read_dir(self.root.join("lists"))
            .map(|d| d.filter_map(|e| e.ok()).all(|e| e.file_name() == "partial"))
            .unwrap_or(true);
        if force || empty {
            eprintln!(
                "mtex: reading the package lists of Debian {}",
                self.suites()
            );
            self.apt("apt-get", &["update", "-qq"])?;
        }
        Ok(())
    }

    /// The arm64 kernel releases the suites have (`7.3.4+deb13`), oldest first.
    pub fn releases(&self) -> Result<Vec<String>> {
        self.update(false)?;
        let names = self.apt("apt-cache", &["pkgnames", "linux-image-"])?;
        Ok(kernel_choices(&names)
            .into_iter()
            .filter(|c| c.contains('+') && !c.ends_with("-16k"))
            .collect())
    }

    /// The release `choice` names: itself when the suites have it, or the newest release of
    /// the version `choice` gives (`7.3` → `7.3.4+deb13`); None when they have neither.
    pub fn resolve(&self, choice: &str) -> Result<Option<String>> {
        let all = self.releases()?;
        if all.iter().any(|r| r == choice) {
            return Ok(Some(choice.to_string()));
        }
        let prefix = format!("{choice}.");
        Ok(all
            .iter()
            .rev()
            .find(|r| r.starts_with(&prefix) || r.split('+').next() == Some(choice))
            .cloned())
    }

    /// Downloads and unpacks `pkg` under `dir`, unless already there.
    pub fn fetch(&self, pkg: &str, dir: &Path) -> Result<Unpacked> {
        let policy = self.apt("apt-cache", &["policy", pkg])?;
        let version = policy
            .lines()
            .find_map(|l| l.trim().strip_prefix("Candidate:"))
            .map(|v| v.trim().to_string())
            .filter(|v| v != "(none)")
            .with_context(|| format!("Debian {} have no package {pkg}", self.suites()))?;
        crate::debian::download_unpack(&self.options(), pkg, pkg, version, dir, true)
    }

    /// `pkg` at exactly `version`, under `dir`, unless already there.
    pub fn fetch_version(&self, pkg: &str, version: &str, dir: &Path) -> Result<Unpacked> {
        self.update(false)?;
        crate::debian::download_unpack(&self.options(), pkg, pkg, version.into(), dir, true)
    }

    /// The kernel of `release` (`7.3.4+deb13`), fetched into `dir`.
    pub fn kernel(&self, release: &str, dir: &Path) -> Result<Kernel> {
        let full = format!("{release}-arm64");
        let package = self.fetch(&format!("linux-binary-{full}"), dir)?;
        let modules = package.root.join("usr/lib/modules").join(&full);
        let image = modules.join("vmlinuz");
        if !image.is_file() {
            bail!(
                "{} has no /usr/lib/modules/{full}/vmlinuz (the Image this layout puts there)",
                package.name
            );
        }
        Ok(Kernel {
            config: modules.join("config"),
            package,
            release: full,
            image,
            sha256: String::new(),
            append: Vec::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mirror_is_taken_from_either_format_and_never_the_security_one() {
        let deb822 = "Types: deb\nURIs: http://deb.example/debian-security\nSuites: x\n\
                      Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm\n";
        assert_eq!(
            mirror_of(deb822).as_deref(),
            Some("http://mirror.example/debian")
        );
        let one_line =
            "# comment\ndeb [arch=amd64 signed-by=/k.gpg] http://m.example/debian/ bookworm main\n";
        assert_eq!(
            mirror_of(one_line).as_deref(),
            Some("http://m.example/debian/")
        );
        assert_eq!(
            mirror_of("deb https://packages.example/apt cloud main\n"),
            None
        );
    }
}
