//! EC 0x17: the guest's SMCs (HCR_EL2.TSC traps them), and the hypervisor's own power-off.
//!
//! PSCI calls that end the run are the guest's exit; CPU_ON, CPU_OFF and AFFINITY_INFO are
//! the VM's, decided by `mtex_vm::power` and carried out here (`smp.rs`); suspend is refused;
//! information calls (versions, features) are forwarded to firmware unchanged.

use crate::context::GuestContext;
use crate::state::Hyp;
use arm_sysregs::el1::accessors::read_mpidr_el1;
use mtex_abi::Record;
use mtex_abi::hypercall::ret;
use mtex_abi::report::{Conduit, ExitReason, PowerCall, UnknownCall};
use smccc::Smc;
use smccc::arch::{SMCCC_ARCH_FEATURES, SMCCC_VERSION};
use smccc::psci::error::Error;
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
        PSCI_CPU_ON_64 | PSCI_CPU_ON_32 => {
            let r = cpu_on(hyp, ctx, function == PSCI_CPU_ON_32);
            record(hyp, ctx, function, r);
            ctx.x[0] = result(r.map(|()| 0));
        }
        PSCI_CPU_OFF => {
            let r = this_cpu(hyp).map_or(Err(Error::InternalFailure), |i| hyp.cpus.cpu_off(i));
            record(hyp, ctx, function, r);
            match r {
                // Off once this exit has let go of the state (`exits::dispatch`).
                Ok(()) => crate::fast_step::request_power_off(),
                Err(e) => ctx.x[0] = result(Err(e)),
            }
        }
        PSCI_AFFINITY_INFO_32 | PSCI_AFFINITY_INFO_64 => {
            let target = args(ctx, function == PSCI_AFFINITY_INFO_32)[0];
            let r = hyp.cpus.affinity_info(target, ctx.x[2]);
            ctx.x[0] = result(r.map(|s| s as u64));
        }
        PSCI_VERSION
        | PSCI_FEATURES
        | PSCI_MIGRATE_INFO_TYPE
        | SMCCC_VERSION
        | SMCCC_ARCH_FEATURES => forward(ctx, function),
        _ => refuse(hyp, ctx),
    }
}

/// x1..x3 as the call's width reads them.
fn args(ctx: &GuestContext, thirty_two: bool) -> [u64; 3] {
    let mask = if thirty_two {
        u32::MAX as u64
    } else {
        u64::MAX
    };
    [ctx.x[1] & mask, ctx.x[2] & mask, ctx.x[3] & mask]
}

/// The call's record, with its answer (the call's arguments are still in x1..x3).
fn record(hyp: &mut Hyp, ctx: &GuestContext, function: u32, r: Result<(), Error>) {
    let [target, entry, context_id] = if function == PSCI_CPU_OFF {
        [0; 3]
    } else {
        args(ctx, function == PSCI_CPU_ON_32)
    };
    let at = ctx.state();
    hyp.report.send(&Record::PowerCall(PowerCall {
        cpu: this_cpu(hyp).map_or(u32::MAX, |i| i as u32),
        function,
        target,
        entry,
        context_id,
        result: r.map_or_else(|e| i64::from(e) as i32, |()| 0),
        phase: hyp.phase.as_ref().map_or(0, |p| p.id),
        // The SMC's own PC: the context has stepped over it already.
        at: mtex_abi::report::GuestState {
            pc: at.pc.wrapping_sub(4),
            ..at
        },
    }));
}

/// A PSCI result in x0: the value, or the error's (negative) code.
fn result(r: Result<u64, Error>) -> u64 {
    r.unwrap_or_else(|e| i64::from(e) as u64)
}

/// This CPU's index among the guest's.
fn this_cpu(hyp: &Hyp) -> Option<usize> {
    hyp.cpus
        .index_of(read_mpidr_el1().bits() & mtex_platform::machine::MPIDR_AFFINITY)
}

/// CPU_ON(target, entry, context id). Refused while a phase is open: a window counts the
/// CPUs that were on when it opened, and a CPU started inside it would go uncounted.
fn cpu_on(hyp: &mut Hyp, ctx: &GuestContext, thirty_two: bool) -> Result<(), Error> {
    if hyp.phase.is_some() {
        return Err(Error::Denied);
    }
    let [target, entry, context_id] = args(ctx, thirty_two);
    let ram = hyp.guest_ram;
    let start = hyp
        .cpus
        .cpu_on(target, entry, context_id, |a| ram.pa_of(a, 4).is_some())?;
    // What this CPU's ring holds is framed before the new CPU's writes can be.
    hyp.report.flush();
    crate::smp::start(hyp, start)
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
