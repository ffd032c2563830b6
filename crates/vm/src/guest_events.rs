//! The MTE events of the guest's own PMU: MEM_ACCESS_CHECKED, _RD and _WR (0x4024–0x4026),
//! counted by the hypervisor from the trace, so that `perf stat -e mem_access_checked_rd:k`
//! inside the guest works on any CPU mtex runs on and prints the trace's exact counts.
//!
//! Every guest PMU access traps (MDCR_EL2.TPM/TPMCR) and goes through [`GuestEvents::access`].
//! A guest counter whose type selects one of the three events is *kept* here: its type, count,
//! enable, interrupt-enable and overflow bits live in this state, and the hardware counter
//! behind it (if any) is given a type that counts nothing. The guest also sees the counters
//! the hypervisor keeps for itself (at and above MDCR_EL2.HPMN) as its own, kept here and
//! never reaching the hardware (`PMCR_EL0.N` says the hardware's N), so that the three events
//! at both ELs fit without perf multiplexing them (on QEMU, one counter is the guest's and
//! five the hypervisor's). Not more: a PMEVTYPER<n>_EL0 past the hardware's N is UNDEFINED
//! before any trap reaches the hypervisor.
//!
//! A kept counter's count moves only by what the trace counted while the counter counted:
//! PMCR_EL0.E, its PMCNTENSET bit and its type's EL filters (P, U, NSK, NSU as
//! `CountPMUEvents` defines them for Non-secure EL0 and EL1) are constant between two trapped
//! accesses, so each access first adds what the trace counted since the last one, by EL and
//! direction ([`GuestEvents::access`]; the caller passes the trace's counts so far). Time that
//! is not traced whole (outside a traced phase or window, or in a sampled one) has no count:
//! a kept counter that counted then is told (`News::untraced`), never given a made-up
//! figure. Overflow follows `AArch64.IncrementEventCounter` (PMCR_EL0.LP with FEAT_PMUv3p5);
//! the PMU interrupt of a kept counter that has hardware behind it is raised through that
//! counter's PMOVSSET bit, and one that has none is told (`News::irq_lost`).

use mtex_abi::report::pmu_event::{
    INST_RETIRED, MEM_ACCESS_CHECKED, MEM_ACCESS_CHECKED_RD, MEM_ACCESS_CHECKED_WR,
};
use mtex_arch::pmu_regs::{PmuReg, pmcr};
use mtex_trace::counts::ByEl;

/// PMCEID1_EL0 bits 36–38: the guest's PMU implements the three events.
pub const PMCEID1_MTE_EVENTS: u64 = 0b111 << 36;

/// PMEVTYPER<n>_EL0 fields: the project's one definition (`mtex_arch::el2_bits`), and what
/// a kept type keeps of them.
pub mod evtyper {
    pub use mtex_arch::el2_bits::pmevtyper::{EVT_MASK as EVENT, NSK, NSU, P, U};
    /// The fields a kept type reads back: the filter bits 31:26 and evtCount.
    pub const KEPT: u64 = 0xfc00_0000 | EVENT;
}

/// PMCR_EL0.LP: event counters overflow at 64 bits (FEAT_PMUv3p5).
pub const PMCR_LP: u64 = 1 << 7;

/// The type a hardware counter gets while the guest's type is kept here: instructions,
/// filtered out at EL1 and EL0 (and never EL2: MDCR_EL2.HPMD), so it counts nothing.
pub const HW_IDLE_TYPE: u64 = evtyper::P | evtyper::U | INST_RETIRED as u64;

/// The guest's PMU registers as the hardware emulation answers them (`hyp/src/pmu.rs`): the
/// counters below HPMN, the cycle counter, and the controls' bits for them.
pub trait HwPmu {
    /// The access the guest made (a write of `write`), as the hardware emulation does it;
    /// what a read gives.
    fn access(&mut self, reg: PmuReg, write: Option<u64>) -> u64;
}

/// Which of the three events, and which views of the trace they count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MteEvent {
    Checked,
    CheckedRd,
    CheckedWr,
}

impl MteEvent {
    pub const ALL: [MteEvent; 3] = [Self::Checked, Self::CheckedRd, Self::CheckedWr];

    pub const fn of(event: u16) -> Option<Self> {
        Some(match event {
            MEM_ACCESS_CHECKED => Self::Checked,
            MEM_ACCESS_CHECKED_RD => Self::CheckedRd,
            MEM_ACCESS_CHECKED_WR => Self::CheckedWr,
            _ => return None,
        })
    }

    pub const fn number(self) -> u16 {
        match self {
            Self::Checked => MEM_ACCESS_CHECKED,
            Self::CheckedRd => MEM_ACCESS_CHECKED_RD,
            Self::CheckedWr => MEM_ACCESS_CHECKED_WR,
        }
    }

    /// (reads, writes): which directions it counts.
    const fn directions(self) -> (bool, bool) {
        match self {
            Self::Checked => (true, true),
            Self::CheckedRd => (true, false),
            Self::CheckedWr => (false, true),
        }
    }
}

// The order `GuestPmuCounted` and the counters' names use.
const _: () = {
    use mtex_abi::counters::GUEST_PMU_EVENTS as E;
    assert!(E[MteEvent::Checked as usize] == MEM_ACCESS_CHECKED);
    assert!(E[MteEvent::CheckedRd as usize] == MEM_ACCESS_CHECKED_RD);
    assert!(E[MteEvent::CheckedWr as usize] == MEM_ACCESS_CHECKED_WR);
};

/// Which ELs a type counts at: (EL0, EL1).
pub const fn counts_at(evtyper: u64, el3: bool) -> (bool, bool) {
    use evtyper::{NSK, NSU, P, U};
    // CountPMUEvents, Non-secure: EL0 is filtered when U != NSU, EL1 when P != NSK; NSU and
    // NSK read as 0 without EL3.
    let (nsu, nsk) = if el3 {
        (evtyper & NSU != 0, evtyper & NSK != 0)
    } else {
        (false, false)
    };
    ((evtyper & U != 0) == nsu, (evtyper & P != 0) == nsk)
}

/// What the guest's kept counters counted, by event ([`MteEvent`] order) and by the ELs
/// their types count at: `[event][0]` EL0 only (perf's `:u`), `[1]` EL1 only (`:k`), `[2]`
/// both. Two counters of the same event and ELs add up, as perf's lines for them would.
pub type Counted = [[u64; 3]; 3];

/// Counters newly found not to count exactly, one bit each: each is told once per run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct News {
    /// A kept counter of an MTE event counted while nothing was traced whole.
    pub untraced: u32,
    /// A counter of the hypervisor's counted an event other than the three.
    pub no_hardware: u32,
    /// A kept counter with no hardware behind it overflowed with its interrupt enabled.
    pub irq_lost: u32,
}

impl News {
    pub fn any(&self) -> bool {
        self.untraced | self.no_hardware | self.irq_lost != 0
    }
}

/// One CPU's kept counters.
#[derive(Clone, Copy, Debug)]
pub struct GuestEvents {
    /// Counters `0..hpmn` have hardware behind them; `hpmn..counters` are the hypervisor's,
    /// and only this state's for the guest.
    hpmn: u8,
    counters: u8,
    /// EL3 is implemented: NSK and NSU take part in the filters.
    el3: bool,
    /// FEAT_PMUv3p5: 64-bit counters, PMCR_EL0.LP.
    long: bool,
    /// The guest's types (`evtyper::KEPT` fields) and counts of kept counters.
    types: [u64; 31],
    values: [u64; 31],
    /// Counters whose type selects an MTE event.
    mte: u32,
    /// The guest's PMCNTENSET, PMINTENSET, PMOVSSET bits (all counters; the hardware's are
    /// also in the hardware, which answers for the counters it has that are not kept).
    cnten: u32,
    inten: u32,
    ovs: u32,
    /// PMCR_EL0.E and .LP as the guest last wrote them.
    enabled: bool,
    lp: bool,
    /// The trace runs whole on this CPU ([`GuestEvents::start_traced`]), and its counts at
    /// the last access.
    traced: bool,
    seen: ByEl,
    /// What kept counters counted since the trace last started.
    counted: Counted,
    /// A kept MTE event was programmed since the trace last started.
    used: bool,
    told: News,
    news: News,
}

impl GuestEvents {
    /// `hpmn` counters the guest's in the hardware, of the hardware's `counters`.
    pub const fn new(hpmn: u8, counters: u8, el3: bool, long: bool) -> Self {
        Self {
            hpmn,
            counters: if counters < hpmn { hpmn } else { counters },
            el3,
            long,
            types: [0; 31],
            values: [0; 31],
            mte: 0,
            cnten: 0,
            inten: 0,
            ovs: 0,
            enabled: false,
            lp: false,
            traced: false,
            seen: ByEl {
                rd_u: 0,
                rd_k: 0,
                wr_u: 0,
                wr_k: 0,
            },
            counted: [[0; 3]; 3],
            used: false,
            told: News {
                untraced: 0,
                no_hardware: 0,
                irq_lost: 0,
            },
            news: News {
                untraced: 0,
                no_hardware: 0,
                irq_lost: 0,
            },
        }
    }

    /// The event counters the guest sees (its PMCR_EL0.N).
    pub const fn counters(&self) -> u8 {
        self.counters
    }

    fn all(&self) -> u32 {
        ((1u64 << self.counters()) - 1) as u32
    }

    /// Counters with no hardware behind them.
    fn virtual_only(&self) -> u32 {
        self.all() & !(((1u64 << self.hpmn) - 1) as u32)
    }

    /// Counters whose state lives here.
    fn kept(&self) -> u32 {
        self.mte | self.virtual_only()
    }

    /// Counters that count now.
    fn counting(&self) -> u32 {
        if self.enabled {
            self.cnten & self.all()
        } else {
            0
        }
    }

    /// The guest's type of kept counter `n`.
    pub fn evtyper(&self, n: u8) -> u64 {
        self.types[n as usize]
    }

    /// Adds what the trace counted since the last call to the counters that counted, or
    /// tells those that counted untraced. `now`: the trace's counts so far on this CPU, when
    /// it is active.
    fn advance(&mut self, hw: &mut impl HwPmu, now: Option<ByEl>) {
        let counting = self.counting();
        let no_hardware = counting & self.virtual_only() & !self.mte;
        tell(
            &mut self.told.no_hardware,
            &mut self.news.no_hardware,
            no_hardware,
        );
        let counting = counting & self.mte;
        let (true, Some(now)) = (self.traced, now) else {
            let filtered_out = (0..31)
                .filter(|&n| counting >> n & 1 != 0)
                .filter(|&n| counts_at(self.types[n], self.el3) == (false, false))
                .fold(0, |m, n| m | 1 << n);
            let untraced = counting & !filtered_out;
            tell(&mut self.told.untraced, &mut self.news.untraced, untraced);
            return;
        };
        let d = ByEl {
            rd_u: now.rd_u.wrapping_sub(self.seen.rd_u),
            rd_k: now.rd_k.wrapping_sub(self.seen.rd_k),
            wr_u: now.wr_u.wrapping_sub(self.seen.wr_u),
            wr_k: now.wr_k.wrapping_sub(self.seen.wr_k),
        };
        self.seen = now;
        if d == ByEl::default() {
            return;
        }
        let mut raise = 0;
        for n in (0..31).filter(|&n| counting >> n & 1 != 0) {
            raise |= self.increment(n, &d);
        }
        if raise != 0 {
            // The hardware counter's own overflow bit: its interrupt, as the guest enabled it.
            hw.access(PmuReg::Pmovsset, Some(raise as u64));
        }
    }

    /// Adds kept counter `n`'s share of `d`; the counters whose interrupt the hardware
    /// should raise.
    fn increment(&mut self, n: usize, d: &ByEl) -> u32 {
        let t = self.types[n];
        let Some(event) = MteEvent::of((t & evtyper::EVENT) as u16) else {
            return 0;
        };
        let (el0, el1) = counts_at(t, self.el3);
        let (rd, wr) = event.directions();
        let inc = [
            (el0 && rd, d.rd_u),
            (el0 && wr, d.wr_u),
            (el1 && rd, d.rd_k),
            (el1 && wr, d.wr_k),
        ]
        .iter()
        .filter(|(on, _)| *on)
        .fold(0u64, |s, (_, v)| s.wrapping_add(*v));
        if inc == 0 {
            return 0;
        }
        let els = match (el0, el1) {
            (true, false) => 0,
            (false, true) => 1,
            _ => 2,
        };
        let e = &mut self.counted[event as usize][els];
        *e = e.wrapping_add(inc);
        // AArch64.IncrementEventCounter: 64 bits with FEAT_PMUv3p5 (overflow at bit 64 with
        // LP, else at bit 32), else 32 bits.
        let old = self.values[n] as u128;
        let new = old + inc as u128;
        let width = if self.long && self.lp { 64 } else { 32 };
        self.values[n] = if self.long {
            new as u64
        } else {
            new as u64 & 0xffff_ffff
        };
        if old >> width == new >> width {
            return 0;
        }
        let bit = 1u32 << n;
        self.ovs |= bit;
        if self.inten & bit == 0 {
            0
        } else if n < self.hpmn as usize {
            bit
        } else {
            tell(&mut self.told.irq_lost, &mut self.news.irq_lost, bit);
            0
        }
    }

    /// The counters newly told since the last call, and the kept counters' types then.
    pub fn take_news(&mut self) -> Option<News> {
        let n = core::mem::take(&mut self.news);
        n.any().then_some(n)
    }

    /// The trace starts on this CPU, whole, from zero counts. What kept counters counted
    /// before (untraced) is told.
    pub fn start_traced(&mut self, hw: &mut impl HwPmu) {
        self.advance(hw, None);
        self.traced = true;
        self.seen = ByEl::default();
        self.counted = [[0; 3]; 3];
        self.used = self.mte != 0;
    }

    /// The trace stops with `total` counts: kept counters take what they counted up to here;
    /// what they counted, if the guest used the events in the trace. A counter that goes on
    /// counting is told (nothing counts for it until the trace starts again).
    pub fn stop_traced(&mut self, hw: &mut impl HwPmu, total: ByEl) -> Option<Counted> {
        if !self.traced {
            return None;
        }
        self.advance(hw, Some(total));
        self.traced = false;
        self.advance(hw, None);
        self.used.then_some(self.counted)
    }

    /// A guest access to PMU register `reg` (a write of `write`), with its PMSELR_EL0
    /// `pmselr`; `now`: the trace's counts so far on this CPU when it traces. What a read
    /// gives.
    pub fn access(
        &mut self,
        hw: &mut impl HwPmu,
        reg: PmuReg,
        pmselr: u64,
        write: Option<u64>,
        now: Option<ByEl>,
    ) -> u64 {
        let selected = (pmselr & 0x1f) as u8;
        let reg = match reg {
            PmuReg::Pmxevtyper if selected != 31 => PmuReg::Pmevtyper(selected),
            PmuReg::Pmxevcntr if selected != 31 => PmuReg::Pmevcntr(selected),
            r => r,
        };
        // Every access first brings the counts (and overflow bits) up to this instruction:
        // the controls it may change held since the last one.
        self.advance(hw, now);
        match (reg, write) {
            (PmuReg::Pmevtyper(n), w) if n < self.counters() => self.evtyper_access(hw, n, w),
            (PmuReg::Pmevcntr(n), w) if n < self.counters() && self.kept() >> n & 1 != 0 => match w
            {
                Some(v) => {
                    self.values[n as usize] = if self.long { v } else { v & 0xffff_ffff };
                    0
                }
                None => self.values[n as usize],
            },
            (reg, Some(v)) => {
                let all = self.all();
                match reg {
                    PmuReg::Pmcr => {
                        self.enabled = v & pmcr::E != 0;
                        self.lp = v & PMCR_LP != 0;
                        if v & pmcr::P != 0 {
                            let kept = self.kept();
                            for n in (0..31).filter(|n| kept >> n & 1 != 0) {
                                self.values[n] = 0;
                            }
                        }
                    }
                    PmuReg::Pmcntenset => self.cnten |= v as u32 & all,
                    PmuReg::Pmcntenclr => self.cnten &= !(v as u32 & all),
                    PmuReg::Pmintenset => self.inten |= v as u32 & all,
                    PmuReg::Pmintenclr => self.inten &= !(v as u32 & all),
                    PmuReg::Pmovsset => self.ovs |= v as u32 & self.kept(),
                    PmuReg::Pmovsclr => self.ovs &= !(v as u32 & all),
                    _ => {}
                }
                hw.access(reg, Some(v))
            }
            (reg, None) => {
                let hw_value = hw.access(reg, None);
                let vo = self.virtual_only() as u64;
                let kept = self.kept() as u64;
                match reg {
                    PmuReg::Pmcr => {
                        (hw_value & !pmcr::N_MASK) | (self.counters() as u64) << pmcr::N_SHIFT
                    }
                    PmuReg::Pmceid1 => hw_value | PMCEID1_MTE_EVENTS,
                    PmuReg::Pmcntenset | PmuReg::Pmcntenclr => {
                        hw_value & !vo | self.cnten as u64 & vo
                    }
                    PmuReg::Pmintenset | PmuReg::Pmintenclr => {
                        hw_value & !vo | self.inten as u64 & vo
                    }
                    PmuReg::Pmovsset | PmuReg::Pmovsclr => {
                        hw_value & !kept | self.ovs as u64 & kept
                    }
                    _ => hw_value,
                }
            }
        }
    }

    /// PMEVTYPER<n>_EL0 (n below the guest's counters).
    fn evtyper_access(&mut self, hw: &mut impl HwPmu, n: u8, write: Option<u64>) -> u64 {
        let bit = 1u32 << n;
        let has_hw = n < self.hpmn;
        let Some(v) = write else {
            return if self.kept() & bit != 0 {
                self.types[n as usize]
            } else {
                hw.access(PmuReg::Pmevtyper(n), None)
            };
        };
        let mte = MteEvent::of((v & evtyper::EVENT) as u16).is_some();
        if has_hw && mte && self.mte & bit == 0 {
            // The count goes on from where the hardware counter had it.
            self.values[n as usize] = hw.access(PmuReg::Pmevcntr(n), None);
            hw.access(PmuReg::Pmevtyper(n), Some(HW_IDLE_TYPE));
        } else if has_hw && !mte && self.mte & bit != 0 {
            hw.access(PmuReg::Pmevcntr(n), Some(self.values[n as usize]));
        }
        if mte {
            self.mte |= bit;
            self.used = true;
        } else {
            self.mte &= !bit;
        }
        if has_hw && !mte {
            hw.access(PmuReg::Pmevtyper(n), Some(v))
        } else {
            self.types[n as usize] = v & evtyper::KEPT;
            0
        }
    }
}

/// Adds to `news` the counters of `bits` not yet in `told`, and to `told`.
fn tell(told: &mut u32, news: &mut u32, bits: u32) {
    let new = bits & !*told;
    *told |= new;
    *news |= new;
}

#[cfg(test)]
mod tests;
