//! What the user puts into the guest beside mtex's own initramfs: a Debian user space
//! (`--packages`), their own files and directories (`--add`), and the workload's environment
//! (`--env`). Each is checked before anything is fetched or booted; the files go in as
//! newc archives of their own that the kernel unpacks before mtex's, so that mtex's files
//! (`/init`, busybox, `mtex-work`) are always its own.

use super::Args;
use super::initramfs::{self, Entry};
use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};

/// mtex's own files in the initramfs: nothing the user adds may take their place.
const RESERVED: &[&str] = &[
    "init",
    "bin/busybox",
    "bin/sh",
    "bin/mtex-work",
    "lib/efivarfs.ko.xz",
];

/// The most guest RAM Linux mode gives (`--ram-mib`'s bound).
const RAM_MIB_MAX: u64 = 3072;

/// One `--add HOST_PATH[:GUEST_PATH]`.
#[derive(Debug, PartialEq)]
pub struct Add {
    pub host: PathBuf,
    /// Where in the guest, without the leading `/`.
    pub guest: String,
}

/// Reads `--add HOST_PATH[:GUEST_PATH]`: the host path must exist (a file or a directory);
/// the guest path is absolute, climbs nowhere (`..`), and is not one of mtex's own files.
/// Without one, a file goes to /usr/local/bin/NAME (on the workload's PATH), a directory to
/// /opt/NAME.
pub fn parse_add(spec: &str) -> Result<Add> {
    let (host, guest) = match spec.split_once(':') {
        Some((h, g)) => (h, Some(g)),
        None => (spec, None),
    };
    let host = PathBuf::from(host);
    let Ok(meta) = std::fs::metadata(&host) else {
        bail!(
            "--add {spec}: {}: no such file or directory",
            host.display()
        );
    };
    if !meta.is_file() && !meta.is_dir() {
        bail!(
            "--add {spec}: {}: not a file or a directory",
            host.display()
        );
    }
    let name = host
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .with_context(|| format!("--add {spec}: {} has no name to give it", host.display()))?;
    let guest = match guest {
        Some(g) => g.to_string(),
        None if meta.is_dir() => format!("/opt/{name}"),
        None => format!("/usr/local/bin/{name}"),
    };
    let Some(rel) = guest.strip_prefix('/') else {
        bail!("--add {spec}: {guest}: the guest path is absolute (/usr/local/bin/NAME)");
    };
    let parts: Vec<&str> = rel.split('/').filter(|p| !p.is_empty()).collect();
    if parts.is_empty() || parts.iter().any(|p| *p == ".." || *p == ".") {
        bail!("--add {spec}: {guest}: a guest path names a place under / without . or ..");
    }
    if guest.contains(|c: char| c.is_control()) {
        bail!("--add {spec}: the guest path has a control character");
    }
    let guest = parts.join("/");
    if let Some(own) = RESERVED
        .iter()
        .find(|r| **r == guest || (meta.is_dir() && r.starts_with(&format!("{guest}/"))))
    {
        bail!("--add {spec}: /{own} is mtex's own (its init, shell and workload programs)");
    }
    Ok(Add { host, guest })
}

/// Reads `--env NAME=VALUE`: a shell variable's name, a value of one line.
pub fn parse_env(spec: &str) -> Result<(String, String)> {
    let Some((name, value)) = spec.split_once('=') else {
        bail!("--env {spec:?}: expected NAME=VALUE");
    };
    let name_ok = name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !name_ok {
        bail!("--env {spec:?}: {name:?} is not a variable's name (letters, digits and _)");
    }
    if value.contains(|c: char| c.is_control()) {
        bail!("--env {spec:?}: the value is one line, without control characters");
    }
    Ok((name.to_string(), value.to_string()))
}

/// The shell lines that give the workload its environment: `export NAME='VALUE'`, the value
/// quoted so that the shell takes it as it is.
pub fn exports(env: &[String]) -> Result<String> {
    let mut out = String::new();
    for spec in env {
        let (name, value) = parse_env(spec)?;
        out.push_str(&format!(
            "export {name}='{}'\n",
            value.replace('\'', r"'\''")
        ));
    }
    Ok(out)
}

/// Every option of this file checked, before anything is fetched or booted.
pub fn check(args: &Args) -> Result<()> {
    for p in &args.packages {
        crate::debian::packages::check_name(p).map_err(|e| anyhow::anyhow!(e))?;
    }
    for a in &args.add {
        parse_add(a)?;
    }
    for e in &args.env {
        parse_env(e)?;
    }
    Ok(())
}

/// The suite the packages come from: `--suite`, or the kernel's (trixie for a kernel of
/// the newer suites, Linux 7 and later; bookworm for the others).
pub fn suite(args: &Args) -> String {
    args.suite.clone().unwrap_or_else(|| {
        let newer = args
            .kernel
            .first()
            .is_some_and(|k| crate::debian::kernel::from_newer_suites(k));
        if newer { "trixie" } else { "bookworm" }.to_string()
    })
}

/// The archives that go before mtex's own: the packages' user space, then the added files;
/// and what is worth a note in the report (the packages' collisions, each also said here).
pub fn archives(args: &Args, dir: &Path) -> Result<(Vec<Vec<u8>>, Vec<String>)> {
    let mut out = Vec::new();
    let mut notes = Vec::new();
    if !args.packages.is_empty() {
        let suite = suite(args);
        let u = crate::debian::packages::user_space(dir, &suite, &args.packages, args.keep_gconv)?;
        for c in &u.collisions {
            eprintln!("mtex: user space: {c}");
            notes.push(format!("user space: {c}"));
        }
        out.push(u.archive);
    }
    if !args.add.is_empty() {
        let mut entries = Vec::new();
        for spec in &args.add {
            let a = parse_add(spec)?;
            parents(&a.guest, &mut entries);
            add_tree(&a.host, &a.guest, &mut entries).with_context(|| format!("--add {spec}"))?;
        }
        out.push(initramfs::write(entries)?);
    }
    Ok((out, notes))
}

/// The directories above `guest`, each an entry, so that the archive makes them first.
fn parents(guest: &str, entries: &mut Vec<Entry>) {
    let parts: Vec<&str> = guest.split('/').collect();
    for i in 1..parts.len() {
        entries.push(Entry::dir(&parts[..i].join("/")));
    }
}

/// `host` (a file, or a directory with all it holds) as entries at `guest`.
fn add_tree(host: &Path, guest: &str, entries: &mut Vec<Entry>) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::symlink_metadata(host)?;
    if meta.file_type().is_symlink() {
        let target = std::fs::read_link(host)?;
        entries.push(Entry::symlink(guest, &target.to_string_lossy()));
    } else if meta.is_dir() {
        entries.push(Entry::dir(guest));
        let mut children: Vec<PathBuf> = std::fs::read_dir(host)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        children.sort();
        for c in children {
            let name = c
                .file_name()
                .expect("a directory's entry")
                .to_string_lossy();
            let path = format!("{guest}/{name}");
            if RESERVED.contains(&path.as_str()) {
                bail!("{}: /{path} is mtex's own", c.display());
            }
            add_tree(&c, &path, entries)?;
        }
    } else if meta.is_file() {
        let bytes = std::fs::read(host).with_context(|| format!("reading {}", host.display()))?;
        entries.push(Entry::file(
            guest,
            meta.permissions().mode() & 0o7777,
            bytes,
        ));
    }
    Ok(())
}

/// The archives one after another, each from a 4-byte boundary, as the kernel reads a
/// concatenation of newc archives (Documentation/driver-api/early-userspace/buffer-format.rst).
pub fn concat(archives: Vec<Vec<u8>>) -> Vec<u8> {
    let mut out = Vec::new();
    for a in archives {
        out.extend_from_slice(&a);
        out.resize(out.len().next_multiple_of(4), 0);
    }
    out
}

/// The guest RAM an initramfs of `bytes` needs beside the kernel's own `ram_mib`: the
/// archive is in RAM while the kernel unpacks it into RAM, so twice its size more; refused
/// with the figures when that is more than Linux mode gives.
pub fn ram_mib(ram_mib: u64, bytes: usize) -> Result<u64> {
    let archive = (bytes as u64).div_ceil(1 << 20);
    if archive < 16 {
        return Ok(ram_mib);
    }
    let need = (512 + 2 * archive).next_multiple_of(64).max(ram_mib);
    if need > RAM_MIB_MAX {
        bail!(
            "the initramfs is {archive} MiB: unpacked beside the kernel it needs {need} MiB of \
             guest RAM, more than the {RAM_MIB_MAX} Linux mode gives; name fewer packages"
        );
    }
    if need > ram_mib {
        eprintln!("mtex: guest RAM {need} MiB (the initramfs is {archive} MiB)");
    }
    Ok(need)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_added_path_lands_under_root_and_never_on_mtexs_own() {
        let d = std::env::temp_dir().join(format!("mtex-add-{}", std::process::id()));
        std::fs::create_dir_all(d.join("tree/sub")).unwrap();
        std::fs::write(d.join("tool"), "x").unwrap();
        std::fs::write(d.join("tree/sub/f"), "y").unwrap();
        let tool = d.join("tool").display().to_string();
        assert_eq!(parse_add(&tool).unwrap().guest, "usr/local/bin/tool");
        let tree = d.join("tree").display().to_string();
        assert_eq!(parse_add(&tree).unwrap().guest, "opt/tree");
        assert_eq!(
            parse_add(&format!("{tool}:/etc//x.conf")).unwrap().guest,
            "etc/x.conf"
        );
        for (spec, want) in [
            (format!("{tool}:etc/x"), "the guest path is absolute"),
            (format!("{tool}:/../x"), "without . or .."),
            (format!("{tool}:/"), "without . or .."),
            (format!("{tool}:/init"), "/init is mtex's own"),
            (format!("{tree}:/bin"), "/bin/busybox is mtex's own"),
            ("/no/such/path".to_string(), "/no/such/path: no such file"),
        ] {
            let e = format!("{:#}", parse_add(&spec).unwrap_err());
            assert!(e.contains(want), "{spec}: {e}");
        }
        let mut entries = Vec::new();
        let a = parse_add(&tree).unwrap();
        parents(&a.guest, &mut entries);
        add_tree(&a.host, &a.guest, &mut entries).unwrap();
        let paths: Vec<&str> = entries.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths, ["opt", "opt/tree", "opt/tree/sub", "opt/tree/sub/f"]);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn the_environment_is_exported_as_given() {
        assert_eq!(
            exports(&["GLIBC_TUNABLES=glibc.mem.tagging=3".into(), "Q=it's".into()]).unwrap(),
            "export GLIBC_TUNABLES='glibc.mem.tagging=3'\nexport Q='it'\\''s'\n"
        );
        for bad in ["NOVALUE", "1X=a", "A-B=c", "A=\n"] {
            assert!(parse_env(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn archives_join_on_four_byte_boundaries_and_ram_grows_with_them() {
        assert_eq!(concat(vec![vec![1; 5], vec![2; 4]]).len(), 12);
        assert_eq!(ram_mib(512, 1 << 20).unwrap(), 512);
        assert_eq!(ram_mib(512, 100 << 20).unwrap(), 768);
        assert_eq!(ram_mib(1024, 100 << 20).unwrap(), 1024);
        let e = ram_mib(512, 2000 << 20).unwrap_err().to_string();
        assert!(e.contains("the initramfs is 2000 MiB"), "{e}");
    }
}
