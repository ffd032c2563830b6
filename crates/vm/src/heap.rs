//! How much heap the hypervisor needs for the machine's CPUs. Its static heap holds what the
//! VM needs and the boot CPU's state; every other CPU, once the guest starts it, takes a
//! stack, a fast-path block and trap ring, its state, a stage-2 root and its run tables.
//! On a server with 192 cores that is far more than an image should carry, so the hypervisor
//! takes it from RAM at boot, sized here from the allocations a CPU makes.
//!
//! The heap is a buddy allocator (buddy_system_allocator): each allocation takes a block of
//! a power-of-two size, at least its alignment and a word, so a CPU needs the sum of its
//! blocks. Blocks left over in different places cannot be joined for a larger request, so
//! an eighth more is taken as a margin; the tests run the real allocator over every CPU's
//! allocations in shuffled orders. None of a CPU's allocations is ever freed (a CPU keeps
//! its memory over power-ups).

/// One allocation a CPU makes: its size and alignment in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Alloc {
    pub size: usize,
    pub align: usize,
}

/// The block the buddy allocator takes for `a`.
pub fn block(a: Alloc) -> usize {
    a.size
        .next_power_of_two()
        .max(a.align)
        .max(size_of::<usize>())
}

/// What one CPU's allocations take from the heap.
pub fn per_cpu(allocs: &[Alloc]) -> usize {
    allocs.iter().map(|&a| block(a)).sum()
}

/// Granule of the memory taken from RAM for the heap: it is mapped at EL2 in whole pages,
/// and a 2 MiB multiple lets the allocator use large blocks.
pub const GRANULE: usize = 2 << 20;

/// Memory to take from RAM for the secondary CPUs of a machine of `cpus` CPUs, each taking
/// `per_cpu` bytes (0 for one CPU), with an eighth more for blocks the allocator cannot
/// join. Rounded up to [`GRANULE`]; None if it does not fit the address space.
pub fn for_secondaries(cpus: usize, per_cpu: usize) -> Option<usize> {
    let bytes = cpus.saturating_sub(1).checked_mul(per_cpu)?;
    bytes
        .checked_add(bytes / 8)?
        .checked_next_multiple_of(GRANULE)
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;
    use buddy_system_allocator::Heap;
    use core::alloc::Layout;
    use proptest::prelude::*;

    /// A CPU's allocations of the hypervisor's sizes (a 128 KiB stack, a 32 KiB-aligned
    /// ring, a block, its state, a root, run tables for 1 GiB of guest RAM).
    fn cpu() -> Vec<Alloc> {
        [
            (128 << 10, 16),
            (8 << 10, 32 << 10),
            (200, 8),
            (1200, 8),
            (9000, 8),
            (4096, 4096),
            (256 * 1600, 8),
            (256 * 24, 8),
            (256 * 4, 4),
            (1024 * 8, 8),
            (4096 * 8, 8),
        ]
        .map(|(size, align)| Alloc { size, align })
        .to_vec()
    }

    #[test]
    fn a_block_is_a_power_of_two_at_least_the_alignment_and_a_word() {
        let b = |size, align| block(Alloc { size, align });
        assert_eq!(b(1, 1), 8);
        assert_eq!(b(4096, 4096), 4096);
        assert_eq!(b(4097, 8), 8192);
        assert_eq!(b(8 << 10, 32 << 10), 32 << 10);
    }

    #[test]
    fn one_cpu_takes_nothing_and_more_take_whole_granules() {
        assert_eq!(for_secondaries(1, 1 << 20), Some(0));
        assert_eq!(for_secondaries(0, 1 << 20), Some(0));
        assert_eq!(for_secondaries(2, 1), Some(GRANULE));
        assert_eq!(for_secondaries(193, 1 << 20), Some(216 << 20));
        assert_eq!(for_secondaries(usize::MAX, 2), None);
    }

    /// The real allocator, given the memory `for_secondaries` asks for, meets every CPU's
    /// allocations in the order `swaps` shuffles them into.
    fn fits(cpus: usize, swaps: &[usize]) -> bool {
        let allocs = cpu();
        let per = per_cpu(&allocs);
        let bytes = for_secondaries(cpus, per).unwrap();
        if bytes == 0 {
            return true;
        }
        let layout = Layout::from_size_align(bytes, GRANULE).unwrap();
        // SAFETY: a fresh allocation of the test's own; freed below.
        let mem = unsafe { std::alloc::alloc(layout) };
        assert!(!mem.is_null());
        let mut heap = Heap::<32>::empty();
        // SAFETY: the region is this test's alone while the heap lives.
        unsafe { heap.add_to_heap(mem as usize, mem as usize + bytes) };
        let mut all = Vec::new();
        for _ in 1..cpus {
            all.extend(allocs.iter().copied());
        }
        let n = all.len();
        for (i, &r) in swaps.iter().enumerate() {
            all.swap(i % n, r % n);
        }
        let ok = all.iter().all(|a| {
            heap.alloc(Layout::from_size_align(a.size, a.align).unwrap())
                .is_ok()
        });
        // SAFETY: allocated above with this layout; the heap is not used again.
        unsafe { std::alloc::dealloc(mem, layout) };
        ok
    }

    #[test]
    fn the_memory_for_192_secondaries_holds_their_allocations() {
        assert!(fits(193, &[]));
        let per = per_cpu(&cpu());
        assert!(per > 600 << 10, "{per}");
    }

    proptest! {
        #[test]
        fn any_order_of_allocations_fits(cpus in 2usize..24, swaps in prop::collection::vec(any::<usize>(), 0..300)) {
            prop_assert!(fits(cpus, &swaps));
        }
    }
}
