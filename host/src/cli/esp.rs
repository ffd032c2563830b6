//! The ESP tree `mtex esp` writes: the UEFI loader at the removable-media path, the two
//! images and the run's options, all in one directory the loader reads from its own.
//!
//! ```text
//! EFI/BOOT/BOOTAA64.EFI     the loader (loader/)
//! EFI/BOOT/mtex.cfg         which files to load; what to do on an error
//! EFI/BOOT/mtex-hyp.bin     the hypervisor's arm64 Image
//! EFI/BOOT/mtex-guest.bin   the guest kernel's arm64 Image
//! EFI/BOOT/mtex-options.txt the mtex.* options (the command line of a -kernel run)
//! ```

use crate::images::{self, Images};
use crate::qemu;
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// What the loader does when it cannot boot the hypervisor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum OnError {
    /// Return an error status to the firmware (its boot manager takes over): for machines a
    /// person is watching.
    Return,
    /// Power the machine off: for automated runs, which must end.
    Shutdown,
}

impl OnError {
    fn as_str(self) -> &'static str {
        match self {
            OnError::Return => "return",
            OnError::Shutdown => "shutdown",
        }
    }
}

/// The directory of the loader and its files inside an ESP rooted at `root`.
pub fn boot_dir(root: &Path) -> PathBuf {
    root.join("EFI").join("BOOT")
}

/// Writes the tree under `root` (created if missing; the files mtex owns are replaced).
pub fn write(
    root: &Path,
    images: &Images,
    loader: &Path,
    cmdline: &str,
    on_error: OnError,
) -> Result<()> {
    let dir = boot_dir(root);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let copy = |from: &Path, name: &str| {
        std::fs::copy(from, dir.join(name))
            .with_context(|| format!("copying {} to {}", from.display(), dir.join(name).display()))
    };
    copy(loader, "BOOTAA64.EFI")?;
    copy(&images.hyp_image, "mtex-hyp.bin")?;
    copy(&images.guest_image, "mtex-guest.bin")?;
    let write = |name: &str, text: String| {
        std::fs::write(dir.join(name), text)
            .with_context(|| format!("writing {}", dir.join(name).display()))
    };
    write("mtex-options.txt", format!("{cmdline}\n"))?;
    write(
        "mtex.cfg",
        format!(
            "# mtex UEFI loader configuration (written by `mtex esp`). Paths are relative to\n\
             # this directory.\n\
             hyp = mtex-hyp.bin\n\
             guest = mtex-guest.bin\n\
             options = mtex-options.txt\n\
             # return: hand the error back to the firmware; shutdown: power off.\n\
             on_error = {}\n",
            on_error.as_str()
        ),
    )?;
    Ok(())
}

/// An ESP for install mode: the loader installs the hypervisor under the firmware, then
/// starts `kernel` if there is one (a Linux Image, whose EFI stub runs as an EFI
/// application, with its initramfs and command line), or else goes back to the firmware's
/// boot manager, which boots its next option (the machine's own OS) at EL1, under the
/// hypervisor.
///
/// ```text
/// EFI/BOOT/BOOTAA64.EFI      the loader
/// EFI/BOOT/mtex.cfg          mode = install [, kernel = Image, kernel_args = initrd=… …]
/// EFI/BOOT/mtex-hyp.bin      the hypervisor
/// EFI/BOOT/mtex-options.txt  the hypervisor's mtex.* options
/// EFI/BOOT/Image             the kernel, if one is given
/// EFI/BOOT/initrd.img        its initramfs
/// ```
pub struct Install<'a> {
    pub hyp_image: &'a Path,
    pub loader: &'a Path,
    pub options: &'a str,
    pub kernel: Option<Kernel<'a>>,
    pub on_error: OnError,
}

/// The kernel an install-mode ESP starts.
pub struct Kernel<'a> {
    pub image: &'a Path,
    pub initrd: &'a Path,
    /// The kernel's command line, without `initrd=` (added here).
    pub args: &'a str,
}

/// Writes an install-mode tree under `root`.
pub fn write_install(root: &Path, i: &Install) -> Result<()> {
    let dir = boot_dir(root);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut files = vec![(i.loader, "BOOTAA64.EFI"), (i.hyp_image, "mtex-hyp.bin")];
    if let Some(k) = &i.kernel {
        files.extend([(k.image, "Image"), (k.initrd, "initrd.img")]);
    }
    for (from, name) in files {
        std::fs::copy(from, dir.join(name)).with_context(|| {
            format!("copying {} to {}", from.display(), dir.join(name).display())
        })?;
    }
    let write = |name: &str, text: String| {
        std::fs::write(dir.join(name), text)
            .with_context(|| format!("writing {}", dir.join(name).display()))
    };
    write("mtex-options.txt", format!("{}\n", i.options))?;
    let kernel = match &i.kernel {
        Some(k) => format!(
            "# The kernel to start once installed, and its command line.\n\
             kernel = Image\n\
             kernel_args = initrd=\\EFI\\BOOT\\initrd.img {}\n",
            k.args
        ),
        None => "# No kernel: back to the boot manager, which boots its next option.\n".into(),
    };
    write(
        "mtex.cfg",
        format!(
            "# mtex UEFI loader configuration (written by `mtex esp`). Paths are relative to\n\
             # this directory.\n\
             # install: the hypervisor goes under the firmware, which goes on at EL1.\n\
             mode = install\n\
             hyp = mtex-hyp.bin\n\
             options = mtex-options.txt\n\
             {kernel}\
             # return: hand an error back to the firmware (before anything is installed);\n\
             # shutdown: power off.\n\
             on_error = {}\n",
            i.on_error.as_str()
        ),
    )?;
    Ok(())
}

/// `mtex esp`.
#[derive(clap::Args)]
pub struct Args {
    /// Directory to write (created if missing).
    pub dir: PathBuf,
    /// Guest program, as for `mtex run`.
    #[arg(long, default_value = "kernel")]
    pub guest: String,
    /// More `mtex.<key>=<value>` options, as for `mtex run`.
    #[arg(long = "opt", value_name = "KEY=VALUE")]
    pub opts: Vec<String>,
    /// What the loader does on an error: return to the firmware, or power off.
    #[arg(long, value_enum, default_value = "return")]
    pub on_error: OnError,
    /// Install mode: the loader installs the hypervisor under the firmware and goes back
    /// to its boot manager, which boots its next option (the machine's own OS) at EL1
    /// under the hypervisor (docs/uefi.md#install-mode). No guest program runs: --guest is
    /// refused with it; --opt gives the hypervisor's options.
    #[arg(long, conflicts_with = "guest")]
    pub install: bool,
}

pub fn run(args: Args) -> Result<ExitCode> {
    let Args {
        dir,
        guest,
        opts,
        on_error,
        install,
    } = args;
    let line = qemu::cmdline(&guest, &opts)?;
    let images = images::build()?;
    let loader = images::build_loader()?;
    if install {
        // The hypervisor's own options only: no guest program runs. They are checked
        // as for `spin`, a program with no options of its own, and its name dropped.
        let options = qemu::cmdline("spin", &opts)?
            .split_whitespace()
            .filter(|w| !w.starts_with("mtex.guest="))
            .collect::<Vec<_>>()
            .join(" ");
        let i = Install {
            hyp_image: &images.hyp_image,
            loader: &loader,
            options: &options,
            kernel: None,
            on_error,
        };
        write_install(&dir, &i)?;
    } else {
        write(&dir, &images, &loader, &line, on_error)?;
    }
    println!(
        "mtex: wrote {} (copy its contents to the root of a FAT-formatted ESP or USB stick)",
        boot_dir(&dir).display()
    );
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tree_has_every_file_the_loader_reads() {
        let tmp = std::env::temp_dir().join(format!("mtex-esp-test-{}", std::process::id()));
        let src = tmp.join("src");
        std::fs::create_dir_all(&src).unwrap();
        for f in ["hyp", "guest", "loader"] {
            std::fs::write(src.join(f), f).unwrap();
        }
        let images = Images {
            hyp_elf: src.join("hyp"),
            hyp_image: src.join("hyp"),
            guest_image: src.join("guest"),
            guest_elf: src.join("guest"),
        };
        let root = tmp.join("esp");
        write(
            &root,
            &images,
            &src.join("loader"),
            "mtex.guest=trace",
            OnError::Shutdown,
        )
        .unwrap();
        let dir = boot_dir(&root);
        assert_eq!(
            std::fs::read_to_string(dir.join("BOOTAA64.EFI")).unwrap(),
            "loader"
        );
        assert_eq!(
            std::fs::read_to_string(dir.join("mtex-hyp.bin")).unwrap(),
            "hyp"
        );
        assert_eq!(
            std::fs::read_to_string(dir.join("mtex-guest.bin")).unwrap(),
            "guest"
        );
        assert_eq!(
            std::fs::read_to_string(dir.join("mtex-options.txt")).unwrap(),
            "mtex.guest=trace\n"
        );
        let cfg = std::fs::read_to_string(dir.join("mtex.cfg")).unwrap();
        assert!(cfg.contains("on_error = shutdown"), "{cfg}");
        std::fs::remove_dir_all(&tmp).unwrap();
    }
}
