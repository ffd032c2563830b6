//! The workloads themselves. Each returns its result line or why it failed.

use crate::mte::{self, Tcf0};
use std::io::{Error, Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};

pub struct Config {
    pub tcf0: Tcf0,
    pub tagged: bool,
}

pub(crate) type Outcome = Result<String, Error>;

pub fn getpid(n: u64) -> Outcome {
    let mut last = 0;
    for _ in 0..n {
        // SAFETY: getpid has no arguments and no effect; the raw system call, so that no
        // library caches the answer.
        last = unsafe { libc::syscall(libc::SYS_getpid) };
    }
    Ok(format!("{n} calls, pid {last}"))
}

/// Futexes per thread, as perf bench futex hash's default.
const FUTEXES: usize = 1024;
const FUTEX_WAIT_PRIVATE: libc::c_int = libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG;

/// `threads` threads each make `n` FUTEX_WAITs that return at once. With several threads,
/// thread `t` runs on CPU `t` modulo the CPUs online, as perf bench futex hash places its
/// workers: each CPU's share of the work is then fixed whatever the scheduler does.
pub fn futex_hash(cfg: &Config, n: u64, threads: u64) -> Outcome {
    // SAFETY: sysconf reads a system value.
    let online = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as u64;
    let handles: Vec<_> = (0..threads.max(1))
        .map(|t| {
            let tagged = cfg.tagged;
            let pin = (threads > 1).then_some((t % online) as usize);
            std::thread::spawn(move || -> Result<u64, Error> {
                if let Some(cpu) = pin {
                    crate::move_to(cpu)?;
                }
                let base = mte::alloc(FUTEXES * 4, tagged)?.cast::<u32>();
                let mut eagain = 0;
                for i in 0..n {
                    let f = base.wrapping_add((i as usize * 7 + t as usize) % FUTEXES);
                    // SAFETY: FUTEX_WAIT on a word of this thread's mapping, with a value it
                    // never holds (0 is there, 1 is expected): returns EAGAIN at once.
                    let r = unsafe {
                        libc::syscall(
                            libc::SYS_futex,
                            f,
                            FUTEX_WAIT_PRIVATE,
                            1u32,
                            0usize,
                            0usize,
                            0u32,
                        )
                    };
                    if r == -1 && Error::last_os_error().raw_os_error() == Some(libc::EAGAIN) {
                        eagain += 1;
                    }
                }
                Ok(eagain)
            })
        })
        .collect();
    let mut total = 0;
    for h in handles {
        total += h.join().map_err(|_| Error::other("a thread panicked"))??;
    }
    if total != n * threads.max(1) {
        return Err(Error::other(format!(
            "{total} of {} waits returned EAGAIN",
            n * threads.max(1)
        )));
    }
    Ok(format!("{threads} threads x {n} FUTEX_WAIT, all EAGAIN"))
}

fn pipe() -> Result<(std::fs::File, std::fs::File), Error> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two new descriptors into `fds`.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(Error::last_os_error());
    }
    // SAFETY: both descriptors are new and owned by nothing else.
    Ok(unsafe {
        (
            std::fs::File::from(OwnedFd::from_raw_fd(fds[0])),
            std::fs::File::from(OwnedFd::from_raw_fd(fds[1])),
        )
    })
}

/// Slots of the server's table.
const SLOTS: usize = 256;

pub fn memcached(cfg: &Config, n: u64) -> Outcome {
    let (mut req_r, mut req_w) = pipe()?;
    let (mut rep_r, mut rep_w) = pipe()?;
    let tagged = cfg.tagged;
    let server = std::thread::spawn(move || -> Result<(), Error> {
        let table = mte::alloc(SLOTS * 8, tagged)?.cast::<u64>();
        for i in 0..SLOTS {
            // SAFETY: inside the server's own mapping, through its tagged pointer.
            unsafe { table.add(i).write_volatile(i as u64 * 3) };
        }
        let mut key = [0u8; 8];
        while req_r.read_exact(&mut key).is_ok() {
            let k = u64::from_le_bytes(key) as usize % SLOTS;
            // SAFETY: as above.
            let v = unsafe { table.add(k).read_volatile() };
            rep_w.write_all(&v.to_le_bytes())?;
        }
        Ok(())
    });
    let mut sum = 0u64;
    for i in 0..n {
        req_w.write_all(&(i * 13).to_le_bytes())?;
        let mut v = [0u8; 8];
        rep_r.read_exact(&mut v)?;
        sum = sum.wrapping_add(u64::from_le_bytes(v));
    }
    drop(req_w);
    server
        .join()
        .map_err(|_| Error::other("the server panicked"))??;
    let expect: u64 = (0..n).map(|i| ((i * 13) as usize % SLOTS) as u64 * 3).sum();
    if sum != expect {
        return Err(Error::other(format!(
            "replies summed to {sum}, not {expect}"
        )));
    }
    Ok(format!("{n} requests"))
}

pub fn thread_create(n: u64) -> Outcome {
    for i in 0..n {
        std::thread::spawn(move || i)
            .join()
            .map_err(|_| Error::other("a thread panicked"))?;
    }
    Ok(format!("{n} threads"))
}

/// fork, then wait for the child; the child exits with `code` after running `child`.
fn fork_then(child: impl FnOnce() -> i32) -> Result<libc::c_int, Error> {
    // SAFETY: fork in a process whose other threads (if any) are idle; the child only runs
    // `child` (system calls) and _exit.
    match unsafe { libc::fork() } {
        -1 => Err(Error::last_os_error()),
        0 => {
            let code = child();
            // SAFETY: ends the child without running the parent's exit handlers.
            unsafe { libc::_exit(code) }
        }
        pid => {
            let mut status = 0;
            // SAFETY: waits for the child just created.
            if unsafe { libc::waitpid(pid, &mut status, 0) } != pid {
                return Err(Error::last_os_error());
            }
            Ok(status)
        }
    }
}

pub fn fork(n: u64) -> Outcome {
    for _ in 0..n {
        let status = fork_then(|| 0)?;
        if !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
            return Err(Error::other(format!(
                "a child ended with status {status:#x}"
            )));
        }
    }
    Ok(format!("{n} children"))
}

pub fn switch(cfg: &Config, n: u64) -> Outcome {
    let (mut a_r, mut a_w) = pipe()?;
    let (mut b_r, mut b_w) = pipe()?;
    let other = if cfg.tcf0 == Tcf0::None {
        Tcf0::Sync
    } else {
        Tcf0::None
    };
    // SAFETY: fork of a single-threaded process; the child uses its own copies of the pipe
    // ends and ends with _exit.
    let pid = unsafe { libc::fork() };
    if pid == -1 {
        return Err(Error::last_os_error());
    }
    if pid == 0 {
        let code = (|| -> Result<(), Error> {
            mte::set_tcf0(other)?;
            let mut b = [0u8; 1];
            for _ in 0..n {
                a_r.read_exact(&mut b)?;
                b_w.write_all(&b)?;
            }
            Ok(())
        })()
        .map_or(1, |()| 0);
        // SAFETY: ends the child.
        unsafe { libc::_exit(code) }
    }
    for _ in 0..n {
        a_w.write_all(b"x")?;
        let mut b = [0u8; 1];
        b_r.read_exact(&mut b)?;
    }
    let mut status = 0;
    // SAFETY: waits for the child forked above.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    if !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
        return Err(Error::other(format!(
            "the child ended with status {status:#x}"
        )));
    }
    Ok(format!("{n} round trips, {:?} against {other:?}", cfg.tcf0))
}

pub fn mte_fault(cfg: &Config) -> Outcome {
    let p = mte::alloc(4096, true)?;
    let wrong = mte::retag(p, mte::tag_of(p) ^ 1);
    let status = fork_then(|| {
        // SAFETY: a store inside the mapping through a pointer whose tag does not match:
        // the point of the test (a tag-check fault under sync).
        unsafe { wrong.write_volatile(1) };
        0
    })?;
    let faulted = libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGSEGV;
    let expected = matches!(cfg.tcf0, Tcf0::Sync | Tcf0::Asymm);
    let what = if faulted { "SIGSEGV" } else { "no fault" };
    if faulted != expected {
        return Err(Error::other(format!("{what} under {:?}", cfg.tcf0)));
    }
    Ok(format!("{what} under {:?}, as expected", cfg.tcf0))
}

/// SIGALRMs received by `spin`'s handler.
static ALARMS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

extern "C" fn on_alarm(_: libc::c_int) {
    ALARMS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

/// A user-space loop of `n` iterations (no system call) while an interval timer fires every
/// 20 µs: timer interrupts land inside the loop, at EL0, wherever the step engine is (in a
/// breakpoint run or stepping), and signals are delivered back into it.
/// `n` turns of a loop that touches no memory.
pub fn busy(n: u64) {
    let mut x = 0u64;
    for i in 0..n {
        x = core::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
    }
    core::hint::black_box(x);
}

pub fn spin(n: u64) -> Outcome {
    // SAFETY: installs a handler that only bumps an atomic counter (async-signal-safe).
    unsafe {
        let mut sa: libc::sigaction = core::mem::zeroed();
        sa.sa_sigaction = on_alarm as *const () as usize;
        sa.sa_flags = libc::SA_RESTART;
        if libc::sigaction(libc::SIGALRM, &sa, core::ptr::null_mut()) != 0 {
            return Err(Error::last_os_error());
        }
    }
    let tick = libc::timeval {
        tv_sec: 0,
        tv_usec: 20,
    };
    let timer = libc::itimerval {
        it_interval: tick,
        it_value: tick,
    };
    // SAFETY: arms this process's real-time interval timer.
    if unsafe { libc::setitimer(libc::ITIMER_REAL, &timer, core::ptr::null_mut()) } != 0 {
        return Err(Error::last_os_error());
    }
    let mut x = 0u64;
    for i in 0..n {
        x = core::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
    }
    let off = libc::itimerval {
        it_interval: libc::timeval {
            tv_sec: 0,
            tv_usec: 0,
        },
        it_value: libc::timeval {
            tv_sec: 0,
            tv_usec: 0,
        },
    };
    // SAFETY: disarms the timer.
    unsafe { libc::setitimer(libc::ITIMER_REAL, &off, core::ptr::null_mut()) };
    let alarms = ALARMS.load(std::sync::atomic::Ordering::Relaxed);
    Ok(format!("{n} iterations, {alarms} alarms, result {x:#x}"))
}

/// `n` times each of the hypervisor's oracle markers (`mtex_abi::oracle`), the phases' and
/// the shares', executed at EL0 with other ids in their registers: a guest posing as the
/// hypervisor to the oracle plugin, which must count them as four plain instructions each
/// turn and open or close nothing.
pub fn fake_markers(n: u64) -> Outcome {
    use mtex_abi::oracle::{CLOSE_MARKER, OPEN_MARKER, SHARE_CLOSE_MARKER, SHARE_OPEN_MARKER};
    for i in 0..n {
        // SAFETY: ORR into XZR: no register, flag or memory changes.
        unsafe {
            core::arch::asm!(".inst {open}", ".inst {close}", ".inst {sopen}", ".inst {sclose}",
                open = const OPEN_MARKER, close = const CLOSE_MARKER,
                sopen = const SHARE_OPEN_MARKER, sclose = const SHARE_CLOSE_MARKER,
                in("x0") 1000 + i, in("x1") 2000 + i, in("x2") 7,
                in("x3") 3000 + i, in("x4") 4000 + i,
                options(nomem, nostack, preserves_flags));
        }
    }
    Ok(format!("{n} of each of the four markers at EL0"))
}

/// Runs `command` (a program and its arguments, found on PATH) and waits for it: with a
/// window, everything it makes the CPU do is traced. It runs with its own tag-check mode
/// (Linux resets TCF0 at execve).
pub fn exec(command: &[String]) -> Outcome {
    let Some((program, args)) = command.split_first() else {
        return Err(Error::other("exec: no program given"));
    };
    let status = std::process::Command::new(program).args(args).status()?;
    if !status.success() {
        return Err(Error::other(format!("{program} ended with {status}")));
    }
    Ok(format!("{program} ended with {status}"))
}
