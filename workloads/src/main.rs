//! `mtex-work`: the workloads Linux mode runs inside the guest, as static aarch64 programs
//! built from this repository (no prebuilt binaries). Each sets its tag-check mode first
//! (`--tcf0`), works on a tagged heap unless told not to, and prints one result line.
//!
//! ```text
//! mtex-work [--tcf0 none|sync|async|asymm] [--untagged] WORKLOAD [N] [THREADS]
//!   getpid N            N getpid system calls
//!   futex-hash N T      T threads, each N FUTEX_WAITs on its own futexes that return at
//!                       once (the value never matches), as perf bench futex hash
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
//!   exec PROGRAM ARGS   runs any program of the initramfs (busybox's applets) to its end:
//!                       with --window, a window around it (its own TCF0: exec resets it)
//! ```
//!
//! `--window ID` (under mtex's Linux mode) opens trace window ID through the doorbell just
//! before the workload and closes it just after; `--leave-open` skips the close.
#![deny(unsafe_op_in_unsafe_fn)]

mod doorbell;
mod mte;
mod work;

use mte::Tcf0;
use std::process::ExitCode;

fn usage(why: &str) -> ExitCode {
    eprintln!("mtex-work: {why}");
    eprintln!(
        "usage: mtex-work [--tcf0 none|sync|async|asymm] [--untagged] WORKLOAD [N] [THREADS]"
    );
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1).peekable();
    let mut tcf0 = Tcf0::None;
    let mut tagged = true;
    let mut window: Option<u32> = None;
    let mut leave_open = false;
    while let Some(a) = args.peek() {
        match a.as_str() {
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
    let mut num = |default: u64| -> Result<u64, ExitCode> {
        match args.next() {
            None => Ok(default),
            Some(s) => s.parse().map_err(|_| usage(&format!("not a number: {s}"))),
        }
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
        b.open(id);
    }
    let result = match workload.as_str() {
        "getpid" => num(1000).map(work::getpid),
        "futex-hash" => match (num(1000), num(4)) {
            (Ok(n), Ok(t)) => Ok(work::futex_hash(&cfg, n, t)),
            (Err(e), _) | (_, Err(e)) => Err(e),
        },
        "memcached" => num(200).map(|n| work::memcached(&cfg, n)),
        "thread-create" => num(20).map(work::thread_create),
        "fork" => num(20).map(work::fork),
        "switch" => num(100).map(|n| work::switch(&cfg, n)),
        "spin" => num(100_000).map(work::spin),
        "fake-markers" => num(10).map(work::fake_markers),
        "exec" => {
            let command: Vec<String> = args.by_ref().collect();
            Ok(work::exec(&command))
        }
        "mte-fault" => Ok(work::mte_fault(&cfg)),
        "doorbell" => match (num(0), num(0)) {
            (Ok(off), Ok(v)) => doorbell::Doorbell::map()
                .map(|b| {
                    b.store(off, v);
                    Ok(format!("stored {v:#x} at {off:#x}"))
                })
                .map_err(|e| {
                    eprintln!("mtex-work: mapping the doorbell: {e}");
                    ExitCode::FAILURE
                }),
            (Err(e), _) | (_, Err(e)) => Err(e),
        },
        "die" => {
            // SAFETY: the process kills itself; nothing after runs.
            unsafe { libc::raise(libc::SIGKILL) };
            Ok(Err(std::io::Error::other("still alive after SIGKILL")))
        }
        other => return usage(&format!("unknown workload {other}")),
    };
    if let (Some(b), Some(id), false) = (&bell, window, leave_open) {
        b.close(id);
    }
    match result {
        Ok(Ok(line)) => {
            println!("mtex-work: {workload} ok: {line}");
            ExitCode::SUCCESS
        }
        Ok(Err(e)) => {
            eprintln!("mtex-work: {workload} failed: {e}");
            ExitCode::FAILURE
        }
        Err(code) => code,
    }
}
