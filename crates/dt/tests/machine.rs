//! `mtex_dt::machine`: QEMU's own tree, an Altra-like tree built here, each missing or
//! unusable part left for `Machine::validate` to name, and no panic on corrupted trees.

use mtex_dt::DtError;
use mtex_dt::machine::{check_structure, machine};
use mtex_platform::machine::MachineError;
use mtex_platform::{Console, ConsoleKind, Machine, PsciConduit, Region, qemu_virt};
use vm_fdt::FdtWriter;

/// `qemu-system-aarch64 -machine virt,virtualization=on,mte=on,gic-version=3,dumpdtb=FILE
/// -cpu max -m 1G -smp 1 -nographic -net none` (QEMU 10.0.2), packed: QEMU pads the tree
/// to 1 MiB, so the header's totalsize was set to the end of its strings block and the
/// zeros after it cut; nothing else changed.
const QEMU_VIRT_DTB: &[u8] = include_bytes!("data/qemu-virt-gicv3-el2-mte-1g.dtb");

#[test]
fn qemu_virt_tree_reads_as_qemu_virt() {
    assert_eq!(
        machine(QEMU_VIRT_DTB),
        Ok(qemu_virt::machine(0x4000_0000, 1 << 30))
    );
}

/// What [`altra_like`] describes.
const ALTRA_UART: u64 = 0x1000_0262_0000;
const ALTRA_CPUS: [u64; 4] = [0x0, 0x100, 0x1_0000, 0x1_0100];

/// Options for [`altra_like`] trees.
struct Tree<'a> {
    stdout_path: Option<&'a str>,
    psci_method: &'a str,
    gic_compatible: &'a str,
}

const ALTRA: Tree = Tree {
    stdout_path: Some("serial0:115200n8"),
    psci_method: "smc",
    gic_compatible: "arm,gic-v3",
};

/// An Ampere Altra-like tree: the SBSA UART and GIC far above 4 GiB, the UART under a
/// `/soc` bus with 2/2 cells, RAM in two nodes (one with two ranges), sparse MPIDRs with
/// 2-cell cpu `reg`, a `cpu-map` and a disabled CPU that must not be listed.
fn altra_like(t: &Tree) -> Vec<u8> {
    let mut w = FdtWriter::new().unwrap();
    let root = w.begin_node("").unwrap();
    w.property_u32("#address-cells", 2).unwrap();
    w.property_u32("#size-cells", 2).unwrap();
    w.property_string("compatible", "ampere,altra-like")
        .unwrap();

    let chosen = w.begin_node("chosen").unwrap();
    if let Some(path) = t.stdout_path {
        w.property_string("stdout-path", path).unwrap();
    }
    w.end_node(chosen).unwrap();
    let aliases = w.begin_node("aliases").unwrap();
    w.property_string("serial0", "/soc/serial@100002620000")
        .unwrap();
    w.end_node(aliases).unwrap();

    let cpus = w.begin_node("cpus").unwrap();
    w.property_u32("#address-cells", 2).unwrap();
    w.property_u32("#size-cells", 0).unwrap();
    let map = w.begin_node("cpu-map").unwrap();
    w.end_node(map).unwrap();
    for mpidr in ALTRA_CPUS.iter().copied().chain([0x1_0200]) {
        let cpu = w.begin_node(&format!("cpu@{mpidr:x}")).unwrap();
        w.property_string("device_type", "cpu").unwrap();
        w.property_string("compatible", "arm,neoverse-n1").unwrap();
        w.property_array_u32("reg", &[(mpidr >> 32) as u32, mpidr as u32])
            .unwrap();
        w.property_string("enable-method", "psci").unwrap();
        if mpidr == 0x1_0200 {
            w.property_string("status", "disabled").unwrap();
        }
        w.end_node(cpu).unwrap();
    }
    w.end_node(cpus).unwrap();

    for (name, reg) in [
        ("memory@80000000", &[0x8000_0000, 0x8000_0000][..]),
        (
            "memory@8800000000",
            &[0x88_0000_0000, 0x8_0000_0000, 0x90_0000_0000, 0x1000_0000][..],
        ),
    ] {
        let mem = w.begin_node(name).unwrap();
        w.property_string("device_type", "memory").unwrap();
        w.property_array_u64("reg", reg).unwrap();
        w.end_node(mem).unwrap();
    }

    let gic = w.begin_node("interrupt-controller@100000100000").unwrap();
    w.property_string("compatible", t.gic_compatible).unwrap();
    w.property_u32("#interrupt-cells", 3).unwrap();
    w.property_null("interrupt-controller").unwrap();
    w.property_array_u64(
        "reg",
        &[0x1000_0010_0000, 0x1_0000, 0x1000_0014_0000, 0x100_0000],
    )
    .unwrap();
    w.end_node(gic).unwrap();

    let timer = w.begin_node("timer").unwrap();
    w.property_string_list("compatible", vec!["arm,armv8-timer".into()])
        .unwrap();
    // Secure, non-secure physical, virtual, hypervisor physical: PPIs 13, 14, 11, 10.
    w.property_array_u32("interrupts", &[1, 13, 8, 1, 14, 8, 1, 11, 8, 1, 10, 8])
        .unwrap();
    w.end_node(timer).unwrap();

    let psci = w.begin_node("psci").unwrap();
    w.property_string_list(
        "compatible",
        vec!["arm,psci-1.0".into(), "arm,psci-0.2".into()],
    )
    .unwrap();
    w.property_string("method", t.psci_method).unwrap();
    w.end_node(psci).unwrap();

    let soc = w.begin_node("soc").unwrap();
    w.property_u32("#address-cells", 2).unwrap();
    w.property_u32("#size-cells", 2).unwrap();
    w.property_null("ranges").unwrap();
    // An 8250 first, so that falling back to "the first UART" would be wrong.
    let other = w.begin_node("serial@100002600000").unwrap();
    w.property_string("compatible", "ns16550a").unwrap();
    w.property_array_u64("reg", &[0x1000_0260_0000, 0x1000])
        .unwrap();
    w.end_node(other).unwrap();
    let uart = w.begin_node("serial@100002620000").unwrap();
    w.property_string("compatible", "arm,sbsa-uart").unwrap();
    w.property_array_u64("reg", &[ALTRA_UART, 0x1000]).unwrap();
    w.end_node(uart).unwrap();
    w.end_node(soc).unwrap();

    w.end_node(root).unwrap();
    w.finish().unwrap()
}

#[test]
fn altra_like_tree_is_found_whole() {
    let mut expected = Machine {
        console: Console::new(ConsoleKind::SbsaGeneric, ALTRA_UART),
        hyp_timer_intid: 26,
        vtimer_intid: 27,
        ..Machine::default()
    };
    expected.gic.gicd = 0x1000_0010_0000;
    expected.gic.gicr = 0x1000_0014_0000;
    expected.gic.gicr_size = 0x100_0000;
    expected.set_psci(PsciConduit::Smc);
    expected.push_ram(Region::new(0x8000_0000, 0x8000_0000));
    expected.push_ram(Region::new(0x88_0000_0000, 0x8_0000_0000));
    expected.push_ram(Region::new(0x90_0000_0000, 0x1000_0000));
    ALTRA_CPUS.iter().for_each(|&c| expected.push_cpu(c));

    let m = machine(&altra_like(&ALTRA)).unwrap();
    assert_eq!(m, expected);
    assert_eq!(m.validate(), Ok(()));
}

#[test]
fn stdout_path_forms() {
    let console = |path| {
        let tree = altra_like(&Tree {
            stdout_path: path,
            ..ALTRA
        });
        machine(&tree).unwrap().console
    };
    let sbsa = Console::new(ConsoleKind::SbsaGeneric, ALTRA_UART);
    assert_eq!(console(Some("/soc/serial@100002620000:115200n8")), sbsa);
    assert_eq!(console(Some("/soc/serial@100002620000")), sbsa);
    assert_eq!(console(Some("serial0")), sbsa);
    // Absent: the first PL011/SBSA UART, skipping the 8250.
    assert_eq!(console(None), sbsa);
    // Naming a UART mtex cannot drive, or nothing at all: no console, which validate names.
    for path in ["/soc/serial@100002600000", "serial7", "/nowhere"] {
        let tree = altra_like(&Tree {
            stdout_path: Some(path),
            ..ALTRA
        });
        let m = machine(&tree).unwrap();
        assert_eq!(m.validate(), Err(MachineError::NoConsole), "{path}");
    }
}

#[test]
fn unusable_parts_are_left_for_validate_to_name() {
    let hvc = machine(&altra_like(&Tree {
        psci_method: "hvc",
        ..ALTRA
    }))
    .unwrap();
    assert_eq!(hvc.psci(), Some(PsciConduit::Hvc));
    assert_eq!(hvc.validate(), Err(MachineError::PsciHvc));

    let gicv2 = machine(&altra_like(&Tree {
        gic_compatible: "arm,gic-400",
        ..ALTRA
    }))
    .unwrap();
    assert_eq!(gicv2.validate(), Err(MachineError::NoGic));
}

#[test]
fn unreadable_trees_are_parse_errors() {
    assert_eq!(machine(&[0u8; 64]), Err(DtError::Parse));
    assert_eq!(machine(&QEMU_VIRT_DTB[..100]), Err(DtError::Parse));
    assert_eq!(check_structure(QEMU_VIRT_DTB), Ok(()));
    // A NOP token in place of the root's first property.
    let mut nop = QEMU_VIRT_DTB.to_vec();
    let structs = u32::from_be_bytes(nop[8..12].try_into().unwrap()) as usize;
    nop[structs + 8..structs + 12].copy_from_slice(&4u32.to_be_bytes());
    assert_eq!(machine(&nop), Err(DtError::Parse));
}

/// xorshift64: a fixed pseudo-random sequence, so a failure reproduces.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Corrupts both trees thousands of ways (bytes changed, 32-bit words set to small or huge
/// values, truncation): `machine` may refuse them but must never panic.
#[test]
fn corrupted_trees_never_panic() {
    let mut rng = Rng(0x6d74_6578_2d64_7400);
    for tree in [QEMU_VIRT_DTB.to_vec(), altra_like(&ALTRA)] {
        for _ in 0..4000 {
            let mut t = tree.clone();
            for _ in 0..1 + rng.below(4) {
                let at = rng.below(t.len() - 3) & !3;
                let word = match rng.below(3) {
                    0 => rng.next() as u32,
                    1 => rng.below(16) as u32,
                    _ => u32::MAX - rng.below(16) as u32,
                };
                if rng.below(2) == 0 {
                    t[at..at + 4].copy_from_slice(&word.to_be_bytes());
                } else {
                    t[at] = word as u8;
                }
            }
            if rng.below(8) == 0 {
                t.truncate(rng.below(t.len()));
            }
            let _ = machine(&t);
        }
    }
}

/// QEMU virt with two `-serial` (the same dumpdtb command with `-serial null -serial null`,
/// repacked by `dtc -I dtb -O dtb`): the second PL011 is the one Linux mode passes through.
const QEMU_VIRT_2UART_DTB: &[u8] = include_bytes!("data/qemu-virt-gicv3-el2-mte-2uart.dtb");

#[test]
fn the_spare_uart_is_the_pl011_that_is_not_the_console() {
    let m = machine(QEMU_VIRT_2UART_DTB).unwrap();
    assert_eq!(m.console.base, 0x0900_0000);
    let (r, spi) = mtex_dt::machine::spare_uart(QEMU_VIRT_2UART_DTB)
        .unwrap()
        .expect("a second PL011");
    assert_eq!((r.base, r.size, spi), (0x0904_0000, 0x1000, 8));
    // With one -serial there is none: Linux mode must then refuse, not share the console.
    assert_eq!(mtex_dt::machine::spare_uart(QEMU_VIRT_DTB).unwrap(), None);
}

/// QEMU's fw_cfg device, where a snippet's code comes from off QEMU's command line.
#[test]
fn fw_cfg_is_found_where_qemu_puts_it() {
    let r = mtex_dt::machine::fw_cfg(QEMU_VIRT_DTB)
        .unwrap()
        .expect("QEMU's virt has fw_cfg");
    assert_eq!((r.base, r.size), (0x0902_0000, 0x18));
}
