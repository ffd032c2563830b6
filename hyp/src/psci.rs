//! EC 0x17: the guest's SMCs (HCR_EL2.TSC traps them), and the hypervisor's own power-off.
//!
//! PSCI calls that end the run are the guest's exit; calls that would hand a CPU or the
//! machine to firmware (CPU_ON, suspend) are refused; information calls (versions, features)
//! are forwarded to firmware unchanged.

use crate::context::GuestContext;
use crate::state::Hyp;
use mtex_abi::Record;
use mtex_abi::hypercall::ret;
use mtex_abi::report::{Conduit, ExitReason, UnknownCall};
use smccc::Smc;
use smccc::arch::{SMCCC_ARCH_FEATURES, SMCCC_VERSION};
use smccc::psci::*;

#[inline(never)]
pub fn handle_guest_smc(hyp: &mut Hyp, ctx: &mut GuestContext) {
    // A trapped SMC returns to itself (Arm ARM D1.4.3): step over it.
    let pc = ctx.elr;
    ctx.skip_instruction();
    if !crate::hypercall::guard_allows(hyp, ctx, Conduit::Smc, pc) {
        ctx.x[0] = ret::NOT_SUPPORTED;
        return;
    }
    let function = ctx.x[0] as u32;
    if ctx.x[0] >> 32 != 0 {
        return refuse(hyp, ctx);
    }
    match function {
        PSCI_SYSTEM_OFF => hyp.finish(ExitReason::GuestSystemOff),
        PSCI_SYSTEM_RESET | PSCI_SYSTEM_RESET2_32 | PSCI_SYSTEM_RESET2_64 => {
            hyp.finish(ExitReason::GuestSystemReset)
        }
        PSCI_VERSION
        | PSCI_FEATURES
        | PSCI_MIGRATE_INFO_TYPE
        | PSCI_AFFINITY_INFO_32
        | PSCI_AFFINITY_INFO_64
        | SMCCC_VERSION
        | SMCCC_ARCH_FEATURES => forward(ctx, function),
        _ => refuse(hyp, ctx),
    }
}

fn forward(ctx: &mut GuestContext, function: u32) {
    let mut args = [0u64; 17];
    args.copy_from_slice(&ctx.x[1..18]);
    let r = smccc::smc64(function, args);
    ctx.set_results(&r[..4]);
}

fn refuse(hyp: &mut Hyp, ctx: &mut GuestContext) {
    hyp.report.send(&Record::UnknownCall(UnknownCall {
        conduit: Conduit::Smc,
        function: ctx.x[0],
        at: ctx.state(),
    }));
    ctx.x[0] = ret::NOT_SUPPORTED;
}

/// Powers the machine off through PSCI; QEMU exits.
pub fn system_off() -> ! {
    let _ = smccc::psci::system_off::<Smc>();
    // Firmware refused: nothing more to do than wait.
    loop {
        aarch64_cpu::asm::wfi();
    }
}
