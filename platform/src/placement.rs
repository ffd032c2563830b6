//! Choosing where guest RAM goes in host memory on the `-kernel` path, where nothing
//! allocated it: the highest aligned range of RAM that avoids everything in use.

use crate::machine::Region;

/// The highest `align`-aligned range of `size` bytes inside one of `ram` that overlaps none
/// of `avoid`.
pub fn highest_free(ram: &[Region], avoid: &[Region], size: u64, align: u64) -> Option<u64> {
    let mut best: Option<u64> = None;
    for r in ram {
        // Candidate tops: the region's end and the start of every avoided range.
        let tops = core::iter::once(r.end()).chain(avoid.iter().map(|a| a.base));
        for top in tops {
            let Some(base) = top.checked_sub(size).map(|b| b & !(align - 1)) else {
                continue;
            };
            let cand = Region::new(base, size);
            if r.contains(&cand)
                && !avoid.iter().any(|a| a.overlaps(&cand))
                && best.is_none_or(|b| base > b)
            {
                best = Some(base);
            }
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const M: u64 = 1 << 20;

    #[test]
    fn qemu_kernel_path_layout() {
        // 1 GiB at 0x4000_0000; the hypervisor at +2 MiB, initrd at +128 MiB, tree after it.
        let ram = [Region::new(0x4000_0000, 1024 * M)];
        let avoid = [
            Region::new(0x4020_0000, 2 * M),
            Region::new(0x4800_0000, M),
            Region::new(0x4820_0000, M),
        ];
        let b = highest_free(&ram, &avoid, 256 * M, 2 * M).unwrap();
        assert_eq!(b, 0x8000_0000 - 256 * M);
    }

    #[test]
    fn nothing_fits_is_none() {
        let ram = [Region::new(0x4000_0000, 200 * M)];
        assert_eq!(highest_free(&ram, &[], 256 * M, 2 * M), None);
    }

    proptest! {
        #[test]
        fn a_placement_is_aligned_inside_ram_and_clear_of_everything(
            bases in proptest::collection::vec(0u64..64, 1..4),
            holes in proptest::collection::vec((0u64..4096, 1u64..64), 0..6),
            size_mb in 1u64..256,
        ) {
            let ram: Vec<Region> = bases.iter().enumerate()
                .map(|(i, b)| Region::new(((i as u64) << 32) + (b << 21), 512 * M)).collect();
            let avoid: Vec<Region> = holes.iter()
                .map(|&(at, len)| Region::new(0x10_0000 * at, len * M)).collect();
            if let Some(b) = highest_free(&ram, &avoid, size_mb * M, 2 * M) {
                let c = Region::new(b, size_mb * M);
                prop_assert_eq!(b % (2 * M), 0);
                prop_assert!(ram.iter().any(|r| r.contains(&c)));
                prop_assert!(!avoid.iter().any(|a| a.overlaps(&c)));
            }
        }
    }
}
