//! The hypervisor's slice of the PMU: all event counters but one (left to the guest, with
//! the cycle counter), reserved for EL2 through MDCR_EL2.HPMN.
//!
//! - Three fixed counters count instructions (event 0x08) at EL2, EL1 and EL0 over the whole
//!   run; a phase's figures are differences.
//! - The rest are per-phase *slots*: at each untraced phase's begin they are programmed, from
//!   zero, with the events of that pass (`mtex_abi::pmu_plan`: cycles, the MTE events, the
//!   run's raw events, at EL1 and EL0 through the PMEVTYPER filters), and read at its end.
//!
//! The guest may use the PMU too (Linux's perf resets it at boot), but never the hypervisor's
//! counters: MDCR_EL2.TPM/TPMCR trap every guest PMU access and `guest_access` emulates the
//! PMU the architecture gives an EL1 under HPMN (`mtex_arch::pmu_regs`). QEMU does not keep
//! the counters at or above HPMN from EL1 on its own. Each phase also checks that its
//! counters ran undisturbed (enabled, programmed as set, not overflowed) and withholds its
//! figures otherwise. Counters are 64-bit with FEAT_PMUv3p5 (MDCR_EL2.HLP); without it a
//! 32-bit counter that overflowed in a phase withholds the figure rather than wrap.
//!
//! arm-sysregs has no accessors for the PMU's registers but PMCR_EL0, hence the few
//! `mrs`/`msr` here.

use arm_sysregs::el0::accessors::{read_pmcr_el0, write_pmcr_el0};
use arm_sysregs::el0::registers::PmcrEl0;
use arm_sysregs::el1::accessors::read_id_aa64dfr0_el1;
use arm_sysregs::el2::accessors::{read_mdcr_el2, write_mdcr_el2};
use arm_sysregs::el2::registers::MdcrEl2;
use mtex_abi::options::GuestEventsView;
use mtex_abi::pmu_plan::{Counted, PmuPlan};
use mtex_abi::report::{PMU_COUNTS, PmuCount, PmuValue, pmu_event};
use mtex_arch::el2_bits::pmevtyper::{EVT_MASK, NSH, P, U};
use mtex_arch::pmu_regs::{GuestPmu, PmuReg, pmcr};
use mtex_trace::counts::{ByEl, TraceCounts};
use mtex_vm::guest_events::{Counted as GuestCounted, GuestEvents, HwPmu, News};

// PMEVTYPER<n>_EL0 filter bits: P (don't count EL1), U (don't count EL0), NSH (count EL2).
// NSK/NSU stay 0: in Non-secure state with EL3 an EL is then filtered by P/U alone.
const INST_RETIRED: u64 = pmu_event::INST_RETIRED as u64;
/// The fixed counters' event types: EL2, EL1, EL0 instructions.
const FIXED: [u64; 3] = [
    P | U | NSH | INST_RETIRED,
    U | INST_RETIRED,
    P | INST_RETIRED,
];
/// The fields of PMEVTYPER a check compares (filters and event number; the rest may read
/// as zero).
const TYPE_FIELDS: u64 = P | U | NSH | EVT_MASK;
const _: () = assert!(TYPE_FIELDS == (1 << 31) | (1 << 30) | (1 << 27) | 0xffff);
/// Most slots used: a pass's counts share one record with the unsupported events.
const MAX_SLOTS: u64 = 8;
/// ID_AA64DFR0_EL1.PMUVer value of FEAT_PMUv3p5 (64-bit event counters through HLP).
const PMUV3P5: u8 = 6;

macro_rules! sysreg_read {
    ($name:literal) => {{
        let v: u64;
        // SAFETY: reading a PMU register has no side effects.
        unsafe { core::arch::asm!(concat!("mrs {}, ", $name), out(reg) v) };
        v
    }};
}

macro_rules! sysreg_write {
    ($name:literal, $v:expr) => {{
        let v: u64 = $v;
        // SAFETY: the PMU registers written here only configure counting of events.
        unsafe { core::arch::asm!(concat!("msr ", $name, ", {}"), in(reg) v) };
    }};
}

/// The event type that counts `c.event` at `c.el` only (never EL2).
fn slot_type(c: Counted) -> u64 {
    let filter = if c.el == 1 { U } else { P };
    filter | c.event as u64
}

/// Counters `first..first + 3` count EL2, EL1, EL0 instructions; the `slots` after them count
/// a pass's events.
#[derive(Clone, Copy)]
pub struct Pmu {
    first: u64,
    slots: u64,
    /// FEAT_PMUv3p5 with MDCR_EL2.HLP: the counters are 64-bit and never wrap in a run.
    long: bool,
    plan: PmuPlan,
    /// The slot types programmed for the open pass (0 = slot unused).
    programmed: [u64; MAX_SLOTS as usize],
    /// The guest's PMU has the MTE events, counted from the trace in this view
    /// (`mtex_vm::guest_events`).
    guest_events: Option<GuestEventsView>,
    /// EL3 is implemented: the guest's NSK/NSU filter bits count.
    el3: bool,
}

/// The guest's PMU state that is not in the hardware: its PMSELR_EL0 (the real one is the
/// hypervisor's, for reaching numbered counters).
#[derive(Clone, Copy, Default)]
pub struct GuestPmuState {
    pub pmselr: u64,
    /// The guest's counters already reported as programmed with an MTE event the CPU lacks
    /// (`Pmu::unimplemented_mte_type`), one bit each.
    pub mte_events_told: u32,
    /// The guest's counters of the MTE events, kept from the trace (made at its first PMU
    /// access, when the run gives the guest the events).
    pub events: Option<GuestEvents>,
}

/// The hardware side of the guest's PMU, for `mtex_vm::guest_events`.
struct Hw<'a> {
    pmu: &'a Pmu,
    pmselr: &'a mut u64,
}

impl HwPmu for Hw<'_> {
    fn access(&mut self, reg: PmuReg, write: Option<u64>) -> u64 {
        self.pmu.hw_access(self.pmselr, reg, write)
    }
}

/// Sends a record for each of this CPU's guest counters newly found not to count exactly
/// (`at`: where the guest was when it was found).
pub fn send_news(hyp: &mut crate::state::Hyp, at: mtex_abi::report::GuestState) {
    use mtex_abi::report::{GuestPmuInexact, GuestPmuInexactReason as Why};
    let cpu = hyp.this_cpu() as u32;
    let phase = hyp.phase_id();
    let (v, report) = hyp.vcpu_and_report();
    let Some((news, types)) = Pmu::take_news(&mut v.guest_pmu) else {
        return;
    };
    let reasons = [
        (news.untraced, Why::Untraced),
        (news.no_hardware, Why::NoHardware),
        (news.irq_lost, Why::InterruptLost),
    ];
    for (bits, reason) in reasons {
        for n in (0..31).filter(|n| bits >> n & 1 != 0) {
            report.send(&mtex_abi::Record::GuestPmuInexact(GuestPmuInexact {
                cpu,
                counter: n as u8,
                evtyper: types[n],
                reason,
                phase,
                at,
            }));
        }
    }
}

/// One view of the trace's checked accesses.
pub fn checked(counts: &TraceCounts, view: GuestEventsView) -> ByEl {
    match view {
        GuestEventsView::Architectural => counts.architectural,
        GuestEventsView::TcfElided => counts.tcf_elided,
    }
}

/// Why the PMU cannot give what the run requires (`mtex.pmu_require`).
pub fn missing_required(pmu: Option<&Pmu>, required: &[u16]) -> Option<u16> {
    required.iter().copied().find(|&e| match pmu {
        None => true,
        Some(p) => !mtex_abi::pmu_plan::implemented(p.pmceid(), e) || p.slots == 0,
    })
}

impl Pmu {
    /// Reserves and starts the counters; None (with the whole PMU left to the guest, and no
    /// traps) when the PMU has fewer than three counters or does not count instructions.
    pub fn init(raw_events: &[u16], guest_events: Option<GuestEventsView>) -> Option<Self> {
        let n = u64::from(read_pmcr_el0().n());
        let pmceid = [sysreg_read!("pmceid0_el0"), sysreg_read!("pmceid1_el0")];
        if n < 3 || !mtex_abi::pmu_plan::implemented(pmceid, pmu_event::INST_RETIRED) {
            write_mdcr_el2(read_mdcr_el2().with_hpmn(n as u8));
            return None;
        }
        // The guest keeps one event counter (and the cycle counter) when there are four or
        // more, so that its own perf still has something to count with.
        let reserved = if n >= 4 { n - 1 } else { n };
        let slots = (reserved - 3).min(MAX_SLOTS);
        let first = n - reserved;
        let long = read_id_aa64dfr0_el1().pmuver() >= PMUV3P5;
        // HPME: the reserved counters count whatever PMCR_EL0.E the guest sets. HPMD/HCCD:
        // the guest's counters never count EL2. TPM/TPMCR: every guest PMU access traps.
        let mut mdcr = read_mdcr_el2().with_hpmn(first as u8)
            | MdcrEl2::HPME
            | MdcrEl2::HPMD
            | MdcrEl2::HCCD
            | MdcrEl2::TPM
            | MdcrEl2::TPMCR;
        mdcr.set(MdcrEl2::HLP, long);
        write_mdcr_el2(mdcr);
        let pmu = Self {
            first,
            slots,
            long,
            plan: PmuPlan::new(pmceid, slots as usize, raw_events),
            programmed: [0; MAX_SLOTS as usize],
            guest_events,
            el3: arm_sysregs::el1::accessors::read_id_aa64pfr0_el1().el3() != 0,
        };
        pmu.program();
        Some(pmu)
    }

    fn pmceid(&self) -> [u64; 2] {
        [sysreg_read!("pmceid0_el0"), sysreg_read!("pmceid1_el0")]
    }

    /// The events of every phase and their passes.
    pub fn plan(&self) -> &PmuPlan {
        &self.plan
    }

    /// Programs and enables the three fixed counters from zero.
    fn program(&self) {
        for (i, t) in FIXED.into_iter().enumerate() {
            self.select(self.first + i as u64);
            sysreg_write!("pmxevtyper_el0", t);
            sysreg_write!("pmxevcntr_el0", 0);
        }
        sysreg_write!("pmovsclr_el0", self.fixed_mask());
        sysreg_write!("pmcntenset_el0", self.fixed_mask());
        aarch64_cpu::asm::barrier::isb(aarch64_cpu::asm::barrier::SY);
    }

    fn fixed_mask(&self) -> u64 {
        0b111 << self.first
    }

    /// Bits of the slots programmed for the open pass.
    fn slot_mask(&self) -> u64 {
        (0..self.slots)
            .filter(|&i| self.programmed[i as usize] != 0)
            .fold(0, |m, i| m | 1 << (self.first + 3 + i))
    }

    /// The events a phase counts on the slots, slot by slot: pass `pass` (1-based) of the
    /// plan, nothing past its last, and for a traced phase (0) the MTE events the CPU has.
    fn events(&self, pass: u8) -> [Option<Counted>; MAX_SLOTS as usize] {
        let mut out = [None; MAX_SLOTS as usize];
        let slots = out.iter_mut();
        if pass == 0 {
            slots
                .zip(self.plan.traced())
                .for_each(|(s, c)| *s = Some(c));
        } else {
            slots
                .zip(self.plan.pass(pass))
                .for_each(|(s, c)| *s = Some(c));
        }
        out
    }

    /// Starts the phase's events (`events`) on the slots, from zero.
    pub fn start_pass(&mut self, pass: u8) {
        sysreg_write!("pmcntenclr_el0", self.slot_mask());
        self.programmed = self.events(pass).map(|c| c.map_or(0, slot_type));
        for i in 0..self.slots {
            self.select(self.first + 3 + i);
            sysreg_write!("pmxevtyper_el0", self.programmed[i as usize]);
            sysreg_write!("pmxevcntr_el0", 0);
        }
        sysreg_write!("pmovsclr_el0", self.slot_mask());
        sysreg_write!("pmcntenset_el0", self.slot_mask());
        aarch64_cpu::asm::barrier::isb(aarch64_cpu::asm::barrier::SY);
    }

    /// Ends the open pass: its figures (withheld if its counters were disturbed), and on the
    /// first pass the events the CPU lacks and, for a guest that does not repeat its work
    /// (not `repeatable`), those of the passes that will never run.
    pub fn finish_pass(&mut self, pass: u8, repeatable: bool) -> [Option<PmuCount>; PMU_COUNTS] {
        let mask = self.slot_mask();
        let enabled = sysreg_read!("pmcntenset_el0") & mask == mask;
        let overflowed = sysreg_read!("pmovsset_el0") & mask != 0;
        let mut out = [None; PMU_COUNTS];
        let mut n = 0;
        for (i, c) in self.events(pass).into_iter().flatten().enumerate() {
            self.select(self.first + 3 + i as u64);
            let typed = sysreg_read!("pmxevtyper_el0") & TYPE_FIELDS == self.programmed[i];
            let value = sysreg_read!("pmxevcntr_el0");
            let intact = enabled && typed && (self.long || !overflowed);
            out[n] = Some(PmuCount {
                event: c.event,
                el: c.el,
                raw: c.raw,
                value: if intact {
                    PmuValue::Counted(value)
                } else {
                    PmuValue::Withheld
                },
            });
            n += 1;
        }
        if pass == 1 {
            let later = (2..=self.plan.passes())
                .filter(|_| !repeatable)
                .flat_map(|p| self.plan.pass(p))
                .map(|c| (c, PmuValue::NotCounted));
            let missing = self.plan.unsupported().map(|c| (c, PmuValue::NotSupported));
            for (c, value) in missing.chain(later) {
                out[n] = Some(PmuCount {
                    event: c.event,
                    el: c.el,
                    raw: c.raw,
                    value,
                });
                n += 1;
            }
        }
        sysreg_write!("pmcntenclr_el0", mask);
        self.programmed = [0; MAX_SLOTS as usize];
        out
    }

    /// What the guest may see.
    pub fn guest(&self) -> GuestPmu {
        GuestPmu {
            hpmn: self.first as u8,
        }
    }

    /// Selects counter `n` in the (hypervisor-owned) PMSELR_EL0.
    fn select(&self, n: u64) {
        sysreg_write!("pmselr_el0", n);
        aarch64_cpu::asm::barrier::isb(aarch64_cpu::asm::barrier::SY);
    }

    fn counter(&self, i: u64) -> u64 {
        self.select(self.first + i);
        sysreg_read!("pmxevcntr_el0")
    }

    /// Instructions so far at EL2.
    pub fn el2(&self) -> u64 {
        self.counter(0)
    }

    /// Instructions so far at EL2, EL1, EL0.
    pub fn read(&self) -> [u64; 3] {
        [self.counter(0), self.counter(1), self.counter(2)]
    }

    /// True when the three fixed counters ran undisturbed since `program` or the last call:
    /// enabled, with their event types, and (32-bit counters) not overflowed. When they did
    /// not, they are programmed again and the caller withholds the figures.
    pub fn check_and_repair(&self) -> bool {
        let mask = self.fixed_mask();
        let enabled = sysreg_read!("pmcntenset_el0") & mask == mask;
        let overflowed = sysreg_read!("pmovsset_el0") & mask != 0;
        let typed = FIXED.into_iter().enumerate().all(|(i, t)| {
            self.select(self.first + i as u64);
            sysreg_read!("pmxevtyper_el0") & TYPE_FIELDS == t
        });
        let intact = enabled && typed && (self.long || !overflowed);
        if !intact {
            // Counts restart from zero: a phase that was running cannot give a figure.
            self.program();
        }
        intact
    }

    /// A write of a guest counter's type that selects an MTE event this CPU does not
    /// implement, the first for that counter: (counter, event, type). Its counter will count
    /// nothing, and perf in the guest would print 0: the hypervisor reports it.
    pub fn unimplemented_mte_type(
        &self,
        st: &mut GuestPmuState,
        reg: PmuReg,
        write: Option<u64>,
    ) -> Option<(u8, u16, u64)> {
        let v = write?;
        if self.guest_events.is_some() {
            // The guest's PMU has them (`guest_events`).
            return None;
        }
        let n = match reg {
            PmuReg::Pmevtyper(n) => n as u64,
            PmuReg::Pmxevtyper if st.pmselr != 31 => st.pmselr,
            _ => return None,
        };
        if n >= self.guest().hpmn as u64 || st.mte_events_told >> n & 1 != 0 {
            return None;
        }
        let event = mtex_abi::pmu_plan::unimplemented_mte_event(self.pmceid(), v)?;
        st.mte_events_told |= 1 << n;
        Some((n as u8, event, v))
    }

    /// The view the guest's MTE events count, if it has them.
    pub fn guest_events(&self) -> Option<GuestEventsView> {
        self.guest_events
    }

    /// Emulates a guest access to PMU register `reg` (a write of `value` when `write`);
    /// returns what a read gives. `now`: this CPU's trace counts so far, when it traces. With
    /// the MTE events, `mtex_vm::guest_events` decides and this CPU's PMU does the rest.
    pub fn guest_access(
        &self,
        st: &mut GuestPmuState,
        reg: PmuReg,
        write: Option<u64>,
        now: Option<&TraceCounts>,
    ) -> u64 {
        let GuestPmuState { pmselr, events, .. } = st;
        let Some(view) = self.guest_events else {
            return self.hw_access(pmselr, reg, write);
        };
        let sel = *pmselr;
        let ev = events.get_or_insert_with(|| self.new_events());
        let now = now.map(|c| checked(c, view));
        ev.access(&mut Hw { pmu: self, pmselr }, reg, sel, write, now)
    }

    fn new_events(&self) -> GuestEvents {
        let n = read_pmcr_el0().n();
        GuestEvents::new(self.first as u8, n, self.el3, self.long)
    }

    /// This CPU's trace starts, whole (not a sampled unit).
    pub fn start_traced(&self, st: &mut GuestPmuState) {
        if self.guest_events.is_none() {
            return;
        }
        let GuestPmuState { pmselr, events, .. } = st;
        let ev = events.get_or_insert_with(|| self.new_events());
        ev.start_traced(&mut Hw { pmu: self, pmselr });
    }

    /// This CPU's trace stopped with `total`: what the guest's counters of the MTE events
    /// counted in it, if it used them.
    pub fn stop_traced(&self, st: &mut GuestPmuState, total: &TraceCounts) -> Option<GuestCounted> {
        let GuestPmuState { pmselr, events, .. } = st;
        let (ev, view) = (events.as_mut()?, self.guest_events?);
        ev.stop_traced(&mut Hw { pmu: self, pmselr }, checked(total, view))
    }

    /// Counters newly found not to count exactly, and their types.
    pub fn take_news(st: &mut GuestPmuState) -> Option<(News, [u64; 31])> {
        let ev = st.events.as_mut()?;
        let news = ev.take_news()?;
        Some((news, core::array::from_fn(|n| ev.evtyper(n as u8))))
    }

    /// The hardware's part of a guest PMU access (all of it without the MTE events):
    /// counters at or above HPMN are not the guest's: their accesses read as zero and are
    /// ignored (the architecture's choice for an EL1 access to a counter it does not have is
    /// CONSTRAINED UNPREDICTABLE; this is one of its options).
    fn hw_access(&self, pmselr: &mut u64, reg: PmuReg, write: Option<u64>) -> u64 {
        let g = self.guest();
        let mask = g.counter_mask();
        macro_rules! masked {
            ($name:literal) => {
                match write {
                    Some(v) => {
                        sysreg_write!($name, v & mask);
                        0
                    }
                    None => sysreg_read!($name) & mask,
                }
            };
        }
        macro_rules! pass {
            ($name:literal) => {
                match write {
                    Some(v) => {
                        sysreg_write!($name, v);
                        0
                    }
                    None => sysreg_read!($name),
                }
            };
        }
        match reg {
            PmuReg::Pmcr => match write {
                Some(v) => {
                    if v & pmcr::P != 0 {
                        // P resets the guest's event counters only.
                        for n in 0..g.hpmn as u64 {
                            self.select(n);
                            sysreg_write!("pmxevcntr_el0", 0);
                        }
                    }
                    write_pmcr_el0(PmcrEl0::from_bits_retain(g.pmcr_write(v)));
                    0
                }
                None => g.pmcr_read(read_pmcr_el0().bits()),
            },
            PmuReg::Pmcntenset => masked!("pmcntenset_el0"),
            PmuReg::Pmcntenclr => masked!("pmcntenclr_el0"),
            PmuReg::Pmovsclr => masked!("pmovsclr_el0"),
            PmuReg::Pmovsset => masked!("pmovsset_el0"),
            PmuReg::Pmintenset => masked!("pmintenset_el1"),
            PmuReg::Pmintenclr => masked!("pmintenclr_el1"),
            PmuReg::Pmswinc => {
                if let Some(v) = write {
                    sysreg_write!("pmswinc_el0", v & g.swinc_mask());
                }
                0
            }
            PmuReg::Pmselr => match write {
                Some(v) => {
                    *pmselr = v & 0x1f;
                    0
                }
                None => *pmselr,
            },
            // Read-only: a write is ignored.
            PmuReg::Pmceid0 => sysreg_read!("pmceid0_el0"),
            PmuReg::Pmceid1 => sysreg_read!("pmceid1_el0"),
            PmuReg::Pmccntr => pass!("pmccntr_el0"),
            PmuReg::Pmuserenr => pass!("pmuserenr_el0"),
            PmuReg::Pmccfiltr => match write {
                Some(v) => {
                    sysreg_write!("pmccfiltr_el0", g.evtyper_write(v));
                    0
                }
                None => sysreg_read!("pmccfiltr_el0"),
            },
            // PMMIR_EL1 exists only from PMUv3p4: reading it where it does not would be
            // UNDEFINED at EL2. It only describes the PMU (slots); zero means "not described".
            PmuReg::Pmmir => 0,
            PmuReg::Pmxevcntr => self.guest_counter(g, *pmselr, false, write),
            PmuReg::Pmxevtyper if *pmselr == 31 => match write {
                Some(v) => {
                    sysreg_write!("pmccfiltr_el0", g.evtyper_write(v));
                    0
                }
                None => sysreg_read!("pmccfiltr_el0"),
            },
            PmuReg::Pmxevtyper => self.guest_counter(g, *pmselr, true, write),
            PmuReg::Pmevcntr(n) => self.guest_counter(g, n as u64, false, write),
            PmuReg::Pmevtyper(n) => self.guest_counter(g, n as u64, true, write),
        }
    }

    /// The guest's event counter `n` (its count, or its type with `typer`).
    fn guest_counter(&self, g: GuestPmu, n: u64, typer: bool, write: Option<u64>) -> u64 {
        if n >= g.hpmn as u64 {
            return 0;
        }
        self.select(n);
        match (typer, write) {
            (false, Some(v)) => sysreg_write!("pmxevcntr_el0", v),
            (true, Some(v)) => sysreg_write!("pmxevtyper_el0", g.evtyper_write(v)),
            (false, None) => return sysreg_read!("pmxevcntr_el0"),
            (true, None) => return sysreg_read!("pmxevtyper_el0"),
        }
        0
    }
}
