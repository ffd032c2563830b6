//! The kernel on several CPUs (`mtex.cpus`): the secondary CPUs started through PSCI, the
//! kernel lock, and the places where a CPU waits for the others.
//!
//! One lock serialises all kernel code, as Linux's big kernel lock once did: a CPU takes it
//! on every entry from EL0 and lets it go on the way back, and its idle loop and waits let it
//! go while they poll. Every kernel global (`KCell`) is reached with it held. What the CPUs
//! poll — the lock, each CPU's kick, the phase's arrivals — lives in one page the linear
//! map gives Normal memory without the Tagged attribute: its loads and stores are never tag
//! checked, so how long a CPU waits changes its instruction count, never its checked
//! accesses. On one CPU none of this runs: whether the kernel is on several CPUs is a bit of
//! TPIDR_EL1, read without a memory access, so one CPU's counts are those of a kernel
//! without it.

use crate::by_address::ByAddress;
use crate::mmu::Page;
use arm_sysregs::el1::accessors::{read_mpidr_el1, write_tpidr_el1};
use arm_sysregs::el1::registers::TpidrEl1;
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use smccc::Smc;
use smccc::psci::{self, LowestAffinityLevel};

/// The most CPUs (`mtex_abi::scenario::MAX_KERNEL_CPUS`).
pub const MAX_CPUS: usize = mtex_abi::scenario::MAX_KERNEL_CPUS as usize;

/// TPIDR_EL1: the CPU's index, and this bit when the kernel runs on several CPUs.
const SMP_BIT: u64 = 1 << 16;

/// This CPU's index.
#[inline(always)]
pub fn this_cpu() -> usize {
    (tpidr() & 0xffff) as usize
}

/// True when the kernel runs on several CPUs.
#[inline(always)]
pub fn smp() -> bool {
    tpidr() & SMP_BIT != 0
}

#[inline(always)]
fn tpidr() -> u64 {
    let v: u64;
    // An `mrs` of its own rather than arm-sysregs' reader, which also promises the flags
    // survive (`preserves_flags`): inlined into the kernel's paths, that promise lets the
    // compiler lay them out otherwise, with other instruction counts.
    // SAFETY: reading TPIDR_EL1 has no side effects.
    unsafe { core::arch::asm!("mrs {}, tpidr_el1", out(reg) v, options(nomem, nostack)) };
    v
}

fn set_tpidr(cpu: usize, smp: bool) {
    let v = cpu as u64 | if smp { SMP_BIT } else { 0 };
    // SAFETY: TPIDR_EL1 is the kernel's own per-CPU register, read only by `tpidr`.
    unsafe { write_tpidr_el1(TpidrEl1::from_bits_retain(v)) };
}

/// What the CPUs poll, in the page mapped without the Tagged attribute (`boot.rs`).
#[repr(C)]
struct Shared {
    /// The kernel lock: a ticket lock.
    next: AtomicU32,
    serving: AtomicU32,
    /// CPUs started and in their idle loop.
    online: AtomicU32,
    /// How many times each CPU was kicked (a task of its made runnable, a policy to apply).
    kicks: [AtomicU64; MAX_CPUS],
    /// The policy each CPU last applied (`mte_policy::apply`), as a run id.
    applied: [AtomicU32; MAX_CPUS],
    /// For the phase's open and its close: the run whose CPUs are arriving, how many have,
    /// and the run for which it happened.
    arrivals: [Arrivals; 2],
    /// How many PHASE calls of each kind a run's phase waits for (one per workload copy).
    expected: AtomicU32,
}

#[repr(C)]
struct Arrivals {
    run: AtomicU32,
    count: AtomicU32,
    done: AtomicU32,
}

const _: () = assert!(size_of::<Shared>() <= 4096);

pub static SHARED_PAGE: ByAddress<Page> = ByAddress::new(Page([0; 4096]));

fn shared() -> &'static Shared {
    // SAFETY: the page is all zeroes at first, a valid `Shared` (atomics); it is reached only
    // through this shared reference, whose fields are atomics.
    unsafe { &*(SHARED_PAGE.ptr() as *const Shared) }
}

/// Takes the kernel lock (on several CPUs).
#[inline(always)]
pub fn lock() {
    if smp() {
        let s = shared();
        let ticket = s.next.fetch_add(1, Ordering::Relaxed);
        while s.serving.load(Ordering::Acquire) != ticket {
            pause();
        }
    }
}

/// Lets the kernel lock go (on several CPUs).
#[inline(always)]
pub fn unlock() {
    if smp() {
        let s = shared();
        s.serving
            .store(s.serving.load(Ordering::Relaxed) + 1, Ordering::Release);
    }
}

/// A waiter's pause: YIELD lets QEMU's round-robin run the CPU it waits for.
#[inline(always)]
fn pause() {
    // SAFETY: a hint.
    unsafe { core::arch::asm!("yield", options(nomem, nostack, preserves_flags)) };
}

/// Kicks `cpu`: its idle loop looks for work again.
pub fn kick(cpu: usize) {
    if smp() && cpu != this_cpu() {
        shared().kicks[cpu].fetch_add(1, Ordering::Release);
    }
}

/// What a secondary CPU enters with, cleaned to the point of coherency (it reads it with its
/// MMU off): CPU 0's translation and system control settings, its stack, where to go. One
/// cache line of 64 bytes, so that one clean covers it.
#[repr(C, align(64))]
struct SecondaryBoot {
    mair: u64,
    tcr: u64,
    ttbr0: u64,
    ttbr1: u64,
    sctlr: u64,
    stack_top: u64,
    main: u64,
    cpu: u64,
}

static BOOTS: ByAddress<[SecondaryBoot; MAX_CPUS]> = ByAddress::new(
    [const {
        SecondaryBoot {
            mair: 0,
            tcr: 0,
            ttbr0: 0,
            ttbr1: 0,
            sctlr: 0,
            stack_top: 0,
            main: 0,
            cpu: 0,
        }
    }; MAX_CPUS],
);

/// Starts CPUs 1..`n` (the first `n - 1` other CPUs PSCI knows, in affinity order) and waits
/// until each is in its idle loop; CPU 0 holds the kernel lock from here on. Dies if the
/// machine has fewer CPUs.
pub fn start_secondaries(n: usize) {
    set_tpidr(0, n > 1);
    if n <= 1 {
        return;
    }
    lock();
    let me = read_mpidr_el1().bits() & 0xff_00ff_ffff;
    // QEMU's virt gives CPUs Aff0 0..15 in clusters Aff1 0..; the guest's tree lists one.
    let others = (0..(MAX_CPUS as u64).div_ceil(16))
        .flat_map(|aff1| (0..16u64).map(move |aff0| aff1 << 8 | aff0))
        .filter(|&id| id != me)
        .filter(|&id| psci::affinity_info::<Smc>(id, LowestAffinityLevel::All).is_ok());
    let (mair, tcr, ttbr0, ttbr1, sctlr): (u64, u64, u64, u64, u64);
    // One `asm!` for the five rather than arm-sysregs' readers: after five separate reads the
    // compiler spills two of them with a store each instead of one pair: an instruction
    // more, and the guest's instruction counts are what mtex measures.
    // SAFETY: reading translation and control registers has no side effects.
    unsafe {
        core::arch::asm!(
            "mrs {}, mair_el1", "mrs {}, tcr_el1", "mrs {}, ttbr0_el1", "mrs {}, ttbr1_el1",
            "mrs {}, sctlr_el1",
            out(reg) mair, out(reg) tcr, out(reg) ttbr0, out(reg) ttbr1, out(reg) sctlr,
        )
    };
    let mut started = 1;
    for (cpu, mpidr) in (1..n).zip(others) {
        let stack = super::page_alloc::alloc_stack();
        // SAFETY: CPU `cpu`'s record, written before its CPU_ON and read by that CPU only.
        let b = unsafe { &mut (*BOOTS.ptr())[cpu] };
        *b = SecondaryBoot {
            mair,
            tcr,
            ttbr0,
            ttbr1,
            sctlr,
            stack_top: stack + super::layout::THREAD_SIZE,
            main: secondary_main as *const () as u64,
            cpu: cpu as u64,
        };
        let pa = super::layout::pa_of(b as *mut SecondaryBoot as u64);
        // SAFETY: cleaning the record's lines to the point of coherency changes no data.
        unsafe {
            core::arch::asm!("dc cvac, {}", "dsb sy", in(reg) b as *mut SecondaryBoot as u64)
        };
        let entry = super::layout::pa_of(mtex_kernel_secondary_entry as *const () as u64);
        if let Err(e) = psci::cpu_on::<Smc>(mpidr, entry, pa) {
            super::die(format_args!("CPU_ON of {mpidr:#x} for CPU {cpu}: {e:?}"));
        }
        started += 1;
    }
    if started < n {
        super::die(format_args!(
            "the scenario asks for {n} CPUs; the machine has {started}"
        ));
    }
    unlock();
    while shared().online.load(Ordering::Acquire) < n as u32 - 1 {
        pause();
    }
    lock();
}

unsafe extern "C" {
    fn mtex_kernel_secondary_entry();
}

// A secondary CPU's first instructions: EL1, MMU off, x0 = its `SecondaryBoot` (physical).
// It takes CPU 0's translation settings, turns its MMU on (the boot identity map keeps this
// code where it is), and jumps to `secondary_main` in the upper half on its own stack.
core::arch::global_asm!(
    ".global mtex_kernel_secondary_entry",
    "mtex_kernel_secondary_entry:",
    "ldp x1, x2, [x0, #0]",
    "msr mair_el1, x1",
    "msr tcr_el1, x2",
    "ldp x1, x2, [x0, #16]",
    "msr ttbr0_el1, x1",
    "msr ttbr1_el1, x2",
    // Nothing of the firmware's may linger in this CPU's TLB.
    "tlbi vmalle1",
    "dsb nsh",
    "ldp x1, x2, [x0, #32]",
    "ldp x3, x4, [x0, #48]",
    "isb",
    "msr sctlr_el1, x1",
    "isb",
    "mov sp, x2",
    "mov x0, x4",
    "br x3",
);

/// A secondary CPU in the upper half: its vectors, its idle task, then its idle loop.
extern "C" fn secondary_main(cpu: u64) -> ! {
    let cpu = cpu as usize;
    set_tpidr(cpu, true);
    super::boot::install_vectors();
    lock();
    super::task::init_idle_task(cpu);
    unlock();
    shared().online.fetch_add(1, Ordering::Release);
    idle_loop(cpu)
}

/// A secondary CPU's idle task: with the lock, apply the run's policy if it changed and run
/// any task of this CPU; without it, wait for a kick.
fn idle_loop(cpu: usize) -> ! {
    let s = shared();
    loop {
        let seen = s.kicks[cpu].load(Ordering::Acquire);
        lock();
        let run = super::run_id();
        if s.applied[cpu].load(Ordering::Relaxed) != run {
            super::mte_policy::apply(super::policy());
            s.applied[cpu].store(run, Ordering::Release);
        }
        super::task::schedule();
        unlock();
        while s.kicks[cpu].load(Ordering::Acquire) == seen {
            pause();
        }
    }
}

/// Has every CPU apply run `run`'s policy (CPU 0 has), and waits until each has. Called by
/// CPU 0 holding the lock.
pub fn apply_everywhere(run: u32) {
    if !smp() {
        return;
    }
    let s = shared();
    s.applied[0].store(run, Ordering::Relaxed);
    let n = s.online.load(Ordering::Acquire) as usize + 1;
    for cpu in 1..n {
        kick(cpu);
    }
    unlock();
    while (1..n).any(|c| s.applied[c].load(Ordering::Acquire) != run) {
        pause();
    }
    lock();
}

/// How many times this CPU was kicked so far (0 on one CPU).
pub fn kicks_here() -> u64 {
    if smp() {
        shared().kicks[this_cpu()].load(Ordering::Acquire)
    } else {
        0
    }
}

/// Lets the kernel lock go until this CPU is kicked again after `seen` ([`kicks_here`]):
/// CPU 0's init, with nothing of its own to run.
pub fn wait_for_kick(seen: u64) {
    let s = shared();
    unlock();
    while s.kicks[this_cpu()].load(Ordering::Acquire) == seen {
        pause();
    }
    lock();
}

/// A run's phase opens (closes) at the `n`-th PHASE call: one per copy of its workload.
/// Called by CPU 0 holding the lock, before the run's tasks start.
pub fn expect_at_phase(n: usize) {
    shared().expected.store(n as u32, Ordering::Relaxed);
}

fn s_expected() -> u32 {
    shared().expected.load(Ordering::Relaxed)
}

/// Runs this CPU's tasks and lets the kernel lock go until `done` holds (checked with it
/// held): CPU 0's init, waiting for the tasks it started before the phase.
pub fn wait_until(done: impl Fn() -> bool) {
    while !done() {
        super::task::schedule();
        unlock();
        for _ in 0..64 {
            pause();
        }
        lock();
    }
}

/// CPUs running the scenario.
pub fn cpus() -> usize {
    if smp() {
        shared().online.load(Ordering::Acquire) as usize + 1
    } else {
        1
    }
}

/// The PHASE call of run `run`'s workload on this CPU, opening (`begin`) or closing its
/// phase, holding the kernel lock: the last CPU to arrive does it (`act`), the others wait
/// for it with the lock let go. Returns `act`'s result for the CPU that acted, 0 for the
/// others.
pub fn phase_together(run: u32, begin: bool, act: impl FnOnce() -> u64) -> u64 {
    let a = &shared().arrivals[begin as usize];
    // The lock orders the arrivals: these need no atomicity of their own.
    if a.run.load(Ordering::Relaxed) != run {
        a.run.store(run, Ordering::Relaxed);
        a.count.store(0, Ordering::Relaxed);
    }
    let count = a.count.load(Ordering::Relaxed) + 1;
    a.count.store(count, Ordering::Relaxed);
    if count == s_expected() {
        let r = act();
        a.done.store(run, Ordering::Release);
        return r;
    }
    unlock();
    while a.done.load(Ordering::Acquire) != run {
        pause();
    }
    lock();
    0
}
