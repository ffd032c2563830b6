//! Guest time on every CPU: the machine's account of hypervisor time, and the one exit tail
//! every path returns to the guest through, which takes this exit's EL2 time into that
//! account and sets this CPU's CNTVOFF_EL2 from it (the rules, and why, are
//! `mtex_vm::guest_clock`'s; `entry.rs` says how an exit's EL2 time is measured).
//!
//! A window that steps several CPUs keeps its own guest time (`stepped_clock.rs`), and sets
//! this account from it at each of its members' exits.
//!
//! Linux mode on several CPUs also halts here for the guest's WFI while a window is open
//! (`halt_for_guest_wfi`): a CPU asleep in its guest would see its clock run on with every
//! other CPU's stepping, and its timer fire far too early, over and over.

use crate::fast_step::FastStep;
use arm_sysregs::el0::accessors::read_cntpct_el0;
use arm_sysregs::el2::accessors::{read_cntvoff_el2, write_cntvoff_el2};
use arm_sysregs::el2::registers::CntvoffEl2;
use core::arch::global_asm;
use core::mem::offset_of;
use core::sync::atomic::{AtomicU64, Ordering};
use mtex_vm::guest_clock::{self as rules, Account};

/// The account update, shared by [`account_eret`] and the tail: x1 = entry, x2 = the
/// account, x3 = resume; x4 = the new offset; x5 and x7 clobbered. `Account::eret`.
macro_rules! account_update {
    () => {
        "1: ldaxp x4, x5, [x2]
        cmp x1, x5
        csel x7, x1, x5, hi
        subs x7, x3, x7
        csel x7, x7, xzr, hi
        add x4, x4, x7
        cmp x3, x5
        csel x5, x3, x5, hi
        stlxp w7, x4, x5, [x2]
        cbnz w7, 1b"
    };
}

/// `mtex_vm::guest_clock::Account`, shared by every CPU: both words are updated together,
/// by one exclusive pair (LDAXP/STLXP), hence the alignment.
#[repr(C, align(16))]
pub struct SharedAccount {
    offset: AtomicU64,
    last_eret: AtomicU64,
}

const _: () = assert!(offset_of!(SharedAccount, offset) == 0);
const _: () = assert!(offset_of!(SharedAccount, last_eret) == 8);

pub static ACCOUNT: SharedAccount = SharedAccount {
    offset: AtomicU64::new(0),
    last_eret: AtomicU64::new(0),
};

/// EL2 instructions of the tail after its counter read, through its ERET, plus one for the
/// exception entry that QEMU's icount also counts (the exact path, no retry of the pair).
pub const EL2_AFTER_EXIT_READ: u64 = 43 + 1;

/// The account starts as the guest does, from the boot CPU's CNTVOFF_EL2 (already set).
pub fn start() {
    let offset = read_cntvoff_el2().bits();
    ACCOUNT.offset.store(offset, Ordering::Relaxed);
    let now = read_cntpct_el0().bits();
    ACCOUNT.last_eret.store(now, Ordering::Release);
}

/// The offset every CPU's clock follows: a CPU coming up starts its guest on it.
pub fn machine_offset() -> u64 {
    ACCOUNT.offset.load(Ordering::Acquire)
}

/// The guest's clock advances by `ticks` on this CPU and the machine's alike (instructions
/// the hypervisor made the guest skip that it would otherwise have executed).
pub fn advance_guest(ticks: u64) {
    ACCOUNT.offset.fetch_sub(ticks, Ordering::AcqRel);
    let offset = read_cntvoff_el2().bits().wrapping_sub(ticks);
    write_cntvoff_el2(CntvoffEl2::from_bits_retain(offset));
}

/// The exit that ends with the tail below proved its guest interval could not have looked at
/// the clock (it retired one instruction that does not: `mtex_trace::clock_read`).
pub fn note_clock_unseen(f: &mut FastStep) {
    f.clock_unseen = 1;
}

/// Sets the machine's account to guest time `guest` at counter value `now` (a window that
/// steps several CPUs keeps the machine's guest time meanwhile), both words together.
pub fn set_account(guest: u64, now: u64) {
    // SAFETY: an exclusive load/store pair on the static, 16-byte aligned account (both
    // words of it, nothing else), retried until the store succeeds; registers as declared.
    unsafe {
        core::arch::asm!(
            "1: ldaxp {x}, {y}, [{a}]",
            "stlxp {t:w}, {o}, {n}, [{a}]",
            "cbnz {t:w}, 1b",
            a = in(reg) &ACCOUNT,
            o = in(reg) now.wrapping_sub(guest),
            n = in(reg) now,
            t = out(reg) _,
            x = out(reg) _,
            y = out(reg) _,
            options(nostack),
        );
    }
}

/// `Account::eret` on the shared account, atomically: returns the new offset.
fn account_eret(entry: u64, resume: u64) -> u64 {
    let offset: u64;
    // SAFETY: an exclusive load/store pair on the static, 16-byte aligned account (both
    // words of it, nothing else), retried until the store succeeds; registers as declared.
    unsafe {
        core::arch::asm!(
            account_update!(),
            in("x1") entry,
            in("x2") &ACCOUNT,
            in("x3") resume,
            out("x4") offset,
            out("x5") _,
            out("x7") _,
            options(nostack),
        );
    }
    offset
}

// The tail: x0 = this CPU's FastStep; the guest's x0..x7 in the frame at sp (as the context
// frame holds them); every other guest register already restored. Takes this exit's EL2 time
// into the account, sets the EL2 timer to the earlier of the watchdog and the sampled phase's
// next unit, which is due on guest time less idle time (`watchdog::sample_in`), sets
// CNTVOFF_EL2 (exact: `rules::seen` and `rules::offset`; coarse:
// `rules::coarse_offset`), restores x0..x7 and returns to the guest. The exact path runs
// straight through (csel, not branches), so that its length is the constant above.
global_asm!(
    ".global mtex_eret_with_guest_time",
    "mtex_eret_with_guest_time:",
    "ldr x1, [x0, #{exit_ts}]",
    "ldr x6, [x0, #{coarse}]",
    "adrp x2, {account}",
    "add x2, x2, :lo12:{account}",
    "mrs x3, cntpct_el0",
    "add x3, x3, #{after}",
    account_update!(),
    // CNTHP_CVAL_EL2 = min(sample_base + (sample_own ? resume : offset) (saturating), the
    // watchdog's deadline): a unit due on the guest's time, or on the CPU's own
    // instructions (`watchdog::sample_own_in`).
    "ldr x5, [x0, #{sample_base}]",
    "ldr x7, [x0, #{sample_own}]",
    "cmp x7, #0",
    "csel x7, x3, x4, ne",
    "adds x5, x5, x7",
    "csinv x5, x5, xzr, cc",
    "adrp x7, {watchdog}",
    "ldr x7, [x7, :lo12:{watchdog}]",
    "cmp x5, x7",
    "csel x5, x5, x7, lo",
    "msr cnthp_cval_el2, x5",
    "mrs x5, cntvoff_el2",
    "cbnz x6, 2f",
    // seen = unseen ? seen : max(seen, the clock as this exit found it)
    "sub x6, x1, x5",
    "ldr x7, [x0, #{seen}]",
    "cmp x6, x7",
    "csel x6, x6, x7, hi",
    "ldr x2, [x0, #{unseen}]",
    "cmp x2, #0",
    "csel x7, x7, x6, ne",
    "str xzr, [x0, #{unseen}]",
    "str x7, [x0, #{seen}]",
    // CNTVOFF_EL2 = min(resume - seen, the account's offset)
    "sub x6, x3, x7",
    "cmp x6, x4",
    "csel x4, x6, x4, lo",
    "msr cntvoff_el2, x4",
    "3: ldp x6, x7, [sp, #48]",
    "ldp x4, x5, [sp, #32]",
    "ldp x2, x3, [sp, #16]",
    "ldp x0, x1, [sp, #0]",
    "add sp, sp, #{size}",
    "eret",
    // Coarse: catch up once a period behind.
    "2: sub x7, x4, x5",
    "cmp x7, x6",
    "b.lo 3b",
    "msr cntvoff_el2, x4",
    "b 3b",
    exit_ts = const offset_of!(FastStep, exit_ts),
    coarse = const offset_of!(FastStep, coarse),
    seen = const offset_of!(FastStep, clock_seen),
    unseen = const offset_of!(FastStep, clock_unseen),
    sample_base = const offset_of!(FastStep, sample_base),
    sample_own = const offset_of!(FastStep, sample_own),
    watchdog = sym crate::watchdog::WATCHDOG_AT,
    account = sym ACCOUNT,
    after = const EL2_AFTER_EXIT_READ,
    size = const crate::context::CONTEXT_SIZE,
);

// The frame's x0..x7, restored above in pairs.
const _: () = assert!(offset_of!(crate::context::GuestContext, x) == 0);

/// Linux mode, in a window on several CPUs: the guest's WFI (trapped, and skipped), waited
/// out here, after this exit let go of the hypervisor's state. The halt is not EL2 time (the
/// account is settled before each WFI and its next exit time starts at each wake-up); while
/// halted the CPU's clock keeps to the machine's, never going back on what the guest saw at
/// its WFI, so that the guest's timer fires when the machine's guest time reaches it.
/// Returns once an interrupt is pending for the guest (ISR_EL1), which it takes after the
/// ERET.
pub fn halt_for_guest_wfi() {
    let mut f = crate::fast_step::this_cpu();
    let f = &mut *f;
    if crate::fast_step::stepped() {
        return crate::stepped_clock::halt(f);
    }
    f.clock_seen = rules::seen(f.clock_seen, f.exit_ts, read_cntvoff_el2().bits(), false);
    loop {
        let now = read_cntpct_el0().bits();
        let account = Account {
            offset: account_eret(f.exit_ts, now),
            last_eret: now,
        };
        let offset = rules::offset(now, f.clock_seen, &account);
        write_cntvoff_el2(CntvoffEl2::from_bits_retain(offset));
        aarch64_cpu::asm::barrier::isb(aarch64_cpu::asm::barrier::SY);
        if !arm_sysregs::el1::accessors::read_isr_el1().is_empty() {
            break;
        }
        crate::watchdog::hold_sample();
        aarch64_cpu::asm::wfi();
        f.exit_ts = read_cntpct_el0().bits();
        crate::watchdog::sample_idle(f, f.exit_ts.wrapping_sub(now));
    }
    // What the guest sees from here on is the tail's to judge, as after any exit.
    f.clock_unseen = 1;
}
