//! A Debian user space for the guest: packages named by the user, their dependency closure
//! resolved by apt in an apt configuration of mtex's own for one suite (under
//! `target/linux/apt-SUITE/`, never the machine's /etc), fetched and unpacked with dpkg-deb,
//! trimmed of what no program reads at run time, and written as one newc archive that the
//! kernel unpacks before mtex's own (which therefore wins any path both have). The archive
//! is kept, named by the hash of the suite and the exact package versions.
//!
//! No maintainer script runs: what a `postinst` would make (users and groups, alternatives'
//! links, caches such as ld.so.cache or gdk-pixbuf's, a service's state directories) is not
//! there. The dynamic loader finds libraries in its default directories without a cache.

use super::Unpacked;
use super::suites::Apt;
use crate::linux::initramfs::Entry;
use anyhow::{Context, Result, bail};
use cpio::newc::ModeFileType;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The suites a user space may come from, each read with its updates and backports.
pub const SUITES: &[&str] = &["bookworm", "trixie", "sid"];

/// What is left out of every package: read by people, not programs.
const TRIMMED: &[&str] = &[
    "usr/share/doc/",
    "usr/share/man/",
    "usr/share/info/",
    "usr/share/locale/",
    "usr/share/lintian/",
    "usr/share/bug/",
    "usr/share/bash-completion/",
    "usr/share/zsh/",
    "usr/share/fish/",
    "usr/share/menu/",
];

/// Character-set converters: only iconv and programs that convert character sets read them.
const GCONV: &[&str] = &["usr/lib/aarch64-linux-gnu/gconv/", "usr/lib/gconv/"];

/// A package as the user names it: `name`, `name/suite` or `name=version`, in Debian's
/// spelling (lower-case letters, digits, `+ - .`; a suite of letters and `-`; a version of
/// letters, digits and `. + ~ - :`).
pub fn check_name(given: &str) -> Result<(), String> {
    let (name, rest) = match given.find(['/', '=']) {
        Some(i) => (&given[..i], Some(&given[i..])),
        None => (given, None),
    };
    let name_ok = name.len() >= 2
        && name.len() <= 64
        && name.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "+-.".contains(c));
    let rest_ok = match rest {
        None => true,
        Some(r) => {
            let (sep, v) = r.split_at(1);
            !v.is_empty()
                && v.len() <= 64
                && if sep == "/" {
                    v.chars().all(|c| c.is_ascii_lowercase() || c == '-')
                } else {
                    v.starts_with(|c: char| c.is_ascii_digit())
                        && v.chars()
                            .all(|c| c.is_ascii_alphanumeric() || ".+~-:".contains(c))
                }
        }
    };
    if name_ok && rest_ok {
        Ok(())
    } else {
        Err(format!(
            "--packages {given:?}: not a Debian package name (name, name/suite or \
             name=version: lower-case letters, digits, + - .)"
        ))
    }
}

/// The suite's apt configuration: the suite, its updates and its backports.
fn apt(dir: &Path, suite: &str) -> Result<Apt> {
    let list: Vec<String> = if suite == "sid" {
        vec!["sid".into()]
    } else {
        vec![
            suite.to_string(),
            format!("{suite}-updates"),
            format!("{suite}-backports"),
        ]
    };
    let list: Vec<&str> = list.iter().map(String::as_str).collect();
    Apt::for_suites(dir, &format!("apt-{suite}"), &list)
}

/// The packages apt would install for `names` on an empty arm64 system, with their exact
/// versions, in apt's order: `Inst NAME (VERSION …)` lines of a simulated install.
pub fn closure_of(simulation: &str) -> Vec<(String, String)> {
    simulation
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("Inst ")?;
            let (name, rest) = rest.split_once(' ')?;
            let version = rest.strip_prefix('(')?.split_whitespace().next()?;
            let name = name.split(':').next()?;
            Some((name.to_string(), version.to_string()))
        })
        .collect()
}

/// Resolves `names` in `suite`: every package of the closure with its version.
fn resolve(apt: &Apt, suite: &str, names: &[String]) -> Result<Vec<(String, String)>> {
    apt.update(false)?;
    let mut args = vec!["install", "-s", "-qq", "--no-install-recommends"];
    args.extend(names.iter().map(String::as_str));
    let out = apt.apt("apt-get", &args).map_err(|e| {
        let said = format!("{e:#}");
        // apt's own words name the package it could not find or satisfy.
        let line = said
            .rsplit_once("E: ")
            .map_or(said.as_str(), |(_, l)| l)
            .trim()
            .to_string();
        anyhow::anyhow!("--packages: Debian {suite} (arm64): {line}")
    })?;
    let closure = closure_of(&out);
    if closure.is_empty() {
        bail!("--packages: apt resolved nothing for {}", names.join(", "));
    }
    Ok(closure)
}

/// Whether a path of a package is left out (`gconv`: keep the character-set converters).
pub fn trimmed(path: &str, gconv: bool) -> bool {
    TRIMMED.iter().any(|t| path.starts_with(t))
        || (!gconv && GCONV.iter().any(|t| path.starts_with(t)))
}

/// A user space ready to go into the initramfs.
pub struct UserSpace {
    /// Its own newc archive.
    pub archive: Vec<u8>,
    /// Each package and its version, in apt's order.
    pub packages: Vec<(String, String)>,
    /// Paths two packages both had, with different contents: which wins.
    pub collisions: Vec<String>,
}

/// The user space of `names` from `suite`: resolved, fetched, trimmed, archived (or the
/// archive kept from an earlier run of the same versions). Says on stderr what it fetched,
/// how big it is and how long it took.
pub fn user_space(dir: &Path, suite: &str, names: &[String], gconv: bool) -> Result<UserSpace> {
    let start = Instant::now();
    let apt = apt(dir, suite)?;
    let packages = resolve(&apt, suite, names)?;
    let key = {
        use sha2::Digest;
        let mut h = sha2::Sha256::new();
        h.update(format!("{suite}\ngconv={gconv}\n"));
        for (n, v) in &packages {
            h.update(format!("{n}={v}\n"));
        }
        crate::kernel_build::hex(&h.finalize())
    };
    let cache = dir.join("userspace");
    std::fs::create_dir_all(&cache)?;
    let kept = cache.join(format!("{}.cpio", &key[..16]));
    let notes = cache.join(format!("{}.collisions", &key[..16]));
    if let Ok(archive) = std::fs::read(&kept) {
        let collisions = std::fs::read_to_string(&notes)
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect();
        eprintln!(
            "mtex: user space: {} packages from Debian {suite}, {:.1} MiB (kept from an \
             earlier run), {:.1} s",
            packages.len(),
            archive.len() as f64 / (1 << 20) as f64,
            start.elapsed().as_secs_f64()
        );
        return Ok(UserSpace {
            archive,
            packages,
            collisions,
        });
    }
    let unpack_dir = cache.join("debs");
    let mut unpacked = Vec::new();
    for (n, v) in &packages {
        unpacked.push(
            super::download_unpack(&apt.options(), n, n, v.clone(), &unpack_dir, false)
                .with_context(|| format!("--packages: fetching {n} {v}"))?,
        );
    }
    let (entries, collisions) = tree(&unpacked, gconv)?;
    let archive = crate::linux::initramfs::write(entries)?;
    std::fs::write(&kept, &archive)?;
    std::fs::write(&notes, collisions.join("\n"))?;
    eprintln!(
        "mtex: user space: {} packages from Debian {suite}, {:.1} MiB, fetched and unpacked \
         in {:.1} s",
        packages.len(),
        archive.len() as f64 / (1 << 20) as f64,
        start.elapsed().as_secs_f64()
    );
    Ok(UserSpace {
        archive,
        packages,
        collisions,
    })
}

/// One path of the tree: what it is, and which package gave it.
struct Node {
    entry: Entry,
    from: String,
}

/// The packages' files as archive entries (directories first, then the rest, each path once:
/// the later package in apt's order wins a collision, which is said), and the dynamic
/// loader where binaries look for it when only the merged-/usr place has it.
fn tree(packages: &[Unpacked], gconv: bool) -> Result<(Vec<Entry>, Vec<String>)> {
    let mut nodes: BTreeMap<String, Node> = BTreeMap::new();
    let mut collisions = Vec::new();
    for p in packages {
        let mut stack = vec![p.root.clone()];
        while let Some(d) = stack.pop() {
            let mut children: Vec<PathBuf> = std::fs::read_dir(&d)
                .with_context(|| format!("reading {}", d.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .collect();
            children.sort();
            for c in children {
                let rel = c
                    .strip_prefix(&p.root)
                    .expect("under its root")
                    .to_string_lossy()
                    .into_owned();
                if rel == ".unpacked" {
                    continue;
                }
                let meta = std::fs::symlink_metadata(&c)?;
                let as_dir = format!("{rel}/");
                if trimmed(&as_dir, gconv) || trimmed(&rel, gconv) {
                    continue;
                }
                let entry = if meta.file_type().is_symlink() {
                    let target = std::fs::read_link(&c)?;
                    Entry::symlink(&rel, &target.to_string_lossy())
                } else if meta.is_dir() {
                    stack.push(c.clone());
                    Entry::dir(&rel)
                } else if meta.is_file() {
                    use std::os::unix::fs::PermissionsExt;
                    Entry::file(&rel, meta.permissions().mode() & 0o7777, std::fs::read(&c)?)
                } else {
                    continue;
                };
                if let Some(old) = nodes.get(&rel)
                    && !matches!(old.entry.kind, ModeFileType::Directory)
                    && (old.entry.data != entry.data || old.entry.mode != entry.mode)
                {
                    collisions.push(format!(
                        "/{rel}: in {} and {}; {}'s is kept",
                        old.from, p.name, p.name
                    ));
                }
                if nodes
                    .get(&rel)
                    .is_none_or(|old| !matches!(old.entry.kind, ModeFileType::Directory))
                {
                    nodes.insert(
                        rel,
                        Node {
                            entry,
                            from: p.name.clone(),
                        },
                    );
                }
            }
        }
    }
    // Binaries ask for /lib/ld-linux-aarch64.so.1; a merged-/usr libc6 ships it under /usr
    // and leaves /lib's link to base-files, which the initramfs has not.
    const LOADER: &str = "lib/ld-linux-aarch64.so.1";
    if !nodes.contains_key(LOADER) && nodes.contains_key(&format!("usr/{LOADER}")) {
        nodes.insert(
            LOADER.into(),
            Node {
                entry: Entry::symlink(LOADER, &format!("/usr/{LOADER}")),
                from: "mtex".into(),
            },
        );
    }
    // Directories before what they hold: a BTreeMap's order has every parent first.
    let mut entries: Vec<Entry> = Vec::new();
    let mut made: std::collections::BTreeSet<String> = std::collections::BTreeSet::new();
    for (path, node) in nodes {
        // A parent no package listed (a link's directory) is made first.
        let mut parent = Path::new(&path).parent();
        let mut missing = Vec::new();
        while let Some(p) = parent.filter(|p| !p.as_os_str().is_empty()) {
            let s = p.to_string_lossy().into_owned();
            if made.contains(&s) {
                break;
            }
            missing.push(s);
            parent = p.parent();
        }
        for m in missing.into_iter().rev() {
            entries.push(Entry::dir(&m));
            made.insert(m);
        }
        if matches!(node.entry.kind, ModeFileType::Directory) {
            if made.insert(path) {
                entries.push(node.entry);
            }
        } else {
            entries.push(node.entry);
        }
    }
    Ok((entries, collisions))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_debians_and_nothing_else() {
        for good in [
            "hello",
            "linux-perf",
            "libstdc++6",
            "linux-perf/bookworm-backports",
            "memcached=1.6.18-1",
        ] {
            assert!(check_name(good).is_ok(), "{good}");
        }
        for bad in [
            "", "a", "Hello", "-rf", "x;rm", "../x", "a/B", "a=", "a=x1", "a b",
        ] {
            let e = check_name(bad).unwrap_err();
            assert!(e.starts_with(&format!("--packages {bad:?}")), "{e}");
        }
    }

    #[test]
    fn the_closure_is_read_from_apts_simulation() {
        let sim = "NOTE: This is only a simulation!\n\
                   Inst gcc-12-base (12.2.0-14+deb12u1 Debian:12.11/stable [arm64])\n\
                   Inst libc6 (2.36-9+deb12u10 Debian:12.11/stable [arm64])\n\
                   Conf libc6 (2.36-9+deb12u10 Debian:12.11/stable [arm64])\n\
                   Inst hello:arm64 (2.10-3 Debian:12.11/stable [arm64])\n";
        assert_eq!(
            closure_of(sim),
            [
                ("gcc-12-base".to_string(), "12.2.0-14+deb12u1".to_string()),
                ("libc6".into(), "2.36-9+deb12u10".into()),
                ("hello".into(), "2.10-3".into()),
            ]
        );
    }

    #[test]
    fn documentation_and_locales_are_trimmed_gconv_on_request() {
        assert!(trimmed("usr/share/doc/libc6/copyright", false));
        assert!(trimmed("usr/share/man/", false));
        assert!(!trimmed("usr/bin/perf", false));
        assert!(!trimmed("usr/share/perl5/x.pm", false));
        assert!(trimmed("usr/lib/aarch64-linux-gnu/gconv/UTF-16.so", false));
        assert!(!trimmed("usr/lib/aarch64-linux-gnu/gconv/UTF-16.so", true));
    }

    /// Two packages: a collision is said and the later one's kept, trimmed paths are gone,
    /// every directory comes before what it holds, and the merged-/usr loader gets its link.
    #[test]
    fn the_tree_keeps_one_of_each_path_and_says_which() {
        let base = std::env::temp_dir().join(format!("mtex-userspace-{}", std::process::id()));
        let mk = |pkg: &str, files: &[(&str, &str)]| {
            let root = base.join(pkg);
            for (p, body) in files {
                let f = root.join(p);
                std::fs::create_dir_all(f.parent().unwrap()).unwrap();
                std::fs::write(f, body).unwrap();
            }
            Unpacked {
                name: pkg.into(),
                version: "1".into(),
                root,
            }
        };
        let a = mk(
            "libc6",
            &[
                ("usr/lib/ld-linux-aarch64.so.1", "ld"),
                ("usr/share/doc/libc6/copyright", "c"),
                ("etc/x.conf", "a"),
            ],
        );
        let b = mk("other", &[("etc/x.conf", "b"), ("usr/bin/tool", "t")]);
        let (entries, collisions) = tree(&[a, b], false).unwrap();
        assert_eq!(
            collisions,
            ["/etc/x.conf: in libc6 and other; other's is kept"]
        );
        let paths: Vec<&str> = entries.iter().map(|e| e.path.as_str()).collect();
        assert!(!paths.iter().any(|p| p.contains("share/doc")), "{paths:?}");
        let conf = entries.iter().find(|e| e.path == "etc/x.conf").unwrap();
        assert_eq!(conf.data, b"b");
        let link = entries
            .iter()
            .find(|e| e.path == "lib/ld-linux-aarch64.so.1")
            .unwrap();
        assert_eq!(link.data, b"/usr/lib/ld-linux-aarch64.so.1");
        for (i, e) in entries.iter().enumerate() {
            if let Some(parent) = Path::new(&e.path)
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
            {
                let parent = parent.to_string_lossy();
                assert!(
                    paths[..i].contains(&parent.as_ref()),
                    "{} before its directory {parent}: {paths:?}",
                    e.path
                );
            }
        }
        let _ = std::fs::remove_dir_all(&base);
    }
}
