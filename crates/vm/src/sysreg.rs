//! A trapped MSR or MRS (EC 0x18): which of the hypervisor's emulations it is, and the write
//! of an EL1 VM control done for the guest, against a register file the caller provides (the
//! CPU's own EL1 registers in the hypervisor, a fake on the host).
//!
//! What traps: with FEAT_FGT only SCTLR_EL1 and TCR_EL1 writes (HFGWTR_EL2), with HCR_EL2.TVM
//! writes of every register in [`SysReg`]; PMU registers (MDCR_EL2.TPM), debug registers and
//! OS locks (MDCR_EL2.TDA/TDOSA/TDRA), ID-register reads (HCR_EL2.TID3). Anything else that
//! traps is not something the hypervisor knows how to complete, so it ends the run as an
//! unhandled exit rather than be guessed at.

use mtex_arch::esr::SysRegIss;
use mtex_arch::{DebugReg, PmuReg, SgiReg, SysReg, id_regs};

/// The EL1 registers a trapped write reaches. From EL2 with HCR_EL2.E2H = 0 the `*_EL1`
/// accessors reach the guest's own registers; on the host a fake stands in.
pub trait El1Registers {
    fn read(&self, reg: SysReg) -> u64;
    fn write(&mut self, reg: SysReg, value: u64);
}

/// What a trapped access is, and so which emulation completes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trapped {
    /// A write of an EL1 VM control: done for the guest and recorded ([`write_control`]).
    ControlWrite(SysReg),
    /// A PMU register, when the hypervisor runs a PMU backend that owns the counters.
    Pmu(PmuReg),
    /// A debug register or OS lock: the guest's shadow.
    Debug(DebugReg),
    /// An ID register read: the real value less what the hypervisor hides.
    IdRead,
    /// A write of an SGI register, trapped while HCR_EL2.FMO routes the sampling timer to
    /// EL2 (Linux mode): the interrupt is sent for the guest, unchanged.
    Sgi(SgiReg),
    /// A read of the guest's virtual counter, trapped while a traced phase steps several
    /// CPUs: answered with the window's guest time (`crate::stepped_clock`).
    VirtualCount,
    /// Nothing the hypervisor emulates: the run ends with an unhandled-exit record.
    Unhandled,
}

/// Which emulation a trapped access with syndrome `iss` takes. `pmu`: the hypervisor owns the
/// PMU (its backend is on), so the guest's PMU accesses are emulated.
#[inline]
pub fn classify(iss: u32, pmu: bool) -> Trapped {
    // The control writes are the hot case (every trapped SCTLR_EL1/TCR_EL1 write on the full
    // path): decided from the direction bit and the register alone.
    if iss & 1 == 0
        && let Some(reg) = SysReg::from_iss(iss)
    {
        return Trapped::ControlWrite(reg);
    }
    classify_other(iss, pmu)
}

/// The accesses that are not control writes.
#[inline(never)]
fn classify_other(iss: u32, pmu: bool) -> Trapped {
    let s = SysRegIss::from_iss(iss);
    if pmu && let Some(reg) = PmuReg::from_iss(s) {
        return Trapped::Pmu(reg);
    }
    if let Some(reg) = DebugReg::from_iss(s) {
        return Trapped::Debug(reg);
    }
    if s.is_read && id_regs::is_group3(s) {
        return Trapped::IdRead;
    }
    if let Some(reg) = SgiReg::from_iss(s) {
        return Trapped::Sgi(reg);
    }
    if mtex_arch::counter_regs::is_virtual_count_read(s) {
        return Trapped::VirtualCount;
    }
    Trapped::Unhandled
}

/// A control written for the guest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ControlWrite {
    pub reg: SysReg,
    /// What the guest's MSR wrote (what the trap record keeps).
    pub written: u64,
    /// What the register held before.
    pub old: u64,
    /// What it holds after: `written` less what the CPU keeps RES0 or RES1. The tag-check
    /// predicate must use this, not `written`.
    pub held: u64,
}

impl ControlWrite {
    /// Whether guest virtual addresses may now translate differently, so that the tracer's
    /// cached translations of guest code are stale.
    #[inline]
    pub fn retranslates(&self) -> bool {
        matches!(
            self.reg,
            SysReg::SctlrEl1
                | SysReg::TcrEl1
                | SysReg::Ttbr0El1
                | SysReg::Ttbr1El1
                | SysReg::MairEl1
        )
    }

    /// The predicate's new SCTLR_EL1 or TCR_EL1, if this wrote one of them.
    #[inline]
    pub fn mte_control(&self) -> Option<(SysReg, u64)> {
        matches!(self.reg, SysReg::SctlrEl1 | SysReg::TcrEl1).then_some((self.reg, self.held))
    }
}

/// Writes `value` to `reg` for the guest and reads back what the register kept.
pub fn write_control(regs: &mut impl El1Registers, reg: SysReg, value: u64) -> ControlWrite {
    let old = regs.read(reg);
    regs.write(reg, value);
    ControlWrite {
        reg,
        written: value,
        old,
        held: regs.read(reg),
    }
}

/// Register `rt` as the MSR's source operand reads it: 31 is XZR.
#[inline]
pub fn operand(x: &[u64; 31], rt: u8) -> u64 {
    x.get(rt as usize).copied().unwrap_or(0)
}

/// Completes an MRS for the guest: `value` goes to Xt, and to nowhere when Xt is XZR.
#[inline]
pub fn complete_read(x: &mut [u64; 31], rt: u8, value: u64) {
    if let Some(r) = x.get_mut(rt as usize) {
        *r = value;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mtex_arch::mte_bits::{sctlr, tcr};

    /// EL1 registers as a CPU keeps them: each with the bits it holds, the rest reading as
    /// zero (RES0, or a feature the CPU lacks).
    struct FakeEl1 {
        values: [u64; 11],
        holds: fn(SysReg) -> u64,
    }

    impl FakeEl1 {
        fn new(holds: fn(SysReg) -> u64) -> Self {
            Self {
                values: [0; 11],
                holds,
            }
        }
        fn index(reg: SysReg) -> usize {
            SysReg::ALL.iter().position(|r| *r == reg).unwrap()
        }
    }

    impl El1Registers for FakeEl1 {
        fn read(&self, reg: SysReg) -> u64 {
            self.values[Self::index(reg)]
        }
        fn write(&mut self, reg: SysReg, value: u64) {
            self.values[Self::index(reg)] = value & (self.holds)(reg);
        }
    }

    /// The ISS of `MSR <reg>, X<rt>` or `MRS X<rt>, <reg>`.
    fn iss(op0: u32, op1: u32, crn: u32, crm: u32, op2: u32, rt: u32, read: bool) -> u32 {
        (op0 << 20) | (op2 << 17) | (op1 << 14) | (crn << 10) | (rt << 5) | (crm << 1) | read as u32
    }

    const SCTLR_EL1: (u32, u32, u32, u32, u32) = (3, 0, 1, 0, 0);
    const TCR_EL1: (u32, u32, u32, u32, u32) = (3, 0, 2, 0, 2);

    fn msr(r: (u32, u32, u32, u32, u32), rt: u32) -> u32 {
        iss(r.0, r.1, r.2, r.3, r.4, rt, false)
    }

    fn mrs(r: (u32, u32, u32, u32, u32), rt: u32) -> u32 {
        iss(r.0, r.1, r.2, r.3, r.4, rt, true)
    }

    #[test]
    fn every_vm_control_write_is_a_control_write_and_no_read_of_one_is() {
        for reg in SysReg::ALL {
            let key = reg.encoding().iss_key();
            assert_eq!(classify(key, false), Trapped::ControlWrite(reg), "{reg:?}");
            // A read of a VM control never traps under TVM (TRVM is clear): if one does, the
            // hypervisor must not answer it with a guess.
            assert_eq!(classify(key | 1, true), Trapped::Unhandled, "{reg:?}");
        }
        assert_eq!(classify(mrs(SCTLR_EL1, 4), true), Trapped::Unhandled);
        assert_eq!(
            classify(msr(SCTLR_EL1, 4), true),
            Trapped::ControlWrite(SysReg::SctlrEl1)
        );
    }

    #[test]
    fn pmu_accesses_are_emulated_only_while_the_hypervisor_owns_the_pmu() {
        let pmcr = iss(3, 3, 9, 12, 0, 2, true);
        assert_eq!(classify(pmcr, true), Trapped::Pmu(PmuReg::Pmcr));
        assert_eq!(classify(pmcr, false), Trapped::Unhandled);
    }

    #[test]
    fn debug_registers_reach_the_shadow_and_id_registers_are_read_only() {
        // DBGBCR3_EL1: op0 2, op1 0, CRn 0, CRm 3, op2 5.
        assert_eq!(
            classify(iss(2, 0, 0, 3, 5, 1, false), false),
            Trapped::Debug(DebugReg::Bcr(3))
        );
        // ID_AA64PFR1_EL1: op0 3, op1 0, CRn 0, CRm 4, op2 1.
        assert_eq!(
            classify(iss(3, 0, 0, 4, 1, 7, true), false),
            Trapped::IdRead
        );
        // A write to it is nothing the architecture allows: unhandled, not swallowed.
        assert_eq!(
            classify(iss(3, 0, 0, 4, 1, 7, false), false),
            Trapped::Unhandled
        );
        // Neither is a register the hypervisor never traps on purpose (TPIDR_EL1).
        assert_eq!(
            classify(iss(3, 0, 13, 0, 4, 0, false), true),
            Trapped::Unhandled
        );
    }

    /// Linux's IPIs (ICC_SGI1R_EL1 writes) trap while a sampled window routes FIQs to EL2:
    /// they are sent on, never an unhandled exit; a read of the same encoding is nothing.
    #[test]
    fn sgi_writes_are_passed_on() {
        assert_eq!(
            classify(iss(3, 0, 12, 11, 5, 3, false), false),
            Trapped::Sgi(mtex_arch::SgiReg::Sgi1r)
        );
        assert_eq!(
            classify(iss(3, 0, 12, 11, 7, 3, false), false),
            Trapped::Sgi(mtex_arch::SgiReg::Sgi0r)
        );
        assert_eq!(
            classify(iss(3, 0, 12, 11, 5, 3, true), false),
            Trapped::Unhandled
        );
    }

    /// The guest's clock reads trap while a traced phase steps several CPUs: CNTVCT_EL0 and
    /// CNTVCTSS_EL0 are answered; the physical counter and the timer's registers are not.
    #[test]
    fn virtual_counter_reads_are_answered() {
        for op2 in [2, 6] {
            assert_eq!(
                classify(iss(3, 3, 14, 0, op2, 4, true), false),
                Trapped::VirtualCount
            );
        }
        assert_eq!(
            classify(iss(3, 3, 14, 0, 1, 4, true), false),
            Trapped::Unhandled
        );
        assert_eq!(
            classify(iss(3, 3, 14, 3, 2, 4, true), false),
            Trapped::Unhandled
        );
    }

    #[test]
    fn the_predicate_takes_what_the_register_held_not_what_the_guest_wrote() {
        // A CPU without FEAT_MTE_STORE_ONLY: TCSO reads as zero whatever is written.
        let mut cpu = FakeEl1::new(|reg| match reg {
            SysReg::SctlrEl1 => !(sctlr::TCSO | sctlr::TCSO0),
            _ => u64::MAX,
        });
        cpu.write(SysReg::SctlrEl1, sctlr::ATA);
        let asked = sctlr::ATA | sctlr::TCSO | (1 << sctlr::TCF_SHIFT);
        let w = write_control(&mut cpu, SysReg::SctlrEl1, asked);
        assert_eq!(w.old, sctlr::ATA);
        assert_eq!(w.written, asked);
        assert_eq!(w.held, sctlr::ATA | (1 << sctlr::TCF_SHIFT));
        assert_eq!(w.mte_control(), Some((SysReg::SctlrEl1, w.held)));
        assert_eq!(cpu.read(SysReg::SctlrEl1), w.held);
    }

    #[test]
    fn translation_registers_stale_the_tracer_and_fault_registers_do_not() {
        let mut cpu = FakeEl1::new(|_| u64::MAX);
        for reg in SysReg::ALL {
            let w = write_control(&mut cpu, reg, 0x1000);
            let translation = matches!(
                reg,
                SysReg::SctlrEl1
                    | SysReg::TcrEl1
                    | SysReg::Ttbr0El1
                    | SysReg::Ttbr1El1
                    | SysReg::MairEl1
            );
            assert_eq!(w.retranslates(), translation, "{reg:?}");
            assert_eq!(
                w.mte_control().is_some(),
                matches!(reg, SysReg::SctlrEl1 | SysReg::TcrEl1),
                "{reg:?}"
            );
        }
    }

    #[test]
    fn xzr_writes_zero_and_a_read_into_xzr_is_discarded() {
        let mut x = [7u64; 31];
        let i = msr(TCR_EL1, 31);
        let rt = SysRegIss::from_iss(i).rt;
        assert_eq!(classify(i, false), Trapped::ControlWrite(SysReg::TcrEl1));
        let mut cpu = FakeEl1::new(|_| u64::MAX);
        cpu.write(SysReg::TcrEl1, tcr::TCMA1);
        let w = write_control(&mut cpu, SysReg::TcrEl1, operand(&x, rt));
        assert_eq!((w.old, w.held), (tcr::TCMA1, 0));
        // MRS XZR, <id register>: nothing of the guest's changes.
        complete_read(&mut x, 31, 0xdead);
        assert_eq!(x, [7; 31]);
        complete_read(&mut x, 30, 0xdead);
        assert_eq!(x[30], 0xdead);
        assert_eq!(
            operand(&x, SysRegIss::from_iss(msr(SCTLR_EL1, 30)).rt),
            0xdead
        );
    }
}
