//! Building the hypervisor and guest images, and turning the guest ELF into an arm64 Image
//! (the flat file a Linux bootloader loads).

use anyhow::{Context, Result, bail};
use object::{Object, ObjectSegment};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The workspace root (this crate lives in `scripts/`).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Paths of the built images.
pub struct Images {
    pub hyp_elf: PathBuf,
    pub guest_image: PathBuf,
}

/// Builds both images (cargo is quiet and fast when nothing changed) and writes the guest
/// Image next to its ELF.
pub fn build() -> Result<Images> {
    let root = workspace_root();
    for alias in ["build-hyp", "build-guest"] {
        let out = Command::new(env!("CARGO"))
            .arg(alias)
            .arg("--quiet")
            .current_dir(&root)
            .output()
            .with_context(|| format!("running cargo {alias}"))?;
        if !out.status.success() {
            bail!(
                "cargo {alias} failed:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    let images = root.join("target/images");
    let hyp_elf = images.join("aarch64-unknown-none-softfloat/release/mtex-hyp");
    let guest_elf = images.join("aarch64-unknown-none-softfloat/release/mtex-guest");
    let guest_image = guest_elf.with_extension("img");
    let flat = flatten_elf(&std::fs::read(&guest_elf)?)?;
    std::fs::write(&guest_image, flat.bytes)?;
    if flat.base != mtex_platform_guest_addr() {
        bail!(
            "guest linked at {:#x}, the platform loads it at {:#x}",
            flat.base,
            mtex_platform_guest_addr()
        );
    }
    Ok(Images {
        hyp_elf,
        guest_image,
    })
}

/// Where QEMU must place the guest Image.
pub fn mtex_platform_guest_addr() -> u64 {
    use mtex_platform::Platform;
    mtex_platform::QemuVirt::GUEST_IMAGE_ADDR as u64
}

/// An ELF's loadable segments laid out flat from the lowest address.
pub struct Flat {
    pub base: u64,
    pub bytes: Vec<u8>,
}

/// Lays the file contents of all loadable segments out by physical address; the gaps and the
/// zero-initialised tails stay out (the Image header's image_size covers .bss).
pub fn flatten_elf(elf: &[u8]) -> Result<Flat> {
    let file = object::File::parse(elf).context("guest ELF")?;
    let segs: Vec<_> = file
        .segments()
        .filter_map(|s| {
            let (off, size) = s.file_range();
            (size > 0).then(|| (s.address(), &elf[off as usize..(off + size) as usize]))
        })
        .collect();
    let base = segs
        .iter()
        .map(|s| s.0)
        .min()
        .context("no loadable segment")?;
    let end = segs.iter().map(|s| s.0 + s.1.len() as u64).max().unwrap();
    let mut bytes = vec![0u8; (end - base) as usize];
    for (addr, data) in segs {
        let at = (addr - base) as usize;
        bytes[at..at + data.len()].copy_from_slice(data);
    }
    Ok(Flat { base, bytes })
}
