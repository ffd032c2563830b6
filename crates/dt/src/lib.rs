//! Device trees, both ways: reading what the hypervisor needs from the tree it boots with
//! (`qemu -kernel`: the machine in [`machine`], the run's options and the guest's Image in
//! [`boot_info`]), and writing the guest's own tree from scratch ([`guest_tree`]).
//!
//! Parsing uses the `fdt` crate and writing `vm-fdt`.
#![no_std]

extern crate alloc;

pub mod guest_tree;
pub mod linux_tree;
pub mod machine;
mod nodes;

pub use mtex_platform::Region;

use fdt::Fdt;

/// Why a tree could not be read or written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DtError {
    /// Not a valid flattened device tree.
    Parse,
    /// The writer refused something (e.g. a duplicate node name).
    Write,
}

/// What the hypervisor reads from `/chosen` of the tree it boots with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BootInfo<'a> {
    /// `/chosen/bootargs`, empty when absent: the run's options.
    pub bootargs: &'a str,
    /// `/chosen/linux,initrd-start` .. `linux,initrd-end`: on the `qemu -kernel` path, the
    /// guest's Image (QEMU's `-initrd`).
    pub initrd: Option<Region>,
}

/// Reads `/chosen`.
pub fn boot_info(dtb: &[u8]) -> Result<BootInfo<'_>, DtError> {
    let fdt = Fdt::new(dtb).map_err(|_| DtError::Parse)?;
    let bootargs = fdt.chosen().bootargs().unwrap_or("");
    let chosen = fdt.find_node("/chosen");
    // The initrd properties are one or two cells, whatever #address-cells says (Linux reads
    // them by their length too).
    let cell = |name: &str| {
        let p = chosen?.property(name)?;
        match p.value.len() {
            4 => Some(u32::from_be_bytes(p.value.try_into().ok()?) as u64),
            8 => Some(u64::from_be_bytes(p.value.try_into().ok()?)),
            _ => None,
        }
    };
    let initrd = match (cell("linux,initrd-start"), cell("linux,initrd-end")) {
        (Some(start), Some(end)) if end > start => Some(Region::new(start, end - start)),
        _ => None,
    };
    Ok(BootInfo { bootargs, initrd })
}

/// Reads the header's total size of a tree at the start of `bytes` (for finding how much of
/// memory to look at), or None if there is no tree there.
pub fn header_total_size(bytes: &[u8]) -> Option<usize> {
    if bytes.len() < 8 || bytes[..4] != [0xd0, 0x0d, 0xfe, 0xed] {
        return None;
    }
    Some(u32::from_be_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]) as usize)
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;
    use vm_fdt::FdtWriter;

    /// A `/chosen` as QEMU writes it for `-append` and `-initrd`.
    fn chosen(initrd: Option<(&[u8], &[u8])>) -> Vec<u8> {
        let mut w = FdtWriter::new().unwrap();
        let root = w.begin_node("").unwrap();
        let chosen = w.begin_node("chosen").unwrap();
        w.property_string("bootargs", "mtex.guest=spin").unwrap();
        if let Some((start, end)) = initrd {
            w.property("linux,initrd-start", start).unwrap();
            w.property("linux,initrd-end", end).unwrap();
        }
        w.end_node(chosen).unwrap();
        w.end_node(root).unwrap();
        w.finish().unwrap()
    }

    #[test]
    fn reads_bootargs_and_the_initrd_in_one_or_two_cells() {
        let two = chosen(Some((
            &0x4800_0000u64.to_be_bytes(),
            &0x4812_3000u64.to_be_bytes(),
        )));
        let info = boot_info(&two).unwrap();
        assert_eq!(info.bootargs, "mtex.guest=spin");
        assert_eq!(info.initrd, Some(Region::new(0x4800_0000, 0x12_3000)));
        let one = chosen(Some((
            &0x4800_0000u32.to_be_bytes(),
            &0x4800_1000u32.to_be_bytes(),
        )));
        assert_eq!(
            boot_info(&one).unwrap().initrd,
            Some(Region::new(0x4800_0000, 0x1000))
        );
    }

    #[test]
    fn a_missing_or_empty_initrd_is_none() {
        assert_eq!(boot_info(&chosen(None)).unwrap().initrd, None);
        let empty = chosen(Some((&[0, 0, 0, 8], &[0, 0, 0, 8])));
        assert_eq!(boot_info(&empty).unwrap().initrd, None);
    }

    #[test]
    fn rejects_garbage() {
        assert_eq!(boot_info(&[0u8; 64]), Err(DtError::Parse));
        assert_eq!(header_total_size(&[0u8; 8]), None);
        let t = chosen(None);
        assert_eq!(header_total_size(&t), Some(t.len()));
    }
}
