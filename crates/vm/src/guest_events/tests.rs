use super::evtyper::{NSK, NSU, P, U};
use super::*;

/// The hardware emulation as `hyp/src/pmu.rs` answers: `hpmn` counters, their controls'
/// bits masked to them and the cycle counter, PMCR_EL0.N = hpmn. Every write is logged.
struct FakeHw {
    hpmn: u8,
    types: [u64; 31],
    values: [u64; 31],
    cnten: u64,
    ovs: u64,
    inten: u64,
    pmcr: u64,
    writes: Vec<(PmuReg, u64)>,
}

const CYCLE: u64 = 1 << 31;

impl FakeHw {
    fn new(hpmn: u8) -> Self {
        Self {
            hpmn,
            types: [0; 31],
            values: [0; 31],
            cnten: 0,
            ovs: 0,
            inten: 0,
            pmcr: 0,
            writes: Vec::new(),
        }
    }

    fn mask(&self) -> u64 {
        ((1 << self.hpmn) - 1) | CYCLE
    }
}

impl HwPmu for FakeHw {
    fn access(&mut self, reg: PmuReg, write: Option<u64>) -> u64 {
        let m = self.mask();
        if let Some(v) = write {
            self.writes.push((reg, v));
        }
        let hpmn = self.hpmn;
        let slot = match reg {
            PmuReg::Pmevtyper(n) if n < hpmn => Some(&mut self.types[n as usize]),
            PmuReg::Pmevcntr(n) if n < hpmn => Some(&mut self.values[n as usize]),
            _ => None,
        };
        if let Some(slot) = slot {
            match write {
                Some(v) => *slot = v,
                None => return *slot,
            }
            return 0;
        }
        match (reg, write) {
            (PmuReg::Pmcr, Some(v)) => self.pmcr = v & !pmcr::P,
            (PmuReg::Pmcr, None) => return self.pmcr | (self.hpmn as u64) << pmcr::N_SHIFT,
            (PmuReg::Pmceid1, None) => return 0x3c_0000_0000 >> 4,
            (PmuReg::Pmcntenset, Some(v)) => self.cnten |= v & m,
            (PmuReg::Pmcntenclr, Some(v)) => self.cnten &= !(v & m),
            (PmuReg::Pmcntenset | PmuReg::Pmcntenclr, None) => return self.cnten,
            (PmuReg::Pmovsset, Some(v)) => self.ovs |= v & m,
            (PmuReg::Pmovsclr, Some(v)) => self.ovs &= !(v & m),
            (PmuReg::Pmovsset | PmuReg::Pmovsclr, None) => return self.ovs,
            (PmuReg::Pmintenset, Some(v)) => self.inten |= v & m,
            (PmuReg::Pmintenclr, Some(v)) => self.inten &= !(v & m),
            (PmuReg::Pmintenset | PmuReg::Pmintenclr, None) => return self.inten,
            _ => {}
        }
        0
    }
}

/// One CPU with a hardware counter (QEMU's HPMN 1), no EL3, FEAT_PMUv3p5.
fn cpu() -> (GuestEvents, FakeHw) {
    (GuestEvents::new(1, 6, false, true), FakeHw::new(1))
}

const fn by_el(rd_u: u64, rd_k: u64, wr_u: u64, wr_k: u64) -> ByEl {
    ByEl {
        rd_u,
        rd_k,
        wr_u,
        wr_k,
    }
}

/// A trace's counts, distinct in every place so that a sum says which it took.
const STEP: ByEl = by_el(1, 10, 100, 1000);

fn times(n: u64, b: ByEl) -> ByEl {
    by_el(b.rd_u * n, b.rd_k * n, b.wr_u * n, b.wr_k * n)
}

struct Guest {
    ev: GuestEvents,
    hw: FakeHw,
    now: ByEl,
    pmselr: u64,
}

impl Guest {
    fn new() -> Self {
        let (ev, hw) = cpu();
        Self::with(ev, hw)
    }

    fn with(ev: GuestEvents, hw: FakeHw) -> Self {
        Self {
            ev,
            hw,
            now: ByEl::default(),
            pmselr: 0,
        }
    }

    /// The trace starts: its counts restart from zero.
    fn traced(mut self) -> Self {
        self.ev.start_traced(&mut self.hw);
        self.now = ByEl::default();
        self
    }

    fn now(&self) -> Option<ByEl> {
        self.ev.traced.then_some(self.now)
    }

    fn write(&mut self, reg: PmuReg, v: u64) {
        let now = self.now();
        self.ev.access(&mut self.hw, reg, self.pmselr, Some(v), now);
    }

    fn read(&mut self, reg: PmuReg) -> u64 {
        let now = self.now();
        self.ev.access(&mut self.hw, reg, self.pmselr, None, now)
    }

    /// The trace counts `STEP` `n` times.
    fn run(&mut self, n: u64) {
        let d = times(n, STEP);
        self.now.add(&d);
    }

    /// Counter `n` programmed with `evtyper` and enabled, PMCR_EL0.E set, as perf does.
    fn program(&mut self, n: u8, evtyper: u64) {
        self.write(PmuReg::Pmevtyper(n), evtyper);
        self.write(PmuReg::Pmevcntr(n), 0);
        self.write(PmuReg::Pmcntenset, 1 << n);
        self.write(PmuReg::Pmcr, pmcr::E | PMCR_LP);
    }
}

#[test]
fn the_guest_sees_the_events_and_the_hypervisors_counters() {
    let mut g = Guest::new();
    assert_eq!(
        g.read(PmuReg::Pmceid1) & PMCEID1_MTE_EVENTS,
        PMCEID1_MTE_EVENTS
    );
    // The hardware's other events stay as they are.
    assert_eq!(
        g.read(PmuReg::Pmceid1) & !PMCEID1_MTE_EVENTS,
        0x3c_0000_0000 >> 4
    );
    let n = (g.read(PmuReg::Pmcr) & pmcr::N_MASK) >> pmcr::N_SHIFT;
    assert_eq!(
        n, 6,
        "the hardware's N: its counter and the hypervisor's five"
    );
    // Never fewer than its own.
    assert_eq!(GuestEvents::new(3, 2, false, true).counters(), 3);
}

/// Every filter and event against the same trace: each counts exactly its EL(s) and
/// direction(s), as `CountPMUEvents` and the events' definitions say.
#[test]
fn each_type_counts_its_els_and_directions() {
    let rd = MEM_ACCESS_CHECKED_RD as u64;
    let wr = MEM_ACCESS_CHECKED_WR as u64;
    let any = MEM_ACCESS_CHECKED as u64;
    // (type, EL3, what 3 × STEP gives)
    let table = [
        (rd, false, 3 * (1 + 10)),
        (U | rd, false, 3 * 10),
        (P | rd, false, 3),
        (P | U | rd, false, 0),
        (wr, false, 3 * (100 + 1000)),
        (P | wr, false, 3 * 100),
        (U | wr, false, 3 * 1000),
        (any, false, 3 * 1111),
        (U | any, false, 3 * 1010),
        (P | any, false, 3 * 101),
        // With EL3, Non-secure EL1 counts when P == NSK, EL0 when U == NSU.
        (P | NSK | rd, true, 3 * (1 + 10)),
        (NSK | rd, true, 3),
        (NSU | rd, true, 3 * 10),
        (U | NSU | any, true, 3 * 1111),
        (P | U | NSK | NSU | any, true, 3 * 1111),
        // Without EL3 NSK and NSU are RES0: they change nothing.
        (NSK | NSU | rd, false, 3 * 11),
    ];
    for (i, (t, el3, expect)) in table.into_iter().enumerate() {
        for n in [0, 3] {
            let mut g = Guest::with(GuestEvents::new(1, 6, el3, true), FakeHw::new(1)).traced();
            g.program(n, t);
            g.run(3);
            assert_eq!(g.read(PmuReg::Pmevcntr(n)), expect, "row {i}, counter {n}");
            assert_eq!(g.read(PmuReg::Pmevtyper(n)), t, "row {i}, counter {n}");
        }
    }
}

#[test]
fn counts_only_while_pmcr_e_and_its_enable_bit_are_set() {
    let mut g = Guest::new().traced();
    let rd_k = U | MEM_ACCESS_CHECKED_RD as u64;
    g.program(2, rd_k);
    g.run(1);
    g.write(PmuReg::Pmcr, 0);
    g.run(5);
    g.write(PmuReg::Pmcr, pmcr::E);
    g.run(1);
    g.write(PmuReg::Pmcntenclr, 1 << 2);
    g.run(7);
    // The enable bits read back as written, the hardware's and the kept ones.
    assert_eq!(g.read(PmuReg::Pmcntenset) & 0b100, 0);
    g.write(PmuReg::Pmcntenset, 1 << 2);
    assert_eq!(g.read(PmuReg::Pmcntenset) & 0b100, 0b100);
    g.run(1);
    assert_eq!(g.read(PmuReg::Pmevcntr(2)), 3 * 10);
    // Counter 0 has hardware: its enable bit is the hardware's too.
    g.write(PmuReg::Pmcntenset, 1);
    assert_eq!(g.hw.cnten & 1, 1);
}

#[test]
fn a_read_sees_the_counts_up_to_it_and_writes_and_resets_take() {
    let mut g = Guest::new().traced();
    g.program(1, U | MEM_ACCESS_CHECKED_WR as u64);
    g.run(2);
    assert_eq!(g.read(PmuReg::Pmevcntr(1)), 2000);
    g.write(PmuReg::Pmevcntr(1), 5);
    g.run(1);
    assert_eq!(g.read(PmuReg::Pmevcntr(1)), 1005);
    // PMCR_EL0.P resets the event counters, kept ones included.
    g.write(PmuReg::Pmcr, pmcr::E | pmcr::P);
    assert_eq!(g.read(PmuReg::Pmevcntr(1)), 0);
    // Through PMSELR_EL0 and PMXEVCNTR/PMXEVTYPER: the same counter.
    g.pmselr = 1;
    g.run(1);
    assert_eq!(g.read(PmuReg::Pmxevcntr), 1000);
    assert_eq!(g.read(PmuReg::Pmxevtyper), U | MEM_ACCESS_CHECKED_WR as u64);
    g.write(PmuReg::Pmxevtyper, MEM_ACCESS_CHECKED_RD as u64);
    g.run(1);
    g.pmselr = 0;
    assert_eq!(g.read(PmuReg::Pmevcntr(1)), 1000 + 11);
}

/// A counter with hardware behind it: while kept, its hardware counter counts nothing and
/// its count carries over both ways; events other than the three stay the hardware's.
#[test]
fn a_hardware_counter_switches_between_kept_and_its_own() {
    let mut g = Guest::new().traced();
    g.write(PmuReg::Pmevtyper(0), 0x11);
    assert_eq!(g.hw.types[0], 0x11);
    g.hw.values[0] = 40;
    g.write(PmuReg::Pmevtyper(0), U | MEM_ACCESS_CHECKED_RD as u64);
    assert_eq!(g.hw.types[0], HW_IDLE_TYPE);
    g.write(PmuReg::Pmcntenset, 1);
    g.write(PmuReg::Pmcr, pmcr::E);
    g.run(2);
    assert_eq!(g.read(PmuReg::Pmevcntr(0)), 40 + 20);
    assert_eq!(g.hw.values[0], 40, "the hardware counter was left alone");
    g.write(PmuReg::Pmevtyper(0), 0x08);
    assert_eq!((g.hw.types[0], g.hw.values[0]), (0x08, 60));
    g.hw.values[0] = 70;
    // No longer kept: the hardware answers.
    assert_eq!(g.read(PmuReg::Pmevcntr(0)), 70);
    // The cycle counter is never kept.
    g.pmselr = 31;
    g.write(PmuReg::Pmxevtyper, MEM_ACCESS_CHECKED_RD as u64);
    assert_eq!(g.ev.mte, 0);
}

#[test]
fn overflow_sets_the_flag_and_raises_the_interrupt_where_hardware_can() {
    let rd_k = U | MEM_ACCESS_CHECKED_RD as u64;
    // PMCR_EL0.LP clear: 64-bit counters overflow at bit 32 and keep counting above it.
    let mut g = Guest::new().traced();
    g.program(0, rd_k);
    g.program(4, rd_k);
    g.write(PmuReg::Pmcr, pmcr::E);
    g.write(PmuReg::Pmintenset, 0b10001);
    g.write(PmuReg::Pmevcntr(0), 0xffff_fffb);
    g.write(PmuReg::Pmevcntr(4), 0xffff_fff0);
    g.run(1);
    assert_eq!(g.read(PmuReg::Pmovsset) & 0b10001, 0b00001);
    g.run(1);
    assert_eq!(g.read(PmuReg::Pmovsclr) & 0b10001, 0b10001);
    assert_eq!(g.read(PmuReg::Pmevcntr(0)), 0x1_0000_000f);
    // Counter 0's interrupt: through its hardware overflow bit, once.
    let raised: Vec<_> =
        g.hw.writes
            .iter()
            .filter(|w| w.0 == PmuReg::Pmovsset)
            .collect();
    assert_eq!(raised, [&(PmuReg::Pmovsset, 1)]);
    assert_eq!(g.hw.ovs, 1);
    // Counter 4 has no hardware: its interrupt is told, not raised.
    assert_eq!(
        g.ev.take_news(),
        Some(News {
            irq_lost: 1 << 4,
            ..News::default()
        })
    );
    g.write(PmuReg::Pmovsclr, 0b10001);
    assert_eq!((g.read(PmuReg::Pmovsset) & 0b10001, g.hw.ovs), (0, 0));

    // LP set: no overflow at bit 32, one at bit 64.
    let mut g = Guest::new().traced();
    g.program(1, rd_k);
    g.write(PmuReg::Pmevcntr(1), 0xffff_fff0);
    g.run(2);
    assert_eq!(g.read(PmuReg::Pmovsset) & 2, 0);
    g.write(PmuReg::Pmevcntr(1), u64::MAX - 4);
    g.run(1);
    assert_eq!(g.read(PmuReg::Pmovsset) & 2, 2);
    assert_eq!(g.read(PmuReg::Pmevcntr(1)), 5);

    // Without FEAT_PMUv3p5 counters are 32 bits.
    let mut g = Guest::with(GuestEvents::new(1, 6, false, false), FakeHw::new(1)).traced();
    g.program(1, rd_k);
    g.write(PmuReg::Pmevcntr(1), 0x1_ffff_fffe);
    assert_eq!(g.read(PmuReg::Pmevcntr(1)), 0xffff_fffe);
    g.run(1);
    assert_eq!(g.read(PmuReg::Pmevcntr(1)), 8);
    assert_eq!(g.read(PmuReg::Pmovsset) & 2, 2);
}

#[test]
fn a_counter_that_counts_untraced_is_told_once_and_given_nothing() {
    let rd_k = U | MEM_ACCESS_CHECKED_RD as u64;
    let mut g = Guest::new();
    // Programmed and enabled before the trace: counting untraced from PMCR_EL0.E on.
    g.program(2, rd_k);
    assert_eq!(
        g.ev.take_news(),
        None,
        "nothing counted yet: E was the last write"
    );
    g.run(4);
    g = g.traced();
    assert_eq!(
        g.ev.take_news(),
        Some(News {
            untraced: 1 << 2,
            ..News::default()
        })
    );
    g.run(1);
    assert_eq!(g.read(PmuReg::Pmevcntr(2)), 10, "only the traced counts");
    // Still enabled as the trace stops: told again? no, once per counter.
    let counted = g.ev.stop_traced(&mut g.hw, g.now);
    assert_eq!(g.ev.take_news(), None);
    assert_eq!(counted.map(|c| c[1][1]), Some(10));
    // A counter filtered out at both ELs, or disabled, counts nothing: not told.
    let mut g = Guest::new();
    g.program(3, P | U | MEM_ACCESS_CHECKED as u64);
    g.write(PmuReg::Pmevtyper(4), rd_k);
    g.run(1);
    g.read(PmuReg::Pmceid0);
    assert_eq!(g.ev.take_news(), None);
    // A sampled window is not traced whole: never started, so every count is untraced.
    g.write(PmuReg::Pmcntenset, 1 << 4);
    g.read(PmuReg::Pmevcntr(4));
    assert_eq!(
        g.ev.take_news(),
        Some(News {
            untraced: 1 << 4,
            ..News::default()
        })
    );
}

#[test]
fn a_counter_past_the_hardware_with_another_event_is_told() {
    let mut g = Guest::new().traced();
    g.program(1, 0x11);
    g.run(1);
    assert_eq!(g.read(PmuReg::Pmevtyper(1)), 0x11);
    assert_eq!(g.read(PmuReg::Pmevcntr(1)), 0);
    assert_eq!(
        g.ev.take_news(),
        Some(News {
            no_hardware: 1 << 1,
            ..News::default()
        })
    );
    // The same event on the hardware's counter is the hardware's.
    g.program(0, 0x11);
    g.run(1);
    g.read(PmuReg::Pmevcntr(0));
    assert_eq!(g.ev.take_news(), None);
    assert_eq!(g.hw.types[0], 0x11);
}

/// What kept counters counted, by event and ELs, for the trace: two counters of one event
/// and ELs add up (perf prints both); the trace's counts before a counter was enabled are not
/// in it.
#[test]
fn the_trace_returns_what_the_guest_counted() {
    let mut g = Guest::new().traced();
    g.run(9);
    g.program(0, P | MEM_ACCESS_CHECKED_RD as u64);
    g.program(1, U | MEM_ACCESS_CHECKED_RD as u64);
    g.program(2, MEM_ACCESS_CHECKED_WR as u64);
    g.program(3, MEM_ACCESS_CHECKED_WR as u64);
    g.run(2);
    let total = g.now;
    let c =
        g.ev.stop_traced(&mut g.hw, total)
            .expect("the events were used");
    let rd = MteEvent::CheckedRd as usize;
    let wr = MteEvent::CheckedWr as usize;
    assert_eq!(c[rd], [2, 20, 0]);
    assert_eq!(c[wr], [0, 0, 2 * 2 * 1100]);
    assert_eq!(c[MteEvent::Checked as usize], [0, 0, 0]);
    // A trace in which the guest programmed none of the events returns nothing.
    let mut g = Guest::new().traced();
    g.program(0, 0x11);
    g.run(1);
    assert_eq!(g.ev.stop_traced(&mut g.hw, g.now), None);
    // Stopping a trace never started returns nothing either.
    let mut g = Guest::new();
    assert_eq!(g.ev.stop_traced(&mut g.hw, ByEl::default()), None);
}
