//! A guarded phase (`PHASE_GUARDED`): which calls the hypervisor takes while it is open, from
//! where, and how many iterations its harness made.
//!
//! The phase runs code its harness does not trust (`mtex snippet`), at the harness's own
//! privilege: that code can make any call the harness makes, branch into the harness, write
//! any memory the guest may write and remap any page of its own stage 1. What it cannot
//! choose is what the harness said before it ran — where the harness's calls are, how many
//! iterations it makes, which memory holds its code — nor the address the CPU reports for a
//! call (ELR_EL2), nor stage 2, which keeps that memory read-only while the phase is open.
//! So a call is taken only when it is the one its site makes (PHASE_END from the harness's
//! phase end or its exception vectors, PHASE_ITERATION from its one iteration call) and its
//! instruction is, by stage 1 as the CPU translates it at the call, in the guest page it was
//! in at PHASE_BEGIN: the harness's own instruction, in memory nothing could rewrite. The
//! iterations are those calls, counted here: a harness whose loop was cut short or run
//! longer (its counter changed, its phase end reached early) shows as a count that is not
//! the one it said.

use mtex_abi::hypercall as hc;

const PAGE: u64 = 4096;

/// Pages whose mapping a guard keeps: the first and last page of each phase-end range and
/// the iteration call's.
const SITES: usize = 5;

/// An open guarded phase's rules and its count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Guard {
    pub phase: u32,
    /// PHASE_END may come from here (guest VAs, end exclusive).
    ends: [(u64, u64); 2],
    /// The HVC that makes PHASE_ITERATION (a guest VA).
    iteration: u64,
    /// (VA page, IPA page) of each call site's page, as stage 1 mapped it at PHASE_BEGIN.
    pages: [(u64, u64); SITES],
    /// Guest physical memory (end exclusive) read-only at stage 2 while the phase is open.
    pub read_only: (u64, u64),
    /// Iterations the harness said it makes, and the PHASE_ITERATION calls taken.
    pub wanted: u64,
    pub counted: u64,
}

/// Why a PHASE_BEGIN's guard was refused (the guest gets INVALID_PARAMETERS).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// A range is empty or backwards, the read-only one is not page-aligned, a phase-end
    /// range spans more than two pages, or there is no iteration call or no iteration.
    BadRange,
    /// A call site that stage 1 does not map, or maps outside the read-only memory (where
    /// the guest could rewrite it).
    SiteNotReadOnly,
}

impl Guard {
    /// The guard PHASE_BEGIN asks for with `x7..=x14` in `regs`; `translate` is stage 1 as
    /// the CPU translates an EL1 instruction address now (None: not mapped).
    pub fn new(
        phase: u32,
        regs: [u64; 8],
        translate: impl Fn(u64) -> Option<u64>,
    ) -> Result<Self, Refusal> {
        let [a0, a1, b0, b1, iteration, wanted, ro0, ro1] = regs;
        let ends = [(a0, a1), (b0, b1)];
        let aligned = |a: u64| a.is_multiple_of(PAGE);
        if ends
            .iter()
            .any(|&(s, e)| s >= e || (e - 1) / PAGE - s / PAGE > 1)
            || iteration == 0
            || wanted == 0
            || ro0 >= ro1
            || !aligned(ro0)
            || !aligned(ro1)
        {
            return Err(Refusal::BadRange);
        }
        let mut pages = [(0, 0); SITES];
        for (slot, va) in pages.iter_mut().zip([a0, a1 - 1, b0, b1 - 1, iteration]) {
            let ipa = translate(va).ok_or(Refusal::SiteNotReadOnly)?;
            if !(ro0..ro1).contains(&ipa) {
                return Err(Refusal::SiteNotReadOnly);
            }
            *slot = (va & !(PAGE - 1), ipa & !(PAGE - 1));
        }
        Ok(Guard {
            phase,
            ends,
            iteration,
            pages,
            read_only: (ro0, ro1),
            wanted,
            counted: 0,
        })
    }

    /// Whether the call `function` (x0) made by the instruction at `pc` is taken.
    pub fn allows(&self, function: u64, pc: u64, translate: impl Fn(u64) -> Option<u64>) -> bool {
        let its_site = if function == u64::from(hc::PHASE_END) {
            self.ends.iter().any(|&(s, e)| (s..e).contains(&pc))
        } else if function == u64::from(hc::PHASE_ITERATION) {
            pc == self.iteration
        } else {
            false
        };
        its_site && self.unmoved(pc, translate)
    }

    /// `pc` is in a page the guard kept, and stage 1 still maps it where it did.
    fn unmoved(&self, pc: u64, translate: impl Fn(u64) -> Option<u64>) -> bool {
        let page = pc & !(PAGE - 1);
        match self.pages.iter().find(|&&(va, _)| va == page) {
            Some(&(_, ipa)) => translate(pc) == Some(ipa | (pc & (PAGE - 1))),
            None => false,
        }
    }

    /// Counts one iteration (a PHASE_ITERATION taken).
    pub fn count(&mut self) {
        self.counted = self.counted.saturating_add(1);
    }

    /// `ipa` is in the memory the phase keeps read-only.
    pub fn protects(&self, ipa: u64) -> bool {
        (self.read_only.0..self.read_only.1).contains(&ipa)
    }

    /// The record of its iterations.
    pub fn iterations(&self) -> mtex_abi::report::PhaseIterations {
        mtex_abi::report::PhaseIterations {
            id: self.phase,
            wanted: self.wanted,
            counted: self.counted,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const END: u64 = 0x4100_0ff8;
    const VECTORS: u64 = 0x4100_2000;
    const ITERATION: u64 = 0x4100_0fe0;
    const RO: (u64, u64) = (0x4100_0000, 0x4101_0000);

    /// The harness's registers: its phase end (16 bytes, across a page boundary), its
    /// vectors (2 KiB), its iteration call, 10 iterations, its image read-only.
    fn regs() -> [u64; 8] {
        [
            END,
            END + 16,
            VECTORS,
            VECTORS + 0x800,
            ITERATION,
            10,
            RO.0,
            RO.1,
        ]
    }

    fn identity(va: u64) -> Option<u64> {
        Some(va)
    }

    fn guard() -> Guard {
        Guard::new(7, regs(), identity).unwrap()
    }

    const END_CALL: u64 = hc::PHASE_END as u64;
    const ITERATION_CALL: u64 = hc::PHASE_ITERATION as u64;

    #[test]
    fn each_site_makes_only_its_own_call() {
        let g = guard();
        assert!(g.allows(END_CALL, END + 12, identity));
        assert!(g.allows(END_CALL, VECTORS + 0x200 + 12, identity));
        assert!(g.allows(ITERATION_CALL, ITERATION, identity));
        // The run's end, the console, PSCI or a second PHASE_BEGIN: from nowhere.
        for f in [
            hc::EXIT,
            hc::CONSOLE_WRITE,
            hc::PHASE_BEGIN,
            hc::VERSION,
            0x8400_0008,
        ] {
            for pc in [END + 12, VECTORS + 0x200 + 12, ITERATION] {
                assert!(!g.allows(u64::from(f), pc, identity), "{f:#x} at {pc:#x}");
            }
        }
        // An iteration from the phase end or the vectors, a phase end from the iteration
        // call, either from the code around them.
        assert!(!g.allows(ITERATION_CALL, END + 12, identity));
        assert!(!g.allows(ITERATION_CALL, VECTORS + 0x400, identity));
        assert!(!g.allows(END_CALL, ITERATION, identity));
        assert!(!g.allows(ITERATION_CALL, ITERATION + 4, identity));
        assert!(!g.allows(END_CALL, END + 16, identity));
        assert!(!g.allows(END_CALL, 0x4200_0000, identity));
        // x0 is compared whole: an ID with upper bits set is not PHASE_END.
        assert!(!g.allows(END_CALL | 1 << 32, END + 12, identity));
    }

    /// A site's VA mapped elsewhere at the call (the code remapped to a copy the guest
    /// wrote), or not mapped: refused, though the address is the site's.
    #[test]
    fn a_site_remapped_after_the_begin_is_refused() {
        let g = guard();
        let moved = |va: u64| {
            Some(if va >> 12 == ITERATION >> 12 {
                va + 0x10_0000
            } else {
                va
            })
        };
        assert!(!g.allows(ITERATION_CALL, ITERATION, moved));
        assert!(g.allows(END_CALL, VECTORS + 12, moved));
        assert!(
            !g.allows(END_CALL, END + 4, moved),
            "the phase end's first page moved"
        );
        assert!(g.allows(END_CALL, END + 12, moved), "its second did not");
        assert!(!g.allows(END_CALL, VECTORS + 12, |_| None));
    }

    #[test]
    fn a_begin_whose_sites_are_not_read_only_or_mapped_is_refused() {
        let mut r = regs();
        r[6] = RO.0 + PAGE;
        assert_eq!(Guard::new(1, r, identity), Err(Refusal::SiteNotReadOnly));
        assert_eq!(
            Guard::new(1, regs(), |_| None),
            Err(Refusal::SiteNotReadOnly)
        );
        let elsewhere = |va: u64| Some(va + 0x10_0000);
        assert_eq!(
            Guard::new(1, regs(), elsewhere),
            Err(Refusal::SiteNotReadOnly)
        );
        for (i, v) in [(1, END), (4, 0), (5, 0), (6, RO.0 + 8), (7, RO.0)] {
            let mut r = regs();
            r[i] = v;
            assert_eq!(
                Guard::new(1, r, identity),
                Err(Refusal::BadRange),
                "x{}",
                7 + i
            );
        }
        // Vectors over three pages: the middle one would not be kept.
        let mut r = regs();
        r[3] = VECTORS + 2 * PAGE + 8;
        assert_eq!(Guard::new(1, r, identity), Err(Refusal::BadRange));
    }

    #[test]
    fn the_count_and_the_read_only_memory() {
        let mut g = guard();
        for _ in 0..3 {
            g.count();
        }
        let it = g.iterations();
        assert_eq!((it.id, it.wanted, it.counted), (7, 10, 3));
        assert!(g.protects(RO.0) && g.protects(RO.1 - 1));
        assert!(!g.protects(RO.1) && !g.protects(RO.0 - 1));
    }
}
