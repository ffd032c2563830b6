//! Host tests: QEMU 10's tables (built, and dumped from a real run), an Altra/AmpereOne-like
//! machine, and each way tables can be unusable.

use mtex_platform::machine::MachineError;
use mtex_platform::{ConsoleKind, Machine, PsciConduit, Region, qemu_virt};

use super::testutil::*;
use super::{AcpiError, RsdpProblem, Signature, TableProblem, machine};

/// What the ACPI reader must find on QEMU virt: everything but RAM, which ACPI does not list.
fn qemu_virt_without_ram() -> Machine {
    let mut m = qemu_virt::machine(0, 0);
    m.ram_count = 0;
    m.ram[0] = Region::default();
    m
}

/// Reads the machine from an [`image`] of `tables`.
fn read(tables: &[Vec<u8>]) -> Result<Machine, AcpiError> {
    let (rsdp, mem) = image(tables);
    machine(rsdp, &mem)
}

/// The tables UEFI installed for QEMU 10.0.2 (`testdata/qemu10-virt/dump.py`), with the
/// addresses its XSDT lists them at.
const QEMU10_ADDRESSES: &[(&str, u64)] = &[
    ("RSDP", 0x7c43_0018),
    ("XSDT", 0x7c43_fe98),
    ("FACP", 0x7c43_fa98),
    ("APIC", 0x7c43_fc18),
    ("PPTT", 0x7c43_ff98),
    ("GTDT", 0x7c43_fd18),
    ("MCFG", 0x7c43_fe18),
    ("SPCR", 0x7c43_d898),
    ("DBG2", 0x7c43_e918),
    ("IORT", 0x7c43_e798),
];

fn qemu10_dump(name: &str) -> Vec<u8> {
    let path = format!(
        "{}/src/acpi/testdata/qemu10-virt/{name}.bin",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn qemu10_built_tables_read_as_qemu_virt() {
    assert_eq!(read(&qemu_tables()), Ok(qemu_virt_without_ram()));
}

#[test]
fn qemu10_dumped_tables_read_as_qemu_virt() {
    let mut mem = Mem::default();
    for (name, addr) in QEMU10_ADDRESSES {
        mem.place(*addr, qemu10_dump(name));
    }
    assert_eq!(machine(0x7c43_0018, &mem), Ok(qemu_virt_without_ram()));
}

#[test]
fn built_tables_are_byte_for_byte_qemu10s() {
    let built = qemu_tables();
    for (name, t) in ["FACP", "APIC", "GTDT", "SPCR"].iter().zip(&built) {
        assert_eq!(&qemu10_dump(name), t, "{name}");
    }
}

#[test]
fn spcr_shorter_than_its_base_address_is_named() {
    // A revision 1 SPCR cut off inside the base address GAS (ends at offset 48 < 52).
    let short = table(b"SPCR", 1, &Body::new().u8(3).zeros(3).u8(0).zeros(7));
    let mut tables = qemu_tables();
    tables[3] = short;
    let err = read(&tables).unwrap_err();
    assert_eq!(err, AcpiError::SpcrTooShort);
    assert!(err.describe().starts_with("SPCR:"), "{}", err.describe());
    // Exactly up to the base address is enough: the fields after it are optional.
    let minimal = table(
        b"SPCR",
        1,
        &Body::new().u8(3).zeros(3).gas(0, 32, 0, 3, 0x0900_0000),
    );
    tables[3] = minimal;
    assert_eq!(read(&tables), Ok(qemu_virt_without_ram()));
}

/// An Ampere Altra / AmpereOne-like machine: SBSA UART and GIC far above 4 GiB, one GICR
/// range for all cores, sparse MPIDRs (Aff1 = core, Aff2 = cluster), SMC PSCI.
fn altra_tables(gtdt_table: Vec<u8>) -> Vec<Vec<u8>> {
    const MPIDRS: [u64; 4] = [0x0, 0x100, 0x1_0000, 0x1_0100];
    let mut structures = vec![gicd(0x1000_0010_0000, 3)];
    structures.extend(
        MPIDRS
            .iter()
            .zip(0..)
            .map(|(&mpidr, uid)| gicc(uid, mpidr, true, 0)),
    );
    structures.push(gicc(9, 0x1_0200, false, 0)); // a disabled core: not listed
    structures.push(gicr(0x1000_0014_0000, 0x100_0000));
    structures.push(gicr(0x5000_0014_0000, 0x100_0000)); // a second socket's range
    structures.push(its(0x1000_0010_0000 + 0x4_0000));
    let spcr = table(
        b"SPCR",
        2,
        &Body::new()
            .u8(0x0E)
            .zeros(3)
            .gas(0, 32, 0, 3, 0x1000_0262_0000)
            .zeros(28),
    );
    vec![spcr, madt(&structures), gtdt_table, fadt(PSCI_SMC, 0)]
}

#[test]
fn altra_like_machine_is_found_whole() {
    let m = read(&altra_tables(gtdt(2, 27, 26))).unwrap();
    assert_eq!(m.console.kind(), Some(ConsoleKind::SbsaGeneric));
    assert_eq!(m.console.base, 0x1000_0262_0000);
    assert_eq!(
        (m.gic.gicd, m.gic.gicr, m.gic.gicr_size),
        (0x1000_0010_0000, 0x1000_0014_0000, 0x100_0000)
    );
    assert_eq!(m.cpus(), [0x0, 0x100, 0x1_0000, 0x1_0100]);
    assert_eq!((m.vtimer_intid, m.hyp_timer_intid), (27, 26));
    assert_eq!(m.psci(), Some(PsciConduit::Smc));
    assert!(m.ram().is_empty());
    // Everything the hypervisor needs but RAM, which the loader adds from the memory map.
    let mut with_ram = m;
    with_ram.push_ram(Region::new(0x8000_0000, 1 << 30));
    assert_eq!(with_ram.validate(), Ok(()));
}

#[test]
fn missing_el2_timer_gsiv_falls_back_to_sbsa_ppi_26() {
    let m = read(&altra_tables(gtdt(2, 27, 0))).unwrap();
    assert_eq!(m.hyp_timer_intid, 26);
}

#[test]
fn redistributor_from_the_boot_cpus_gicc_when_no_gicr_structure() {
    let structures = [
        gicd(0x0800_0000, 4),
        gicc(0, 0, false, 0x0800_0000), // disabled: not the boot CPU
        gicc(1, 0x100, true, 0x080c_0000),
        gicc(2, 0x200, true, 0x080e_0000),
    ];
    let mut tables = qemu_tables();
    tables[1] = madt(&structures);
    let m = read(&tables).unwrap();
    assert_eq!((m.gic.gicr, m.gic.gicr_size), (0x080c_0000, 0x2_0000));
    assert_eq!(m.cpus(), [0x100, 0x200]);
}

/// `qemu_tables()` with table `i` replaced.
fn qemu_with(i: usize, t: Vec<u8>) -> Result<Machine, AcpiError> {
    let mut tables = qemu_tables();
    tables[i] = t;
    read(&tables)
}

#[test]
fn bad_checksum_is_named() {
    let mut madt = qemu_madt();
    madt[50] ^= 0x40;
    let err = qemu_with(1, madt).unwrap_err();
    assert_eq!(
        err,
        AcpiError::Table(Signature::Madt, TableProblem::Checksum)
    );
    assert_eq!(err.describe(), "APIC (MADT): checksum is not zero");
}

#[test]
fn wrong_signatures_are_named() {
    // The RSDP's own signature.
    let (rsdp_addr, mut mem) = image(&qemu_tables());
    let root = &mut mem
        .ranges
        .iter_mut()
        .find(|(a, _)| *a == rsdp_addr)
        .unwrap()
        .1;
    root[0] = b'X';
    assert_eq!(
        machine(rsdp_addr, &mem),
        Err(AcpiError::Rsdp(RsdpProblem::Signature))
    );
    // An RSDP whose XSDT address leads to another table.
    let (_, mut mem) = image(&qemu_tables());
    mem.place(0x1000, rsdp(0x7c45_0000)); // the FADT
    let err = machine(0x1000, &mem).unwrap_err();
    assert_eq!(
        err,
        AcpiError::Table(Signature::Xsdt, TableProblem::Signature)
    );
    assert!(err.describe().starts_with("XSDT:"));
}

#[test]
fn missing_table_is_named() {
    let mut tables = qemu_tables();
    tables.remove(2);
    let err = read(&tables).unwrap_err();
    assert_eq!(
        err,
        AcpiError::Table(Signature::Gtdt, TableProblem::Missing)
    );
    assert_eq!(err.describe(), "GTDT: not listed in the XSDT");
}

#[test]
fn psci_over_hvc_only_is_read_and_refused_by_validate() {
    let m = qemu_with(0, fadt(PSCI_HVC, 0)).unwrap();
    assert_eq!(m.psci(), Some(PsciConduit::Hvc));
    assert_eq!(m.validate(), Err(MachineError::PsciHvc));
    let none = qemu_with(0, fadt(0, 0)).unwrap();
    assert_eq!(none.validate(), Err(MachineError::NoPsci));
}

#[test]
fn gicv2_is_refused_naming_gicv3() {
    let v2 = madt(&[gicd(0x0800_0000, 2), gicc(0, 0, true, 0)]);
    let err = qemu_with(1, v2).unwrap_err();
    assert_eq!(err, AcpiError::MadtGicVersion(2));
    assert!(err.describe().contains("needs GICv3"), "{}", err.describe());
    // Version 0 ("unspecified") without redistributors is a GICv2 too ...
    let v0 = madt(&[gicd(0x0800_0000, 0), gicc(0, 0, true, 0)]);
    assert_eq!(qemu_with(1, v0), Err(AcpiError::MadtGicVersion(0)));
    // ... and with a redistributor range a GICv3.
    let v0_gicr = madt(&[
        gicd(0x0800_0000, 0),
        gicc(0, 0, true, 0),
        gicr(0x080a_0000, 0x2_0000),
    ]);
    assert_eq!(qemu_with(1, v0_gicr).map(|m| m.gic.gicr), Ok(0x080a_0000));
}

#[test]
fn madt_structure_problems_are_named() {
    let no_gicr = madt(&[gicd(0x0800_0000, 3), gicc(0, 0, true, 0)]);
    assert_eq!(qemu_with(1, no_gicr), Err(AcpiError::MadtNoRedistributor));
    assert_eq!(
        qemu_with(1, madt(&[gicc(0, 0, true, 0)])),
        Err(AcpiError::MadtNoDistributor)
    );
    let zero_length = madt(&[gicd(0x0800_0000, 3), Body::new().u8(0x0B).u8(0)]);
    assert_eq!(
        qemu_with(1, zero_length),
        Err(AcpiError::MadtEntryMalformed)
    );
    let mut acpi50_gicc = gicc(0, 0, true, 0);
    acpi50_gicc.0.truncate(40);
    acpi50_gicc.0[1] = 40;
    let old = madt(&[gicd(0x0800_0000, 3), acpi50_gicc]);
    let err = qemu_with(1, old).unwrap_err();
    assert_eq!(err, AcpiError::MadtEntryTooShort(0x0B));
    assert!(err.describe().contains("MPIDR"));
}

#[test]
fn spcr_problems_are_named() {
    let uart = |kind: u8, space: u8, base: u64| {
        table(
            b"SPCR",
            2,
            &Body::new().u8(kind).zeros(3).gas(space, 8, 0, 1, base),
        )
    };
    let err = qemu_with(3, uart(0x00, 0, 0x3f8)).unwrap_err();
    assert_eq!(err, AcpiError::SpcrInterfaceType(0));
    assert!(err.describe().contains("16550"));
    assert_eq!(err.to_string(), format!("{} (value 0x00)", err.describe()));
    assert_eq!(
        qemu_with(3, uart(0x03, 1, 0x3f8)),
        Err(AcpiError::SpcrAddressSpace(1))
    );
    assert_eq!(qemu_with(3, uart(0x03, 0, 0)), Err(AcpiError::SpcrDisabled));
    let sbsa32 = qemu_with(3, uart(0x0D, 0, 0x0900_0000)).unwrap();
    assert_eq!(sbsa32.console.kind(), Some(ConsoleKind::SbsaGeneric));
}

#[test]
fn short_gtdt_and_fadt_are_named() {
    let gtdt = table(b"GTDT", 1, &Body::new().zeros(64 - 36));
    assert_eq!(qemu_with(2, gtdt), Err(AcpiError::GtdtTooShort));
    // A FADT cut before the Arm boot flags (offset 129) cannot say how to reach PSCI.
    let fadt = table(b"FACP", 4, &Body::new().zeros(129 - 36));
    let err = qemu_with(0, fadt).unwrap_err();
    assert_eq!(err, AcpiError::FadtTooShort);
    assert!(err.describe().starts_with("FACP (FADT):"));
}

#[test]
fn rsdp_problems_are_named() {
    type Corruption = fn(&mut [u8]);
    let cases: [(Corruption, RsdpProblem); 4] = [
        (|r| r[8] ^= 1, RsdpProblem::Checksum),
        (|r| r[32] ^= 1, RsdpProblem::ExtendedChecksum),
        // Revision 2 → 0, with the checksum byte compensating so only the revision is wrong.
        (
            |r| (r[15], r[8]) = (0, r[8].wrapping_add(2)),
            RsdpProblem::Revision,
        ),
        (|r| r[20] = 8, RsdpProblem::Length),
    ];
    for (corrupt, problem) in cases {
        let (addr, mut mem) = image(&qemu_tables());
        let root = &mut mem.ranges.iter_mut().find(|(a, _)| *a == addr).unwrap().1;
        corrupt(root);
        assert_eq!(machine(addr, &mem), Err(AcpiError::Rsdp(problem)));
    }
    let (_, mem) = image(&qemu_tables());
    assert_eq!(
        machine(0x1234, &mem),
        Err(AcpiError::Rsdp(RsdpProblem::Unreadable))
    );
}
