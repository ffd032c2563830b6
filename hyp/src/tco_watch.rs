//! PSTATE.TCO writes counted at full speed. MSR TCO cannot be trapped, so at a run's first
//! untraced pass the hypervisor scans the guest image's executable mappings (both halves of
//! the guest's stage 1, `mtex_arch::stage1`) for MSR TCO, and in the run's later passes
//! watches the sites with hardware breakpoints routed to EL2 (MDCR_EL2.TDE), as many per pass
//! as it has breakpoints. A hit is emulated — PSTATE.TCO written in SPSR_EL2, the instruction
//! skipped — and counted with its value: no stepping.
//!
//! What it cannot see, it says: sites past `TCO_WATCH_SITES` (`unwatched`), and a watched
//! site whose code was rewritten (`lost`). Only the guest image is scanned: code the guest
//! writes elsewhere at run time is not.

use crate::context::GuestContext;
use crate::debug::{BCR_ENABLED, BREAKPOINTS_USED, set_breakpoint};
use arm_sysregs::el1::accessors::{
    read_mdscr_el1, read_sctlr_el1, read_tcr_el1, read_ttbr0_el1, read_ttbr1_el1, write_mdscr_el1,
};
use arm_sysregs::el1::registers::{MdscrEl1, SctlrEl1};
use arm_sysregs::el2::accessors::{read_mdcr_el2, write_mdcr_el2};
use arm_sysregs::el2::registers::MdcrEl2;
use mtex_abi::report::{TcoSite, TcoWatch};
use mtex_arch::el2_bits::spsr;
use mtex_arch::stage1::WalkError;
use mtex_platform::guest_vm::GuestRam;
use mtex_trace::decode::{self, Insn};
use mtex_vm::tco_scan::Scan;

/// Integers any bit pattern is valid for: what guest memory is read as.
trait Word: Copy {}
impl Word for u32 {}
impl Word for u64 {}

/// The word at guest address `ipa`, if it is guest RAM.
fn read_guest<T: Word>(ram: GuestRam, ipa: u64) -> Option<T> {
    let pa = ram.pa_of(ipa, core::mem::size_of::<T>() as u64)?;
    if pa % core::mem::align_of::<T>() as u64 != 0 {
        return None;
    }
    // SAFETY: `pa_of` checked the bytes are in the host memory behind guest RAM, which EL2
    // identity-maps as Normal memory, and `pa` is aligned; every bit pattern is a valid `T`
    // (a `Word`); reading has no side effects.
    Some(unsafe { core::ptr::read_volatile(pa as *const T) })
}

/// Scans the image (`(IPA, bytes)` in `ram`) through the address spaces live now: the walk
/// and the reads are here, what they find is `mtex_vm::tco_scan`'s.
fn scan_image(ram: GuestRam, image: (u64, u64)) -> Scan {
    let mut scan = Scan::EMPTY;
    let word = |ipa: u64| read_guest::<u32>(ram, ipa);
    if !read_sctlr_el1().contains(SctlrEl1::M) {
        // MMU off: the image runs at its guest addresses.
        scan.mapping((image.0, image.0, image.1), image, word);
        return scan;
    }
    let read = |ipa: u64| read_guest::<u64>(ram, ipa);
    let tcr = read_tcr_el1().bits();
    let mut unreadable = 0;
    for (upper, ttbr) in [
        (true, read_ttbr1_el1().bits()),
        (false, read_ttbr0_el1().bits()),
    ] {
        let mut found = |leaf: mtex_arch::stage1::Leaf| {
            scan.mapping((leaf.va, leaf.ipa, leaf.size), image, word)
        };
        match mtex_arch::stage1::executable_leaves(tcr, ttbr, upper, read, &mut found) {
            Ok(_) | Err(WalkError::Disabled) => {}
            // A half this walk cannot read may hold sites: the count says so.
            Err(_) => unreadable += 1,
        }
    }
    scan.unwatched += unreadable;
    scan
}

/// A watched site: its address, and how often each value was written there.
#[derive(Clone, Copy, Default)]
struct Site {
    va: u64,
    writes: [u64; 2],
}

pub struct Watcher {
    /// `mtex.tco_watch`.
    enabled: bool,
    ram: GuestRam,
    /// The guest image (IPA, bytes): the code that is scanned.
    image: (u64, u64),
    /// What the run's first pass found.
    scan: Scan,
    /// The open pass's watch.
    armed: bool,
    record: TcoWatch,
    watched: [Site; BREAKPOINTS_USED],
    saved_mdscr: MdscrEl1,
}

impl Watcher {
    pub fn new(enabled: bool, ram: GuestRam, image: (u64, u64)) -> Self {
        Self {
            enabled,
            ram,
            image,
            scan: Scan::EMPTY,
            armed: false,
            record: TcoWatch::default(),
            watched: [Site::default(); BREAKPOINTS_USED],
            saved_mdscr: MdscrEl1::empty(),
        }
    }

    /// Breakpoints a pass uses.
    fn per_pass() -> usize {
        crate::trace::breakpoints().min(BREAKPOINTS_USED)
    }

    /// Scans the guest for MSR TCO sites (the run's first pass, from the address spaces
    /// live now) and returns how many passes watching them takes (0 when off).
    pub fn scan(&mut self) -> u8 {
        self.scan = if self.enabled {
            scan_image(self.ram, self.image)
        } else {
            Scan::EMPTY
        };
        log::info!(
            "TCO watch: {} sites ({} more not kept) in {} executable image pages",
            self.scan.sites().len(),
            self.scan.unwatched,
            self.scan.pages
        );
        self.scan.passes(Self::per_pass())
    }

    /// Watches the `k`-th group of sites (0-based) in phase `id`. The guest is scanned
    /// again first: sites that moved since the run's first pass (code rewritten or mapped
    /// elsewhere between passes) would be watched where they no longer are.
    pub fn arm(&mut self, id: u32, k: usize) {
        let per = Self::per_pass();
        let scan = &self.scan;
        let group = scan.group(k, per);
        let n = group.len();
        self.record = TcoWatch {
            id,
            sites: scan.sites().len() as u32,
            unwatched: scan.unwatched,
            first: k.saturating_mul(per).min(scan.sites().len()) as u32,
            watched: n as u32,
            pages: scan.pages,
            moved: scan_image(self.ram, self.image) != *scan,
            ..TcoWatch::default()
        };
        self.watched = [Site::default(); BREAKPOINTS_USED];
        for i in 0..per {
            let va = self.scan.group(k, per).get(i).copied().unwrap_or(0);
            self.watched[i] = Site { va, writes: [0; 2] };
            set_breakpoint(i, va, if i < n { BCR_ENABLED } else { 0 });
        }
        self.saved_mdscr = read_mdscr_el1();
        write_mdscr_el1(self.saved_mdscr | MdscrEl1::MDE);
        write_mdcr_el2(read_mdcr_el2() | MdcrEl2::TDE);
        aarch64_cpu::asm::barrier::isb(aarch64_cpu::asm::barrier::SY);
        self.armed = true;
    }

    #[inline(always)]
    pub fn armed(&self) -> bool {
        self.armed
    }

    /// A breakpoint exception while armed: emulates and counts the MSR TCO at the guest's
    /// pc. Code that is no longer an MSR TCO is not emulated: the watch ends (`lost`) and the
    /// instruction runs when the guest resumes.
    pub fn hit(&mut self, ctx: &mut GuestContext) {
        let at = ctx.state();
        let word = crate::trace::translate(at.pc, at.el == 0)
            .and_then(|(ipa, _)| read_guest::<u32>(self.ram, ipa));
        let slot = self.watched.iter().position(|s| s.va == at.pc && s.va != 0);
        let value = match (word.map(decode::decode), slot) {
            (Some(Insn::MsrTcoImm(v)), Some(_)) => v,
            (Some(Insn::MsrTcoReg(rt)), Some(_)) => {
                let x = if rt == 31 { 0 } else { ctx.x[rt as usize] };
                x & spsr::TCO != 0
            }
            _ => {
                self.record.lost = true;
                self.disarm();
                return;
            }
        };
        let Some(slot) = slot else { return };
        self.watched[slot].writes[value as usize] += 1;
        if at.el == 0 {
            self.record.writes_el0 += 1;
        } else {
            self.record.writes_el1 += 1;
        }
        if value {
            ctx.spsr |= spsr::TCO;
        } else {
            ctx.spsr &= !spsr::TCO;
        }
        ctx.skip_instruction();
    }

    /// Breakpoints off and debug exceptions back where they were.
    fn disarm(&mut self) {
        for i in 0..Self::per_pass() {
            set_breakpoint(i, 0, 0);
        }
        write_mdcr_el2(read_mdcr_el2() - MdcrEl2::TDE);
        write_mdscr_el1(self.saved_mdscr);
        aarch64_cpu::asm::barrier::isb(aarch64_cpu::asm::barrier::SY);
        self.armed = false;
    }

    /// Ends the pass's watch: its record, and its sites with their counts (phase `id`).
    pub fn finish(&mut self) -> (TcoWatch, [Option<TcoSite>; 2 * BREAKPOINTS_USED]) {
        if self.armed {
            self.disarm();
        }
        let mut sites = [None; 2 * BREAKPOINTS_USED];
        let mut n = 0;
        for s in self.watched.iter().filter(|s| s.va != 0) {
            for (value, &count) in s.writes.iter().enumerate() {
                if count > 0 {
                    sites[n] = Some(TcoSite {
                        phase: self.record.id,
                        pc: s.va,
                        value: value == 1,
                        count,
                    });
                    n += 1;
                }
            }
        }
        self.watched = [Site::default(); BREAKPOINTS_USED];
        (self.record, sites)
    }
}
