//! A kernel the user has rather than one apt fetches: `--kernel PATH` to a Debian `.deb`, or
//! to an arm64 Image in any of the forms kernels ship in — the Image itself (`make Image`,
//! Debian's `vmlinuz`), gzip-compressed (`Image.gz`), or an EFI zboot image
//! (`vmlinuz.efi`, CONFIG_EFI_ZBOOT) whose payload is gzip or zstd. What cannot be unwrapped
//! is refused with the reason, before anything boots.
//!
//! Its symbols come from a `System.map` beside it (a build tree's, found from
//! `arch/arm64/boot/Image`), when there is a real one; else from the kallsyms boot every
//! kernel gets, kept by the Image's hash.

use crate::debian::kernel::{Kernel, Unpacked, run};
use anyhow::{Context, Result, bail};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The largest kernel file read, and the largest Image unwrapped (Debian's arm64 Image is
/// about 40 MiB).
pub const KERNEL_LIMIT: u64 = 256 << 20;

/// Where the arm64 Image header keeps its magic (`ARM\x64`), at offset 0x38.
const ARM64_MAGIC_AT: usize = 0x38;
const ARM64_MAGIC: &[u8; 4] = b"ARMd";

/// True when a `--kernel` choice is a path (it names a file, or looks like one) rather than a
/// Debian version.
pub fn is_path(choice: &str) -> bool {
    choice.contains('/') || choice.ends_with(".deb") || Path::new(choice).is_file()
}

/// The arm64 Image inside `bytes`, or why there is none.
pub fn unwrap_image(bytes: &[u8]) -> Result<Vec<u8>, String> {
    if is_image(bytes) {
        return Ok(bytes.to_vec());
    }
    if bytes.starts_with(&[0x1f, 0x8b]) {
        let image = inflate(bytes)?;
        return checked(image, "the gzip stream");
    }
    if bytes.len() >= 64 && &bytes[0..2] == b"MZ" && &bytes[4..8] == b"zimg" {
        // Linux's EFI zboot header (drivers/firmware/efi/libstub/zboot-header.S): payload
        // offset and size at 8 and 12, the compression's name from 24, NUL-terminated.
        let word = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        let (offset, size) = (word(8), word(12));
        let name_end = bytes[24..56].iter().position(|&b| b == 0).unwrap_or(32);
        let method = String::from_utf8_lossy(&bytes[24..24 + name_end]).into_owned();
        let payload = bytes
            .get(offset..offset.saturating_add(size))
            .ok_or_else(|| {
                format!(
                    "an EFI zboot image whose payload ({size} bytes at {offset:#x}) is past the \
                     file's end ({} bytes)",
                    bytes.len()
                )
            })?;
        let image = match method.as_str() {
            "gzip" => inflate(payload)?,
            "zstd" => unzstd(payload)?,
            other => {
                return Err(format!(
                    "an EFI zboot image compressed with {other:?}: mtex unwraps gzip and zstd \
                     (build with CONFIG_KERNEL_GZIP or CONFIG_KERNEL_ZSTD, or give the Image)"
                ));
            }
        };
        return checked(image, &format!("the zboot image's {method} payload"));
    }
    Err(
        "not an arm64 kernel: no Image header (ARM\\x64 at 0x38), gzip stream or EFI zboot \
         header"
            .into(),
    )
}

fn is_image(bytes: &[u8]) -> bool {
    bytes.get(ARM64_MAGIC_AT..ARM64_MAGIC_AT + 4) == Some(ARM64_MAGIC)
}

fn checked(image: Vec<u8>, what: &str) -> Result<Vec<u8>, String> {
    if is_image(&image) {
        Ok(image)
    } else {
        Err(format!("{what} holds no arm64 Image (no ARM\\x64 at 0x38)"))
    }
}

/// Reads at most [`KERNEL_LIMIT`] bytes from `r`.
fn bounded(r: impl Read, what: &str) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    r.take(KERNEL_LIMIT + 1)
        .read_to_end(&mut out)
        .map_err(|e| format!("{what}: {e}"))?;
    if out.len() as u64 > KERNEL_LIMIT {
        return Err(format!("{what} unpacks past {} MiB", KERNEL_LIMIT >> 20));
    }
    Ok(out)
}

fn inflate(bytes: &[u8]) -> Result<Vec<u8>, String> {
    bounded(flate2::read::GzDecoder::new(bytes), "the gzip stream")
}

fn unzstd(bytes: &[u8]) -> Result<Vec<u8>, String> {
    let d = ruzstd::decoding::StreamingDecoder::new(bytes)
        .map_err(|e| format!("the zstd stream: {e}"))?;
    bounded(d, "the zstd stream")
}

/// The kernel's release (`uname -r`) from its banner (`Linux version 6.12.117+deb12-arm64 …`).
pub fn release_of(image: &[u8]) -> Option<String> {
    let key = b"Linux version ";
    let at = image.windows(key.len()).position(|w| w == key)? + key.len();
    let rest = &image[at..image.len().min(at + 128)];
    let end = rest.iter().position(|&b| b == b' ' || b == 0)?;
    let r = std::str::from_utf8(&rest[..end]).ok()?;
    (!r.is_empty() && r.chars().all(|c| c.is_ascii_graphic())).then(|| r.to_string())
}

/// A System.map with the kernel's text symbols: Debian's packages ship a one-line stub
/// pointing at the -dbg package, which is not one.
pub fn real_system_map(text: &str) -> bool {
    text.lines()
        .filter(|l| matches!(l.split_whitespace().nth(1), Some("t" | "T")))
        .take(1000)
        .count()
        >= 1000
}

/// The kernel's text symbols (`ADDRESS t NAME` lines) from a file given with `--symbols`:
/// a System.map, a /proc/kallsyms dump, or the kernel's vmlinux (ELF, its symbol table read).
/// Anything else is refused naming the file.
pub fn symbols_file(path: &Path) -> Result<String> {
    let shown = path.display();
    let bytes = crate::input::read(path, "symbols", 2 << 30)
        .with_context(|| format!("--symbols {shown}"))?;
    if bytes.starts_with(b"\x7fELF") {
        use object::{Object, ObjectSymbol, SymbolKind};
        let elf = object::File::parse(&*bytes).map_err(|e| {
            anyhow::anyhow!("--symbols {shown}: an ELF file that cannot be read: {e}")
        })?;
        let mut text = String::new();
        for s in elf.symbols() {
            if s.kind() == SymbolKind::Text
                && let Ok(name) = s.name()
                && !name.is_empty()
            {
                text += &format!("{:016x} t {name}\n", s.address());
            }
        }
        if !real_system_map(&text) {
            bail!(
                "--symbols {shown}: an ELF file without a kernel's symbol table (a stripped vmlinux?)"
            );
        }
        return Ok(text);
    }
    let text = String::from_utf8_lossy(&bytes).into_owned();
    if !real_system_map(&text) {
        bail!(
            "--symbols {shown}: not a System.map, kallsyms dump or vmlinux (fewer than 1000 \
             `ADDRESS t NAME` lines)"
        );
    }
    Ok(text)
}

/// A System.map for the Image at `image`: beside it (`System.map`, `System.map-RELEASE`), or
/// at the top of the build tree an `arch/arm64/boot/Image` is in.
fn system_map_near(image: &Path, release: &str) -> Option<PathBuf> {
    let dir = image.parent()?;
    let mut candidates = vec![
        dir.join("System.map"),
        dir.join(format!("System.map-{release}")),
    ];
    if let Some(top) = dir.ancestors().nth(3) {
        candidates.push(top.join("System.map"));
    }
    candidates
        .into_iter()
        .find(|p| std::fs::read_to_string(p).is_ok_and(|t| real_system_map(&t)))
}

/// The kernel's configuration: Debian's `config-RELEASE` beside the Image, mtex's `config`
/// beside a kernel it built, or a build tree's `.config`. A path that does not exist when
/// none is found (the checks then go by the Image and its symbols).
fn config_near(image: &Path, release: &str, built: bool) -> PathBuf {
    let dir = image.parent().unwrap_or(Path::new("."));
    let mut candidates = vec![dir.join(format!("config-{release}"))];
    if built {
        candidates.push(dir.join("config"));
    }
    if let Some(top) = dir.ancestors().nth(3) {
        candidates.push(top.join(".config"));
    }
    candidates
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .unwrap_or_else(|| candidates.swap_remove(0))
}

/// A kernel from `path`: an Image in any of its forms, or a .deb holding one. The Image is
/// written unwrapped under `dir`; `system_map` is a real System.map found for it, if any.
pub fn kernel(path: &Path, dir: &Path) -> Result<(Kernel, Option<PathBuf>)> {
    let shown = path.display().to_string();
    if path.extension().is_some_and(|e| e == "deb") {
        return deb(path, dir);
    }
    let bytes = crate::input::read(path, "kernel", KERNEL_LIMIT)?;
    let image = unwrap_image(&bytes).map_err(|why| anyhow::anyhow!("--kernel {shown}: {why}"))?;
    let release = release_of(&image).with_context(|| {
        format!(
            "--kernel {shown}: the Image has no \"Linux version\" banner to take its release from"
        )
    })?;
    let out = dir.join("local");
    std::fs::create_dir_all(&out)?;
    let unwrapped = if image.len() == bytes.len() {
        path.to_path_buf()
    } else {
        let f = out.join(format!("{release}.Image"));
        std::fs::write(&f, &image)?;
        f
    };
    let map = system_map_near(path, &release);
    // A kernel `mtex kernel build` made says how it was built and how it boots.
    let built = crate::kernel_build::Built::beside(path);
    let config = config_near(path, &release, built.is_some());
    Ok((
        Kernel {
            package: Unpacked {
                name: shown,
                version: built.as_ref().map(|b| b.label()).unwrap_or_default(),
                root: path.parent().map_or_else(PathBuf::new, Path::to_path_buf),
            },
            config,
            release,
            image: unwrapped,
            sha256: String::new(),
            append: built.map(|b| b.append).unwrap_or_default(),
        },
        map,
    ))
}

/// A Debian kernel package given as a file: unpacked under `dir`, its Image found where
/// either layout keeps it.
fn deb(path: &Path, dir: &Path) -> Result<(Kernel, Option<PathBuf>)> {
    let shown = path.display().to_string();
    if !path.is_file() {
        bail!("--kernel {shown}: no such file");
    }
    let field = |f: &str| {
        run(
            Command::new("dpkg-deb").arg("-f").arg(path).arg(f),
            &format!("dpkg-deb -f {shown} {f}"),
        )
        .map(|v| v.trim().to_string())
    };
    let (name, version) = (field("Package")?, field("Version")?);
    let root = dir
        .join("local")
        .join(format!("{name}_{}", version.replace(':', "%3a")));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root)?;
    run(
        Command::new("dpkg-deb").arg("-x").arg(path).arg(&root),
        &format!("dpkg-deb -x {shown}"),
    )?;
    let mut images: Vec<PathBuf> = Vec::new();
    if let Ok(boot) = std::fs::read_dir(root.join("boot")) {
        images.extend(boot.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("vmlinuz-"))
        }));
    }
    if let Ok(modules) = std::fs::read_dir(root.join("usr/lib/modules")) {
        images.extend(
            modules
                .filter_map(|e| e.ok().map(|e| e.path().join("vmlinuz")))
                .filter(|p| p.is_file()),
        );
    }
    let Some(image) = images.first().cloned() else {
        bail!(
            "--kernel {shown}: package {name} holds no kernel (no /boot/vmlinuz-* or \
             /usr/lib/modules/*/vmlinuz; Debian's linux-image-7.x packages are empty and point \
             at linux-binary-*)"
        );
    };
    let (mut k, map) = kernel(&image, dir)?;
    k.package = Unpacked {
        name,
        version,
        root,
    };
    Ok((k, map))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn symbols_come_from_an_elf_symbol_table_or_a_map_and_nothing_else() {
        // This test program is an ELF with thousands of function symbols, as a vmlinux is.
        let exe = std::env::current_exe().unwrap();
        let text = symbols_file(&exe).unwrap();
        assert!(real_system_map(&text));
        assert!(
            text.lines().any(|l| l.ends_with(" t main")),
            "the program's own main"
        );
        let d = std::env::temp_dir().join(format!("mtex-symbols-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let map = d.join("System.map");
        std::fs::write(&map, text.lines().take(1200).collect::<Vec<_>>().join("\n")).unwrap();
        assert!(symbols_file(&map).is_ok());
        std::fs::write(&map, "ffff800080000000 T _text\n").unwrap();
        let e = symbols_file(&map).unwrap_err().to_string();
        assert!(
            e.contains("not a System.map, kallsyms dump or vmlinux"),
            "{e}"
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    /// An Image-shaped buffer: the magic at 0x38 and a banner.
    fn image() -> Vec<u8> {
        let mut v = vec![0u8; 4096];
        v[0x38..0x3c].copy_from_slice(ARM64_MAGIC);
        let banner = b"Linux version 7.3.4+deb13-arm64 (debian-kernel@lists.debian.org) #1 SMP";
        v[1000..1000 + banner.len()].copy_from_slice(banner);
        v
    }

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(bytes).unwrap();
        e.finish().unwrap()
    }

    fn zboot(method: &str, payload: &[u8]) -> Vec<u8> {
        let mut v = vec![0u8; 0x200];
        v[0..2].copy_from_slice(b"MZ");
        v[4..8].copy_from_slice(b"zimg");
        v[8..12].copy_from_slice(&0x200u32.to_le_bytes());
        v[12..16].copy_from_slice(&(payload.len() as u32).to_le_bytes());
        v[24..24 + method.len()].copy_from_slice(method.as_bytes());
        v.extend_from_slice(payload);
        v
    }

    #[test]
    fn every_wrapper_gives_the_same_image_and_release() {
        let i = image();
        assert_eq!(unwrap_image(&i).unwrap(), i);
        assert_eq!(unwrap_image(&gzip(&i)).unwrap(), i);
        assert_eq!(unwrap_image(&zboot("gzip", &gzip(&i))).unwrap(), i);
        let zstd =
            ruzstd::encoding::compress_to_vec(&i[..], ruzstd::encoding::CompressionLevel::Fastest);
        assert_eq!(unwrap_image(&zboot("zstd", &zstd)).unwrap(), i);
        assert_eq!(release_of(&i).as_deref(), Some("7.3.4+deb13-arm64"));
    }

    #[test]
    fn what_cannot_be_unwrapped_says_why() {
        let e = unwrap_image(&zboot("lzma", b"whatever")).unwrap_err();
        assert!(e.contains("\"lzma\"") && e.contains("gzip and zstd"), "{e}");
        let e = unwrap_image(b"#!/bin/sh\necho not a kernel\n").unwrap_err();
        assert!(e.starts_with("not an arm64 kernel"), "{e}");
        let e = unwrap_image(&gzip(b"just text")).unwrap_err();
        assert!(e.contains("holds no arm64 Image"), "{e}");
        let mut cut = zboot("gzip", &gzip(&image()));
        cut.truncate(0x210);
        let e = unwrap_image(&cut).unwrap_err();
        assert!(e.contains("past the file's end"), "{e}");
    }

    #[test]
    fn debians_stub_system_map_is_not_a_real_one() {
        assert!(!real_system_map(
            "ffffffffffffffff B The real System.map is in the linux-image-<version>-dbg package\n"
        ));
        let real: String = (0..1000)
            .map(|i| format!("ffff8000800{i:05x} T f{i}\n"))
            .collect();
        assert!(real_system_map(&real));
    }

    #[test]
    fn paths_are_told_from_versions() {
        assert!(is_path("./Image") && is_path("/boot/vmlinuz") && is_path("k.deb"));
        assert!(!is_path("6.12") && !is_path("7.3.4+deb13"));
    }
}
