//! The oracle (`oracle/`, a QEMU plugin counting from QEMU's own hooks) against the trace on
//! the built-in guest: every traced phase of the default matrix and of the traced programs,
//! per EL, instructions begun, reads and writes. `mtex run --oracle` makes any difference a
//! problem, so exit status 0 says they all agree. (Linux mode's windows: `linux.rs`.)

use std::process::Command;

/// `mtex run ARGS --oracle`: exit status and the output.
fn run_with_oracle(args: &[&str]) -> (i32, String) {
    // One directory per call: the tests run at once, and each removes its own.
    static CALLS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let out_dir = std::env::temp_dir().join(format!("mtex-oracle-{}-{n}", std::process::id()));
    let out = Command::new(env!("CARGO_BIN_EXE_mtex"))
        .arg("run")
        .args(args)
        .arg("--oracle")
        .arg("--out")
        .arg(&out_dir)
        .output()
        .expect("running mtex run");
    let _ = std::fs::remove_dir_all(&out_dir);
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

#[test]
fn the_oracle_agrees_with_every_phase_of_the_default_matrix() {
    let (code, text) = run_with_oracle(&[]);
    assert_eq!(code, 0, "{text}");
    assert!(!text.contains("the oracle disagrees"), "{text}");
    assert!(!text.contains("oracle: "), "{text}");
}

#[test]
fn the_oracle_agrees_with_the_traced_programs() {
    // Tag-check faults at EL1 (differential), exclusives in runs, code rewritten (in place and
    // from inside a run) and remapped under the trace, exception vectors moved, trapped CPU registers.
    for guest in [
        "trace",
        "controls",
        "el0",
        "differential",
        "exclusive-loop",
        "hostile-exclusive",
        "hostile-patch",
        "hostile-remap",
        "hostile-stack-patch",
        "hostile-vector",
        "hostile-cpu",
    ] {
        let (code, text) = run_with_oracle(&["--guest", guest]);
        assert_eq!(code, 0, "{guest}:\n{text}");
    }
}

#[test]
fn the_oracle_agrees_with_the_kernel_on_four_cpus_per_cpu_and_in_total() {
    // Each phase is counted on every CPU: the oracle (per vCPU) checks each CPU's share and
    // the sum; a phase it saw on fewer CPUs than the trace, or any difference, fails the run.
    let (code, text) = run_with_oracle(&[
        "--opt",
        "cpus=4",
        "--opt",
        "hz=0",
        "--opt",
        "trace=only",
        "--opt",
        "workloads=getpid,futex-hash",
        "--opt",
        "policies=entry-tco,kasan-sync",
    ]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("once on each of 4 CPUs"), "{text}");
    assert!(!text.contains("the oracle disagrees"), "{text}");
    assert!(!text.contains("oracle: "), "{text}");
    assert!(!text.contains("the oracle saw it on"), "{text}");
}

#[test]
fn the_oracle_agrees_with_every_sampled_unit_and_lead() {
    // Each unit and each lead is a window to the oracle; over a sampled phase they must add
    // up to what the trace counted in them, with the kernel's tick on.
    let (code, text) = run_with_oracle(&[
        "--guest",
        "kernel",
        "--opt",
        "policies=entry-tco,tcma1",
        "--opt",
        "workloads=futex-hash:iters=2048",
        "--opt",
        "sample=500:5",
    ]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("Sampled phases"), "{text}");
    assert!(!text.contains("the oracle disagrees"), "{text}");
    assert!(!text.contains("oracle: "), "{text}");
}
