//! EC 0x18: a trapped guest MRS/MSR, emulated.
//!
//! - The EL1 VM controls (`SysReg`): with FEAT_FGT only SCTLR_EL1 and TCR_EL1 writes trap
//!   (HFGWTR_EL2); with HCR_EL2.TVM every register in `SysReg` does. The write is done on the
//!   guest's behalf and recorded. Outside traced phases, writes of SCTLR_EL1 and TCR_EL1 are
//!   done by the trap fast path (`fast_step.rs`) instead, which queues the same raw entry and
//!   leaves the counting to the framing; this is its reference (`mtex.step=plain`), the path
//!   of traced phases and of a full ring.
//! - PMU registers (MDCR_EL2.TPM/TPMCR): the guest's PMU without the hypervisor's counters
//!   (`pmu.rs`).
//! - Debug registers and OS locks (MDCR_EL2.TDA/TDOSA/TDRA): the guest's shadow (`debug.rs`);
//!   writes are recorded.
//! - ID registers (HCR_EL2.TID3): the real values less what the hypervisor hides
//!   (`id_regs.rs`).
//! - SGI register writes, which trap while a sampled Linux window routes FIQs to EL2
//!   (`fiq.rs`): sent on unchanged.
//! - Virtual counter reads (CNTHCTL_EL2.EL1TVCT), which trap while a traced phase steps
//!   several CPUs: the machine's guest time (`guest_clock.rs`).
//!
//! Which access is which, and the control write itself, are decided in `mtex_vm::sysreg`
//! (host-tested against a fake register file); this file is the CPU's side. Anything else
//! ends the run as an unhandled exit. Every emulated instruction is counted: it
//! completed for the guest (QEMU's PMU counts it as executed; on silicon a trapped instruction
//! is not architecturally executed, so the PMU does not).

use crate::context::GuestContext;
use crate::state::Hyp;
use arm_sysregs::el0::accessors::read_cntpct_el0;
use arm_sysregs::el1::accessors::{
    read_afsr0_el1, read_afsr1_el1, read_amair_el1, read_contextidr_el1, read_esr_el1,
    read_far_el1, read_mair_el1, read_sctlr_el1, read_tcr_el1, read_ttbr0_el1, read_ttbr1_el1,
    write_afsr0_el1, write_afsr1_el1, write_amair_el1, write_contextidr_el1, write_esr_el1,
    write_far_el1, write_mair_el1, write_sctlr_el1, write_tcr_el1, write_ttbr0_el1,
    write_ttbr1_el1,
};
use arm_sysregs::el1::registers::{
    ContextidrEl1, EsrEl1, FarEl1, MairEl1, SctlrEl1, TcrEl1, Ttbr0El1, Ttbr1El1,
};
use mtex_abi::Record;
use mtex_abi::report::{DebugWrite, GuestPmuEvent};
use mtex_arch::{Esr, SysReg};
use mtex_vm::sysreg::{self, El1Registers, Trapped};

pub fn handle(hyp: &mut Hyp, ctx: &mut GuestContext, esr: Esr) {
    let reg = match sysreg::classify(esr.iss(), hyp.pmu.is_some()) {
        Trapped::ControlWrite(reg) => reg,
        trapped => return other(hyp, ctx, esr, trapped),
    };
    let v = hyp.vcpu();
    v.counters.emulated += 1;
    let w = sysreg::write_control(&mut ThisCpu, reg, ctx.reg(esr.sysreg_iss().rt));
    match w.mte_control() {
        Some((SysReg::SctlrEl1, held)) => v.controls.sctlr_el1 = held,
        Some((_, held)) => v.controls.tcr_el1 = held,
        None => {}
    }
    if w.retranslates() {
        v.tracer.note_translation_change();
    }
    v.counters.sysreg_writes += 1;
    // Counted above and in `exits::count_exit`: marked so that the framing does not again.
    hyp.report.sysreg_write(crate::fast_step::RawWrite::new(
        esr.0 | crate::fast_step::RAW_COUNTED,
        read_cntpct_el0().bits(),
        w.written,
        w.old,
        ctx.elr,
        ctx.spsr,
    ));
    ctx.skip_instruction();
}

/// This CPU's EL1 registers: from EL2 with HCR_EL2.E2H=0 these accesses reach the EL1
/// registers themselves. No ISB is needed: the ERET back to the guest synchronises.
struct ThisCpu;

impl El1Registers for ThisCpu {
    #[inline(always)]
    fn read(&self, reg: SysReg) -> u64 {
        match reg {
            SysReg::SctlrEl1 => read_sctlr_el1().bits(),
            SysReg::Ttbr0El1 => read_ttbr0_el1().bits(),
            SysReg::Ttbr1El1 => read_ttbr1_el1().bits(),
            SysReg::TcrEl1 => read_tcr_el1().bits(),
            SysReg::Afsr0El1 => read_afsr0_el1(),
            SysReg::Afsr1El1 => read_afsr1_el1(),
            SysReg::EsrEl1 => read_esr_el1().bits(),
            SysReg::FarEl1 => read_far_el1().bits(),
            SysReg::MairEl1 => read_mair_el1().bits(),
            SysReg::AmairEl1 => read_amair_el1(),
            SysReg::ContextidrEl1 => read_contextidr_el1().bits(),
        }
    }

    #[inline(always)]
    fn write(&mut self, reg: SysReg, value: u64) {
        // SAFETY: the guest's own write of its EL1 register, trapped and done on its behalf
        // with the value `mtex_vm::sysreg` decided; EL2 (E2H = 0) runs on its own
        // translation regime and uses none of these registers.
        unsafe {
            match reg {
                SysReg::SctlrEl1 => write_sctlr_el1(SctlrEl1::from_bits_retain(value)),
                SysReg::Ttbr0El1 => write_ttbr0_el1(Ttbr0El1::from_bits_retain(value)),
                SysReg::Ttbr1El1 => write_ttbr1_el1(Ttbr1El1::from_bits_retain(value)),
                SysReg::TcrEl1 => write_tcr_el1(TcrEl1::from_bits_retain(value)),
                SysReg::Afsr0El1 => write_afsr0_el1(value),
                SysReg::Afsr1El1 => write_afsr1_el1(value),
                SysReg::EsrEl1 => write_esr_el1(EsrEl1::from_bits_retain(value)),
                SysReg::FarEl1 => write_far_el1(FarEl1::from_bits_retain(value)),
                SysReg::MairEl1 => write_mair_el1(MairEl1::from_bits_retain(value)),
                SysReg::AmairEl1 => write_amair_el1(value),
                SysReg::ContextidrEl1 => {
                    write_contextidr_el1(ContextidrEl1::from_bits_retain(value))
                }
            }
        }
    }
}

/// Sends the SGI a trapped write asked for, as the guest's MSR would have: the value is the
/// guest's own (targets, INTID, routing mode), written from EL2 to the physical interface.
fn send_sgi(reg: mtex_arch::SgiReg, value: u64) {
    use arm_sysregs::el1::accessors::{
        write_icc_asgi1r_el1, write_icc_sgi0r_el1, write_icc_sgi1r_el1,
    };
    use arm_sysregs::el1::registers::IccAsgi1rEl1;
    use mtex_arch::SgiReg;
    // SGI generation registers only raise interrupts, which Linux (the guest that asked)
    // takes; no memory is touched.
    let value = IccAsgi1rEl1::from_bits_retain(value);
    match reg {
        SgiReg::Sgi1r => write_icc_sgi1r_el1(value),
        SgiReg::Asgi1r => write_icc_asgi1r_el1(value),
        SgiReg::Sgi0r => write_icc_sgi0r_el1(value),
    }
    // The write takes effect before the ERET.
    aarch64_cpu::asm::barrier::isb(aarch64_cpu::asm::barrier::SY);
}

/// A trapped access to a PMU, debug or ID register.
#[cold]
#[inline(never)]
fn other(hyp: &mut Hyp, ctx: &mut GuestContext, esr: Esr, trapped: Trapped) {
    let iss = esr.sysreg_iss();
    if matches!(trapped, Trapped::IdRead | Trapped::Debug(_)) {
        crate::phase::sample::note_id_debug_trap(hyp);
    }
    let write = (!iss.is_read).then(|| ctx.reg(iss.rt));
    let read = match (trapped, hyp.pmu) {
        (Trapped::Pmu(reg), Some(pmu)) => {
            let v = hyp.vcpu();
            v.counters.guest_pmu_accesses += 1;
            let told = pmu.unimplemented_mte_type(&mut v.guest_pmu, reg, write);
            // A sampled unit's counts are not the whole: none for the guest's events.
            let whole = !v.tracer.in_unit();
            let now = v.tracer.counts_so_far().filter(|_| whole);
            let read = pmu.guest_access(&mut v.guest_pmu, reg, write, now.as_ref());
            crate::pmu::send_news(hyp, ctx.state());
            if let Some((counter, event, evtyper)) = told {
                let e = GuestPmuEvent {
                    cpu: hyp.this_cpu() as u32,
                    counter,
                    event,
                    evtyper,
                    phase: hyp.phase_id(),
                    at: ctx.state(),
                };
                hyp.report.send(&Record::GuestPmuEvent(e));
            }
            read
        }
        (Trapped::Debug(reg), _) => {
            hyp.vcpu().counters.guest_debug_accesses += 1;
            if let Some(value) = write {
                hyp.vcpu().guest_debug.write(reg, value);
                hyp.report.send(&Record::DebugWrite(DebugWrite {
                    iss: esr.iss() & mtex_arch::sysreg::ISS_REGISTER_MASK,
                    value,
                    at: ctx.state(),
                    phase: hyp.phase_id(),
                }));
            }
            hyp.vcpu().guest_debug.read(reg)
        }
        (Trapped::IdRead, _) => crate::id_regs::guest_read(iss.crm, iss.op2),
        (Trapped::VirtualCount, _) => crate::stepped_clock::read(&mut crate::fast_step::this_cpu()),
        // Linux mode only: the built-in guest has no GIC of its own to send SGIs with.
        (Trapped::Sgi(reg), _) if hyp.linux => {
            send_sgi(reg, write.unwrap_or(0));
            0
        }
        _ => crate::exits::unhandled(hyp, ctx),
    };
    if iss.is_read {
        sysreg::complete_read(&mut ctx.x, iss.rt, read);
    }
    hyp.vcpu().counters.emulated += 1;
    ctx.skip_instruction();
}
