//! The initramfs Linux mode boots: busybox-static, the `/init` script that runs the workload
//! and powers off, and the workload programs. Written as a newc cpio (the format the kernel
//! unpacks, Documentation/driver-api/early-userspace/buffer-format.rst) by the cpio crate.

use anyhow::Result;
use cpio::NewcBuilder;
use cpio::newc::ModeFileType;
use std::io::Cursor;

/// One file of the archive.
pub struct Entry {
    pub path: String,
    pub mode: u32,
    pub kind: ModeFileType,
    pub data: Vec<u8>,
}

impl Entry {
    pub fn dir(path: &str) -> Self {
        Entry {
            path: path.into(),
            mode: 0o755,
            kind: ModeFileType::Directory,
            data: Vec::new(),
        }
    }
    pub fn file(path: &str, mode: u32, data: Vec<u8>) -> Self {
        Entry {
            path: path.into(),
            mode,
            kind: ModeFileType::Regular,
            data,
        }
    }
    pub fn symlink(path: &str, target: &str) -> Self {
        Entry {
            path: path.into(),
            mode: 0o777,
            kind: ModeFileType::Symlink,
            data: target.as_bytes().to_vec(),
        }
    }
}

/// The archive's bytes.
pub fn write(entries: Vec<Entry>) -> Result<Vec<u8>> {
    let inputs = entries.into_iter().map(|e| {
        let links = if matches!(e.kind, ModeFileType::Directory) {
            2
        } else {
            1
        };
        let b = NewcBuilder::new(&e.path)
            .mode(e.mode)
            .set_mode_file_type(e.kind)
            .uid(0)
            .gid(0)
            .nlink(links);
        (b, Cursor::new(e.data))
    });
    Ok(cpio::write_cpio(inputs, Vec::new())?)
}

/// The `/init` script: mounts, then either the kernel-symbol dump (the symbol boot: no
/// workload) or the workload, and power-off. Lines starting `mtex-linux:` are markers the
/// host reads on Linux's console; between `workload` and `done` is the workload's output.
pub fn init_script(workload: &str) -> String {
    format!(
        r#"#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
# Programs of a Debian user space and the user's own, as a login shell would find them.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
# Booted by UEFI: the EFI variables, where the doorbell's address is (mtex-work reads it);
# efivarfs is a module in distribution kernels.
if [ -d /sys/firmware/efi/efivars ]; then
  [ -e /lib/efivarfs.ko.xz ] && insmod /lib/efivarfs.ko.xz
  mount -t efivarfs efivarfs /sys/firmware/efi/efivars
fi
# The loopback network, for a client and a server of the same machine (memcached and its
# load generator); a kernel built without networking has none, and says so here.
ip link set lo up 2>/dev/null
echo "mtex-linux: init"
if grep -qw mtex_kallsyms /proc/cmdline; then
  echo "mtex-linux: kallsyms-begin"
  grep -i ' t ' /proc/kallsyms
  echo "mtex-linux: kallsyms-end"
  poweroff -f
fi
# Let the kernel finish what it defers after boot (about 28 M instructions of a kernel
# thread in the first seconds): otherwise the first window measures it too. Idle time costs
# nothing under -icount (sleep=off skips it).
sleep 3
echo "mtex-linux: workload"
{workload}
echo "mtex-linux: done $?"
poweroff -f
"#
    )
}

/// The archive for a workload command line.
pub fn build(
    busybox: Vec<u8>,
    workload: &str,
    programs: Vec<(String, Vec<u8>)>,
) -> Result<Vec<u8>> {
    let mut entries = vec![
        Entry::dir("bin"),
        Entry::dir("dev"),
        Entry::dir("etc"),
        Entry::dir("lib"),
        Entry::dir("proc"),
        Entry::dir("sys"),
        Entry::dir("tmp"),
        Entry::file("bin/busybox", 0o755, busybox),
        Entry::symlink("bin/sh", "busybox"),
        // root by name, for programs that look their user up (`memcached -u root`).
        Entry::file(
            "etc/passwd",
            0o644,
            b"root:x:0:0:root:/root:/bin/sh\n".to_vec(),
        ),
        Entry::file("etc/group", 0o644, b"root:x:0:\n".to_vec()),
        Entry::file("init", 0o755, init_script(workload).into_bytes()),
    ];
    for (name, bytes) in programs {
        let path = if name.ends_with(".ko.xz") {
            format!("lib/{name}")
        } else {
            format!("bin/{name}")
        };
        entries.push(Entry::file(&path, 0o755, bytes));
    }
    write(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_archive_reads_back_with_init_executable() {
        let bytes = build(b"ELF".to_vec(), "echo hi", vec![]).unwrap();
        let mut r = Cursor::new(bytes);
        let mut seen = Vec::new();
        loop {
            let e = cpio::NewcReader::new(&mut r).unwrap();
            if e.entry().is_trailer() {
                break;
            }
            seen.push((e.entry().name().to_string(), e.entry().mode()));
            e.finish().unwrap();
        }
        assert!(seen.contains(&("init".into(), 0o100755)));
        assert!(seen.contains(&("bin/sh".into(), 0o120777)));
        assert!(seen.iter().any(|(n, _)| n == "bin/busybox"));
        assert!(init_script("getpid").contains("\ngetpid\n"));
    }
}
