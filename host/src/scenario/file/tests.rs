use super::*;

const GOOD: &str = r#"
version = 1
name = "t"

[[run]]
name = "a"
policies = ["entry-tco", "tcma1"]
workloads = ["getpid", "futex-hash:iters=8"]
repeat = 2

[[expect]]
counter = "mem_access_checked_rd:k"
workload = "futex-hash"
from = "entry-tco"
to = "tcma1"
drop_at_least = 90
"#;

/// The first run's built-in guest run.
fn first_guest(s: ScenarioFile) -> GuestRun {
    s.runs[0].guest().unwrap().clone()
}

fn err(text: &str) -> String {
    parse("s.toml", "s", text).unwrap_err().0
}

#[test]
fn a_good_file_becomes_runs_and_expectations() {
    let s = parse("s.toml", "s", GOOD).unwrap();
    assert_eq!(s.name, "t");
    assert_eq!(s.runs.len(), 1);
    assert_eq!(s.runs[0].repeat, 2);
    let r = s.runs[0].guest().unwrap();
    assert!(
        r.cmdline.contains("mtex.policies=entry-tco,tcma1"),
        "{}",
        r.cmdline
    );
    assert!(
        r.cmdline
            .contains("mtex.workloads=getpid,futex-hash:iters=8")
    );
    assert_eq!(r.phases.len(), 4);
    assert_eq!(s.expectations[0].rule, Rule::DropAtLeast(90.0));
    let (held, _) = s.expectations[0].judge(1272.0, 32.0);
    assert!(held);
    let (held, detail) = s.expectations[0].judge(100.0, 20.0);
    assert!(!held, "{detail}");
}

#[test]
fn backends_and_pmu_events_become_options() {
    let run = |extra: &str| {
        let text = format!("version = 1\n[[run]]\n{extra}\n");
        first_guest(parse("s.toml", "s", &text).unwrap())
    };
    assert!(!run("").cmdline.contains("mtex.trace="));
    let pmu = run("backend = \"pmu\"");
    assert!(pmu.cmdline.contains("mtex.trace=0") && !pmu.traced);
    assert!(
        run("backend = \"trace\"")
            .cmdline
            .contains("mtex.trace=only")
    );
    let events =
        run("pmu_events = [\"0x13\", \"cycles\"]\npmu_require = [\"mem_access_checked_wr\"]");
    assert!(
        events.cmdline.contains("mtex.pmu_events=0x13,0x11"),
        "{}",
        events.cmdline
    );
    assert!(
        events.cmdline.contains("mtex.pmu_require=0x4026"),
        "{}",
        events.cmdline
    );
}

#[test]
fn cpus_runs_the_kernel_on_several_cpus_with_what_that_needs() {
    let text = "version = 1\n[[run]]\ncpus = 4\nhz = 0\nbackend = \"trace\"\nworkloads = [\"futex-hash\"]\n";
    let r = first_guest(parse("s.toml", "s", text).unwrap());
    assert!(r.cmdline.contains("mtex.cpus=4"), "{}", r.cmdline);
    // The QEMU machine takes its CPUs from the same line.
    assert_eq!(Scenario::parse(&r.cmdline).unwrap().cpus, 4);
    for (text, want) in [
        ("cpus = 9\n", "s.toml:3: run[0].cpus: 9: expected 1 to 8"),
        ("cpus = 0\n", "run[0].cpus: 0: expected 1 to 8"),
        (
            "cpus = 2\nbackend = \"trace\"\n",
            "run[0].cpus: several CPUs run without the timer tick: add hz = 0",
        ),
        ("cpus = 2\nhz = 0\n", "add backend = \"trace\""),
        (
            "cpus = 2\nhz = 0\nbackend = \"trace\"\nworkloads = [\"thread-create\"]\n",
            "on several CPUs the workloads are",
        ),
    ] {
        let e = err(&format!("version = 1\n[[run]]\n{text}"));
        assert!(e.contains(want), "{text:?}: {e:?} lacks {want:?}");
    }
}

#[test]
fn sample_samples_the_traced_phases_and_its_mistakes_are_named() {
    let text = "version = 1\n[[run]]\nsample = \"1000:250\"\nsample_seed = 7\n";
    let r = first_guest(parse("s.toml", "s", text).unwrap());
    assert!(
        r.cmdline
            .contains("mtex.sample=1000:250 mtex.sample_seed=7"),
        "{}",
        r.cmdline
    );
    // The hypervisor reads the same line.
    let h = mtex_abi::options::HypOptions::parse(&r.cmdline).unwrap();
    assert_eq!(
        h.sample.map(|s| (s.unit, s.gap_us, s.seed)),
        Some((1000, 250, 7))
    );
    for (text, want) in [
        (
            "sample = \"1000\"\n",
            "s.toml:3: run[0].sample: expected UNIT:GAP_US",
        ),
        ("sample = \"0:5\"\n", "run[0].sample: expected UNIT:GAP_US"),
        (
            "sample = \"100:5\"\ncpus = 2\nhz = 0\nbackend = \"trace\"\n",
            "run[0].sample: sampling runs on one CPU",
        ),
        (
            "sample = \"100:5\"\nbackend = \"pmu\"\n",
            "this run has none",
        ),
        (
            "sample_seed = 3\n",
            "run[0].sample_seed: a seed for the random schedule",
        ),
    ] {
        let e = err(&format!("version = 1\n[[run]]\n{text}"));
        assert!(e.contains(want), "{text:?}: {e:?} lacks {want:?}");
    }
}

#[test]
fn every_error_names_file_line_and_field() {
    let cases: &[(&str, &str)] = &[
        // unknown key
        ("version = 1\n[[run]]\npolices = [\"tcma1\"]\n", "s.toml:3"),
        // wrong type
        ("version = 1\n[[run]]\nhz = \"fast\"\n", "s.toml:3"),
        // unknown policy
        (
            "version = 1\n[[run]]\npolicies = [\"kasan\"]\n",
            "s.toml:3: run[0].policies: \"kasan\"",
        ),
        // unknown workload
        (
            "version = 1\n[[run]]\nworkloads = [\"getpids\"]\n",
            "s.toml:3: run[0].workloads",
        ),
        // out of range, with the range
        (
            "version = 1\n[[run]]\nworkloads = [\"getpid:iters=0\"]\n",
            "between 1 and 100000",
        ),
        (
            "version = 1\n[[run]]\nhz = 200000\n",
            "s.toml:3: run[0].hz: 200000: expected a tick rate from 0",
        ),
        (
            "version = 1\n[[run]]\nrepeat = 0\n",
            "s.toml:3: run[0].repeat: 0: expected 1 to 100",
        ),
        // impossible combination
        (
            "version = 1\n[[run]]\npolicies = [\"entry-tco+uaccess-tco\"]\n",
            "exclude each other",
        ),
        (
            "version = 1\n[[run]]\nbackend = \"perf\"\n",
            "s.toml:3: run[0].backend",
        ),
        (
            "version = 1\n[[run]]\npmu_events = [\"0x1\", \"bogus\"]\n",
            "s.toml:3: run[0].pmu_events: \"bogus\"",
        ),
        (
            "version = 1\n[[run]]\npmu_require = [\"1\", \"2\", \"3\", \"4\"]\n",
            "s.toml:3: run[0].pmu_require: at most 3",
        ),
        // version
        (
            "version = 2\n[[run]]\n",
            "s.toml:1: version: this mtex reads version 1",
        ),
        ("[[run]]\n", "missing field `version`"),
        ("version = 1\n", "no [[run]]"),
    ];
    for (text, want) in cases {
        let e = err(text);
        assert!(e.contains(want), "{text:?}: {e:?} lacks {want:?}");
    }
}

#[test]
fn expectations_must_name_what_the_runs_have() {
    let bad_policy = GOOD.replace("to = \"tcma1\"", "to = \"kasan-sync\"");
    let e = err(&bad_policy);
    assert!(e.contains("expect[0].to") && e.contains("s.toml:15"), "{e}");
    let bad_run = GOOD.replace("drop_at_least = 90", "drop_at_least = 90\nrun = \"b\"");
    assert!(err(&bad_run).contains("no run named \"b\""));
    let two_rules = GOOD.replace("drop_at_least = 90", "drop_at_least = 90\nequal = true");
    assert!(err(&two_rules).contains("give exactly one rule"));
    let bad_counter = GOOD.replace("mem_access_checked_rd:k", "checked_reads");
    assert!(err(&bad_counter).contains("expect[0].counter"));
}

#[test]
fn run_names_are_unique_file_names_and_phases_unambiguous() {
    let two = format!("{GOOD}\n[[run]]\nname = \"a\"\n");
    assert!(
        err(&two).contains("run[1].name: \"a\": another run has this name"),
        "{}",
        err(&two)
    );
    // A default name clashing with a given one.
    let clash = GOOD.replace("name = \"a\"", "name = \"run-2\"") + "\n[[run]]\n";
    assert!(
        err(&clash).contains("another run has this name"),
        "{}",
        err(&clash)
    );
    let path = GOOD.replace("name = \"a\"", "name = \"../x\"");
    assert!(
        err(&path).contains("run[0].name: \"../x\": use letters"),
        "{}",
        err(&path)
    );
    let twice = GOOD.replace(
        "\"futex-hash:iters=8\"",
        "\"futex-hash:iters=8\", \"futex-hash:iters=64\"",
    );
    assert!(
        err(&twice).contains("has 2 phases of futex-hash"),
        "{}",
        err(&twice)
    );
}

#[test]
fn an_untraced_run_has_no_trace_counter_to_expect() {
    let untraced = GOOD.replace("repeat = 2", "repeat = 2\ntrace = false");
    let e = err(&untraced);
    assert!(
        e.contains("s.toml:13: expect[0].counter") && e.contains("trace = false"),
        "{e}"
    );
    let pmu = untraced.replace("\"mem_access_checked_rd:k\"", "\"pmu.instructions:k\"");
    let s = parse("s.toml", "s", &pmu).unwrap();
    let r = s.runs[0].guest().unwrap();
    assert!(!r.traced && r.cmdline.contains("mtex.trace=0"));
}

#[test]
fn counters_are_known_by_their_full_name() {
    for c in [
        "mem_access_checked_rd:k",
        "if_kernel_tco.mem_access_checked_wr:u",
        "mem_access_wr:k",
        "uaccess_checked_rd",
        "kernel_entries.irq_el1",
        "dsb",
        "engine.plans_made",
        "pmu.instructions:h",
        "pmu.mem_access_checked_rd:k",
        "untraced.cycles:u",
        "untraced.raw.0x0013:k",
        "untraced.tco_writes",
    ] {
        assert!(is_known_counter(c), "{c}");
    }
    for c in [
        "mem_access_checked_rd:x",
        "mem_access_checked_rd",
        "dsb_total",
        "engine.nothing",
        "pmu.bogus:k",
        "untraced.raw.0x13:k",
        "untraced.cycles",
        "",
    ] {
        assert!(!is_known_counter(c), "{c}");
    }
}

#[test]
fn a_scenario_name_is_a_plain_file_name() {
    let bad = GOOD.replace("name = \"t\"", "name = \"../../../tmp/x\"");
    assert!(
        err(&bad).contains("s.toml:3: name: \"../../../tmp/x\": use letters"),
        "{}",
        err(&bad)
    );
    assert_eq!(safe_stem("my scenario.v2"), "my_scenario_v2");
    assert_eq!(safe_stem(".."), "__");
    assert_eq!(safe_stem(""), "scenario");
}

#[test]
fn type_errors_name_the_field_in_its_table() {
    let text = "version = 1\n[[run]]\nname = \"a\"\n[[run]]\npolicies = [\n  1,\n]\n";
    let at = text.find("1,").unwrap();
    assert_eq!(
        field_at(text, at),
        Some((
            "run[1].policies".to_string(),
            "a list of strings, each policy tokens joined by +"
        ))
    );
    assert_eq!(field_at(text, 10).map(|f| f.0), Some("version".to_string()));
}

#[test]
fn the_shipped_scenarios_are_valid() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/scenarios");
    for f in ["default.toml", "quick.toml"] {
        load(&dir.join(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
    }
}
