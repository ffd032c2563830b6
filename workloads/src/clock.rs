//! `clock N T`: T threads, each on its own CPU of those the program may use, each reading the
//! virtual counter N times (CNTVCT_EL0, and CNTVCTSS_EL0 where the CPU has FEAT_ECV), as the
//! vDSO's clock_gettime does. Every read must be at least the thread's previous one and at
//! least the highest any thread had published before it: a clock that goes back on one CPU,
//! or that one CPU sees behind what another already read, fails the workload.

use crate::work::Outcome;
use std::io::Error;
use std::sync::atomic::{AtomicU64, Ordering};

/// Linux's arm64 HWCAP2_ECV (uapi asm/hwcap.h): CNTVCTSS_EL0 may be read at EL0.
const HWCAP2_ECV: u64 = 1 << 19;

/// Threads at most: each publishes its last read in its own slot, with plain stores (an
/// atomic read-modify-write here would be an exclusive pair, which a stepped CPU cannot
/// complete).
const MAX_THREADS: usize = 16;

/// Each thread's last read.
static PUBLISHED: [AtomicU64; MAX_THREADS] = [const { AtomicU64::new(0) }; MAX_THREADS];

/// The highest value any thread has published.
fn published(threads: usize) -> u64 {
    PUBLISHED[..threads]
        .iter()
        .map(|p| p.load(Ordering::Acquire))
        .max()
        .unwrap_or(0)
}

fn cntvct() -> u64 {
    let v: u64;
    // SAFETY: a read of the virtual counter, which Linux lets EL0 read (the vDSO does).
    unsafe { core::arch::asm!("isb", "mrs {}, cntvct_el0", out(reg) v, options(nostack)) };
    v
}

fn cntvctss() -> u64 {
    let v: u64;
    // SAFETY: as above; only called where HWCAP2_ECV says the register exists.
    unsafe { core::arch::asm!("mrs {}, s3_3_c14_c0_6", out(reg) v, options(nostack)) };
    v
}

/// The CPUs this program may run on, in order.
fn allowed_cpus() -> Result<Vec<usize>, Error> {
    // SAFETY: an all-zero cpu_set_t is the empty set; sched_getaffinity fills it.
    let mut set: libc::cpu_set_t = unsafe { core::mem::zeroed() };
    // SAFETY: pid 0 is this thread; the set is a valid cpu_set_t of the size given.
    if unsafe { libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &mut set) } != 0 {
        return Err(Error::last_os_error());
    }
    Ok((0..libc::CPU_SETSIZE as usize)
        // SAFETY: every index is below CPU_SETSIZE.
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect())
}

pub fn clock(n: u64, threads: u64) -> Outcome {
    // SAFETY: getauxval reads the process's auxiliary vector.
    let ecv = unsafe { libc::getauxval(libc::AT_HWCAP2) } & HWCAP2_ECV != 0;
    let cpus = allowed_cpus()?;
    if threads as usize > MAX_THREADS {
        return Err(Error::other(format!("at most {MAX_THREADS} threads")));
    }
    let all = threads.max(1) as usize;
    let handles: Vec<_> = (0..all)
        .map(|t| {
            let cpu = cpus[t % cpus.len()];
            std::thread::spawn(move || -> Result<u64, Error> {
                crate::move_to(cpu)?;
                let (mut last, mut back) = (0u64, 0u64);
                for _ in 0..n {
                    let before = published(all);
                    let a = cntvct();
                    let b = if ecv { cntvctss() } else { cntvct() };
                    back += u64::from(a < last || b < a || a < before);
                    PUBLISHED[t].store(b, Ordering::Release);
                    last = b;
                }
                Ok(back)
            })
        })
        .collect();
    let mut back = 0;
    for h in handles {
        back += h.join().map_err(|_| Error::other("a thread panicked"))??;
    }
    if back != 0 {
        return Err(Error::other(format!("{back} reads went back")));
    }
    let counters = if ecv {
        "CNTVCT_EL0 and CNTVCTSS_EL0"
    } else {
        "CNTVCT_EL0 twice"
    };
    Ok(format!(
        "{threads} threads x {n} reads of {counters}, none back on any CPU"
    ))
}
