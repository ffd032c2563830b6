//! Property tests: no input makes a reader panic, whether raw byte soup, tables with valid
//! headers and checksums around random bodies, MADTs of random structures, or QEMU's tables
//! with random bytes changed; and any set of CPUs is found whole.

use mtex_platform::Machine;
use mtex_platform::machine::MAX_CPUS;
use proptest::prelude::*;

use super::testutil::*;
use super::{Signature, fadt, gtdt, machine, madt, parse_rsdp, sdt, spcr};

const SIGNATURES: [Signature; 5] = [
    Signature::Xsdt,
    Signature::Spcr,
    Signature::Madt,
    Signature::Gtdt,
    Signature::Fadt,
];

/// An MADT structure of a type mtex reads (or another), any length byte, any contents.
fn structure() -> impl Strategy<Value = Vec<u8>> {
    let kind = prop_oneof![Just(0x0Bu8), Just(0x0C), Just(0x0E), any::<u8>()];
    (kind, any::<u8>(), prop::collection::vec(any::<u8>(), 0..90)).prop_map(|(k, len, rest)| {
        let mut s = vec![k, len];
        s.extend(rest);
        s
    })
}

/// An MPIDR's affinity fields: Aff3 [39:32], Aff2..Aff0 [23:0].
fn affinity() -> impl Strategy<Value = u64> {
    any::<u64>().prop_map(|v| v & 0xff_00ff_ffff)
}

proptest! {
    #[test]
    fn readers_never_panic_on_byte_soup(bytes in prop::collection::vec(any::<u8>(), 0..600)) {
        let mut m = Machine::default();
        let _ = spcr::read(&bytes, &mut m);
        let _ = madt::read(&bytes, &mut m);
        let _ = gtdt::read(&bytes, &mut m);
        let _ = fadt::read(&bytes, &mut m);
        let _ = parse_rsdp(&bytes);
        for sig in SIGNATURES {
            let _ = sdt::verify(&bytes, sig);
        }
        prop_assert!(m.cpus().len() <= MAX_CPUS);
    }

    #[test]
    fn machine_never_panics_on_checksummed_random_tables(
        bodies in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..300), 4),
        revisions in prop::collection::vec(any::<u8>(), 4),
    ) {
        let sigs = [b"SPCR", b"APIC", b"GTDT", b"FACP"];
        let tables: Vec<Vec<u8>> = sigs
            .iter()
            .zip(&bodies)
            .zip(&revisions)
            .map(|((sig, body), rev)| table(sig, *rev, &Body(body.clone())))
            .collect();
        let (rsdp, mem) = image(&tables);
        let _ = machine(rsdp, &mem);
    }

    #[test]
    fn madt_of_random_structures_never_panics(
        structures in prop::collection::vec(structure(), 0..12),
    ) {
        let t = madt(&structures.into_iter().map(Body).collect::<Vec<_>>());
        let mut m = Machine::default();
        let _ = madt::read(&t, &mut m);
        prop_assert!(m.cpus().len() <= 12);
    }

    #[test]
    fn qemu_tables_with_random_bytes_changed_never_panic(
        changes in prop::collection::vec(
            (any::<prop::sample::Index>(), any::<prop::sample::Index>(), any::<u8>()),
            1..8,
        ),
    ) {
        let (rsdp, mut mem) = image(&qemu_tables());
        for (range, at, byte) in changes {
            let range = range.index(mem.ranges.len());
            let bytes = &mut mem.ranges[range].1;
            let i = at.index(bytes.len());
            bytes[i] = byte;
        }
        let _ = machine(rsdp, &mem);
    }

    #[test]
    fn every_enabled_cpu_is_found_in_order(
        mpidrs in prop::collection::vec(affinity(), 1..=MAX_CPUS),
    ) {
        let mut structures = vec![gicd(0x1000_0010_0000, 3), gicr(0x1000_0014_0000, 0x100_0000)];
        structures.extend(mpidrs.iter().zip(0..).map(|(&mpidr, uid)| gicc(uid, mpidr, true, 0)));
        let mut m = Machine::default();
        madt::read(&madt(&structures), &mut m).unwrap();
        prop_assert_eq!(m.cpus(), &mpidrs[..]);
        prop_assert_eq!(m.cpus_dropped, 0);
    }
}
