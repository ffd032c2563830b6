//! EC 0x16: the guest's HVC calls (ABI in `mtex_abi::hypercall`), decoded and dispatched;
//! what a phase's begin and end do is `phase`'s.

use crate::context::GuestContext;
use crate::state::Hyp;
use arm_sysregs::el2::accessors::{read_far_el2, read_hpfar_el2};
use mtex_abi::Record;
use mtex_abi::hypercall::{self as hc, ret};
use mtex_abi::report::{CallRefused, Conduit, ExitReason, PhaseName, PhaseRefused, UnknownCall};
use mtex_abi::scenario::PhaseParams;
use mtex_arch::el2_bits::hpfar;

/// True when the guarded phase open (if any) takes the call at `pc` (`mtex_vm::guard`: the
/// one call its site makes, from the harness's own instruction); otherwise the call is
/// reported as refused and the caller returns NOT_SUPPORTED.
///
/// Why the hypervisor, and why by address: code run inside the phase (a snippet at EL1) has
/// every privilege the guest's own harness has, and can make any call the harness makes —
/// from its own code, from code it writes elsewhere, or through the guest's functions that
/// make them. What it cannot choose is where the harness's calls are, which the harness
/// named before that code ran; the address of a call, which the hypervisor reads from
/// ELR_EL2 and translates by AT, not from anything the guest says; and stage 2, which keeps
/// the harness's code read-only while the phase is open. Code that branches into the
/// harness's own call sites ends the phase or counts an iteration as the harness would
/// there: the iterations counted then differ from those the harness said it makes.
pub fn guard_allows(hyp: &mut Hyp, ctx: &GuestContext, conduit: Conduit, pc: u64) -> bool {
    let Some(g) = hyp.call_guard else {
        return true;
    };
    if conduit == Conduit::Hvc && g.allows(ctx.x[0], pc, el1_ipa) {
        return true;
    }
    hyp.report.send(&Record::CallRefused(CallRefused {
        conduit,
        function: ctx.x[0],
        at: ctx.state(),
        phase: g.phase,
    }));
    false
}

/// Where stage 1 maps the EL1 instruction address `va` now (AT S1E1R), if anywhere.
fn el1_ipa(va: u64) -> Option<u64> {
    crate::trace::translate(va, false).map(|(ipa, _)| ipa)
}

/// A stage-2 permission fault on memory a guarded phase keeps read-only: the guest wrote the
/// harness's code (or the guest's) while the phase was open. True if `esr` is one.
pub fn is_protected_write(hyp: &Hyp, esr: mtex_arch::Esr) -> bool {
    // DFSC 0b0011xx: a permission fault, at any level.
    const PERMISSION: u8 = 0b00_1100;
    let Some(g) = hyp.call_guard else {
        return false;
    };
    let ipa = hpfar::ipa_page(read_hpfar_el2().bits()) | (read_far_el2().bits() & 0xfff);
    esr.data_abort_iss().dfsc() & 0x3c == PERMISSION && g.protects(ipa)
}

/// Ends the run on the write [`is_protected_write`] found: the code the phase ran is no
/// longer the harness's, and nothing it counted from there on could be vouched for.
pub fn protected_write(hyp: &mut Hyp, ctx: &GuestContext) -> ! {
    let far = read_far_el2().bits();
    let ipa = hpfar::ipa_page(read_hpfar_el2().bits()) | (far & 0xfff);
    let phase = hyp.call_guard.map_or(0, |g| g.phase);
    hyp.finish(ExitReason::ProtectedWrite {
        far,
        ipa,
        phase,
        at: ctx.state(),
    })
}

#[inline(never)]
pub fn handle(hyp: &mut Hyp, ctx: &mut GuestContext) {
    // HVC returns to the next instruction: ELR needs no adjustment.
    let function = ctx.x[0];
    if !guard_allows(hyp, ctx, Conduit::Hvc, ctx.elr.wrapping_sub(4)) {
        ctx.x[0] = ret::NOT_SUPPORTED;
        return;
    }
    let result = match function {
        f if f == hc::VERSION as u64 => hc::ABI_VERSION,
        f if f == hc::PHASE_BEGIN as u64 => phase_begin(hyp, ctx),
        f if f == hc::PHASE_END as u64 => phase_end(hyp, ctx),
        f if f == hc::CONSOLE_WRITE as u64 => console_write(hyp, ctx),
        f if f == hc::EXIT as u64 => hyp.finish(ExitReason::GuestExit { status: ctx.x[1] }),
        f if f == hc::PHASE_ITERATION as u64 => match &mut hyp.call_guard {
            Some(g) => {
                g.count();
                ret::SUCCESS
            }
            None => ret::INVALID_PARAMETERS,
        },
        _ => {
            hyp.report.send(&Record::UnknownCall(UnknownCall {
                conduit: Conduit::Hvc,
                function,
                at: ctx.state(),
            }));
            ret::NOT_SUPPORTED
        }
    };
    ctx.x[0] = result;
}

fn phase_begin(hyp: &mut Hyp, ctx: &mut GuestContext) -> u64 {
    let flags = ctx.x[6];
    // The last window's CPUs are still handing in their shares: the call runs again (ELR
    // back on the HVC), so that phases never overlap.
    if hyp.window.as_ref().is_some_and(|w| w.closing()) {
        ctx.elr -= 4;
        crate::global::yield_cpu();
        return ctx.x[0];
    }
    let cpus = mtex_vm::phase::Cpus {
        on: hyp.cpus.on(),
        awake: hyp.cpus.awake(),
        instruments: hyp.has_instruments(),
    };
    let id = match mtex_vm::phase::check_begin(ctx.x[1], flags, hyp.phase.is_some(), cpus) {
        Ok(id) => id,
        // With another CPU on (or starting), a phase that cannot be counted on every CPU
        // would count part of what the guest did as if it were all.
        Err(mtex_vm::phase::Refusal::OtherCpusOn(cpus_on)) => {
            hyp.report.send(&Record::PhaseRefused(PhaseRefused {
                id: ctx.x[1] as u32,
                cpus_on: cpus_on as u32,
                at: ctx.state(),
            }));
            return ret::INVALID_PARAMETERS;
        }
        Err(_) => return ret::INVALID_PARAMETERS,
    };
    let regs8 = [
        ctx.x[2], ctx.x[3], ctx.x[4], ctx.x[5], ctx.x[7], ctx.x[8], ctx.x[9], ctx.x[10],
    ];
    // A new run, or (PHASE_AGAIN) the next phase of the last one (`mtex_abi::runs`).
    let Some((run, pass)) =
        mtex_abi::runs::next_phase(hyp.last_run.as_ref(), hyp.next_run, flags, regs8)
    else {
        return ret::INVALID_PARAMETERS;
    };
    let params = if flags & hc::PHASE_PARAMS != 0 {
        match PhaseParams::from_regs([ctx.x[7], ctx.x[8], ctx.x[9], ctx.x[10]]) {
            Some(p) => Some(p),
            None => return ret::INVALID_PARAMETERS,
        }
    } else {
        None
    };
    // A guarded phase: its harness's code read-only at stage 2 from here to its end, and
    // calls taken only from its own sites (`mtex_vm::guard`).
    let guard = if flags & hc::PHASE_GUARDED != 0 {
        let regs: [u64; 8] = core::array::from_fn(|i| ctx.x[7 + i]);
        match mtex_vm::guard::Guard::new(id, regs, el1_ipa) {
            Ok(g) if crate::mmu::protect(g.read_only, true) => Some(g),
            _ => return ret::INVALID_PARAMETERS,
        }
    } else {
        None
    };
    let regs = [ctx.x[2], ctx.x[3], ctx.x[4], ctx.x[5]];
    let bytes: [u8; hc::PHASE_NAME_BYTES] = hc::unpack_bytes(&regs);
    hyp.call_guard = guard;
    crate::phase::open(
        hyp,
        ctx,
        crate::phase::Opening {
            id,
            name: PhaseName::from_bytes_lossy(&bytes),
            params,
            flags,
            run,
            pass,
            regs8,
        },
    );
    ret::SUCCESS
}

fn phase_end(hyp: &mut Hyp, ctx: &mut GuestContext) -> u64 {
    // Compared in 64 bits: x1 = 2^32 + id must not close phase `id`.
    if hyp.phase.is_none() || hyp.phase_id() as u64 != ctx.x[1] {
        return ret::INVALID_PARAMETERS;
    }
    match crate::phase::close(hyp, ctx) {
        Some(more) => {
            ctx.x[1] = more as u64;
            ret::SUCCESS
        }
        None => ret::INVALID_PARAMETERS,
    }
}

fn console_write(hyp: &mut Hyp, ctx: &GuestContext) -> u64 {
    let len = ctx.x[1];
    if len > hc::CONSOLE_BYTES_PER_CALL as u64 {
        return ret::INVALID_PARAMETERS;
    }
    let regs = [ctx.x[2], ctx.x[3], ctx.x[4], ctx.x[5], ctx.x[6], ctx.x[7]];
    let bytes: [u8; hc::CONSOLE_BYTES_PER_CALL] = hc::unpack_bytes(&regs);
    hyp.report.console(&bytes[..len as usize]);
    len
}
