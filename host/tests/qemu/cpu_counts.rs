//! A scenario run at several CPU counts, end to end: `cpus = [1, 2]` boots each kernel at
//! each count with `{cpus}` written into the workload (a thread per CPU), its windows are
//! given per operation by kernel and CPU count in text, report.json and a plot, and
//! expectations per operation are judged on the workload's own count.

use super::linux::ONE_AT_A_TIME;
use mtex::model::results::Results;
use std::process::Command;

/// Each thread makes this many FUTEX_WAITs.
const WAITS: u64 = 300;

#[test]
fn futex_hash_at_one_and_two_cpus_checks_one_user_read_per_wait_at_each() {
    let tmp = std::env::temp_dir().join(format!("mtex-cpus-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).unwrap();
    // Every FUTEX_WAIT reads its futex word once, through the thread's tagged pointer: one
    // check that TCMA1 would leave, however many threads and CPUs share the work.
    let scenario = format!(
        r#"version = 1
name = "cpus"
[kernels]
debian = "6.12"
[[run]]
name = "futex"
kernels = ["debian"]
cpus = [1, 2]
workloads = ["futex-hash {WAITS} {{cpus}}"]
tcf0 = ["sync"]
[[expect]]
run = "futex-1cpu"
counter = "if_tcma1.mem_access_checked_rd:k"
kernel = "debian"
at_least = 1
per_operation = true
[[expect]]
run = "futex-2cpu"
counter = "if_tcma1.mem_access_checked_rd:k"
kernel = "debian"
at_most = 1
per_operation = true
[[expect]]
from_run = "futex-1cpu"
to_run = "futex-2cpu"
counter = "if_tcma1.mem_access_checked_rd:k"
from = "debian"
to = "debian"
equal = true
per_operation = true
"#
    );
    let file = tmp.join("cpus.toml");
    std::fs::write(&file, scenario).unwrap();
    let out = {
        let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        Command::new(env!("CARGO_BIN_EXE_mtex"))
            .arg("run")
            .arg(&file)
            .arg("--out")
            .arg(tmp.join("results"))
            .output()
            .unwrap()
    };
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        text.contains("By CPU count: futex, window 1: futex-hash 300 {cpus}, TCF0 sync"),
        "{text}"
    );
    let dir = std::fs::read_dir(tmp.join("results"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let doc: Results =
        serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap();
    // Both counts booted, each as its own run, and each with its threads' waits.
    let runs: Vec<&str> = doc.runs.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(runs, ["futex-1cpu-debian", "futex-2cpu-debian"], "{text}");
    assert_eq!(doc.by_cpus.len(), 1, "{text}");
    let s = &doc.by_cpus[0];
    let points: Vec<(u32, u64)> = s.points.iter().map(|p| (p.cpus, p.operations)).collect();
    assert_eq!(points, [(1, WAITS), (2, 2 * WAITS)], "{text}");
    for p in &s.points {
        assert!(
            p.source.contains("FUTEX_WAIT"),
            "the workload's own count: {}",
            p.source
        );
        // Traced whole: exact figures, one user checked read per wait at least (the
        // kernel's own reads, checked with TCO clear in a sync task, come on top).
        let rd = &p.per_operation["mem_access_checked_rd:k"];
        assert!(rd.exact && rd.value >= 1.0, "{rd:?}");
    }
    assert_eq!(doc.expectations.len(), 3);
    for e in &doc.expectations {
        assert!(e.held, "{}: {}", e.text, e.detail);
        assert!(e.text.contains("per operation"), "{}", e.text);
    }
    // The plot is a file of the directory and on the results page.
    let svg = std::fs::read_to_string(dir.join("cpus-futex-window-1.svg")).unwrap();
    assert!(svg.contains("kernel checked reads per operation"), "{svg}");
    let page = std::fs::read_to_string(dir.join("index.html")).unwrap();
    assert!(
        page.contains("cpus-futex-window-1.svg"),
        "the page links the plot"
    );
    let _ = std::fs::remove_dir_all(&tmp);
}
