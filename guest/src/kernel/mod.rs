//! The guest kernel: a small arm64 kernel shaped like Linux where MTE policy acts. It boots
//! into the upper half (linear map in TTBR1), runs EL0 processes in their own address spaces
//! (TTBR0 + ASID), takes system calls through SVC with entry/exit paths like entry-common,
//! schedules with a context switch like Linux's (mte_thread_switch), copies to and from user
//! memory with LDTR/STTR, and allocates pages, objects, kernel stacks and page tables with a
//! KASAN-HW-tags-like tagging mode.
//!
//! It runs the scenario (`mtex_abi::scenario`): for each policy, each workload, as one traced
//! phase the workload's user program opens and closes with the PHASE system call.

mod boot;
mod cell;
mod entry;
mod irq;
mod kasan;
mod layout;
mod mm;
mod mte_policy;
mod page_alloc;
mod smp;
mod syscalls;
mod task;
mod uaccess;
mod user;

use crate::{hvc, println};
use cell::KCell;
use fdt::Fdt;
use mtex_abi::hypercall::ret;
use mtex_abi::scenario::{PhaseParams, Policy, Scenario, Workload};
use user::Program;

/// Where the scenario is: the run in progress and its phase.
struct Run {
    scenario: Option<Scenario>,
    ram: (u64, u64),
    boot_ttbr0: u64,
    id: u32,
    params: Option<PhaseParams>,
    /// The run's phase is traced.
    traced: bool,
    /// The phase repeats the previous phase's run (PHASE_AGAIN).
    again: bool,
    /// Untraced passes the hypervisor still wants after this phase.
    more: u64,
    phase_open: bool,
    phase_done: bool,
    stats: page_alloc::Stats,
    switches: u64,
    ticks: u64,
}

static RUN: KCell<Run> = KCell::new(Run {
    scenario: None,
    ram: (0, 0),
    boot_ttbr0: 0,
    id: 0,
    params: None,
    traced: true,
    again: false,
    more: 0,
    phase_open: false,
    phase_done: false,
    stats: page_alloc::Stats {
        stack_bytes: 0,
        pgtable_bytes: 0,
        stack_freed: 0,
        pgtable_freed: 0,
    },
    switches: 0,
    ticks: 0,
});

/// GCR_EL1.Exclude of a task that has not set a tag mask: every tag excluded (IRG gives 0).
const GCR_EXCLUDE_ALL: u64 = mtex_arch::mte_bits::gcr::EXCLUDE_MASK;
const _: () = assert!(GCR_EXCLUDE_ALL == 0xffff);

/// Page faults handled (user pages mapped at first touch).
pub static FAULTS: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(0);

/// The id of the run in progress (0 before the first).
pub fn run_id() -> u32 {
    // SAFETY: a Copy field read through the raw place; RUN is written with the kernel lock
    // held, which the caller holds.
    unsafe { (*RUN.ptr()).id }
}

/// The policy of the run in progress (read through the raw place: the interrupt handler
/// calls this too).
pub fn policy() -> Policy {
    // SAFETY: a Copy field read; RUN is only written by init with interrupts masked.
    unsafe { (*RUN.ptr()).params }.map_or(Policy::BASELINE, |p| p.policy)
}

fn boot_ttbr0() -> u64 {
    // SAFETY: a Copy field read whose borrow ends here; its callers (init_boot_task, switch_to)
    // hold no borrow of RUN.
    unsafe { RUN.get().boot_ttbr0 }
}

/// Boots the kernel and runs `scenario`; never returns (the run ends by EXIT).
pub fn run(fdt: &Fdt, scenario: Scenario) -> ! {
    let Some(mem) = fdt.memory().regions().next() else {
        println!("kernel: no /memory region");
        hvc::exit(2)
    };
    let (base, size) = (mem.starting_address as u64, mem.size.unwrap_or(0) as u64);
    log::info!(
        "kernel: RAM {base:#x}+{size:#x}, {} runs",
        scenario.runs().count()
    );
    if size < layout::POOL_OFFSET + layout::POOL_SIZE {
        println!(
            "kernel: needs {} MiB of RAM",
            (layout::POOL_OFFSET + layout::POOL_SIZE) >> 20
        );
        hvc::exit(2)
    }
    // SAFETY: boot, before anything else uses RUN; install_idmap does not reach it, and the
    // borrow ends before enter_upper_half.
    let r = unsafe { RUN.get() };
    r.scenario = Some(scenario);
    r.ram = (base, size);
    crate::programs::install_idmap(fdt);
    r.boot_ttbr0 = arm_sysregs::el1::accessors::read_ttbr0_el1().bits();
    boot::enter_upper_half(base, size, kernel_main)
}

/// Runs in the upper half, on the boot stack's alias.
extern "C" fn kernel_main(_: u64) -> ! {
    // SAFETY: two Copy fields read; the borrow ends here, before init_boot_task (which reads
    // boot_ttbr0) and the allocator (which reads the policy) reach RUN.
    let (base, scenario) = unsafe {
        let r = RUN.get();
        (r.ram.0, r.scenario.expect("scenario"))
    };
    boot::install_vectors();
    // SAFETY: the pool lies in RAM the guest owns, past everything the image and the boot
    // tables use (POOL_OFFSET), and nothing else allocates from it.
    unsafe {
        page_alloc::init(
            layout::untagged(layout::kva(base + layout::POOL_OFFSET)),
            layout::POOL_SIZE,
            layout::SLAB_SIZE,
        )
    };
    task::init_boot_task();
    // On several CPUs, the others wait in their idle loops from here; CPU 0 holds the kernel
    // lock (the scenario runs them without the tick).
    smp::start_secondaries(scenario.cpus as usize);
    irq::init(scenario.hz);
    println!("kernel: tick {} Hz", scenario.hz);
    let mut id = 0;
    for params in scenario.runs() {
        // Untraced first, once per pass the hypervisor's PMU backend asks for (it counts its
        // events a few at a time), then traced; every phase after the first is PHASE_AGAIN.
        let mut again = false;
        if scenario.untraced {
            loop {
                id += 1;
                let more = run_one(id, params, false, again);
                again = true;
                if more == 0 {
                    break;
                }
            }
        }
        if scenario.traced {
            id += 1;
            run_one(id, params, true, again);
        }
    }
    println!("kernel: scenario done");
    hvc::exit(0)
}

/// One (policy, workload) run: apply the policy, set up the workload's kernel objects and
/// processes, schedule them until all have exited and been reaped, tear down. Returns the
/// untraced passes the hypervisor still wants.
fn run_one(id: u32, params: PhaseParams, traced: bool, again: bool) -> u64 {
    // SAFETY: init, between runs: no user task is alive to be in phase_mark, and the borrow
    // ends before mte_policy::apply, which reads the policy.
    let r = unsafe { RUN.get() };
    r.id = id;
    r.params = Some(params);
    r.traced = traced;
    r.again = again;
    r.more = 0;
    r.phase_open = false;
    r.phase_done = false;
    mte_policy::apply(params.policy);
    smp::apply_everywhere(id);
    let p = params.params;
    let (size, iters, tasks) = (p.size as u64, p.iters as u64, p.tasks as u64);
    let queued = if params.workload == Workload::FutexHash {
        tasks
    } else {
        0
    };
    let pipe_cap = if params.workload == Workload::Memcached {
        size + 16
    } else {
        16
    };
    let kbuf = match params.workload {
        Workload::UaccessHeavy | Workload::KbufProbe => size,
        _ => 16,
    };
    syscalls::setup(queued, pipe_cap, kbuf);
    // A process starts as Linux starts one: TCF0 NONE, every tag excluded. Its first act is
    // the prctl(PR_SET_TAGGED_ADDR_CTRL) glibc makes at start-up, with the scenario's TCF0
    // (x4) and glibc's tag mask.
    let tcf0 = params.tcf0 as u64;
    let args = [iters, size, tasks];
    if smp::smp() && params.workload == Workload::Memcached {
        // On several CPUs, one task per CPU: pair k's server on CPU 2k, its client on CPU
        // 2k + 1 (an odd last CPU idles). Every server is waiting in its first read before
        // any client starts, as on one CPU, so no server's start-up falls in the phase.
        let pairs = smp::cpus() / 2;
        smp::expect_at_phase(pairs);
        for k in 0..pairs {
            spawn_process(Program::McServer, [size, 0, 0, 0], tcf0, (2 * k, k));
        }
        smp::wait_until(|| task::blocked_tasks() == pairs);
        for k in 0..pairs {
            spawn_process(Program::McClient, [iters, size, 0, 0], tcf0, (2 * k + 1, k));
        }
    } else if smp::smp() {
        // The workload once on each CPU (the scenario allows only workloads that stay on
        // their CPU).
        smp::expect_at_phase(smp::cpus());
        for cpu in 0..smp::cpus() {
            spawn_workload(params.workload, args, tcf0, cpu);
        }
    } else {
        spawn_workload(params.workload, args, tcf0, 0);
    }
    // init: reap, and run the others until none is left; on several CPUs, while CPU 0 has
    // nothing to run, it lets the kernel lock go until it is kicked (a task of its woken, a
    // child exited).
    loop {
        let kicks = smp::kicks_here();
        while task::reap_zombie_child().is_some() {}
        if !task::others_alive() {
            break;
        }
        if !task::others_runnable() {
            if smp::smp() {
                smp::wait_for_kick(kicks);
                continue;
            }
            die(format_args!("every task is blocked"));
        }
        task::schedule();
    }
    syscalls::teardown();
    // SAFETY: every task of the run has exited (none is in phase_mark), and nothing below
    // reaches RUN.
    let r = unsafe { RUN.get() };
    if !r.phase_done {
        die(format_args!(
            "run {id}: the workload never closed its phase"
        ));
    }
    // One line per run, short enough for one console record; the tests read it.
    println!(
        "kernel: run {id}: stack +{} -{}, pgtable +{} -{} bytes, {} switches, {} ticks, {} faults",
        r.stats.stack_bytes,
        r.stats.stack_freed,
        r.stats.pgtable_bytes,
        r.stats.pgtable_freed,
        r.switches,
        r.ticks,
        FAULTS.swap(0, core::sync::atomic::Ordering::Relaxed)
    );
    r.more
}

/// Starts `prog` with `a` in x0..x3 and the run's TCF0 in x4, on CPU `on.0`, in copy `on.1`
/// of the workload.
fn spawn_process(prog: Program, a: [u64; 4], tcf0: u64, on: (usize, usize)) {
    task::spawn(
        user::entry(prog),
        [a[0], a[1], a[2], a[3], tcf0],
        0,
        GCR_EXCLUDE_ALL,
        on,
    );
}

/// Starts copy `cpu` of `workload`'s processes ([iters, size, tasks]) on CPU `cpu`.
fn spawn_workload(workload: Workload, [iters, size, tasks]: [u64; 3], tcf0: u64, cpu: usize) {
    let spawn = |prog, a| spawn_process(prog, a, tcf0, (cpu, cpu));
    match workload {
        Workload::Getpid => spawn(Program::Getpid, [iters, 0, 0, 0]),
        Workload::FutexHash => spawn(Program::Futex, [iters, size, 0, 0]),
        Workload::Memcached => {
            spawn(Program::McServer, [size, 0, 0, 0]);
            spawn(Program::McClient, [iters, size, 0, 0])
        }
        Workload::ThreadCreate => spawn(Program::Threads, [iters, 0, tasks, 0]),
        Workload::ForkPgtable => spawn(Program::Fork, [iters, size, 0, 0]),
        Workload::UaccessHeavy => spawn(Program::Uaccess, [iters, size, 0, 0]),
        Workload::KbufProbe => spawn(Program::Kbuf, [iters, size, 0, 0]),
    };
}

/// The PHASE system call: opens or closes the run's traced phase. On several CPUs each CPU's
/// workload makes the call, and the last to arrive opens (closes) the phase for all of them.
fn phase_mark(begin: bool) -> u64 {
    if smp::smp() {
        return smp::phase_together(run_id(), begin, || phase_mark_here(begin));
    }
    phase_mark_here(begin)
}

fn phase_mark_here(begin: bool) -> u64 {
    // SAFETY: a system call of a user task: init's borrows in run_one are not alive while it
    // is switched out, nothing called here reaches RUN, and nothing here schedules.
    let r = unsafe { RUN.get() };
    let Some(params) = r.params else {
        return u64::MAX;
    };
    if begin && !r.phase_open && !r.phase_done {
        page_alloc::take_stats();
        // SAFETY: a Copy field read whose borrow ends here; no SCHED borrow is alive in this
        // system call.
        r.switches = unsafe { task::SCHED.get() }.switches;
        r.ticks = irq::TICKS.load(core::sync::atomic::Ordering::Relaxed);
        r.phase_open = true;
        let name = params.workload.name();
        // A run that is traced has its MSR TCO writes counted exactly by the trace: its
        // untraced passes need not watch them (extra passes) too. Untraced passes are
        // repeatable (`run_one`'s caller runs as many as asked).
        let watch = !r.traced && r.scenario.is_some_and(|s| !s.traced);
        if hvc::phase_begin_run(r.id, name, &params, r.traced, r.again, watch) != ret::SUCCESS {
            die(format_args!("the hypervisor refused phase {}", r.id));
        }
        0
    } else if !begin && r.phase_open {
        let result = hvc::phase_end_passes(r.id);
        r.phase_open = false;
        r.phase_done = true;
        r.stats = page_alloc::take_stats();
        // SAFETY: as above.
        r.switches = unsafe { task::SCHED.get() }.switches - r.switches;
        r.ticks = irq::TICKS.load(core::sync::atomic::Ordering::Relaxed) - r.ticks;
        match result {
            Ok(more) => r.more = more,
            Err(_) => die(format_args!("the hypervisor refused to end phase {}", r.id)),
        }
        0
    } else {
        u64::MAX
    }
}

/// Something the policy does not explain happened: say what, end the run with status 5.
pub fn die(what: core::fmt::Arguments) -> ! {
    println!("kernel: {what}");
    hvc::exit(5)
}
