//! When a sampled phase traces. The phase runs at full speed, its instructions counted by the
//! PMU; units of consecutive instructions are traced exactly by the step engine, each begun
//! when the EL2 timer fires after a random gap of the guest's own execution time (the counter
//! less the hypervisor's time and the time halted for the guest's WFI).
//!
//! - **Random gaps, not a period.** Each gap is drawn uniformly from 0 to twice the mean: a
//!   fixed period would alias with the guest's own periodic work (a timer tick, a loop whose
//!   iterations take as long), and sample the same place in it every time. The phase's first
//!   gap is what would be left of such a gap already under way, so that units begin as
//!   often near the phase's start as anywhere else in it.
//! - **A unit begins wherever the timer finds the guest**: at any instruction, at EL0 or EL1,
//!   with interrupts masked or not (the EL2 timer's interrupt goes to EL2 whatever the
//!   guest's PSTATE). The counts need no warm-up: whether an instruction's access is
//!   tag-checked is decided by the registers and the page tables at that instruction, which
//!   the engine reads when it decodes it, so a unit's first instruction is judged as exactly
//!   as any other.
//! - **Random lengths too**: a unit's length is drawn uniformly from half to one and a half
//!   times the size asked for. Where a unit may begin is up to the CPU (QEMU takes an
//!   interrupt only where a block of translated code begins: after a branch), so in a loop
//!   units would all begin at the same few places; a fixed length would then always cover the
//!   same part of the loop's last iteration, and over-count it. Measured on futex-hash with
//!   units of 1000: two of the four headline intervals missed the exact count with fixed
//!   lengths.
//! - **And a random start**: for the same reason, a unit begins only after the engine has
//!   stepped, uncounted, a random number of instructions (up to [`MAX_LEAD`]) from where the
//!   timer found the guest, so that it does not begin where blocks of code begin (after a
//!   branch, at an exception vector: a unit begun there would never count the entry that led
//!   to it).
//! - **A unit ends after exactly its instructions**: the engine's breakpoint runs (up to
//!   [`mtex_trace::run::MAX_VISITED`] instructions) are taken only while the unit has room for
//!   a whole one, and the step fast path, which retires inert instructions without asking, is
//!   off in units. An exclusive sequence is never split: a run carries it whole, and may end
//!   a unit a few instructions late.
//! - A gap of 0 traces the phase whole: the first unit begins with the phase, each next one
//!   where the last ended, and the units' sum is the phase's exact count.

use mtex_abi::options::SampleOptions;
use mtex_abi::report::StepEngine;

/// A sampled phase's schedule and what its units have done so far.
#[derive(Clone, Debug)]
pub struct Sampler {
    pub options: SampleOptions,
    rng: fastrand::Rng,
    /// The open sampled phase, 0 when none.
    pub phase: u32,
    /// Units begun in the phase.
    pub units: u32,
    /// A unit is being traced.
    pub in_unit: bool,
    /// The timer fired for a unit while one was still being traced.
    pub late_triggers: u32,
    /// ID- and debug-register accesses trapped outside the units
    /// (`PhaseSampled::untraced_id_debug_traps`).
    pub untraced_id_debug_traps: u32,
    /// The step engine's work, summed over the phase's units.
    pub engine: StepEngine,
    /// The guest's clock when the unit being traced began.
    pub unit_clock: u64,
    /// The length of the unit being traced, in instructions.
    pub unit_len: u64,
    /// Instructions still to step, uncounted, before the unit being traced counts (its
    /// lead); 0 once it counts.
    pub lead: u64,
    /// The PMU's instructions at EL2, EL1, EL0 when this CPU began sampling its share of a
    /// window on several CPUs (None: no figure), for [`share_instructions`].
    pub pmu_at_begin: Option<[u64; 3]>,
    /// In a window on several CPUs, the gaps are counted on this CPU's own instructions (the
    /// PMU's at EL0 and EL1), not on the machine's guest time: under `-icount` one host
    /// thread runs the CPUs in turn, and the machine's account of hypervisor time, which
    /// every CPU's exits add to, takes in what another CPU executed while this one traced (a
    /// unit's hundreds of exits), so a gap on it would stretch over a CPU's instructions
    /// whenever another CPU traces, at a rate no one knows. The unit is due when the count
    /// reaches this (None: not counted so, or none due): [`own_due`].
    pub due_instructions: Option<u64>,
    /// The CPU's own count when its timer was last armed for the unit (`own_fired`).
    own_at_arm: u64,
}

/// What a CPU whose unit is due on its own instructions does when its timer fires.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OwnFired {
    /// Begin the unit, after stepping (uncounted, as a lead) the instructions still to go.
    Unit { first: u64 },
    /// Arm the timer again for the instructions still to go.
    Rearm(u64),
}

/// Instructions still to go at which a CPU whose timer fired early steps them rather than
/// arming its timer again: stepping a few costs less than another exit.
pub const STEP_REST: u64 = 256;

/// What a CPU whose gaps are counted on its own instructions does when its timer fires or
/// it exits, with `own` instructions executed so far against a unit due at `due`: begin the
/// unit, or wait for the rest (the timer, armed for that many counter ticks, fires no later
/// than the CPU executes them: under `-icount` a tick is one instruction of whichever CPU
/// runs; on silicon a CPU retires at least about one instruction a tick of a counter of 1 GHz
/// or less, and a gap that runs long is a gap all the same).
pub fn own_due(due: u64, own: u64) -> Next {
    match due.checked_sub(own) {
        Some(rest) if rest > 0 => Next::TimerIn(rest),
        _ => Next::UnitNow,
    }
}

/// CPU `cpu`'s schedule in a window sampled on several CPUs: the run's, with a seed of its
/// own, so that the CPUs' units fall independently of one another (the same schedule on
/// every CPU would begin their units in step). CPU 0 keeps the run's random seed: one CPU
/// samples as it always did.
pub fn for_cpu(options: SampleOptions, cpu: usize) -> SampleOptions {
    // A multiplier with its bits spread (the golden ratio's, 2^64/φ), so that neighbouring
    // CPU indices give random seeds far apart.
    const SPREAD: u64 = 0x9e37_79b9_7f4a_7c15;
    SampleOptions {
        seed: options.seed ^ (cpu as u64).wrapping_mul(SPREAD),
        ..options
    }
}

/// The instructions a CPU's PMU counted at [EL0, EL1] over its share of a window, from its
/// readings (EL2, EL1, EL0) at the begin and the end; None without both, or if a counter went
/// back (it was reprogrammed meanwhile).
pub fn share_instructions(begin: Option<[u64; 3]>, end: Option<[u64; 3]>) -> Option<[u64; 2]> {
    let (b, e) = (begin?, end?);
    Some([e[2].checked_sub(b[2])?, e[1].checked_sub(b[1])?])
}

/// The most instructions stepped, uncounted, before a unit begins counting.
pub const MAX_LEAD: u64 = 64;

/// What to do at the phase's begin or at a unit's end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// Begin a unit now (the phase is traced whole).
    UnitNow,
    /// Arm the timer this many counter ticks from now.
    TimerIn(u64),
}

impl Sampler {
    pub fn new(options: SampleOptions) -> Self {
        Self {
            options,
            rng: fastrand::Rng::with_seed(options.seed),
            phase: 0,
            units: 0,
            in_unit: false,
            late_triggers: 0,
            untraced_id_debug_traps: 0,
            engine: StepEngine::default(),
            unit_clock: 0,
            unit_len: 0,
            lead: 0,
            pmu_at_begin: None,
            due_instructions: None,
            own_at_arm: 0,
        }
    }

    /// Counted on this CPU's own instructions: the next unit is due after `ticks` of them
    /// from `own`; the timer is armed for that many counter ticks.
    pub fn due_after(&mut self, own: u64, ticks: u64) {
        self.due_instructions = Some(own.saturating_add(ticks));
        self.own_at_arm = own;
    }

    /// The timer fired, the CPU having executed `own` instructions: the unit is due when it
    /// has executed [`Sampler::due_instructions`]. The timer counts every CPU's instructions
    /// under `-icount` (one thread runs them in turn), so it fires no later than the CPU
    /// reaches its due, often earlier. With few to go, or none executed since the timer was
    /// armed (the other CPUs took all the time, and would again), the unit begins after
    /// stepping them, so that it begins at its due whatever order the CPUs ran in; with more,
    /// the timer is armed again for them.
    pub fn own_fired(&mut self, own: u64) -> Option<OwnFired> {
        if self.phase == 0 || self.in_unit {
            return None;
        }
        let rest = self.due_instructions?.saturating_sub(own);
        if rest <= STEP_REST || own == self.own_at_arm {
            return Some(OwnFired::Unit { first: rest });
        }
        self.own_at_arm = own;
        Some(OwnFired::Rearm(rest))
    }

    /// Counted on this CPU's own instructions, `own` so far: begin the unit, or arm the timer
    /// for the rest ([`own_due`]); None when no unit is due or one is being traced. The
    /// timer is armed from the return to the guest: under `-icount` the CPU that returns
    /// runs on until the earliest timer, so it executes the rest before its own fires, or
    /// part of it when another CPU's fires first, and the next arming is for what is left.
    pub fn own_next(&mut self, own: u64) -> Option<Next> {
        if !self.own_gap_running() {
            return None;
        }
        Some(own_due(self.due_instructions?, own))
    }

    /// A gap counted on own instructions is running: a phase sampled, no unit being traced,
    /// one due. Only then does [`own_next`](Self::own_next) need the CPU's instructions.
    pub fn own_gap_running(&self) -> bool {
        self.phase != 0 && !self.in_unit && self.due_instructions.is_some()
    }

    /// The whole phase is traced (gap 0).
    pub fn whole(&self) -> bool {
        self.options.gap_us == 0
    }

    /// The most ticks of the counter (at `hz`) a gap lasts: twice the mean.
    fn most(&self, hz: u64) -> u64 {
        (2 * self.options.gap_us as u64).saturating_mul(hz) / 1_000_000
    }

    /// The next gap in counter ticks (at `hz`), or a unit at once when gaps are 0.
    fn next(&mut self, hz: u64) -> Next {
        if self.whole() {
            return Next::UnitNow;
        }
        // Uniform over the ticks of the counter in [0, 2·gap] microseconds.
        Next::TimerIn(self.rng.u64(0..=self.most(hz)))
    }

    /// The phase's first gap: what is left of a gap already under way when the phase
    /// begins, as if the schedule had been running before it. A first gap drawn like the
    /// others would begin a unit near the phase's start half as often as anywhere else (the
    /// first unit could fall anywhere in twice the mean gap, and none before it), and a
    /// phase's first stretch (a thread created, a buffer filled) would then weigh too little
    /// in its estimates. What is left of a gap uniform on [0, M] has density 2(M − t)/M² on
    /// [0, M]: t = M·(1 − √v) for v uniform on [0, 1], here with v = k/M² for k uniform on
    /// 0..=M², in integers (no floating point in the hypervisor).
    fn first(&mut self, hz: u64) -> Next {
        if self.whole() {
            return Next::UnitNow;
        }
        let most = u128::from(self.most(hz));
        let k = self.rng.u128(0..=most * most);
        // isqrt(k) ≤ most, so the difference is at most `most`, a u64.
        Next::TimerIn((most - k.isqrt()) as u64)
    }

    /// Phase `id` opens sampled; the generator goes on from the last phase's draws (each
    /// phase of a run gets other gaps, the run as a whole repeats with its random generator's seed).
    pub fn begin(&mut self, id: u32, hz: u64) -> Next {
        self.phase = id;
        self.units = 0;
        self.in_unit = false;
        self.late_triggers = 0;
        self.untraced_id_debug_traps = 0;
        self.due_instructions = None;
        self.engine = StepEngine {
            id,
            ..StepEngine::default()
        };
        self.first(hz)
    }

    /// The timer fired: whether a unit begins (not while one is traced, nor outside a phase).
    /// [`Sampler::trigger`], the unit's lead longer by `first` instructions (a unit due on the
    /// CPU's own instructions, that many ahead: [`Sampler::own_fired`]).
    pub fn trigger_after(&mut self, first: u64) -> bool {
        let t = self.trigger();
        if t {
            self.lead += first;
        }
        t
    }

    pub fn trigger(&mut self) -> bool {
        if self.phase == 0 {
            return false;
        }
        if self.in_unit {
            self.late_triggers += 1;
            return false;
        }
        self.in_unit = true;
        self.units += 1;
        let size = self.options.unit as u64;
        (self.unit_len, self.lead) = if self.whole() {
            (size, 0)
        } else {
            (
                self.rng.u64(size.div_ceil(2)..=size + size / 2),
                self.rng.u64(0..=MAX_LEAD),
            )
        };
        true
    }

    /// The unit ends here: what its engine did is added; what comes next.
    pub fn end_unit(&mut self, engine: StepEngine, hz: u64) -> Next {
        self.in_unit = false;
        self.add_engine(engine);
        self.next(hz)
    }

    /// The phase ended in a unit's lead: the unit never counted, and is not one.
    pub fn abandon_lead(&mut self) {
        self.in_unit = false;
        self.lead = 0;
        self.units -= 1;
    }

    /// What the engine did in a stretch it traced (a unit or a lead).
    pub fn add_engine(&mut self, engine: StepEngine) {
        self.engine.add(&engine);
    }

    /// The phase ends (after its last unit ended): the record of how it was sampled.
    /// `timer_stopped`: [`overdue`] said so of the next unit's timer.
    pub fn end(&mut self, timer_stopped: bool) -> mtex_abi::report::PhaseSampled {
        let r = mtex_abi::report::PhaseSampled {
            id: self.phase,
            units: self.units,
            unit_instructions: self.options.unit,
            gap_us: self.options.gap_us,
            seed: self.options.seed,
            whole: self.whole(),
            engine: self.engine,
            late_triggers: self.late_triggers,
            untraced_id_debug_traps: self.untraced_id_debug_traps,
            timer_stopped,
        };
        self.phase = 0;
        r
    }

    /// Whether the unit being traced, having retired `done` instructions, is over.
    pub fn unit_over(&self, done: u64) -> bool {
        self.lead == 0 && done >= self.unit_len
    }

    /// Whether the unit's lead, having stepped `done` instructions, is over: the unit
    /// counts from here (its counts so far are dropped).
    pub fn lead_over(&mut self, done: u64) -> bool {
        let over = self.lead != 0 && done >= self.lead;
        if over {
            self.lead = 0;
        }
        over
    }

    /// What the engine is to trace now, in instructions: the lead, or the unit.
    pub fn stretch(&self) -> u64 {
        if self.lead != 0 {
            self.lead
        } else {
            self.unit_len
        }
    }
}

/// Whether a breakpoint run of up to `MAX_VISITED` instructions fits in what is left of a
/// unit of `unit` instructions that has retired `done`; an exclusive sequence is carried
/// whatever is left.
pub fn run_fits(unit: u64, done: u64, exclusive: bool) -> bool {
    exclusive || done + mtex_trace::run::MAX_VISITED as u64 <= unit
}

/// Whether a unit due at counter tick `due` (u64::MAX: none is) is overdue at `now` by more
/// than a hundredth of a second: its timer stopped reaching EL2 (a guest that took the
/// interrupt's routing for itself), which a late interrupt is not.
pub fn overdue(due: u64, now: u64, hz: u64) -> bool {
    due != u64::MAX && now.saturating_sub(due) > hz / 100
}

/// A unit's due time on the guest's own time, kept as a counter value less the machine's
/// account of hypervisor time (`u64::MAX`: none is due). The hypervisor's exit tail adds the
/// account back at each return to the guest, so the hypervisor's work never brings the unit
/// nearer; the time the CPU halts for the guest's WFI moves it on ([`DueBase::idle`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DueBase(pub u64);

impl DueBase {
    pub const NONE: DueBase = DueBase(u64::MAX);

    /// A unit `ticks` of guest time after an exit that entered EL2 at counter value
    /// `exit_ts`, when the account of hypervisor time (not yet counting that exit) was
    /// `offset`.
    pub fn after(exit_ts: u64, offset: u64, ticks: u64) -> Self {
        DueBase(exit_ts.wrapping_sub(offset).saturating_add(ticks))
    }

    /// The counter value it is due at with the account at `offset` (`u64::MAX`: never).
    pub fn due(self, offset: u64) -> u64 {
        self.0.saturating_add(offset)
    }

    /// The CPU halted `ticks` for the guest's WFI: time asleep is not the guest's execution.
    pub fn idle(self, ticks: u64) -> Self {
        if self == Self::NONE {
            self
        } else {
            DueBase(self.0.saturating_add(ticks))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HZ: u64 = 1_000_000_000;

    #[test]
    fn each_cpu_draws_its_own_schedule_and_cpu_0_keeps_the_run_s() {
        let run = SampleOptions {
            unit: 100,
            gap_us: 50,
            seed: 7,
        };
        assert_eq!(for_cpu(run, 0), run);
        let seeds: std::collections::BTreeSet<u64> =
            (0..64).map(|c| for_cpu(run, c).seed).collect();
        assert_eq!(seeds.len(), 64, "every CPU a random seed of its own");
        assert!((0..64).all(|c| for_cpu(run, c).unit == 100 && for_cpu(run, c).gap_us == 50));
        // Their first gaps differ: the CPUs do not begin units in step.
        let first = |c| Sampler::new(for_cpu(run, c)).begin(1, HZ);
        assert_ne!(first(0), first(1));
        assert_eq!(first(1), first(1));
    }

    #[test]
    fn a_share_s_instructions_are_the_pmu_s_el0_and_el1_differences() {
        let begin = Some([100, 2_000, 30_000]);
        assert_eq!(
            share_instructions(begin, Some([900, 2_500, 30_070])),
            Some([70, 500])
        );
        assert_eq!(share_instructions(None, Some([1, 2, 3])), None);
        assert_eq!(share_instructions(begin, None), None);
        assert_eq!(
            share_instructions(begin, Some([900, 1_000, 30_070])),
            None,
            "a counter that went back was reprogrammed"
        );
    }

    /// A unit due 1000 guest ticks after an exit stays 1000 guest ticks away whatever the
    /// hypervisor and idle time in between: each moves its counter deadline by as much.
    #[test]
    fn a_due_time_moves_with_hypervisor_and_idle_time_only() {
        let (exit_ts, offset) = (5_000_000, 4_000_000);
        let base = DueBase::after(exit_ts, offset, 1000);
        assert_eq!(base.due(offset), exit_ts + 1000);
        // The exit took 300 ticks of EL2 time; later exits 200 more; the CPU idled 50.
        assert_eq!(base.due(offset + 500), exit_ts + 1500);
        assert_eq!(base.idle(50).due(offset + 500), exit_ts + 1550);
        assert_eq!(DueBase::NONE.idle(50).due(offset), u64::MAX);
    }

    #[test]
    fn a_unit_due_on_a_cpu_s_own_instructions_waits_for_them() {
        assert_eq!(own_due(10_000, 9_000), Next::TimerIn(1_000));
        assert_eq!(own_due(10_000, 10_000), Next::UnitNow);
        assert_eq!(own_due(10_000, 12_345), Next::UnitNow);
        let mut s = sampler(100, 5, 1);
        s.begin(1, HZ);
        assert_eq!(s.due_instructions, None);
        assert_eq!(s.own_next(0), None, "nothing due");
        s.due_after(1_000, 500);
        assert_eq!(s.own_next(1_200), Some(Next::TimerIn(300)));
        assert_eq!(s.own_next(1_500), Some(Next::UnitNow));
        assert!(s.trigger());
        assert_eq!(s.own_next(1_600), None, "in a unit");
    }

    /// The timer fires early (another CPU ran): with many to go and progress since it was
    /// armed, it is armed again; with few, or none executed since, the unit begins after
    /// stepping what is left, whatever order the CPUs ran in.
    #[test]
    fn a_cpu_whose_timer_fires_early_waits_or_steps_to_its_due() {
        let mut s = sampler(100, 5, 1);
        s.begin(1, HZ);
        assert_eq!(s.own_fired(0), None, "nothing due");
        s.due_after(10_000, 2_000);
        assert_eq!(
            s.own_fired(10_000),
            Some(OwnFired::Unit { first: 2_000 }),
            "no progress"
        );
        s.due_after(10_000, 2_000);
        assert_eq!(s.own_fired(10_500), Some(OwnFired::Rearm(1_500)));
        assert_eq!(s.own_fired(11_800), Some(OwnFired::Unit { first: 200 }));
        assert_eq!(s.own_fired(12_000), Some(OwnFired::Unit { first: 0 }));
        // The unit's lead grows by what is left.
        let lead_of = |first| {
            let mut s = sampler(100, 5, 3);
            s.begin(1, HZ);
            assert!(s.trigger_after(first));
            s.lead
        };
        assert_eq!(lead_of(200), lead_of(0) + 200);
        assert!(s.trigger_after(0));
        assert_eq!(s.own_fired(12_100), None, "in a unit");
    }

    fn sampler(unit: u32, gap_us: u32, seed: u64) -> Sampler {
        Sampler::new(SampleOptions { unit, gap_us, seed })
    }

    #[test]
    fn gaps_are_uniform_up_to_twice_the_mean_and_repeat_with_the_seed() {
        let draw = |seed| {
            let mut s = sampler(100, 50, seed);
            let mut gaps = alloc::vec::Vec::new();
            let Next::TimerIn(first) = s.begin(1, HZ) else {
                panic!("a gap")
            };
            gaps.push(first);
            for _ in 0..2000 {
                assert!(s.trigger());
                match s.end_unit(StepEngine::default(), HZ) {
                    Next::TimerIn(t) => gaps.push(t),
                    Next::UnitNow => panic!("a gap"),
                }
            }
            gaps
        };
        let a = draw(3);
        assert_eq!(a, draw(3), "same seed, same random schedule");
        assert_ne!(a, draw(4));
        assert!(a.iter().all(|&g| g <= 100_000), "at most 2·50 µs at 1 GHz");
        let mean = a.iter().sum::<u64>() as f64 / a.len() as f64;
        assert!((mean - 50_000.0).abs() < 2_500.0, "mean {mean}");
        // Not a period: the gaps spread over their range.
        let distinct: std::collections::BTreeSet<_> = a.iter().collect();
        assert!(distinct.len() > 1000);
    }

    /// A unit begins as often near the phase's start as later on: the first gap is the rest
    /// of a gap under way (mean a third of the longest gap), not a whole one (mean half).
    #[test]
    fn units_begin_as_often_at_the_phase_s_start_as_later() {
        let most = 100_000u64; // 2·50 µs at 1 GHz
        let firsts: alloc::vec::Vec<u64> = (0..20_000)
            .map(|seed| match sampler(100, 50, seed).begin(1, HZ) {
                Next::TimerIn(t) => t,
                Next::UnitNow => panic!("a gap"),
            })
            .collect();
        assert!(firsts.iter().all(|&t| t <= most));
        let mean = firsts.iter().sum::<u64>() as f64 / firsts.len() as f64;
        assert!(
            (mean - most as f64 / 3.0).abs() < 1_000.0,
            "mean first gap {mean}, a third of {most} expected"
        );
        // The renewal density of a stationary schedule is one unit a mean cycle everywhere:
        // the first tenth of the longest gap holds 19% of first units (2·0.1 − 0.1²), where a
        // first gap like the others would put 10% there.
        let early = firsts.iter().filter(|&&t| t < most / 10).count() as f64 / 20_000.0;
        assert!((early - 0.19).abs() < 0.015, "{early}");
    }

    #[test]
    fn gap_zero_traces_unit_after_unit_from_the_begin() {
        let mut s = sampler(10, 0, 1);
        assert_eq!(s.begin(5, HZ), Next::UnitNow);
        assert!(s.trigger());
        assert_eq!(s.end_unit(StepEngine::default(), HZ), Next::UnitNow);
        assert!(s.trigger());
        let r = s.end(false);
        assert!(r.whole);
        assert_eq!((r.id, r.units), (5, 2));
    }

    #[test]
    fn a_late_trigger_begins_no_second_unit_and_none_begins_outside_a_phase() {
        let mut s = sampler(10, 5, 1);
        assert!(!s.trigger(), "no phase");
        s.begin(2, HZ);
        assert!(s.trigger());
        assert!(!s.trigger());
        let branches = StepEngine {
            branches_el1: 3,
            ..StepEngine::default()
        };
        s.end_unit(branches, HZ);
        assert!(s.trigger());
        s.end_unit(branches, HZ);
        let r = s.end(false);
        assert_eq!((r.units, r.late_triggers, r.whole), (2, 1, false));
        assert_eq!(r.engine.branches_el1, 6);
        assert_eq!(r.engine.id, 2);
        assert!(!s.trigger(), "the phase ended");
    }

    #[test]
    fn unit_lengths_spread_around_the_size_and_are_the_size_tracing_whole() {
        let mut s = sampler(100, 5, 9);
        s.begin(1, HZ);
        let mut lens = alloc::vec::Vec::new();
        for _ in 0..1000 {
            assert!(s.trigger());
            s.lead = 0;
            lens.push(s.unit_len);
            assert!(!s.unit_over(s.unit_len - 1));
            assert!(s.unit_over(s.unit_len));
            s.end_unit(StepEngine::default(), HZ);
        }
        assert!(lens.iter().all(|l| (50..=150).contains(l)));
        let mut t = sampler(100, 5, 9);
        t.begin(1, HZ);
        let mut leads = std::collections::BTreeSet::new();
        for _ in 0..1000 {
            t.trigger();
            let lead = t.lead;
            leads.insert(lead);
            assert!(lead <= MAX_LEAD);
            assert_eq!(
                t.stretch(),
                lead.max(if lead == 0 { t.unit_len } else { 0 })
            );
            assert!(!t.unit_over(1000) || lead == 0, "no unit ends in its lead");
            if lead > 0 {
                assert!(!t.lead_over(lead - 1));
                assert!(t.lead_over(lead));
            }
            assert_eq!(t.stretch(), t.unit_len);
            t.end_unit(StepEngine::default(), HZ);
        }
        assert!(leads.len() > 50, "leads spread: {}", leads.len());
        let mean = lens.iter().sum::<u64>() as f64 / lens.len() as f64;
        assert!((mean - 100.0).abs() < 3.0, "mean {mean}");
        let distinct: std::collections::BTreeSet<_> = lens.iter().collect();
        assert!(distinct.len() > 90);
        let mut whole = sampler(100, 0, 9);
        whole.begin(1, HZ);
        assert!(whole.trigger());
        assert_eq!((whole.unit_len, whole.lead), (100, 0));
    }

    #[test]
    fn a_unit_ends_at_its_size_and_runs_fit_in_what_is_left() {
        let mut s = sampler(100, 0, 1);
        s.begin(1, HZ);
        s.trigger();
        assert!(!s.unit_over(99));
        assert!(s.unit_over(100));
        let max = mtex_trace::run::MAX_VISITED as u64;
        assert!(run_fits(100, 100 - max, false));
        assert!(!run_fits(100, 100 - max + 1, false));
        assert!(
            run_fits(100, 99, true),
            "an exclusive sequence is carried whole"
        );
    }

    #[test]
    fn a_unit_is_overdue_only_well_past_its_time() {
        assert!(!overdue(u64::MAX, 5 * HZ, HZ), "no unit due");
        assert!(!overdue(HZ, HZ + HZ / 100, HZ), "a late interrupt");
        assert!(overdue(HZ, HZ + HZ / 100 + 1, HZ));
        assert!(!overdue(2 * HZ, HZ, HZ), "not yet due");
    }
}
