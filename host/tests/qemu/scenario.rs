//! A scenario file end to end, through the `mtex` binary: the quick scenario with one
//! expectation that holds and one that cannot, its exit status, its text and its results
//! directory.

use super::browser;
use mtex::model::results::Results;
use std::path::Path;
use std::process::Command;

/// `mtex run FILE --out OUT`, through the binary.
fn run_scenario(file: &Path, out: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_mtex"))
        .arg("run")
        .arg(file)
        .arg("--out")
        .arg(out)
        .arg("--profile")
        .output()
        .unwrap()
}

#[test]
fn a_scenario_runs_judges_its_expectations_and_writes_its_results() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let quick = std::fs::read_to_string(root.join("../scripts/scenarios/quick.toml")).unwrap();
    // TCMA1 leaves the kernel's checked reads of futex-hash far below entry-tco's: claiming
    // they stay equal must fail the run.
    let scenario = format!(
        "{quick}\n[[expect]]\ncounter = \"mem_access_checked_rd:k\"\nworkload = \"futex-hash\"\n\
         from = \"entry-tco\"\nto = \"tcma1\"\nequal = true\n"
    );
    let tmp = std::env::temp_dir().join(format!("mtex-scenario-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).unwrap();
    let file = tmp.join("quick-plus.toml");
    std::fs::write(&file, scenario).unwrap();
    let out = run_scenario(&file, &tmp.join("results"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("PASS  mem_access_checked_rd:k of futex-hash drops by at least 90%"),
        "{stdout}"
    );
    assert!(
        stdout.contains("FAIL  mem_access_checked_rd:k of futex-hash stays equal"),
        "{stdout}"
    );
    // Every line of the text fits 100 columns.
    for l in stdout.lines() {
        assert!(
            l.chars().count() <= 100,
            "{} columns: {l}",
            l.chars().count()
        );
    }
    // The results directory: named after the scenario, with everything in it.
    let dir = tmp.join("results/quick-1");
    assert!(stderr.contains(&dir.display().to_string()), "{stderr}");
    let doc =
        Results::from_json(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap();
    assert!(!doc.success);
    assert_eq!(doc.runs.len(), 1);
    assert!(doc.runs[0].success, "{:?}", doc.runs[0].problems);
    assert_eq!(doc.runs[0].phases.len(), 4);
    // The summary: one row per policy of each workload, and where the rest is.
    for policy in ["entry-tco", "tcma1"] {
        let rows = stdout
            .lines()
            .filter(|l| l.starts_with(&format!("   {policy} ")))
            .count();
        assert_eq!(rows, 2, "{policy}:\n{stdout}");
    }
    assert!(
        stdout
            .replace("\n    ", " ")
            .contains(&format!("all in {}/report.txt", dir.display())),
        "{stdout}"
    );
    // Trapped writes are named by the guest function that made them (in the full report).
    let w = &doc.runs[0].writes;
    assert!(w.iter().all(|w| w.symbol.is_some()), "{w:?}");
    let full = std::fs::read_to_string(dir.join("report.txt")).unwrap();
    assert!(full.contains("in mtex_guest::kernel::"), "{full}");
    // `mtex report` shows the directory as the run did, without running anything.
    let shown = Command::new(env!("CARGO_BIN_EXE_mtex"))
        .arg("report")
        .arg(&dir)
        .output()
        .unwrap();
    assert_eq!(shown.status.code(), Some(1));
    assert_eq!(String::from_utf8_lossy(&shown.stdout), stdout);
    browser::opens(&dir.join("index.html"));
    // Profiled (--profile): every phase has its functions, each counter's rows add up to
    // the phase's figure, and the page links flame graphs that render.
    let page = std::fs::read_to_string(dir.join("index.html")).unwrap();
    let mut graphs = 0;
    for p in &doc.runs[0].phases {
        assert!(!p.functions.is_empty(), "{}: no functions", p.name);
        let names: std::collections::BTreeSet<&String> =
            p.functions.iter().flat_map(|f| f.counters.keys()).collect();
        for counter in names {
            let sum: u64 = p.functions.iter().map(|f| f.get(counter)).sum();
            assert_eq!(Some(&sum), p.counters.get(counter), "{} {counter}", p.name);
        }
        for name in [
            "mem_access_checked_rd:k",
            "instructions:k",
            "instructions:u",
        ] {
            let sum: u64 = p.functions.iter().map(|f| f.get(name)).sum();
            assert_eq!(sum, p.counters[name], "{} {name}", p.name);
        }
    }
    for href in page
        .split("href=\"")
        .skip(1)
        .filter_map(|h| h.split('"').next())
    {
        if href.ends_with(".svg") && href.starts_with("profile/") {
            browser::renders_svg(&dir.join(href));
            graphs += 1;
        }
    }
    assert!(graphs > 0, "the page links no flame graph");
    assert!(full.contains("Where the checks are"), "{full}");
    let held: Vec<bool> = doc.expectations.iter().map(|e| e.held).collect();
    assert_eq!(held, [true, true, false]);
    for f in [
        "report.txt",
        "index.html",
        "report.csv",
        "quick-1.log",
        "timeline-quick.svg",
        "checked-quick-futex-hash.svg",
    ] {
        assert!(dir.join(f).is_file(), "{f} missing");
    }
    // The raw log turns into the same document with `mtex parse --json`.
    let parsed = Command::new(env!("CARGO_BIN_EXE_mtex"))
        .args(["parse", "--json"])
        .arg(dir.join("quick-1.log"))
        .output()
        .unwrap();
    assert_eq!(parsed.status.code(), Some(0));
    let p = Results::from_json(&String::from_utf8_lossy(&parsed.stdout)).unwrap();
    assert_eq!(p.runs[0].phases, doc.runs[0].phases);
    assert_eq!(p.runs[0].writes, doc.runs[0].writes);
    std::fs::remove_dir_all(&tmp).unwrap();
}

#[test]
fn untraced_phases_run_at_full_speed_with_the_pmus_figures() {
    use mtex::qemu::{self, RunConfig};
    let images = mtex::images::build().unwrap();
    let run = |extra: &str| {
        let cfg = RunConfig::with_default_limits(
            format!(
                "mtex.guest=kernel mtex.watchdog_ms=600000 mtex.policies=entry-tco \
                 mtex.workloads=getpid,futex-hash {extra}"
            ),
            true,
        );
        let r = qemu::run(&images, &cfg).unwrap().report();
        assert!(r.succeeded(), "{:?}", r.problems);
        r
    };
    let traced = run("");
    let untraced = run("mtex.trace=0");
    assert_eq!(untraced.phases.len(), 2);
    for (t, u) in traced.phases.iter().zip(&untraced.phases) {
        assert_eq!(t.name, u.name);
        assert!(u.trace.is_none(), "{} was traced", u.name);
        let s = u.stats.unwrap();
        assert_eq!(s.step_exits, 0, "{} was stepped", u.name);
        // The PMU at full speed agrees with the trace on what EL0 executed.
        assert_eq!(
            s.el0_instructions,
            Some(t.trace.unwrap().instructions_el0),
            "{}",
            u.name
        );
    }
}

#[test]
fn a_failed_run_is_reported_and_the_next_one_still_runs() {
    let tmp = std::env::temp_dir().join(format!("mtex-scenario-fail-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).unwrap();
    let file = tmp.join("two.toml");
    // The first run's budget is far too small: its watchdog ends it.
    std::fs::write(
        &file,
        "version = 1\n\
         [[run]]\nname = \"starved\"\npolicies = [\"entry-tco\"]\nworkloads = [\"getpid\"]\n\
         watchdog_ms = 1\n\
         [[run]]\nname = \"fine\"\npolicies = [\"entry-tco\"]\nworkloads = [\"getpid\"]\n",
    )
    .unwrap();
    let out = run_scenario(&file, &tmp.join("results"));
    assert_eq!(out.status.code(), Some(1));
    let doc = Results::from_json(
        &std::fs::read_to_string(tmp.join("results/two-1/report.json")).unwrap(),
    )
    .unwrap();
    let runs: Vec<(&str, bool)> = doc
        .runs
        .iter()
        .map(|r| (r.name.as_str(), r.success))
        .collect();
    assert_eq!(runs, [("starved", false), ("fine", true)]);
    assert!(doc.runs[0].end.contains("watchdog"), "{}", doc.runs[0].end);
    assert_eq!(doc.runs[1].phases.len(), 1);
    std::fs::remove_dir_all(&tmp).unwrap();
}

#[test]
fn a_scenario_runs_the_kernel_on_the_cpus_its_run_table_names() {
    let tmp = std::env::temp_dir().join(format!("mtex-scenario-cpus-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).unwrap();
    let file = tmp.join("two-cpus.toml");
    const ITERS: u64 = 16;
    std::fs::write(
        &file,
        format!(
            "version = 1\n\
             [[run]]\npolicies = [\"tcma1\"]\nworkloads = [\"futex-hash:iters={ITERS}\"]\n\
             cpus = 2\nhz = 0\nbackend = \"trace\"\n"
        ),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_mtex"))
        .arg("run")
        .arg(&file)
        .arg("--out")
        .arg(tmp.join("results"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    let doc = Results::from_json(
        &std::fs::read_to_string(tmp.join("results/two-cpus-1/report.json")).unwrap(),
    )
    .unwrap();
    let p = &doc.runs[0].phases[0];
    // One futex-hash task on each CPU: each makes two checked user reads and one write per
    // iteration, and the phase is their sum.
    let cpus: Vec<u32> = p.cpus.iter().map(|c| c.cpu).collect();
    assert_eq!(cpus, [0, 1], "{stdout}");
    for c in &p.cpus {
        let user = |counter: &str| c.counters[counter];
        let got = (
            user("mem_access_checked_rd:u"),
            user("mem_access_checked_wr:u"),
        );
        assert_eq!(got, (2 * ITERS, ITERS), "CPU {}", c.cpu);
    }
    assert_eq!(p.counters["mem_access_checked_rd:u"], 2 * 2 * ITERS);
    std::fs::remove_dir_all(&tmp).unwrap();
}
