//! The `mtex` binary on bad input: every mistake is refused with exit status 2 and a message
//! that names it, before anything is built or booted (these tests never start QEMU: a run that
//! got past the checks would build the images and boot, and the watchdog below would fail it).
//! And `mtex parse` on damaged logs: a listed problem and status 1, never a crash.

use mtex_abi::report::{ExitReason, Summary};
use mtex_abi::{Record, ShortStr, frame};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

struct Outcome {
    /// None when killed by a signal (a panic under panic=abort).
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Runs `mtex args`, failing the test if it takes long enough to have built or booted.
fn mtex(args: &[&str]) -> Outcome {
    let start = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_mtex"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Read as it comes: a child whose output fills the pipe would otherwise never end.
    let reader = |mut pipe: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            pipe.read_to_end(&mut buf).unwrap();
            String::from_utf8_lossy(&buf).into_owned()
        })
    };
    let stdout = reader(Box::new(child.stdout.take().unwrap()));
    let stderr = reader(Box::new(child.stderr.take().unwrap()));
    let limit = Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("mtex {args:?} still running after {limit:?}: it got past the input checks");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Outcome {
        code: child.wait().unwrap().code(),
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
    }
}

/// `mtex args` must be refused as bad input with a message holding every one of `needles`.
fn refused(args: &[&str], needles: &[&str]) -> String {
    let o = mtex(args);
    assert_eq!(o.code, Some(2), "mtex {args:?}: {}{}", o.stdout, o.stderr);
    for n in needles {
        assert!(
            o.stderr.contains(n),
            "mtex {args:?}: {:?} lacks {n:?}",
            o.stderr
        );
    }
    assert!(o.stdout.is_empty(), "mtex {args:?} printed {:?}", o.stdout);
    o.stderr
}

/// A fresh directory for this test's files.
fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("mtex-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn unknown_option_keys_are_refused_listing_the_known_ones() {
    let m = refused(
        &["run", "--opt", "policy=tcma1"],
        &["mtex.policy", "did you mean mtex.policies?"],
    );
    for k in mtex_abi::options::KNOWN_KEYS {
        assert!(m.contains(k), "{m} does not list {k}");
    }
    refused(
        &["run", "--guest", "controls", "--opt", "watchdog=5"],
        &["mtex.watchdog", "watchdog_ms"],
    );
    refused(&["run", "--opt", "mtex.hz=20"], &["without \"mtex.\""]);
    refused(&["run", "--opt", "hz"], &["\"hz\"", "KEY=VALUE"]);
    refused(&["run", "--guest", "spin mtex.x=1"], &["--guest"]);
}

#[test]
fn bad_values_are_refused_in_full_naming_them() {
    // Longer than the hypervisor's 96-byte console message: printed whole.
    let m = refused(
        &["run", "--guest", "nonsense"],
        &[
            "bad option mtex.guest",
            "exclusive-loop",
            "mtex.guest=nonsense",
        ],
    );
    assert!(m.len() > 96, "{m}");
    refused(
        &["run", "--opt", "policies=entry-tco,kasan,tcma1"],
        &[
            "bad option mtex.policies",
            "\"kasan\"",
            "skip-tag-stacks-pgtables",
        ],
    );
    refused(
        &["run", "--opt", "workloads=getpid,memcached:size=7"],
        &["bad option mtex.workloads", "\"memcached:size=7\""],
    );
    refused(
        &["run", "--guest", "spin", "--opt", "watchdog_ms=soon"],
        &["bad option mtex.watchdog_ms", "mtex.watchdog_ms=soon"],
    );
    refused(&["run", "--opt", "tcf0=on"], &["mtex.tcf0=on"]);
}

#[test]
fn sampling_the_kernel_on_two_cpus_is_refused_naming_sample() {
    // It ran, traced whole, with exact figures: the sampling was dropped unsaid.
    let smp = "run --guest kernel --opt cpus=2 --opt hz=0 --opt trace=only \
               --opt workloads=getpid --opt policies=entry-tco --opt sample=1000:25";
    let args: Vec<&str> = smp.split_whitespace().collect();
    refused(
        &args,
        &["bad option mtex.sample", "one CPU", "mtex.sample=1000:25"],
    );
    // Nor is there a traced phase to sample with trace=0.
    refused(
        &["run", "--opt", "trace=0", "--opt", "sample=1000:25"],
        &["bad option mtex.sample", "trace=0"],
    );
}

#[test]
fn an_option_the_guest_program_does_not_read_is_refused_naming_both() {
    // cpus=2 alone gave the controls program one CPU; with the kernel's keys beside it, two.
    for extra in ["", "--opt hz=0 --opt trace=only --opt workloads=getpid"] {
        let line = format!("run --guest controls --opt cpus=2 {extra}");
        let args: Vec<&str> = line.split_whitespace().collect();
        refused(
            &args,
            &[
                "--opt cpus=2",
                "the controls program does not read mtex.cpus",
                "--guest kernel",
            ],
        );
    }
    refused(
        &["run", "--guest", "trace", "--opt", "bench_n=10"],
        &[
            "the trace program does not read mtex.bench_n",
            "--guest el0",
        ],
    );
    let esp: Vec<&str> = "esp /nonexistent/esp --guest spin --opt hz=0"
        .split_whitespace()
        .collect();
    refused(&esp, &["the spin program does not read mtex.hz"]);
}

#[test]
fn zero_timeout_is_refused() {
    refused(&["run", "--timeout", "0"], &["--timeout"]);
    refused(&["run", "--timeout=-1"], &["--timeout"]);
    refused(&["run", "--timeout", "soon"], &["--timeout"]);
}

#[test]
fn json_path_that_cannot_be_written_is_refused_before_the_run() {
    let d = scratch("json");
    let missing = d.join("no-such-dir/report.json");
    let missing = missing.to_str().unwrap();
    refused(&["run", "--json", missing], &["--json", missing]);
    // A directory is not a file either.
    refused(&["run", "--json", d.to_str().unwrap()], &["--json"]);
    // Options are checked first: nothing is created for a run that is refused.
    let never = d.join("never.json");
    refused(
        &[
            "run",
            "--opt",
            "policy=x",
            "--json",
            never.to_str().unwrap(),
        ],
        &["mtex.policy"],
    );
    assert!(!never.exists());
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn parse_names_a_file_it_cannot_read() {
    refused(
        &["parse", "/nonexistent/mtex.log"],
        &["/nonexistent/mtex.log: no such file"],
    );
}

fn frame(seq: u32, r: &Record) -> String {
    let mut buf = [0u8; frame::MAX_TEXT];
    frame::encode(seq, r, &mut buf).unwrap().to_string()
}

#[test]
fn parse_reads_damaged_logs_without_crashing() {
    let d = scratch("parse");
    let hello = frame(0, &Record::Console(ShortStr::truncated("hello")));
    let summary = frame(
        1,
        &Record::Summary(Summary {
            records: 1,
            exit: ExitReason::GuestExit { status: 0 },
            ts: 0,
            exits: 0,
        }),
    );
    let parse = |name: &str, bytes: &[u8]| {
        let path = d.join(name);
        std::fs::write(&path, bytes).unwrap();
        // The full report: the console lines are not in the summary.
        let o = mtex(&["parse", path.to_str().unwrap(), "--format", "full"]);
        assert!(o.code.is_some(), "{name}: killed by a signal: {}", o.stderr);
        o
    };
    // Two frames on one line (a lost newline): both read, a success.
    let o = parse(
        "joined.log",
        format!("{}{summary}", hello.trim_end()).as_bytes(),
    );
    assert_eq!(o.code, Some(0), "{}{}", o.stdout, o.stderr);
    assert!(o.stdout.contains("hello"), "{}", o.stdout);
    // A frame repeated on the line of another: a problem, status 1.
    let o = parse(
        "repeated.log",
        format!("{}{hello}{summary}", hello.trim_end()).as_bytes(),
    );
    assert_eq!(o.code, Some(1), "{}{}", o.stdout, o.stderr);
    assert!(
        o.stdout.contains("PROBLEM: record 0 repeated"),
        "{}",
        o.stdout
    );
    // A byte that is not UTF-8 in other text: a note, still a success.
    let mut log = b"firmware \xff\n".to_vec();
    log.extend_from_slice(format!("{hello}{summary}").as_bytes());
    let o = parse("stray-byte.log", &log);
    assert_eq!(o.code, Some(0), "{}{}", o.stdout, o.stderr);
    assert!(
        o.stdout.contains("NOTE: console: 1 bytes were not UTF-8"),
        "{}",
        o.stdout
    );
    // The same byte inside a frame: a problem.
    let mut log = format!("{hello}{summary}").into_bytes();
    log[12] = 0xff;
    let o = parse("bad-frame.log", &log);
    assert_eq!(o.code, Some(1), "{}{}", o.stdout, o.stderr);
    assert!(o.stdout.contains("PROBLEM: damaged record"), "{}", o.stdout);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn an_esp_with_bad_options_is_refused_before_anything_is_written() {
    let dir = scratch("esp");
    let esp = dir.join("esp");
    refused(
        &[
            "esp",
            esp.to_str().unwrap(),
            "--opt",
            "workloads=getpid:iters=x",
        ],
        &["mtex.workloads"],
    );
    assert!(!esp.exists(), "the tree was written");
    // --acpi belongs to --uefi runs only.
    let o = mtex(&["run", "--acpi", "off"]);
    assert_eq!(o.code, Some(2), "{}", o.stderr);
    assert!(o.stderr.contains("--uefi"), "{}", o.stderr);
}

#[test]
fn a_bad_scenario_file_is_refused_naming_file_line_and_field() {
    let d = scratch("scenario");
    let f = d.join("bad.toml");
    std::fs::write(
        &f,
        "version = 1\n[[run]]\npolicies = [\"entry-tco\"]\nworkloads = [\"getpid:iters=0\"]\n",
    )
    .unwrap();
    let file = f.to_str().unwrap();
    refused(
        &["run", file],
        &[
            &format!("{file}:4: run[0].workloads"),
            "between 1 and 100000",
        ],
    );
    std::fs::write(&f, "version = 1\n[[run]]\nrepeats = 2\n").unwrap();
    refused(
        &["run", file],
        &[&format!("{file}:3"), "unknown field `repeats`"],
    );
    // A scenario and --opt together: which one would win is not guessed.
    refused(&["run", file, "--opt", "hz=100"], &["not both"]);
}

#[test]
fn version_is_printed() {
    let o = mtex(&["--version"]);
    assert_eq!(o.code, Some(0));
    assert_eq!(
        o.stdout.trim(),
        format!("mtex {}", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn run_help_lists_every_policy_token_and_workload() {
    let o = mtex(&["run", "--help"]);
    assert_eq!(o.code, Some(0));
    // Wrapped lines break the lists: compare with whitespace collapsed.
    let flat = o.stdout.split_whitespace().collect::<Vec<_>>().join(" ");
    for t in mtex_abi::scenario::TOKENS {
        assert!(flat.contains(t), "{t} missing from run --help");
    }
    for (w, _) in mtex_abi::scenario::Workload::ALL {
        assert!(flat.contains(w), "{w} missing from run --help");
    }
    assert!(flat.contains("[[expect]]") && flat.contains("drop_at_least"));
}

/// A scenario's name names its results directory inside --out: a name that is not a plain
/// file name is refused, before anything is built, and nothing is made outside --out.
#[test]
fn a_scenario_name_that_would_escape_out_is_refused() {
    let d = scratch("escape");
    let f = d.join("escape.toml");
    let outside = d.join("x-1");
    std::fs::write(
        &f,
        "version = 1\nname = \"../x\"\n[[run]]\nworkloads = [\"getpid\"]\n",
    )
    .unwrap();
    let out = d.join("out");
    refused(
        &["run", f.to_str().unwrap(), "--out", out.to_str().unwrap()],
        &[":2: name", "\"../x\"", "letters, digits, - and _"],
    );
    assert!(
        !outside.exists(),
        "a results directory was made outside --out"
    );
    let _ = std::fs::remove_dir_all(&d);
}

/// Any input file (a log, a scenario, a document to compare, a snippet) is a regular file of
/// bounded size: a device, a FIFO or a directory is named as what it is, and never read.
#[test]
fn inputs_are_regular_files_of_bounded_size() {
    let d = scratch("inputs");
    let fifo = d.join("fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let fifo = fifo.to_str().unwrap();
    let dir = d.to_str().unwrap();
    refused(
        &["parse", "/dev/zero"],
        &["/dev/zero", "not a regular file"],
    );
    refused(&["run", "/dev/zero"], &["/dev/zero", "not a regular file"]);
    refused(&["run", fifo], &[fifo, "not a regular file (a FIFO)"]);
    refused(&["parse", fifo], &[fifo, "not a regular file (a FIFO)"]);
    refused(
        &["compare", "/dev/zero", "/dev/zero"],
        &["/dev/zero", "not a regular file"],
    );
    refused(
        &["snippet", "/dev/zero"],
        &["/dev/zero", "not a regular file"],
    );
    refused(&["parse", dir], &[dir, "is a directory"]);
    refused(&["run", dir], &[dir, "is a directory"]);
    refused(&["snippet", dir], &[dir, "is a directory"]);
    let missing = d.join("missing.log");
    refused(
        &["parse", missing.to_str().unwrap()],
        &[missing.to_str().unwrap(), "no such file"],
    );
    // A sparse file past the limit: refused by its size, without reading it.
    let big = d.join("big.log");
    std::fs::File::create(&big)
        .unwrap()
        .set_len(mtex::input::LOG_LIMIT + 1)
        .unwrap();
    refused(
        &["parse", big.to_str().unwrap()],
        &["big.log", "bytes", "at most"],
    );
    let _ = std::fs::remove_dir_all(&d);
}

/// An expectation's counter is checked against the counters report.json has, before boot.
#[test]
fn an_unknown_expectation_counter_is_refused_before_boot() {
    let d = scratch("counter");
    let f = d.join("c.toml");
    for counter in ["mem_access_checked_rd:x", "dsb_total", "engine.nothing"] {
        std::fs::write(
            &f,
            format!(
                "version = 1\n[[run]]\nname = \"a\"\npolicies = [\"entry-tco\", \"tcma1\"]\n\
                 workloads = [\"getpid\"]\n[[expect]]\ncounter = \"{counter}\"\n\
                 workload = \"getpid\"\nfrom = \"entry-tco\"\nto = \"tcma1\"\nequal = true\n"
            ),
        )
        .unwrap();
        refused(
            &["run", f.to_str().unwrap()],
            &["expect[0].counter", counter, "not a counter"],
        );
    }
    let _ = std::fs::remove_dir_all(&d);
}

/// A wrong type in a scenario names the field and what it takes; an expectation's percent is
/// named by its key.
#[test]
fn scenario_type_errors_name_the_field_and_what_is_allowed() {
    let d = scratch("types");
    let f = d.join("t.toml");
    let file = f.to_str().unwrap();
    std::fs::write(&f, "version = 1\n[[run]]\nrepeat = \"two\"\n").unwrap();
    refused(&["run", file], &[":3: run[0].repeat", "1 to 100"]);
    std::fs::write(&f, "version = 1\n[[run]]\n[[run]]\nhz = -5\n").unwrap();
    refused(&["run", file], &[":4: run[1].hz", "0 to 100000"]);
    std::fs::write(&f, "version = \"1\"\n[[run]]\n").unwrap();
    refused(&["run", file], &[":1: version", "1"]);
    std::fs::write(
        &f,
        "version = 1\n[[run]]\nname = \"a\"\npolicies = [\"entry-tco\", \"tcma1\"]\n\
         workloads = [\"getpid\"]\n[[expect]]\ncounter = \"dsb\"\nworkload = \"getpid\"\n\
         from = \"entry-tco\"\nto = \"tcma1\"\ndrop_at_least = -5.0\n",
    )
    .unwrap();
    refused(
        &["run", file],
        &[":11: expect[0].drop_at_least", "0 to 100000"],
    );
    let _ = std::fs::remove_dir_all(&d);
}

/// A negative number to a numeric option names the option and its range.
#[test]
fn negative_numbers_name_the_option_and_its_range() {
    refused(
        &["run", "--timeout", "-1"],
        &["--timeout", "-1", "at least 1"],
    );
    refused(&["run", "--memory", "-1"], &["--memory", "-1", "512"]);
    refused(
        &["snippet", "x.S", "--iters", "-1"],
        &["--iters", "-1", "1 to"],
    );
    refused(&["snippet", "x.S", "--el", "-1"], &["--el", "-1", "0 to 1"]);
    refused(
        &["bench", "traps", "--n", "-1"],
        &["--n", "-1", "at least 1"],
    );
}

/// `compare --a-run`/`--a-policy` naming nothing in the document is an error that lists
/// what the document has, not an empty comparison.
#[test]
fn compare_selections_must_name_what_exists() {
    let d = scratch("compare");
    let log =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kernel-getpid-futex.log");
    let o = mtex(&["parse", "--json", log.to_str().unwrap()]);
    let doc = d.join("r.json");
    std::fs::write(&doc, &o.stdout).unwrap();
    let doc = doc.to_str().unwrap();
    refused(
        &["compare", doc, doc, "--a-run", "nope"],
        &["--a-run", "\"nope\"", "\"run\""],
    );
    refused(
        &["compare", doc, doc, "--b-policy", "nope"],
        &["--b-policy", "\"nope\"", "entry-tco"],
    );
    let o = mtex(&[
        "compare",
        doc,
        doc,
        "--a-policy",
        "entry-tco",
        "--b-policy",
        "tcma1",
    ]);
    assert_eq!(o.code, Some(0), "{}{}", o.stdout, o.stderr);
    let _ = std::fs::remove_dir_all(&d);
}

/// A directory of stand-ins for the programs `mtex linux` runs (dpkg, apt, QEMU, cargo):
/// each records that it was reached in `reached` and fails. Put first on PATH, it shows
/// whether a refusal came before any of them.
fn tripwires(d: &std::path::Path) -> (PathBuf, PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let bin = d.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let reached = d.join("reached");
    for tool in [
        "dpkg",
        "dpkg-deb",
        "apt-get",
        "apt-cache",
        "cargo",
        "qemu-system-aarch64",
    ] {
        let f = bin.join(tool);
        std::fs::write(
            &f,
            format!(
                "#!/bin/sh\necho {tool} >> '{}'\nexit 1\n",
                reached.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    (bin, reached)
}

#[test]
fn linux_options_are_refused_before_dpkg_apt_or_qemu() {
    let d = scratch("linux");
    let (bin, reached) = tripwires(&d);
    let file = d.join("a-file");
    std::fs::write(&file, "").unwrap();
    let under_file = file.join("results");
    let under_file = under_file.to_str().unwrap();
    let cases: [(&[&str], &[&str]); 15] = [
        (&["--sample", "1000"], &["--sample 1000"]),
        // The same through --append, where the option's checks would not see it.
        (
            &["--cpus", "2", "--append", "mtex.sample=1000:30"],
            &["--append \"mtex.sample=1000:30\"", "give --sample"],
        ),
        (
            &["--append", "mtex.profile=1"],
            &["--append \"mtex.profile=1\"", "give --profile"],
        ),
        (
            &["--sample", "1000:30", "--cpus", "2", "--stacks"],
            &["--sample with --profile or --stacks"],
        ),
        (
            &["--sample", "1000:30", "--cpus", "2", "--oracle"],
            &["--sample with --oracle and --cpus 2"],
        ),
        (
            &["--sample", "1000:30", "--profile"],
            &["--sample with --profile"],
        ),
        (
            &["--kernel", "../../etc/passwd"],
            &[
                "--kernel ../../etc/passwd: no such file",
                "6.12",
                "arm64 Image",
            ],
        ),
        (
            &["--kernel", "6.12 extra"],
            &["--kernel \"6.12 extra\"", "digits"],
        ),
        (&["--kernel", ""], &["--kernel \"\""]),
        (
            &["--append", "quiet loglevel=3"],
            &["--append \"quiet loglevel=3\"", "one word"],
        ),
        (
            &["--append", "rdinit=/bin/sh"],
            &["--append \"rdinit=/bin/sh\"", "rdinit="],
        ),
        (
            &["--append", "mtex.nope=1"],
            &["--append \"mtex.nope=1\"", "unknown option mtex.nope"],
        ),
        (&["--append", "a\"b"], &["--append", "one word"]),
        (&["--out", under_file], &["--out", under_file]),
        (&["--workload", "true\necho"], &["--workload", "one line"]),
    ];
    for (args, needles) in cases {
        let mut all = vec!["linux"];
        all.extend_from_slice(args);
        let start = Instant::now();
        let out = Command::new(env!("CARGO_BIN_EXE_mtex"))
            .args(&all)
            .env("PATH", &bin)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(start.elapsed() < Duration::from_secs(20), "{all:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{all:?}: {stderr}");
        for n in needles {
            assert!(stderr.contains(n), "{all:?}: {stderr:?} lacks {n:?}");
        }
        assert!(
            !reached.exists(),
            "{all:?} reached {}",
            std::fs::read_to_string(&reached).unwrap_or_default()
        );
    }
    // Below the RAM a kernel boots in: refused by the option's own range.
    refused(&["linux", "--ram-mib", "128"], &["--ram-mib", "128", "144"]);
    let _ = std::fs::remove_dir_all(&d);
}

/// `mtex report DIR` shows a results directory again in every form without running
/// anything: the summary, the full text, the matrix (from the run's log, parsed again), CSV,
/// JSON (the same document) and the page; a directory that is not one is refused by name.
#[test]
fn report_shows_a_results_directory_in_every_form() {
    let d = scratch("report");
    let log =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kernel-getpid-futex.log");
    let o = mtex(&["parse", "--json", log.to_str().unwrap()]);
    std::fs::write(d.join("report.json"), &o.stdout).unwrap();
    std::fs::copy(&log, d.join("run-1.log")).unwrap();
    let dir = d.to_str().unwrap();
    let shown = |form: &str| {
        let o = mtex(&["report", dir, "--format", form]);
        assert_eq!(o.code, Some(0), "{form}: {}{}", o.stdout, o.stderr);
        o.stdout
    };
    let text = shown("text");
    assert!(text.contains("   entry-tco      440   124"), "{text}");
    // (The line may wrap before the path.)
    assert!(
        text.replace("\n    ", " ")
            .contains(&format!("all in {dir}/report.txt")),
        "{text}"
    );
    let parsed = mtex(&["parse", log.to_str().unwrap()]).stdout;
    // The same tables as `mtex parse` prints from the log itself.
    let tables = |t: &str| {
        t.lines()
            .take_while(|l| !l.starts_with("Not shown"))
            .map(String::from)
            .collect::<Vec<_>>()
    };
    assert_eq!(tables(&text), tables(&parsed));
    let full = shown("full");
    assert!(full.starts_with(text.lines().next().unwrap()));
    assert!(
        full.contains("             1,272      mem_access_checked_rd:k"),
        "{full}"
    );
    assert_eq!(mtex(&["report", dir, "--verbose"]).stdout, full);
    assert!(shown("matrix").contains("Policy matrix (trace counter, exact)"));
    assert!(shown("csv").starts_with(mtex::output::csv::HEADER));
    assert_eq!(shown("json"), o.stdout);
    assert!(shown("html").starts_with("<!DOCTYPE html>"));
    // A reader that stops early (`| head`) ends the output quietly, not with a panic.
    let mut child = Command::new(env!("CARGO_BIN_EXE_mtex"))
        .args(["report", dir, "--format", "html"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let o = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    // The matrix needs the log: without it, the file is named.
    std::fs::remove_file(d.join("run-1.log")).unwrap();
    refused(&["report", dir, "--format", "matrix"], &["run-1.log"]);
    refused(
        &["report", "/nonexistent/results"],
        &["/nonexistent/results"],
    );
    let _ = std::fs::remove_dir_all(&d);
}

/// What is not a kernel is refused before anything boots, naming the file and why; so is a
/// path that is not there.
#[test]
fn a_file_that_is_not_a_kernel_is_refused_before_boot() {
    let d = scratch("not-a-kernel");
    let f = d.join("vmlinuz");
    std::fs::write(&f, "#!/bin/sh\necho hello\n").unwrap();
    let f = f.to_str().unwrap();
    refused(&["linux", "--kernel", f], &[f, "not an arm64 kernel"]);
    refused(
        &["linux", "--kernel", "/nonexistent/Image"],
        &["--kernel /nonexistent/Image"],
    );
    let _ = std::fs::remove_dir_all(&d);
}

/// An arm64 Image header with `flags` (bits 1-2: page size) and a banner to read the
/// release from: enough of a kernel for the checks made before boot.
fn fake_image(flags: u64) -> Vec<u8> {
    let mut b = vec![0u8; 64];
    b[24..32].copy_from_slice(&flags.to_le_bytes());
    b[0x38..0x3c].copy_from_slice(b"ARMd");
    b.extend_from_slice(b"Linux version 6.12.0-fake (mtex@test) #1 SMP\n\0");
    b.resize(4096, 0);
    b
}

/// A kernel mtex cannot measure is refused before it boots (before apt or QEMU run), naming
/// what it lacks: 64 KiB pages from the Image header, no MTE from the configuration beside it.
#[test]
fn a_kernel_without_what_mtex_needs_is_refused_naming_it() {
    let d = scratch("kernel-needs");
    let big = d.join("big/Image");
    std::fs::create_dir_all(big.parent().unwrap()).unwrap();
    std::fs::write(&big, fake_image(0b110)).unwrap();
    refused(
        &["linux", "--kernel", big.to_str().unwrap()],
        &["64 KiB pages", "CONFIG_ARM64_4K_PAGES", "not booted"],
    );
    let no_mte = d.join("nomte/Image");
    std::fs::create_dir_all(no_mte.parent().unwrap()).unwrap();
    std::fs::write(&no_mte, fake_image(0b010)).unwrap();
    std::fs::write(
        no_mte.with_file_name("config-6.12.0-fake"),
        "CONFIG_BLK_DEV_INITRD=y\nCONFIG_SERIAL_AMBA_PL011=y\n\
         CONFIG_SERIAL_AMBA_PL011_CONSOLE=y\nCONFIG_DEVMEM=y\n# CONFIG_ARM64_MTE is not set\n",
    )
    .unwrap();
    let e = refused(
        &["linux", "--kernel", no_mte.to_str().unwrap()],
        &["CONFIG_ARM64_MTE (", "not booted"],
    );
    assert!(!e.contains("PL011"), "{e}");
    // Symbols that are not symbols, or given for a kernel not given by path.
    let junk = d.join("System.map");
    std::fs::write(&junk, "hello\n").unwrap();
    refused(
        &[
            "linux",
            "--kernel",
            no_mte.to_str().unwrap(),
            "--symbols",
            junk.to_str().unwrap(),
        ],
        &["--symbols", "not a System.map, kallsyms dump or vmlinux"],
    );
    refused(
        &[
            "linux",
            "--kernel",
            "6.12",
            "--symbols",
            junk.to_str().unwrap(),
        ],
        &["--symbols", "one --kernel given by path"],
    );
    refused(
        &[
            "linux",
            "--kernel",
            no_mte.to_str().unwrap(),
            "--symbols",
            "/nonexistent/System.map",
        ],
        &["/nonexistent/System.map"],
    );
    let _ = std::fs::remove_dir_all(&d);
}

/// `mtex kernel build` refuses what it cannot build from before fetching anything.
#[test]
fn kernel_build_refuses_bad_input_before_fetching() {
    let d = scratch("kernel-build");
    let not_patch = d.join("notes.patch");
    std::fs::write(&not_patch, "just some notes\n").unwrap();
    refused(
        &["kernel", "build", "--patch", not_patch.to_str().unwrap()],
        &["notes.patch", "not a unified diff"],
    );
    refused(
        &["kernel", "build", "--source", "6.12; rm -rf /"],
        &["--source", "linux-source-VERSION"],
    );
    refused(
        &["kernel", "build", "--kasan", "fast"],
        &["--kasan", "fast"],
    );
    let frag = d.join("extra.config");
    std::fs::write(&frag, "CONFIG_X=y\nnot a line\n").unwrap();
    refused(
        &["kernel", "build", "--config", frag.to_str().unwrap()],
        &["extra.config:2:", "not a Kconfig line"],
    );
    refused(
        &["kernel", "build", "--tree", d.to_str().unwrap()],
        &["not a Linux source tree"],
    );
    // Debian's configuration is that of Debian's source, at its version.
    refused(
        &[
            "kernel",
            "build",
            "--debian-config",
            "--tree",
            d.to_str().unwrap(),
        ],
        &["--debian-config", "--tree"],
    );
    let _ = std::fs::remove_dir_all(&d);
}

/// A Linux scenario with a mistake is refused naming the file, the line and the field,
/// before anything is built or booted.
#[test]
fn a_linux_scenario_with_a_mistake_is_refused_with_its_line() {
    let d = scratch("linux-scenario");
    let f = d.join("s.toml");
    std::fs::write(
        &f,
        "version = 1\n[kernels]\na = \"6.12\"\n[[linux]]\nname = \"x\"\nkernels = [\"a\", \"b\"]\n\
         workloads = [\"getpid\"]\n",
    )
    .unwrap();
    refused(
        &["linux", "--scenario", f.to_str().unwrap()],
        &["s.toml:6: linux[0].kernels: \"b\" is not in [kernels]"],
    );
    let _ = std::fs::remove_dir_all(&d);
}

/// `parse --symbols` names a trapped write's PC from a kallsyms dump (or System.map), and a
/// file with no symbols in it (a kallsyms read without root: every address 0) is refused by
/// name before anything is parsed.
#[test]
fn parse_names_trapped_writes_from_a_symbol_file() {
    let d = scratch("symbols");
    let log = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/controls.log");
    let log = log.to_str().unwrap();
    let o = mtex(&["parse", "--json", log]);
    let doc: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    let pc = doc["runs"][0]["writes"][0]["pc"]
        .as_str()
        .unwrap()
        .to_string();
    let pc = u64::from_str_radix(pc.trim_start_matches("0x"), 16).unwrap();
    let map = d.join("kallsyms");
    std::fs::write(
        &map,
        format!(
            "{:016x} T early_setup\n{:016x} t after_it\n",
            pc - 0x1c0,
            pc + 0x40
        ),
    )
    .unwrap();
    let o = mtex(&["parse", "--json", log, "--symbols", map.to_str().unwrap()]);
    let doc: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(doc["runs"][0]["writes"][0]["symbol"], "early_setup+0x1c0");
    let unread = d.join("kallsyms-as-user");
    std::fs::write(&unread, "0000000000000000 T early_setup\n").unwrap();
    let unread = unread.to_str().unwrap();
    refused(
        &["parse", log, "--symbols", unread],
        &[unread, "no text symbols", "as root"],
    );
    let _ = std::fs::remove_dir_all(&d);
}

/// `mtex snippet`'s file is never an option of the assembler: a relative path `-o/ABS` is the
/// file of that name (here a snippet that assembles), and nothing is written at ABS. The run
/// stops at `--json`'s path, before anything is built.
#[test]
fn a_snippet_path_is_never_an_assembler_option() {
    let d = scratch("snippet-path");
    let target = d.join("escaped.o");
    let rel = format!("-o{}", target.display());
    let source = d.join(&rel);
    std::fs::create_dir_all(source.parent().unwrap()).unwrap();
    std::fs::write(&source, "ret\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_mtex"))
        .args(["snippet", "--json", "/nonexistent/dir/x.json", "--", &rel])
        .current_dir(&d)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--json /nonexistent/dir/x.json"),
        "{stderr}"
    );
    assert!(!stderr.contains("snippet.o"), "{stderr}");
    assert!(!target.exists(), "the assembler wrote {}", target.display());
    let _ = std::fs::remove_dir_all(&d);
}

/// A results directory may come from another machine: a run name in its report.json that is
/// not a plain file name (a URL, a path up or away) is refused by `mtex report` in every form
/// and by `mtex compare`, never made a link or a path; and a file of the directory that is a
/// link to outside it is never read.
#[test]
fn a_results_directory_is_read_from_inside_it_only() {
    let d = scratch("results-names");
    let log =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kernel-getpid-futex.log");
    let json = mtex(&["parse", "--json", log.to_str().unwrap()]).stdout;
    let results = d.join("results");
    std::fs::create_dir_all(&results).unwrap();
    // What an escaping name would reach: a log outside the directory.
    std::fs::copy(&log, d.join("secret-1.log")).unwrap();
    std::fs::copy(&log, d.join("outside-1.log")).unwrap();
    let dir = results.to_str().unwrap();
    let outside = d.join("outside");
    for name in [
        "javascript:alert(1)//",
        "../secret",
        "../../../../etc/passwd",
        outside.to_str().unwrap(),
    ] {
        let named = json.replacen("\"name\": \"run\"", &format!("\"name\": {name:?}"), 1);
        assert_ne!(named, json);
        std::fs::write(results.join("report.json"), &named).unwrap();
        let quoted = format!("{name:?}");
        for form in ["html", "matrix", "text"] {
            refused(
                &["report", dir, "--format", form],
                &["run name", quoted.as_str()],
            );
        }
        refused(&["compare", dir, dir], &["run name", quoted.as_str()]);
    }
    // A good name, but its log a link to outside the directory.
    std::fs::write(results.join("report.json"), &json).unwrap();
    std::os::unix::fs::symlink(d.join("secret-1.log"), results.join("run-1.log")).unwrap();
    refused(
        &["report", dir, "--format", "matrix"],
        &["run-1.log", "outside"],
    );
    // So is report.json itself.
    let linked = d.join("linked");
    std::fs::create_dir_all(&linked).unwrap();
    std::fs::write(d.join("elsewhere.json"), &json).unwrap();
    std::os::unix::fs::symlink(d.join("elsewhere.json"), linked.join("report.json")).unwrap();
    let linked = linked.to_str().unwrap();
    refused(&["report", linked], &["report.json", "outside"]);
    refused(&["compare", linked, dir], &["report.json", "outside"]);
    let _ = std::fs::remove_dir_all(&d);
}

/// Runs `mtex args` with the tripwires of `d` first on PATH: it must be refused (exit 2)
/// with every one of `needles` in its message, before dpkg, apt, cargo or QEMU ran.
fn refused_before_tools(d: &std::path::Path, args: &[&str], needles: &[&str]) {
    let (bin, reached) = tripwires(d);
    let start = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_mtex"))
        .args(args)
        .env("PATH", &bin)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(start.elapsed() < Duration::from_secs(20), "{args:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    for n in needles {
        assert!(stderr.contains(n), "{args:?}: {stderr:?} lacks {n:?}");
    }
    assert!(
        !reached.exists(),
        "{args:?} reached {}",
        std::fs::read_to_string(&reached).unwrap_or_default()
    );
}

/// A Linux scenario's values that would pass vacuously (a drop of at least -inf%), run without
/// end (10,000 workloads), or are of the wrong type are refused by the check of the whole
/// file, naming the file and its field, before anything is fetched, built or booted (every
/// bound and type is a unit test of `linux::scenario`; these go through the command).
#[test]
fn a_linux_scenario_out_of_bounds_is_refused_naming_file_and_field() {
    let d = scratch("linux-scenario-bounds");
    let f = d.join("s.toml");
    let good = "version = 1\n[kernels]\na = \"6.12\"\nb = \"7.3\"\n[[linux]]\nname = \"x\"\n\
                kernels = [\"a\", \"b\"]\nworkloads = [\"getpid 1000\"]\n[[expect]]\n\
                counter = \"tfsr_reads\"\nfrom = \"a\"\nto = \"b\"\ndrop_at_least = 50\n";
    let many: Vec<String> = (1..=10_000).map(|i| format!("\"getpid {i}\"")).collect();
    let cases = [
        (
            good.replace("drop_at_least = 50", "drop_at_least = -inf"),
            "s.toml:13: expect[0].drop_at_least: -inf: expected 0 to 100000 (per cent)",
        ),
        (
            good.replace("\"getpid 1000\"", &many.join(", ")),
            "s.toml:8: linux[0].workloads: 10000 workloads: 1 to 32",
        ),
        (
            good.replace("workloads = [", "repeat = -1\nworkloads = ["),
            "s.toml:8: linux[0].repeat: invalid value: integer `-1`",
        ),
    ];
    for (text, want) in &cases {
        std::fs::write(&f, text).unwrap();
        refused_before_tools(&d, &["linux", "--scenario", f.to_str().unwrap()], &[want]);
    }
    let _ = std::fs::remove_dir_all(&d);
}

/// One file format and one runner: `mtex run` takes a file whose runs boot kernels (its
/// mistakes named with their line, an option of the built-in guest's refused by name), and
/// `mtex linux --scenario` refuses a file whose runs boot the built-in guest, saying which
/// command runs it, all before anything is fetched, built or booted.
#[test]
fn mtex_run_takes_a_file_whose_runs_boot_kernels() {
    let d = scratch("run-kernels-file");
    let f = d.join("k.toml");
    let good = "version = 1\n[kernels]\na = \"6.12\"\n[[run]]\nname = \"x\"\n\
                kernels = [\"a\"]\nworkloads = [\"getpid 1000\"]\n";
    std::fs::write(&f, good.replace("[\"a\"]", "[\"a\", \"b\"]")).unwrap();
    let k = f.to_str().unwrap();
    refused_before_tools(
        &d,
        &["run", k],
        &["k.toml:6: run[0].kernels: \"b\" is not in [kernels]"],
    );
    std::fs::write(&f, good).unwrap();
    for option in [&["--uefi"][..], &["--oracle"], &["--format", "csv"]] {
        let mut args = vec!["run", k];
        args.extend_from_slice(option);
        refused_before_tools(
            &d,
            &args,
            &[
                "k.toml: its runs boot kernels",
                option[0],
                "mtex linux --scenario",
            ],
        );
    }
    let builtin = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scripts/scenarios/quick.toml");
    refused_before_tools(
        &d,
        &["linux", "--scenario", builtin.to_str().unwrap()],
        &["quick.toml: its runs boot the built-in guest, not kernels: `mtex run"],
    );
    let _ = std::fs::remove_dir_all(&d);
}

/// What the user puts into the guest is checked before anything is fetched or booted: a
/// package name that is not Debian's spelling, a file that is not there, a guest path that
/// climbs out of / or takes the place of mtex's own files, an environment variable that is
/// not NAME=VALUE.
#[test]
fn guest_files_packages_and_environment_are_checked_before_anything_runs() {
    let d = scratch("guest-files");
    let f = d.join("tool");
    std::fs::write(&f, "#!/bin/sh\n").unwrap();
    let tool = f.to_str().unwrap();
    let climbs = format!("{tool}:/../etc/x");
    let init = format!("{tool}:/init");
    let mtex_work = format!("{tool}:/bin/mtex-work");
    for (args, want) in [
        (
            &["--packages", "perf;rm"][..],
            "--packages \"perf;rm\": not a Debian package name",
        ),
        (
            &["--add", "/no/such/file"],
            "--add /no/such/file: /no/such/file: no such file",
        ),
        (&["--add", &climbs], "without . or .."),
        (&["--add", &init], "/init is mtex's own"),
        (&["--add", &mtex_work], "/bin/mtex-work is mtex's own"),
        (
            &["--env", "1X=y"],
            "--env \"1X=y\": \"1X\" is not a variable's name",
        ),
        (&["--env", "NOVALUE"], "expected NAME=VALUE"),
        (&["--suite", "trixie"], "--packages"),
        (
            &["--run", "hello", "--workload", "getpid"],
            "cannot be used with",
        ),
        (&["--run", "a\nb"], "--run \"a\\nb\": a command of one line"),
        (
            &["--setup", "a\nb"],
            "--setup \"a\\nb\": a command of one line",
        ),
        (
            &["--run", "true", "--operations", "5,6"],
            "--operations: 2 counts for 1 --run command(s)",
        ),
        (&["--run", "true", "--operations", "0"], "--operations"),
        (&["--operations", "5"], "--run"),
    ] {
        let mut all = vec!["linux"];
        all.extend_from_slice(args);
        refused_before_tools(&d, &all, &[want]);
    }
    let _ = std::fs::remove_dir_all(&d);
}

/// An option a command would leave unused is refused naming it, before anything runs: a
/// per-run option of `mtex linux` beside a scenario file (which says it for every run), a
/// guest program for an ESP in install mode, zero compile jobs.
#[test]
fn options_a_command_would_ignore_are_refused_naming_them() {
    let d = scratch("ignored-options");
    let f = d.join("s.toml");
    std::fs::write(
        &f,
        "version = 1\n[kernels]\na = \"6.12\"\n[[linux]]\nname = \"x\"\nkernels = [\"a\"]\n\
         workloads = [\"getpid\"]\n",
    )
    .unwrap();
    let f = f.to_str().unwrap();
    for (extra, option) in [
        (&["--kernel", "6.1"][..], "--kernel"),
        (&["--tcf0", "async"], "--tcf0"),
        (&["--workload", "getpid"], "--workload"),
        (&["--symbols", "/nonexistent/System.map"], "--symbols"),
        (&["--verbose"], "--verbose"),
        (&["--json", "/nonexistent/x.json"], "--json"),
    ] {
        let mut args = vec!["linux", "--scenario", f];
        args.extend_from_slice(extra);
        refused_before_tools(&d, &args, &["--scenario", option, "cannot be used with"]);
    }
    let esp = d.join("esp");
    refused(
        &[
            "esp",
            esp.to_str().unwrap(),
            "--install",
            "--guest",
            "controls",
        ],
        &["--install", "--guest", "cannot be used with"],
    );
    assert!(!esp.exists(), "the ESP was written");
    for jobs in ["0", "-1", "1025"] {
        refused_before_tools(
            &d,
            &["kernel", "build", "--jobs", jobs],
            &["--jobs", jobs, "1 to 1024"],
        );
    }
    let _ = std::fs::remove_dir_all(&d);
}

/// A Linux-mode run's results against the built-in guest's have no phase in common: `mtex
/// compare` says nothing is comparable and why (exit 2), rather than an empty comparison.
#[test]
fn compare_refuses_a_linux_run_against_a_built_in_guest_run() {
    let d = scratch("compare-kinds");
    let log =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kernel-getpid-futex.log");
    let json = mtex(&["parse", "--json", log.to_str().unwrap()]).stdout;
    let builtin = d.join("builtin");
    std::fs::create_dir_all(&builtin).unwrap();
    std::fs::write(builtin.join("report.json"), &json).unwrap();
    // A Linux-mode run: results.json with the kernel it booted, its windows as phases.
    let mut doc: serde_json::Value = serde_json::from_str(&json).unwrap();
    doc["kernel"] = serde_json::json!({
        "release": "6.12.117+deb12-arm64",
        "package": "linux-image-6.12.117+deb12-arm64",
        "version": "6.12.117-1~deb12u1",
        "sha256": "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff",
    });
    doc["runs"][0]["name"] = "linux".into();
    for (i, p) in doc["runs"][0]["phases"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .enumerate()
    {
        p["name"] = format!("window {}", i + 1).into();
    }
    let linux = d.join("linux");
    std::fs::create_dir_all(&linux).unwrap();
    std::fs::write(linux.join("results.json"), doc.to_string()).unwrap();
    let (l, b) = (linux.to_str().unwrap(), builtin.to_str().unwrap());
    for args in [
        vec!["compare", l, b],
        vec!["compare", b, l],
        vec!["compare", l, b, "--format", "csv"],
        vec!["compare", l, b, "--by", "function"],
    ] {
        refused(
            &args,
            &["nothing is comparable", l, "Linux-mode", b, "built-in"],
        );
    }
    // Each compared with its own kind is a comparison, as before.
    for (x, y) in [(l, l), (b, b)] {
        let o = mtex(&["compare", x, y]);
        assert_eq!(o.code, Some(0), "{}", o.stderr);
    }
    let _ = std::fs::remove_dir_all(&d);
}
