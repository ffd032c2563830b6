//! The text report, CSV and `mtex compare`, from saved console logs of real runs
//! (tests/fixtures/*.log, parsed as `mtex parse` does) and from generated documents.
//!
//! The snapshots (tests/snapshots/) are the reviewed outputs: a change to the layout shows up
//! as a diff there (`INSTA_UPDATE=always cargo test -p mtex --test output`, then read it).

use mtex::compare::{self, Select, Test, Verdict};
use mtex::model::report;
use mtex::model::results::{Boot, Expectation, PhaseOut, Results, Run, WriteOut};
use mtex::output::csv;
use mtex::output::full;
use mtex::output::text::WIDTH;
use proptest::prelude::*;
use std::collections::BTreeMap;

/// A saved console log's document, as `mtex parse LOG` reads it.
fn fixture(name: &str) -> Results {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    Results::single(&report::parse_bytes(&bytes))
}

/// The kernel scenario, policies entry-tco and tcma1, workloads getpid and futex-hash.
fn kernel() -> Results {
    fixture("kernel-getpid-futex.log")
}

/// Every line of `text` is at most [`WIDTH`] characters.
fn assert_width(text: &str) {
    for (i, l) in text.lines().enumerate() {
        assert!(
            l.chars().count() <= WIDTH,
            "line {} is {} wide:\n{l}",
            i + 1,
            l.chars().count()
        );
    }
}

/// `doc`'s runs repeated `n` times as repeats of `name`, `f` changing each repeat's phases.
fn repeated(doc: &Results, name: &str, n: u32, f: impl Fn(u32, &mut PhaseOut)) -> Results {
    let mut runs = Vec::new();
    for repeat in 0..n {
        for r in &doc.runs {
            let mut r = r.clone();
            r.name = name.to_string();
            r.repeat = repeat;
            for p in &mut r.phases {
                f(repeat, p);
            }
            runs.push(r);
        }
    }
    Results::new(Some("repeats.toml".into()), runs, Vec::new())
}

#[test]
fn text_of_the_kernel_scenario() {
    let text = full::render(&kernel());
    assert_width(&text);
    // futex-hash's checked kernel reads under entry-tco (what the TCMA1 change cuts), where a
    // kernel engineer looks for them.
    assert!(
        text.contains("             1,272      mem_access_checked_rd:k"),
        "{text}"
    );
    insta::assert_snapshot!("text_kernel", text);
}

/// The summary of the same run: the table a kernel engineer reads first, its figures the
/// per-phase blocks' own (1,272 checked kernel reads of futex-hash under entry-tco).
#[test]
fn summary_of_the_kernel_scenario() {
    let text = mtex::output::summary::render(&kernel(), Some("all in DIR/report.txt"), true);
    assert_width(&text);
    let row = |workload: &str, policy: &str| {
        let at = text
            .lines()
            .position(|l| l.starts_with(&format!(" {workload} ")))
            .unwrap_or_else(|| panic!("no {workload} group:\n{text}"));
        text.lines()
            .skip(at + 1)
            .find(|l| l.trim_start().starts_with(&format!("{policy} ")))
            .unwrap_or_else(|| panic!("no {policy} row under {workload}:\n{text}"))
            .split_whitespace()
            .skip(1)
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    let entry = row("futex-hash", "entry-tco");
    assert_eq!(entry[..4], ["1,272", "188", "64", "32"], "{text}");
    let tcma1 = row("futex-hash", "tcma1");
    // (32 + 0) against (1,272 + 188): -97.8%.
    assert_eq!(tcma1.last().unwrap(), "-97.8%", "{text}");
    insta::assert_snapshot!("summary_kernel", text);
}

#[test]
fn text_of_the_controls_walk() {
    let text = full::render(&fixture("controls.log"));
    assert_width(&text);
    insta::assert_snapshot!("text_controls", text);
}

#[test]
fn text_of_a_failed_run_with_problems_many_writes_and_expectations() {
    let mut doc = kernel();
    let run = &mut doc.runs[0];
    run.success = false;
    run.end = "host time limit (30 s) hit; guest at pc 0xffffff8041006be0, EL1".into();
    run.problems
        .push("phase futex-hash never ended: counts up to pc 0xffffff8041006be0 (EL1)".into());
    run.notes
        .push("line 7: bytes that are not UTF-8 outside a record".into());
    run.phases[3].partial = true;
    run.phases[3].end_ts = None;
    let w = run.writes[2].clone();
    while run.writes.len() < 45 {
        let mut w = w.clone();
        w.seq = 100 + run.writes.len() as u32;
        w.phase = Some("futex-hash".into());
        run.writes.push(w);
    }
    let expectations = vec![
        Expectation {
            text: "futex-hash under tcma1: mem_access_checked_rd:k < 5% of entry-tco's".into(),
            held: true,
            detail: "32 < 63.6".into(),
        },
        Expectation {
            text: "getpid under tcma1: tco_writes = 0".into(),
            held: false,
            detail: "33".into(),
        },
    ];
    let doc = Results::new(None, doc.runs, expectations);
    let text = full::render(&doc);
    assert_width(&text);
    assert!(text.contains("… 25 more (all in report.json)"), "{text}");
    assert!(
        text.contains("PROBLEM: phase futex-hash never ended"),
        "{text}"
    );
    assert!(text.contains("   FAIL  getpid under tcma1"), "{text}");
    insta::assert_snapshot!("text_failed", text);
}

#[test]
fn csv_of_the_kernel_scenario() {
    let doc = kernel();
    let csv = csv::render(&doc);
    let rows = parse_csv(&csv);
    assert_eq!(rows[0].join(","), csv::HEADER);
    let n: usize = doc
        .runs
        .iter()
        .flat_map(|r| &r.phases)
        .map(|p| p.counters.len())
        .sum();
    assert_eq!(rows.len(), n + 1);
    assert!(csv.contains(
        "run,0,2,futex-hash,entry-tco,futex-hash,mem_access_checked_rd:k,1272,exact,,\n"
    ));
    insta::assert_snapshot!("csv_kernel", csv);
}

#[test]
fn compare_two_policies_of_one_run() {
    let doc = kernel();
    let sel = |p: &str| Select {
        run: None,
        policy: Some(p.into()),
    };
    let c = compare::compare(&doc, &sel("entry-tco"), &doc, &sel("tcma1"));
    let text = compare::render_text(&c, false);
    assert_width(&text);
    assert!(
        text.contains(
            "  futex-hash: the kernel-space tag-checked reads (mem_access_checked_rd:k) change by \
             -97.5% (single\n      runs: untested, repeat to test)\n      (1,272 → 32)\n"
        ),
        "{text}"
    );
    insta::assert_snapshot!("compare_policies", text);
    insta::assert_snapshot!("compare_policies_csv", compare::render_csv(&c));
}

#[test]
fn compare_of_a_document_with_itself_finds_nothing() {
    let doc = kernel();
    let c = compare::compare(&doc, &Select::default(), &doc, &Select::default());
    let s = c.summary();
    assert_eq!((s.improvements, s.regressions), (0, 0));
    assert_eq!(s.results, s.unchanged);
    // Every counter of every phase that describes the guest is a result; the instrument's
    // are apart.
    let (guest, instrument): (Vec<&String>, Vec<&String>) = doc.runs[0]
        .phases
        .iter()
        .flat_map(|p| p.counters.keys())
        .partition(|k| mtex_abi::counters::describes_guest(k));
    assert_eq!((s.results, s.instrument), (guest.len(), instrument.len()));
    assert_eq!(s.results, 4 * 54);
    let text = compare::render_text(&c, false);
    assert!(
        text.contains("216 results: 0 improvements, 0 regressions, 216 unchanged"),
        "{text}"
    );
}

/// How the instrument worked (its exits, the step engine's plans, the hypervisor's own
/// instructions) is not the guest's behaviour: a change there is listed apart, never a mark;
/// a change in a guest counter beside them still is one.
#[test]
fn compare_judges_only_what_describes_the_guest() {
    let a = kernel();
    let mut b = a.clone();
    for p in b.runs.iter_mut().flat_map(|r| r.phases.iter_mut()) {
        for name in [
            "step_exits",
            "exits",
            "pmu.instructions:h",
            "engine.plans_made",
        ] {
            *p.counters.entry(name.to_string()).or_insert(0) += 1000;
        }
    }
    let c = compare::compare(&a, &Select::default(), &b, &Select::default());
    let s = c.summary();
    assert_eq!((s.improvements, s.regressions), (0, 0), "{s:?}");
    assert_eq!(s.instrument % 4, 0, "{s:?}");
    assert!(s.instrument >= 4 * 4, "{s:?}");
    let text = compare::render_text(&c, false);
    assert!(text.contains("the instrument's own work"), "{text}");
    assert!(
        !text
            .lines()
            .any(|l| l.ends_with("(R)") || l.ends_with("(I)")),
        "{text}"
    );
    // A guest counter changed as well: a change per phase, the instrument still apart. From
    // single runs it is untested: never called a regression.
    for p in b.runs.iter_mut().flat_map(|r| r.phases.iter_mut()) {
        *p.counters.get_mut("mem_access_checked_rd:k").unwrap() += 1;
    }
    let c = compare::compare(&a, &Select::default(), &b, &Select::default());
    let s = c.summary();
    assert_eq!(
        (s.improvements, s.regressions, s.changed),
        (0, 0, 4),
        "{s:?}"
    );
    let text = compare::render_text(&c, false);
    assert!(
        !text
            .lines()
            .any(|l| l.ends_with("(R)") || l.ends_with("(I)")),
        "{text}"
    );
    assert!(
        text.contains("4 changed from single runs, untested (?)"),
        "{text}"
    );
}

/// Three repeats on each side: the counts identical (QEMU, `-icount`), cycles varying as on
/// silicon — [10, 12, 11] against [20, 21, 19] in futex-hash.
fn repeats() -> (Results, Results) {
    let base = kernel();
    let a = repeated(&base, "run", 3, |i, p| {
        p.counters.insert("cycles".into(), [10, 12, 11][i as usize]);
    });
    let b = repeated(&base, "run", 3, |i, p| {
        p.counters.insert("cycles".into(), [20, 21, 19][i as usize]);
        // A patch that removes one TCO write per phase, exactly.
        if let Some(v) = p.counters.get_mut("tco_writes") {
            *v -= 1;
        }
        // And noise that is not a change.
        if let Some(v) = p.counters.get_mut("pmu.instructions:h") {
            *v += [0, 7, 3][i as usize];
        }
    });
    (a, b)
}

#[test]
fn welch_on_a_hand_checked_example() {
    let a = compare::stats(&[10, 12, 11]).unwrap();
    let b = compare::stats(&[20, 21, 19]).unwrap();
    assert_eq!((a.mean, a.sd, b.mean, b.sd), (11.0, 1.0, 20.0, 1.0));
    let (t, df, p) = compare::welch(&a, &b).unwrap();
    // t = 9 / sqrt(1/3 + 1/3); df = (2/3)² / ((1/3)²/2 + (1/3)²/2) = 4; for 4 degrees of
    // freedom the CDF has a closed form, F(t) = 1/2 + 3/8·x·(1 − x²/12)·… (x = t/√(1+t²/4)),
    // which gives p = 2·(1 − F(t)) = 0.000385068 (checked by numerical integration too).
    assert!((t - 11.022_703_842_524_3).abs() < 1e-9, "{t}");
    assert!((df - 4.0).abs() < 1e-9, "{df}");
    assert!((p - 0.000_385_067_711).abs() < 1e-9, "{p}");

    let (a, b) = repeats();
    let c = compare::compare(&a, &Select::default(), &b, &Select::default());
    let futex = &c.phases[1];
    assert_eq!(futex.phase, "futex-hash");
    let cycles = futex.rows.iter().find(|r| r.counter == "cycles").unwrap();
    assert!(matches!(cycles.test, Test::Welch { p, .. } if (p - 0.000_385_067_711).abs() < 1e-9));
    assert_eq!(cycles.verdict, Verdict::Regression);
    let tco = futex
        .rows
        .iter()
        .find(|r| r.counter == "tco_writes")
        .unwrap();
    assert_eq!(
        (&tco.test, tco.verdict),
        (&Test::Exact, Verdict::Improvement)
    );
    let hyp = futex
        .rows
        .iter()
        .find(|r| r.counter == "pmu.instructions:h")
        .unwrap();
    assert!(
        matches!(hyp.test, Test::Welch { p, .. } if p > 0.05),
        "{hyp:?}"
    );
    // The hypervisor's own instructions describe the instrument: never a mark.
    assert_eq!(hyp.verdict, Verdict::Instrument);
    let s = c.summary();
    assert_eq!((s.improvements, s.regressions), (4, 4), "{s:?}");
    let text = compare::render_text(&c, false);
    assert_width(&text);
    assert!(
        text.contains("220 results: 4 improvements, 4 regressions, 212 unchanged"),
        "{text}"
    );
    insta::assert_snapshot!("compare_repeats", text);
}

#[test]
fn phases_on_one_side_only_are_named() {
    let a = kernel();
    let mut b = kernel();
    b.runs[0].phases.truncate(2);
    b.runs[0].phases[1].counters.insert("cycles".into(), 5);
    let c = compare::compare(&a, &Select::default(), &b, &Select::default());
    assert_eq!(c.only_a, ["getpid #2", "futex-hash #2"]);
    let text = compare::render_text(&c, false);
    assert_width(&text);
    assert!(
        text.contains("Only in A: getpid #2, futex-hash #2"),
        "{text}"
    );
    assert!(text.contains("; 1 counter on one side only"), "{text}");
}

#[test]
fn two_runs_of_one_scenario_meet_when_both_are_named() {
    let (a, b) = repeats();
    let named = |doc: &Results, name: &str| -> Vec<Run> {
        let rename = |r: &Run| Run {
            name: name.into(),
            ..r.clone()
        };
        doc.runs.iter().map(rename).collect()
    };
    let mut runs = named(&a, "baseline");
    runs.extend(named(&b, "patched"));
    let doc = Results::new(None, runs, Vec::new());
    let run = |r: &str| Select {
        run: Some(r.into()),
        policy: None,
    };
    let c = compare::compare(&doc, &run("baseline"), &doc, &run("patched"));
    assert_eq!(c.phases.len(), 4);
    assert_eq!(
        c.summary(),
        compare::compare(&a, &Select::default(), &b, &Select::default()).summary()
    );
    // One side named only: runs meet by name, and these do not.
    let c = compare::compare(&doc, &run("baseline"), &doc, &Select::default());
    assert_eq!(c.phases.len(), 4);
    assert_eq!(c.only_b.len(), 4, "{:?}", c.only_b);
    assert_eq!(c.summary().improvements + c.summary().regressions, 0);
}

/// A directory for one test, removed first.
fn scratch(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("mtex-output-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn mtex_compare_reads_a_directory_or_a_file_and_refuses_bad_input() {
    let dir = scratch("cli");
    let json = serde_json::to_string_pretty(&kernel()).unwrap();
    std::fs::write(dir.join("report.json"), &json).unwrap();
    let file = dir.join("b.json");
    std::fs::write(&file, &json).unwrap();
    let mtex = env!("CARGO_BIN_EXE_mtex");
    let out = std::process::Command::new(mtex)
        .arg("compare")
        .arg(&dir)
        .arg(&file)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("0 improvements, 0 regressions"), "{stdout}");
    let out = std::process::Command::new(mtex)
        .args([
            "compare",
            "--format",
            "csv",
            "--a-policy",
            "entry-tco",
            "--b-policy",
            "tcma1",
        ])
        .arg(&file)
        .arg(&file)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.starts_with("run,phase,occurrence,"), "{stdout}");

    std::fs::write(
        dir.join("bad.json"),
        r#"{"schema":"mtex-report","version":9}"#,
    )
    .unwrap();
    for bad in [dir.join("missing.json"), dir.join("bad.json")] {
        let out = std::process::Command::new(mtex)
            .arg("compare")
            .arg(&dir)
            .arg(&bad)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(&*bad.to_string_lossy()), "{stderr}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A minimal RFC 4180 reader: records of fields, quotes doubled inside quoted fields.
fn parse_csv(text: &str) -> Vec<Vec<String>> {
    let mut records = Vec::new();
    let (mut record, mut field) = (Vec::new(), String::new());
    let (mut quoted, mut chars) = (false, text.chars().peekable());
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            (true, '"') => quoted = false,
            (true, c) => field.push(c),
            (false, '"') => quoted = true,
            (false, ',') => record.push(std::mem::take(&mut field)),
            (false, '\n') => {
                record.push(std::mem::take(&mut field));
                records.push(std::mem::take(&mut record));
            }
            (false, c) => field.push(c),
        }
    }
    assert!(
        field.is_empty() && record.is_empty() && !quoted,
        "unterminated record"
    );
    records
}

/// The counter names mtex writes.
fn standard_names() -> Vec<String> {
    let mut names: Vec<String> = mtex::model::results::trace_counters(&Default::default())
        .into_keys()
        .collect();
    for n in [
        "exits",
        "step_exits",
        "trapped_writes",
        "virtual_irqs",
        "emulated",
    ] {
        names.push(n.into());
    }
    for el in ["h", "k", "u"] {
        names.push(format!("pmu.instructions:{el}"));
    }
    names
}

/// Any string: names as mtex writes them, or anything (control characters, newlines, long).
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z0-9:+._-]{0,12}",
        "(?s:.){0,40}",
        "[ a-zA-Z→]{0,250}",
        "[\\x00-\\x1f\\x7f]{0,4}",
    ]
}

fn value() -> impl Strategy<Value = u64> {
    prop_oneof![Just(0u64), 0..5_000_000u64, any::<u64>()]
}

fn counters() -> impl Strategy<Value = BTreeMap<String, u64>> {
    let names = standard_names();
    let name = prop_oneof![4 => proptest::sample::select(names), 1 => text()];
    proptest::collection::btree_map(name, value(), 0..60)
}

fn phase() -> impl Strategy<Value = PhaseOut> {
    let workload = prop_oneof![
        Just(None),
        proptest::sample::select(vec!["getpid", "futex-hash", "memcached"])
            .prop_map(|w| Some(w.to_string())),
        text().prop_map(Some),
    ];
    (
        (text(), proptest::option::of(text()), workload),
        proptest::collection::vec(proptest::option::of(any::<u32>()), 3),
        (proptest::option::of(text()), any::<bool>(), any::<bool>()),
        (
            any::<u64>(),
            proptest::option::of(any::<u64>()),
            counters(),
            proptest::collection::vec(text(), 0..3),
        ),
    )
        .prop_map(
            |(
                (name, policy, workload),
                params,
                (tcf0, traced, partial),
                (b, e, counters, not_supported),
            )| {
                PhaseOut {
                    id: params[0].unwrap_or_default(),
                    name,
                    policy,
                    workload,
                    iters: params[0],
                    size: params[1],
                    tasks: params[2],
                    tcf0,
                    traced,
                    partial,
                    begin_ts: b,
                    end_ts: e,
                    counters: counters.clone(),
                    not_counted: not_supported.iter().rev().cloned().collect(),
                    not_supported,
                    functions: Vec::new(),
                    stacks: Vec::new(),
                    profile: None,
                    // Each CPU's share under the phase's own counter names.
                    cpus: (0..params[0].unwrap_or(0) % 3)
                        .map(|cpu| mtex::model::results::CpuShareOut {
                            cpu,
                            counters: counters.clone(),
                        })
                        .collect(),
                    sampled: None,
                    estimates: Default::default(),
                    cpu_estimates: Vec::new(),
                }
            },
        )
}

fn write() -> impl Strategy<Value = WriteOut> {
    (
        (any::<u32>(), text(), text(), text()),
        proptest::collection::vec(text(), 0..4),
        (
            text(),
            any::<u8>(),
            any::<bool>(),
            proptest::option::of(text()),
            any::<u64>(),
        ),
    )
        .prop_map(
            |((seq, register, old, new), changes, (pc, el, tco, phase, ts))| WriteOut {
                seq,
                cpu: seq % 4,
                register,
                old,
                new,
                changes,
                symbol: phase.clone().map(|p| format!("{p}+0x4")),
                pc,
                el,
                tco,
                phase,
                ts,
            },
        )
}

fn boot() -> impl Strategy<Value = Boot> {
    (
        text(),
        text(),
        text(),
        prop_oneof![Just(0u64), any::<u64>()],
        any::<bool>(),
    )
        .prop_map(|(path, midr, traps, counter_hz, emulator)| Boot {
            path,
            midr,
            console: "0x9000000".into(),
            hypervisor: "0x40200000".into(),
            guest_ram: "0x50000000".into(),
            traps,
            counter_hz,
            emulator,
        })
}

fn run() -> impl Strategy<Value = Run> {
    (
        (
            prop_oneof![Just("run".to_string()), text()],
            any::<u32>(),
            any::<bool>(),
            text(),
        ),
        proptest::option::of(boot()),
        proptest::collection::vec(phase(), 0..4),
        proptest::collection::vec(write(), 0..25),
        proptest::collection::vec(text(), 0..3),
        proptest::collection::vec(text(), 0..3),
        proptest::collection::vec(text(), 0..2),
    )
        .prop_map(
            |((name, repeat, success, end), boot, phases, writes, console, problems, notes)| Run {
                name,
                repeat,
                success,
                end,
                boot,
                phases,
                writes,
                console,
                power_calls: Vec::new(),
                problems,
                notes,
            },
        )
}

fn document() -> impl Strategy<Value = Results> {
    (
        proptest::collection::vec(run(), 0..3),
        proptest::collection::vec((text(), any::<bool>(), text()), 0..3),
        proptest::option::of(text()),
        text(),
    )
        .prop_map(|(runs, exps, scenario, mtex)| {
            let exps = exps
                .into_iter()
                .map(|(text, held, detail)| Expectation { text, held, detail })
                .collect();
            let mut doc = Results::new(scenario, runs, exps);
            doc.mtex = mtex;
            doc
        })
}

/// The checked-access counters, architectural and TCF-elided.
fn checked(name: &str) -> bool {
    let base = name.strip_prefix("tcf_elided.").unwrap_or(name);
    ["rd:k", "wr:k", "rd:u", "wr:u"]
        .iter()
        .any(|s| base == format!("mem_access_checked_{s}"))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// The text keeps every non-zero checked counter of every phase, in that phase's block,
    /// with its value; and no line is wider than 100 columns, whatever the document holds.
    #[test]
    fn text_loses_no_checked_counter_and_fits_100_columns(doc in document()) {
        let text = full::render(&doc);
        assert_width(&text);
        let blocks: Vec<&str> = text.split("\n Performance counter stats for").skip(1).collect();
        let phases: Vec<&PhaseOut> = doc.runs.iter().flat_map(|r| &r.phases).collect();
        prop_assert_eq!(blocks.len(), phases.len());
        for (block, p) in blocks.iter().zip(phases) {
            // A block ends at the next run's header or trap log; a console or problem line
            // can never look like a counter line (it starts otherwise).
            for (name, &v) in p.counters.iter().filter(|(n, v)| checked(n) && **v != 0) {
                let want = format!("{}      {name}", mtex::output::text::thousands(v));
                prop_assert!(
                    block.lines().any(|l| {
                        let l = l.trim_start();
                        l.strip_prefix(&want).is_some_and(|r| r.is_empty() || r.starts_with(' '))
                    }),
                    "{} = {} missing from:\n{}", name, v, block
                );
            }
        }
    }

    /// CSV gives back every counter of every phase, quoted as RFC 4180 has it.
    #[test]
    fn csv_round_trips(doc in document()) {
        let rows = parse_csv(&csv::render(&doc));
        let mut want = Vec::new();
        for r in &doc.runs {
            for (i, p) in r.phases.iter().enumerate() {
                for (c, v) in &p.counters {
                    want.push(vec![
                        r.name.clone(),
                        r.repeat.to_string(),
                        (i + 1).to_string(),
                        p.name.clone(),
                        p.policy.clone().unwrap_or_default(),
                        p.workload.clone().unwrap_or_default(),
                        c.clone(),
                        v.to_string(),
                        "exact".to_string(),
                        String::new(),
                        String::new(),
                    ]);
                }
            }
        }
        prop_assert_eq!(&rows[1..], &want[..]);
    }

    /// A document compared with itself: nothing changed, and the text fits 100 columns.
    #[test]
    fn compare_with_itself_finds_no_change(doc in document()) {
        let c = compare::compare(&doc, &Select::default(), &doc, &Select::default());
        let s = c.summary();
        prop_assert_eq!((s.improvements, s.regressions, s.one_sided), (0, 0, 0));
        let text = compare::render_text(&c, true);
        assert_width(&text);
        let want = "0 improvements, 0 regressions";
        prop_assert!(text.contains(want), "{}", text);
        let _ = compare::render_csv(&c);
    }

    /// Any two documents compare without a panic, within 100 columns.
    #[test]
    fn compare_of_any_two_documents_fits(a in document(), b in document()) {
        let c = compare::compare(&a, &Select::default(), &b, &Select::default());
        assert_width(&compare::render_text(&c, true));
        let _ = compare::render_csv(&c);
    }
}

/// A saved `mtex linux` run (Debian's 6.12 on 2 CPUs, one window around
/// `mtex-work futex-hash 10 2`) made into its results document as the run makes it.
fn linux_futex() -> Results {
    let dir = format!(
        "{}/tests/fixtures/linux-futex-2cpu",
        env!("CARGO_MANIFEST_DIR")
    );
    let read = |name: &str| {
        let path = format!("{dir}/{name}");
        std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    };
    let bytes = read("console.log");
    let console = mtex::qemu::Console {
        text: String::from_utf8_lossy(&bytes).into_owned(),
        bytes,
        status: Some(0),
        timed_out: false,
        killed: None,
        wall: std::time::Duration::ZERO,
        stderr: String::new(),
        oracle: None,
        oracle_shares: false,
    };
    let kernel = mtex::debian::kernel::Kernel {
        package: mtex::debian::kernel::Unpacked {
            name: "linux-image-6.12.118+deb12-arm64".into(),
            version: "6.12.118-1~deb12u1".into(),
            root: dir.clone().into(),
        },
        release: "6.12.118+deb12-arm64".into(),
        image: format!("{dir}/Image").into(),
        config: format!("{dir}/config").into(),
        sha256: "0".repeat(64),
        append: Vec::new(),
    };
    let linux = String::from_utf8(read("linux-console.log")).expect("UTF-8");
    mtex::linux::report::document(
        &kernel,
        &console,
        &linux,
        ("", mtex::symbols::Symbols::default()),
        // As the run that left these consoles was booted.
        mtex::linux::report::Setup {
            icount: true,
            cpus: 2,
            cpu_model: mtex::qemu::CpuModel::Max,
            tagged_heap: None,
            operations: Vec::new(),
            notes: Vec::new(),
        },
    )
}

/// Every form of a Linux run, reviewed: what `mtex linux` prints and writes (report.txt,
/// report.json, the CSV), and the document read back renders the same.
#[test]
fn every_form_of_a_linux_run() {
    let doc = linux_futex();
    let view = mtex::linux::report::LinuxView::of(&doc).expect("a Linux document");
    assert_eq!(view.windows.len(), 1, "one window");
    let form = |doc: &Results, f| mtex::output::render(doc, f, || Ok(Vec::new()), None);
    let text = form(&doc, mtex::output::Form::Text).expect("text");
    assert_width(&text);
    insta::assert_snapshot!("linux_text", text);
    let full = mtex::output::full(&doc);
    insta::assert_snapshot!("linux_full", full);
    insta::assert_snapshot!("linux_csv", csv::render(&doc));
    let json = serde_json::to_string_pretty(&doc).expect("JSON");
    insta::assert_snapshot!("linux_report_json", json);
    let back = Results::from_json(&json).expect("report.json read back");
    assert_eq!(back, doc);
    assert_eq!(mtex::output::full(&back), full);
}

/// A Linux run's results directory as `mtex linux` writes it: every link of its page names a
/// file that is there, and the page holds every section of the text report.
#[test]
fn a_linux_runs_page_links_only_what_its_directory_has() {
    let doc = linux_futex();
    let dir = std::env::temp_dir().join(format!("mtex-linux-page-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    mtex::scenario::run::write_outputs(&doc, &dir).expect("writing the results");
    std::fs::write(dir.join(doc.runs[0].log_file().unwrap()), "log").unwrap();
    let page = std::fs::read_to_string(dir.join("index.html")).unwrap();
    let links: Vec<&str> = page
        .split("href=\"")
        .skip(1)
        .map(|s| s.split('"').next().unwrap())
        .collect();
    for f in ["report.json", "report.csv", "report.txt", "linux-1.log"] {
        assert!(links.contains(&f), "no link to {f}: {links:?}");
    }
    for l in &links {
        assert!(dir.join(l).is_file(), "{l} is linked and not there");
    }
    let view = mtex::linux::report::LinuxView::of(&doc).unwrap();
    for l in mtex::linux::report::render(&view)
        .lines()
        .filter(|l| !l.trim().is_empty())
    {
        let escaped = l
            .replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;");
        assert!(page.contains(&escaped), "the page lacks {l:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
