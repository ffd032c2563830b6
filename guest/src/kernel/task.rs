//! Tasks, the scheduler and the context switch, shaped like Linux's: `schedule()` picks the
//! next runnable task, `switch_to` runs `mte_thread_switch` (per-task SCTLR_EL1.TCF0, GCR_EL1,
//! TCO, the TFSR_EL1 check) and the address-space switch, then `cpu_switch_to` swaps the
//! callee-saved registers and kernel stacks.

use super::cell::KCell;
use super::entry::PtRegs;
use super::layout::THREAD_SIZE;
use super::mm::Mm;
use super::smp::{MAX_CPUS, this_cpu};
use super::{mte_policy, page_alloc};
use aarch64_cpu::asm::barrier;
use arm_sysregs::el1::accessors::write_ttbr0_el1;
use arm_sysregs::el1::registers::Ttbr0El1;
use core::arch::naked_asm;
use core::mem::offset_of;

/// What `cpu_switch_to` saves: x19..x28, fp, lr and sp, as Linux's cpu_context. The kernel is
/// built without FP/SIMD registers (the softfloat target, as Linux's -mgeneral-regs-only), so
/// d8..d15 hold nothing of its own; the user programs use none either.
#[repr(C)]
#[derive(Default)]
pub struct CpuContext {
    pub x19_x28: [u64; 10],
    pub fp: u64,
    pub lr: u64,
    pub sp: u64,
}

const _: () = assert!(offset_of!(CpuContext, fp) == 80);
const _: () = assert!(offset_of!(CpuContext, lr) == 88);
const _: () = assert!(offset_of!(CpuContext, sp) == 96);
const _: () = assert!(offset_of!(Task, ctx) == 0);

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum State {
    Runnable,
    /// Sleeping on a wait channel.
    Blocked(u64),
    /// Exited, not yet reaped by its parent.
    Zombie,
}

#[repr(C)]
pub struct Task {
    pub ctx: CpuContext,
    pub pid: u64,
    pub state: State,
    /// Kernel stack base (tagged pointer).
    pub kstack: u64,
    pub mm: *mut Mm,
    /// SCTLR_EL1 bits this task wants at EL0 (TCF0), as Linux's thread.sctlr_user.
    pub sctlr_user: u64,
    /// GCR_EL1.Exclude for user IRG, from the prctl tag mask.
    pub gcr_user_excl: u64,
    pub parent: *mut Task,
    pub exit_code: u64,
}

pub const MAX_TASKS: usize = 64;

pub struct Sched {
    pub tasks: [*mut Task; MAX_TASKS],
    /// The CPU each queued task runs on, and the copy of the workload it belongs to (by slot
    /// of `tasks`, on several CPUs: a task stays on its CPU).
    cpu_of: [u8; MAX_TASKS],
    instance_of: [u8; MAX_TASKS],
    /// Each CPU's running task, and (but CPU 0, whose idle task is init) its idle task.
    pub current: [*mut Task; MAX_CPUS],
    idle: [*mut Task; MAX_CPUS],
    next_pid: u64,
    /// Where each CPU's round-robin scan resumes.
    cursor: [usize; MAX_CPUS],
    pub switches: u64,
    /// What each CPU's TTBR0_EL1 holds.
    pub ttbr0: [u64; MAX_CPUS],
}

// SAFETY: the pointers are to tasks the scheduler owns (kmalloc'd kernel objects), which are
// tied to no CPU or thread: handing the queue to another context hands it the tasks too.
unsafe impl Send for Sched {}

pub static SCHED: KCell<Sched> = KCell::new(Sched {
    tasks: [core::ptr::null_mut(); MAX_TASKS],
    cpu_of: [0; MAX_TASKS],
    instance_of: [0; MAX_TASKS],
    current: [core::ptr::null_mut(); MAX_CPUS],
    idle: [core::ptr::null_mut(); MAX_CPUS],
    next_pid: 0,
    cursor: [0; MAX_CPUS],
    switches: 0,
    ttbr0: [0; MAX_CPUS],
});

/// The current task's user SCTLR bits, read through raw places (for the interrupt handler,
/// which must not form a reference to a task the interrupted code may hold one to).
pub fn current_sctlr_user() -> u64 {
    // SAFETY: `current` always points at a live task; two Copy fields are read in place.
    unsafe { (*(*SCHED.ptr()).current[this_cpu()]).sctlr_user }
}

/// The running task.
///
/// # Safety
///
/// The caller uses the reference only while no other reference to the running task is live:
/// not across `schedule()` (or anything that may call it), and not alongside another
/// `current()`. (The interrupt handler never forms one: it reads through raw places.)
pub unsafe fn current() -> &'static mut Task {
    // SAFETY: `current` is set at boot (init) and always points at a live task; the
    // exclusivity of the reference is the caller's contract.
    unsafe { &mut *(*SCHED.ptr()).current[this_cpu()] }
}

/// The copy of the workload the running task belongs to (on several CPUs; 0 on one).
pub fn instance_of_current() -> usize {
    if !super::smp::smp() {
        return 0;
    }
    // SAFETY: a scan that calls nothing.
    let s = unsafe { SCHED.get() };
    let me = s.current[this_cpu()];
    s.tasks
        .iter()
        .position(|&t| t == me)
        .map_or(0, |i| s.instance_of[i] as usize)
}

/// Allocates a task with a kernel stack; not yet runnable.
fn alloc_task(mm: *mut Mm, sctlr_user: u64, gcr_user_excl: u64, parent: *mut Task) -> *mut Task {
    let t = page_alloc::kzalloc(size_of::<Task>() as u64) as *mut Task;
    // SAFETY: the borrow's last use is the pid below; alloc_stack does not reach SCHED,
    // and nothing here schedules.
    let s = unsafe { SCHED.get() };
    s.next_pid += 1;
    let task = Task {
        ctx: CpuContext::default(),
        pid: s.next_pid,
        state: State::Runnable,
        kstack: page_alloc::alloc_stack(),
        mm,
        sctlr_user,
        gcr_user_excl,
        parent,
        exit_code: 0,
    };
    // SAFETY: a fresh kzalloc object of the task's size and alignment.
    unsafe { t.write(task) };
    t
}

/// The boot context becomes task 0 (init), a kernel thread with the boot address space.
pub fn init_boot_task() {
    let t = page_alloc::kzalloc(size_of::<Task>() as u64) as *mut Task;
    // SAFETY: a fresh kzalloc object; init never runs at EL0 and keeps the boot stack.
    unsafe {
        t.write(Task {
            ctx: CpuContext::default(),
            pid: 0,
            state: State::Runnable,
            kstack: 0,
            mm: core::ptr::null_mut(),
            sctlr_user: 0,
            gcr_user_excl: 0,
            parent: core::ptr::null_mut(),
            exit_code: 0,
        })
    };
    // SAFETY: boot, one task; boot_ttbr0 reaches RUN, not SCHED.
    let s = unsafe { SCHED.get() };
    s.tasks[0] = t;
    s.current[0] = t;
    s.ttbr0[0] = super::boot_ttbr0();
}

/// A secondary CPU's boot context becomes its idle task, a kernel thread with the boot
/// address space (as init on CPU 0). With the kernel lock held.
pub fn init_idle_task(cpu: usize) {
    let t = page_alloc::kzalloc(size_of::<Task>() as u64) as *mut Task;
    // SAFETY: a fresh kzalloc object; the idle task never runs at EL0 and keeps its stack.
    unsafe {
        t.write(Task {
            ctx: CpuContext::default(),
            pid: 0,
            state: State::Runnable,
            kstack: 0,
            mm: core::ptr::null_mut(),
            sctlr_user: 0,
            gcr_user_excl: 0,
            parent: core::ptr::null_mut(),
            exit_code: 0,
        })
    };
    // SAFETY: the kernel lock is held; boot_ttbr0 reaches RUN, not SCHED.
    let s = unsafe { SCHED.get() };
    s.idle[cpu] = t;
    s.current[cpu] = t;
    s.ttbr0[cpu] = super::boot_ttbr0();
}

/// Makes `t` runnable on `cpu`, in copy `instance` of the workload: its first switch-in goes
/// through `ret_from_fork` to EL0 with `regs`.
fn start(t: *mut Task, regs: &PtRegs, cpu: usize, instance: usize) {
    // SAFETY: `t` is a fresh task this function owns until it is queued.
    let task = unsafe { &mut *t };
    let top = task.kstack + THREAD_SIZE - size_of::<PtRegs>() as u64;
    // SAFETY: the pt_regs frame lies at the top of the task's own new kernel stack.
    unsafe { (top as *mut PtRegs).write(*regs) };
    task.ctx.sp = top;
    task.ctx.lr = super::entry::ret_from_fork as *const () as u64;
    // SAFETY: nothing is called while the borrow lives.
    let s = unsafe { SCHED.get() };
    let slot = s
        .tasks
        .iter()
        .position(|p| p.is_null())
        .expect("too many tasks");
    s.tasks[slot] = t;
    if super::smp::smp() {
        s.cpu_of[slot] = cpu as u8;
        s.instance_of[slot] = instance as u8;
        super::smp::kick(cpu);
    }
}

/// A new process running `entry` at EL0 with `args` in x0..x4, on `cpu`, in copy `instance`
/// of the workload.
pub fn spawn(
    entry: u64,
    args: [u64; 5],
    sctlr_user: u64,
    gcr_user_excl: u64,
    (cpu, instance): (usize, usize),
) -> *mut Task {
    let mm = Mm::new_process();
    // SAFETY: a Copy field read whose borrow ends here.
    let init = unsafe { SCHED.get() }.tasks[0];
    let t = alloc_task(mm, sctlr_user, gcr_user_excl, init);
    let mut regs = PtRegs::user(entry, super::layout::USER_STACK_TOP);
    regs.x[..5].copy_from_slice(&args);
    start(t, &regs, cpu, instance);
    t
}

/// clone(): a thread of the current process.
pub fn clone_thread(entry: u64, sp: u64, arg: u64) -> u64 {
    // SAFETY: `cur` is the only reference to the running task, and nothing here schedules.
    let cur = unsafe { current() };
    // SAFETY: a user task's mm is live while it runs.
    unsafe { (*cur.mm).users += 1 };
    let t = alloc_task(cur.mm, cur.sctlr_user, cur.gcr_user_excl, cur as *mut Task);
    let mut regs = PtRegs::user(entry, sp);
    regs.x[0] = arg;
    start(t, &regs, this_cpu(), instance_of_current());
    // SAFETY: just created.
    unsafe { (*t).pid }
}

/// fork(): a process with a copy of the current one's page tables and registers (x0 = 0).
pub fn fork(parent_regs: &PtRegs) -> u64 {
    // SAFETY: `cur` is the only reference to the running task, and nothing here schedules.
    let cur = unsafe { current() };
    // SAFETY: a user task's mm is live while it runs.
    let mm = unsafe { (*cur.mm).fork() };
    let t = alloc_task(mm, cur.sctlr_user, cur.gcr_user_excl, cur as *mut Task);
    let mut regs = *parent_regs;
    regs.x[0] = 0;
    start(t, &regs, this_cpu(), instance_of_current());
    // SAFETY: just created.
    unsafe { (*t).pid }
}

/// exit(): the task becomes a zombie, its parent is woken, and it never runs again.
pub fn exit(code: u64) -> ! {
    // SAFETY: `cur` is the only reference to the running task; its last use comes before
    // the task is switched away from for good.
    let cur = unsafe { current() };
    cur.exit_code = code;
    cur.state = State::Zombie;
    wake_up(wait_chan_child(cur.parent));
    // init, on CPU 0, reaps: on several CPUs it may be waiting for a kick.
    super::smp::kick(0);
    schedule();
    unreachable!("a zombie was scheduled");
}

fn wait_chan_child(parent: *mut Task) -> u64 {
    parent as u64 | 1
}

/// Reaps one zombie child of the current task: (it has children, the pid reaped).
fn reap_one() -> (bool, Option<u64>) {
    // SAFETY: the reference is turned into a pointer at once.
    let me = unsafe { current() } as *mut Task;
    // SAFETY: nothing is called while the borrow lives: its last use (clearing the slot)
    // comes before reap.
    let s = unsafe { SCHED.get() };
    let mut any = false;
    for i in 1..MAX_TASKS {
        let t = s.tasks[i];
        // SAFETY: queued tasks are live until reaped here.
        if t.is_null() || unsafe { (*t).parent } != me {
            continue;
        }
        any = true;
        // SAFETY: as above.
        if unsafe { (*t).state } == State::Zombie {
            s.tasks[i] = core::ptr::null_mut();
            // SAFETY: a zombie never runs again; its stack and mm are no longer in use (it
            // switched away for the last time, and TTBR0 holds another address space).
            return (true, Some(unsafe { reap(t) }));
        }
    }
    (any, None)
}

/// wait(): reaps one zombie child, sleeping until there is one; returns its pid, or None
/// when the task has no children.
pub fn wait_child() -> Option<u64> {
    // SAFETY: the reference is turned into a pointer at once.
    let me = unsafe { current() } as *mut Task;
    loop {
        match reap_one() {
            (_, Some(pid)) => return Some(pid),
            (false, None) => return None,
            (true, None) => sleep_on(wait_chan_child(me)),
        }
    }
}

/// Reaps a zombie child without sleeping (init's loop).
pub fn reap_zombie_child() -> Option<u64> {
    reap_one().1
}

/// True when a task other than init can run (on this CPU, when there are several).
pub fn others_runnable() -> bool {
    let me = this_cpu();
    // SAFETY: a scan that calls nothing.
    let s = unsafe { SCHED.get() };
    // SAFETY: queued tasks are live.
    let runnable = |t: *mut Task| !t.is_null() && unsafe { (*t).state } == State::Runnable;
    if super::smp::smp() {
        (1..MAX_TASKS).any(|i| s.cpu_of[i] as usize == me && runnable(s.tasks[i]))
    } else {
        s.tasks[1..].iter().any(|&t| runnable(t))
    }
}

/// Frees a zombie: kernel stack, address space (last user), task.
///
/// # Safety
/// `t` must be a zombie that has switched away for good.
unsafe fn reap(t: *mut Task) -> u64 {
    // SAFETY: the caller guarantees `t` is dead.
    let task = unsafe { &mut *t };
    let pid = task.pid;
    page_alloc::free_stack(task.kstack);
    // SAFETY: no CPU runs this mm as the zombie's; a live thread sibling keeps a reference.
    unsafe { Mm::put(task.mm) };
    page_alloc::kfree(t as u64, size_of::<Task>() as u64);
    pid
}

/// Sleeps until [`wake_up`] on `chan`.
pub fn sleep_on(chan: u64) {
    // SAFETY: the reference lives for this one store, before schedule().
    unsafe { current() }.state = State::Blocked(chan);
    schedule();
}

pub fn wake_up(chan: u64) {
    // SAFETY: a scan that calls nothing but `kick`, which does not reach SCHED.
    let s = unsafe { SCHED.get() };
    for (i, &t) in s.tasks.iter().enumerate() {
        // SAFETY: queued tasks are live.
        if !t.is_null() && unsafe { (*t).state } == State::Blocked(chan) {
            // SAFETY: as above.
            unsafe { (*t).state = State::Runnable };
            if super::smp::smp() {
                super::smp::kick(s.cpu_of[i] as usize);
            }
        }
    }
}

/// Tasks sleeping on a wait channel.
pub fn blocked_tasks() -> usize {
    // SAFETY: a scan that calls nothing.
    let s = unsafe { SCHED.get() };
    s.tasks
        .iter()
        // SAFETY: queued tasks are live.
        .filter(|&&t| !t.is_null() && matches!(unsafe { (*t).state }, State::Blocked(_)))
        .count()
}

/// True when a task other than init is queued.
pub fn others_alive() -> bool {
    // SAFETY: a scan that calls nothing.
    unsafe { SCHED.get() }.tasks[1..]
        .iter()
        .any(|t| !t.is_null())
}

/// Runs the next runnable task other than the current one, round robin over user tasks;
/// init (task 0) runs only when no other task can. Returns when the current task is
/// scheduled again.
pub fn schedule() {
    // __schedule runs with interrupts off.
    let irqs = super::irq::save();
    pick_and_switch();
    super::irq::restore(irqs);
}

fn pick_and_switch() {
    let (cpu, smp) = (this_cpu(), super::smp::smp());
    // SAFETY: the borrow's last use comes before switch_to, which takes its own.
    let s = unsafe { SCHED.get() };
    let prev = s.current[cpu];
    let mut next = core::ptr::null_mut();
    for k in 1..=MAX_TASKS {
        let i = (s.cursor[cpu] + k) % MAX_TASKS;
        let t = s.tasks[i];
        // On several CPUs, a CPU runs its own tasks only (a task stays where it started).
        if smp && s.cpu_of[i] as usize != cpu {
            continue;
        }
        // SAFETY: queued tasks are live.
        if i != 0 && !t.is_null() && unsafe { (*t).state } == State::Runnable {
            next = t;
            s.cursor[cpu] = i;
            break;
        }
    }
    if next.is_null() {
        next = if cpu == 0 { s.tasks[0] } else { s.idle[cpu] };
    }
    if next == prev {
        return;
    }
    s.switches += 1;
    // SAFETY: both are live tasks; `prev` is the one running.
    unsafe { switch_to(prev, next) };
}

/// context_switch: the address space first (switch_mm), then Linux's __switch_to: DSB ISH,
/// `mte_thread_switch`, the SCTLR_EL1 user bits when they differ, and the register switch.
///
/// # Safety
/// `prev` must be the running task and `next` a live task that is not running.
unsafe fn switch_to(prev: *mut Task, next: *mut Task) {
    // SAFETY: the caller passes live tasks.
    let (p, n) = unsafe { (&mut *prev, &mut *next) };
    // check_and_switch_context: init (no mm) gets the boot tables back, so that a user
    // address space it frees is never live.
    let ttbr0 = if n.mm.is_null() {
        super::boot_ttbr0()
    } else {
        // SAFETY: the next task's mm is live; it maps the image the kernel's TTBR0 did.
        unsafe { (*n.mm).ttbr0() }
    };
    let cpu = this_cpu();
    // SAFETY: the borrow ends with this `if`, before mte_policy is called.
    let s = unsafe { SCHED.get() };
    if ttbr0 != s.ttbr0[cpu] {
        s.ttbr0[cpu] = ttbr0;
        // SAFETY: switching the user half; the kernel runs from TTBR1.
        unsafe { write_ttbr0_el1(Ttbr0El1::from_bits_retain(ttbr0)) };
        barrier::isb(barrier::SY);
    }
    // __switch_to's dsb(ish): completes the previous task's maintenance, and makes any
    // asynchronous tag-check fault visible in TFSR_EL1 before mte_thread_switch looks.
    // SAFETY: a barrier.
    unsafe { core::arch::asm!("dsb ish") };
    mte_policy::thread_switch(n);
    mte_policy::update_sctlr_user(p.sctlr_user, n.sctlr_user);
    // SAFETY: a field write whose borrow ends here.
    unsafe { SCHED.get() }.current[cpu] = next;
    // SAFETY: `prev` is running on the stack being saved; `next` was saved by an earlier
    // cpu_switch_to or set up by `start`.
    unsafe { cpu_switch_to(&raw mut p.ctx, &raw mut n.ctx) };
}

/// Saves the callee-saved registers, fp, lr and sp into `prev` and loads them from `next`;
/// returns into `next`.
#[unsafe(naked)]
unsafe extern "C" fn cpu_switch_to(prev: *mut CpuContext, next: *mut CpuContext) {
    naked_asm!(
        "mov x10, sp",
        "stp x19, x20, [x0, #0]",
        "stp x21, x22, [x0, #16]",
        "stp x23, x24, [x0, #32]",
        "stp x25, x26, [x0, #48]",
        "stp x27, x28, [x0, #64]",
        "stp x29, x30, [x0, #80]",
        "str x10, [x0, #96]",
        "ldp x19, x20, [x1, #0]",
        "ldp x21, x22, [x1, #16]",
        "ldp x23, x24, [x1, #32]",
        "ldp x25, x26, [x1, #48]",
        "ldp x27, x28, [x1, #64]",
        "ldp x29, x30, [x1, #80]",
        "ldr x10, [x1, #96]",
        "mov sp, x10",
        "ret",
    )
}
