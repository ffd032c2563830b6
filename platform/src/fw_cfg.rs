//! QEMU's fw_cfg device, as far as the hypervisor reads it: a named file the host gives the
//! machine (`-fw_cfg name=NAME,file=PATH`) for what must not travel on QEMU's command line,
//! which every user of the host can read (`ps`) for the run's length — a snippet's code.
//!
//! The device (QEMU's docs/specs/fw_cfg.rst, its MMIO form on the virt board, named by the
//! device tree's `qemu,fw-cfg-mmio` node): a 16-bit big-endian selector register at +8
//! chooses an item, whose bytes the data register at +0 then gives one read at a time. Item
//! 0x19 is the file directory: a big-endian count, then per file its size (32 bits), its item
//! (16 bits), 16 reserved bits and a 56-byte NUL-padded name. Read here through [`Port`],
//! apart from the registers, so that the format is tested on the host.

/// The file a snippet's code comes in: the bytes of its `.text` as assembled.
pub const SNIPPET_FILE: &str = "opt/mtex/snippet";

/// Register offsets of the MMIO device.
pub const DATA: u64 = 0;
pub const SELECTOR: u64 = 8;

/// The signature item ("QEMU") and the file directory's.
pub const SIGNATURE: u16 = 0x0000;
pub const FILE_DIR: u16 = 0x0019;

/// More directory entries than this are not read (QEMU has 32 slots unless told otherwise):
/// a device that is not what it says cannot keep the reader going.
pub const MAX_FILES: u32 = 4096;

/// A fw_cfg device: select an item, then read its bytes in order.
pub trait Port {
    fn select(&mut self, item: u16);
    fn read(&mut self) -> u8;
}

/// A file of the directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct File {
    pub item: u16,
    pub size: u32,
}

fn read_be<const N: usize>(port: &mut impl Port) -> [u8; N] {
    let mut b = [0; N];
    for x in &mut b {
        *x = port.read();
    }
    b
}

/// The file `name` of the device's directory, if the device is QEMU's and has it.
pub fn find(port: &mut impl Port, name: &str) -> Option<File> {
    port.select(SIGNATURE);
    if read_be::<4>(port) != *b"QEMU" {
        return None;
    }
    port.select(FILE_DIR);
    let count = u32::from_be_bytes(read_be(port));
    let mut found = None;
    for _ in 0..count.min(MAX_FILES) {
        let size = u32::from_be_bytes(read_be(port));
        let item = u16::from_be_bytes(read_be(port));
        let _reserved: [u8; 2] = read_be(port);
        let raw: [u8; 56] = read_be(port);
        let len = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
        if found.is_none() && &raw[..len] == name.as_bytes() {
            found = Some(File { item, size });
        }
    }
    found
}

/// Reads file `f` into the start of `out`; the bytes read (`f.size`, or `out`'s length if
/// smaller).
pub fn read(port: &mut impl Port, f: File, out: &mut [u8]) -> usize {
    port.select(f.item);
    let n = out.len().min(f.size as usize);
    for b in &mut out[..n] {
        *b = port.read();
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    /// QEMU's device as a table of items.
    struct Fake {
        items: Vec<(u16, Vec<u8>)>,
        at: Option<(usize, usize)>,
    }

    impl Port for Fake {
        fn select(&mut self, item: u16) {
            self.at = self
                .items
                .iter()
                .position(|(i, _)| *i == item)
                .map(|i| (i, 0));
        }
        fn read(&mut self) -> u8 {
            // Past the end, or with no such item, QEMU reads 0.
            let Some((i, off)) = self.at.as_mut() else {
                return 0;
            };
            let b = self.items[*i].1.get(*off).copied().unwrap_or(0);
            *off += 1;
            b
        }
    }

    fn device(files: &[(&str, u16, &[u8])]) -> Fake {
        let mut dir = (files.len() as u32).to_be_bytes().to_vec();
        let mut items = vec![(SIGNATURE, b"QEMU".to_vec())];
        for (name, item, data) in files {
            dir.extend_from_slice(&(data.len() as u32).to_be_bytes());
            dir.extend_from_slice(&item.to_be_bytes());
            dir.extend_from_slice(&[0, 0]);
            let mut n = name.as_bytes().to_vec();
            n.resize(56, 0);
            dir.extend_from_slice(&n);
            items.push((*item, data.to_vec()));
        }
        items.push((FILE_DIR, dir));
        Fake { items, at: None }
    }

    #[test]
    fn a_file_is_found_by_name_and_read_whole() {
        let code = [0xc0, 0x03, 0x5f, 0xd6];
        let mut d = device(&[
            ("etc/boot-fail-wait", 0x20, &[0; 4]),
            (SNIPPET_FILE, 0x21, &code),
        ]);
        let f = find(&mut d, SNIPPET_FILE).unwrap();
        assert_eq!(
            f,
            File {
                item: 0x21,
                size: 4
            }
        );
        let mut out = [0u8; 8];
        assert_eq!(read(&mut d, f, &mut out), 4);
        assert_eq!(out[..4], code);
        let mut short = [0u8; 2];
        assert_eq!(read(&mut d, f, &mut short), 2);
        assert_eq!(find(&mut d, "opt/mtex/snippet2"), None);
        assert_eq!(find(&mut d, "opt/mtex"), None);
    }

    #[test]
    fn a_device_without_the_signature_is_not_read() {
        let mut d = device(&[(SNIPPET_FILE, 0x21, &[1, 2, 3, 4])]);
        d.items[0].1 = b"QEMX".to_vec();
        assert_eq!(find(&mut d, SNIPPET_FILE), None);
        // A count of 2^32 - 1 stops at MAX_FILES entries.
        let mut huge = device(&[]);
        huge.items.last_mut().unwrap().1 = u32::MAX.to_be_bytes().to_vec();
        assert_eq!(find(&mut huge, SNIPPET_FILE), None);
    }
}
