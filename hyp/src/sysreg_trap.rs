//! EC 0x18: a trapped guest MSR. The write is done on the guest's behalf and recorded.
//!
//! With FEAT_FGT only SCTLR_EL1 and TCR_EL1 writes trap (HFGWTR_EL2); with HCR_EL2.TVM every
//! register in `SysReg` does, so each one is emulated here.

use crate::context::GuestContext;
use crate::state::Hyp;
use aarch64_cpu::registers::*;
use mtex_abi::report::SysregWrite;
use mtex_arch::{Esr, SysReg};
use tock_registers::interfaces::{Readable, Writeable};

pub fn handle(hyp: &mut Hyp, ctx: &mut GuestContext, esr: Esr) {
    let iss = esr.sysreg_iss();
    let Some(reg) = SysReg::from_iss(esr.iss()).filter(|_| !iss.is_read) else {
        crate::exits::unhandled(hyp, ctx)
    };
    let new = ctx.reg(iss.rt);
    let old = read(reg);
    write(reg, new);
    // The predicate uses what the register holds, not what was written (RES0 bits).
    match reg {
        SysReg::SctlrEl1 => hyp.controls.sctlr_el1 = read(reg),
        SysReg::TcrEl1 => hyp.controls.tcr_el1 = read(reg),
        _ => {}
    }
    hyp.counters.sysreg_writes += 1;
    hyp.report.sysreg_write(SysregWrite {
        reg,
        old,
        new,
        at: ctx.state(),
        ts: CNTPCT_EL0.get(),
        phase: hyp.phase_id(),
    });
    ctx.skip_instruction();
}

/// The EL1 register's current value. From EL2 with HCR_EL2.E2H=0 these accesses reach the
/// EL1 registers themselves. No ISB is needed: the ERET back to the guest synchronises.
fn read(reg: SysReg) -> u64 {
    match reg {
        SysReg::SctlrEl1 => SCTLR_EL1.get(),
        SysReg::Ttbr0El1 => TTBR0_EL1.get(),
        SysReg::Ttbr1El1 => TTBR1_EL1.get(),
        SysReg::TcrEl1 => TCR_EL1.get(),
        SysReg::Afsr0El1 => AFSR0_EL1.get(),
        SysReg::Afsr1El1 => AFSR1_EL1.get(),
        SysReg::EsrEl1 => ESR_EL1.get(),
        SysReg::FarEl1 => FAR_EL1.get(),
        SysReg::MairEl1 => MAIR_EL1.get(),
        SysReg::AmairEl1 => AMAIR_EL1.get(),
        SysReg::ContextidrEl1 => CONTEXTIDR_EL1.get(),
    }
}

fn write(reg: SysReg, value: u64) {
    match reg {
        SysReg::SctlrEl1 => SCTLR_EL1.set(value),
        SysReg::Ttbr0El1 => TTBR0_EL1.set(value),
        SysReg::Ttbr1El1 => TTBR1_EL1.set(value),
        SysReg::TcrEl1 => TCR_EL1.set(value),
        SysReg::Afsr0El1 => AFSR0_EL1.set(value),
        SysReg::Afsr1El1 => AFSR1_EL1.set(value),
        SysReg::EsrEl1 => ESR_EL1.set(value),
        SysReg::FarEl1 => FAR_EL1.set(value),
        SysReg::MairEl1 => MAIR_EL1.set(value),
        SysReg::AmairEl1 => AMAIR_EL1.set(value),
        SysReg::ContextidrEl1 => CONTEXTIDR_EL1.set(value),
    }
}
