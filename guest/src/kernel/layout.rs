//! Where things live in the kernel's and the tasks' address spaces.
//!
//! The kernel runs in the upper half (TTBR1) through a linear map of all RAM, like Linux's
//! PAGE_OFFSET map: kernel pointers carry tag 0xF in bits 59:56 (top byte 0xFF), which is
//! what TCR_EL1.TCMA1 makes match-all. TTBR0 holds the running task's user space (ASID
//! tagged); it also maps the guest image at its link address, privileged-only, because the
//! image was linked there and a few absolute addresses (fmt tables) still point there.

use mtex_abi::program;

/// T1SZ = 25: the upper range starts here; a kernel virtual address is `KVA_BASE | pa`.
pub const KVA_BASE: u64 = program::KERNEL_LINEAR_BASE;
/// Bits of a physical address inside the linear map (39-bit VA).
const PA_MASK: u64 = (1 << 39) - 1;

pub const fn kva(pa: u64) -> u64 {
    pa | KVA_BASE
}

/// The physical address behind a kernel (or tagged kernel) pointer.
pub const fn pa_of(kva: u64) -> u64 {
    kva & PA_MASK
}

/// A kernel pointer with tag 0xF: the untagged, match-all form (Linux's KASAN_TAG_KERNEL).
pub const fn untagged(p: u64) -> u64 {
    p | mtex_arch::mte_bits::TAG_MASK
}

/// TCR_EL1 in the kernel: 39-bit TTBR0 and TTBR1 ranges, 4 KiB granules, write-back walks,
/// 40-bit IPA, 8-bit ASIDs in TTBR0, TBI0 and TBI1 (tagged pointers). TCMA1 is per policy.
pub const TCR_KERNEL: u64 = 25
    | (1 << 8)
    | (1 << 10)
    | (3 << 12)
    | (25 << 16)
    | (1 << 24)
    | (1 << 26)
    | (3 << 28)
    | (2 << 30)
    | (2 << 32)
    | program::TCR_TBI0
    | program::TCR_TBI1;

/// User code (the `.usertext` page), read-only and executable at EL0.
pub const USER_CODE_VA: u64 = mtex_abi::program::USER_CODE_VA;
/// User stack: [USER_STACK_TOP - USER_STACK_SIZE, USER_STACK_TOP).
pub const USER_STACK_TOP: u64 = 0x0060_0000;
pub const USER_STACK_SIZE: u64 = 64 << 10;
/// User heap (Tagged pages, tagged by the user like glibc.mem.tagging=3).
pub const USER_HEAP_VA: u64 = 0x0080_0000;
pub const USER_HEAP_SIZE: u64 = 256 << 10;
/// Where `mmap` (fork-pgtable) maps its MiBs.
pub const USER_MAP_VA: u64 = 0x1000_0000;
/// First address that is not user space.
pub const USER_TOP: u64 = 1 << 39;

/// A kernel stack, as Linux's THREAD_SIZE with 4 KiB pages.
pub const THREAD_SIZE: u64 = 16 << 10;
pub const THREAD_ORDER: u32 = 2;

/// The page pool the kernel allocates from: this far into RAM, this big.
pub const POOL_OFFSET: u64 = 128 << 20;
pub const POOL_SIZE: u64 = 96 << 20;
/// Of the pool, the part kmalloc carves objects from.
pub const SLAB_SIZE: u64 = 2 << 20;
