//! A read-only walk of a guest's stage-1 translation tables (VMSAv8-64, 4 KiB granule): the
//! pages and blocks it maps executable, for the hypervisor's scan of guest code (the MSR TCO
//! sites it watches with breakpoints).
//!
//! Written here rather than with aarch64-paging, which builds and owns its tables: this walks
//! tables the guest owns, through a read callback over guest memory, and only reads them.
//!
//! The walk errs towards more: a leaf counts as executable unless both its PXN and UXN are
//! set, and the table-level XN bits are not applied. A page scanned for nothing costs time; a
//! page missed would make a count short.

/// TCR_EL1.TG0 and TG1 values of the 4 KiB granule.
const TG0_4K: u64 = 0b00;
const TG1_4K: u64 = 0b10;
/// Output address bits of a descriptor (48-bit OA).
const OA_MASK: u64 = 0x0000_ffff_ffff_f000;
const PXN: u64 = 1 << 53;
const UXN: u64 = 1 << 54;

/// A mapping the walk found: `size` bytes at virtual `va`, backed by guest address `ipa`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Leaf {
    pub va: u64,
    pub ipa: u64,
    pub size: u64,
}

/// Why a half of the address space was not walked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WalkError {
    /// Not the 4 KiB granule (16 KiB and 64 KiB are not walked).
    Granule,
    /// TxSZ outside 16..=39 (52-bit VA, or too small for this walk).
    VaSize,
    /// Translation table walks for the half are disabled (TCR_EL1.EPDx).
    Disabled,
}

/// Calls `leaf` for each mapping of the TTBR0 (`upper` false) or TTBR1 half that is
/// executable at EL0 or EL1. `read` returns the 64-bit word at a guest address, None where
/// there is no guest RAM (that table is then skipped). Returns the number of table entries
/// read, or why the half was not walked.
pub fn executable_leaves(
    tcr: u64,
    ttbr: u64,
    upper: bool,
    read: impl Fn(u64) -> Option<u64>,
    mut leaf: impl FnMut(Leaf),
) -> Result<u64, WalkError> {
    let (tsz, tg, epd) = if upper {
        ((tcr >> 16) & 0x3f, (tcr >> 30) & 3, (tcr >> 23) & 1)
    } else {
        (tcr & 0x3f, (tcr >> 14) & 3, (tcr >> 7) & 1)
    };
    if epd != 0 {
        return Err(WalkError::Disabled);
    }
    if tg != if upper { TG1_4K } else { TG0_4K } {
        return Err(WalkError::Granule);
    }
    if !(16..=39).contains(&tsz) {
        return Err(WalkError::VaSize);
    }
    let va_bits = 64 - tsz as u32;
    // Each level resolves 9 bits above the 12-bit page offset: level 3 bits 20:12 ... level
    // 0 bits 47:39. The walk starts at the level holding the top VA bit.
    let start = 4 - (va_bits - 12).div_ceil(9);
    let base_va = if upper { !0u64 << va_bits } else { 0 };
    // The start table is aligned to its size (at least 64 bytes): TTBR.BADDR's bits below
    // that are RES0, and bit 0 is CnP.
    let table_bytes = (8u64 << (va_bits - shift(start)).min(9)).max(64);
    let table = ttbr & 0x0000_ffff_ffff_fffe & !(table_bytes - 1);
    let mut entries = 0;
    walk(
        &read,
        &mut leaf,
        &mut entries,
        table,
        start,
        base_va,
        va_bits,
    );
    Ok(entries)
}

/// Bits of VA a level-`level` entry maps.
const fn shift(level: u32) -> u32 {
    12 + 9 * (3 - level)
}

fn walk(
    read: &impl Fn(u64) -> Option<u64>,
    leaf: &mut impl FnMut(Leaf),
    entries: &mut u64,
    table: u64,
    level: u32,
    va: u64,
    va_bits: u32,
) {
    let sh = shift(level);
    // The start level's table may be shorter than 512 entries.
    let n = if sh + 9 > va_bits {
        1u64 << (va_bits - sh)
    } else {
        512
    };
    for i in 0..n {
        let Some(d) = read(table + 8 * i) else {
            return;
        };
        *entries += 1;
        let va = va | (i << sh);
        match (d & 0b11, level) {
            (0b11, 0..=2) => walk(read, leaf, entries, d & OA_MASK, level + 1, va, va_bits),
            // Blocks at levels 1 and 2, pages at level 3.
            (0b01, 1 | 2) | (0b11, 3) if d & (PXN | UXN) != PXN | UXN => leaf(Leaf {
                va,
                ipa: d & OA_MASK & !((1 << sh) - 1),
                size: 1 << sh,
            }),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;
    use std::collections::BTreeMap;
    use std::vec::Vec;

    /// TCR with 4 KiB granules and 39-bit halves (T0SZ = T1SZ = 25), as the guest kernel.
    const TCR: u64 = 25 | (25 << 16) | (TG1_4K << 30);

    fn walk_all(mem: &BTreeMap<u64, u64>, upper: bool, ttbr: u64) -> Vec<Leaf> {
        let mut out = Vec::new();
        executable_leaves(
            TCR,
            ttbr,
            upper,
            |a| Some(*mem.get(&a).unwrap_or(&0)),
            |l| out.push(l),
        )
        .unwrap();
        out
    }

    #[test]
    fn finds_executable_pages_and_blocks_with_their_addresses() {
        // Level 1 at 0x1000 (39-bit VA starts at level 1): entry 1 -> level 2 at 0x2000;
        // level 2 entry 0 -> level 3 at 0x3000, entry 3 a 2 MiB block (PXN only: EL0 code).
        let mut mem = BTreeMap::new();
        mem.insert(0x1000 + 8, 0x2000 | 0b11);
        mem.insert(0x2000, 0x3000 | 0b11);
        mem.insert(0x2000 + 3 * 8, 0x4060_0000 | PXN | 0b01);
        // Level 3: page 5 executable, page 6 execute-never at both ELs, page 7 invalid.
        mem.insert(0x3000 + 5 * 8, 0x4100_5000 | UXN | 0b11);
        mem.insert(0x3000 + 6 * 8, 0x4100_6000 | UXN | PXN | 0b11);
        mem.insert(0x3000 + 7 * 8, 0x4100_7000 | 0b10);
        let leaves = walk_all(&mem, false, 0x1000);
        assert_eq!(
            leaves,
            [
                Leaf {
                    va: (1 << 30) | (5 << 12),
                    ipa: 0x4100_5000,
                    size: 0x1000
                },
                Leaf {
                    va: (1 << 30) | (3 << 21),
                    ipa: 0x4060_0000,
                    size: 0x20_0000
                },
            ]
        );
        // The same tables through TTBR1: the VAs are in the upper half.
        let upper = walk_all(&mem, true, 0x1000);
        assert_eq!(upper[0].va, 0xffff_ff80_0000_0000 | (1 << 30) | (5 << 12));
    }

    #[test]
    fn a_48_bit_space_starts_at_level_0_and_a_small_top_table_keeps_its_offset() {
        // T0SZ = 16: level 0; entry 0 -> level 1 at 0x2000, whose entry 2 is a 1 GiB block.
        let mut mem = BTreeMap::new();
        mem.insert(0x1000, 0x2000 | 0b11);
        mem.insert(0x2000 + 2 * 8, 0x8000_0000 | PXN | 0b01);
        let mut out = Vec::new();
        let read = |a| Some(*mem.get(&a).unwrap_or(&0));
        executable_leaves(16, 0x1000 | 1, false, read, |l| out.push(l)).unwrap();
        assert_eq!(
            out,
            [Leaf {
                va: 2 << 30,
                ipa: 0x8000_0000,
                size: 1 << 30
            }]
        );
        // T0SZ = 33 (31-bit VA): the level-1 table has 2 entries, 64-byte aligned, and may
        // sit at an offset inside its page.
        let mut mem = BTreeMap::new();
        mem.insert(0x1040 + 8, 0x4000_0000 | UXN | 0b01);
        let mut out = Vec::new();
        let read = |a| Some(*mem.get(&a).unwrap_or(&0));
        let entries = executable_leaves(33, 0x1040, false, read, |l| out.push(l)).unwrap();
        assert_eq!(entries, 2);
        assert_eq!(out[0].va, 1 << 30);
    }

    #[test]
    fn other_granules_sizes_and_disabled_halves_are_not_walked() {
        let read = |_| Some(0);
        let none = |_: Leaf| {};
        let tg0_64k = 25 | (0b01 << 14);
        assert_eq!(
            executable_leaves(tg0_64k, 0, false, read, none),
            Err(WalkError::Granule)
        );
        assert_eq!(
            executable_leaves(12, 0, false, read, none),
            Err(WalkError::VaSize)
        );
        assert_eq!(
            executable_leaves(TCR | (1 << 7), 0, false, read, none),
            Err(WalkError::Disabled)
        );
        // A table outside guest RAM is skipped, not a failure.
        assert_eq!(executable_leaves(TCR, 0, false, |_| None, none), Ok(0));
    }
}
