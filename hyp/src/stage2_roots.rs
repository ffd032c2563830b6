//! Each CPU's own copy of stage 2's root table, so that one CPU can make another exit to EL2
//! without an interrupt: a window that every CPU counts opens on one CPU, and each other CPU
//! must start counting at its very next instruction.
//!
//! Why not an interrupt: in Linux mode the guest owns the GIC and physical interrupts go
//! straight to EL1 (HCR_EL2.IMO clear). A hypervisor-private interrupt would need Group 0,
//! which is Secure on servers whose firmware is TF-A, or a full virtual GIC. Stage 2 needs
//! neither: the opener clears the other CPUs' root entries and invalidates the VM's TLB
//! entries on every CPU (TLBI VMALLS12E1IS, then DSB ISH, which waits for it to complete
//! everywhere); from then on each other CPU's next instruction fetch, data access or table
//! walk faults to EL2, where the CPU restores its root and joins before the instruction is
//! retried. The lower levels of the tables are shared and never change after boot (but for
//! the write permission of a guarded phase's pages, `mmu::protect`); only the
//! 512 root entries are copied. A CPU asleep in WFI fetches nothing until it wakes, so it
//! joins at its first instruction after waking, and counts nothing before.
//!
//! On silicon, instructions a CPU had already fetched when the TLBI completed may still run
//! before its first fault: they are not counted, as anything before a CPU joins is not.

use arm_sysregs::el2::accessors::{read_vttbr_el2, write_vttbr_el2};
use arm_sysregs::el2::registers::VttbrEl2;
use core::sync::atomic::{AtomicU64, Ordering};

/// Entries in a root table (a 4 KiB page of 8-byte descriptors).
const ENTRIES: usize = 512;

/// VTTBR_EL2.BADDR, the root's address (bits 47:1; CnP is bit 0, VMID bits 63:48).
const BADDR: u64 = VttbrEl2::BADDR_MASK << VttbrEl2::BADDR_SHIFT;
const _: () = assert!(BADDR == 0x0000_ffff_ffff_fffe);

/// The root stage 2 was built with (its address): the one every copy copies.
static TEMPLATE: AtomicU64 = AtomicU64::new(0);

/// Notes the root VTTBR_EL2 holds now as the template. Once, after stage 2 is built.
pub fn set_template() {
    TEMPLATE.store(read_vttbr_el2().bits() & BADDR, Ordering::Relaxed);
}

fn entries(root: u64) -> *mut u64 {
    root as *mut u64
}

/// The allocation of a root: a page-aligned table.
pub const ROOT_ALLOC: mtex_vm::heap::Alloc = mtex_vm::heap::Alloc {
    size: ENTRIES * 8,
    align: 4096,
};

/// A new copy of the template (its address), None without the memory for it.
pub fn new_root() -> Option<u64> {
    use alloc::alloc::{Layout, alloc};
    let layout = Layout::from_size_align(ROOT_ALLOC.size, ROOT_ALLOC.align).ok()?;
    // SAFETY: a layout of non-zero size; the page is filled below before any use.
    let page = unsafe { alloc(layout) };
    if page.is_null() {
        return None;
    }
    refill(page as u64);
    Some(page as u64)
}

/// Makes `root` the template's copy again.
pub fn refill(root: u64) {
    let template = TEMPLATE.load(Ordering::Relaxed);
    assert!(template != 0, "stage 2 built before its roots are copied");
    for i in 0..ENTRIES {
        // SAFETY: both are 4 KiB root tables the hypervisor owns (identity-mapped at EL2);
        // a CPU walking `root` sees each 8-byte entry whole (single-copy atomic stores).
        unsafe {
            let e = core::ptr::read_volatile(entries(template).add(i));
            core::ptr::write_volatile(entries(root).add(i), e);
        }
    }
    // The walks read tables through the inner-shareable write-back cache (VTCR_EL2), so the
    // stores only need to be seen before the guest runs again (the ERET that follows is a
    // context synchronisation event). No TLBI: a fault is never held in a TLB.
    aarch64_cpu::asm::barrier::dsb(aarch64_cpu::asm::barrier::ISHST);
}

/// This CPU's VTTBR_EL2 with `root` for its root: the same VMID.
pub fn vttbr_with(root: u64) -> VttbrEl2 {
    VttbrEl2::from_bits_retain((read_vttbr_el2().bits() & !BADDR) | root)
}

/// Makes this CPU walk `root` (at boot, before the guest runs on it).
pub fn use_root(root: u64) {
    // SAFETY: `root` is one of this CPU's copies of the template's root (`new_root`), a
    // page-aligned stage 2 root table over the tables stage 2 was built with; the guest has
    // not run on this CPU yet.
    unsafe { write_vttbr_el2(vttbr_with(root)) };
    // SAFETY: invalidating this VMID's stage-1&2 TLB entries has no effect on memory.
    unsafe { core::arch::asm!("isb", "tlbi vmalls12e1", "dsb nsh", "isb") };
}

/// Clears every root in `roots`, then invalidates the VM's translations on every CPU and
/// waits for that to complete: each CPU walking one of them faults at its next access.
pub fn kick(roots: impl Iterator<Item = u64>) {
    for root in roots {
        for i in 0..ENTRIES {
            // SAFETY: a root table the hypervisor owns; an invalid entry is all zeroes.
            unsafe { core::ptr::write_volatile(entries(root).add(i), 0) };
        }
    }
    // SAFETY: the stores are seen by every walker before the invalidation, which removes
    // every cached translation of this VMID on every CPU in the inner-shareable domain; the
    // last DSB waits for it to complete there. No effect on memory.
    unsafe { core::arch::asm!("dsb ishst", "tlbi vmalls12e1is", "dsb ish", "isb") };
}
