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

pub(super) static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// `mtex linux ARGS --json --verbose`: exit status, the report and the full text.
pub(super) fn linux(args: &[&str]) -> (i32, Value, String) {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let json = std::env::temp_dir().join(format!("mtex-linux-{}.json", std::process::id()));
    let results = std::env::temp_dir().join(format!("mtex-linux-results-{}", std::process::id()));
    let out = Command::new(env!("CARGO_BIN_EXE_mtex"))
        .arg("linux")
        .args(args)
        .arg("--json")
        .arg(&json)
        .arg("--out")
        .arg(&results)
        .arg("--verbose")
        .output()
        .expect("running mtex linux");
    // The results directory holds the same report and both consoles.
    let dir = results.join("linux-1");
    for f in [
        "report.txt",
        "index.html",
        "report.json",
        "report.csv",
        "linux-1.log",
        "linux-console.log",
    ] {
        assert!(dir.join(f).exists(), "{} has no {f}", dir.display());
    }
    // `mtex report` shows the directory again as the run showed it, and its report.txt.
    let stdout = String::from_utf8_lossy(&out.stdout);
    let shown = |args: &[&str]| {
        let o = Command::new(env!("CARGO_BIN_EXE_mtex"))
            .arg("report")
            .arg(&dir)
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let full = shown(&["--verbose"]);
    assert!(stdout.starts_with(&full), "run:\n{stdout}\nreport:\n{full}");
    assert_eq!(
        full,
        std::fs::read_to_string(dir.join("report.txt")).unwrap()
    );
    let summary = shown(&[]);
    assert!(
        full.starts_with(summary.lines().next().unwrap()),
        "{summary}"
    );
    assert!(summary.contains("Not shown here:"), "{summary}");
    // report.json is one document, what `mtex compare` reads and --json wrote: every closed
    // window a phase, an unclosed one none.
    let compared = mtex::compare::load(&dir).expect("report.json");
    let written = std::fs::read_to_string(&json).unwrap_or_default();
    if !written.is_empty() {
        assert_eq!(
            mtex::model::results::Results::from_json(&written).expect("--json"),
            compared
        );
    }
    let section = compared.linux.as_ref().expect("the Linux section");
    for w in &section.unclosed_windows {
        assert!(
            compared.runs[0].phases.iter().all(|p| p.id != w.id),
            "report.json has the unclosed window {}",
            w.id
        );
    }
    assert_profile_files_add_up(&dir, &compared);
    let _ = std::fs::remove_dir_all(&results);
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let doc = mtex::model::results::Results::from_json(
        &std::fs::read_to_string(&json).unwrap_or_default(),
    )
    .map_or(Value::Null, |doc| as_read(&doc));
    let _ = std::fs::remove_file(&json);
    (out.status.code().unwrap_or(-1), doc, text)
}

/// A Linux run's document as these tests read it: the Linux section's fields, the kernel's,
/// the run's problems, notes, writes and power calls, and the windows as the report shows
/// them (read from the phases: the same view every form renders).
fn as_read(doc: &mtex::model::results::Results) -> Value {
    let Some(v) = mtex::linux::report::LinuxView::of(doc) else {
        return Value::Null;
    };
    let mut out = serde_json::to_value(v.section).unwrap();
    let o = out.as_object_mut().unwrap();
    for (key, value) in [
        ("kernel", serde_json::to_value(v.kernel).unwrap()),
        ("release", Value::from(v.kernel.release.clone())),
        ("problems", serde_json::to_value(v.problems()).unwrap()),
        ("notes", serde_json::to_value(v.notes()).unwrap()),
        (
            "power_calls",
            serde_json::to_value(v.power_calls()).unwrap(),
        ),
        ("writes", serde_json::to_value(&v.writes).unwrap()),
        ("windows", serde_json::to_value(&v.windows).unwrap()),
        (
            "sampled_windows",
            serde_json::to_value(&v.sampled_windows).unwrap(),
        ),
        ("runs", serde_json::to_value(&doc.runs).unwrap()),
    ] {
        o.insert(key.to_string(), value);
    }
    out
}

/// A profiled run's folded-stack files each add up to their window's counter in
/// report.json, and its flame graphs are well-formed SVG naming what they show.
fn assert_profile_files_add_up(dir: &std::path::Path, compared: &mtex::model::results::Results) {
    let Ok(runs) = std::fs::read_dir(dir.join("profile")) else {
        return;
    };
    let mut files = 0;
    for phase_dir in runs
        .flatten()
        .flat_map(|r| std::fs::read_dir(r.path()).unwrap())
    {
        let phase_dir = phase_dir.unwrap().path();
        // `1-window-1`: the window's phase.
        let label = phase_dir
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let name = label
            .split_once('-')
            .unwrap()
            .1
            .replace("window-", "window ");
        let phase = compared.runs[0]
            .phases
            .iter()
            .find(|p| p.name == name)
            .unwrap_or_else(|| panic!("{label}: no phase {name} in report.json"));
        for f in std::fs::read_dir(&phase_dir).unwrap().flatten() {
            let path = f.path();
            let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
            let counter = match stem.rsplit_once('_') {
                Some((head, el)) => format!("{head}:{el}"),
                None => panic!("{stem}"),
            };
            let text = std::fs::read_to_string(&path).unwrap();
            match path.extension().and_then(|e| e.to_str()) {
                Some("folded") => {
                    let sum: u64 = text
                        .lines()
                        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
                        .sum();
                    assert_eq!(
                        Some(sum),
                        phase.counters.get(&counter).copied(),
                        "{}",
                        path.display()
                    );
                    files += 1;
                }
                Some("svg") => {
                    let mut reader = quick_xml::Reader::from_str(&text);
                    loop {
                        match reader.read_event() {
                            Ok(quick_xml::events::Event::Eof) => break,
                            Ok(_) => {}
                            Err(e) => panic!("{}: {e}", path.display()),
                        }
                    }
                    assert!(text.contains(&counter), "{}", path.display());
                }
                _ => panic!("unexpected {}", path.display()),
            }
        }
    }
    assert!(files > 0, "a profile directory without folded stacks");
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
    let args = linux_args();
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
    let exit = r
        .summary
        .map(|s| mtex::model::report::describe_exit(&s.exit));
    assert!(
        exit.as_deref().is_some_and(|e| e.contains("second UART")),
        "{exit:?}\n{}",
        console.text
    );
}

pub(super) fn window(doc: &Value, id: u64) -> &Value {
    doc["windows"]
        .as_array()
        .expect("windows")
        .iter()
        .find(|w| w["id"] == id)
        .unwrap_or_else(|| panic!("no window {id}: {doc}"))
}

/// Window `id` ran `mtex-work clock N T` on several CPUs: every thread's reads of the virtual
/// counter went forward, on its CPU and against every other thread's (the workload's own
/// check), and every read was answered by the hypervisor (each is an exit of its own: two
/// per iteration of each thread), whose one guest time every CPU's clock follows. Read
/// directly instead, a CPU's clock runs ahead of the others' while QEMU runs another CPU.
pub(super) fn assert_clock_reads_answered(doc: &Value, text: &str, id: u64, n: u64, t: u64) {
    let said = format!("{t} threads x {n} reads of CNTVCT_EL0 and CNTVCTSS_EL0, none back");
    let output = doc["workload_output"].to_string();
    assert!(output.contains(&said), "{output}\n{text}");
    let w = window(doc, id);
    assert!(w["closed"] == true, "{w}");
    assert!(super::linux::n(w, "exits") >= 2 * n * t, "{w}");
    assert_window_time_holds_its_instructions(w);
}

/// A window on several CPUs lasts, on the guest's clock, at least the instructions its CPUs
/// retired, a nanosecond each under `-icount shift=0` (idle time adds to it): the window's
/// guest time is kept from them. Taken from spans on the shared counter instead, it ran at
/// 15% of them (another CPU's guest instruction counted as the hypervisor's time).
pub(super) fn assert_window_time_holds_its_instructions(w: &Value) {
    let ms = w["guest_clock_ms"]
        .as_f64()
        .unwrap_or_else(|| panic!("no guest time: {w}"));
    let ns = (ms * 1e6).round() as u64;
    let instructions = n(w, "instructions_el0") + n(w, "instructions_el1");
    // It ends as the last CPU hands in its share, so every counted instruction is in it.
    assert!(
        ns >= instructions,
        "{ns} ns for {instructions} instructions: {w}"
    );
}

fn view<'a>(w: &'a Value, name: &str) -> &'a Value {
    w["views"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v[0] == name)
        .map(|v| &v[1])
        .unwrap_or_else(|| panic!("no view {name}"))
}

fn n(v: &Value, key: &str) -> u64 {
    v[key].as_u64().unwrap_or_else(|| panic!("no {key} in {v}"))
}

/// The oracle checked window `w` (a run with `--oracle`) and each of its six figures equals
/// the trace's. (Any difference is also a problem of the run: exit status 1.)
pub(super) fn assert_oracle_agrees(w: &Value, text: &str) {
    let o = &w["oracle"];
    assert!(o["inexact"].is_null(), "{o}\n{text}");
    let figures = o["figures"]
        .as_array()
        .unwrap_or_else(|| panic!("no oracle: {w}"));
    assert_eq!(figures.len(), 6, "{o}");
    for f in figures {
        assert_eq!(f["trace"], f["oracle"], "window {}: {f}\n{text}", w["id"]);
    }
}

#[test]
fn futex_hash_in_a_sync_window_shows_what_tcma1_would_leave() {
    const WAITS: u64 = 100;
    const THREADS: u64 = 2;
    // The named workload: `mtex-work --tcf0 sync --window 1 futex-hash ...`.
    let (status, doc, text) = linux(&[
        "--workload",
        &format!("futex-hash {WAITS} {THREADS}"),
        "--tcf0",
        "sync",
        "--oracle",
        "--profile",
    ]);
    // No problem at all: among the checks, the trace's instructions per EL against the
    // PMU's over the window, and no load or store the decoder cannot judge.
    assert_eq!(status, 0, "{text}");
    let w = window(&doc, 1);
    assert_eq!(w["closed"], true);
    assert!(w["label"].as_str().unwrap().contains("futex-hash"), "{w}");
    let arch = view(w, "architectural");
    let elided = view(w, "TCF-elided");
    let tcma1 = view(w, "if TCMA1");
    // Every FUTEX_WAIT reads the futex word once from user space (LDTR), through the tagged
    // heap pointer, checked under TCF0=sync; with the kernel's own TCF NONE nothing else of
    // the kernel is checked where checks are elided. Nothing in user space touches the heap.
    assert_eq!(n(elided, "rd_k"), WAITS * THREADS, "{text}");
    assert_eq!(n(elided, "wr_k"), 0, "{text}");
    assert_eq!((n(arch, "rd_u"), n(arch, "wr_u")), (0, 0), "{text}");
    // Architecturally (TCR_EL1.TCMA1 = 0) the kernel's own accesses through its 0xF-tagged
    // pointers are checked: its reads dominate the window's checked accesses...
    let rd_k = n(arch, "rd_k");
    assert!(
        rd_k > n(arch, "wr_k") + n(arch, "rd_u") + n(arch, "wr_u"),
        "{text}"
    );
    // ... and TCMA1 would remove at least 95% of them (the TCMA1 change measured over 98% of
    // the kernel's tag checks gone on an Ampere system).
    assert!(
        n(tcma1, "rd_k") * 20 <= rd_k,
        "if TCMA1: {} of {rd_k}\n{text}",
        n(tcma1, "rd_k")
    );
    // Thread creation and the threads' locks went through musl's LDXR/STXR sequences: they
    // ran unstepped, and nothing faulted.
    assert_eq!(n(w, "tag_check_faults"), 0);
    assert!(n(w, "instructions_el1") > 0 && n(w, "instructions_el0") > 0);
    // QEMU's own hooks counted the same instructions and accesses.
    assert_oracle_agrees(w, &text);
    // Where the checks are: the kernel functions' rows add up to the window's counts, the
    // top one is a kernel symbol, and what TCMA1 would leave is the futex word's uaccess read.
    let rows = w["functions"]
        .as_array()
        .expect("a profiled window has functions");
    let of = |counter: &str| -> Vec<(String, bool, u64)> {
        let mut r: Vec<_> = rows
            .iter()
            .filter_map(|f| {
                let v = f["counters"][counter].as_u64()?;
                let name = f["name"].as_str().unwrap().to_string();
                Some((name, f["unprivileged"] == true, v))
            })
            .collect();
        r.sort_by_key(|(_, _, v)| std::cmp::Reverse(*v));
        r
    };
    let arch_rd = of("mem_access_checked_rd:k");
    assert_eq!(arch_rd.iter().map(|r| r.2).sum::<u64>(), rd_k);
    assert!(
        !arch_rd[0].0.starts_with('['),
        "top function {:?}",
        arch_rd[0]
    );
    let tcma1_rd = of("if_tcma1.mem_access_checked_rd:k");
    assert_eq!(tcma1_rd.iter().map(|r| r.2).sum::<u64>(), n(tcma1, "rd_k"));
    for (name, unprivileged, v) in &tcma1_rd {
        assert!(
            *unprivileged && name.contains("futex"),
            "if TCMA1, {v} checked reads left in {name}"
        );
    }
    assert!(text.contains("Where the checks are"), "{text}");
}

/// With the kernel's call stacks followed: the rows by stack add up to the window's checked
/// reads, the folded files to their counters, and every read TCMA1 would leave (the futex
/// word's LDTR) is reached from the futex system call (arm64's number 98) through its
/// handler.
#[test]
fn futex_hash_stacks_say_where_the_checks_come_from() {
    let (status, doc, text) = linux(&[
        "--workload",
        "futex-hash 50 2",
        "--tcf0",
        "sync",
        "--profile",
        "--stacks",
    ]);
    assert_eq!(status, 0, "{text}");
    let w = window(&doc, 1);
    let rows = w["stacks"].as_array().expect("a window with stacks");
    let sum = |counter: &str| -> u64 {
        rows.iter()
            .filter_map(|r| r["counters"][counter].as_u64())
            .sum()
    };
    let (arch, tcma1) = (view(w, "architectural"), view(w, "if TCMA1"));
    assert_eq!(sum("mem_access_checked_rd:k"), n(arch, "rd_k"), "{text}");
    assert_eq!(sum("if_tcma1.mem_access_checked_rd:k"), n(tcma1, "rd_k"));
    assert_eq!(
        n(tcma1, "rd_k"),
        100,
        "one futex-word read per wait\n{text}"
    );
    for r in rows {
        if r["counters"]["if_tcma1.mem_access_checked_rd:k"]
            .as_u64()
            .is_none()
        {
            continue;
        }
        let stack: Vec<&str> = r["stack"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f.as_str().unwrap())
            .collect();
        assert_eq!(stack.first(), Some(&"[syscall 98 futex]"), "{r}");
        assert!(stack.contains(&"__arm64_sys_futex"), "{r}");
        assert!(r["unprivileged"] == true, "{r}");
    }
    // The window opens in user space: every kernel instruction in it ran on a stack begun
    // by an exception entry (a page fault taken inside a breakpoint run included), so no
    // kernel row is without frames.
    for r in rows {
        let bare = r["stack"].as_array().is_none_or(|s| s.is_empty());
        assert!(r["el"] == 0 || r["name"] == "[other]" || !bare, "{r}");
    }
    assert!(text.contains("reached from futex (syscall 98)"), "{text}");
    // (`linux` has checked that each folded file, a line per stack, adds up to its counter.)
}

/// User PCs are named by the program that opened the window (`mtex-work`, whose symbols
/// mtex has) only where they ran in its address space: the forked children run the very
/// same code at the very same addresses, in address spaces of their own, and are counted
/// as another process, not in the opener's functions.
#[test]
fn user_functions_are_the_openers_and_its_children_are_another_process() {
    let (status, doc, text) = linux(&["--workload", "fork 5", "--tcf0", "sync", "--profile"]);
    assert_eq!(status, 0, "{text}");
    let w = window(&doc, 1);
    let rows = w["functions"].as_array().expect("a profiled window");
    let user = |name: &str| -> u64 {
        rows.iter()
            .filter(|r| r["el"] == 0 && r["name"] == name)
            .filter_map(|r| r["counters"]["instructions:u"].as_u64())
            .sum()
    };
    let all: u64 = rows
        .iter()
        .filter_map(|r| r["counters"]["instructions:u"].as_u64())
        .sum();
    assert_eq!(all, n(w, "instructions_el0"), "{text}");
    // The opener forks and waits in the C library's functions, and its children's
    // instructions (they return from fork into the same code, then exit) are none of the
    // opener's.
    assert!(user("fork") > 0, "{rows:#?}");
    assert!(user("waitpid") > 0, "{rows:#?}");
    assert!(user("[another process]") > 0, "{rows:#?}");
    assert_eq!(
        user("[no symbol]"),
        0,
        "every opener PC is in a symbol: {rows:#?}"
    );
}

/// Linux on four CPUs: it starts the three others through PSCI (the hypervisor starts each
/// physical CPU at its own entry), can take them off and start one again (CPU_OFF,
/// AFFINITY_INFO, a second CPU_ON of the same CPU). A window opened with the others on counts
/// every CPU; one opened with them off counts the one.
#[test]
fn linux_starts_every_cpu_and_a_window_counts_each_of_them() {
    let (status, doc, text) = linux(&[
        "--cpus",
        "4",
        "--console",
        "--workload",
        "echo cpus $(nproc); mtex-work --tcf0 sync --window 1 getpid 10; \
         for c in 1 2 3; do echo 0 > /sys/devices/system/cpu/cpu$c/online; done; \
         echo cpus $(nproc); mtex-work --tcf0 sync --window 2 getpid 100; \
         echo 1 > /sys/devices/system/cpu/cpu2/online; echo 1 > /sys/devices/system/cpu/cpu3/online; \
         echo cpus $(nproc); taskset -c 3 mtex-work --tcf0 sync getpid 1; \
         mtex-work --window 3 clock 100 3",
    ]);
    assert_eq!(status, 0, "{text}");
    assert!(
        text.contains("4 CPUs (QEMU max without SVE and SME), under the hypervisor"),
        "{text}"
    );
    for n in ["cpus 4", "cpus 1", "cpus 3"] {
        assert!(text.contains(n), "{n}: {text}");
    }
    // Three CPUs started at boot, three taken off, two put back: each call recorded, by
    // the CPU that made it (a CPU turns itself off), and each answered SUCCESS.
    let calls = doc["power_calls"].as_array().unwrap();
    let said: Vec<&str> = calls.iter().filter_map(|c| c["call"].as_str()).collect();
    assert_eq!(calls.len(), 8, "{said:#?}");
    assert!(calls.iter().all(|c| c["succeeded"] == true), "{said:#?}");
    for (i, c) in [1, 2, 3].into_iter().enumerate() {
        assert!(
            said[i].starts_with(&format!("CPU 0: CPU_ON of {c:#x}")),
            "{said:#?}"
        );
        assert!(
            said[3 + i].starts_with(&format!("CPU {c}: CPU_OFF")),
            "{said:#?}"
        );
    }
    assert!(text.contains("8 CPU power calls (CPU_ON, CPU_OFF), 0 answered with an error"));
    // Each CPU turns its own MMU on with a trapped SCTLR_EL1 write (M 0→1), each time it
    // comes on: the trap log names the CPU of every write, and loses none of a CPU that
    // never sends a record of its own.
    let mmu_on = |cpu: u64| {
        doc["writes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|w| w["register"] == "SCTLR_EL1" && n(w, "cpu") == cpu)
            .filter(|w| n(w, "old") & 1 == 0 && n(w, "new") & 1 == 1)
            .count()
    };
    assert!(mmu_on(0) >= 1 && mmu_on(1) >= 1, "{text}");
    for cpu in [2, 3] {
        assert!(mmu_on(cpu) > mmu_on(1), "CPU {cpu} came on twice: {text}");
    }
    // The last command's prctl turns TCF0 on where it runs, on CPU 3, which sends no record
    // of its own afterwards: its queued writes are framed as the run ends.
    let tcf0_on = |cpu: u64| {
        doc["writes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|w| n(w, "cpu") == cpu)
            .filter(|w| w["changes"].to_string().contains("TCF0 NONE→SYNC"))
            .count()
    };
    assert!(tcf0_on(3) >= 1, "{text}");
    // Window 1, with the four on: every CPU that ran an instruction in it has its share
    // (the report checks that they add up to the window's figures, and has no problem).
    let w1 = window(&doc, 1);
    let cpus = w1["cpus"].as_array().expect("window 1's CPUs");
    assert!(cpus.len() >= 2 && cpus.len() <= 4, "{w1}");
    let mut seen: Vec<u64> = cpus.iter().map(|c| n(c, "cpu")).collect();
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), cpus.len(), "each CPU once: {w1}");
    let el1: u64 = cpus.iter().map(|c| n(c, "instructions_el1")).sum();
    assert_eq!(el1, n(w1, "instructions_el1"), "{w1}");
    assert!(n(&w1["entries"], "sync_el0") >= 10, "{w1}");
    assert!(text.contains("counted on"), "{text}");
    // With CPUs 1-3 off the window is the one CPU's, counted whole: each of the 100 system
    // calls enters the kernel from EL0 (a page fault would add one).
    let w = window(&doc, 2);
    assert!(w["closed"] == true, "{w}");
    assert!(w["cpus"].as_array().is_none_or(|c| c.is_empty()), "{w}");
    assert!(n(&w["entries"], "sync_el0") >= 100, "{w}");
    // Three CPUs on, a thread reading its clock on each.
    assert_clock_reads_answered(&doc, &text, 3, 100, 3);
}

/// A window on four CPUs, opened on CPU 0 and closed on CPU 2, around four futex threads:
/// each CPU counts what it executes while it is open, the oracle (QEMU's own hooks, per
/// vCPU) agrees with every CPU's share and with the total, and the threads' user-space work
/// is on more than one CPU.
#[test]
fn a_window_on_four_cpus_opened_on_one_and_closed_on_another_is_counted_whole() {
    let (status, doc, text) = linux(&[
        "--cpus",
        "4",
        "--oracle",
        "--workload",
        "mtex-work --tcf0 sync --window 1 --open-on 0 --close-on 2 futex-hash 10 4",
    ]);
    assert_eq!(status, 0, "{text}");
    let w = window(&doc, 1);
    let cpus = w["cpus"].as_array().expect("the window's CPUs");
    assert_eq!(cpus.len(), 4, "every CPU joined: {w}");
    for c in cpus {
        let check = &c["oracle"];
        assert!(
            !check.is_null(),
            "CPU {} has the oracle's check: {w}",
            c["cpu"]
        );
        for f in check["figures"].as_array().unwrap() {
            assert_eq!(f["trace"], f["oracle"], "CPU {}: {f}", c["cpu"]);
        }
    }
    for f in w["oracle"]["figures"].as_array().unwrap() {
        assert_eq!(f["trace"], f["oracle"], "total: {f}");
    }
    let user_cpus = cpus.iter().filter(|c| n(c, "instructions_el0") > 0).count();
    assert!(user_cpus >= 2, "the threads ran on one CPU only: {w}");
    let el0: u64 = cpus.iter().map(|c| n(c, "instructions_el0")).sum();
    assert_eq!(el0, n(w, "instructions_el0"), "{w}");
    // Forty FUTEX_WAITs, each a system call from EL0.
    assert!(n(&w["entries"], "sync_el0") >= 40, "{w}");
    assert_window_time_holds_its_instructions(w);
    // Every CPU's clock is the machine's one guest time: no storm of timer interrupts (the
    // report says so of a window whose interrupts come far more often than the tick).
    let notes = doc["notes"].as_array().cloned().unwrap_or_default();
    assert!(
        !notes
            .iter()
            .any(|n| n.as_str().is_some_and(|s| s.contains("the kernel's tick"))),
        "{notes:?}"
    );
}

/// A guest that takes a CPU off inside a window on four CPUs, then tries to start it again:
/// the CPU hands in its share as it goes (its instructions up to its CPU_OFF are in the
/// window), the CPU_ON is DENIED while the window is open, and the window's shares still add
/// up to its figures (the report checks that, and would fail the run).
#[test]
fn a_cpu_turned_off_inside_a_window_hands_in_its_share_and_none_starts() {
    let (status, doc, text) = linux(&[
        "--cpus",
        "4",
        "--append",
        "arm64.nosve",
        "--workload",
        "mtex-work --window 3 exec sh -c 'echo 0 > /sys/devices/system/cpu/cpu3/online; \
         echo 1 > /sys/devices/system/cpu/cpu3/online || echo refused'",
    ]);
    assert_eq!(status, 0, "{text}");
    let calls = doc["power_calls"].as_array().unwrap();
    let said: Vec<&str> = calls.iter().filter_map(|c| c["call"].as_str()).collect();
    // Three CPUs started at boot; then CPU 3 off, and its CPU_ON refused in the window.
    assert_eq!(calls.len(), 5, "{said:#?}");
    assert!(said[3].starts_with("CPU 3: CPU_OFF"), "{said:#?}");
    assert!(calls[3]["succeeded"] == true, "{said:#?}");
    assert!(said[4].contains("CPU_ON of 0x3"), "{said:#?}");
    assert!(calls[4]["succeeded"] == false, "{said:#?}");
    assert!(said[4].contains("DENIED"), "{said:#?}");
    let w = window(&doc, 3);
    let cpus = w["cpus"].as_array().expect("the window's CPUs");
    let three = cpus
        .iter()
        .find(|c| n(c, "cpu") == 3)
        .unwrap_or_else(|| panic!("CPU 3's share: {w}"));
    assert!(n(three, "instructions_el1") > 0, "{w}");
    let el1: u64 = cpus.iter().map(|c| n(c, "instructions_el1")).sum();
    assert_eq!(el1, n(w, "instructions_el1"), "{w}");
}

#[test]
fn an_ipi_storm_on_four_cpus_leaves_the_run_whole_and_the_next_window_exact() {
    // Eight futex threads on four CPUs wake each other across CPUs: reschedule and
    // function-call IPIs on every CPU, while each CPU's MTE control writes trap to the
    // hypervisor. Then one CPU is left and a window measures 100 system calls.
    let (status, doc, text) = linux(&[
        "--cpus",
        "4",
        "--console",
        "--workload",
        "mtex-work futex-hash 300 8; grep -E 'IPI[01]:' /proc/interrupts; \
         for c in 1 2 3; do echo 0 > /sys/devices/system/cpu/cpu$c/online; done; \
         mtex-work --tcf0 sync --window 1 getpid 100",
    ]);
    assert_eq!(status, 0, "{text}");
    for ipi in ["IPI0:", "IPI1:"] {
        let line = text
            .lines()
            .find(|l| l.trim_start().starts_with(ipi))
            .unwrap_or_else(|| panic!("no {ipi} line: {text}"));
        let per_cpu: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .take(4)
            .map(|v| v.parse().unwrap())
            .collect();
        assert!(
            per_cpu.len() == 4 && per_cpu.iter().all(|&v| v > 0),
            "{line}"
        );
    }
    // Each of the 100 calls enters the kernel from EL0 (a page fault would add one).
    let w = window(&doc, 1);
    assert!(w["closed"] == true, "{w}");
    assert!(n(&w["entries"], "sync_el0") >= 100, "{w}");
}

#[test]
fn a_two_cpu_boot_under_icount_repeats_exactly() {
    // QEMU runs the two CPUs in turn in one thread under -icount: the same boot, window on
    // both CPUs, hotplug and window on one give the same report twice, every count (each
    // CPU's share too) and timestamp, all but the wall time.
    let args = [
        "--cpus",
        "2",
        "--workload",
        "mtex-work --tcf0 sync --window 2 futex-hash 5 2; \
         echo 0 > /sys/devices/system/cpu/cpu1/online; \
         mtex-work --tcf0 sync --window 1 futex-hash 20 2",
    ];
    let (status, mut first, text) = linux(&args);
    assert_eq!(status, 0, "{text}");
    let (_, mut second, _) = linux(&args);
    assert_eq!(first["power_calls"].as_array().map(Vec::len), Some(2));
    assert!(n(&window(&first, 1)["entries"], "sync_el0") >= 40);
    assert_eq!(
        window(&first, 2)["cpus"].as_array().map(Vec::len),
        Some(2),
        "{text}"
    );
    for r in [&mut first, &mut second] {
        r.as_object_mut().unwrap().remove("wall_s");
    }
    assert!(first == second, "{first:#}\n{second:#}");
}

#[test]
fn doorbell_mistakes_and_a_killed_window_end_with_clear_records() {
    // A close with nothing open, another offset, an id of 0; then a window whose workload
    // is killed inside it (SIGKILL): it stays open to the end of the run, not measured.
    let (status, doc, text) = linux(&[
        "--workload",
        "mtex-work doorbell 8 5; mtex-work doorbell 48 1; mtex-work doorbell 0 0; \
         mtex-work --window 4 die; true",
    ]);
    assert_eq!(status, 1, "{text}");
    let problems: Vec<&str> = doc["problems"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for (value, offset, why) in [
        ("0x5", "0x8", "CLOSE of a window that is not the open one"),
        ("0x1", "0x30", "none of OPEN"),
        ("0x0", "0x0", "a window id of 0"),
    ] {
        assert!(
            problems.iter().any(|p| p.contains(&format!(
                "doorbell store of {value} at offset {offset} refused"
            )) && p.contains(why)),
            "{why}: {problems:#?}"
        );
    }
    assert!(
        problems
            .iter()
            .any(|p| p.contains("window 4") && p.contains("never closed")),
        "{problems:#?}"
    );
    // Not measured: listed apart, with no counts.
    assert!(doc["windows"].as_array().unwrap().is_empty(), "{text}");
    let w = &doc["unclosed_windows"][0];
    assert_eq!(w["id"], 4, "{text}");
    assert!(w.get("instructions_el1").is_none(), "{w}");
}

#[test]
fn timer_interrupts_inside_runs_are_taken_stepped_and_counted() {
    // A user loop under a 20 µs interval timer: interrupts land while the engine is in a
    // breakpoint run (each loop iteration is one) as well as between steps. Each must be
    // taken by Linux stepped — a handler run inside a run would be missing from the trace,
    // and the PMU's count per EL would disagree (a problem, exit status 1).
    let (status, doc, text) =
        linux(&["--workload", "mtex-work --window 1 spin 100000", "--oracle"]);
    assert_eq!(status, 0, "{text}");
    let w = window(&doc, 1);
    let irqs = n(&w["entries"], "irq_el0");
    assert!(irqs >= 10, "{irqs} timer interrupts from EL0\n{text}");
    assert!(
        doc["workload_output"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l.as_str().unwrap().contains("spin ok")),
        "{text}"
    );
    // Every loop iteration is a run: it is the interrupts that stop runs at EL2.
    assert!(n(w, "exits") >= irqs / 2, "{w}");
    assert_oracle_agrees(w, &text);
}

#[test]
fn two_runs_give_the_same_window_and_write_log() {
    // Under -icount with QEMU's -seed (RNDR, from which Linux seeds its generator, fixed),
    // a Linux run repeats exactly: scheduling, page faults and all. The first run of a
    // kernel too: no symbols kept from an earlier boot, so the first run here is one that
    // has to find them (they must not be read by the measured boot itself).
    let work = mtex::linux::work_dir();
    for e in std::fs::read_dir(&work).into_iter().flatten().flatten() {
        if e.file_name().to_string_lossy().starts_with("kallsyms-") {
            std::fs::remove_file(e.path()).unwrap();
        }
    }
    let run = || {
        linux(&[
            "--workload",
            "mtex-work --tcf0 sync --window 1 futex-hash 20 2",
        ])
    };
    let ((s1, a, t1), (s2, b, t2)) = (run(), run());
    assert_eq!((s1, s2), (0, 0), "{t1}\n{t2}");
    assert_eq!(a["windows"], b["windows"], "{t1}\n{t2}");
    let log = |d: &Value| {
        writes(d)
            .iter()
            .map(|w| (w["register"].clone(), w["new"].clone(), w["pc"].clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(log(&a), log(&b));
}

#[test]
fn each_tcf0_mode_in_its_window_checks_what_linux_and_the_workload_say() {
    // memcached under each user mode, windows 1..4 in this order. The server thread fills
    // its tagged table (256 slots: 256 user writes) and reads one slot per request (N user
    // reads): checked architecturally in every mode; where checks are elided with TCF0 NONE,
    // not in window 1. The kernel's own TCF is NONE; Linux clears PSTATE.TCO on kernel entry
    // only for a task whose TCF0 has the sync bit (sync, asymm: mte_disable_tco_entry), so
    // the kernel's accesses through its 0xF-tagged pointers are architecturally checked in
    // windows 2 and 4 only, and none where checks are elided (the requests go through a
    // pipe, no uaccess to tagged memory).
    const REQUESTS: u64 = 20;
    let (status, doc, text) = linux(&[
        "--workload",
        &format!("memcached {REQUESTS}"),
        "--tcf0",
        "none,sync,async,asymm",
        "--oracle",
    ]);
    assert_eq!(status, 0, "{text}");
    for (id, mode, user_elided, kernel_checked) in [
        (1, "none", false, false),
        (2, "sync", true, true),
        (3, "async", true, false),
        (4, "asymm", true, true),
    ] {
        let w = window(&doc, id);
        assert!(
            w["label"]
                .as_str()
                .unwrap()
                .contains(&format!("--tcf0 {mode} ")),
            "{w}"
        );
        let arch = view(w, "architectural");
        let elided = view(w, "TCF-elided");
        assert_eq!(
            (n(arch, "rd_u"), n(arch, "wr_u")),
            (REQUESTS, 256),
            "{mode}\n{text}"
        );
        let want = if user_elided { (REQUESTS, 256) } else { (0, 0) };
        assert_eq!(
            (n(elided, "rd_u"), n(elided, "wr_u")),
            want,
            "{mode}\n{text}"
        );
        assert_eq!(
            (n(elided, "rd_k"), n(elided, "wr_k")),
            (0, 0),
            "{mode}\n{text}"
        );
        assert_eq!(n(arch, "rd_k") > 0, kernel_checked, "{mode}\n{text}");
        assert_eq!(n(arch, "wr_k") > 0, kernel_checked, "{mode}\n{text}");
        assert_oracle_agrees(w, &text);
    }
    assert!(text.contains("Windows side by side"), "{text}");
}

/// The oracle (a QEMU plugin counting from QEMU's own hooks) against the trace, window by
/// window, per EL: instructions begun, reads, writes. Any difference is a problem, so exit
/// status 0 says they all agree; the figures are also checked one by one here, and shown not
/// to be vacuous. The windows cover system calls, a pipe between two processes, fork (page
/// faults: instructions abandoned and run again), timer interrupts inside runs, a
/// workload that executes the hypervisor's marker instructions at EL0 (posing as EL2 to the
/// oracle: it must open and close nothing), and busybox's glibc `true` started by execve
/// (its start-up reads MIDR_EL1, which Linux emulates: an instruction abandoned to a trap,
/// which QEMU's PMU counts — the PMU check holds the trace to that rule). SVE is off
/// (arm64.nosve): glibc would use SVE string functions, which the decoder does not judge.
#[test]
fn the_oracle_agrees_with_the_trace_in_every_window() {
    let line = "mtex-work --tcf0 sync --window 1 futex-hash 10 2 \
                && mtex-work --tcf0 none --window 2 memcached 10 \
                && mtex-work --window 3 fork 2 \
                && mtex-work --tcf0 async --window 4 spin 20000 \
                && mtex-work --window 5 fake-markers 50 \
                && mtex-work --window 6 exec true";
    let (code, doc, text) = linux(&["--workload", line, "--oracle", "--append", "arm64.nosve"]);
    assert_eq!(code, 0, "{text}");
    let windows = doc["windows"].as_array().expect("windows");
    assert_eq!(windows.len(), 6, "{text}");
    let mut abandoned = 0;
    for (i, w) in windows.iter().enumerate() {
        assert_eq!(n(w, "id"), i as u64 + 1);
        assert_oracle_agrees(w, &text);
        // Every figure of the real workloads has something to compare (the markers' window
        // may have no kernel instruction at all).
        for f in w["oracle"]["figures"].as_array().unwrap() {
            assert!(i == 4 || n(f, "oracle") > 0, "window {}: {f}", i + 1);
        }
        abandoned += n(w, "abandoned_el0") + n(w, "abandoned_el1");
    }
    // QEMU's step stub, taken back by the oracle, is there in every window with a kernel entry.
    assert!(n(&windows[0]["oracle"], "step_stubs") > 0, "{text}");
    // Page faults abandoned instructions (fork's copy-on-write at least).
    assert!(abandoned > 0, "{text}");
    // Interrupts landed in the spin window.
    assert!(n(&windows[3]["entries"], "irq_el0") > 0, "{text}");
    // The fake markers ran: four instructions per iteration at EL0.
    assert!(n(&windows[4], "instructions_el0") >= 200, "{text}");
}

#[test]
fn failed_workloads_leave_no_window_measured_and_say_why() {
    // Window 3 is measured (1000 getpid calls); then mtex-work is given a workload it does
    // not know (it must refuse before opening window 1), a workload leaves window 2 open
    // (--leave-open: the run ends with it open), and the shell is given a command that does
    // not exist (status 127, and its own message).
    const CALLS: u64 = 1000;
    let (status, doc, text) = linux(&[
        "--workload",
        &format!(
            "mtex-work --tcf0 sync --window 3 getpid {CALLS}; \
             mtex-work --window 1 no-such-workload; \
             mtex-work --window 2 --leave-open getpid 10; nonexistent-cmd"
        ),
    ]);
    assert_eq!(status, 1, "{text}");
    let ids = |key: &str| -> Vec<u64> {
        doc[key]
            .as_array()
            .unwrap_or_else(|| panic!("no {key}: {text}"))
            .iter()
            .map(|w| n(w, "id"))
            .collect()
    };
    // Window 1 never opened; window 2 is listed as never closed, with no counts.
    assert_eq!(ids("windows"), [3], "{text}");
    assert_eq!(ids("unclosed_windows"), [2], "{text}");
    let unclosed = &doc["unclosed_windows"][0];
    assert!(unclosed.get("instructions_el0").is_none(), "{unclosed}");
    let problems: Vec<&str> = doc["problems"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        problems.iter().any(|p| p.starts_with(
            "window 2 (mtex-work --window 2 --leave-open getpid 10) was opened and never closed"
        )),
        "{problems:#?}"
    );
    assert!(!text.contains("window 1"), "{text}");
    let output: Vec<&str> = doc["workload_output"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        output.contains(&"mtex-work: unknown workload no-such-workload"),
        "{output:?}"
    );
    // The shell's own message, in the problem beside its status.
    assert_eq!(doc["workload_status"], 127, "{text}");
    assert!(
        problems
            .iter()
            .any(|p| p.starts_with("the workload exited with status 127: ")
                && p.ends_with("nonexistent-cmd: not found")),
        "{problems:#?}"
    );
    // The measured window's time is the guest's own clock: under -icount shift=0 one
    // nanosecond per instruction the guest executed and per exception it took (QEMU's icount
    // counts the exception entry too), to one tick of the counter (16 ns at QEMU's 62.5 MHz);
    // not the stepping's hundreds of times more.
    let w = window(&doc, 3);
    let e = &w["entries"];
    let entries = n(e, "sync_el0") + n(e, "irq_el0") + n(e, "sync_el1") + n(e, "irq_el1");
    let executed = n(w, "instructions_el0") + n(w, "instructions_el1");
    let clock_ns = w["guest_clock_ms"].as_f64().unwrap() * 1e6;
    assert!(executed > CALLS * 10 && entries >= CALLS, "{w}");
    assert!(
        (clock_ns - (executed + entries) as f64).abs() <= 16.0,
        "guest clock {clock_ns} ns for {executed} instructions and {entries} exceptions\n{text}"
    );
    // Symbols are read (by a boot of their own on a kernel's first run).
    assert!(doc["symbols"].as_u64().unwrap() > 10_000, "{text}");
}

/// Two kernels in one command: Debian 6.12, which leaves TCR_EL1.TCMA1 clear, and the newest
/// 7.x of Debian's newer suites, whose `__cpu_setup` sets it (the TCMA1 change, merged for
/// 7.0). With TCMA1 set, the kernel's accesses through match-all (0xF-tagged) pointers are
/// unchecked, so futex-hash's checked kernel reads in a sync window drop by at least 95%
/// (what remains goes through the user's tagged pointer).
#[test]
fn a_newer_kernel_sets_tcma1_and_futex_hash_checks_drop_against_6_12() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let out_dir = std::env::temp_dir().join(format!("mtex-linux-ab-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out_dir);
    let out = Command::new(env!("CARGO_BIN_EXE_mtex"))
        .args(["linux", "--kernel", "6.12", "--kernel", "7.3"])
        .args(["--workload", "futex-hash 100 2", "--tcf0", "sync", "--out"])
        .arg(&out_dir)
        .output()
        .expect("running mtex linux");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report = |n: u32| -> Value {
        let f = out_dir.join(format!("linux-{n}/report.json"));
        as_read(
            &mtex::model::results::Results::from_json(&std::fs::read_to_string(&f).unwrap())
                .unwrap(),
        )
    };
    let sets_tcma1 = |r: &Value| {
        r["writes"].as_array().unwrap().iter().any(|w| {
            w["register"] == "TCR_EL1"
                && w["changes"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|c| c.as_str().unwrap().starts_with("TCMA1 0→1"))
                && w["symbol"]
                    .as_str()
                    .is_some_and(|s| s.starts_with("__cpu_setup"))
        })
    };
    let (old, new) = (report(1), report(2));
    assert!(
        old["release"].as_str().unwrap().starts_with("6.12."),
        "{}",
        old["release"]
    );
    assert!(
        new["release"].as_str().unwrap().starts_with("7."),
        "{}",
        new["release"]
    );
    assert!(!sets_tcma1(&old), "6.12 sets TCMA1:\n{text}");
    let full =
        |n: u32| std::fs::read_to_string(out_dir.join(format!("linux-{n}/report.txt"))).unwrap();
    assert!(
        !full(1).contains("TCMA1: set by this kernel"),
        "{}",
        full(1)
    );
    assert!(full(2).contains("TCMA1: set by this kernel"), "{}", full(2));
    assert!(
        sets_tcma1(&new),
        "7.x does not set TCMA1 in __cpu_setup:\n{text}"
    );
    let rd_k = |n: u32| {
        let doc = mtex::compare::load(&out_dir.join(format!("linux-{n}"))).unwrap();
        assert!(doc.kernel.is_some(), "report.json names no kernel");
        doc.runs[0]
            .phases
            .iter()
            .find(|p| p.name == "window 1")
            .unwrap()
            .counters["mem_access_checked_rd:k"]
    };
    let (a, b) = (rd_k(1), rd_k(2));
    assert!(
        a > 0 && b * 20 <= a,
        "checked kernel reads {a} → {b}: not a 95% drop\n{text}"
    );
    assert!(text.contains("Kernels side by side (6.12, 7.3)"), "{text}");
    // One boot a kernel: the drop is said, untested, never called an improvement.
    assert!(
        text.contains("(mem_access_checked_rd:k) change by -"),
        "{text}"
    );
    assert!(!text.contains("(I)") && !text.contains("(R)"), "{text}");
    let _ = std::fs::remove_dir_all(&out_dir);
}

/// The same kernel by release and by a path to its Image, with a System.map beside it: the
/// same Image (same hash), the same symbols without a symbol boot, and the same counts in
/// every window (under -icount a boot repeats exactly).
#[test]
fn a_kernel_by_path_with_its_system_map_reports_as_by_release() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let root = mtex::images::workspace_root();
    let run = |kernels: &[&str], out: &std::path::Path| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_mtex"));
        cmd.arg("linux");
        for k in kernels {
            cmd.args(["--kernel", k]);
        }
        let o = cmd
            .args(["--workload", "getpid 50", "--out"])
            .arg(out)
            .output()
            .expect("running mtex linux");
        let text = format!(
            "{}\n{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        assert_eq!(o.status.code(), Some(0), "{text}");
        text
    };
    let out = std::env::temp_dir().join(format!("mtex-linux-path-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    // By release first: it fetches the package and reads the symbols.
    run(&["6.12"], &out.join("first"));
    let by_release = mtex::compare::load(&out.join("first/linux-1")).unwrap();
    let k = by_release
        .kernel
        .clone()
        .expect("report.json names the kernel");
    let boot = std::fs::read_dir(root.join("target/linux"))
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(&k.package)
        })
        .expect("the unpacked package")
        .join("boot");
    // The Image and a System.map made of the symbols that boot read, in a directory of
    // their own.
    let dir = out.join("kernel");
    std::fs::create_dir_all(&dir).unwrap();
    let image = dir.join("Image");
    std::fs::copy(boot.join(format!("vmlinuz-{}", k.release)), &image).unwrap();
    let kallsyms = root.join(format!("target/linux/kallsyms-{}.txt", k.sha256));
    std::fs::copy(&kallsyms, dir.join("System.map")).unwrap();
    let text = run(&["6.12", image.to_str().unwrap()], &out.join("ab"));
    assert!(
        !text.contains("a first boot of"),
        "the System.map was not used:\n{text}"
    );
    let a = mtex::compare::load(&out.join("ab/linux-1")).unwrap();
    let b = mtex::compare::load(&out.join("ab/linux-2")).unwrap();
    let (ka, kb) = (a.kernel.clone().unwrap(), b.kernel.clone().unwrap());
    assert_eq!(ka.sha256, kb.sha256);
    assert_eq!(ka.release, kb.release);
    assert_eq!(kb.package, image.display().to_string());
    assert_eq!(a.runs[0].phases, b.runs[0].phases, "{text}");
    assert_eq!(a.runs[0].writes, b.runs[0].writes, "{text}");
    let _ = std::fs::remove_dir_all(&out);
}

/// `mtex linux`'s defaults, for a test that calls its functions.
pub(super) fn linux_args() -> mtex::linux::Args {
    mtex::linux::Args {
        out: std::env::temp_dir(),
        timeout: 120,
        ..mtex::linux::Args::defaults()
    }
}

/// The instrument's own options change what it records, never what the guest does: under
/// `-icount` the hypervisor's work is left out of the guest's clock, so the same window with
/// the per-PC profile, the call stacks or QEMU's oracle runs the same instructions and
/// makes the same checked accesses, count for count, as without.
#[test]
fn profile_stacks_and_oracle_leave_a_windows_counts_as_they_are() {
    let counts = |extra: &[&str]| -> (Value, f64, String) {
        let mut args = vec!["--workload", "futex-hash 100 1", "--tcf0", "sync"];
        args.extend_from_slice(extra);
        let (status, doc, text) = linux(&args);
        assert_eq!(status, 0, "{extra:?}\n{text}");
        let w = window(&doc, 1);
        let mut views = serde_json::Map::new();
        for v in w["views"].as_array().expect("views") {
            views.insert(v[0].as_str().unwrap().to_string(), v[1].clone());
        }
        let key = serde_json::json!({
            "instructions_el0": w["instructions_el0"],
            "instructions_el1": w["instructions_el1"],
            "entries": w["entries"],
            "views": views,
        });
        (key, w["guest_clock_ms"].as_f64().unwrap() * 1e6, text)
    };
    let (plain, plain_ns, _) = counts(&[]);
    for extra in [&["--profile"][..], &["--stacks"], &["--oracle"]] {
        let (with, ns, text) = counts(extra);
        assert_eq!(with, plain, "{extra:?} changed the window\n{text}");
        // The guest's clock over the window, to one tick of its counter (as the window clock
        // test holds it).
        assert!(
            (ns - plain_ns).abs() <= 16.0,
            "{extra:?}: {ns} ns against {plain_ns}\n{text}"
        );
    }
}
