//! The checks of runs that boot kernels and of their expectations.

use super::*;

const GOOD: &str = r#"
version = 1
[kernels]
a = "6.12"
b = { kasan = "sync" }
[[run]]
name = "ab"
kernels = ["a", "b"]
workloads = ["getpid 1000", "fork"]
tcf0 = ["none", "sync"]
[[expect]]
workload = "fork"
tcf0 = "sync"
counter = "granules_tagged"
from = "a"
to = "b"
fewer_by_at_least = 10
[[expect]]
counter = "tfsr_reads"
kernel = "b"
at_most = 0
"#;

#[test]
fn a_scenario_reads_with_its_windows_in_order() {
    let s = parse_in("t.toml", "t", GOOD, Path::new("/x")).unwrap();
    assert_eq!(s.name, "t");
    let r = s.runs[0].kernels().unwrap();
    assert_eq!(r.window("getpid 1000", "none"), Some(1));
    assert_eq!(r.window("fork", "sync"), Some(4));
    assert_eq!(
        r.line(),
        "mtex-work --tcf0 none --window 1 getpid 1000 && \
         mtex-work --tcf0 sync --window 2 getpid 1000 && \
         mtex-work --tcf0 none --window 3 fork 20 && \
         mtex-work --tcf0 sync --window 4 fork 20"
    );
    assert_eq!(s.expectations[0].rule, Rule::FewerByAtLeast(10));
    assert_eq!(
        (&s.expectations[1].from.of, &s.expectations[1].to.of),
        (&"b".into(), &"b".into())
    );
    assert_eq!(s.expectations[1].workload, "getpid 1000");
    assert!(
        matches!(s.kernels["b"], KernelSpec::Build(ref a) if a.kasan.as_deref() == Some("sync")
            && !a.debian_config)
    );
    let debian = GOOD.replace("kasan = \"sync\"", "debian_config = true");
    let s = parse_in("t.toml", "t", &debian, Path::new("/x")).unwrap();
    assert!(matches!(s.kernels["b"], KernelSpec::Build(ref a) if a.debian_config));
}

/// Each text is refused with an error that says `want`.
fn assert_refused(cases: &[(String, &str)]) {
    for (text, want) in cases {
        let e = format!(
            "{:#}",
            parse_in("t.toml", "t", text, Path::new("/x")).unwrap_err()
        );
        assert!(e.contains(want), "{e}\n  wanted {want}");
    }
}

#[test]
fn mistakes_are_named_with_their_line_before_anything_runs() {
    let cases = [
        (
            GOOD.replace("kernels = [\"a\", \"b\"]", "kernels = [\"a\", \"c\"]"),
            "t.toml:8: run[0].kernels: \"c\" is not in [kernels]",
        ),
        (
            GOOD.replace("counter = \"tfsr_reads\"", "counter = \"tfsr\""),
            "expect[1].counter: \"tfsr\"",
        ),
        (
            GOOD.replace("at_most = 0", "at_most = 0\nat_least = 1"),
            "expect[1]: give exactly one rule",
        ),
        (
            GOOD.replace("kernel = \"b\"", "from = \"b\"\nto = \"a\""),
            "at_least and at_most judge one kernel",
        ),
        (
            GOOD.replace("\"fork\"]", "\"fork; rm\"]"),
            "run[0].workloads: \"fork; rm\"",
        ),
        (
            GOOD.replace("kasan = \"sync\"", "kasan = \"fast\""),
            "kernels.b.kasan: \"fast\"",
        ),
        (
            GOOD.replace("a = \"6.12\"", "a = \"6.12; x\""),
            "kernels.a: ",
        ),
        (
            GOOD.replace("tcf0 = \"sync\"", "tcf0 = \"asymm\""),
            "expect[0].tcf0: \"asymm\" is not among ab's modes",
        ),
    ];
    assert_refused(&cases);
}

/// Each value that would pass vacuously, never hold, or run without end is refused by the
/// check of the whole file, and every error names the file and the field.
#[test]
fn bounds_and_types_are_checked_naming_the_field() {
    let many: Vec<String> = (0..10_000)
        .map(|i| format!("\"getpid {}\"", i + 1))
        .collect();
    let cases = [
        (
            GOOD.replace("fewer_by_at_least = 10", "drop_at_least = -inf"),
            "t.toml:17: expect[0].drop_at_least: -inf: expected 0 to 100000 (per cent)",
        ),
        (
            GOOD.replace("fewer_by_at_least = 10", "rise_at_most = inf"),
            "t.toml:17: expect[0].rise_at_most: inf: expected 0 to 100000",
        ),
        (
            GOOD.replace("fewer_by_at_least = 10", "drop_at_least = nan"),
            "expect[0].drop_at_least: NaN: expected 0 to 100000",
        ),
        (
            GOOD.replace(
                "\"getpid 1000\"",
                "\"getpid 10000000000000000000000000000\"",
            ),
            "t.toml:9: run[0].workloads: \"getpid 10000000000000000000000000000\": \
             10000000000000000000000000000: a workload's numbers are whole numbers, 1 to \
             10000000",
        ),
        (
            GOOD.replace("\"getpid 1000\"", "\"getpid 0\""),
            "1 to 10000000",
        ),
        (
            GOOD.replace("\"getpid 1000\"", "\"getpid 1 2\""),
            "\"getpid 1 2\": getpid takes 1 number (default 1000)",
        ),
        (
            GOOD.replace("\"getpid 1000\", \"fork\"", &many.join(", ")),
            "t.toml:9: run[0].workloads: 10000 workloads: 1 to 32",
        ),
        (
            GOOD.replace("\"fork\"]", "\"getpid 1000\"]"),
            "run[0].workloads: \"getpid 1000\" twice",
        ),
        (
            GOOD.replace("a = \"6.12\"", "stock = 612"),
            "t.toml:4: kernels.stock: invalid type: integer `612`, expected a string (what \
             `mtex linux --kernel` takes) or a table",
        ),
        (
            GOOD.replace("kasan = \"sync\"", "kasan = \"sync\", patchs = []"),
            "t.toml:5: kernels.b: unknown field `patchs`, expected one of",
        ),
        (
            GOOD.replace("tcf0 = [\"none\", \"sync\"]", "repeat = -1"),
            "t.toml:10: run[0].repeat: invalid value: integer `-1`, expected u32; \
             run[0].repeat takes a whole number, 1 to 100 (1 to 20 in a run that boots kernels)",
        ),
        (
            GOOD.replace("[[expect]]\nworkload", "[[expect]]\npatchs = 1\nworkload"),
            "t.toml:12: expect[0].patchs: unknown field `patchs`",
        ),
    ];
    assert_refused(&cases);
}

#[test]
fn the_patch_scenarios_are_within_every_bound() {
    for name in ["kernel-patches", "cover-letter"] {
        let file = crate::images::workspace_root().join(format!("scripts/scenarios/{name}.toml"));
        let s = load(&file).unwrap();
        assert!(!s.runs.is_empty() && !s.expectations.is_empty(), "{name}");
    }
}

#[test]
fn rules_judge_what_they_say() {
    let mut e = parse_in("t.toml", "t", GOOD, Path::new("/x"))
        .unwrap()
        .expectations[0]
        .clone();
    assert!(e.judge(100.0, 90.0).0);
    assert!(!e.judge(100.0, 91.0).0);
    e.rule = Rule::DropAtLeast(95.0);
    assert!(e.judge(68168.0, 800.0).0);
    assert!(!e.judge(800.0, 800.0).0);
    e.rule = Rule::AtMost(0);
    assert!(e.judge(0.0, 0.0).0 && !e.judge(1.0, 1.0).0);
}

/// `[[linux]]` and an expectation's `linux =`, as older files wrote them, read as `[[run]]`
/// and `run =`, and errors name the tables as the file spells them.
#[test]
fn the_older_spelling_reads_the_same() {
    let old = GOOD.replace("[[run]]", "[[linux]]").replace(
        "[[expect]]\nworkload",
        "[[expect]]\nlinux = \"ab\"\nworkload",
    );
    let a = parse_in("t.toml", "t", GOOD, Path::new("/x")).unwrap();
    let b = parse_in("t.toml", "t", &old, Path::new("/x")).unwrap();
    assert_eq!(a, b);
    let bad = old.replace("kernels = [\"a\", \"b\"]", "kernels = [\"a\", \"c\"]");
    assert_refused(&[(bad, "t.toml:8: linux[0].kernels: \"c\" is not in [kernels]")]);
}

/// A run of each kind in one file, a built-in guest's key in a kernel run, a kernel run's in a
/// built-in one, a policy where a kernel is meant: each refused naming the field.
#[test]
fn the_two_kinds_of_run_keep_their_own_keys() {
    let guest_run = "\n[[run]]\nname = \"g\"\nworkloads = [\"getpid\"]\n";
    assert_refused(&[
        (
            format!("{GOOD}{guest_run}"),
            "run[1]: this run boots the built-in guest and run[0] boots kernels",
        ),
        (
            GOOD.replace("tcf0 = [\"none\", \"sync\"]", "hz = 250"),
            "t.toml:10: run[0].hz: a run that boots kernels takes name, kernels, cpus, workloads",
        ),
        (
            GOOD.replace("kernel = \"b\"", "policy = \"b\""),
            "expect[1].policy: run \"ab\" has no policys: name its side with kernel",
        ),
        (
            GOOD.replace(
                "[[run]]\nname = \"ab\"\nkernels = [\"a\", \"b\"]\n",
                "[[run]]\nname = \"ab\"\n",
            ),
            "t.toml:3: kernels: no run boots them",
        ),
        (
            "version = 1\n[[run]]\nkernels = [\"a\"]\nworkloads = [\"getpid\"]\n".into(),
            "run[0].kernels: the file has no [kernels] table",
        ),
        (
            "version = 1\n[[run]]\nappend = [\"quiet\"]\n".into(),
            "run[0].append: this key is for a run that boots kernels",
        ),
        (
            "version = 1\n[[run]]\npackages = [\"hello\"]\n".into(),
            "run[0].packages: this key is for a run that boots kernels",
        ),
        (
            "version = 1\n[[run]]\ntcf0 = [\"sync\"]\n".into(),
            "run[0].tcf0: a string: none, sync, async or asymm (a list is for a run that boots kernels)",
        ),
    ]);
    // One mode may be written as a string in a kernel run too.
    let one = GOOD
        .replace("tcf0 = [\"none\", \"sync\"]", "tcf0 = \"async\"")
        .replace("tcf0 = \"sync\"\ncounter", "tcf0 = \"async\"\ncounter");
    let s = parse_in("t.toml", "t", &one, Path::new("/x")).unwrap();
    assert_eq!(s.runs[0].kernels().unwrap().tcf0, ["async"]);
}

/// A kernel's boots are the run `RUN-KERNEL` of report.json: a name that another run's
/// boots would take too is refused.
#[test]
fn a_kernels_results_name_is_unique() {
    let clash = GOOD.replace(
        "[[expect]]\nworkload",
        "[[run]]\nname = \"ab-a\"\nkernels = [\"b\"]\nworkloads = [\"fork\"]\n[[expect]]\nworkload",
    );
    assert_refused(&[(clash, "run[1].name: \"ab-a\": another run has this name")]);
}

/// Every rule serves a built-in run too: an absolute one names its side with `policy`.
#[test]
fn a_built_in_run_takes_every_rule() {
    let text = "version = 1\n[[run]]\nname = \"m\"\npolicies = [\"entry-tco\", \"tcma1\"]\n\
                workloads = [\"getpid\"]\n[[expect]]\ncounter = \"tco_writes\"\n\
                workload = \"getpid\"\npolicy = \"tcma1\"\nat_most = 0\n[[expect]]\n\
                counter = \"dsb\"\nworkload = \"getpid\"\nfrom = \"entry-tco\"\nto = \"tcma1\"\n\
                fewer_by_at_least = 0\n";
    let s = parse_in("t.toml", "t", text, Path::new("/x")).unwrap();
    assert_eq!(s.expectations[0].rule, Rule::AtMost(0));
    assert_eq!(
        s.expectations[0].text(),
        "tco_writes of getpid is at most 0 under m/tcma1"
    );
    assert_eq!(s.expectations[1].rule, Rule::FewerByAtLeast(0));
    assert_refused(&[
        (
            text.replace("policy = \"tcma1\"", "kernel = \"tcma1\""),
            "expect[0].kernel: run \"m\" has no kernels: name its side with policy",
        ),
        (
            text.replace("policy = \"tcma1\"", "policy = \"kasan-sync\""),
            "expect[0].policy: run \"m\" has no phase of getpid under \"kasan-sync\"",
        ),
        (
            text.replace("policy = \"tcma1\"", "from = \"tcma1\"\nto = \"entry-tco\""),
            "at_least and at_most judge one policy: give policy, not from and to",
        ),
    ]);
}

const COMMANDS: &str = r#"
version = 1
[kernels]
a = "6.12"
b = "7.3"
[[run]]
name = "their-programs"
kernels = ["a", "b"]
workloads = ["getpid 10"]
commands = ["perf bench futex hash -r 1", "hello"]
packages = ["linux-perf", "hello"]
suite = "trixie"
env = ["MALLOC_ARENA_MAX=1"]
tagged_heap = "sync"
setup = ["memcached -u root -d"]
sample = "20000:1000"
sample_seed = 7
[[expect]]
workload = "perf bench futex hash -r 1"
counter = "mem_access_checked_rd:k"
from = "a"
to = "b"
drop_at_least = 90
"#;

#[test]
fn a_run_of_commands_measures_each_in_a_window_after_the_workloads() {
    let s = parse_in("t.toml", "t", COMMANDS, Path::new("/x")).unwrap();
    let r = s.runs[0].kernels().unwrap();
    assert_eq!(r.window("getpid 10", "sync"), Some(1));
    assert_eq!(r.window("perf bench futex hash -r 1", "none"), Some(2));
    assert_eq!(r.window("hello", "sync"), Some(3));
    assert_eq!(
        r.line(),
        "mtex-work --tcf0 sync --window 1 getpid 10 && \
         mtex-work --window 2 exec perf bench futex hash -r 1 && \
         mtex-work --window 3 exec hello"
    );
    assert_eq!(r.setup, ["memcached -u root -d"]);
    assert_eq!(r.packages, ["linux-perf", "hello"]);
    assert_eq!(r.suite.as_deref(), Some("trixie"));
    assert_eq!(r.env, ["MALLOC_ARENA_MAX=1"]);
    assert_eq!(
        r.tagged_heap,
        Some(crate::linux::tagged_heap::TaggedHeap::Sync)
    );
    assert_eq!(
        (r.sample.as_deref(), r.sample_seed),
        (Some("20000:1000"), Some(7))
    );
    // An expectation on a command is judged in its window, with no mode of the run's.
    let e = &s.expectations[0];
    assert_eq!((e.from.window, e.to.window), (Some(2), Some(2)));
    assert_eq!(e.tcf0, None);
    assert!(
        e.text().contains("of perf bench futex hash -r 1 drops"),
        "{}",
        e.text()
    );
    // Commands alone are a run.
    let alone = COMMANDS.replace("workloads = [\"getpid 10\"]\n", "");
    let s = parse_in("t.toml", "t", &alone, Path::new("/x")).unwrap();
    assert_eq!(s.expectations[0].from.window, Some(1));
}

#[test]
fn a_run_of_commands_is_refused_what_it_cannot_mean() {
    assert_refused(&[
        (
            COMMANDS.replace("tagged_heap = \"sync\"", "tagged_heap = \"asymm\""),
            "run[0].tagged_heap: \"asymm\": sync or async",
        ),
        (
            COMMANDS.replace("packages = [\"linux-perf\", \"hello\"]\n", ""),
            "run[0].suite: a suite is for the run's packages",
        ),
        (
            COMMANDS.replace("\"linux-perf\"", "\"Linux Perf\""),
            "run[0].packages:",
        ),
        (
            COMMANDS.replace("\"hello\"]\npackages", "\"perf bench futex hash -r 1\"]\npackages"),
            "run[0].commands: \"perf bench futex hash -r 1\" twice",
        ),
        (
            COMMANDS.replace("\"hello\"]\npackages", "\"getpid 10\"]\npackages"),
            "run[0].commands: \"getpid 10\" is also a workload",
        ),
        (
            COMMANDS.replace("MALLOC_ARENA_MAX=1", "GLIBC_TUNABLES=glibc.mem.tagging=1"),
            "both set glibc.mem.tagging",
        ),
        (
            COMMANDS.replace("env = [\"MALLOC_ARENA_MAX=1\"]", "env = [\"no value\"]"),
            "run[0].env:",
        ),
        (
            COMMANDS.replace("[\"memcached -u root -d\"]", "[\"\"]"),
            "run[0].setup: \"\": a command of one line",
        ),
        (
            COMMANDS.replace("sample = \"20000:1000\"\n", ""),
            "run[0].sample_seed: a seed is for a sampled run",
        ),
        (
            COMMANDS.replace("sample = \"20000:1000\"", "sample = \"lots\""),
            "run[0].sample:",
        ),
        (
            COMMANDS.replace("from = \"a\"", "tcf0 = \"sync\"\nfrom = \"a\""),
            "expect[0].tcf0: \"perf bench futex hash -r 1\" is a command",
        ),
        (
            COMMANDS.replace("workload = \"perf bench futex hash -r 1\"", "workload = \"ls\""),
            "\"ls\" is not among their-programs's workloads or commands",
        ),
        (
            COMMANDS.replace("workloads = [\"getpid 10\"]\ncommands = [\"perf bench futex hash -r 1\", \"hello\"]\n", ""),
            "a run that boots kernels names its workloads, or its commands",
        ),
    ]);
}

const CPUS: &str = r#"
version = 1
[kernels]
a = "6.12"
b = "7.3"
[[run]]
name = "futex"
kernels = ["a", "b"]
cpus = [1, 2, 4]
workloads = ["futex-hash 200 {cpus}"]
commands = ["perf bench futex hash -r 1 -t {cpus}"]
setup = ["echo {cpus}"]
[[expect]]
from_run = "futex-1cpu"
to_run = "futex-4cpu"
workload = "perf bench futex hash -r 1 -t {cpus}"
counter = "mem_access_checked_rd:k"
from = "b"
to = "b"
rise_at_most = 10
per_operation = true
"#;

#[test]
fn a_run_of_several_cpu_counts_is_a_run_for_each_with_its_count_written_in() {
    let s = parse_in("t.toml", "t", CPUS, Path::new("/x")).unwrap();
    let names: Vec<&str> = s.runs.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["futex-1cpu", "futex-2cpu", "futex-4cpu"]);
    let r = s.runs[2].kernels().unwrap();
    assert_eq!((r.cpus, r.series.as_deref()), (Some(4), Some("futex")));
    assert_eq!(r.workloads, ["futex-hash 200 4"]);
    assert_eq!(r.commands, ["perf bench futex hash -r 1 -t 4"]);
    assert_eq!(r.setup, ["echo 4"]);
    assert_eq!(
        r.written(),
        [
            "futex-hash 200 {cpus}, TCF0 sync",
            "perf bench futex hash -r 1 -t {cpus}"
        ]
    );
    assert_eq!(s.runs[2].result_name(Some("a")), "futex-4cpu-a");
    // Each side's command is its own run's, its count written in.
    let e = &s.expectations[0];
    assert!(e.per_operation);
    assert_eq!((e.from.window, e.to.window), (Some(2), Some(2)));
    assert_eq!(
        (e.from.results_run.as_str(), e.to.results_run.as_str()),
        ("futex-1cpu-b", "futex-4cpu-b")
    );
    assert!(e.text().contains("per operation"), "{}", e.text());
    // One count is the run's own: no suffix, and no series.
    let one = CPUS
        .replace("cpus = [1, 2, 4]", "cpus = 2")
        .replace("futex-1cpu", "futex")
        .replace("futex-4cpu", "futex");
    let s = parse_in("t.toml", "t", &one, Path::new("/x")).unwrap();
    assert_eq!(s.runs.len(), 1);
    let r = s.runs[0].kernels().unwrap();
    assert_eq!((r.cpus, r.series.as_deref()), (Some(2), None));
    assert_eq!(r.workloads, ["futex-hash 200 2"]);
}

#[test]
fn cpu_counts_and_their_placeholder_are_checked() {
    let cases: Vec<(String, &str)> = vec![
        (
            CPUS.replace("cpus = [1, 2, 4]", "cpus = [1, 9]"),
            "run[0].cpus: 9: expected 1 to 8 CPUs",
        ),
        (
            CPUS.replace("cpus = [1, 2, 4]", "cpus = [2, 2]"),
            "run[0].cpus: 2 twice",
        ),
        (
            CPUS.replace("cpus = [1, 2, 4]", "cpus = []"),
            "run[0].cpus: an empty list",
        ),
        (
            CPUS.replace("cpus = [1, 2, 4]", "cpus = \"4\""),
            "run[0].cpus: \"4\": a whole number, 1 to 8",
        ),
        (
            CPUS.replace("cpus = [1, 2, 4]\n", ""),
            "{cpus} is the run's CPU count, and it gives none",
        ),
        (
            CPUS.replace("from_run = \"futex-1cpu\"", "from_run = \"futex\""),
            "no run named \"futex\"",
        ),
    ];
    assert_refused(&cases);
    // The built-in guest boots one count.
    let guest = "version = 1\n[[run]]\ncpus = [1, 2]\nhz = 0\nbackend = \"trace\"\n";
    let e = parse_in("g.toml", "g", guest, Path::new("/x"))
        .unwrap_err()
        .0;
    assert!(e.contains("a list is for a run that boots kernels"), "{e}");
    let per_op = "version = 1\n[[run]]\nworkloads = [\"getpid\"]\n[[expect]]\ncounter = \"dsb\"\n\
                  workload = \"getpid\"\npolicy = \"tcma1\"\nat_most = 1\nper_operation = true\n";
    let e = parse_in("g.toml", "g", per_op, Path::new("/x"))
        .unwrap_err()
        .0;
    assert!(e.contains("expect[0].per_operation"), "{e}");
}
