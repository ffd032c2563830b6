//! The machine mtex shows its guest: the same intermediate-physical layout on every host,
//! whatever addresses firmware gave the memory behind it. Stage 2 maps this window onto the
//! RAM the hypervisor was given (anywhere), so the guest's addresses — and therefore its
//! page tables, its code and every count — are the same on QEMU `-kernel`, on QEMU through
//! UEFI and on a server.
//!
//! The guest sees only RAM. Its console is the CONSOLE_WRITE hypercall, its timer the
//! virtual timer the hypervisor forwards, its exit PSCI SYSTEM_OFF; every other address
//! faults to EL2 and ends the run with a record.

/// Guest RAM in the guest's physical address space (the Linux arm64 convention of QEMU virt,
/// so that a Linux-shaped guest needs no special layout).
pub const RAM_BASE: u64 = 0x4000_0000;
/// Guest RAM size. The guest kernel needs 224 MiB (its page pool ends there).
pub const RAM_SIZE: u64 = 256 << 20;
/// Where the guest's device tree is written (start of its RAM).
pub const DTB_ADDR: u64 = RAM_BASE;
/// Room for the device tree.
pub const DTB_MAX: u64 = 2 << 20;
/// Where the guest Image is placed: the guest's link address (guest/link.ld).
pub const IMAGE_ADDR: u64 = RAM_BASE + (16 << 20);
/// The guest's timer interrupts as PPI numbers (INTID - 16), in the arm,armv8-timer order:
/// secure physical, non-secure physical, virtual, hypervisor. The guest uses only the
/// virtual timer, whose interrupt the hypervisor injects as [`VTIMER_INTID`] whatever the
/// host's physical INTID is.
pub const TIMER_PPIS: [u32; 4] = [13, 14, 11, 10];
/// The INTID the guest's virtual timer interrupt arrives as.
pub const VTIMER_INTID: u32 = 16 + TIMER_PPIS[2];

/// Alignment of the host memory behind guest RAM: 2 MiB, so stage 2 can use block mappings.
pub const RAM_ALIGN: u64 = 2 << 20;

/// The guest's RAM window.
pub const fn ram() -> crate::Region {
    crate::Region::new(RAM_BASE, RAM_SIZE)
}

const _: () = assert!(IMAGE_ADDR >= DTB_ADDR + DTB_MAX);
const _: () = assert!(RAM_SIZE.is_multiple_of(RAM_ALIGN) && RAM_BASE.is_multiple_of(RAM_ALIGN));

/// Most banks of RAM an installed hypervisor's guest may have: the firmware's write-back
/// ranges ([`crate::machine::MAX_RAM_REGIONS`]), each hole splitting one of them in two.
pub const MAX_BANKS: usize = crate::machine::MAX_RAM_REGIONS + MAX_HOLES;
/// Most holes in install mode's RAM: the hypervisor and its secondary CPUs' heap.
pub const MAX_HOLES: usize = 2;

/// Guest RAM and the host memory behind it (what stage 2 maps).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GuestRam {
    /// The window the guest sees (install mode: from the lowest bank's start to the highest
    /// bank's end).
    pub ipa: crate::Region,
    /// Host physical address of its first byte.
    pub pa: u64,
    /// Install mode: the only parts of the window that are the guest's RAM (the firmware's
    /// write-back ranges less the hypervisor's own memory), in address order. Empty: the
    /// whole window is.
    banks: [crate::Region; MAX_BANKS],
    n_banks: usize,
}

impl GuestRam {
    /// The standard window backed by host memory at `pa`.
    pub const fn at(pa: u64) -> Self {
        Self::sized(pa, RAM_SIZE)
    }

    /// A window of `size` bytes at [`RAM_BASE`] backed by host memory at `pa` (Linux mode,
    /// whose kernel needs more than the built-in guest).
    pub const fn sized(pa: u64, size: u64) -> Self {
        GuestRam {
            ipa: crate::Region::new(RAM_BASE, size),
            pa,
            banks: [crate::Region::new(0, 0); MAX_BANKS],
            n_banks: 0,
        }
    }

    /// Install mode: the firmware's own memory at its own addresses (stage 2 maps it one to
    /// one), its write-back ranges `ram` less `holes` (the hypervisor's memory). None when
    /// nothing is left, or the pieces are more than [`MAX_BANKS`].
    pub fn identity(ram: &[crate::Region], holes: &[crate::Region]) -> Option<Self> {
        let mut sorted = [crate::Region::new(0, 0); crate::machine::MAX_RAM_REGIONS];
        let sorted = sorted.get_mut(..ram.len())?;
        sorted.copy_from_slice(ram);
        sorted.sort_unstable_by_key(|r| r.base);
        let mut banks = [crate::Region::new(0, 0); MAX_BANKS];
        let mut n = 0;
        for &r in sorted.iter().filter(|r| r.size != 0) {
            // What is left of `r` once every hole is taken out, in address order.
            let mut pieces = [crate::Region::new(0, 0); 1 + MAX_HOLES];
            pieces[0] = r;
            let mut k = 1;
            for h in holes.iter().filter(|h| h.size != 0) {
                let mut next = [crate::Region::new(0, 0); 1 + MAX_HOLES];
                let mut m = 0;
                for p in &pieces[..k] {
                    for q in minus(*p, *h).into_iter().flatten() {
                        *next.get_mut(m)? = q;
                        m += 1;
                    }
                }
                pieces = next;
                k = m;
            }
            for p in &pieces[..k] {
                *banks.get_mut(n)? = *p;
                n += 1;
            }
        }
        let (first, last) = (banks[..n].first()?, banks[..n].last()?);
        Some(GuestRam {
            ipa: crate::Region::new(first.base, last.end() - first.base),
            pa: first.base,
            banks,
            n_banks: n,
        })
    }

    /// The host address of guest address `ipa`, if `[ipa, ipa + len)` is guest RAM.
    #[inline]
    pub fn pa_of(&self, ipa: u64, len: u64) -> Option<u64> {
        let end = ipa.checked_add(len)?;
        if ipa < self.ipa.base || end > self.ipa.end() {
            return None;
        }
        let pa = ipa - self.ipa.base + self.pa;
        if self.n_banks != 0 {
            let want = crate::Region::new(pa, len.max(1));
            return self.banks[..self.n_banks]
                .iter()
                .any(|b| b.contains(&want))
                .then_some(pa);
        }
        Some(pa)
    }

    /// The host memory behind guest RAM: the window, or install mode's banks.
    pub fn host_ranges(&self) -> impl Iterator<Item = crate::Region> + '_ {
        let whole = crate::Region::new(self.pa, self.ipa.size);
        let banks = &self.banks[..self.n_banks];
        (banks.is_empty())
            .then_some(whole)
            .into_iter()
            .chain(banks.iter().copied())
    }

    /// The host memory behind guest RAM, for a window with no banks (the guest's RAM loaded
    /// by the hypervisor).
    pub const fn host(&self) -> crate::Region {
        crate::Region::new(self.pa, self.ipa.size)
    }

    /// Bytes of guest RAM: the window's, or the banks' sum.
    pub fn bytes(&self) -> u64 {
        self.host_ranges().map(|r| r.size).sum()
    }
}

/// `r` less `h`: up to two pieces.
fn minus(r: crate::Region, h: crate::Region) -> [Option<crate::Region>; 2] {
    if !r.overlaps(&h) {
        return [Some(r), None];
    }
    let below = (h.base > r.base).then_some(crate::Region::new(r.base, h.base - r.base));
    let above = (h.end() < r.end()).then_some(crate::Region::new(h.end(), r.end() - h.end()));
    [below, above]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guest_addresses_translate_only_inside_the_window() {
        let g = GuestRam::at(0x8_8000_0000);
        assert_eq!(g.pa_of(RAM_BASE, 4), Some(0x8_8000_0000));
        assert_eq!(g.pa_of(IMAGE_ADDR + 0x10, 4), Some(0x8_8100_0010));
        assert_eq!(
            g.pa_of(RAM_BASE + RAM_SIZE - 0x1000, 0x1000),
            Some(0x8_8000_0000 + RAM_SIZE - 0x1000)
        );
        assert_eq!(g.pa_of(RAM_BASE + RAM_SIZE - 0x800, 0x1000), None);
        assert_eq!(g.pa_of(RAM_BASE - 4, 4), None);
        assert_eq!(g.pa_of(u64::MAX - 2, 4), None);
    }

    #[test]
    fn install_mode_is_one_to_one_except_the_hypervisor() {
        let hyp = crate::Region::new(0x7000_0000, 0x100_0000);
        let g = GuestRam::identity(&[crate::Region::new(0x4000_0000, 1 << 30)], &[hyp]).unwrap();
        assert_eq!(g.pa_of(0x4000_0000, 8), Some(0x4000_0000));
        assert_eq!(g.pa_of(0x6fff_fff8, 8), Some(0x6fff_fff8));
        assert_eq!(g.pa_of(0x6fff_fffc, 8), None, "straddles the hypervisor");
        assert_eq!(g.pa_of(0x7000_0000, 4), None);
        assert_eq!(g.pa_of(0x70ff_fffc, 4), None);
        assert_eq!(g.pa_of(0x7100_0000, 4), Some(0x7100_0000));
        assert_eq!(g.pa_of(0x3fff_fffc, 4), None);
        assert_eq!(g.pa_of(0x8000_0000, 4), None);
        assert_eq!(g.bytes(), (1 << 30) - 0x100_0000);
    }

    /// A server's RAM in several banks with devices between them: only the banks are RAM,
    /// never the gap, and the hypervisor's two pieces (its image, its CPUs' heap) are holes.
    #[test]
    fn install_mode_takes_ram_in_several_banks_and_never_the_gaps() {
        use crate::Region as R;
        let high = R::new(0x80_0000_0000, 4 << 30);
        let low = R::new(0x8000_0000, 2 << 30);
        let hyp = R::new(0x9000_0000, 0x100_0000);
        let heap = R::new(0x80_4000_0000, 0x20_0000);
        // The firmware's map need not be sorted.
        let g = GuestRam::identity(&[high, low], &[hyp, heap]).unwrap();
        let banks: Vec<R> = g.host_ranges().collect();
        assert_eq!(
            banks,
            [
                R::new(0x8000_0000, 0x1000_0000),
                R::new(0x9100_0000, 0x6f00_0000),
                R::new(0x80_0000_0000, 0x4000_0000),
                R::new(0x80_4020_0000, (3 << 30) - 0x20_0000),
            ]
        );
        assert_eq!(g.bytes(), (6 << 30) - 0x100_0000 - 0x20_0000);
        assert_eq!(g.pa_of(0x8000_0000, 4), Some(0x8000_0000));
        assert_eq!(g.pa_of(0xffff_fffc, 4), Some(0xffff_fffc));
        assert_eq!(g.pa_of(0xffff_fffc, 8), None, "runs into the gap");
        assert_eq!(g.pa_of(0x1_0000_0000, 4), None, "the gap");
        assert_eq!(g.pa_of(0x40_0000_0000, 4), None, "the gap");
        assert_eq!(g.pa_of(0x9000_0800, 4), None, "the hypervisor");
        assert_eq!(g.pa_of(0x80_4000_0000, 4), None, "its heap");
        assert_eq!(g.pa_of(0x80_3fff_fffc, 4), Some(0x80_3fff_fffc));
        assert_eq!(g.pa_of(0x80_4020_0000, 4), Some(0x80_4020_0000));
        assert_eq!(g.pa_of(high.end() - 4, 4), Some(high.end() - 4));
        assert_eq!(g.pa_of(high.end(), 4), None);
    }

    #[test]
    fn install_mode_refuses_what_it_cannot_hold() {
        use crate::Region as R;
        let hyp = R::new(0x4000_0000, 0x1000);
        assert_eq!(GuestRam::identity(&[], &[hyp]), None, "no RAM");
        assert_eq!(GuestRam::identity(&[hyp], &[hyp]), None, "nothing left");
        let many: Vec<R> = (0..crate::machine::MAX_RAM_REGIONS as u64 + 1)
            .map(|i| R::new(i << 32, 1 << 20))
            .collect();
        assert_eq!(
            GuestRam::identity(&many, &[]),
            None,
            "more ranges than a map holds"
        );
        let full = &many[..crate::machine::MAX_RAM_REGIONS];
        let split: Vec<R> = full
            .iter()
            .take(2)
            .map(|r| R::new(r.base + 0x1000, 0x1000))
            .collect();
        let g = GuestRam::identity(full, &split).unwrap();
        assert_eq!(
            g.host_ranges().count(),
            MAX_BANKS,
            "every hole splits a range"
        );
    }
}
