//! Guest exits: one dispatch on the exception class, one module per class.

use crate::context::GuestContext;
use crate::global::HYP;
use crate::report::{self, RUN_EXITS};
use crate::state::Hyp;
use arm_sysregs::el2::accessors::{read_esr_el2, read_far_el2, read_hpfar_el2};
use core::sync::atomic::{AtomicU8, Ordering};
use mtex_abi::report::ExitReason;
use mtex_arch::el2_bits::{hpfar, spsr};
use mtex_arch::{Esr, ExceptionClass};
use mtex_vm::window::{Steps, WindowState};

/// Vector kinds passed by `entry.rs` for exceptions from the guest (lower EL, AArch64).
const SYNC: u64 = 0;
const IRQ: u64 = 1;
const FIQ: u64 = 2;

/// Called by the vectors with the saved guest context; returning resumes the guest.
pub extern "C" fn dispatch(kind: u64, ctx: &mut GuestContext) {
    if kind == SYNC && step_alone(ctx) {
        return;
    }
    let (power_off, halt) = HYP.with(|hyp| {
        let esr = Esr(read_esr_el2().bits());
        // This CPU's state is looked up once for what comes before the handler, and once
        // for what comes after it: each lookup reads TPIDR_EL2 and checks the pointer.
        let v = hyp.vcpu();
        // A breakpoint of the TCO watch (no traced phase) is an exit of its own, not a step.
        let step = kind == SYNC
            && match esr.ec() {
                ExceptionClass::SoftwareStepLower => true,
                ExceptionClass::BreakpointLower => v.tracer.active(),
                _ => false,
            };
        let v = if count_exit(&mut v.counters, ctx, step) {
            check_step_bound(hyp, ctx);
            hyp.vcpu()
        } else {
            v
        };
        // An interrupt taken before the stepped instruction ran (SPSR_EL2.SS still set)
        // leaves it pending; anything else means it completed, trapped or faulted.
        let not_yet_run = kind != SYNC && ctx.spsr & spsr::SS != 0;
        // A step exit taken from the active-pending state (ISS.ISV = 0) is the first
        // instruction of an exception handler at EL1: evidence of an exception entry that
        // the guest cannot forge (it can point VBAR_EL1 and ELR_EL1 anywhere).
        let exception_entry = step
            && esr.ec() == ExceptionClass::SoftwareStepLower
            && !esr.step_completed_an_instruction();
        if v.tracer.active() && !not_yet_run {
            let stage2_abort = kind == SYNC && esr.ec() == ExceptionClass::DataAbortLower;
            v.tracer
                .retire(ctx, exception_entry, stage2_abort, &v.controls);
        }
        if v.tracer.active() {
            // Before anything this exit does reads the guest's time (the inert steps the
            // fast path retired since the last full exit included).
            crate::stepped_clock::note_retired(|f| v.tracer.retired_with(f));
        }
        match kind {
            SYNC => sync_exit(hyp, ctx, esr),
            // Linux mode: only a run routes interrupts here, to stop; the interrupt is Linux's
            // and stays pending for it (never acknowledged here).
            IRQ if hyp.linux => hyp.vcpu().tracer.note_irq_exit(),
            IRQ => crate::watchdog::irq_exit(hyp, ctx),
            // Linux mode: the timer of a sampled window's next unit (`fiq.rs`).
            FIQ if hyp.linux => crate::fiq::exit(hyp, ctx),
            _ => unhandled(hyp, ctx),
        }
        // A sampled phase's unit that has retired its instructions ends here.
        crate::phase::sample::at_exit(hyp, ctx, exception_entry);
        // Read under the lock: once it is let go, another CPU may start this one again.
        let (power_off, halt) = crate::fast_step::take_exit_requests();
        // A window on every CPU: this CPU joins it, or leaves it.
        crate::phase::window::at_exit(hyp, ctx, power_off);
        // A window stepping several CPUs keeps their guest time.
        let member = crate::phase::window::stepped_member(hyp);
        // The handler may have opened or closed a traced phase.
        let v = hyp.vcpu();
        if v.tracer.active() {
            v.tracer.prepare(ctx, &v.controls);
        }
        crate::stepped_clock::at_exit(member, |f| {
            if v.tracer.active() {
                v.tracer.retired_with(f)
            } else {
                0
            }
        });
        STEPS_ALONE.store(steps_alone(hyp) as u8, Ordering::Relaxed);
        (power_off, halt)
    });
    if halt {
        crate::guest_clock::halt_for_guest_wfi();
    }
    if power_off {
        // The guest's CPU_OFF, accepted: the firmware powers this CPU down and never returns
        // here (a CPU_ON starts it afresh at `smp::secondary_entry`).
        let _ = smccc::psci::cpu_off::<smccc::Smc>();
        loop {
            aarch64_cpu::asm::wfi();
        }
    }
}

/// How a tracing CPU's step exits may go without the state's lock ([`step_alone`]): a
/// `mtex_vm::window::Steps`, set at the end of every exit that holds it, from what that exit
/// left.
static STEPS_ALONE: AtomicU8 = AtomicU8::new(Steps::Locked as u8);

/// What the state allows the step exits after this one (`mtex_vm::window::steps`).
fn steps_alone(hyp: &Hyp) -> Steps {
    let window = match &hyp.window {
        None => WindowState::None,
        Some(w) if w.closing() => WindowState::Closing,
        Some(_) => WindowState::Open,
    };
    mtex_vm::window::steps(
        hyp.sample.is_some(),
        hyp.has_instruments(),
        hyp.machine_cpus.len(),
        window,
    )
}

/// A step exit of a tracing CPU, handled without the state's lock when [`STEPS_ALONE`]
/// allows: what the locked path does for a step, which touches only this CPU's counters,
/// step engine, block and the stepped window's own clock. False (nothing done) when it
/// must take the lock: another exit, a CPU not tracing, or the step bound's check is due.
/// CPUs stepping in a window would otherwise queue for the lock at every instruction.
#[inline(always)]
fn step_alone(ctx: &mut GuestContext) -> bool {
    let alone = Steps::from_u8(STEPS_ALONE.load(Ordering::Relaxed));
    if alone == Steps::Locked {
        return false;
    }
    let esr = Esr(read_esr_el2().bits());
    if !matches!(
        esr.ec(),
        ExceptionClass::SoftwareStepLower | ExceptionClass::BreakpointLower
    ) {
        return false;
    }
    // SAFETY: the lock is not held here and these references end with this function;
    // per-PC instruments cannot move between CPUs while `STEPS_ALONE` allows this.
    let Some((counters, tracer, controls)) = (unsafe { Hyp::own_step_parts() }) else {
        return false;
    };
    // A breakpoint of the TCO watch (no traced phase) is an exit of its own; and the
    // bound's check (`count_exit`) takes the lock.
    if !tracer.active() || (counters.step_exits + 1) & 0x3ff == 0 {
        return false;
    }
    counters.step_exits += 1;
    let exception_entry =
        esr.ec() == ExceptionClass::SoftwareStepLower && !esr.step_completed_an_instruction();
    tracer.retire(ctx, exception_entry, false, controls);
    crate::stepped_clock::note_retired(|f| tracer.retired_with(f));
    tracer.prepare(ctx, controls);
    let in_window = alone == Steps::AloneInWindow;
    crate::stepped_clock::at_exit(in_window, |f| tracer.retired_with(f));
    if in_window {
        // Hands QEMU's round-robin to the next CPU, as a wait for the lock did: each CPU
        // then steps about one instruction per turn, as CPUs running side by side would,
        // rather than a whole turn's worth while the others (a guest lock's waiters among
        // them) stand still.
        crate::global::yield_cpu();
    }
    true
}

/// Counts the exit in this CPU's counters; true when the step bound is due for a check
/// (every 1024th step through the full path: cheap enough at that rate).
#[inline(always)]
fn count_exit(c: &mut crate::state::Counters, ctx: &GuestContext, step: bool) -> bool {
    if step {
        c.step_exits += 1;
        c.step_exits & 0x3ff == 0
    } else {
        c.exits += 1;
        c.exits_with_tco += ctx.state().tco as u64;
        // The trap fast path's exits are added as they are framed (`Reporter::flush`).
        RUN_EXITS.fetch_add(1, Ordering::Relaxed);
        false
    }
}

/// Traced phases are bounded by steps as well as by the watchdog's counter time: every step
/// is an exception round trip through EL2, which takes at least one tick of the counter on
/// any machine (a nanosecond at QEMU's 1 GHz; far more on silicon), so a run that has
/// stepped more instructions than its budget has ticks is one whose counter is not advancing
/// — and whose watchdog can never fire. It ends with a record instead of running on.
#[cold]
#[inline(never)]
fn check_step_bound(hyp: &mut Hyp, ctx: &GuestContext) {
    // Linux mode arms no EL2 watchdog (the host watches the guest clock), and its windows
    // add up over a whole boot: the bound is the watchdog's, so it does not apply.
    if hyp.linux {
        return;
    }
    let steps = hyp.vcpu().counters.step_exits + crate::fast_step::this_cpu().steps;
    let ticks = hyp
        .watchdog_ms
        .saturating_mul(crate::watchdog::counter_hz())
        / 1000;
    if steps > ticks {
        hyp.finish(ExitReason::TraceUnsupported {
            at: ctx.state(),
            reason: mtex_abi::report::Message::truncated(
                "more steps than the budget has counter ticks: the clock is not advancing",
            ),
        });
    }
}

fn sync_exit(hyp: &mut Hyp, ctx: &mut GuestContext, esr: Esr) {
    match esr.ec() {
        // Another CPU made this one exit (a window opened on every CPU): the access runs
        // again once the root is back.
        ExceptionClass::InstructionAbortLower | ExceptionClass::DataAbortLower
            if crate::phase::window::kicked_here(hyp) => {}
        // The step itself is all: retire/prepare around this match do the work.
        ExceptionClass::SoftwareStepLower | ExceptionClass::BreakpointLower
            if hyp.vcpu().tracer.active() => {}
        ExceptionClass::BreakpointLower if hyp.tco.armed() => hyp.tco.hit(ctx),
        ExceptionClass::SysRegTrap => crate::sysreg_trap::handle(hyp, ctx, esr),
        ExceptionClass::Hvc64 => crate::hypercall::handle(hyp, ctx),
        ExceptionClass::Smc64 => crate::psci::handle_guest_smc(hyp, ctx),
        ExceptionClass::WfiWfe => wfx(hyp, ctx),
        ExceptionClass::DataAbortLower if crate::hypercall::is_protected_write(hyp, esr) => {
            crate::hypercall::protected_write(hyp, ctx)
        }
        ExceptionClass::DataAbortLower if crate::doorbell::is_doorbell(hyp, esr) => {
            crate::doorbell::ring(hyp, ctx, esr)
        }
        _ => unhandled(hyp, ctx),
    }
}

/// WFI/WFE (HCR_EL2.TWI/TWE): the built-in guest's complete at once, as the architecture
/// allows (a wake-up event may come at any time). A spin of WFE then advances guest time and
/// meets the watchdog, where an untrapped one under -icount would freeze every counter.
/// Linux's WFI traps only in a window on several CPUs (`phase/window.rs`), and the CPU halts for
/// it once this exit is over (`guest_clock::halt_for_guest_wfi`).
fn wfx(hyp: &mut Hyp, ctx: &mut GuestContext) {
    let c = &mut hyp.vcpu().counters;
    c.wfx_traps += 1;
    c.emulated += 1;
    ctx.skip_instruction();
    if hyp.linux {
        crate::fast_step::request_halt_wfi();
    }
}

/// Any exit the hypervisor has no handler for ends the run with its syndrome.
#[cold]
#[inline(never)]
pub fn unhandled(hyp: &mut Hyp, ctx: &GuestContext) -> ! {
    hyp.finish(ExitReason::UnhandledGuestExit {
        esr: read_esr_el2().bits(),
        far: read_far_el2().bits(),
        hpfar: hpfar::ipa_page(read_hpfar_el2().bits()),
        at: ctx.state(),
    })
}

/// An exception taken at EL2 itself, or from AArch32: a hypervisor bug.
pub extern "C" fn hyp_exception(vector: u64, esr: u64, elr: u64, far: u64) -> ! {
    report::die(ExitReason::HypException {
        vector: vector as u8,
        esr,
        elr,
        far,
    })
}
