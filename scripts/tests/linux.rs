//! Linux mode on QEMU: Debian's arm64 kernel (fetched with apt on first use) booted
//! unmodified under the hypervisor, its MTE set-up writes trapped and named, its workloads'
//! tag-check modes visible as SCTLR_EL1.TCF0 changes on context switches, and every way the
//! run can go wrong a problem with exit status 1.
//!
//! The runs share apt's downloads (target/linux) but each has its own bundle and console;
//! they run one at a time (each QEMU is one core).

use serde_json::Value;
use std::process::Command;
use std::sync::Mutex;

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// `mtex linux ARGS --json`: exit status and the report.
fn linux(args: &[&str]) -> (i32, Value, String) {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let json = std::env::temp_dir().join(format!("mtex-linux-{}.json", std::process::id()));
    let out = Command::new(env!("CARGO_BIN_EXE_mtex"))
        .arg("linux")
        .args(args)
        .arg("--json")
        .arg(&json)
        .output()
        .expect("running mtex linux");
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap_or_default())
        .unwrap_or(Value::Null);
    let _ = std::fs::remove_file(&json);
    (out.status.code().unwrap_or(-1), doc, text)
}

fn writes(doc: &Value) -> &Vec<Value> {
    doc["writes"].as_array().expect("writes")
}

fn changed(w: &Value, what: &str) -> bool {
    w["changes"]
        .as_array()
        .is_some_and(|c| c.iter().any(|c| c.as_str() == Some(what)))
}

#[test]
fn a_stock_kernel_boots_and_its_mte_setup_and_task_modes_are_logged() {
    const ROUND_TRIPS: usize = 20;
    let (status, doc, text) = linux(&[
        "--workload",
        &format!("mtex-work --tcf0 sync mte-fault && mtex-work --tcf0 sync switch {ROUND_TRIPS}"),
    ]);
    assert_eq!(status, 0, "{text}");
    assert_eq!(doc["problems"].as_array().map(Vec::len), Some(0), "{text}");
    assert_eq!(doc["reached_init"], true);
    assert_eq!(doc["workload_status"], 0);
    assert!(
        doc["exit"].as_str().unwrap().contains("SYSTEM_OFF"),
        "{text}"
    );
    // MTE works for Linux's user space under the hypervisor: a wrong tag faults.
    let output: Vec<&str> = doc["workload_output"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        output.iter().any(|l| l.contains("SIGSEGV under Sync")),
        "{output:?}"
    );
    let w = writes(&doc);
    // TCR_EL1: the kernel enables top-byte-ignore for its half and leaves TCMA1 clear (a
    // Debian kernel has no KASAN_HW_TAGS).
    assert!(
        w.iter()
            .any(|w| w["register"] == "TCR_EL1" && changed(w, "TBI1 0→1")),
        "{text}"
    );
    let tcr = doc["final_tcr_el1"][1].as_array().unwrap();
    assert!(tcr.contains(&Value::from("TBI1=1")), "{tcr:?}");
    assert!(tcr.contains(&Value::from("TCMA1=0")), "{tcr:?}");
    // SCTLR_EL1: MTE turned on (ATA, ATA0) by the kernel's MTE feature code, named.
    let ata = w
        .iter()
        .find(|w| w["register"] == "SCTLR_EL1" && changed(w, "ATA 0→1"))
        .expect("an SCTLR_EL1 write setting ATA");
    assert!(
        ata["symbol"].as_str().is_some_and(|s| s.contains("mte")),
        "{ata}"
    );
    // TCF0 follows the task on every switch between the sync parent and the none child:
    // at least one change each way per round trip.
    for dir in ["TCF0 NONE→SYNC", "TCF0 SYNC→NONE"] {
        let n = w
            .iter()
            .filter(|w| w["register"] == "SCTLR_EL1" && changed(w, dir))
            .count();
        assert!(n >= ROUND_TRIPS, "{dir}: {n} writes\n{text}");
    }
    assert!(
        doc["symbols"].as_u64().unwrap() > 10_000,
        "kernel symbols read"
    );
}

#[test]
fn a_failing_workload_is_a_problem_and_exit_status_1() {
    let (status, doc, text) = linux(&["--workload", "mtex-work no-such-workload"]);
    assert_eq!(status, 1, "{text}");
    assert_eq!(doc["reached_init"], true);
    assert_eq!(doc["workload_status"], 2, "the program's usage error");
    let problems = doc["problems"].as_array().unwrap();
    assert!(
        problems
            .iter()
            .any(|p| p.as_str().unwrap().contains("exited with status 2")),
        "{text}"
    );
}

#[test]
fn linux_mode_without_a_uart_for_linux_is_refused_at_boot() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let args = mtex::linux::Args {
        kernel: "6.12".into(),
        workload: None,
        append: vec![],
        ram_mib: 512,
        json: None,
        console: false,
        timeout: 120,
        no_icount: false,
    };
    let p = mtex::linux::prepare(&args).expect("fetching and bundling");
    let images = mtex::images::Images {
        guest_image: p.bundle.clone(),
        ..mtex::images::build().unwrap()
    };
    // One -serial: the report's. Linux would have to share it, which Linux mode refuses.
    let cfg = mtex::qemu::RunConfig {
        memory_mib: 1280,
        ..Default::default()
    };
    let console = mtex::qemu::run(&images, &cfg).unwrap();
    let r = console.report();
    assert!(!r.succeeded());
    let exit = r.summary.map(|s| mtex::report::describe_exit(&s.exit));
    assert!(
        exit.as_deref().is_some_and(|e| e.contains("second UART")),
        "{exit:?}\n{}",
        console.text
    );
}
