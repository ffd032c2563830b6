//! User address spaces: one aarch64-paging table per process, in TTBR0 with its own ASID,
//! whose table pages come from the page allocator (tagged under KASAN unless the policy
//! skips page tables), so creating and copying address spaces costs what it costs Linux.

use super::kasan;
use super::layout::*;
use super::page_alloc::{self, Gfp};
use aarch64_paging::Mapping;
use aarch64_paging::descriptor::El1Attributes;
use aarch64_paging::descriptor::PhysicalAddress;
use aarch64_paging::paging::{Constraints, El1And0, MemoryRegion, PageTable, Translation, VaRange};
use core::ptr::NonNull;

/// Table pages through the kernel allocator, reached through match-all pointers from their
/// physical addresses, as Linux's __va(phys).
pub struct KTranslation;

impl Translation<El1Attributes> for KTranslation {
    fn allocate_table(&mut self) -> (NonNull<PageTable<El1Attributes>>, PhysicalAddress) {
        let p = page_alloc::alloc_pgtable();
        (
            NonNull::new(p as *mut PageTable<El1Attributes>).expect("non-null table"),
            PhysicalAddress(pa_of(p) as usize),
        )
    }

    unsafe fn deallocate_table(&mut self, table: NonNull<PageTable<El1Attributes>>) {
        page_alloc::free_pgtable(table.as_ptr() as u64)
    }

    fn physical_to_virtual(&self, pa: PhysicalAddress) -> NonNull<PageTable<El1Attributes>> {
        let p = untagged(kva(pa.0 as u64));
        NonNull::new(p as *mut PageTable<El1Attributes>).expect("non-null table")
    }
}

const NORMAL: El1Attributes = El1Attributes::VALID
    .union(El1Attributes::INNER_SHAREABLE)
    .union(El1Attributes::ACCESSED);
/// MAIR index 0: Tagged Normal (0xF0); index 1: Normal write-back, untagged.
const USER_DATA: El1Attributes = NORMAL
    .union(El1Attributes::ATTRIBUTE_INDEX_0)
    .union(El1Attributes::USER)
    .union(El1Attributes::NON_GLOBAL)
    .union(El1Attributes::UXN)
    .union(El1Attributes::PXN);
const USER_CODE: El1Attributes = NORMAL
    .union(El1Attributes::ATTRIBUTE_INDEX_1)
    .union(El1Attributes::USER)
    .union(El1Attributes::NON_GLOBAL)
    .union(El1Attributes::READ_ONLY)
    .union(El1Attributes::PXN);
/// The guest image at its link address, for the kernel only.
/// Non-global, like every TTBR0 mapping: the boot tables map the same addresses with other
/// attributes, and two global entries for one address would conflict in the TLB.
const KERNEL_IMAGE: El1Attributes = NORMAL
    .union(El1Attributes::ATTRIBUTE_INDEX_0)
    .union(El1Attributes::NON_GLOBAL)
    .union(El1Attributes::UXN);

/// A user region the address space owns (frees on drop) or shares (fork's child).
#[derive(Clone, Copy)]
struct Region {
    va: u64,
    pa: u64,
    len: u64,
    owned: bool,
}

const MAX_REGIONS: usize = 5;

pub struct Mm {
    map: Mapping<KTranslation, El1And0>,
    regions: [Option<Region>; MAX_REGIONS],
    /// Tasks using this address space (threads share it).
    pub users: u64,
}

/// ASIDs in use (bit n: ASID n). ASID 0 is the boot tables'.
static ASIDS: super::cell::KCell<[u64; 4]> = super::cell::KCell::new([1, 0, 0, 0]);

/// A free ASID. With at most a few dozen live address spaces, 255 never run out; if they
/// did, the kernel stops with a message rather than share one.
fn next_asid() -> u64 {
    // SAFETY: nothing is called while the borrow lives but die, which does not return.
    let a = unsafe { ASIDS.get() };
    for (w, word) in a.iter_mut().enumerate() {
        if *word != u64::MAX {
            let bit = (!*word).trailing_zeros() as u64;
            *word |= 1 << bit;
            return w as u64 * 64 + bit;
        }
    }
    super::die(format_args!("out of ASIDs"))
}

fn free_asid(asid: u64) {
    // SAFETY: one word's update, which calls nothing.
    let a = unsafe { ASIDS.get() };
    a[(asid / 64) as usize] &= !(1 << (asid % 64));
}

unsafe extern "C" {
    static __user_text_start: u8;
    static __image_start: u8;
    static __image_end: u8;
}

/// The image's link-address range rounded out to 2 MiB (one L2 block each).
fn image_range() -> (u64, u64) {
    // Only the symbols' link addresses are used: `sym` operands, not PC-relative (the kernel
    // runs from the linear map).
    let (s, e): (u64, u64);
    // SAFETY: loads two link-time constants.
    unsafe {
        core::arch::asm!("ldr {s}, =__image_start", "ldr {e}, =__image_end", s = out(reg) s, e = out(reg) e)
    };
    (s & !0x1f_ffff, (e + 0x1f_ffff) & !0x1f_ffff)
}

/// Physical address of the user code page.
fn user_code_pa() -> u64 {
    pa_of(&raw const __user_text_start as u64)
}

impl Mm {
    /// A new address space with user code, a stack and a heap (user pages are allocated
    /// untagged: the user tags them).
    pub fn new_process() -> *mut Mm {
        let mm = Self::empty();
        // SAFETY: `empty` returned a valid, exclusively owned Mm.
        let m = unsafe { &mut *mm };
        m.map_fixed(USER_CODE_VA, user_code_pa(), 4096, USER_CODE, false);
        m.map_new(USER_STACK_TOP - USER_STACK_SIZE, USER_STACK_SIZE);
        m.map_new(USER_HEAP_VA, USER_HEAP_SIZE);
        mm
    }

    fn empty() -> *mut Mm {
        let p = page_alloc::kmalloc(size_of::<Mm>() as u64) as *mut Mm;
        let mut map = Mapping::with_asid_and_va_range(
            KTranslation,
            next_asid() as usize,
            1,
            El1And0,
            VaRange::Lower,
        );
        let (s, e) = image_range();
        map.map_range(
            &MemoryRegion::new(s as usize, e as usize),
            PhysicalAddress(s as usize),
            KERNEL_IMAGE,
            Constraints::empty(),
        )
        .expect("map the image");
        // SAFETY: `p` is a fresh kmalloc object of the right size and alignment.
        unsafe {
            p.write(Mm {
                map,
                regions: [None; MAX_REGIONS],
                users: 1,
            })
        };
        p
    }

    fn map_fixed(&mut self, va: u64, pa: u64, len: u64, attrs: El1Attributes, owned: bool) {
        self.map
            .map_range(
                &MemoryRegion::new(va as usize, (va + len) as usize),
                PhysicalAddress(pa as usize),
                attrs,
                // Pages, never blocks: as faulting in page by page would leave it.
                Constraints::NO_BLOCK_MAPPINGS,
            )
            .expect("map user memory");
        let slot = self
            .regions
            .iter_mut()
            .find(|r| r.is_none())
            .expect("too many regions");
        *slot = Some(Region { va, pa, len, owned });
    }

    /// Maps `len` bytes of fresh user pages at `va`, zeroed with their tags cleared (what
    /// Linux does for PROT_MTE anonymous memory).
    pub fn map_new(&mut self, va: u64, len: u64) {
        let order = (len / 4096).next_power_of_two().trailing_zeros();
        let p = page_alloc::alloc_pages(order, Gfp::SkipKasan);
        clear_user_page(p, 4096 << order);
        self.map_fixed(va, pa_of(p), len, USER_DATA, true);
        barrier();
    }

    /// mmap without populating: `len` bytes at `va` are reserved (and backed), and each page
    /// is mapped by the page-fault handler when the task first touches it.
    pub fn map_lazy(&mut self, va: u64, len: u64) {
        let order = (len / 4096).next_power_of_two().trailing_zeros();
        let p = page_alloc::alloc_pages(order, Gfp::SkipKasan);
        let slot = self
            .regions
            .iter_mut()
            .find(|r| r.is_none())
            .expect("too many regions");
        *slot = Some(Region {
            va,
            pa: pa_of(p),
            len,
            owned: true,
        });
    }

    /// do_page_fault for a translation fault at `far`: maps the page of a lazy region
    /// (zeroed, tags cleared). False when `far` is in no region.
    pub fn fault_in(&mut self, far: u64) -> bool {
        let page = far & !0xfff & !mtex_arch::mte_bits::TOP_BYTE_MASK;
        let Some(r) = self
            .regions
            .iter()
            .flatten()
            .find(|r| (r.va..r.va + r.len).contains(&page))
            .copied()
        else {
            return false;
        };
        let pa = r.pa + (page - r.va);
        clear_user_page(untagged(kva(pa)), 4096);
        self.map
            .map_range(
                &MemoryRegion::new(page as usize, (page + 4096) as usize),
                PhysicalAddress(pa as usize),
                USER_DATA,
                Constraints::NO_BLOCK_MAPPINGS,
            )
            .expect("map the faulting page");
        barrier();
        true
    }

    /// fork's copy of the page tables: every region mapped again, its pages shared.
    pub fn fork(&self) -> *mut Mm {
        let child = Self::empty();
        // SAFETY: `empty` returned a valid, exclusively owned Mm.
        let c = unsafe { &mut *child };
        for r in self.regions.iter().flatten() {
            let attrs = if r.va == USER_CODE_VA {
                USER_CODE
            } else {
                USER_DATA
            };
            c.map_fixed(r.va, r.pa, r.len, attrs, false);
        }
        barrier();
        child
    }

    /// TTBR0_EL1 for this address space.
    pub fn ttbr0(&self) -> u64 {
        self.map.root_address().0 as u64 | (self.map.asid() as u64) << 48
    }

    /// Drops one user; the last frees the tables, the owned pages and the ASID's TLB entries.
    ///
    /// # Safety
    /// `mm` must be live and not in TTBR0_EL1 when the last user goes.
    pub unsafe fn put(mm: *mut Mm) {
        // SAFETY: the caller passes a live Mm.
        let m = unsafe { &mut *mm };
        m.users -= 1;
        if m.users > 0 {
            return;
        }
        for r in m.regions.iter().flatten() {
            if r.owned {
                let order = (r.len / 4096).next_power_of_two().trailing_zeros();
                page_alloc::free_pages(untagged(kva(r.pa)), order, Gfp::SkipKasan);
            }
        }
        let asid = m.map.asid() as u64;
        // SAFETY: the Mm is dead; reading it out drops the mapping (freeing its tables).
        drop(unsafe { mm.read() });
        page_alloc::kfree(mm as u64, size_of::<Mm>() as u64);
        // SAFETY: TLB maintenance for an ASID nothing uses any more.
        unsafe {
            core::arch::asm!("dsb ishst", "tlbi aside1is, {}", "dsb ish", in(reg) asid << 48)
        };
        free_asid(asid);
    }
}

/// Zeroes user memory and sets its allocation tags to 0 (the kernel's pointer `p` is
/// match-all; the STGs go through a tag-0 copy of it).
fn clear_user_page(p: u64, len: u64) {
    // SAFETY: freshly allocated user memory the caller owns; Tagged RAM.
    unsafe {
        kasan::set_tags(kasan::with_tag(p, 0), len);
        kasan::zero(p, len);
    }
}

/// New table entries are visible to the walker before they are used.
fn barrier() {
    // SAFETY: barriers only.
    unsafe { core::arch::asm!("dsb ishst", "isb") };
}
