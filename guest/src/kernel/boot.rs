//! Into the upper half: the linear map of RAM in TTBR1 (the boot identity map stays in
//! TTBR0 for init), the MMU on, then a jump to the same code through its upper-half alias,
//! so that every PC-relative address (statics, the stack) becomes a kernel address.

use super::layout::{KVA_BASE, TCR_KERNEL, kva};
use crate::programs::{write_sctlr, write_tcr};
use aarch64_cpu::asm::barrier;
use aarch64_paging::Mapping;
use aarch64_paging::descriptor::El1Attributes;
use aarch64_paging::descriptor::PhysicalAddress;
use aarch64_paging::idmap::IdTranslation;
use aarch64_paging::paging::{Constraints, El1And0, MemoryRegion, VaRange};
use alloc::boxed::Box;
use arm_sysregs::el1::accessors::{write_rgsr_el1, write_ttbr1_el1, write_vbar_el1};
use arm_sysregs::el1::registers::{RgsrEl1, Ttbr1El1, VbarEl1};
use mtex_abi::program as p;

/// SCTLR_EL1 of the kernel with the MMU on: caches, ATA and ATA0 (tags at EL1 and EL0), and
/// ITFSB, as Linux's INIT_SCTLR_EL1_MMU_ON with MTE. The policy adds the kernel's TCF.
pub const SCTLR_KERNEL: u64 = p::SCTLR_MMU_ON | p::SCTLR_ATA | p::SCTLR_ATA0 | p::SCTLR_ITFSB;

/// Kernel RAM: Tagged Normal (MAIR index 0), EL1 only, executable at EL1.
const KERNEL_RAM: El1Attributes = El1Attributes::VALID
    .union(El1Attributes::ATTRIBUTE_INDEX_0)
    .union(El1Attributes::INNER_SHAREABLE)
    .union(El1Attributes::ACCESSED)
    .union(El1Attributes::UXN);

/// As KERNEL_RAM, but Normal memory without the Tagged attribute (MAIR index 1).
const KERNEL_RAM_UNTAGGED: El1Attributes = El1Attributes::VALID
    .union(El1Attributes::ATTRIBUTE_INDEX_1)
    .union(El1Attributes::INNER_SHAREABLE)
    .union(El1Attributes::ACCESSED)
    .union(El1Attributes::UXN);

/// Maps RAM at `kva(pa)`, turns the MMU on and continues at `then` in the upper half.
pub fn enter_upper_half(base: u64, size: u64, then: extern "C" fn(u64) -> !) -> ! {
    let mut map =
        Mapping::with_asid_and_va_range(IdTranslation::new(), 0, 1, El1And0, VaRange::Upper);
    map.map_range(
        &MemoryRegion::new(kva(base) as usize, kva(base + size) as usize),
        PhysicalAddress(base as usize),
        KERNEL_RAM,
        Constraints::empty(),
    )
    .expect("map the kernel's linear map");
    // The page the CPUs poll on several CPUs (`smp`): Normal memory without the Tagged
    // attribute, so that polling it is never tag checked. (Its address here, before the jump,
    // is its physical one.)
    let shared = super::smp::SHARED_PAGE.ptr() as u64;
    map.map_range(
        &MemoryRegion::new(kva(shared) as usize, kva(shared) as usize + 4096),
        PhysicalAddress(shared as usize),
        KERNEL_RAM_UNTAGGED,
        Constraints::empty(),
    )
    .expect("map the CPUs' shared page");
    let root = map.root_address().0 as u64;
    // The tables live as long as the kernel.
    Box::leak(Box::new(map));
    // SAFETY: the MMU is off; TTBR1 takes effect when it is turned on below.
    unsafe { write_ttbr1_el1(Ttbr1El1::from_bits_retain(root)) };
    barrier::isb(barrier::SY);
    // Everything written with the caches off (the tables on the heap, the kernel's globals
    // in .data and .bss) is read cacheably from now on: no stale line may hide it.
    crate::mmu::invalidate_image_data();
    write_tcr(TCR_KERNEL);
    write_sctlr(SCTLR_KERNEL);
    // SAFETY: RAM is mapped at both addresses with the same contents; after the jump the
    // stack and PC are the upper-half aliases of the ones in use, and `then` never returns.
    unsafe {
        core::arch::asm!(
            "movz x9, #{hi_lo}, lsl #32",
            "movk x9, #{hi_hi}, lsl #48",
            "mov x10, sp",
            "orr x10, x10, x9",
            "mov sp, x10",
            "mov x29, #0",
            "orr {e}, {e}, x9",
            "br {e}",
            hi_lo = const (KVA_BASE >> 32) & 0xffff,
            hi_hi = const KVA_BASE >> 48,
            e = in(reg) then as usize as u64,
            in("x0") 0u64,
            options(noreturn),
        )
    }
}

/// VBAR_EL1 = the kernel's vectors (upper-half address: taken PC-relative).
pub fn install_vectors() {
    // Only the vectors' address is taken.
    let v = &raw const super::entry::mtex_kernel_vectors as u64;
    // SAFETY: installs valid vectors.
    unsafe { write_vbar_el1(VbarEl1::from_bits_retain(v)) };
    barrier::isb(barrier::SY);
    // RGSR_EL1.SEED: IRG's pseudo-random tags, the same on every run.
    write_rgsr_el1(RgsrEl1::empty().with_seed(0x5a5a));
}
