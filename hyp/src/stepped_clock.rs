//! A window's guest time while it steps several CPUs (`mtex_vm::stepped_clock` says what it
//! is, and why): the one account every member shares, fed at each member's exits with the
//! instructions its trace retired and at its halts with the machine's idle time; the
//! members' counter reads, which trap here (CNTHCTL_EL2.EL1TVCT) and are answered from it;
//! and the machine's account of hypervisor time, kept to it meanwhile (`guest_clock.rs`).
//!
//! A CPU keeps this time from the exit at which it joins a window on a machine of several
//! CPUs (exact guest time, FEAT_ECV) to the exit at which it leaves. The account is behind a
//! spin lock of its own, since a halted member updates it outside the hypervisor's state.

use crate::fast_step::FastStep;
use arm_sysregs::el0::accessors::read_cntpct_el0;
use arm_sysregs::el2::accessors::{read_cntvoff_el2, write_cntvoff_el2};
use arm_sysregs::el2::registers::CntvoffEl2;
use mtex_vm::stepped_clock::Stepped;
use spin::mutex::SpinMutex;

static STEPPED: SpinMutex<Stepped, crate::global::YieldCpu> = SpinMutex::new(Stepped::new());

/// FEAT_ECV (ID_AA64MMFR0_EL1.ECV): CNTHCTL_EL2.EL1TVCT exists. Without it the guest's
/// counter reads cannot be answered, and the clocks keep to the rules of exits alone.
fn has_ecv() -> bool {
    arm_sysregs::el1::accessors::read_id_aa64mmfr0_el1().ecv() != 0
}

/// The guest's counter reads trap to EL2 (`on`) or not (a CPU starts with them untrapped,
/// `smp.rs`).
fn trap_reads(on: bool) {
    use arm_sysregs::el2::accessors::{read_cnthctl_el2, write_cnthctl_el2};
    use arm_sysregs::el2::registers::CnthctlEl2;
    let mut c = read_cnthctl_el2();
    if c.contains(CnthctlEl2::EL1TVCT) != on {
        c.set(CnthctlEl2::EL1TVCT, on);
        write_cnthctl_el2(c);
    }
}

/// Right after the trace took in this exit's instruction (holding the hypervisor's state):
/// a member hands the window its trace's new retired instructions (`retired`: the trace's
/// count since its start), before anything this exit does reads the window's time.
pub fn note_retired(retired: impl FnOnce(&FastStep) -> u64) {
    if crate::fast_step::stepped() {
        let mut f = crate::fast_step::this_cpu();
        let retired = retired(&f);
        let n = retired.saturating_sub(f.stepped_retired);
        f.stepped_retired = retired;
        STEPPED.lock().retire(n);
    }
}

/// At the end of every full exit (holding the hypervisor's state; `member`: this CPU counts
/// in a window on several CPUs, `retired` its trace's count, asked for only then): it joins
/// the window's time, keeps to it, or leaves it, and the machine's account follows.
pub fn at_exit(member: bool, retired: impl FnOnce(&FastStep) -> u64) {
    let stepped = crate::fast_step::stepped();
    if !member && !stepped {
        return;
    }
    let mut f = crate::fast_step::this_cpu();
    let f = &mut *f;
    let member = member && f.coarse == 0 && (stepped || has_ecv());
    if !member && !stepped {
        return;
    }
    let now = read_cntpct_el0().bits();
    let guest = {
        let mut s = STEPPED.lock();
        match (stepped, member) {
            (false, _) => {
                // The machine's guest time as this exit entered EL2, as `guest_clock` gave
                // it to a window opened at this exit.
                let machine = f
                    .exit_ts
                    .saturating_sub(crate::guest_clock::machine_offset());
                // What its guest may have read of its own clock, up to this exit.
                let seen = mtex_vm::guest_clock::seen(
                    f.clock_seen,
                    f.exit_ts,
                    read_cntvoff_el2().bits(),
                    f.clock_unseen != 0,
                );
                s.join(now, machine, seen);
                f.stepped_retired = retired(f);
                s.now(now)
            }
            (true, true) => s.now(now),
            (true, false) => s.leave(now),
        }
    };
    if stepped != member {
        crate::fast_step::set_stepped(member);
        trap_reads(member);
    }
    keep_to(f, guest, now);
}

/// This CPU returns to its guest at the window's time `guest` (or what its guest saw before
/// it joined, if later: never back), and the machine's account is set to it. Nothing the
/// guest did in this exit's interval raises what it has seen: its reads were answered.
fn keep_to(f: &mut FastStep, guest: u64, now: u64) {
    f.clock_seen = f.clock_seen.max(guest);
    f.clock_unseen = 1;
    crate::guest_clock::set_account(guest, now);
}

/// A trapped read of the virtual counter (CNTVCT_EL0, CNTVCTSS_EL0): the window's time as
/// this exit entered EL2, never less than what this CPU's guest, or any member's when it
/// joined, has seen (`Stepped::read`). A CPU that keeps no window time (a read that trapped
/// before its first exit cleared the trap) gets its own counter.
pub fn read(f: &mut FastStep) -> u64 {
    let value = if crate::fast_step::stepped() {
        STEPPED.lock().read(f.exit_ts)
    } else {
        f.exit_ts.wrapping_sub(read_cntvoff_el2().bits())
    };
    f.clock_seen = f.clock_seen.max(value);
    f.clock_seen
}

/// The window's time for a phase record (its open and close): the machine's guest time as
/// this exit entered EL2, None when this CPU keeps no window time.
pub fn guest_time(f: &FastStep) -> Option<u64> {
    crate::fast_step::stepped().then(|| STEPPED.lock().now(f.exit_ts))
}

/// A member's WFI (`guest_clock::halt_for_guest_wfi`): halted in EL2 until an interrupt is
/// pending for its guest. While every member is halted the window's time is the counter's
/// advance, so the offset set before each WFI makes the guest's timer fire exactly when the
/// window's time reaches it; while another member steps, it may fire early, and the CPU
/// halts again with its offset set anew.
pub fn halt(f: &mut FastStep) {
    loop {
        let now = read_cntpct_el0().bits();
        let guest = {
            let mut s = STEPPED.lock();
            s.halt(now);
            s.now(now)
        };
        write_cntvoff_el2(CntvoffEl2::from_bits_retain(now - guest.max(f.clock_seen)));
        aarch64_cpu::asm::barrier::isb(aarch64_cpu::asm::barrier::SY);
        let pending = !arm_sysregs::el1::accessors::read_isr_el1().is_empty();
        if !pending {
            aarch64_cpu::asm::wfi();
        }
        let now = read_cntpct_el0().bits();
        let guest = {
            let mut s = STEPPED.lock();
            s.wake(now);
            s.now(now)
        };
        if pending {
            // The exit tail charges from here: the halt is not EL2 time.
            f.exit_ts = now;
            keep_to(f, guest, now);
            return;
        }
    }
}
