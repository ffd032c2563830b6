//! What the hypervisor keeps between guest exits.

use crate::pmu::Pmu;
use crate::report::Reporter;
use crate::trace::Tracer;
use mtex_abi::report::PhaseStats;
use mtex_dt::Region;
use mtex_trace::predicate::Controls;

/// Event counts over the whole run; a phase's figures are the difference between its end
/// and its begin.
#[derive(Clone, Copy, Default)]
pub struct Counters {
    /// Exits other than single-step exits.
    pub exits: u64,
    pub step_exits: u64,
    pub exits_with_tco: u64,
    pub sysreg_writes: u64,
    /// Virtual interrupts injected (the guest's timer).
    pub virqs: u64,
}

/// The phase the guest has open.
pub struct OpenPhase {
    pub id: u32,
    pub at_begin: Counters,
    pub pmu_at_begin: Option<[u64; 3]>,
    pub flush_at_begin: u64,
}

pub struct Hyp {
    pub report: Reporter,
    pub counters: Counters,
    pub phase: Option<OpenPhase>,
    pub pmu: Option<Pmu>,
    pub watchdog_ms: u64,
    /// The guest's MTE controls as last written (read back after each emulated write).
    pub controls: Controls,
    /// The step engine (active while a traced phase is open).
    pub tracer: Tracer,
}

impl Hyp {
    pub fn new(
        report: Reporter,
        pmu: Option<Pmu>,
        watchdog_ms: u64,
        guest_ram: [Region; 2],
        block_granules: mtex_trace::counts::BlockGranules,
        runs: bool,
    ) -> Self {
        Self {
            report,
            counters: Counters::default(),
            phase: None,
            pmu,
            watchdog_ms,
            controls: Controls {
                sctlr_el1: mtex_abi::program::SCTLR_EL1_AT_ENTRY,
                tcr_el1: mtex_abi::program::TCR_EL1_AT_ENTRY,
                hcr_ata: true,
                features: mte_features(),
            },
            tracer: Tracer::new(guest_ram, block_granules, runs),
        }
    }

    /// Id of the open phase, 0 when none.
    #[inline(always)]
    pub fn phase_id(&self) -> u32 {
        self.phase.as_ref().map_or(0, |p| p.id)
    }

    /// The run's counters, with the single-step exits the fast path handled.
    fn counters_now(&self) -> Counters {
        // SAFETY: called with the hypervisor state borrowed (hypercall handlers).
        let fast_steps = unsafe { crate::fast_step::fast() }.steps;
        Counters {
            step_exits: self.counters.step_exits + fast_steps,
            ..self.counters
        }
    }

    /// Opens phase `id` at this point of the run.
    pub fn begin_phase(&mut self, id: u32) {
        let pmu_at_begin = self.pmu.as_ref().map(Pmu::read);
        self.phase = Some(OpenPhase {
            id,
            at_begin: self.counters_now(),
            pmu_at_begin,
            flush_at_begin: self.report.flush_instructions,
        });
    }

    /// Closes the open phase and returns its figures.
    pub fn end_phase(&mut self) -> Option<(u32, PhaseStats)> {
        let p = self.phase.take()?;
        let now = self.pmu.as_ref().map(Pmu::read);
        let delta = |i: usize| match (p.pmu_at_begin, now) {
            (Some(a), Some(b)) => Some(b[i].wrapping_sub(a[i])),
            _ => None,
        };
        let c = self.counters_now();
        Some((
            p.id,
            PhaseStats {
                exits: c.exits - p.at_begin.exits,
                step_exits: c.step_exits - p.at_begin.step_exits,
                exits_with_tco: c.exits_with_tco - p.at_begin.exits_with_tco,
                sysreg_writes: c.sysreg_writes - p.at_begin.sysreg_writes,
                virqs: c.virqs - p.at_begin.virqs,
                el2_instructions: delta(0),
                el1_instructions: delta(1),
                el0_instructions: delta(2),
                el2_report_instructions: self
                    .pmu
                    .map(|_| self.report.flush_instructions - p.flush_at_begin),
            },
        ))
    }
}

/// The MTE features the predicate may use, from the ID registers (EL2 reads the real ones).
fn mte_features() -> mtex_trace::predicate::MteFeatures {
    use aarch64_cpu::registers::ID_AA64PFR1_EL1;
    use tock_registers::interfaces::Readable;
    let pfr2: u64;
    // SAFETY: reading ID_AA64PFR2_EL1 (S3_0_C0_C4_2; no aarch64-cpu accessor) has no side
    // effects; it reads as zero on CPUs older than the register.
    unsafe { core::arch::asm!("mrs {}, s3_0_c0_c4_2", out(reg) pfr2) };
    mtex_trace::predicate::MteFeatures::from_id_regs(ID_AA64PFR1_EL1.get(), pfr2)
}
