//! Device-tree edits the hypervisor makes before it hands the tree to its guest, the way a
//! Linux arm64 bootloader would: the guest must not see the hypervisor's memory, so it gets a
//! `/reserved-memory` child with `no-map` covering it (devicetree-specification
//! "reserved-memory" binding). Everything else is copied unchanged.
//!
//! Parsing uses the `fdt` crate and writing `vm-fdt`; this module only walks one tree into
//! the other.
#![no_std]

extern crate alloc;

use alloc::vec::Vec;
use fdt::Fdt;
use fdt::node::FdtNode;
use vm_fdt::FdtWriter;

/// Why a tree could not be read or rewritten.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DtError {
    /// Not a valid flattened device tree.
    Parse,
    /// The writer refused something (e.g. a duplicate node name).
    Write,
}

/// A physical memory range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Region {
    pub base: u64,
    pub size: u64,
}

/// What the hypervisor reads from the tree it boots with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BootInfo<'a> {
    /// `/chosen/bootargs`, empty when absent.
    pub bootargs: &'a str,
    /// The first `/memory` region.
    pub memory: Option<Region>,
    /// Size of the tree in bytes.
    pub total_size: usize,
}

/// Reads what the hypervisor needs from a tree.
pub fn boot_info(dtb: &[u8]) -> Result<BootInfo<'_>, DtError> {
    let fdt = Fdt::new(dtb).map_err(|_| DtError::Parse)?;
    let bootargs = fdt.chosen().bootargs().unwrap_or("");
    let memory = fdt
        .find_node("/memory")
        .and_then(|n| n.reg())
        .and_then(|mut r| r.next())
        .map(|r| Region {
            base: r.starting_address as u64,
            size: r.size.unwrap_or(0) as u64,
        });
    Ok(BootInfo {
        bootargs,
        memory,
        total_size: fdt.total_size(),
    })
}

/// Reads the header's total size of a tree at the start of `bytes` (for finding how much of
/// memory to look at), or None if there is no tree there.
pub fn header_total_size(bytes: &[u8]) -> Option<usize> {
    if bytes.len() < 8 || bytes[..4] != [0xd0, 0x0d, 0xfe, 0xed] {
        return None;
    }
    Some(u32::from_be_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]) as usize)
}

/// Returns a copy of `dtb` in which `hidden` is a `no-map` child of `/reserved-memory`
/// named `<name>@<base>`. An existing `/reserved-memory` node keeps its other children.
pub fn hide_region(dtb: &[u8], name: &str, hidden: Region) -> Result<Vec<u8>, DtError> {
    let fdt = Fdt::new(dtb).map_err(|_| DtError::Parse)?;
    let reservations: Vec<vm_fdt::FdtReserveEntry> = fdt
        .memory_reservations()
        .filter_map(|r| vm_fdt::FdtReserveEntry::new(r.address() as u64, r.size() as u64).ok())
        .collect();
    let mut w = FdtWriter::new_with_mem_reserv(&reservations).map_err(|_| DtError::Write)?;
    let root = fdt.find_node("/").ok_or(DtError::Parse)?;
    let mut added = false;
    let top = w.begin_node("").map_err(|_| DtError::Write)?;
    copy_properties(&mut w, root)?;
    for child in root.children() {
        let is_reserved = child.name == "reserved-memory";
        let node = w.begin_node(child.name).map_err(|_| DtError::Write)?;
        copy_properties(&mut w, child)?;
        for grandchild in child.children() {
            copy_node(&mut w, grandchild)?;
        }
        if is_reserved {
            let cells = child.cell_sizes();
            write_hidden(&mut w, name, hidden, cells.address_cells, cells.size_cells)?;
            added = true;
        }
        w.end_node(node).map_err(|_| DtError::Write)?;
    }
    if !added {
        let node = w
            .begin_node("reserved-memory")
            .map_err(|_| DtError::Write)?;
        w.property_u32("#address-cells", 2)
            .map_err(|_| DtError::Write)?;
        w.property_u32("#size-cells", 2)
            .map_err(|_| DtError::Write)?;
        w.property_null("ranges").map_err(|_| DtError::Write)?;
        write_hidden(&mut w, name, hidden, 2, 2)?;
        w.end_node(node).map_err(|_| DtError::Write)?;
    }
    w.end_node(top).map_err(|_| DtError::Write)?;
    w.finish().map_err(|_| DtError::Write)
}

fn copy_properties(w: &mut FdtWriter, node: FdtNode<'_, '_>) -> Result<(), DtError> {
    for p in node.properties() {
        w.property(p.name, p.value).map_err(|_| DtError::Write)?;
    }
    Ok(())
}

fn copy_node(w: &mut FdtWriter, node: FdtNode<'_, '_>) -> Result<(), DtError> {
    let n = w.begin_node(node.name).map_err(|_| DtError::Write)?;
    copy_properties(w, node)?;
    for child in node.children() {
        copy_node(w, child)?;
    }
    w.end_node(n).map_err(|_| DtError::Write)
}

fn write_hidden(
    w: &mut FdtWriter,
    name: &str,
    r: Region,
    address_cells: usize,
    size_cells: usize,
) -> Result<(), DtError> {
    let mut node_name = alloc::string::String::from(name);
    node_name.push_str(&alloc::format!("@{:x}", r.base));
    let node = w.begin_node(&node_name).map_err(|_| DtError::Write)?;
    let mut reg = Vec::new();
    push_cells(&mut reg, r.base, address_cells);
    push_cells(&mut reg, r.size, size_cells);
    w.property("reg", &reg).map_err(|_| DtError::Write)?;
    w.property_null("no-map").map_err(|_| DtError::Write)?;
    w.end_node(node).map_err(|_| DtError::Write)
}

fn push_cells(out: &mut Vec<u8>, value: u64, cells: usize) {
    for i in (0..cells).rev() {
        let cell = if i >= 2 {
            0
        } else {
            (value >> (32 * i)) as u32
        };
        out.extend_from_slice(&cell.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tree shaped like QEMU virt's: root cells 2/2, memory, chosen with bootargs, a device.
    fn qemu_like(with_reserved: bool) -> Vec<u8> {
        let mut w = FdtWriter::new().unwrap();
        let root = w.begin_node("").unwrap();
        w.property_u32("#address-cells", 2).unwrap();
        w.property_u32("#size-cells", 2).unwrap();
        w.property_string("compatible", "linux,dummy-virt").unwrap();
        let mem = w.begin_node("memory@40000000").unwrap();
        w.property_string("device_type", "memory").unwrap();
        w.property_array_u64("reg", &[0x4000_0000, 0x2000_0000])
            .unwrap();
        w.end_node(mem).unwrap();
        let chosen = w.begin_node("chosen").unwrap();
        w.property_string("bootargs", "mtex.guest=spin").unwrap();
        w.end_node(chosen).unwrap();
        if with_reserved {
            let rm = w.begin_node("reserved-memory").unwrap();
            w.property_u32("#address-cells", 2).unwrap();
            w.property_u32("#size-cells", 2).unwrap();
            w.property_null("ranges").unwrap();
            let fw = w.begin_node("firmware@50000000").unwrap();
            w.property_array_u64("reg", &[0x5000_0000, 0x1000]).unwrap();
            w.end_node(fw).unwrap();
            w.end_node(rm).unwrap();
        }
        let uart = w.begin_node("pl011@9000000").unwrap();
        w.property_array_u64("reg", &[0x0900_0000, 0x1000]).unwrap();
        w.end_node(uart).unwrap();
        w.end_node(root).unwrap();
        w.finish().unwrap()
    }

    const HYP: Region = Region {
        base: 0x4020_0000,
        size: 0x00e0_0000,
    };

    fn reserved_regs(dtb: &[u8]) -> Vec<(u64, Option<u64>, bool)> {
        let fdt = Fdt::new(dtb).unwrap();
        let rm = fdt.find_node("/reserved-memory").unwrap();
        rm.children()
            .map(|c| {
                let r = c.reg().unwrap().next().unwrap();
                (
                    r.starting_address as u64,
                    r.size.map(|s| s as u64),
                    c.property("no-map").is_some(),
                )
            })
            .collect()
    }

    #[test]
    fn adds_reserved_memory_with_no_map() {
        let out = hide_region(&qemu_like(false), "mtex-hyp", HYP).unwrap();
        assert_eq!(reserved_regs(&out), [(0x4020_0000, Some(0xe0_0000), true)]);
        let fdt = Fdt::new(&out).unwrap();
        assert!(
            fdt.find_node("/reserved-memory/mtex-hyp@40200000")
                .is_some()
        );
        // Everything else survives.
        let info = boot_info(&out).unwrap();
        assert_eq!(info.bootargs, "mtex.guest=spin");
        assert_eq!(
            info.memory,
            Some(Region {
                base: 0x4000_0000,
                size: 0x2000_0000
            })
        );
        assert!(fdt.find_node("/pl011@9000000").is_some());
    }

    #[test]
    fn extends_an_existing_reserved_memory_node() {
        let out = hide_region(&qemu_like(true), "mtex-hyp", HYP).unwrap();
        assert_eq!(
            reserved_regs(&out),
            [
                (0x5000_0000, Some(0x1000), false),
                (0x4020_0000, Some(0xe0_0000), true)
            ]
        );
    }

    #[test]
    fn rejects_garbage() {
        assert_eq!(hide_region(&[0u8; 64], "x", HYP), Err(DtError::Parse));
        assert_eq!(header_total_size(&[0u8; 8]), None);
        assert_eq!(
            header_total_size(&qemu_like(false)),
            Some(qemu_like(false).len())
        );
    }
}
