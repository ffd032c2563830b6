//! The system calls the workloads make (numbers in [`nr`]), and the kernel side of each
//! workload: the futex hash table, the pipes memcached talks through, the kernel buffer
//! uaccess-heavy and kbuf-probe use.

use super::cell::KCell;
use super::entry::PtRegs;
use super::layout::USER_MAP_VA;
use super::mte_policy::{user_access_begin, user_access_end};
use super::page_alloc::{kfree, kmalloc, kzalloc};
use super::task::{self, current, sleep_on, wake_up};
use super::uaccess::{self, access_ok};
use core::sync::atomic::{AtomicU64, Ordering};

/// System call numbers (x8), shared with the user programs' assembly.
pub mod nr {
    pub const EXIT: u64 = 0;
    pub const GETPID: u64 = 1;
    /// x0 = 1: open the run's phase; x0 = 0: close it.
    pub const PHASE: u64 = 2;
    /// x0 = futex address, x1 = expected value → -EAGAIN when it differs.
    pub const FUTEX_WAIT: u64 = 3;
    /// x0 = fd (0: the kernel buffer, 1: request pipe, 2: response pipe), x1 = buf, x2 = len.
    pub const WRITE: u64 = 4;
    pub const READ: u64 = 5;
    /// x0 = entry, x1 = stack, x2 = argument → thread id.
    pub const CLONE: u64 = 6;
    pub const FORK: u64 = 7;
    /// → pid of a reaped child.
    pub const WAIT: u64 = 8;
    /// x0 = bytes of the kernel buffer to read → their sum.
    pub const KBUF_PROBE: u64 = 9;
    /// x0 = bytes to map at USER_MAP_VA (faulted in at first touch).
    pub const MMAP: u64 = 10;
    /// prctl(PR_SET_TAGGED_ADDR_CTRL): x0 = TCF0 (0 none, 1 sync, 2 async, 3 asymm),
    /// x1 = tags IRG may generate (PR_MTE_TAG_MASK).
    pub const PRCTL_TAGGED_ADDR: u64 = 11;
}

const EINVAL: u64 = -22i64 as u64;
const EAGAIN: u64 = -11i64 as u64;
const ECHILD: u64 = -10i64 as u64;
const ENOSYS: u64 = -38i64 as u64;

pub const FUTEX_BUCKETS: u64 = 16;

#[repr(C)]
struct Bucket {
    lock: AtomicU64,
    head: u64,
}

#[repr(C)]
struct FutexQ {
    key: u64,
    next: u64,
}

#[repr(C)]
struct Pipe {
    buf: u64,
    len: u64,
}

/// A run's kernel-side workload state.
pub struct WorkState {
    futex_table: u64,
    queued_per_bucket: u64,
    /// Each memcached pair's request and response pipes (one pair per CPU on several CPUs).
    pipes: [[u64; 2]; super::smp::MAX_CPUS],
    pipe_cap: u64,
    kbuf: u64,
    kbuf_len: u64,
}

static WORK: KCell<WorkState> = KCell::new(WorkState {
    futex_table: 0,
    queued_per_bucket: 0,
    pipes: [[0; 2]; super::smp::MAX_CPUS],
    pipe_cap: 0,
    kbuf: 0,
    kbuf_len: 0,
});

/// Sets up the kernel objects of a run (kmalloc'd under the run's policy).
pub fn setup(queued_per_bucket: u64, pipe_cap: u64, kbuf_len: u64) {
    // SAFETY: init, before the run's tasks exist; the allocator does not reach WORK.
    let w = unsafe { WORK.get() };
    w.queued_per_bucket = queued_per_bucket;
    w.futex_table = kzalloc(FUTEX_BUCKETS * size_of::<Bucket>() as u64);
    for b in 0..FUTEX_BUCKETS {
        let bucket = (w.futex_table + b * size_of::<Bucket>() as u64) as *mut Bucket;
        // Waiters of other address spaces: walked, never matched.
        for i in 0..queued_per_bucket {
            let q = kmalloc(size_of::<FutexQ>() as u64) as *mut FutexQ;
            // SAFETY: `q` and `bucket` are live kernel objects this run owns.
            unsafe {
                q.write(FutexQ {
                    key: !(b << 8 | i),
                    next: (*bucket).head,
                });
                (*bucket).head = q as u64;
            }
        }
    }
    w.pipe_cap = pipe_cap;
    for p in w.pipes[..super::smp::cpus()].iter_mut().flatten() {
        let pipe = kzalloc(size_of::<Pipe>() as u64) as *mut Pipe;
        // SAFETY: a fresh kernel object.
        unsafe { (*pipe).buf = kzalloc(pipe_cap) };
        *p = pipe as u64;
    }
    w.kbuf_len = kbuf_len;
    w.kbuf = kzalloc(kbuf_len);
}

/// Frees what [`setup`] made.
pub fn teardown() {
    // SAFETY: init, after the run's tasks have exited; kfree does not reach WORK.
    let w = unsafe { WORK.get() };
    for b in 0..FUTEX_BUCKETS {
        let bucket = (w.futex_table + b * size_of::<Bucket>() as u64) as *mut Bucket;
        // SAFETY: the table and its queue entries are this run's, and no task uses them now.
        let mut q = unsafe { (*bucket).head };
        while q != 0 {
            // SAFETY: as above.
            let next = unsafe { (*(q as *mut FutexQ)).next };
            kfree(q, size_of::<FutexQ>() as u64);
            q = next;
        }
    }
    kfree(w.futex_table, FUTEX_BUCKETS * size_of::<Bucket>() as u64);
    for &p in w.pipes[..super::smp::cpus()].iter().flatten() {
        // SAFETY: this run's pipe.
        kfree(unsafe { (*(p as *mut Pipe)).buf }, w.pipe_cap);
        kfree(p, size_of::<Pipe>() as u64);
    }
    kfree(w.kbuf, w.kbuf_len);
}

/// invoke_syscall: x8 selects, x0..x5 are arguments, x0 the result.
pub fn invoke(regs: &mut PtRegs) {
    let a = [regs.x[0], regs.x[1], regs.x[2]];
    regs.x[0] = match regs.x[8] {
        nr::EXIT => task::exit(a[0]),
        // SAFETY: one field read of the running task; no other reference is live here.
        nr::GETPID => unsafe { current() }.pid,
        nr::PHASE => super::phase_mark(a[0] != 0),
        nr::FUTEX_WAIT => futex_wait(a[0], a[1] as u32),
        nr::WRITE => write(a[0], a[1], a[2]),
        nr::READ => read(a[0], a[1], a[2]),
        nr::CLONE => task::clone_thread(a[0], a[1], a[2]),
        nr::FORK => task::fork(regs),
        nr::WAIT => task::wait_child().unwrap_or(ECHILD),
        nr::KBUF_PROBE => kbuf_probe(a[0]),
        nr::MMAP => mmap(a[0]),
        nr::PRCTL_TAGGED_ADDR => {
            if a[0] > 3 || a[1] > 0xffff {
                EINVAL
            } else {
                super::mte_policy::set_tagged_addr_ctrl(
                    // SAFETY: the only reference to the running task for this call, which
                    // does not schedule.
                    unsafe { current() },
                    mtex_abi::scenario::Tcf::from_bits(a[0]),
                    a[1],
                );
                0
            }
        }
        _ => ENOSYS,
    };
}

/// futex_wait's fast path as `perf bench futex hash` drives it: hash the key, lock the
/// bucket, walk its queue, read the user's futex word (in a user_access section), and give
/// up with -EAGAIN because the value changed.
fn futex_wait(uaddr: u64, val: u32) -> u64 {
    if !access_ok(uaddr, 4) || uaddr & 3 != 0 {
        return EINVAL;
    }
    // SAFETY: nothing called while the borrow lives reaches WORK or schedules.
    let w = unsafe { WORK.get() };
    // SAFETY: one field read of the running task; no other reference is live here.
    let key = (uaddr & !mtex_arch::mte_bits::TOP_BYTE_MASK) ^ unsafe { current() }.mm as u64;
    let h = key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - FUTEX_BUCKETS.trailing_zeros());
    // SAFETY: the table is this run's and has FUTEX_BUCKETS buckets.
    let bucket = unsafe { &*((w.futex_table + h * size_of::<Bucket>() as u64) as *const Bucket) };
    while bucket.lock.swap(1, Ordering::Acquire) != 0 {
        core::hint::spin_loop();
    }
    let mut q = bucket.head;
    let mut found = false;
    while q != 0 {
        // SAFETY: queue entries are live while the bucket lock is held.
        let e = unsafe { &*(q as *const FutexQ) };
        found |= e.key == key;
        q = e.next;
    }
    user_access_begin();
    // SAFETY: access_ok above; the task's address space is live.
    let uval = unsafe { uaccess::unsafe_get_user_u32(uaddr) };
    user_access_end();
    bucket.lock.store(0, Ordering::Release);
    if uval != val || found { EAGAIN } else { 0 }
}

/// The pipe behind `fd`. A raw pointer: the other end changes it while this task sleeps,
/// so it is never held as a reference across `schedule()`.
fn pipe(fd: u64) -> Option<*mut Pipe> {
    // SAFETY: a read that calls nothing; the caller's own borrow is no longer used.
    let w = unsafe { WORK.get() };
    match fd {
        1 | 2 => Some(w.pipes[pair()][fd as usize - 1] as *mut Pipe),
        _ => None,
    }
}

/// The memcached pair the running task belongs to: on several CPUs each CPU's pair has its
/// own pipes; on one CPU there is one pair.
fn pair() -> usize {
    if super::smp::smp() {
        task::instance_of_current()
    } else {
        0
    }
}

/// The pipe's current length, read afresh (another task may have changed it).
fn pipe_len(p: *mut Pipe) -> u64 {
    // SAFETY: the pipe is this run's and live; the read is not cached across sleeps.
    unsafe { core::ptr::read_volatile(&raw const (*p).len) }
}

fn set_pipe_len(p: *mut Pipe, len: u64) {
    // SAFETY: as pipe_len.
    unsafe { core::ptr::write_volatile(&raw mut (*p).len, len) }
}

fn chan(p: *mut Pipe, data: bool) -> u64 {
    p as u64 | data as u64
}

/// The checks read and write share: a user buffer of whole 8-byte words, and for fd 0 no
/// more than the kernel buffer holds. Returns the kernel buffer (fd 0) or the pipe.
fn rw_target(fd: u64, ubuf: u64, len: u64) -> Result<Target, u64> {
    // SAFETY: access_ok does not reach WORK; the pipe arm's last use of the borrow is its
    // guard, before `pipe` takes its own.
    let w = unsafe { WORK.get() };
    if !access_ok(ubuf, len) || len == 0 || !len.is_multiple_of(8) {
        return Err(EINVAL);
    }
    match fd {
        0 if len <= w.kbuf_len => Ok(Target::Kbuf(w.kbuf)),
        1 | 2 if len <= w.pipe_cap => Ok(Target::Pipe(pipe(fd).ok_or(EINVAL)?)),
        _ => Err(EINVAL),
    }
}

enum Target {
    Kbuf(u64),
    Pipe(*mut Pipe),
}

/// write: copy_from_user into the kernel buffer (fd 0), or into a pipe once it is empty.
fn write(fd: u64, ubuf: u64, len: u64) -> u64 {
    let p = match rw_target(fd, ubuf, len) {
        Err(e) => return e,
        Ok(Target::Kbuf(kbuf)) => {
            // SAFETY: access_ok; the kernel buffer holds `len` bytes.
            unsafe { uaccess::copy_from_user(kbuf, ubuf, len) };
            return len;
        }
        Ok(Target::Pipe(p)) => p,
    };
    while pipe_len(p) != 0 {
        sleep_on(chan(p, false));
    }
    // SAFETY: access_ok; the pipe buffer holds `pipe_cap` >= `len` bytes.
    unsafe { uaccess::copy_from_user((*p).buf, ubuf, len) };
    set_pipe_len(p, len);
    wake_up(chan(p, true));
    len
}

/// read: copy_to_user from the kernel buffer (fd 0), or from a pipe once it holds a message.
fn read(fd: u64, ubuf: u64, len: u64) -> u64 {
    let p = match rw_target(fd, ubuf, len) {
        Err(e) => return e,
        Ok(Target::Kbuf(kbuf)) => {
            // SAFETY: access_ok; the kernel buffer holds `len` bytes.
            unsafe { uaccess::copy_to_user(ubuf, kbuf, len) };
            return len;
        }
        Ok(Target::Pipe(p)) => p,
    };
    while pipe_len(p) == 0 {
        sleep_on(chan(p, true));
    }
    let n = pipe_len(p).min(len);
    // SAFETY: access_ok; `n` bytes are in the pipe buffer.
    unsafe { uaccess::copy_to_user(ubuf, (*p).buf, n) };
    set_pipe_len(p, 0);
    wake_up(chan(p, false));
    n
}

/// Reads `n` bytes of the kernel buffer, 8 at a time (one checked load each when kernel
/// accesses are checked).
fn kbuf_probe(n: u64) -> u64 {
    // SAFETY: nothing is called while the borrow lives.
    let w = unsafe { WORK.get() };
    if n == 0 || !n.is_multiple_of(8) || n > w.kbuf_len {
        return EINVAL;
    }
    let sum: u64;
    // SAFETY: reads `n` bytes of the run's kernel buffer.
    unsafe {
        core::arch::asm!(
            "mov {s}, #0",
            "1: ldr {t}, [{p}], #8",
            "add {s}, {s}, {t}",
            "subs {n}, {n}, #8",
            "b.ne 1b",
            s = out(reg) sum,
            t = out(reg) _,
            p = inout(reg) w.kbuf => _,
            n = inout(reg) n => _,
            options(nostack, readonly),
        )
    };
    sum
}

/// mmap of `len` bytes at USER_MAP_VA: reserved now, each page mapped at its first touch
/// (the page-fault handler).
fn mmap(len: u64) -> u64 {
    if len == 0 || !len.is_multiple_of(2 << 20) || len > 16 << 20 {
        return EINVAL;
    }
    // SAFETY: the current task's mm is live; the reference to the task lives for one field
    // read.
    unsafe { (*current().mm).map_lazy(USER_MAP_VA, len) };
    USER_MAP_VA
}
