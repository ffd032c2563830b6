//! Kernels built by `mtex kernel build` from Debian's linux-source-6.12: a KASAN_HW_TAGS
//! build boots under mtex with KASAN on and its TFSR_EL1 reads counted; asked for again it is
//! answered from the cache; a patch that does not apply is refused naming its hunk; and the
//! shipped patch scenario's expectations (each derived from what its patch does) all hold.
//!
//! `./scripts/test` builds the scenario's kernels before the QEMU tests start, so that no
//! kernel compile runs beside a guest; here they are cache hits.

use super::linux::ONE_AT_A_TIME;
use serde_json::Value;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn mtex(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mtex"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("running mtex")
}

fn text(o: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The Image path `mtex kernel build` printed.
fn image_of(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("mtex: Image"))
        .map(|p| p.trim().to_string())
        .unwrap_or_else(|| panic!("no Image line in {}", text(o)))
}

fn scratch(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("mtex-kb-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn a_kasan_build_boots_with_kasan_on_counts_tfsr_reads_and_is_cached() {
    let built = mtex(&["kernel", "build", "--kasan", "sync"]);
    assert!(built.status.success(), "{}", text(&built));
    let image = image_of(&built);
    // Nothing changed: answered from target/kernels without running make.
    let t = Instant::now();
    let again = mtex(&["kernel", "build", "--kasan", "sync"]);
    assert!(again.status.success(), "{}", text(&again));
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    assert!(text(&again).contains("built before"), "{}", text(&again));
    assert_eq!(image_of(&again), image);
    let out = scratch("kasan");
    let run = {
        let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        mtex(&[
            "linux",
            "--kernel",
            &image,
            "--workload",
            "getpid 100",
            "--out",
            out.to_str().unwrap(),
        ])
    };
    assert!(run.status.success(), "{}", text(&run));
    let dir = out.join("linux-1");
    let console = std::fs::read_to_string(dir.join("linux-console.log")).unwrap();
    assert!(
        console.contains("KernelAddressSanitizer initialized (hw-tags, mode=sync"),
        "{console}"
    );
    // The boot words came from the kernel's description, not the user.
    assert!(console.contains("kasan.mode=sync"), "{console}");
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap();
    let c = &doc["runs"][0]["phases"][0]["counters"];
    // 100 system calls: every return to EL0 reads TFSR_EL1 (6.12 with KASAN_HW_TAGS).
    assert!(c["tfsr_reads"].as_u64().unwrap() >= 100, "{c}");
    // At least one synchronous entry from EL0 per system call (a page fault taken in the
    // window is one too).
    assert!(c["kernel_entries.sync_el0"].as_u64().unwrap() >= 100, "{c}");
    // Kernel pointers are tagged: KASAN makes kernel accesses tag checked.
    assert!(c["mem_access_checked_rd:k"].as_u64().unwrap() > 0, "{c}");
    assert!(
        doc["kernel"]["version"]
            .as_str()
            .unwrap()
            .contains("KASAN_HW_TAGS sync"),
        "{}",
        doc["kernel"]
    );
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn a_patch_that_does_not_apply_is_refused_naming_the_hunk() {
    let d = scratch("bad-patch");
    let p = d.join("wrong.patch");
    std::fs::write(
        &p,
        "--- a/kernel/fork.c\n+++ b/kernel/fork.c\n@@ -1,3 +1,3 @@\n no such line one\n\
         -no such line two\n+replaced\n no such line three\n",
    )
    .unwrap();
    let o = mtex(&["kernel", "build", "--patch", p.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let t = text(&o);
    assert!(t.contains("wrong.patch: does not apply"), "{t}");
    assert!(t.contains("kernel/fork.c: Hunk #1 FAILED"), "{t}");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn the_patch_scenario_holds_every_expectation() {
    let out = scratch("patches");
    let o = {
        let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        mtex(&[
            "run",
            "../scripts/scenarios/kernel-patches.toml",
            "--out",
            out.to_str().unwrap(),
        ])
    };
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(!t.contains("FAILED"), "{t}");
    // Every expectation of the file was judged, and held.
    let file = std::fs::read_to_string("../scripts/scenarios/kernel-patches.toml").unwrap();
    assert_eq!(
        t.matches("   PASS  ").count(),
        file.matches("[[expect]]").count(),
        "{t}"
    );
    // One results document for the whole scenario: each kernel's boots a run named for its
    // run and kernel, each expectation judged there, as a built-in scenario's are.
    let doc: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("kernel-patches-1/report.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(doc["success"], true);
    let judged = doc["expectations"].as_array().unwrap();
    assert_eq!(judged.len(), file.matches("[[expect]]").count());
    assert!(judged.iter().all(|e| e["held"] == true), "{judged:?}");
    let names: Vec<&str> = doc["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"tcma1-debian-6-12") && names.contains(&"tfsr-sync-kasan-6-12-tfsr"),
        "{names:?}"
    );
    let _ = std::fs::remove_dir_all(&out);
}
