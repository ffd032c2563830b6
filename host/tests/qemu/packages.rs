//! A Debian user space in Linux mode: a package's program (Debian's `hello`, linked against
//! Debian's glibc) and a file of the user's own each run in a window of `--run`, and glibc's
//! tagged heap (`--tagged-heap`) shows as the tag checking the tasks set and as checked user
//! accesses, which are none without it.

use super::linux::{ONE_AT_A_TIME, assert_oracle_agrees, linux, window};
use serde_json::Value;
use std::process::Command;

/// Window 2's counter (the one around `hello`) in the run's document.
fn counter(doc: &Value, name: &str) -> u64 {
    doc["runs"][0]["phases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["id"] == 2)
        .and_then(|p| p["counters"][name].as_u64())
        .unwrap_or_else(|| panic!("no {name} in window 2"))
}

#[test]
fn a_debian_program_runs_in_a_window_and_its_tagged_heap_is_checked() {
    let d = std::env::temp_dir().join(format!("mtex-packages-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    let greet = d.join("greet");
    std::fs::write(&greet, "#!/bin/sh\necho added-ok\n").unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&greet, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let greet = greet.to_str().unwrap();
    let run = |env: &[&str]| {
        let mut args = vec![
            "--packages",
            "hello",
            "--add",
            greet,
            "--run",
            "greet",
            "--run",
            "hello",
        ];
        args.extend_from_slice(env);
        linux(&args)
    };
    // On QEMU's max CPU glibc would pick its SVE string routines, whose loads and stores
    // the decoder does not model (a problem, exit 1): Linux mode's CPU has no SVE unless
    // asked, and the status says the windows hold none.
    let (status, tagged, text) = run(&["--tagged-heap", "sync", "--oracle"]);
    assert_eq!(status, 0, "{text}");
    assert_eq!(
        tagged["cpu_model"], "QEMU max without SVE and SME",
        "{text}"
    );
    // What each window's tasks asked for, as the hypervisor saw it: ld.so's prctl made
    // Linux write TCF0 = SYNC for the command (a busybox script and a Debian program, both
    // glibc's), and NONE again when it switched back to a task without it.
    for id in [1, 2] {
        assert_eq!(window(&tagged, id)["user_tcf0"][0], "SYNC", "{text}");
    }
    let output = tagged["workload_output"].to_string();
    assert!(output.contains("added-ok"), "the added file ran: {output}");
    assert!(
        output.contains("Hello, world!"),
        "the package's program ran: {output}"
    );
    // glibc.mem.tagging=3: ld.so turns tag checking on for the process and malloc takes its
    // heap from PROT_MTE memory, tagging each block. hello's stdout buffer is such a block:
    // the greeting is written into it and read out of it through the tagged pointer.
    assert!(counter(&tagged, "mem_access_checked_wr:u") >= 1, "{text}");
    assert!(counter(&tagged, "mem_access_checked_rd:u") >= 1, "{text}");
    assert_oracle_agrees(window(&tagged, 2), &text);
    // Without it no user page is mapped PROT_MTE: nothing at EL0 is tag checked.
    let (status, plain, text) = run(&[]);
    assert_eq!(status, 0, "{text}");
    assert_eq!(counter(&plain, "mem_access_checked_wr:u"), 0, "{text}");
    assert_eq!(counter(&plain, "mem_access_checked_rd:u"), 0, "{text}");
    // And no task set a TCF0 of its own.
    assert_eq!(
        window(&plain, 2)["user_tcf0"],
        serde_json::json!([]),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&d);
}

/// A package Debian does not have is named as apt names it, before any boot.
#[test]
fn a_package_debian_does_not_have_is_refused_before_any_boot() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let out = Command::new(env!("CARGO_BIN_EXE_mtex"))
        .args([
            "linux",
            "--packages",
            "no-such-package-of-mtex",
            "--workload",
            "true",
        ])
        .arg("--out")
        .arg(std::env::temp_dir().join("mtex-no-package"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(
            "--packages: Debian bookworm (arm64): Unable to locate package no-such-package-of-mtex"
        ),
        "{stderr}"
    );
    assert!(
        !std::env::temp_dir()
            .join("mtex-no-package/linux-1")
            .exists()
    );
}

/// Debian's own benchmark as a kernel engineer runs it: `perf bench futex hash` from
/// trixie's linux-perf, its second of run time (about 10^9 instructions) in a sampled window.
/// With glibc's tagged heap the hypervisor sees perf's threads set TCF0 to SYNC, and the
/// estimate of checked user reads reaches what the benchmark's loop makes at the least: each
/// FUTEX_WAIT is made on `&w->futex[i]`, and `w->futex` is read again from the worker (a
/// calloc'd, so tagged, block that the call may change) for every one. perf prints each
/// thread's operations per second of its run time, and the run time in whole seconds, so
/// their product is at most its operations. Without the tagged heap no user access is
/// checked and no task sets TCF0.
#[test]
fn debian_perf_bench_futex_hash_is_sampled_with_its_tagged_heap() {
    let run = |extra: &[&str]| {
        let mut args = vec![
            "--packages",
            "linux-perf",
            "--suite",
            "trixie",
            "--run",
            "perf bench futex hash -r 1 -t 2 -f 64",
            "--sample",
            "1000:300",
        ];
        args.extend_from_slice(extra);
        linux(&args)
    };
    let estimate = |doc: &Value, name: &str| -> (f64, f64) {
        let e = doc["sampled_windows"][0]["estimates"]
            .as_array()
            .expect("estimates")
            .iter()
            .find(|e| e[0] == name)
            .unwrap_or_else(|| panic!("no {name}: {doc}"))
            .clone();
        (
            e[1]["value"].as_f64().unwrap(),
            e[1]["half_width"].as_f64().unwrap_or(0.0),
        )
    };
    // No oracle: it hooks every load and store of the 10^9 instructions (the hello test
    // holds the trace against it on the same user space).
    let (status, tagged, text) = run(&["--tagged-heap", "sync"]);
    assert_eq!(status, 0, "{text}");
    let w = &tagged["sampled_windows"][0];
    assert_eq!(w["user_tcf0"][0], "SYNC", "{text}");
    let output: Vec<String> = tagged["workload_output"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap().to_string())
        .collect();
    let per_second: Vec<f64> = output
        .iter()
        .filter(|l| l.contains("[thread"))
        .filter_map(|l| {
            let at = l.rfind("[ ")?;
            l[at + 2..].split_whitespace().next()?.parse().ok()
        })
        .collect();
    assert_eq!(per_second.len(), 2, "a line per thread: {output:?}");
    let secs: f64 = output
        .iter()
        .find_map(|l| l.split("total secs = ").nth(1)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no run time: {output:?}"));
    let ops = per_second.iter().sum::<f64>() * secs;
    assert!(ops > 0.0, "{output:?}");
    // Over one second the threads' rates sum to the operation count, given per operation.
    if secs == 1.0 {
        assert_eq!(w["operations"]["count"].as_f64(), Some(ops), "{text}");
        assert!(
            text.contains("per operation, set-up and tear-down included"),
            "{text}"
        );
    }
    let (v, h) = estimate(&tagged, "mem_access_checked_rd:u");
    assert!(
        v > 0.0 && v + h >= ops,
        "{v} ± {h} against at least {ops}\n{text}"
    );
    // The kernel reads each futex word through the user's tagged pointer, with TCO clear
    // for a sync task: a checked uaccess read per operation at the least.
    let (v, h) = estimate(&tagged, "uaccess_checked_rd");
    assert!(v + h >= ops, "{v} ± {h} against at least {ops}\n{text}");
    let (status, plain, text) = run(&[]);
    assert_eq!(status, 0, "{text}");
    assert_eq!(estimate(&plain, "mem_access_checked_rd:u").0, 0.0, "{text}");
    assert_eq!(estimate(&plain, "mem_access_checked_wr:u").0, 0.0, "{text}");
    assert_eq!(
        plain["sampled_windows"][0]["user_tcf0"],
        serde_json::json!([]),
        "{text}"
    );
}

/// The command a kernel engineer measures with, unchanged, inside the guest: Debian's
/// `perf stat` of the four MTE events over a short `perf bench futex hash` (one pass of one
/// thread over 8 futexes). QEMU's PMU has none of the events; the hypervisor's counters do,
/// from the trace, and perf's four figures equal the report's count of what those counters
/// counted. perf counts its child alone, so each is at most the window's own count (which
/// holds perf's start-up too), and, but for the kernel's writes, at least what the
/// benchmark's loop makes with its tagged heap: each of its 8 FUTEX_WAIT calls reads
/// `w->futex` and writes `w->ops` in a calloc'd (tagged) block, and the kernel reads the
/// futex word through that tagged pointer.
#[test]
fn debian_perf_stat_counts_the_mte_events_as_the_trace_does() {
    let events = [
        "mem_access_checked_rd:u",
        "mem_access_checked_wr:u",
        "mem_access_checked_rd:k",
        "mem_access_checked_wr:k",
    ];
    let command = format!(
        "perf stat -e {} -- perf bench futex hash -r 0 -t 1 -f 8",
        events.join(",")
    );
    let (status, doc, text) = linux(&[
        "--packages",
        "linux-perf",
        "--suite",
        "trixie",
        "--tagged-heap",
        "sync",
        "--run",
        &command,
    ]);
    assert_eq!(status, 0, "{text}");
    let w = window(&doc, 1);
    let rows = w["perf_stat"]
        .as_array()
        .unwrap_or_else(|| panic!("perf's figures were not read:\n{text}"));
    let printed: Vec<&str> = rows.iter().map(|r| r["event"].as_str().unwrap()).collect();
    assert_eq!(printed, events, "{text}");
    // The window's own counts, by EL and direction, in the same (architectural) view.
    let whole = &w["views"]
        .as_array()
        .expect("views")
        .iter()
        .find(|v| v[0] == "architectural")
        .expect("the architectural view")[1];
    for r in rows {
        assert_eq!(r["scaled"], false, "{text}");
        assert_eq!(r["perf"], r["mtex"], "{text}");
        let event = r["event"].as_str().unwrap();
        assert_eq!(r["counter"], format!("guest_pmu.{event}"), "{text}");
        let guest = r["mtex"].as_u64().unwrap();
        let field = event
            .trim_start_matches("mem_access_checked_")
            .replace(':', "_");
        assert!(guest <= whole[&field].as_u64().unwrap(), "{event}: {text}");
        if event != "mem_access_checked_wr:k" {
            assert!(guest >= 8, "{event}: {guest}\n{text}");
        }
    }
    assert!(text.contains("equal"), "{text}");
}

/// Debian's memcached, its heap tagged, started by --setup outside the window, serves
/// memcaslap over the loopback network at one set for every ten gets: the window's operations
/// are memcaslap's own count, memcached's counters agree with it, both programs' heaps are
/// tagged (TCF0 sync set in the window), and a sync task's requests cross the kernel with
/// PSTATE.TCO clear, so its checked reads are there with an interval that excludes 0.
#[test]
fn debian_memcached_serves_memcaslap_over_loopback_in_a_sampled_window() {
    let (status, doc, text) = linux(&[
        "--packages",
        "memcached,libmemcached-tools",
        "--suite",
        "trixie",
        "--tagged-heap",
        "sync",
        "--setup",
        "memcached -u root -d -t 1",
        "--setup",
        "printf 'key\\n16 16 1\\nvalue\\n64 64 1\\ncmd\\n0 0.0909\\n1 0.9091\\n' > /etc/m.cnf",
        "--run",
        "memcaslap -s 127.0.0.1:11211 -x 1100 -w 1k -c 1 -T 1 -F /etc/m.cnf",
        "--sample",
        "1000:300",
    ]);
    assert_eq!(status, 0, "{text}");
    let w = &doc["sampled_windows"][0];
    assert_eq!(w["operations"]["count"], 1100, "{text}");
    assert_eq!(w["user_tcf0"][0], "SYNC", "{text}");
    let output = doc["workload_output"].to_string();
    assert!(
        output.contains("cmd_get: 1000") && output.contains("cmd_set: 100"),
        "{output}"
    );
    let rd_k = w["estimates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e[0] == "mem_access_checked_rd:k")
        .unwrap_or_else(|| panic!("no rd:k: {text}"))[1]
        .clone();
    let (v, h) = (rd_k["value"].as_f64().unwrap(), rd_k["half_width"].as_f64());
    assert!(h.is_some_and(|h| v - h > 0.0), "{rd_k}\n{text}");
}

/// A set-up command that fails stops the workload before any window, and is named.
#[test]
fn a_failed_setup_command_is_named_and_no_window_runs() {
    let (status, doc, text) = linux(&["--setup", "true", "--setup", "exit 7", "--run", "true"]);
    assert_eq!(status, 1, "{text}");
    assert!(
        text.contains("set-up command 2 (--setup) exited with status 7"),
        "{text}"
    );
    assert_eq!(doc["windows"], serde_json::json!([]), "{text}");
}
