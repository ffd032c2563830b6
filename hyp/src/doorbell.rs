//! Linux mode's doorbell (`mtex_abi::doorbell`): a store from Linux's user space to the
//! unmapped doorbell page opens or closes a trace window, a traced phase like the built-in
//! guest's, or takes a snapshot of the records that 64-bit loads then read back. The store itself is skipped (a stage-2 abort returns to the faulting
//! instruction); a refused one leaves a record and changes nothing.

use crate::context::GuestContext;
use crate::phase::{self, Opening};
use crate::state::Hyp;
use arm_sysregs::el2::accessors::{read_far_el2, read_hpfar_el2};
use mtex_abi::Record;
use mtex_abi::doorbell::{self, Access, Command, DOORBELL_SIZE};
use mtex_abi::hypercall as hc;
use mtex_abi::report::{DoorbellRefused, PhaseName};
use mtex_arch::Esr;
use mtex_arch::el2_bits::hpfar;

/// The faulting IPA: HPFAR_EL2.FIPA (IPA[47:12] in bits 43:4) and the page offset from
/// FAR_EL2, the faulting VA, whose low 12 bits are the IPA's (4 KiB pages at both stages).
fn fault_ipa() -> u64 {
    hpfar::ipa_page(read_hpfar_el2().bits()) | (read_far_el2().bits() & 0xfff)
}

/// The exit is a data abort on the doorbell page in Linux mode (not a stage-1 table walk
/// that faulted at stage 2 there: ISS.S1PTW).
pub fn is_doorbell(hyp: &Hyp, esr: Esr) -> bool {
    hyp.linux
        && !esr.data_abort_iss().stage1_walk()
        && (hyp.doorbell_ipa..hyp.doorbell_ipa + DOORBELL_SIZE).contains(&fault_ipa())
}

/// Handles the access.
#[cold]
#[inline(never)]
pub fn ring(hyp: &mut Hyp, ctx: &mut GuestContext, esr: Esr) {
    let iss = esr.data_abort_iss();
    let offset = fault_ipa() - hyp.doorbell_ipa;
    let value = ctx.reg(iss.register());
    let open = hyp.phase.as_ref().map(|p| p.id);
    let access = Access {
        valid: iss.isv(),
        write: iss.is_write(),
        size: iss.size(),
        value,
        offset,
    };
    let decided = match doorbell::decode(access, open) {
        // A CPU starting has no state to count with yet; the per-PC table and call stacks
        // follow one CPU: with other CPUs on, such a window would count part of the
        // machine as if it were all.
        Ok(Command::Open(_))
            if hyp.cpus.awake() > hyp.cpus.on() || (hyp.cpus.on() > 1 && hyp.has_instruments()) =>
        {
            Err(doorbell::Refusal::OtherCpusOn)
        }
        // The last window's CPUs are still handing in their shares: the store runs again
        // (not skipped), so that windows never overlap.
        Ok(Command::Open(_)) if hyp.window.as_ref().is_some_and(|w| w.closing()) => {
            // Lets the CPUs it waits for run first (`yield_cpu`).
            crate::global::yield_cpu();
            return;
        }
        d => d,
    };
    hyp.vcpu().counters.emulated += 1;
    // The access does not happen either way: a load reads all ones (of its register's
    // width, ISS.SF: a W register is zero-extended).
    ctx.skip_instruction();
    if iss.isv() && !iss.is_write() && iss.register() != 31 {
        ctx.x[iss.register() as usize] = if iss.sixty_four() {
            u64::MAX
        } else {
            u32::MAX as u64
        };
    }
    match decided {
        Ok(Command::Open(id)) => {
            let mut name = PhaseName::new();
            let _ = core::fmt::Write::write_fmt(
                &mut crate::report::Truncating(&mut name),
                format_args!("window {id}"),
            );
            let run = hyp.next_run;
            phase::open(
                hyp,
                ctx,
                Opening {
                    id,
                    name,
                    params: None,
                    flags: hc::PHASE_TRACED,
                    run,
                    pass: 0,
                    regs8: [0; 8],
                },
            );
        }
        Ok(Command::Close(_)) => {
            let _ = phase::close(hyp, ctx);
        }
        Ok(Command::TakeResults) => {
            hyp.report.take_results();
        }
        Ok(Command::ReadResults(reg)) => {
            let value = hyp.report.read_results(reg);
            if iss.register() != 31 {
                ctx.x[iss.register() as usize] = value;
            }
        }
        Err(why) => hyp.report.send(&Record::DoorbellRefused(DoorbellRefused {
            offset,
            value,
            why,
            at: ctx.state(),
            open: open.unwrap_or(0),
        })),
    }
}
