//! The machine from a flattened device tree: what QEMU (`-kernel` boots) or a DT-booting
//! firmware describes, read into the [`Machine`] the hypervisor runs on.
//!
//! - console: the node `/chosen/stdout-path` names (a path or an `/aliases` name, options
//!   after `:` ignored), else the first PL011; "arm,pl011" or "arm,sbsa-uart";
//! - GIC: "arm,gic-v3" `reg` = distributor, then the first redistributor region;
//! - timers: "arm,armv8-timer" `interrupts` (secure, non-secure, virtual, hypervisor);
//! - PSCI: the "arm,psci*" node's `method`;
//! - RAM: every reg entry of every `device_type = "memory"` node; CPUs: `/cpus/cpu@*` reg.
//!
//! Only an unreadable tree is an error ([`DtError::Parse`]); a missing or unusable part is
//! left empty for [`Machine::validate`] to name. Addresses are taken as the CPU sees them:
//! parent `ranges` are assumed to be identity, as on QEMU virt and server firmware.
//!
//! The `fdt` crate trusts a tree's structure (it panics on a truncated property, a bad string
//! offset, a node deeper than 64); [`check_structure`] proves the tree well formed first, so
//! no input panics.

use core::ops::ControlFlow;

use fdt::Fdt;
use fdt::node::FdtNode;
use mtex_platform::machine::MPIDR_AFFINITY;
use mtex_platform::{Console, ConsoleKind, Machine, PsciConduit, Region};

use crate::DtError;

/// Nodes deeper than this are not read (real trees are under 10 deep); also bounds the
/// recursion of [`visit`] and stays below the 64-entry stack inside `fdt`'s node walk.
const MAX_DEPTH: usize = 32;

/// Reads the machine a device tree describes (RAM included, unlike ACPI).
pub fn machine(dtb: &[u8]) -> Result<Machine, DtError> {
    check_structure(dtb)?;
    let fdt = Fdt::new(dtb).map_err(|_| DtError::Parse)?;
    let root = fdt.all_nodes().next().ok_or(DtError::Parse)?;
    let mut m = Machine::default();
    console(root, &mut m);
    let interrupt_cells = gic(root, &mut m);
    timers(root, interrupt_cells, &mut m);
    psci(root, &mut m);
    memory(root, &mut m);
    cpus(root, &mut m);
    Ok(m)
}

/// A UART Linux mode can give its guest: the first enabled PL011 that is not the console
/// (the report UART), with its SPI number (INTID - 32). QEMU's virt board has a second one
/// when QEMU is given a second `-serial`.
pub fn spare_uart(dtb: &[u8]) -> Result<Option<(Region, u32)>, DtError> {
    check_structure(dtb)?;
    let fdt = Fdt::new(dtb).map_err(|_| DtError::Parse)?;
    let root = fdt.all_nodes().next().ok_or(DtError::Parse)?;
    let mut m = Machine::default();
    console(root, &mut m);
    let mut found = None;
    let _ = visit(root, DEFAULT_CELLS, 0, &mut |node, parent| {
        let r = reg(node, parent).next();
        if is_compatible(node, "arm,pl011")
            && !disabled(node)
            && let Some(r) = r.filter(|r| r.base != m.console.base)
        {
            found = Some((node, r));
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    });
    let Some((node, r)) = found else {
        return Ok(None);
    };
    // `interrupts` = <type number flags> with type 0 (SPI) in the GIC binding.
    let spi = node
        .property("interrupts")
        .and_then(|p| p.value.get(..8))
        .map(|v| (be_cells(&v[..4]), be_cells(&v[4..8])))
        .and_then(|(kind, n)| (kind == 0).then_some(n as u32));
    Ok(spi.map(|spi| (r, spi)))
}

/// QEMU's fw_cfg device (`qemu,fw-cfg-mmio`, `mtex_platform::fw_cfg`): its registers, if the
/// machine has one.
pub fn fw_cfg(dtb: &[u8]) -> Result<Option<Region>, DtError> {
    check_structure(dtb)?;
    let fdt = Fdt::new(dtb).map_err(|_| DtError::Parse)?;
    let root = fdt.all_nodes().next().ok_or(DtError::Parse)?;
    Ok(find(root, |n| {
        is_compatible(n, "qemu,fw-cfg-mmio") && !disabled(n)
    })
    .and_then(|(node, parent)| reg(node, parent).next()))
}

/// `#address-cells` and `#size-cells`: how a node's children write their `reg`.
#[derive(Clone, Copy, Debug)]
struct Cells {
    address: usize,
    size: usize,
}

/// Devicetree Specification v0.4 §2.3.5: absent properties mean 2 and 1.
const DEFAULT_CELLS: Cells = Cells {
    address: 2,
    size: 1,
};

/// The cells `node` sets for its children.
fn child_cells(node: FdtNode<'_, '_>) -> Cells {
    let get = |name, default| u32_prop(node, name).map_or(default, |v| v as usize);
    Cells {
        address: get("#address-cells", DEFAULT_CELLS.address),
        size: get("#size-cells", DEFAULT_CELLS.size),
    }
}

fn u32_prop(node: FdtNode<'_, '_>, name: &str) -> Option<u32> {
    let value: [u8; 4] = node.property(name)?.value.try_into().ok()?;
    Some(u32::from_be_bytes(value))
}

/// A string property, without its NUL terminator.
fn str_prop<'a>(node: FdtNode<'_, 'a>, name: &str) -> Option<&'a str> {
    let value = node.property(name)?.value;
    let end = value.iter().position(|&b| b == 0).unwrap_or(value.len());
    core::str::from_utf8(value.get(..end)?).ok()
}

/// Whether a `compatible` entry satisfies `matches`.
fn compatible(node: FdtNode<'_, '_>, matches: impl Fn(&[u8]) -> bool) -> bool {
    node.property("compatible")
        .is_some_and(|p| p.value.split(|&b| b == 0).any(matches))
}

fn is_compatible(node: FdtNode<'_, '_>, with: &str) -> bool {
    compatible(node, |c| c == with.as_bytes())
}

/// `status` other than "okay" (absent means okay; "ok" is the old spelling).
fn disabled(node: FdtNode<'_, '_>) -> bool {
    !matches!(str_prop(node, "status"), None | Some("okay" | "ok"))
}

/// A node's `reg` entries in its parent's cells. Entries with more than 64-bit cells, or whose
/// end would overflow, are left out.
fn reg<'a>(node: FdtNode<'_, 'a>, parent: Cells) -> impl Iterator<Item = Region> + 'a {
    let usable = (1..=2).contains(&parent.address) && parent.size <= 2;
    let value = match node.property("reg") {
        Some(p) if usable => p.value,
        _ => &[],
    };
    let split = parent.address * 4;
    let stride = (parent.address + parent.size) * 4;
    value.chunks_exact(stride.max(4)).filter_map(move |entry| {
        let (address, size) = entry.split_at_checked(split)?;
        let region = Region::new(be_cells(address), be_cells(size));
        region.base.checked_add(region.size).map(|_| region)
    })
}

/// Big-endian cells (at most two) as one number.
fn be_cells(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0, |acc, &b| (acc << 8) | u64::from(b))
}

/// Calls `f` on `node` and its descendants, depth first, each with its parent's cells; stops
/// when `f` breaks.
fn visit<'b, 'a, F>(
    node: FdtNode<'b, 'a>,
    parent: Cells,
    depth: usize,
    f: &mut F,
) -> ControlFlow<()>
where
    F: FnMut(FdtNode<'b, 'a>, Cells) -> ControlFlow<()>,
{
    f(node, parent)?;
    if depth < MAX_DEPTH {
        let cells = child_cells(node);
        for child in node.children() {
            visit(child, cells, depth + 1, f)?;
        }
    }
    ControlFlow::Continue(())
}

/// The first node, depth first, that `pred` accepts, with its parent's cells.
fn find<'b, 'a>(
    root: FdtNode<'b, 'a>,
    pred: impl Fn(FdtNode<'b, 'a>) -> bool,
) -> Option<(FdtNode<'b, 'a>, Cells)> {
    let mut found = None;
    let _ = visit(root, DEFAULT_CELLS, 0, &mut |node, parent| {
        if pred(node) {
            found = Some((node, parent));
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    });
    found
}

/// The node at absolute `path`, with its parent's cells. A component without a unit address
/// matches a node of that name with any (Devicetree Specification §2.2.3). Aliases are not
/// followed here, so an alias naming itself cannot loop.
fn node_at<'b, 'a>(root: FdtNode<'b, 'a>, path: &str) -> Option<(FdtNode<'b, 'a>, Cells)> {
    let mut found = (root, DEFAULT_CELLS);
    for part in path.split('/').filter(|p| !p.is_empty()) {
        let cells = child_cells(found.0);
        let child = found.0.children().find(|c| {
            c.name == part || (!part.contains('@') && c.name.split('@').next() == Some(part))
        })?;
        found = (child, cells);
    }
    Some(found)
}

/// The console UART kind a node is compatible with.
fn uart_kind(node: FdtNode<'_, '_>) -> Option<ConsoleKind> {
    if is_compatible(node, "arm,sbsa-uart") {
        Some(ConsoleKind::SbsaGeneric)
    } else if is_compatible(node, "arm,pl011") {
        Some(ConsoleKind::Pl011)
    } else {
        None
    }
}

/// The UART `/chosen/stdout-path` names, or the first enabled one when it names none.
fn console(root: FdtNode<'_, '_>, m: &mut Machine) {
    let stdout_path = node_at(root, "/chosen").and_then(|(chosen, _)| {
        str_prop(chosen, "stdout-path").or_else(|| str_prop(chosen, "linux,stdout-path"))
    });
    let uart = match stdout_path {
        Some(path) => resolve_stdout(root, path),
        None => find(root, |n| uart_kind(n).is_some() && !disabled(n)),
    };
    let Some((node, parent)) = uart else { return };
    if let (Some(kind), Some(r)) = (uart_kind(node), reg(node, parent).next()) {
        m.console = Console::new(kind, r.base);
    }
}

/// A `stdout-path` value: a full path or an alias, optionally followed by `:` and options
/// such as "115200n8" (Devicetree Specification §3.6).
fn resolve_stdout<'b, 'a>(root: FdtNode<'b, 'a>, value: &str) -> Option<(FdtNode<'b, 'a>, Cells)> {
    let path = value.split(':').next()?;
    if path.starts_with('/') {
        return node_at(root, path);
    }
    let (aliases, _) = node_at(root, "/aliases")?;
    node_at(root, str_prop(aliases, path)?.strip_prefix('/')?)
}

/// Fills `m.gic` from the GICv3 node; returns its `#interrupt-cells` (3, or 4 with PPI
/// partitions) for reading the timer's interrupts.
fn gic(root: FdtNode<'_, '_>, m: &mut Machine) -> usize {
    let Some((node, parent)) = find(root, |n| is_compatible(n, "arm,gic-v3")) else {
        return 3;
    };
    let mut regs = reg(node, parent);
    if let Some(gicd) = regs.next() {
        m.gic.gicd = gicd.base;
    }
    // With several redistributor regions (#redistributor-regions) the first holds the boot
    // CPU's, as in the ACPI reader.
    if let Some(gicr) = regs.next() {
        m.gic.gicr = gicr.base;
        m.gic.gicr_size = gicr.size;
    }
    match u32_prop(node, "#interrupt-cells") {
        Some(4) => 4,
        _ => 3,
    }
}

/// Fills the timer INTIDs from the "arm,armv8-timer" node. Its `interrupts` lists, in this
/// order, the secure physical, non-secure physical, virtual and hypervisor physical timers
/// (then, on newer trees, the hypervisor virtual one).
fn timers(root: FdtNode<'_, '_>, interrupt_cells: usize, m: &mut Machine) {
    let Some((node, _)) = find(root, |n| is_compatible(n, "arm,armv8-timer")) else {
        return;
    };
    let Some(interrupts) = node.property("interrupts") else {
        return;
    };
    let mut specs = interrupts.value.chunks_exact(interrupt_cells * 4);
    let virt = specs.nth(2);
    let hyp = specs.next();
    m.vtimer_intid = virt.map_or(0, ppi_intid);
    m.hyp_timer_intid = hyp.map_or(0, ppi_intid);
}

/// The INTID of a GIC interrupt specifier (type, number, flags): type 1 is a PPI, number
/// 0..16, INTID 16 + number (GIC binding, arm,gic-v3.yaml). Anything else is 0, which
/// [`Machine::validate`] reports as no timer.
fn ppi_intid(spec: &[u8]) -> u32 {
    let cell = |i: usize| spec.get(i * 4..i * 4 + 4).map_or(0, |c| be_cells(c) as u32);
    match (cell(0), cell(1)) {
        (1, n) if n < 16 => 16 + n,
        _ => 0,
    }
}

/// Sets the PSCI conduit from the "arm,psci", "arm,psci-0.2", "arm,psci-1.0" node.
fn psci(root: FdtNode<'_, '_>, m: &mut Machine) {
    let Some((node, _)) = find(root, |n| compatible(n, |c| c.starts_with(b"arm,psci"))) else {
        return;
    };
    match str_prop(node, "method") {
        Some("smc") => m.set_psci(PsciConduit::Smc),
        Some("hvc") => m.set_psci(PsciConduit::Hvc),
        _ => {}
    }
}

/// Every non-empty reg entry of every enabled memory node.
fn memory(root: FdtNode<'_, '_>, m: &mut Machine) {
    let _ = visit(root, DEFAULT_CELLS, 0, &mut |node, parent| {
        if str_prop(node, "device_type") == Some("memory") && !disabled(node) {
            reg(node, parent)
                .filter(|r| r.size != 0)
                .for_each(|r| m.push_ram(r));
        }
        ControlFlow::Continue(())
    });
}

/// The MPIDR of every enabled `/cpus/cpu@*` node (not `cpu-map`), from its `reg`.
fn cpus(root: FdtNode<'_, '_>, m: &mut Machine) {
    let Some((cpus, _)) = node_at(root, "/cpus") else {
        return;
    };
    let cells = child_cells(cpus);
    for cpu in cpus.children() {
        if cpu.name.split('@').next() != Some("cpu") || disabled(cpu) {
            continue;
        }
        if let Some(r) = reg(cpu, cells).next() {
            m.push_cpu(r.base & MPIDR_AFFINITY);
        }
    }
}

/// Flattened tree tokens (Devicetree Specification §5.4.1).
const FDT_MAGIC: u32 = 0xd00d_feed;
const FDT_BEGIN_NODE: u32 = 1;
const FDT_END_NODE: u32 = 2;
const FDT_PROP: u32 = 3;
const FDT_END: u32 = 9;
/// Header length of version 17, the first with `size_dt_struct`, which `fdt` relies on.
const HEADER_LEN: usize = 40;

/// Checks that `dtb` is a tree `fdt` can walk without panicking: a version 17 header whose
/// blocks lie inside the tree; one root; nodes with NUL-terminated UTF-8 names, properties
/// before child nodes (`fdt` skips a node by reading properties then children), property
/// values and names inside their blocks; at most [`MAX_DEPTH`] deep; no FDT_NOP tokens
/// (`fdt` 0.1.5 mishandles NOPs between properties, so trees edited by libfdt's
/// `fdt_nop_*` are refused rather than risked).
pub fn check_structure(dtb: &[u8]) -> Result<(), DtError> {
    let header = |field: usize| be_u32(dtb, field * 4).ok_or(DtError::Parse);
    let total = header(1)? as usize;
    if header(0)? != FDT_MAGIC || header(5)? < 17 || !(HEADER_LEN..=dtb.len()).contains(&total) {
        return Err(DtError::Parse);
    }
    let tree = dtb.get(..total).ok_or(DtError::Parse)?;
    let block = |offset: usize, size: usize| {
        let offset = header(offset)? as usize;
        let end = offset.checked_add(header(size)? as usize);
        end.and_then(|end| tree.get(offset..end))
            .ok_or(DtError::Parse)
    };
    let structs = block(2, 9)?;
    let strings = block(3, 8)?;
    if header(4)? as usize > total {
        return Err(DtError::Parse);
    }
    check_tokens(structs, strings).ok_or(DtError::Parse)
}

fn be_u32(bytes: &[u8], offset: usize) -> Option<u32> {
    let b: [u8; 4] = bytes.get(offset..offset.checked_add(4)?)?.try_into().ok()?;
    Some(u32::from_be_bytes(b))
}

/// Reads the structure block's tokens in order; see [`check_structure`].
fn check_tokens(structs: &[u8], strings: &[u8]) -> Option<()> {
    let mut at = Cursor {
        bytes: structs,
        pos: 0,
    };
    let mut depth = 0;
    let mut root_done = false;
    // Bit d set: the open node at depth d already has a child, so no property may follow.
    let mut has_child: u64 = 0;
    loop {
        match at.u32()? {
            FDT_BEGIN_NODE if !root_done && depth < MAX_DEPTH => {
                core::str::from_utf8(at.cstr()?).ok()?;
                has_child |= 1 << depth;
                depth += 1;
                has_child &= !(1 << depth);
            }
            FDT_PROP if depth > 0 && has_child & (1 << depth) == 0 => {
                let len = at.u32()? as usize;
                let name = usize::try_from(at.u32()?).ok()?;
                at.take(len)?;
                let name = strings.get(name..)?;
                let end = name.iter().position(|&b| b == 0)?;
                core::str::from_utf8(name.get(..end)?).ok()?;
            }
            FDT_END_NODE if depth > 0 => {
                depth -= 1;
                root_done = depth == 0;
            }
            FDT_END if root_done => return Some(()),
            _ => return None,
        }
    }
}

/// Reads a structure block front to back; every step moves forward or fails, so
/// [`check_tokens`] ends.
struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn u32(&mut self) -> Option<u32> {
        let v = be_u32(self.bytes, self.pos)?;
        self.pos += 4;
        Some(v)
    }

    /// `len` bytes, then padding to the next 4-byte boundary (tokens are 4-byte aligned).
    fn take(&mut self, len: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(len)?;
        let bytes = self.bytes.get(self.pos..end)?;
        self.pos = end.checked_add(3)? & !3;
        Some(bytes)
    }

    /// A NUL-terminated string (without the NUL), then padding.
    fn cstr(&mut self) -> Option<&'a [u8]> {
        let len = self.bytes.get(self.pos..)?.iter().position(|&b| b == 0)?;
        self.take(len + 1).and_then(|s| s.get(..len))
    }
}
