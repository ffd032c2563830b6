//! What the hypervisor keeps between guest exits.

use crate::pmu::Pmu;
use crate::report::Reporter;
use crate::trace::Tracer;
use mtex_platform::guest_vm::GuestRam;
use mtex_trace::predicate::Controls;

pub use mtex_vm::counters::Counters;

/// What belongs to one CPU of the guest: the registers it has of its own (its MTE controls
/// as the step engine sees them, the shadows of its PMSELR_EL0 and debug registers), its step
/// engine and the exits it took.
pub struct Vcpu {
    pub counters: Counters,
    /// The CPU's MTE controls as the step engine's predicate uses them: read back after each
    /// write the full path emulates, and from the registers when a traced phase starts (the
    /// trap fast path, off in traced phases, does not keep them).
    pub controls: Controls,
    /// The step engine (active while a traced phase is open on this CPU).
    pub tracer: Tracer,
    /// The guest's PMSELR_EL0 (its PMU is emulated: `pmu.rs`).
    pub guest_pmu: crate::pmu::GuestPmuState,
    /// The guest's debug registers (a shadow: `debug.rs`).
    pub guest_debug: mtex_arch::GuestDebug,
    /// This CPU's copy of stage 2's root (`stage2_roots`), and whether another CPU cleared
    /// it to make this one exit (it is restored at that exit).
    pub s2_root: u64,
    pub kicked: bool,
}

/// A CPU's state, made once and never freed (a CPU keeps it over power-ups), owned by `Hyp`.
#[derive(Clone, Copy)]
pub struct VcpuPtr(*mut Vcpu);

// SAFETY: the pointee is reached only through `Hyp`, whose lock serialises every use of it
// on any CPU, as it does the rest of `Hyp`'s fields.
unsafe impl Send for VcpuPtr {}

impl VcpuPtr {
    const NONE: Self = Self(core::ptr::null_mut());

    fn new(c: TracerConfig) -> Self {
        Self(alloc::boxed::Box::leak(alloc::boxed::Box::new(Vcpu::new(
            c,
        ))))
    }
}

/// How every CPU's step engine is made: from the run's options, and set up as the boot
/// CPU's was (`Hyp::new_vcpu`).
#[derive(Clone, Copy)]
pub struct TracerConfig {
    pub guest_ram: GuestRam,
    pub block_granules: mtex_trace::counts::BlockGranules,
    pub runs: bool,
    pub step: mtex_abi::options::StepMode,
    /// Linux mode: physical interrupts go to the guest.
    pub irqs_to_guest: bool,
}

impl Vcpu {
    pub fn new(c: TracerConfig) -> Self {
        let mut tracer = Tracer::new(c.guest_ram, c.block_granules, c.runs, c.step);
        if c.irqs_to_guest {
            tracer.set_irqs_to_guest();
        }
        Self {
            counters: Counters::default(),
            controls: Controls {
                sctlr_el1: mtex_abi::program::SCTLR_EL1_AT_ENTRY,
                tcr_el1: mtex_abi::program::TCR_EL1_AT_ENTRY,
                hcr_ata: true,
                features: mte_features(),
            },
            tracer,
            guest_pmu: Default::default(),
            guest_debug: Default::default(),
            s2_root: 0,
            kicked: false,
        }
    }
}

pub struct Hyp {
    pub report: Reporter,
    pub phase: Option<crate::phase::OpenPhase>,
    pub pmu: Option<Pmu>,
    pub watchdog_ms: u64,
    /// `mtex.step=fast`: the trap fast path may run (outside traced phases).
    fast_traps: bool,
    /// Each CPU's own state, by its index among the machine's CPUs: the boot CPU's from the
    /// start, another's from its first power-up (null until then). Each CPU's fast-path
    /// block names its own, for [`Hyp::vcpu`].
    vcpus: alloc::vec::Vec<VcpuPtr>,
    pub tracer_config: TracerConfig,
    /// The CPU whose step engine holds the per-PC table and call stacks (`mtex.profile`,
    /// `mtex.stacks`): the boot CPU's, then each CPU's that starts a traced phase.
    instruments_at: Option<usize>,
    /// The run the last phase belonged to, for a PHASE_AGAIN (`mtex_abi::runs`), and the
    /// serial number the next run takes.
    pub last_run: Option<mtex_abi::runs::LastRun>,
    pub next_run: u32,
    /// The MSR TCO sites watched in untraced passes.
    pub tco: crate::tco_watch::Watcher,
    /// Passes the open run's TCO watch takes (after its PMU passes).
    pub run_tco_passes: u8,
    /// Linux mode: the doorbell page opens and closes trace windows.
    pub linux: bool,
    /// Where the doorbell page is (Linux modes): `DOORBELL_IPA`, or installed under the
    /// firmware the page the loader reserved.
    pub doorbell_ipa: u64,
    /// While a phase opened with PHASE_GUARDED is open: the only calls taken, from where,
    /// the memory kept read-only, and the harness's iterations so far.
    pub call_guard: Option<mtex_vm::guard::Guard>,
    /// The machine's CPUs (MPIDR_EL1 values), which are the guest's, and their power states
    /// under the guest's PSCI calls.
    pub machine_cpus: alloc::vec::Vec<u64>,
    pub cpus: mtex_vm::power::Cpus,
    /// Each secondary CPU's EL2 stack top and fast-path block (addresses), once it has been
    /// started.
    pub cpu_homes: alloc::vec::Vec<Option<crate::smp::CpuHome>>,
    /// The CPU the hypervisor booted on, and its fast-path block (its home, until it goes
    /// off and is started again).
    pub boot_cpu: usize,
    pub boot_block: u64,
    /// The guest's RAM, where a CPU_ON's entry point must be.
    pub guest_ram: GuestRam,
    /// A window that every CPU counts, from its open until the last CPU has left it.
    pub window: Option<crate::phase::window::AllCpus>,
    /// `mtex.sample`: traced phases are sampled (`crate::phase::sample`), each CPU on its own
    /// schedule, whose sampler is here by its index (`Hyp::sampler`).
    pub sample: Option<mtex_abi::options::SampleOptions>,
    samplers: alloc::vec::Vec<mtex_vm::sample::Sampler>,
}

impl Hyp {
    pub fn new(
        report: Reporter,
        pmu: Option<Pmu>,
        watchdog_ms: u64,
        guest_ram: GuestRam,
        block_granules: mtex_trace::counts::BlockGranules,
        runs: bool,
        step: mtex_abi::options::StepMode,
    ) -> Self {
        let tracer_config = TracerConfig {
            guest_ram,
            block_granules,
            runs,
            step,
            irqs_to_guest: false,
        };
        let mut hyp = Self {
            report,
            phase: None,
            pmu,
            watchdog_ms,
            fast_traps: step == mtex_abi::options::StepMode::Fast,
            // The boot CPU's, until the machine's CPUs are known (`set_cpus`).
            vcpus: alloc::vec![VcpuPtr::new(tracer_config)],
            tracer_config,
            instruments_at: None,
            last_run: None,
            next_run: 1,
            call_guard: None,
            // Off until the boot sets it (`mtex.tco_watch`, with the image's place).
            tco: crate::tco_watch::Watcher::new(false, guest_ram, (0, 0)),
            run_tco_passes: 0,
            linux: false,
            doorbell_ipa: mtex_abi::doorbell::DOORBELL_IPA,
            machine_cpus: alloc::vec::Vec::new(),
            cpu_homes: alloc::vec::Vec::new(),
            boot_cpu: 0,
            boot_block: 0,
            cpus: mtex_vm::power::Cpus::new(&[0], 0),
            guest_ram,
            window: None,
            sample: None,
            samplers: alloc::vec::Vec::new(),
        };
        crate::fast_step::set_this_cpu(0, hyp.vcpus[0].0);
        // Made at set-up, as every CPU's: a CPU's first traced phase does not pay for them.
        assert!(
            hyp.vcpu().tracer.make_tables(),
            "memory for the boot CPU's run tables"
        );
        hyp.sync_fast_traps();
        hyp
    }

    /// The machine's CPUs (MPIDR affinities) and which of them booted: its state becomes
    /// that CPU's. Once, at boot.
    pub fn set_cpus(&mut self, mpidrs: &[u64], boot: usize) {
        let boot_vcpu = self.vcpus[0];
        self.machine_cpus = mpidrs.to_vec();
        self.cpus = mtex_vm::power::Cpus::new(mpidrs, boot);
        self.cpu_homes = alloc::vec![None; mpidrs.len()];
        self.vcpus = alloc::vec![VcpuPtr::NONE; mpidrs.len()];
        self.vcpus[boot] = boot_vcpu;
        crate::fast_step::set_this_cpu(boot, boot_vcpu.0);
        self.boot_block = arm_sysregs::el2::accessors::read_tpidr_el2().bits();
        self.boot_cpu = boot;
        // The boot CPU walks its own copy of stage 2's root, as every CPU does.
        let root = crate::stage2_roots::new_root().expect("memory for the boot CPU's root");
        self.vcpu().s2_root = root;
        crate::stage2_roots::use_root(root);
    }

    /// Traced phases are sampled on `sample`'s schedule, each CPU's with its own seed
    /// (`mtex_vm::sample::for_cpu`). Once, at boot (after `set_cpus`).
    pub fn set_sampling(&mut self, sample: Option<mtex_abi::options::SampleOptions>) {
        self.sample = sample;
        self.samplers = match sample {
            Some(s) => (0..self.machine_cpus.len().max(1))
                .map(|c| mtex_vm::sample::Sampler::new(mtex_vm::sample::for_cpu(s, c)))
                .collect(),
            None => alloc::vec::Vec::new(),
        };
    }

    /// This CPU's sampler, when traced phases are sampled.
    pub fn sampler(&mut self) -> Option<&mut mtex_vm::sample::Sampler> {
        let me = self.this_cpu();
        self.samplers.get_mut(me)
    }

    /// This CPU's index among the machine's.
    #[inline(always)]
    pub fn this_cpu(&self) -> usize {
        crate::fast_step::this_cpu_index()
    }

    /// Marks CPU `cpu` as made to exit by another (its root is being cleared: `kicked`) and
    /// returns its root; None if its state has not been made.
    pub fn kick_vcpu(&mut self, cpu: usize) -> Option<u64> {
        let v = self.vcpus.get(cpu)?.0;
        if v.is_null() {
            return None;
        }
        // SAFETY: another CPU's state, made and never freed. Only its `kicked` and `s2_root`
        // are touched, through the pointer, with no reference to the whole: that CPU may be
        // in its step engine without this lock (`own_step_parts`), which never touches
        // these two; everything else that reads them holds this lock, as the caller does.
        unsafe {
            (*v).kicked = true;
            Some((*v).s2_root)
        }
    }

    /// This CPU's counters with the single-step exits its fast path handled and the time it
    /// waited for this state's lock: what a CPU's share of a window is measured by (on this
    /// CPU's exit only: the block is its own).
    pub fn counters_here(&mut self) -> Counters {
        let fast_steps = crate::fast_step::this_cpu().steps;
        let c = self.vcpu().counters;
        Counters {
            step_exits: c.step_exits + fast_steps,
            lock_wait_ticks: crate::fast_step::lock_wait_ticks(),
            ..c
        }
    }

    /// The per-PC table or call stacks are kept (`mtex.profile`): they follow one CPU.
    pub fn has_instruments(&self) -> bool {
        self.instruments_at.is_some()
    }

    /// Keeps every traced phase's counts by PC (`mtex.profile`) in a table of `slots`, and
    /// with `stacks` the kernel's call stacks. Once, at boot (after `set_cpus`).
    pub fn enable_profile(&mut self, slots: usize, stacks: bool) {
        let tracer = &mut self.vcpu().tracer;
        tracer.enable_profile(slots);
        if stacks {
            tracer.enable_stacks();
        }
        self.instruments_at = Some(self.this_cpu());
    }

    /// The state of the CPU holding the hypervisor's state (the one whose exit this is).
    #[inline(always)]
    pub fn vcpu(&mut self) -> &mut Vcpu {
        self.vcpu_and_report().0
    }

    /// [`Hyp::vcpu`], and the report channel beside it.
    #[inline(always)]
    pub fn vcpu_and_report(&mut self) -> (&mut Vcpu, &mut Reporter) {
        let v = crate::fast_step::this_vcpu();
        assert!(!v.is_null(), "a CPU without its state");
        // SAFETY: this CPU's block names its state, which lives as long as `Hyp` and is
        // reached only through it (so `&mut self` makes the reference exclusive).
        (unsafe { &mut *v }, &mut self.report)
    }

    /// This CPU's counters, step engine and MTE controls, for a step exit taken without the
    /// state's lock (`exits::step_alone`); None if its state has not been made.
    ///
    /// # Safety
    ///
    /// The caller does not hold the state's lock and ends its use of these references
    /// before it next takes it. No other CPU reaches these three fields of this CPU's state:
    /// other CPUs touch only its `kicked` and `s2_root` (`kick_vcpu`) — except when the
    /// per-PC instruments move between CPUs (`start_trace_here`), which the caller must
    /// have excluded.
    pub unsafe fn own_step_parts<'a>() -> Option<(&'a mut Counters, &'a mut Tracer, &'a Controls)> {
        let v = crate::fast_step::this_vcpu();
        if v.is_null() {
            return None;
        }
        // SAFETY: this CPU's state, made and never freed; the three disjoint fields are
        // reached by place, not through a reference to the whole state, and per this
        // function's contract nothing else references them meanwhile.
        unsafe {
            Some((
                &mut *core::ptr::addr_of_mut!((*v).counters),
                &mut *core::ptr::addr_of_mut!((*v).tracer),
                &*core::ptr::addr_of!((*v).controls),
            ))
        }
    }

    /// `cpu`'s state, made with the boot CPU's set-up (None without the memory for it). A
    /// CPU keeps it over power-ups: its counters run on over the run.
    pub fn prepare_vcpu(&mut self, cpu: usize) -> Option<*mut Vcpu> {
        if self.vcpus[cpu].0.is_null() {
            use alloc::alloc::{Layout, alloc};
            // SAFETY: a layout of non-zero size; written below before any use.
            let v = unsafe { alloc(Layout::new::<Vcpu>()) }.cast::<Vcpu>();
            if v.is_null() {
                return None;
            }
            let root = crate::stage2_roots::new_root()?;
            // SAFETY: fresh memory for one Vcpu; never freed (`VcpuPtr`).
            unsafe {
                v.write(Vcpu {
                    s2_root: root,
                    ..Vcpu::new(self.tracer_config)
                })
            };
            // The run tables too, now: a CPU the heap has no room for is refused at CPU_ON,
            // never stopped short when a window reaches it.
            // SAFETY: just written; nothing else references it yet.
            if !unsafe { (*v).tracer.make_tables() } {
                return None;
            }
            self.vcpus[cpu] = VcpuPtr(v);
        }
        Some(self.vcpus[cpu].0)
    }

    /// The trap fast path runs with `mtex.step=fast` on this CPU while it traces nothing: in
    /// a traced phase the step engine must see every exit. Each CPU's path is its own: its
    /// ring holds its writes in its own phase (`Reporter::set_phase`), and is framed by its
    /// own exits, or at the run's end by the CPU that ends it (`Reporter::drain_other`).
    pub fn sync_fast_traps(&mut self) {
        let on = self.fast_traps && !self.vcpu().tracer.active();
        crate::fast_step::this_cpu().set_fast_traps(on);
    }

    /// Starts tracing phase `id` (see `Tracer::start`, whose result this returns): the
    /// controls the predicate uses are what the registers hold (the fast path may have
    /// written them since the last traced phase), and the trap fast path is off.
    pub fn start_trace(&mut self, id: u32) -> bool {
        self.start_trace_here(id, true)
    }

    /// [`Hyp::start_trace`]; with `instruments` false the per-PC table and call stacks stay
    /// where they are (a CPU joining a window that every CPU counts, which has none).
    pub fn start_trace_here(&mut self, id: u32, instruments: bool) -> bool {
        use arm_sysregs::el1::accessors::{read_sctlr_el1, read_tcr_el1};
        // The per-PC table and call stacks go to the CPU that traces.
        let me = self.this_cpu();
        if let Some(at) = self.instruments_at
            && instruments
            && at != me
        {
            let (from, to) = (self.vcpus[at].0, self.vcpus[me].0);
            // SAFETY: two CPUs' states (at != me, both made: each traced or holds the
            // instruments), owned by `Hyp` and reached only under its lock, held here.
            unsafe { (*from).tracer.hand_instruments_to(&mut (*to).tracer) };
            self.instruments_at = Some(me);
        }
        let pmu = self.pmu;
        let v = self.vcpu();
        v.controls.sctlr_el1 = read_sctlr_el1().bits();
        v.controls.tcr_el1 = read_tcr_el1().bits();
        let ok = v.tracer.start(id);
        // The guest's counters of the MTE events count from here, if it is traced whole.
        if let Some(pmu) = pmu
            && !v.tracer.in_unit()
        {
            pmu.start_traced(&mut v.guest_pmu);
        }
        self.sync_fast_traps();
        ok
    }

    /// Stops tracing (`Tracer::stop`); the trap fast path may run again.
    pub fn stop_trace(
        &mut self,
        ctx: &mut crate::context::GuestContext,
    ) -> (
        mtex_trace::counts::TraceCounts,
        impl IntoIterator<Item = Option<mtex_abi::report::TcoSite>> + use<>,
    ) {
        let pmu = self.pmu;
        let cpu = self.this_cpu() as u32;
        let v = self.vcpu();
        let phase = v.tracer.phase();
        let r = v.tracer.stop(ctx);
        if let Some(pmu) = pmu
            && let Some(view) = pmu.guest_events()
            && let Some(counted) = pmu.stop_traced(&mut v.guest_pmu, &r.0)
        {
            self.report.send(&mtex_abi::Record::GuestPmuCounted(
                mtex_abi::report::GuestPmuCounted {
                    phase,
                    cpu,
                    view,
                    counted,
                },
            ));
        }
        crate::pmu::send_news(self, ctx.state());
        self.sync_fast_traps();
        r
    }

    /// Id of the open phase, 0 when none.
    #[inline(always)]
    pub fn phase_id(&self) -> u32 {
        self.phase.as_ref().map_or(0, |p| p.id)
    }

    /// Ends the run: a traced phase still open sends the counts it has so far (the host shows
    /// them as a phase that never ended, with where it stopped), then the Summary.
    pub fn finish(&mut self, exit: mtex_abi::report::ExitReason) -> ! {
        // The dying path may come from a CPU whose state is not set up: no partial phase.
        let has_state = !crate::fast_step::this_vcpu().is_null();
        // A window that every CPU counts has only this CPU's share here: none is sent as
        // the window's (the host shows a window that never ended).
        if has_state && crate::phase::sample::unit_cut_short(self) {
            // A sampled phase's unit: sent as what it is, never as the phase's counts.
        } else if has_state
            && self.window.is_none()
            && let (v, report) = self.vcpu_and_report()
            && let Some((id, counts)) = v.tracer.partial()
        {
            report.send(&mtex_abi::Record::PhaseTrace(
                mtex_abi::report::PhaseTrace { id, counts },
            ));
            crate::phase::send_trace_more(report, id, &counts, true);
            // The branches it executed for the guest are in the counts: the host takes them
            // out of its PMU and oracle checks, as for a phase that ended.
            report.send(&mtex_abi::Record::StepEngine(v.tracer.engine()));
            v.tracer.send_profile(id, report);
        }
        // A guarded phase that never ended: the iterations its harness made up to here.
        if let Some(g) = self.call_guard.take() {
            self.report
                .send(&mtex_abi::Record::PhaseIterations(g.iterations()));
        }
        // The writes other CPUs queued and nobody framed: theirs, in their phases.
        let me = self.this_cpu();
        let others = self
            .cpu_homes
            .iter()
            .enumerate()
            .filter(|&(c, _)| c != me)
            .filter_map(|(c, home)| match home {
                Some(h) => Some(h.block()),
                None if c == self.boot_cpu && self.boot_block != 0 => Some(self.boot_block),
                None => None,
            })
            .map(|b| b as *const crate::fast_step::FastStep)
            .collect::<alloc::vec::Vec<_>>();
        self.report.finish(exit, others.into_iter())
    }
}

/// The MTE features the predicate may use, from the ID registers (EL2 reads the real ones).
fn mte_features() -> mtex_trace::predicate::MteFeatures {
    // ID_AA64PFR1_EL1 is (3, 0, 0, 4, 1), ID_AA64PFR2_EL1 (3, 0, 0, 4, 2): zero on CPUs older
    // than the register.
    mtex_trace::predicate::MteFeatures::from_id_regs(
        crate::id_regs::read(4, 1),
        crate::id_regs::read(4, 2),
    )
}
