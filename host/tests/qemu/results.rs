//! The records read back inside the guest: `mtex-work results FILE` takes a snapshot of
//! everything the hypervisor has sent, through the doorbell, for a machine whose only UART is
//! its console. The snapshot must be the same records as the UART's, byte for byte, up to the
//! snapshot's own record, and `mtex parse` must take it as a whole report.

use super::linux::ONE_AT_A_TIME;
use std::path::Path;
use std::process::Command;

pub(super) const BEGIN: &str = "mtex-results-begin";
pub(super) const END: &str = "mtex-results-end";

/// The base64 lines Linux printed between the markers, decoded by the host's base64.
pub(super) fn printed_file(linux_console: &str, dir: &Path) -> Vec<u8> {
    let text: String = linux_console
        .lines()
        .map(|l| l.trim_end_matches('\r'))
        .skip_while(|l| *l != BEGIN)
        .skip(1)
        .take_while(|l| *l != END)
        .flat_map(|l| [l, "\n"])
        .collect();
    assert!(!text.is_empty(), "no results printed:\n{linux_console}");
    let b64 = dir.join("results.b64");
    std::fs::write(&b64, text).unwrap();
    let out = Command::new("base64").arg("-d").arg(&b64).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

#[test]
fn the_guest_reads_back_every_record_so_far_and_mtex_parse_takes_it_whole() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = std::env::temp_dir().join(format!("mtex-results-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let workload = format!(
        "mtex-work --tcf0 sync --window 1 getpid 100; mtex-work results /tmp/results; \
         echo {BEGIN}; base64 /tmp/results; echo {END}; \
         mtex-work --tcf0 sync --window 2 getpid 10"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_mtex"))
        .args(["linux", "--workload", &workload, "--out"])
        .arg(&dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    let run = dir.join("linux-1");
    let linux_console = std::fs::read_to_string(run.join("linux-console.log")).unwrap();
    let snapshot = printed_file(&linux_console, &dir);
    // The same bytes the UART carried, from its first record to the snapshot's own.
    let uart = std::fs::read(run.join("linux-1.log")).unwrap();
    let uart = String::from_utf8_lossy(&uart).replace('\r', "");
    let snapshot_text = String::from_utf8(snapshot.clone()).unwrap();
    let first = snapshot_text.lines().next().unwrap();
    let start = uart
        .find(first)
        .expect("the snapshot's first record is on the UART");
    assert!(
        uart[start..].starts_with(&snapshot_text),
        "the snapshot differs from the UART's records"
    );
    let whole = mtex::model::report::parse(&uart);
    let taken = mtex::model::report::parse_bytes(&snapshot);
    assert!(taken.problems.is_empty(), "{:?}", taken.problems);
    assert!(
        taken
            .notes
            .iter()
            .any(|n| n.contains("results taken by the guest")),
        "{:?}",
        taken.notes
    );
    // Window 1 is in it, counted as the UART's; window 2 came after it.
    assert_eq!(taken.phases.len(), 1, "{:?}", taken.phases);
    assert_eq!(taken.phases[0].trace, whole.phases[0].trace);
    assert_eq!(whole.phases.len(), 2);
    assert!(taken.writes.len() < whole.writes.len());
    assert_eq!(whole.writes[..taken.writes.len()], taken.writes[..]);
    // `mtex parse FILE` on the snapshot: a whole report, exit 0.
    let file = dir.join("results.log");
    std::fs::write(&file, &snapshot).unwrap();
    let parsed = Command::new(env!("CARGO_BIN_EXE_mtex"))
        .arg("parse")
        .arg(&file)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&parsed.stdout);
    assert_eq!(parsed.status.code(), Some(0), "{text}");
    std::fs::remove_dir_all(&dir).unwrap();
}
