//! Test helpers: ACPI tables built field by field with their checksums, placed in a fake
//! physical memory, and the tables QEMU 10's virt board gives (checked byte for byte against
//! a dump of the real ones in `tests.rs`).

use super::PhysMem;
use super::sdt::checksum;

/// A table body (or structure) built field by field, little-endian as ACPI is.
#[derive(Default)]
pub struct Body(pub Vec<u8>);

impl Body {
    pub fn new() -> Self {
        Body::default()
    }
    pub fn u8(mut self, v: u8) -> Self {
        self.0.push(v);
        self
    }
    pub fn u16(mut self, v: u16) -> Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn u32(mut self, v: u32) -> Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn u64(mut self, v: u64) -> Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn zeros(mut self, n: usize) -> Self {
        self.0.resize(self.0.len() + n, 0);
        self
    }
    /// A Generic Address Structure: space id, bit width, bit offset, access size, address.
    pub fn gas(self, space: u8, width: u8, offset: u8, access: u8, addr: u64) -> Self {
        self.u8(space).u8(width).u8(offset).u8(access).u64(addr)
    }
    /// Writes `v` at `table_offset` (an offset in the whole table, header included), for
    /// tables like the FADT that are mostly zeros.
    pub fn put(mut self, table_offset: usize, v: &[u8]) -> Self {
        let at = table_offset - 36;
        self.0[at..at + v.len()].copy_from_slice(v);
        self
    }
}

/// Sets byte 9 so that the table sums to zero.
pub fn fix_checksum(table: &mut [u8]) {
    table[9] = 0;
    table[9] = 0u8.wrapping_sub(checksum(table));
}

/// A table with QEMU's header identity (OEM "BOCHS ", table "BXPC    ", creator "BXPC",
/// revisions 1), the length of `body` and a valid checksum.
pub fn table(sig: &[u8; 4], revision: u8, body: &Body) -> Vec<u8> {
    let len = u32::try_from(36 + body.0.len()).unwrap();
    let mut t = Body::new()
        .u32(u32::from_le_bytes(*sig))
        .u32(len)
        .u8(revision)
        .u8(0)
        .0;
    t.extend_from_slice(b"BOCHS BXPC    ");
    t.extend_from_slice(&1u32.to_le_bytes());
    t.extend_from_slice(b"BXPC");
    t.extend_from_slice(&1u32.to_le_bytes());
    t.extend_from_slice(&body.0);
    fix_checksum(&mut t);
    t
}

/// An ACPI 2.0+ RSDP pointing at `xsdt`, both checksums valid.
pub fn rsdp(xsdt: u64) -> Vec<u8> {
    let mut r = b"RSD PTR ".to_vec();
    r.push(0); // checksum
    r.extend_from_slice(b"BOCHS ");
    r.push(2); // revision: ACPI 2.0+
    r.extend_from_slice(&0u32.to_le_bytes()); // RSDT address
    r.extend_from_slice(&36u32.to_le_bytes());
    r.extend_from_slice(&xsdt.to_le_bytes());
    r.extend_from_slice(&[0; 4]); // extended checksum, reserved
    r[8] = 0u8.wrapping_sub(checksum(&r[..20]));
    r[32] = 0u8.wrapping_sub(checksum(&r));
    r
}

/// Physical memory made of byte ranges at given addresses; reads outside them fail.
#[derive(Clone, Default)]
pub struct Mem {
    pub ranges: Vec<(u64, Vec<u8>)>,
}

impl Mem {
    pub fn place(&mut self, addr: u64, bytes: Vec<u8>) {
        self.ranges.push((addr, bytes));
    }
}

impl PhysMem for Mem {
    fn read(&self, addr: u64, len: usize) -> Option<&[u8]> {
        self.ranges.iter().find_map(|(base, bytes)| {
            let start = usize::try_from(addr.checked_sub(*base)?).ok()?;
            bytes.get(start..start.checked_add(len)?)
        })
    }
}

/// Where [`image`] puts the RSDP.
pub const RSDP_ADDR: u64 = 0x7c43_0018;

/// Firmware memory holding an RSDP, an XSDT listing `tables`, and the tables, each in its own
/// page. Returns the RSDP address and the memory.
pub fn image(tables: &[Vec<u8>]) -> (u64, Mem) {
    let xsdt_addr = 0x7c44_0000;
    let mut mem = Mem::default();
    let mut entries = Body::new();
    for (i, t) in tables.iter().enumerate() {
        let addr = 0x7c45_0000 + 0x1000 * i as u64;
        entries = entries.u64(addr);
        mem.place(addr, t.clone());
    }
    mem.place(xsdt_addr, table(b"XSDT", 1, &entries));
    mem.place(RSDP_ADDR, rsdp(xsdt_addr));
    (RSDP_ADDR, mem)
}

/// QEMU 10 virt's SPCR (revision 2, 80 bytes): PL011 at 0x0900_0000, SPI 1 (GSIV 33).
pub fn qemu_spcr() -> Vec<u8> {
    let body = Body::new()
        .u8(0x03) // interface type: PL011
        .zeros(3)
        .gas(0, 32, 0, 3, 0x0900_0000) // system memory, 32-bit registers, dword access
        .u8(1 << 3) // interrupt type: GIC
        .u8(0) // PC-AT IRQ
        .u32(33) // GSIV
        .u8(3) // baud rate: 9600
        .u8(0) // no parity
        .u8(1) // 1 stop bit
        .u8(1 << 1) // flow control: RTS/CTS
        .u8(0) // terminal: VT100
        .u8(0) // language
        .u16(0xffff) // PCI device id: not PCI
        .u16(0xffff) // PCI vendor id
        .zeros(3) // PCI bus, device, function
        .u32(0) // PCI flags
        .u8(0) // PCI segment
        .u32(0); // reserved
    table(b"SPCR", 2, &body)
}

/// A GICC structure (ACPI 6.0+, 80 bytes) for an enabled or disabled CPU.
pub fn gicc(uid: u32, mpidr: u64, enabled: bool, gicr_base: u64) -> Body {
    Body::new()
        .u8(0x0B)
        .u8(80)
        .u16(0)
        .u32(uid) // CPU interface number
        .u32(uid) // ACPI processor UID
        .u32(u32::from(enabled)) // flags
        .u32(0) // parking protocol version
        .u32(23) // performance interrupt GSIV (PMU PPI 7)
        .u64(0) // parked address
        .u64(0) // GICC physical base: none with a system-register interface
        .u64(0) // GICV
        .u64(0) // GICH
        .u32(25) // VGIC maintenance interrupt (PPI 9)
        .u64(gicr_base)
        .u64(mpidr)
        .u8(0) // processor power efficiency class
        .zeros(3)
}

/// A GICD structure with `version` (3 for GICv3).
pub fn gicd(base: u64, version: u8) -> Body {
    Body::new()
        .u8(0x0C)
        .u8(24)
        .u16(0)
        .u32(0) // GIC ID
        .u64(base)
        .u32(0) // system vector base
        .u8(version)
        .zeros(3)
}

/// A GICR structure: one redistributor discovery range.
pub fn gicr(base: u64, len: u32) -> Body {
    Body::new().u8(0x0E).u8(16).u16(0).u64(base).u32(len)
}

/// A GIC ITS structure.
pub fn its(base: u64) -> Body {
    Body::new().u8(0x0F).u8(20).u16(0).u32(0).u64(base).u32(0)
}

/// An MADT (revision 4) with the given structures after the 8 fixed bytes.
pub fn madt(structures: &[Body]) -> Vec<u8> {
    let mut body = Body::new().u32(0).u32(0); // local interrupt controller address, flags
    for s in structures {
        body.0.extend_from_slice(&s.0);
    }
    table(b"APIC", 4, &body)
}

/// QEMU 10 virt's MADT: GICv3 distributor, one CPU, the redistributor range, the ITS.
pub fn qemu_madt() -> Vec<u8> {
    madt(&[
        gicd(0x0800_0000, 3),
        gicc(0, 0, true, 0),
        gicr(0x080a_0000, 0x00f6_0000),
        its(0x0808_0000),
    ])
}

/// A GTDT with the given virtual and non-secure EL2 timer GSIVs; revision 3 (ACPI 6.5, 104
/// bytes, with the EL2 virtual timer) as QEMU 10 builds it, or revision 2 (80 bytes, no
/// platform timers) as ACPI 6.0-era server firmware does.
pub fn gtdt(revision: u8, virt: u32, ns_el2: u32) -> Vec<u8> {
    let mut body = Body::new()
        .u64(u64::MAX) // CntControlBase: none
        .u32(0) // reserved
        .u32(29) // secure EL1 timer GSIV
        .u32(0)
        .u32(30) // non-secure EL1 timer GSIV
        .u32(1 << 2) // flags: always-on
        .u32(virt)
        .u32(0)
        .u32(ns_el2)
        .u32(0)
        .u64(u64::MAX) // CntReadBase: none
        .u32(0) // platform timer count
        .u32(0); // platform timer offset
    if revision >= 3 {
        body = body.u32(28).u32(0); // virtual EL2 timer GSIV, flags
    }
    table(b"GTDT", revision, &body)
}

/// Arm boot flags: PSCI compliant (bit 0), use HVC (bit 1).
pub const PSCI_SMC: u16 = 1;
pub const PSCI_HVC: u16 = 3;

/// A revision 6.3 FADT (276 bytes) as QEMU 10 builds it: hardware-reduced ACPI, the given
/// Arm boot flags, `dsdt` in both DSDT fields, hypervisor vendor "QEMU".
pub fn fadt(arm_boot_flags: u16, dsdt: u32) -> Vec<u8> {
    let body = Body::new()
        .zeros(276 - 36)
        .put(40, &dsdt.to_le_bytes())
        .put(112, &(1u32 << 20).to_le_bytes()) // flags: HW_REDUCED_ACPI
        .put(129, &arm_boot_flags.to_le_bytes())
        .put(131, &[3]) // FADT minor version
        .put(140, &u64::from(dsdt).to_le_bytes())
        .put(268, b"QEMU");
    table(b"FACP", 6, &body)
}

/// All four tables of QEMU 10 virt with `virtualization=on,gic-version=3,acpi=on`.
pub fn qemu_tables() -> Vec<Vec<u8>> {
    vec![
        fadt(PSCI_SMC, 0x7c43_7518),
        qemu_madt(),
        gtdt(3, 27, 26),
        qemu_spcr(),
    ]
}
