//! Where the kernel's MTE policy acts, one function per Linux hook: kernel entry
//! (mte_disable_tco_entry, mte_set_kernel_gcr, check_mte_async_tcf), exit
//! (mte_check_tfsr_exit, mte_set_user_gcr, clear_mte_async_tcf), context switch
//! (mte_thread_switch), and the TCO-deferral patch's (v1) user_access_begin/end.

use super::kasan::GCR_KERNEL;
use super::layout::TCR_KERNEL;
use super::task::{Task, current};
use crate::programs::{write_sctlr, write_tcr};
use arm_sysregs::el1::accessors::{read_sctlr_el1, read_tcr_el1, read_tfsre0_el1, write_gcr_el1};
use arm_sysregs::el1::registers::GcrEl1;
use core::arch::asm;
use mtex_abi::program as p;
use mtex_abi::scenario::{Policy, Tcf, TcoPolicy};

use mtex_arch::mte_bits::{gcr, sctlr, tfsr};

/// SCTLR_EL1.TCF0, the user bits a task carries (Linux's thread.sctlr_user).
const SCTLR_TCF0_MASK: u64 = sctlr::TCF0_MASK << sctlr::TCF0_SHIFT;

pub fn sctlr_user(tcf0: Tcf) -> u64 {
    (tcf0 as u64) << sctlr::TCF0_SHIFT
}

fn tcf0_of(sctlr_user: u64) -> Tcf {
    Tcf::from_bits(sctlr_user >> sctlr::TCF0_SHIFT)
}

/// Boot-time MTE setup for a run: TCR_EL1 (TCMA1 as the policy says), SCTLR_EL1 (MMU, ATA,
/// ATA0, the kernel's TCF, init's TCF0 = none), the kernel's GCR_EL1.
pub fn apply(policy: Policy) {
    let tcr = TCR_KERNEL | if policy.tcma1_set() { p::TCR_TCMA1 } else { 0 };
    let sctlr = super::boot::SCTLR_KERNEL | (policy.kasan as u64) << sctlr::TCF_SHIFT;
    let (old_tcr, old_sctlr) = (read_tcr_el1().bits(), read_sctlr_el1().bits());
    // Only what changes is written (and trapped, and reported).
    if tcr != old_tcr {
        write_tcr(tcr);
    }
    if sctlr != old_sctlr {
        write_sctlr(sctlr);
    }
    // SAFETY: GCR_EL1 only steers IRG's choice of tags.
    unsafe { write_gcr_el1(GcrEl1::from_bits_retain(GCR_KERNEL)) };
    // Start with no asynchronous fault on record. `msr ..., xzr` rather than arm-sysregs'
    // writers, which would take the zero in a register: a `mov` more.
    // SAFETY: clears the fault status registers.
    unsafe {
        asm!(
            ".arch_extension memtag",
            "msr tfsr_el1, xzr",
            "msr tfsre0_el1, xzr",
            "isb"
        )
    };
}

fn set_tco(on: bool) {
    // SAFETY: TCO only changes whether tag checks happen.
    unsafe {
        if on {
            asm!(".arch_extension memtag", "msr tco, #1");
        } else {
            asm!(".arch_extension memtag", "msr tco, #0");
        }
    }
}

/// mte_disable_tco_entry (v6.18) or, under `uaccess-tco`, the patch's
/// set_kernel_mte_policy: re-enable checking that exception entry turned off.
fn disable_tco_entry(sctlr_user: u64) {
    let policy = super::policy();
    let clear = match policy.tco {
        TcoPolicy::Entry => policy.kasan != Tcf::None || tcf0_of(sctlr_user).reports_sync(),
        TcoPolicy::Uaccess => policy.kasan != Tcf::None,
    };
    if clear {
        set_tco(false);
    }
}

/// mte_check_tfsr_el1: an asynchronous kernel tag-check fault would be recorded here.
fn check_tfsr_el1() {
    let tfsr: u64;
    // An `mrs` of its own: arm-sysregs' reader, `nomem`, lets the compiler pair the stores
    // around it, one instruction less on every kernel entry and exit that checks.
    // SAFETY: reading TFSR_EL1 has no side effects.
    unsafe { asm!(".arch_extension memtag", "mrs {}, tfsr_el1", out(reg) tfsr) };
    if tfsr & tfsr::TF1 != 0 {
        super::die(format_args!(
            "asynchronous kernel tag-check fault (TFSR_EL1 {tfsr:#x})"
        ));
    }
}

/// enter_from_user_mode plus kernel_entry's MTE steps.
pub fn enter_from_user_mode() {
    // SAFETY: the only reference to the running task while the entry runs; nothing here
    // schedules.
    let t = unsafe { current() };
    let policy = super::policy();
    if tcf0_of(t.sctlr_user) as u64 & 2 != 0 {
        // check_mte_async_tcf: a user async fault shows in TFSRE0_EL1.
        let tfsre0 = read_tfsre0_el1().bits();
        if tfsre0 & tfsr::TF0 != 0 {
            super::die(format_args!(
                "asynchronous user tag-check fault (task {})",
                t.pid
            ));
        }
    }
    if policy.kasan != Tcf::None {
        // mte_set_kernel_gcr
        // SAFETY: GCR_EL1 only steers IRG.
        unsafe { write_gcr_el1(GcrEl1::from_bits_retain(GCR_KERNEL)) };
    }
    // kernel_entry's ISB with MTE: the non-self-synchronising register updates of entry
    // (GCR_EL1) take effect before kernel code runs.
    // SAFETY: a barrier.
    unsafe { asm!("isb") };
    disable_tco_entry(t.sctlr_user);
}

/// enter_from_kernel_mode's MTE steps: mte_check_tfsr_entry (no barrier: asynchronous
/// faults are synchronised into TFSR_EL1 by the exception entry), mte_disable_tco_entry.
pub fn enter_from_kernel_mode() {
    if super::policy().checks_tfsr() {
        check_tfsr_el1();
    }
    disable_tco_entry(super::task::current_sctlr_user());
}

/// exit_to_kernel_mode's MTE step: mte_check_tfsr_exit.
pub fn exit_to_kernel_mode() {
    if super::policy().checks_tfsr() {
        // SAFETY: barriers only.
        unsafe { asm!("dsb nsh", "isb") };
        check_tfsr_el1();
    }
}

/// exit_to_user_mode's MTE steps: mte_check_tfsr_exit, mte_set_user_gcr,
/// clear_mte_async_tcf.
pub fn exit_to_user_mode() {
    // SAFETY: the only reference to the running task while the exit runs; nothing here
    // schedules.
    let t = unsafe { current() };
    let policy = super::policy();
    if policy.checks_tfsr() {
        // Asynchronous faults are synchronised into TFSR_EL1 on entry, but exit needs the
        // explicit barriers.
        // SAFETY: barriers only.
        unsafe { asm!("dsb nsh", "isb") };
        check_tfsr_el1();
    }
    if tcf0_of(t.sctlr_user) as u64 & 2 != 0 {
        // clear_mte_async_tcf
        // `msr ..., xzr` as at `apply`: the crate's writer would add a `mov` here.
        // SAFETY: clears the user fault status after the stores that precede it.
        unsafe { asm!(".arch_extension memtag", "dsb ish", "msr tfsre0_el1, xzr") };
    }
    if policy.kasan != Tcf::None {
        // mte_set_user_gcr
        // SAFETY: GCR_EL1 only steers IRG.
        unsafe { write_gcr_el1(GcrEl1::from_bits_retain(t.gcr_user_excl)) };
    }
}

/// prctl(PR_SET_TAGGED_ADDR_CTRL): the task's TCF0 and tag mask, applied at once
/// (mte_update_sctlr_user + update_sctlr_el1, mte_update_gcr_excl).
pub fn set_tagged_addr_ctrl(t: &mut Task, tcf0: Tcf, include: u64) {
    let old = t.sctlr_user;
    t.sctlr_user = sctlr_user(tcf0);
    t.gcr_user_excl = !include & gcr::EXCLUDE_MASK;
    update_sctlr_user(old, t.sctlr_user);
    if super::policy().kasan == Tcf::None {
        // SAFETY: GCR_EL1 only steers IRG.
        unsafe { write_gcr_el1(GcrEl1::from_bits_retain(t.gcr_user_excl)) };
    }
}

/// mte_thread_switch: mte_update_gcr_excl (without KASAN; with it, entry and exit set
/// GCR_EL1), mte_disable_tco_entry, and the TFSR_EL1 check with its ISB.
pub fn thread_switch(next: &Task) {
    let policy = super::policy();
    if policy.kasan == Tcf::None {
        // SAFETY: GCR_EL1 only steers IRG. (Linux also sets RRND; mtex keeps IRG seeded by
        // RGSR_EL1 so that runs repeat exactly.)
        unsafe { write_gcr_el1(GcrEl1::from_bits_retain(next.gcr_user_excl)) };
    }
    disable_tco_entry(next.sctlr_user);
    if policy.checks_tfsr() {
        // SAFETY: a barrier.
        unsafe { asm!("isb") };
        check_tfsr_el1();
    }
}

/// __switch_to's update_sctlr_el1, only when the user bits differ: SCTLR_EL1 is expensive
/// to write (here: it traps). The ISB makes TCF0 apply to the kernel's uaccess at once.
pub fn update_sctlr_user(prev: u64, next: u64) {
    if prev != next {
        let old = read_sctlr_el1().bits();
        write_sctlr((old & !SCTLR_TCF0_MASK) | next);
    }
}

/// The TCO-deferral patch's (v1) user_access_begin: clear TCO for the section when only the
/// user task wants checking (with KASAN, TCO is already clear).
pub fn user_access_begin() {
    if uaccess_toggles_tco() {
        set_tco(false);
    }
}

/// user_access_end: set TCO again, under the same condition, so TCO is never rewritten with
/// the value it has.
pub fn user_access_end() {
    if uaccess_toggles_tco() {
        set_tco(true);
    }
}

fn uaccess_toggles_tco() -> bool {
    let policy = super::policy();
    policy.tco == TcoPolicy::Uaccess
        && policy.kasan == Tcf::None
        // SAFETY: one field read of the running task; no other reference is live here.
        && tcf0_of(unsafe { current() }.sctlr_user).reports_sync()
}
