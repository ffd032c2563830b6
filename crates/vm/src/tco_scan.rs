//! The TCO watch's scan: which MSR TCO sites of the guest image its untraced passes watch.
//! The hypervisor walks the guest's stage 1 for the image's executable mappings and reads
//! guest memory; what a page of words holds, what is kept, what is counted as unwatched and
//! which sites a pass takes are decided here.

use mtex_abi::report::TCO_WATCH_SITES;
use mtex_trace::decode::{self, Insn};

/// Most executable pages one scan reads (a guest mapping its whole RAM executable would
/// otherwise cost seconds): past it, the scan stops and counts the rest as unwatched.
pub const MAX_PAGES: u32 = 4096;

/// Bytes in a page the scan reads.
const PAGE: u64 = 0x1000;

/// The MSR TCO sites of the guest image's executable mappings, as one scan found them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scan {
    sites: [u64; TCO_WATCH_SITES],
    n: usize,
    /// Sites past [`TCO_WATCH_SITES`], pages past [`MAX_PAGES`], halves not walked.
    pub unwatched: u32,
    /// Pages read.
    pub pages: u32,
}

impl Scan {
    pub const EMPTY: Self = Self {
        sites: [0; TCO_WATCH_SITES],
        n: 0,
        unwatched: 0,
        pages: 0,
    };

    /// The sites found, in the order found.
    pub fn sites(&self) -> &[u64] {
        &self.sites[..self.n]
    }

    /// The part of a mapping of `size` bytes from `va` to `ipa` that maps the image
    /// (`image` IPA, `image_size` bytes), page by page: `word` reads the guest's word at an
    /// IPA (None: not guest RAM, the rest of that page is not read).
    pub fn mapping(
        &mut self,
        (va, ipa, size): (u64, u64, u64),
        (image, image_size): (u64, u64),
        word: impl Fn(u64) -> Option<u32>,
    ) {
        let lo = ipa.max(image);
        let hi = ipa
            .saturating_add(size)
            .min(image.saturating_add(image_size));
        for page in ((lo & !(PAGE - 1))..hi).step_by(PAGE as usize) {
            if self.pages == MAX_PAGES {
                self.unwatched += 1;
                return;
            }
            self.pages += 1;
            let va_page = va + (page - ipa);
            for off in (0..PAGE).step_by(4) {
                let Some(w) = word(page + off) else {
                    break;
                };
                // Cheap test first (the scan reads every word of the image): MSR (immediate
                // or register) has 0xd5 in its top byte; the decoder decides.
                if w >> 24 == 0xd5
                    && matches!(decode::decode(w), Insn::MsrTcoImm(_) | Insn::MsrTcoReg(_))
                {
                    self.add(va_page + off);
                }
            }
        }
    }

    /// Keeps the site at `va` once; past [`TCO_WATCH_SITES`] it is counted as unwatched.
    pub fn add(&mut self, va: u64) {
        if self.sites().contains(&va) {
            return;
        }
        if self.n == TCO_WATCH_SITES {
            self.unwatched += 1;
            return;
        }
        self.sites[self.n] = va;
        self.n += 1;
    }

    /// Passes that watch every site, `per_pass` at a time (none without breakpoints).
    pub fn passes(&self, per_pass: usize) -> u8 {
        if per_pass == 0 {
            return 0;
        }
        self.n.div_ceil(per_pass).min(u8::MAX as usize) as u8
    }

    /// The sites the `k`-th pass (0-based) watches, `per_pass` at a time.
    pub fn group(&self, k: usize, per_pass: usize) -> &[u64] {
        let first = k.saturating_mul(per_pass).min(self.n);
        let n = (self.n - first).min(per_pass);
        &self.sites[first..first + n]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSR_TCO_1: u32 = 0xd503_419f;
    const MSR_TCO_X5: u32 = 0xd51b_42e5;
    const MRS_X7_TCO: u32 = 0xd53b_42e7;
    const NOP: u32 = 0xd503_201f;

    /// Guest memory of `pages` pages from 0x8000_0000, with `sites` (offset, word).
    fn memory(sites: &[(u64, u32)]) -> impl Fn(u64) -> Option<u32> + '_ {
        move |ipa| {
            let off = ipa.checked_sub(0x8000_0000)?;
            (off < 0x10_0000).then(|| {
                sites
                    .iter()
                    .find(|&&(o, _)| o == off)
                    .map_or(NOP, |&(_, w)| w)
            })
        }
    }

    #[test]
    fn only_msr_tco_is_a_site_and_each_is_kept_once_at_its_virtual_address() {
        let mem = [
            (0x10, MSR_TCO_1),
            (0x1004, MSR_TCO_X5),
            (0x2000, MRS_X7_TCO),
        ];
        let mut s = Scan::EMPTY;
        let image = (0x8000_0000, 0x3000);
        s.mapping(
            (0xffff_8000_0000_0000, 0x8000_0000, 0x3000),
            image,
            memory(&mem),
        );
        assert_eq!(s.sites(), [0xffff_8000_0000_0010, 0xffff_8000_0000_1004]);
        assert_eq!((s.pages, s.unwatched), (3, 0));
        // The same code through a second mapping is its own sites; the first again is not.
        s.mapping((0x40_0000, 0x8000_0000, 0x1000), image, memory(&mem));
        s.mapping(
            (0xffff_8000_0000_0000, 0x8000_0000, 0x1000),
            image,
            memory(&mem),
        );
        assert_eq!(s.sites().len(), 3);
    }

    #[test]
    fn a_mapping_is_read_only_where_it_maps_the_image() {
        let mem = [(0x0, MSR_TCO_1), (0x5000, MSR_TCO_1)];
        let mut s = Scan::EMPTY;
        // A 2 MiB block from IPA 0x8000_0000; the image is its pages 5 to 6.
        s.mapping(
            (0x1_0000_0000, 0x8000_0000, 0x20_0000),
            (0x8000_5000, 0x2000),
            memory(&mem),
        );
        assert_eq!(s.sites(), [0x1_0000_5000]);
        assert_eq!(s.pages, 2);
    }

    #[test]
    fn past_its_limits_the_scan_counts_what_it_leaves_unwatched() {
        let mut s = Scan::EMPTY;
        for i in 0..TCO_WATCH_SITES as u64 + 3 {
            s.add(0x1000 + 4 * i);
        }
        assert_eq!((s.sites().len(), s.unwatched), (TCO_WATCH_SITES, 3));
        let mut s = Scan::EMPTY;
        let pages = u64::from(MAX_PAGES) + 2;
        let image = (0x8000_0000, pages * PAGE);
        s.mapping((0, 0x8000_0000, pages * PAGE), image, |_| Some(NOP));
        assert_eq!((s.pages, s.unwatched), (MAX_PAGES, 1));
    }

    #[test]
    fn passes_take_the_sites_in_groups_in_order() {
        let mut s = Scan::EMPTY;
        for i in 0..10 {
            s.add(0x1000 + 4 * i);
        }
        assert_eq!(s.passes(4), 3);
        assert_eq!(s.group(0, 4), [0x1000, 0x1004, 0x1008, 0x100c]);
        assert_eq!(s.group(2, 4), [0x1020, 0x1024]);
        assert!(s.group(3, 4).is_empty());
        assert_eq!(Scan::EMPTY.passes(4), 0);
        assert_eq!(s.passes(0), 0);
    }
}
