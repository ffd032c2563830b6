//! Several fake CPUs driven through windows and PSCI calls in any order.
//!
//! The decisions are `mtex_vm::window` (who counts a window every CPU counts),
//! `mtex_vm::power` (what CPU_ON, CPU_OFF and AFFINITY_INFO do) and `mtex_vm::phase` (whether
//! PHASE_BEGIN opens a phase). [`Machine`] applies them as the hypervisor does —
//! `hyp/src/exits.rs` (an exit is counted first, then handled, then the CPU joins or leaves
//! the window), `phase/window.rs` (open, join, leave, close, the figures sent when the last
//! share is in), `hypercall.rs` (a PHASE_BEGIN while shares are still out is retried) and
//! `psci.rs` (CPU_ON is refused while a phase is open) — on up to eight fake CPUs, each with a
//! monotonic count of the instructions it retired and of the exits it took. After every
//! event it checks what must hold whatever the order; each check says why.
//!
//! The machine keeps the hypervisor's two rules that make a window whole ([`Rules`]), or
//! drops either: without them some of what CPUs run in a window is not counted (it was run
//! before a CPU's first exit), but everything else must hold all the same.

use mtex_abi::hypercall as hc;
use mtex_platform::machine::MPIDR_AFFINITY;
use mtex_vm::counters::Counters;
use mtex_vm::phase::{self, Refusal};
use mtex_vm::power::{Cpus, Power};
use mtex_vm::window::Window;
use proptest::prelude::*;
use proptest::test_runner::{FileFailurePersistence, TestCaseError};
use smccc::psci::{AffinityState, error::Error};

type Check = Result<(), TestCaseError>;

/// The guest's RAM, where CPU_ON may enter.
const RAM: core::ops::Range<u64> = 0x4000_0000..0x8000_0000;
const ENTRY: u64 = 0x4008_0000;
/// An affinity (Aff3 = 7) that no CPU of these machines has.
const NO_SUCH_CPU: u64 = 0x07_0000_0007;

/// CPU `i`'s MPIDR_EL1: clusters (Aff1) of four, bit 31 (RES1) set.
fn mpidr(i: usize) -> u64 {
    0x8000_0000 | ((i as u64 / 4) << 8) | (i as u64 % 4)
}

/// What a guest names CPU `i` by in a PSCI call: its affinity.
fn affinity(i: usize) -> u64 {
    mpidr(i) & MPIDR_AFFINITY
}

/// Whom a CPU_ON or AFFINITY_INFO names.
#[derive(Clone, Copy, Debug)]
enum Target {
    Cpu(usize),
    /// The caller itself.
    Itself,
    NoSuchCpu,
    /// CPU `i`'s whole MPIDR_EL1, bit 31 and all, where PSCI wants the affinity alone (its
    /// other bits zero): no CPU.
    RawMpidr(usize),
}

impl Target {
    /// The call's argument from CPU `caller`, and the CPU it names.
    fn arg(self, caller: usize) -> (u64, Option<usize>) {
        match self {
            Target::Cpu(i) => (affinity(i), Some(i)),
            Target::Itself => (affinity(caller), Some(caller)),
            Target::NoSuchCpu => (NO_SUCH_CPU, None),
            Target::RawMpidr(i) => (mpidr(i), None),
        }
    }
}

#[derive(Clone, Debug)]
enum Event {
    /// The CPU retires `n` instructions of the guest.
    Run {
        cpu: usize,
        n: u64,
    },
    /// An exit that is neither a phase's call nor a PSCI call: a trap, an interrupt, the
    /// wake-up a close sends.
    Exit {
        cpu: usize,
    },
    Begin {
        cpu: usize,
        flags: u64,
    },
    End {
        cpu: usize,
    },
    /// CPU_ON; `firmware_ok`: whether the firmware then starts the CPU.
    CpuOn {
        cpu: usize,
        target: Target,
        entry: u64,
        firmware_ok: bool,
    },
    /// A CPU whose CPU_ON was carried out enters the guest.
    Enter {
        cpu: usize,
    },
    CpuOff {
        cpu: usize,
    },
    AffinityInfo {
        cpu: usize,
        target: Target,
    },
    SystemOff {
        cpu: usize,
    },
}

/// A fake CPU as the hardware has it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Physical {
    Off,
    /// The firmware was asked to start it; it has not entered the guest yet.
    Starting,
    Running,
}

/// A CPU's monotonic counts: instructions retired, and the hypervisor's exit counters. What
/// the hypervisor keeps of a CPU as it joins (`counters_here`, and its trace starting), and
/// what a share is (the difference at its leaving).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Mark {
    retired: u64,
    counters: Counters,
}

impl Mark {
    fn since(&self, earlier: &Mark) -> Mark {
        Mark {
            retired: self.retired - earlier.retired,
            counters: self.counters.since(&earlier.counters),
        }
    }

    fn add(&mut self, o: &Mark) {
        self.retired += o.retired;
        self.counters.add(&o.counters);
    }
}

#[derive(Clone, Debug)]
struct FakeCpu {
    state: Physical,
    now: Mark,
    /// A window's open cleared its stage-2 root: with the kick, it exits before its next
    /// instruction.
    kicked: bool,
}

/// The open window (`hyp.window`), and what the test saw the decisions do with it.
struct OpenWindow {
    members: Window<Mark>,
    joined: Vec<bool>,
    share: Vec<Option<Mark>>,
    /// What each CPU retired, and the exits it took, while the window said it counted.
    as_member: Vec<Mark>,
    /// The CPU went off before it ever joined.
    off_unjoined: Vec<bool>,
}

/// A window whose figures went out.
#[derive(Debug)]
struct Finished {
    id: u32,
    /// The CPUs that handed in a share.
    members: Vec<usize>,
    total: Mark,
}

/// The hypervisor's rules around the decisions, each of which a machine may drop.
#[derive(Clone, Copy, Debug)]
struct Rules {
    /// A window's open makes every other CPU on exit before its next instruction
    /// (`stage2_roots::kick`). Without it a CPU may run on, and even close the window, before
    /// it ever exits.
    kick: bool,
    /// CPU_ON is refused while a phase is open (`psci::cpu_on`). Without it a CPU may go off
    /// and come back, or come up for the first time, inside a window.
    on_refused_in_phase: bool,
}

impl Rules {
    const HYPERVISOR: Self = Self {
        kick: true,
        on_refused_in_phase: true,
    };

    /// With both, every instruction any CPU runs while a window is open is the window's.
    fn whole(self) -> bool {
        self.kick && self.on_refused_in_phase
    }
}

struct Machine {
    rules: Rules,
    cpu: Vec<FakeCpu>,
    power: Cpus,
    phase_open: bool,
    window: Option<OpenWindow>,
    next_id: u32,
    system_off: bool,
    finished: Vec<Finished>,
    /// The answer to the last PSCI call: Ok with the CPU it starts or stops.
    answer: Option<Result<usize, Error>>,
}

impl Machine {
    fn new(cpus: usize, boot: usize, rules: Rules) -> Self {
        let mpidrs: Vec<u64> = (0..cpus).map(mpidr).collect();
        let mut cpu = vec![
            FakeCpu {
                state: Physical::Off,
                now: Mark::default(),
                kicked: false,
            };
            cpus
        ];
        cpu[boot].state = Physical::Running;
        Self {
            rules,
            cpu,
            power: Cpus::new(&mpidrs, boot),
            phase_open: false,
            window: None,
            next_id: 1,
            system_off: false,
            finished: Vec::new(),
            answer: None,
        }
    }

    fn len(&self) -> usize {
        self.cpu.len()
    }

    fn running(&self, c: usize) -> bool {
        self.cpu[c].state == Physical::Running
    }

    fn count(&self, s: Physical) -> usize {
        self.cpu.iter().filter(|c| c.state == s).count()
    }

    fn counting(&self, c: usize) -> bool {
        self.window.as_ref().is_some_and(|w| w.members.counting(c))
    }

    /// Applies one event, then checks the machine.
    fn step(&mut self, e: &Event) -> Check {
        if self.system_off {
            return Ok(());
        }
        let c = match *e {
            Event::Run { cpu, .. }
            | Event::Exit { cpu }
            | Event::Begin { cpu, .. }
            | Event::End { cpu }
            | Event::CpuOn { cpu, .. }
            | Event::Enter { cpu }
            | Event::CpuOff { cpu }
            | Event::AffinityInfo { cpu, .. }
            | Event::SystemOff { cpu } => cpu,
        };
        if let Event::Enter { .. } = e {
            self.enter(c)?;
            return self.check();
        }
        // A CPU that is off or still starting does nothing.
        if !self.running(c) {
            return Ok(());
        }
        // Every other event takes an instruction (a call is one): a kicked CPU's faults first.
        if self.rules.kick && self.cpu[c].kicked && !matches!(e, Event::Exit { .. }) {
            self.exit(c)?;
        }
        match *e {
            Event::Run { n, .. } => self.run(c, n)?,
            Event::Exit { .. } => self.exit(c)?,
            Event::Begin { flags, .. } => self.begin(c, flags)?,
            Event::End { .. } => self.end(c)?,
            Event::CpuOn {
                target,
                entry,
                firmware_ok,
                ..
            } => self.cpu_on(c, target, entry, firmware_ok)?,
            Event::CpuOff { .. } => self.cpu_off(c)?,
            Event::AffinityInfo { target, .. } => self.affinity_info(c, target)?,
            Event::SystemOff { .. } => {
                self.exit_begins(c);
                // The run ends here (`hyp.finish`), whoever else runs: the one way the
                // machine stops with CPUs on, or with a window's shares still out.
                self.system_off = true;
            }
            Event::Enter { .. } => unreachable!(),
        }
        self.check()
    }

    fn run(&mut self, c: usize, n: u64) -> Check {
        self.cpu[c].now.retired += n;
        let whole = self.rules.whole();
        if let Some(w) = &mut self.window {
            if w.members.counting(c) {
                w.as_member[c].retired += n;
            } else if whole && !w.members.closed() {
                // Every CPU on joins before its next instruction after the open, and none
                // comes on while the phase is open: nothing it runs in the window is missed.
                prop_assert!(
                    false,
                    "CPU {} retired {} instructions uncounted in open window {}",
                    c,
                    n,
                    w.members.id
                );
            }
        }
        Ok(())
    }

    /// An exit with nothing else to it.
    fn exit(&mut self, c: usize) -> Check {
        self.exit_begins(c);
        self.exit_ends(c, false)
    }

    /// The start of an exit (`exits::dispatch`): it is counted, as the window's too if the
    /// CPU counts in one. Whatever the exit, the kick has been taken.
    fn exit_begins(&mut self, c: usize) {
        self.cpu[c].now.counters.exits += 1;
        self.cpu[c].kicked = false;
        if let Some(w) = &mut self.window
            && w.members.counting(c)
        {
            w.as_member[c].counters.exits += 1;
        }
    }

    /// The end of an exit, after its handler (`window::at_exit`): the CPU joins the open
    /// window, or leaves one that closed or that it leaves by going off.
    fn exit_ends(&mut self, c: usize, going_off: bool) -> Check {
        let here = self.cpu[c].now;
        let Some(w) = &mut self.window else {
            return Ok(());
        };
        // Only a CPU that counts in a closed window has a share to hand in at an exit.
        prop_assert_eq!(
            w.members.must_leave(c),
            w.members.closed() && w.members.counting(c)
        );
        if w.members.counting(c) {
            if going_off || w.members.must_leave(c) {
                return self.leave(c);
            }
            return Ok(());
        }
        if going_off || w.members.closed() {
            if going_off && !w.joined[c] {
                w.off_unjoined[c] = true;
            }
            // The hypervisor does not ask; had it asked, the window would refuse: no CPU
            // joins after the close.
            if w.members.closed() {
                prop_assert!(!w.members.clone().join(c, || here));
            }
            return Ok(());
        }
        let joins = w.members.join(c, || here);
        // Every CPU joins at its first exit after the open, and joins once: one that left
        // (it went off) stays out.
        prop_assert_eq!(
            joins,
            !w.joined[c],
            "CPU {} at an exit of open window {}",
            c,
            w.members.id
        );
        if joins {
            w.joined[c] = true;
        }
        Ok(())
    }

    /// The CPU hands in its share (`window::leave`); the figures go out if it was the last.
    fn leave(&mut self, c: usize) -> Check {
        let now = self.cpu[c].now;
        let w = self.window.as_mut().expect("a window to leave");
        let Some(at_join) = w.members.leave(c) else {
            return Err(TestCaseError::fail(format!(
                "CPU {c} counted but had nothing to hand in"
            )));
        };
        let share = now.since(&at_join);
        prop_assert!(w.share[c].is_none(), "CPU {} handed in a second share", c);
        // Its share is what it retired, and the exits it took, from the exit it joined at
        // to the one it leaves at: nothing before, nothing after, nothing of another CPU.
        prop_assert_eq!(share, w.as_member[c], "CPU {}'s share", c);
        w.share[c] = Some(share);
        prop_assert_eq!(w.members.leave(c), None, "a share is handed in once");
        if w.members.done() {
            self.finish()?;
        }
        Ok(())
    }

    /// The window's figures go out (`window::finish`): the sums of the shares.
    fn finish(&mut self) -> Check {
        let w = self.window.take().expect("a window to finish");
        // Whole exactly when closed and the last CPU that joined has left.
        prop_assert!(w.members.closed() && w.members.done());
        prop_assert!((0..w.share.len()).all(|c| !w.members.counting(c)));
        let members: Vec<usize> = w.members.joined().collect();
        let handed: Vec<usize> = (0..w.share.len())
            .filter(|&c| w.share[c].is_some())
            .collect();
        prop_assert_eq!(
            &members,
            &handed,
            "every CPU that joined, and only those, handed in a share"
        );
        let mut total = Mark::default();
        let mut as_members = Mark::default();
        for c in 0..w.share.len() {
            total.add(&w.share[c].unwrap_or_default());
            as_members.add(&w.as_member[c]);
            // A CPU that went off before it joined is none of the window's (it cannot come
            // back before the close).
            if self.rules.on_refused_in_phase {
                prop_assert!(!(w.off_unjoined[c] && members.contains(&c)));
            }
        }
        // The window's figures: everything each CPU did while it counted, and nothing else.
        prop_assert_eq!(total, as_members);
        if let Some(last) = self.finished.last() {
            prop_assert!(last.id < w.members.id);
        }
        self.finished.push(Finished {
            id: w.members.id,
            members,
            total,
        });
        Ok(())
    }

    /// PHASE_BEGIN (`hypercall::phase_begin`, `phase::open`).
    fn begin(&mut self, c: usize, flags: u64) -> Check {
        self.exit_begins(c);
        if self.window.as_ref().is_some_and(|w| w.members.closed()) {
            // The last window's shares are not all in: the call runs again later, so that
            // windows never overlap.
            return self.exit_ends(c, false);
        }
        let (on, awake) = (self.power.on(), self.power.awake());
        let cpus = phase::Cpus {
            on,
            awake,
            instruments: false,
        };
        let id = self.next_id;
        match phase::check_begin(id.into(), flags, self.phase_open, cpus) {
            Ok(got) => {
                prop_assert_eq!(got, id);
                prop_assert!(!self.phase_open, "phases do not nest");
                prop_assert!(self.window.is_none(), "windows never overlap");
                // With other CPUs awake, only a phase that every CPU can count opens, and
                // none is still starting.
                if awake > 1 {
                    prop_assert_eq!(awake, on);
                    prop_assert!(flags & hc::PHASE_TRACED != 0);
                    prop_assert!(flags & hc::PHASE_REPEATABLE == 0);
                }
                self.next_id += 1;
                self.phase_open = true;
                if on > 1 {
                    self.open_window(c, id);
                }
            }
            Err(Refusal::AlreadyOpen) => prop_assert!(self.phase_open),
            Err(Refusal::OtherCpusOn(n)) => prop_assert!(n == awake && n > 1),
            Err(e) => prop_assert!(false, "PHASE_BEGIN refused: {:?}", e),
        }
        self.exit_ends(c, false)
    }

    /// `window::open`: the opener counts from here; every other CPU on is kicked.
    fn open_window(&mut self, opener: usize, id: u32) {
        let n = self.len();
        for c in (0..n).filter(|&c| c != opener && self.power.power(c) == Power::On) {
            self.cpu[c].kicked = true;
        }
        let mut joined = vec![false; n];
        joined[opener] = true;
        self.window = Some(OpenWindow {
            members: Window::open(id, n, opener, self.cpu[opener].now),
            joined,
            share: vec![None; n],
            as_member: vec![Mark::default(); n],
            off_unjoined: vec![false; n],
        });
    }

    /// PHASE_END (`phase::close`, `window::close`).
    fn end(&mut self, c: usize) -> Check {
        self.exit_begins(c);
        if self.phase_open {
            self.phase_open = false;
            if let Some(w) = &mut self.window {
                let counting: Vec<usize> = (0..self.cpu.len())
                    .filter(|&x| w.members.counting(x))
                    .collect();
                // The close names the CPUs still counting, for the hypervisor to wake.
                prop_assert_eq!(w.members.close(), counting.clone());
                if counting.contains(&c) {
                    self.leave(c)?;
                } else if w.members.done() {
                    // Closed by a CPU that is not counting, with nobody else counting.
                    self.finish()?;
                }
            }
        }
        self.exit_ends(c, false)
    }

    /// CPU_ON (`psci::cpu_on`, `smp::start`).
    fn cpu_on(&mut self, c: usize, target: Target, entry: u64, firmware_ok: bool) -> Check {
        self.exit_begins(c);
        let (arg, named) = target.arg(c);
        let refused = self.phase_open && self.rules.on_refused_in_phase;
        let r = if refused {
            Err(Error::Denied)
        } else {
            self.power.cpu_on(arg, entry, 0x5eed, |a| RAM.contains(&a))
        };
        self.answer = Some(r.map(|s| s.cpu));
        match r {
            Ok(start) => {
                prop_assert_eq!(Some(start.cpu), named, "the CPU the call named");
                // A CPU is started only when it is off: never one running or starting.
                prop_assert_eq!(self.cpu[start.cpu].state, Physical::Off);
                prop_assert!(entry.is_multiple_of(4) && RAM.contains(&entry));
                prop_assert_eq!((start.entry, start.context_id), (entry, 0x5eed));
                if firmware_ok {
                    self.cpu[start.cpu].state = Physical::Starting;
                } else {
                    // The firmware refused: the guest sees the CPU never came up.
                    self.power.started(start.cpu, false);
                }
            }
            Err(e) => {
                let want = if refused {
                    // A window counts the CPUs on at its open; one started inside it would
                    // run uncounted until its first exit.
                    Error::Denied
                } else {
                    match named.map(|i| self.cpu[i].state) {
                        None => Error::InvalidParameters,
                        Some(Physical::Running) => Error::AlreadyOn,
                        Some(Physical::Starting) => Error::OnPending,
                        Some(Physical::Off) => Error::InvalidAddress,
                    }
                };
                prop_assert_eq!(e, want, "CPU_ON {:?} at {:#x}", target, entry);
            }
        }
        self.exit_ends(c, false)
    }

    /// A started CPU enters the guest (`smp::secondary_main`).
    fn enter(&mut self, c: usize) -> Check {
        if self.cpu[c].state != Physical::Starting {
            return Ok(());
        }
        // CPU_ON is refused while a phase is open and no phase opens while a CPU is
        // starting: no CPU comes up inside a window still counting.
        if self.rules.on_refused_in_phase {
            prop_assert!(!self.phase_open);
            prop_assert!(self.window.as_ref().is_none_or(|w| w.members.closed()));
        }
        let pending = matches!(self.power.power(c), Power::OnPending { .. });
        prop_assert!(pending, "CPU {} entered without a CPU_ON", c);
        self.power.started(c, true);
        self.cpu[c].state = Physical::Running;
        self.cpu[c].kicked = false;
        Ok(())
    }

    /// CPU_OFF (`psci.rs`; the CPU leaves any window as it goes).
    fn cpu_off(&mut self, c: usize) -> Check {
        self.exit_begins(c);
        let others_on = self.power.on() - 1;
        let r = self.power.cpu_off(c);
        self.answer = Some(r.map(|()| c));
        match r {
            Ok(()) => {
                prop_assert!(others_on >= 1, "the last CPU on went off");
                self.exit_ends(c, true)?;
                self.cpu[c].state = Physical::Off;
                Ok(())
            }
            Err(e) => {
                prop_assert_eq!(e, Error::Denied);
                // The last CPU on stays on (one still starting may never come).
                prop_assert_eq!(others_on, 0);
                self.exit_ends(c, false)
            }
        }
    }

    fn affinity_info(&mut self, c: usize, target: Target) -> Check {
        self.exit_begins(c);
        let (arg, named) = target.arg(c);
        // What the hardware has; level 0 (one CPU) is the only level.
        let want = named
            .map(|i| match self.cpu[i].state {
                Physical::Off => AffinityState::Off,
                Physical::Starting => AffinityState::OnPending,
                Physical::Running => AffinityState::On,
            })
            .ok_or(Error::InvalidParameters);
        prop_assert_eq!(self.power.affinity_info(arg, 0), want);
        prop_assert_eq!(
            self.power.affinity_info(arg, 1),
            Err(Error::InvalidParameters)
        );
        self.exit_ends(c, false)
    }

    /// What holds between any two events.
    fn check(&self) -> Check {
        // The power decisions agree with the hardware, and something always runs until the
        // run is ended.
        let running = self.count(Physical::Running);
        prop_assert_eq!(self.power.on(), running);
        prop_assert_eq!(self.power.awake(), running + self.count(Physical::Starting));
        prop_assert!(running >= 1 || self.system_off, "no CPU running");
        if let Some(w) = &self.window {
            // The window is the phase's while it is open; after its close the phase is over.
            prop_assert_eq!(self.phase_open, !w.members.closed());
            for c in 0..self.len() {
                // A CPU counts from the exit it joined at to the one it left at.
                prop_assert_eq!(w.members.counting(c), w.joined[c] && w.share[c].is_none());
                // A CPU that goes off hands in its share as it goes.
                prop_assert!(!w.members.counting(c) || self.running(c));
                // A CPU that went off before it joined cannot come back before the close.
                if self.rules.on_refused_in_phase {
                    prop_assert!(!(w.off_unjoined[c] && w.joined[c]));
                }
            }
            // Its figures went out the moment they were whole: a window still here is not.
            prop_assert!(!w.members.done());
            prop_assert!(!w.members.closed() || (0..self.len()).any(|c| self.counting(c)));
        }
        Ok(())
    }

    /// Ends what the events left open: a running CPU closes the phase, then each CPU still
    /// counting takes one exit. The figures must then be whole.
    fn drain(&mut self) -> Check {
        if self.system_off {
            return Ok(());
        }
        if self.phase_open {
            let c = (0..self.len())
                .find(|&c| self.running(c))
                .expect("a CPU running");
            self.step(&Event::End { cpu: c })?;
        }
        for c in 0..self.len() {
            if self.counting(c) {
                self.step(&Event::Exit { cpu: c })?;
            }
        }
        prop_assert!(
            self.window.is_none(),
            "every CPU that counted took its exit after the close: the figures are whole"
        );
        Ok(())
    }
}

fn target(cpus: usize) -> impl Strategy<Value = Target> {
    prop_oneof![
        6 => (0..cpus).prop_map(Target::Cpu),
        1 => Just(Target::Itself),
        1 => Just(Target::NoSuchCpu),
        1 => (0..cpus).prop_map(Target::RawMpidr),
    ]
}

fn event(cpus: usize) -> impl Strategy<Value = Event> {
    let cpu = 0..cpus;
    let flags = prop_oneof![
        6 => Just(hc::PHASE_TRACED),
        1 => Just(hc::PHASE_TRACED | hc::PHASE_REPEATABLE),
        1 => Just(0),
    ];
    // Mostly an aligned entry in RAM; else a misaligned one, or one outside RAM.
    let entry = prop_oneof![8 => Just(ENTRY), 1 => Just(ENTRY + 2), 1 => Just(RAM.end)];
    prop_oneof![
        6 => (cpu.clone(), 1..100u64).prop_map(|(cpu, n)| Event::Run { cpu, n }),
        4 => cpu.clone().prop_map(|cpu| Event::Exit { cpu }),
        2 => (cpu.clone(), flags).prop_map(|(cpu, flags)| Event::Begin { cpu, flags }),
        2 => cpu.clone().prop_map(|cpu| Event::End { cpu }),
        3 => (cpu.clone(), target(cpus), entry, prop::bool::weighted(0.9)).prop_map(
            |(cpu, target, entry, firmware_ok)| Event::CpuOn { cpu, target, entry, firmware_ok }
        ),
        3 => cpu.clone().prop_map(|cpu| Event::Enter { cpu }),
        1 => cpu.clone().prop_map(|cpu| Event::CpuOff { cpu }),
        1 => (cpu, target(cpus)).prop_map(|(cpu, target)| Event::AffinityInfo { cpu, target }),
    ]
}

/// Half the machines keep the hypervisor's rules; the others drop one, or both.
fn rules() -> impl Strategy<Value = Rules> {
    prop_oneof![
        1 => Just(Rules::HYPERVISOR),
        1 => (any::<bool>(), any::<bool>()).prop_map(|(kick, on_refused_in_phase)| Rules {
            kick,
            on_refused_in_phase,
        }),
    ]
}

/// A machine of 1 to 8 CPUs booted on any of them, with its rules, and the events it goes
/// through: first the boot CPU starts some of the others (so that windows have CPUs to
/// count), then anything; sometimes a SYSTEM_OFF somewhere among them.
fn scenario() -> impl Strategy<Value = (usize, usize, Rules, Vec<Event>)> {
    (1..=8usize).prop_flat_map(|cpus| {
        (
            Just(cpus),
            0..cpus,
            rules(),
            prop::collection::vec(prop::bool::weighted(0.7), cpus),
            prop::collection::vec(event(cpus), 0..150),
            prop::option::weighted(0.1, (any::<prop::sample::Index>(), 0..cpus)),
        )
            .prop_map(|(cpus, boot, rules, up, events, off)| {
                let mut all = Vec::new();
                for i in (0..cpus).filter(|&i| i != boot && up[i]) {
                    all.push(Event::CpuOn {
                        cpu: boot,
                        target: Target::Cpu(i),
                        entry: ENTRY,
                        firmware_ok: true,
                    });
                    all.push(Event::Enter { cpu: i });
                }
                all.extend(events);
                if let Some((at, cpu)) = off {
                    let at = at.index(all.len() + 1);
                    all.insert(at, Event::SystemOff { cpu });
                }
                (cpus, boot, rules, all)
            })
    })
}

proptest! {
    // Failures are kept beside this file, where proptest puts them anyway after warning
    // that a test target has no lib.rs.
    #![proptest_config(ProptestConfig {
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource(
            "proptest-regressions"
        ))),
        ..ProptestConfig::default()
    })]

    /// Whatever the order of runs, exits, phase calls and PSCI calls on up to eight CPUs:
    /// every check of [`Machine`] holds after every event, and once the phase is closed and
    /// each CPU still counting has taken one exit, the window's figures are out.
    #[test]
    fn windows_and_psci_in_any_order_on_several_cpus(
        (cpus, boot, rules, events) in scenario()
    ) {
        let mut m = Machine::new(cpus, boot, rules);
        m.check()?;
        for e in &events {
            m.step(e)?;
        }
        m.drain()?;
    }
}

/// A machine of `cpus` CPUs, booted on CPU 0, whose boot CPU starts CPUs `up`.
fn machine(cpus: usize, rules: Rules, up: &[usize]) -> Machine {
    let mut m = Machine::new(cpus, 0, rules);
    for &i in up {
        m.go(&Event::CpuOn {
            cpu: 0,
            target: Target::Cpu(i),
            entry: ENTRY,
            firmware_ok: true,
        });
        m.go(&Event::Enter { cpu: i });
    }
    m
}

impl Machine {
    /// One event, every check holding.
    fn go(&mut self, e: &Event) {
        if let Err(why) = self.step(e) {
            panic!("after {e:?}: {why}");
        }
    }

    fn runs(&mut self, cpu: usize, n: u64) {
        self.go(&Event::Run { cpu, n });
    }

    fn exits(&mut self, cpu: usize) {
        self.go(&Event::Exit { cpu });
    }

    fn begins(&mut self, cpu: usize) {
        self.go(&Event::Begin {
            cpu,
            flags: hc::PHASE_TRACED,
        });
    }

    fn ends(&mut self, cpu: usize) {
        self.go(&Event::End { cpu });
    }

    fn psci(&mut self, e: Event) -> Result<usize, Error> {
        self.answer = None;
        self.go(&e);
        self.answer.take().expect("a PSCI call answered")
    }
}

fn cpu_on(cpu: usize, target: Target) -> Event {
    Event::CpuOn {
        cpu,
        target,
        entry: ENTRY,
        firmware_ok: true,
    }
}

#[test]
fn a_window_closed_by_a_cpu_that_never_joined() {
    // Without the kick, CPU 2 runs on after the open and closes the window at its first
    // exit: what it ran is not the window's, and the two CPUs still counting hand in theirs.
    let mut m = machine(
        3,
        Rules {
            kick: false,
            ..Rules::HYPERVISOR
        },
        &[1, 2],
    );
    m.begins(0);
    m.exits(1);
    m.runs(0, 10);
    m.runs(1, 20);
    m.runs(2, 30);
    m.ends(2);
    assert!(m.counting(0) && m.counting(1) && !m.counting(2));
    m.runs(1, 5);
    m.exits(1);
    assert!(m.window.is_some(), "CPU 0 has not handed in its share");
    m.exits(0);
    assert!(m.window.is_none());
    let w = &m.finished[0];
    assert_eq!(
        (w.id, &w.members[..], w.total.retired),
        (1, &[0, 1][..], 35)
    );
}

#[test]
fn the_opener_goes_off_and_the_last_member_closes() {
    let mut m = machine(2, Rules::HYPERVISOR, &[1]);
    m.begins(0);
    // Kicked, CPU 1 exits (and joins) before it runs anything.
    m.runs(1, 7);
    m.runs(0, 3);
    assert_eq!(m.psci(Event::CpuOff { cpu: 0 }), Ok(0));
    m.ends(1);
    let w = &m.finished[0];
    assert_eq!((&w.members[..], w.total.retired), (&[0, 1][..], 10));
    // CPU 1 is the last one on.
    assert_eq!(m.psci(Event::CpuOff { cpu: 1 }), Err(Error::Denied));
}

#[test]
fn a_phase_begin_while_shares_are_out_waits_for_the_last() {
    let mut m = machine(2, Rules::HYPERVISOR, &[1]);
    m.begins(0);
    m.exits(1);
    m.ends(0);
    assert!(m.counting(1));
    // Retried: no phase opens, and the window is the first one still.
    m.begins(0);
    assert!(!m.phase_open && m.next_id == 2);
    m.runs(1, 4);
    m.exits(1);
    assert_eq!(m.finished[0].total.retired, 4);
    m.begins(0);
    assert!(m.phase_open && m.window.as_ref().is_some_and(|w| w.members.id == 2));
}

#[test]
fn psci_calls_in_hostile_orders() {
    let mut m = machine(3, Rules::HYPERVISOR, &[]);
    assert_eq!(
        m.psci(cpu_on(0, Target::Itself)),
        Err(Error::AlreadyOn),
        "itself"
    );
    for nobody in [Target::NoSuchCpu, Target::RawMpidr(1)] {
        assert_eq!(m.psci(cpu_on(0, nobody)), Err(Error::InvalidParameters));
    }
    assert_eq!(
        m.psci(Event::CpuOff { cpu: 0 }),
        Err(Error::Denied),
        "the last"
    );
    assert_eq!(m.psci(cpu_on(0, Target::Cpu(1))), Ok(1));
    assert_eq!(m.psci(cpu_on(0, Target::Cpu(1))), Err(Error::OnPending));
    // CPU 1 may never come: CPU 0 is still the last one on.
    assert_eq!(m.psci(Event::CpuOff { cpu: 0 }), Err(Error::Denied));
    m.go(&Event::Enter { cpu: 1 });
    assert_eq!(m.psci(cpu_on(0, Target::Cpu(1))), Err(Error::AlreadyOn));
    // Inside a window, CPU 1 goes off; neither it nor CPU 2 comes on before the close.
    m.begins(0);
    assert_eq!(m.psci(Event::CpuOff { cpu: 1 }), Ok(1));
    assert_eq!(m.psci(cpu_on(0, Target::Cpu(1))), Err(Error::Denied));
    assert_eq!(m.psci(cpu_on(0, Target::Cpu(2))), Err(Error::Denied));
    m.ends(0);
    assert_eq!(m.finished[0].members, [0, 1]);
    assert_eq!(m.psci(cpu_on(0, Target::Cpu(2))), Ok(2));
    m.go(&Event::Enter { cpu: 2 });
    // The run ends with CPUs 0 and 2 running, inside a window that never ends.
    m.begins(2);
    m.go(&Event::SystemOff { cpu: 0 });
    assert!(m.system_off && m.window.is_some() && m.finished.len() == 1);
}
