//! Building the hypervisor and guest images, and turning the guest ELF into an arm64 Image
//! (the flat file a Linux bootloader loads).

use anyhow::{Context, Result, bail};
use mtex_platform::guest_vm;
use object::{Object, ObjectSegment};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The workspace root (this crate lives in `host/`).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Paths of the built images.
pub struct Images {
    /// The hypervisor's ELF (symbols, for reading PCs).
    pub hyp_elf: PathBuf,
    /// The hypervisor as an arm64 Image (flat, position-independent): what `qemu -kernel`
    /// and the UEFI loader load.
    pub hyp_image: PathBuf,
    /// The guest kernel as an arm64 Image.
    pub guest_image: PathBuf,
    /// The guest's ELF (symbols, for naming PCs).
    pub guest_elf: PathBuf,
}

fn cargo(alias: &str, root: &Path) -> Result<()> {
    let out = Command::new(env!("CARGO"))
        .arg(alias)
        .arg("--quiet")
        .current_dir(root)
        .output()
        .with_context(|| format!("running cargo {alias}"))?;
    if !out.status.success() {
        bail!(
            "cargo {alias} failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

/// The images, built once per process: the QEMU test binaries share them across their tests
/// (a failure to build fails the test that asked first).
pub fn built() -> &'static Images {
    static IMAGES: std::sync::OnceLock<Images> = std::sync::OnceLock::new();
    IMAGES.get_or_init(|| build().expect("building the images"))
}

/// Builds both images (cargo is quiet and fast when nothing changed) and writes the flat
/// Images next to their ELFs.
pub fn build() -> Result<Images> {
    let root = workspace_root();
    for alias in ["build-hyp", "build-guest"] {
        cargo(alias, &root)?;
    }
    let images = root.join("target/images");
    let hyp_elf = images.join("aarch64-unknown-none-softfloat/release/mtex-hyp");
    let guest_elf = guest_elf_path();
    let hyp_image = hyp_elf.with_extension("img");
    let guest_image = guest_elf.with_extension("img");

    let elf = std::fs::read(&hyp_elf)?;
    check_hyp_relocations(&elf)?;
    let flat = flatten_elf(&elf)?;
    if flat.base != 0 {
        bail!(
            "the hypervisor must be linked at 0 (position-independent), not {:#x}",
            flat.base
        );
    }
    publish(&hyp_image, &flat.bytes)?;

    let flat = flatten_elf(&std::fs::read(&guest_elf)?)?;
    publish(&guest_image, &flat.bytes)?;
    if flat.base != guest_vm::IMAGE_ADDR {
        bail!(
            "guest linked at {:#x}, its machine loads it at {:#x} (platform guest_vm)",
            flat.base,
            guest_vm::IMAGE_ADDR
        );
    }
    Ok(Images {
        hyp_elf,
        hyp_image,
        guest_image,
        guest_elf,
    })
}

/// Puts `bytes` at `path` so that a QEMU reading the file meanwhile (another test, another
/// `mtex` process) never sees it truncated: nothing is written when the file already holds
/// them, and otherwise a new file replaces the old one by rename (a reader keeps the old one).
fn publish(path: &Path, bytes: &[u8]) -> Result<()> {
    if std::fs::read(path).is_ok_and(|old| old == bytes) {
        return Ok(());
    }
    // Unique to this call: two threads of one process (tests) may publish at once.
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = path.with_extension(format!("img.{}.{n}.tmp", std::process::id()));
    std::fs::write(&tmp, bytes).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("replacing {}", path.display()))
}

/// Where `build` leaves the guest's ELF (it may not have been built yet).
pub fn guest_elf_path() -> PathBuf {
    workspace_root().join("target/images/aarch64-unknown-none-softfloat/release/mtex-guest")
}

/// Builds Linux mode's workload programs (static aarch64 Linux binaries); returns
/// `mtex-work`.
pub fn build_workloads() -> Result<PathBuf> {
    let root = workspace_root();
    cargo("build-workloads", &root)?;
    Ok(root.join("target/images/aarch64-unknown-linux-musl/release/mtex-work"))
}

/// Builds the oracle, the QEMU plugin that counts Linux-mode windows from QEMU's own hooks
/// (`oracle/`); returns its shared library.
pub fn build_oracle() -> Result<PathBuf> {
    let root = workspace_root();
    cargo("build-oracle", &root)?;
    Ok(root.join("target/images/release/libmtex_oracle.so"))
}

/// Builds the UEFI loader; returns its .efi.
pub fn build_loader() -> Result<PathBuf> {
    let root = workspace_root();
    cargo("build-loader", &root)?;
    Ok(root.join("target/images/aarch64-unknown-uefi/release/mtex-loader.efi"))
}

/// ELF type of the only relocation the hypervisor's `_start` applies.
const R_AARCH64_RELATIVE: u32 = 1027;

/// The hypervisor relocates itself with a loop that knows one relocation type: refuse an
/// image that needs any other (it would hang at its first instruction).
pub fn check_hyp_relocations(elf: &[u8]) -> Result<usize> {
    let file = object::File::parse(elf).context("hypervisor ELF")?;
    let mut n = 0;
    for (at, r) in file.dynamic_relocations().into_iter().flatten() {
        match r.flags() {
            object::RelocationFlags::Elf { r_type } if r_type == R_AARCH64_RELATIVE => n += 1,
            other => bail!("the hypervisor has a relocation it cannot apply at {at:#x}: {other:?}"),
        }
    }
    Ok(n)
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

#[cfg(test)]
mod tests {
    use super::publish;
    use std::io::Read;

    /// A reader that opened the image before it was rebuilt reads the whole old image, never
    /// a truncated file; the same bytes again leave the file untouched.
    #[test]
    fn a_reader_of_the_old_image_is_never_cut_short() {
        let dir = std::env::temp_dir().join(format!("mtex-publish-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("guest.img");
        publish(&path, b"old image").unwrap();
        let mut reader = std::fs::File::open(&path).unwrap();
        let before = std::fs::metadata(&path).unwrap().modified().unwrap();
        publish(&path, b"old image").unwrap();
        assert_eq!(
            std::fs::metadata(&path).unwrap().modified().unwrap(),
            before
        );
        publish(&path, b"new").unwrap();
        let mut seen = String::new();
        reader.read_to_string(&mut seen).unwrap();
        assert_eq!(seen, "old image");
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
        assert_eq!(
            std::fs::read_dir(&dir).unwrap().count(),
            1,
            "no temporary file left"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
