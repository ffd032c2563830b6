//! `mtex-work`: the workloads Linux mode runs inside the guest, as static aarch64 programs
//! built from this repository (no prebuilt binaries). Each sets its tag-check mode first
//! (`--tcf0`), works on a tagged heap unless told not to, and prints one result line.
//!
//! ```text
//! mtex-work [--tcf0 none|sync|async|asymm] [--untagged] WORKLOAD [N] [THREADS]
//!   getpid N            N getpid system calls
//!   futex-hash N T      T threads, each N FUTEX_WAITs on its own futexes that return at
//!                       once (the value never matches), as perf bench futex hash
//!   clock N T           T threads, each on its own CPU, each N reads of the virtual counter
//!                       (CNTVCT_EL0, CNTVCTSS_EL0): none may go back, on one CPU or across
//!   memcached N         N request/reply round trips over a pipe to a server thread that
//!                       looks keys up in a tagged table
//!   thread-create N     create and join N threads
//!   fork N              fork and wait for N children
//!   switch N            N round trips over pipes with a child of the other mode (TCF0 none
//!                       against the chosen one): context switches between the two modes
//!   mte-fault           a store through a pointer with the wrong tag, in a child: SIGSEGV
//!                       under sync or asymm, none under none
//!   doorbell OFF VALUE  one raw doorbell store (to test the hypervisor's refusals)
//!   die                 SIGKILL itself (inside a window: a workload killed mid-window)
//!   spin N              a user-space loop of N iterations under a 20 µs interval timer:
//!                       interrupts and signals wherever the step engine is
//!   fake-markers N      N of each of the hypervisor's oracle markers, at EL0 (to test that
//!                       the oracle plugin takes only EL2's)
//!   gic-mask CPU N      disables the hypervisor's EL2 timer interrupt in CPU's own
//!                       redistributor, then N turns of a loop there and on CPU 0 (hostile
//!                       to a sampled window: that CPU's units stop)
//!   exec PROGRAM ARGS   runs any program of the initramfs (busybox's applets) to its end:
//!                       with --window, a window around it (its own TCF0: exec resets it)
//! ```
//!
//! `mtex-work results FILE` (under mtex's Linux mode) writes the hypervisor's records so far
//! to FILE (`-`: standard output), read back through the doorbell, for `mtex parse FILE`.
//!
//! `--window ID` (under mtex's Linux mode) opens trace window ID through the doorbell just
//! before the workload and closes it just after; `--leave-open` skips the close.
//! `--open-on CPU` and `--close-on CPU` move the program to that CPU (its affinity) before
//! the open and before the close: a window opened on one CPU and closed on another.
#![deny(unsafe_op_in_unsafe_fn)]

mod clock;
mod doorbell;
mod gic;
mod mte;
mod work;

use mte::Tcf0;
use std::process::ExitCode;

fn usage(why: &str) -> ExitCode {
    eprintln!("mtex-work: {why}");
    eprintln!(
        "usage: mtex-work [--tcf0 none|sync|async|asymm] [--untagged] WORKLOAD [N] [THREADS]\n       mtex-work results FILE"
    );
    ExitCode::from(2)
}

/// Runs this thread on `cpu` only, from its next instruction (sched_setaffinity moves it
/// there before returning).
pub(crate) fn move_to(cpu: usize) -> std::io::Result<()> {
    // SAFETY: an all-zero cpu_set_t is the empty set; CPU_SET writes inside it.
    let mut set: libc::cpu_set_t = unsafe { core::mem::zeroed() };
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(std::io::Error::other("no such CPU"));
    }
    // SAFETY: `cpu` is below CPU_SETSIZE (checked above).
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: pid 0 is this thread; the set is a valid cpu_set_t of the size given.
    let r = unsafe { libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set) };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// `mtex-work results FILE`.
fn results(path: &str) -> ExitCode {
    let d = match doorbell::Doorbell::map() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("mtex-work: results: mapping the doorbell through /dev/mem: {e}");
            return ExitCode::FAILURE;
        }
    };
    let Some((bytes, lost)) = d.results() else {
        eprintln!("mtex-work: results: no records to read (not under mtex's Linux mode)");
        return ExitCode::FAILURE;
    };
    let written = if path == "-" {
        std::io::Write::write_all(&mut std::io::stdout(), &bytes)
    } else {
        std::fs::write(path, &bytes)
    };
    if let Err(e) = written {
        eprintln!("mtex-work: results: writing {path}: {e}");
        return ExitCode::FAILURE;
    }
    eprintln!(
        "mtex-work: results: {} bytes to {path}{}",
        bytes.len(),
        match lost {
            0 => String::new(),
            n => format!(" ({n} bytes of records did not fit the hypervisor's ring)"),
        }
    );
    ExitCode::SUCCESS
}

fn main() -> ExitCode {
    let all: Vec<String> = std::env::args().skip(1).collect();
    if all.first().map(String::as_str) == Some("results") {
        return match all.as_slice() {
            [_, path] => results(path),
            _ => usage("results takes one FILE (- for standard output)"),
        };
    }
    let mut args = std::env::args().skip(1).peekable();
    let mut tcf0 = Tcf0::None;
    let mut tagged = true;
    let mut window: Option<u32> = None;
    let mut leave_open = false;
    let (mut open_on, mut close_on): (Option<usize>, Option<usize>) = (None, None);
    while let Some(a) = args.peek() {
        match a.as_str() {
            flag @ ("--open-on" | "--close-on") => {
                let close = flag == "--close-on";
                args.next();
                match args.next().and_then(|s| s.parse().ok()) {
                    Some(cpu) if close => close_on = Some(cpu),
                    Some(cpu) => open_on = Some(cpu),
                    None => return usage("--open-on and --close-on take a CPU number"),
                }
            }
            "--window" => {
                args.next();
                match args.next().and_then(|s| s.parse().ok()) {
                    Some(id) => window = Some(id),
                    None => return usage("--window takes a window id (a number)"),
                }
            }
            "--leave-open" => {
                args.next();
                leave_open = true;
            }
            "--tcf0" => {
                args.next();
                match args.next().as_deref().and_then(Tcf0::parse) {
                    Some(m) => tcf0 = m,
                    None => return usage("--tcf0 takes none, sync, async or asymm"),
                }
            }
            "--untagged" => {
                args.next();
                tagged = false;
            }
            _ => break,
        }
    }
    let Some(workload) = args.next() else {
        return usage("no workload");
    };
    // Everything is read before the window opens: a mistake opens nothing.
    let work = match Work::parse(&workload, args.collect()) {
        Ok(w) => w,
        Err(why) => return usage(&why),
    };
    if let Err(e) = mte::set_tcf0(tcf0) {
        eprintln!("mtex-work: prctl(PR_SET_TAGGED_ADDR_CTRL): {e}");
        return ExitCode::FAILURE;
    }
    let cfg = work::Config { tcf0, tagged };
    let bell = match window.map(|_| doorbell::Doorbell::map()).transpose() {
        Ok(b) => b,
        Err(e) => {
            eprintln!("mtex-work: mapping the doorbell through /dev/mem: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let (Some(b), Some(id)) = (&bell, window) {
        // Names the window for the report, before it opens (printing is not measured).
        let args: Vec<String> = std::env::args().skip(1).collect();
        println!("mtex-work: window {id}: {}", args.join(" "));
        if let Some(cpu) = open_on
            && let Err(e) = move_to(cpu)
        {
            eprintln!("mtex-work: --open-on {cpu}: {e}");
            return ExitCode::FAILURE;
        }
        b.open(id);
    }
    let result = work.run(&cfg);
    // Closed whatever the outcome: a failed workload's window ends here too.
    if let (Some(b), Some(id), false) = (&bell, window, leave_open) {
        if let Some(cpu) = close_on
            && let Err(e) = move_to(cpu)
        {
            eprintln!("mtex-work: --close-on {cpu}: {e} (closing where it runs)");
        }
        b.close(id);
    }
    match result {
        Ok(line) => {
            println!("mtex-work: {workload} ok: {line}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("mtex-work: {workload} failed: {e}");
            ExitCode::FAILURE
        }
    }
}

/// A workload and its arguments, read in full before any window opens: a mistake in them
/// is a usage error with no window left open.
enum Work {
    Getpid(u64),
    FutexHash(u64, u64),
    Clock(u64, u64),
    Memcached(u64),
    ThreadCreate(u64),
    Fork(u64),
    Switch(u64),
    Spin(u64),
    FakeMarkers(u64),
    GicMask(u64, u64),
    Exec(Vec<String>),
    MteFault,
    Doorbell(u64, u64),
    Die,
}

impl Work {
    fn parse(name: &str, args: Vec<String>) -> Result<Self, String> {
        let mut args = args.into_iter();
        if name == "exec" {
            let command: Vec<String> = args.collect();
            if command.is_empty() {
                return Err("exec needs a program to run".into());
            }
            return Ok(Work::Exec(command));
        }
        let mut num = |default: u64| -> Result<u64, String> {
            match args.next() {
                None => Ok(default),
                Some(s) => s.parse().map_err(|_| format!("not a number: {s}")),
            }
        };
        let work = match name {
            "getpid" => Work::Getpid(num(1000)?),
            "futex-hash" => Work::FutexHash(num(1000)?, num(4)?),
            "clock" => Work::Clock(num(1000)?, num(2)?),
            "memcached" => Work::Memcached(num(200)?),
            "thread-create" => Work::ThreadCreate(num(20)?),
            "fork" => Work::Fork(num(20)?),
            "switch" => Work::Switch(num(100)?),
            "spin" => Work::Spin(num(100_000)?),
            "fake-markers" => Work::FakeMarkers(num(10)?),
            "gic-mask" => Work::GicMask(num(1)?, num(1_000_000)?),
            "mte-fault" => Work::MteFault,
            "doorbell" => {
                let (offset, value) = (num(0)?, num(0)?);
                let size = mtex_abi::doorbell::DOORBELL_SIZE;
                if !offset.is_multiple_of(8) || offset >= size {
                    return Err(format!(
                        "doorbell: offset {offset} is not a multiple of 8 below {size}"
                    ));
                }
                Work::Doorbell(offset, value)
            }
            "die" => Work::Die,
            other => return Err(format!("unknown workload {other}")),
        };
        match args.next() {
            Some(extra) => Err(format!("{name}: unexpected argument {extra}")),
            None => Ok(work),
        }
    }

    fn run(self, cfg: &work::Config) -> Result<String, std::io::Error> {
        match self {
            Work::Getpid(n) => work::getpid(n),
            Work::FutexHash(n, t) => work::futex_hash(cfg, n, t),
            Work::Clock(n, t) => clock::clock(n, t),
            Work::Memcached(n) => work::memcached(cfg, n),
            Work::ThreadCreate(n) => work::thread_create(n),
            Work::Fork(n) => work::fork(n),
            Work::Switch(n) => work::switch(cfg, n),
            Work::Spin(n) => work::spin(n),
            Work::FakeMarkers(n) => work::fake_markers(n),
            Work::GicMask(cpu, n) => gic::mask(cpu, n),
            Work::Exec(command) => work::exec(&command),
            Work::MteFault => work::mte_fault(cfg),
            Work::Doorbell(off, v) => doorbell::Doorbell::map().map(|b| {
                b.store(off, v);
                format!("stored {v:#x} at {off:#x}")
            }),
            Work::Die => {
                // SAFETY: the process kills itself; nothing after runs.
                unsafe { libc::raise(libc::SIGKILL) };
                Err(std::io::Error::other("still alive after SIGKILL"))
            }
        }
    }
}
