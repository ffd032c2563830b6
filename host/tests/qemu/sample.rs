//! Sampled phases (`mtex.sample`): the estimates against the exact counts of the same work,
//! known from the workload's arithmetic and from tracing it whole. Without the kernel's tick
//! (`mtex.hz=0`) the work is the same instructions in every run, traced or not.

use mtex::model::report::{self, Phase, Report};
use mtex::model::sample::Estimate;
use mtex::qemu::{self, RunConfig};
use std::time::Duration;

use mtex::images::built as images;

const ITERS: u64 = 4096;

fn run(opts: &str) -> Report {
    let cmdline = format!(
        "mtex.guest=kernel mtex.watchdog_ms=600000 mtex.hz=0 mtex.trace=only \
         mtex.policies=entry-tco mtex.workloads=futex-hash:iters={ITERS} {opts}"
    );
    let cfg = RunConfig {
        cmdline,
        timeout: Duration::from_secs(300),
        ..RunConfig::default()
    };
    let console = qemu::run(images(), &cfg).expect("running QEMU");
    assert!(!console.timed_out, "host time limit hit:\n{}", console.text);
    let r = report::parse(&console.text);
    assert!(r.succeeded(), "{}", mtex::output::matrix::text(&r));
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    assert_eq!(r.phases.len(), 1);
    r
}

fn estimates(p: &Phase) -> Vec<(&'static str, Estimate)> {
    report::sampled::estimates(p, true)
        .into_iter()
        .map(|(c, e)| (c.name, e))
        .collect()
}

fn get(es: &[(&'static str, Estimate)], name: &str) -> Estimate {
    es.iter()
        .find(|(n, _)| *n == name)
        .unwrap_or_else(|| panic!("no estimate of {name}"))
        .1
}

#[test]
fn a_sampled_phase_s_intervals_hold_the_exact_counts() {
    let exact = run("");
    let t = exact.phases[0].trace.expect("traced whole");
    // futex-hash's user loop: two checked reads and one checked write per iteration.
    assert_eq!(
        (t.architectural.rd_u, t.architectural.wr_u),
        (2 * ITERS, ITERS)
    );

    let sampled = run("mtex.sample=500:5 mtex.sample_seed=3");
    let p = &sampled.phases[0];
    assert!(
        p.trace.is_none(),
        "nothing exact is claimed for a sampled phase"
    );
    let how = p
        .sampled
        .as_ref()
        .and_then(|s| s.how)
        .expect("its schedule");
    assert!(!how.whole);
    assert!(how.units >= 100, "{} units", how.units);
    let es = estimates(p);
    // The instructions are the PMU's exact totals, whatever the units saw.
    let n = get(&es, "instructions:k");
    assert_eq!(n.value, t.instructions_el1 as f64, "EL1 instructions");
    assert_eq!(
        get(&es, "instructions:u").value,
        t.instructions_el0 as f64,
        "EL0 instructions"
    );
    for (name, want) in [
        ("mem_access_checked_rd:u", t.architectural.rd_u),
        ("mem_access_checked_wr:u", t.architectural.wr_u),
        ("mem_access_checked_rd:k", t.architectural.rd_k),
        ("mem_access_checked_wr:k", t.architectural.wr_k),
        ("mem_access_rd:k", t.accesses.rd_k),
    ] {
        let e = get(&es, name);
        assert!(!e.exact && e.half_width > 0.0, "{name}: {e}");
        // Three half-widths of a 95% interval: a miss is a broken estimator, not chance.
        assert!(
            (e.value - want as f64).abs() <= 3.0 * e.half_width,
            "{name}: {e} against the exact {want}"
        );
    }
}

#[test]
fn a_phase_sampled_whole_is_its_exact_count() {
    let exact = run("");
    let t = exact.phases[0].trace.expect("traced whole");
    let whole = run("mtex.sample=700:0");
    let p = &whole.phases[0];
    let how = p
        .sampled
        .as_ref()
        .and_then(|s| s.how)
        .expect("its schedule");
    assert!(how.whole);
    // Units of 700 back to back from the phase's begin: as many as its instructions need.
    let all = t.instructions_el0 + t.instructions_el1;
    assert_eq!(how.units as u64, all.div_ceil(700), "{all} instructions");
    let es = estimates(p);
    assert!(!es.is_empty());
    for (c, v) in mtex_abi::counters::of_trace(&t) {
        let e = get(&es, c.name);
        assert!(e.exact, "{}: {e}", c.name);
        assert_eq!(e.value, v as f64, "{}", c.name);
    }
}

#[test]
fn check_exact_puts_each_estimate_beside_the_whole_trace() {
    let out_dir = std::env::temp_dir().join(format!("mtex-check-exact-{}", std::process::id()));
    let run = |extra: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_mtex"))
            .args(["run", "--guest", "kernel", "--opt", "hz=0"])
            .args(["--opt", "policies=entry-tco"])
            .args(["--opt", &format!("workloads=futex-hash:iters={ITERS}")])
            .args(extra)
            .arg("--check-exact")
            .arg("--out")
            .arg(&out_dir)
            .output()
            .expect("running mtex run")
    };
    // Nothing sampled: refused before anything boots.
    let refused = run(&[]);
    assert_ne!(refused.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("are about sampled phases"));
    let out = run(&["--opt", "sample=1000:5", "--precision", "50%"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    // The workload's arithmetic is the exact column: two checked reads a loop at EL0.
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("mem_access_checked_rd:u"))
        .unwrap_or_else(|| panic!("no rd:u line:\n{text}"));
    let exact = format!("{}", 2 * ITERS);
    let exact = format!(
        "{},{}",
        &exact[..exact.len() - 3],
        &exact[exact.len() - 3..]
    );
    assert!(line.contains(&exact), "{line}");
    assert!(text.contains("intervals hold the exact count"), "{text}");
    // Two hundred units of a steady loop are far better than ± 50%.
    assert!(text.contains("reached (asked: ± 50.0%)"), "{text}");
    let _ = std::fs::remove_dir_all(&out_dir);
}

#[test]
fn a_guest_that_acts_otherwise_traced_gets_estimates_of_its_traced_behaviour_said_so() {
    // hostile-sample makes a second tagged load only when an exclusive store succeeds, as it
    // does untraced and not stepped: its units see fewer loads than its untraced run makes.
    let cfg = RunConfig {
        cmdline: "mtex.guest=hostile-sample mtex.sample=50:1".into(),
        timeout: Duration::from_secs(300),
        ..RunConfig::default()
    };
    let console = qemu::run(images(), &cfg).expect("running QEMU");
    let r = report::parse(&console.text);
    assert!(r.succeeded(), "{}", mtex::output::matrix::text(&r));
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    let p = &r.phases[0];
    assert!(p.trace.is_none(), "nothing exact is claimed");
    let units = p.sampled.as_ref().map_or(0, |s| s.units().count());
    assert!(units >= 30, "{units} units");
    assert!(
        r.notes
            .iter()
            .any(|n| n.contains("store-exclusives failed in its sampled units")),
        "{:?}",
        r.notes
    );
    // Every estimate of what ran (EL1: no instruction ran at EL0, an exact 0) is an estimate,
    // and none is among the exact counters.
    let doc = mtex::model::results::Results::single(&r);
    let out = &doc.runs[0].phases[0];
    let kernel: Vec<_> = out
        .estimates
        .iter()
        .filter(|(n, _)| n.ends_with(":k"))
        .collect();
    assert!(!kernel.is_empty());
    assert!(kernel.iter().all(|(_, e)| !e.exact), "{kernel:?}");
    assert!(!out.counters.contains_key("mem_access_checked_rd:k"));
    let text = mtex::output::matrix::text(&r);
    assert!(text.contains("was sampled: "), "{text}");
}

/// A Linux window sampled (`mtex linux --sample`): with Linux owning the GIC, the EL2 timer
/// reaches EL2 as an FIQ while the window is open; the units are traced exactly (the oracle,
/// QEMU's own count, agrees over all of them and their leads), and the intervals hold what the
/// workload's arithmetic says: futex-hash's N waits are N kernel entries from EL0 at least,
/// and, with the kernel's own accesses unchecked (TCMA1's view), exactly N checked kernel
/// reads, each wait's read of its futex word. Nothing of the window is shown as exact.
#[test]
fn a_linux_window_is_sampled_and_its_intervals_hold_the_workloads_arithmetic() {
    const N: f64 = 5000.0;
    let (status, doc, text) = super::linux::linux(&[
        "--workload",
        &format!("futex-hash {N} 1"),
        "--sample",
        // Dense against the window's short first and last stages (docs/sampling.md).
        "200:1",
        "--oracle",
    ]);
    assert_eq!(status, 0, "{text}");
    assert!(doc["windows"].as_array().unwrap().is_empty(), "{text}");
    let w = &doc["sampled_windows"][0];
    assert!(w["sampled"]["units"].as_u64().unwrap() >= 30, "{w}");
    assert!(w["oracle"].is_object(), "{w}");
    let estimate = |name: &str| -> (f64, f64) {
        let e = window_estimate(w, name);
        assert_eq!(e["exact"], false, "{name}: {e}");
        (
            e["value"].as_f64().unwrap(),
            e["half_width"].as_f64().unwrap(),
        )
    };
    let (v, h) = estimate("if_tcma1.mem_access_checked_rd:k");
    assert!(v - h <= N && N <= v + h, "{v} ± {h} against {N}");
    let (v, h) = estimate("kernel_entries.sync_el0");
    assert!(v + h >= N, "{v} ± {h} against at least {N}");
    assert!(text.contains("SAMPLED:"), "{text}");
    // The summary's table shows the window's estimates, never in the exact table.
    assert!(text.contains(" Sampled windows: estimates"), "{text}");
    assert!(
        text.lines()
            .any(|l| l.contains(" ±") && l.contains("window 1: mtex-work")),
        "{text}"
    );
}

/// A Linux window sampled on two CPUs: each CPU samples its own share on its own schedule
/// and timer, and its figures rest on its own instructions, which on QEMU the plugin counts
/// (QEMU's PMU counts every vCPU's). futex-hash's two threads are placed one on each CPU, so
/// the workload's arithmetic holds CPU by CPU whatever order QEMU runs the CPUs in: each
/// CPU's TCMA1 view has exactly N checked kernel reads (its thread's futex words), and the
/// window's, the two CPUs' estimates summed, 2N. A second window executes the hypervisor's
/// markers at EL0, its share markers among them, with ids of their own: the plugin must take
/// EL2's only (a share opened or closed by the guest is an anomaly, a problem, exit 1). In a
/// third, a CPU is taken off and then started again: it hands in its share as it goes (its
/// units and the plugin's count of its instructions end there), the CPU_ON is DENIED while
/// the window is open, and the window's estimate still covers both threads' waits, one of
/// which ran on the CPU that went off (the window holds the shell and the programs' starts
/// and output too, whose checked reads no arithmetic fixes: the waits are a floor).
#[test]
fn a_linux_window_sampled_on_two_cpus_holds_the_arithmetic_cpu_by_cpu() {
    const N: f64 = 3000.0;
    const MARKERS: u64 = 20_000;
    const OFF: f64 = 2000.0;
    let (status, doc, text) = super::linux::linux(&[
        "--cpus",
        "2",
        "--workload",
        &format!(
            "mtex-work --tcf0 sync --window 1 futex-hash {N} 2 \
             && mtex-work --window 2 fake-markers {MARKERS} \
             && mtex-work --window 3 exec sh -c 'mtex-work --tcf0 sync futex-hash {OFF} 2 \
             && echo 0 > /sys/devices/system/cpu/cpu1/online \
             && mtex-work getpid 2000; \
             echo 1 > /sys/devices/system/cpu/cpu1/online || echo refused'"
        ),
        "--sample",
        "200:1",
    ]);
    assert_eq!(status, 0, "{text}");
    let posing = &doc["sampled_windows"][1]["cpus"];
    let el0: u64 = (0..2)
        .map(|i| posing[i]["instructions"][0].as_u64().unwrap_or(0))
        .sum();
    assert!(el0 >= 4 * MARKERS, "the markers' window, counted: {posing}");
    let w = &doc["sampled_windows"][0];
    let holds = |e: &serde_json::Value, want: f64, what: &str| {
        assert_eq!(e["exact"], false, "{what}: {e}");
        let (v, h) = (
            e["value"].as_f64().unwrap(),
            e["half_width"].as_f64().unwrap(),
        );
        assert!(
            v - h <= want && want <= v + h,
            "{what}: {v} ± {h} against {want}"
        );
        v
    };
    let window = window_estimate(w, "if_tcma1.mem_access_checked_rd:k");
    let total = holds(&window, 2.0 * N, "the window");
    let cpus = w["cpus"].as_array().unwrap_or_else(|| panic!("{w}"));
    assert_eq!(cpus.len(), 2, "{w}");
    let mut sum = 0.0;
    for c in cpus {
        assert!(c["units"].as_u64().unwrap() >= 30, "{c}");
        assert_eq!(c["timer_stopped"], false, "{c}");
        let [el0, el1] = [0, 1].map(|i| c["instructions"][i].as_u64().unwrap());
        assert!(el0 > 0 && el1 > 0, "{c}");
        sum += holds(
            &c["estimates"]["if_tcma1.mem_access_checked_rd:k"],
            N,
            &format!("CPU {}", c["cpu"]),
        );
    }
    // Stratified by CPU: the window's estimate is its CPUs' summed.
    assert!((sum - total).abs() < 1e-6 * total, "{sum} against {total}");
    let units: u64 = cpus.iter().map(|c| c["units"].as_u64().unwrap()).sum();
    assert_eq!(w["sampled"]["units"].as_u64(), Some(units), "{w}");
    assert!(text.contains("by CPU"), "{text}");
    // The CPUs' guest clocks do not agree in a window sampled on several: a note says so (and
    // the window's length on them is not given).
    let notes: Vec<&str> = doc["notes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n.as_str())
        .collect();
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("window 1: sampled on several CPUs, whose guest clocks")),
        "{notes:#?}"
    );
    assert!(
        text.lines()
            .any(|l| l.ends_with("CPU 1") && l.contains(" ±")),
        "the summary's table has a row per CPU: {text}"
    );
    // The third window: CPU 1 started at boot, then off inside it, its CPU_ON refused there.
    let calls = doc["power_calls"].as_array().unwrap();
    let said: Vec<&str> = calls.iter().filter_map(|c| c["call"].as_str()).collect();
    assert_eq!(calls.len(), 3, "{said:#?}");
    assert!(said[1].starts_with("CPU 1: CPU_OFF"), "{said:#?}");
    assert!(
        said[2].contains("CPU_ON of 0x1") && said[2].contains("DENIED"),
        "{said:#?}"
    );
    let off = &doc["sampled_windows"][2];
    let cpus = off["cpus"].as_array().unwrap_or_else(|| panic!("{off}"));
    assert_eq!(cpus.len(), 2, "{off}");
    for c in cpus {
        assert!(c["units"].as_u64().unwrap() > 0, "{c}");
        assert!(c["instructions"][1].as_u64().unwrap() > 0, "{c}");
    }
    let e = window_estimate(off, "if_tcma1.mem_access_checked_rd:k");
    let (v, h) = (
        e["value"].as_f64().unwrap(),
        e["half_width"].as_f64().unwrap(),
    );
    // At least the waits' reads: CPU 1's share, lost, would leave about OFF.
    assert!(v + h >= 2.0 * OFF, "{v} ± {h}: {text}");
}

/// A guest that stops a CPU's sampling timer through the GIC Linux owns, in one boot on two
/// CPUs sampled at `1000:30`, of a kernel built by `mtex kernel build` (the patch scenario's
/// KASAN build, built before the QEMU tests): its /dev/mem reaches the GIC's frames, which
/// Debian's kernels keep from user space (STRICT_DEVMEM). In the first window CPU 1 disables
/// the hypervisor's timer interrupt in its own redistributor, then both CPUs run a loop of
/// some 10 million instructions each (20 ms of the machine's time: far past a unit's due
/// time): CPU 1's timer stopped, so it has no estimate, nor has the window (its units would
/// cover only part of it), and CPU 0 keeps its own. The second window is sampled as ever on
/// both CPUs: the hypervisor routes each CPU's timer again as it joins a window.
#[test]
fn a_cpu_that_masks_its_units_interrupt_leaves_no_partial_estimate() {
    const TURNS: u64 = 2_500_000;
    let built = std::process::Command::new(env!("CARGO_BIN_EXE_mtex"))
        .args(["kernel", "build", "--kasan", "sync"])
        .output()
        .expect("running mtex kernel build");
    let printed = String::from_utf8_lossy(&built.stdout);
    assert!(built.status.success(), "{printed}");
    let image = printed
        .lines()
        .find_map(|l| l.strip_prefix("mtex: Image"))
        .map(str::trim)
        .unwrap_or_else(|| panic!("no Image in {printed}"));
    let (status, doc, text) = super::linux::linux(&[
        "--kernel",
        image,
        "--cpus",
        "2",
        "--workload",
        &format!(
            "mtex-work --window 1 gic-mask 1 {TURNS} \
             && mtex-work --tcf0 sync --window 2 futex-hash 1000 2"
        ),
        "--sample",
        "1000:30",
    ]);
    // The stopped timer is a problem of the run.
    assert_eq!(status, 1, "{text}");
    let windows = doc["sampled_windows"].as_array().unwrap();
    assert_eq!(windows.len(), 2, "{text}");
    let cpu = |w: &serde_json::Value, i: u64| {
        w["cpus"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["cpu"] == i)
            .cloned()
            .unwrap_or_else(|| panic!("no CPU {i}: {w}"))
    };
    // Window 1: CPU 1's timer stopped, CPU 0's did not.
    let (c0, c1) = (cpu(&windows[0], 0), cpu(&windows[0], 1));
    assert_eq!(c1["timer_stopped"], true, "{c1}");
    assert_eq!(
        c1["estimates"].as_object().map(|e| e.len()),
        Some(0),
        "{c1}"
    );
    assert_eq!(c0["timer_stopped"], false, "{c0}");
    assert!(c0["units"].as_u64().unwrap() >= 100, "{c0}");
    let own = &c0["estimates"]["instructions:u"];
    assert!(
        own["half_width"].is_number(),
        "CPU 0 keeps its estimates: {c0}"
    );
    assert_eq!(
        windows[0]["estimates"].as_array().map(Vec::len),
        Some(0),
        "{text}"
    );
    // Window 2: sampled as ever on both CPUs.
    for i in 0..2 {
        let c = cpu(&windows[1], i);
        assert_eq!(c["timer_stopped"], false, "{c}");
        assert!(c["units"].as_u64().unwrap() > 0, "{c}");
    }
    assert!(
        !windows[1]["estimates"].as_array().unwrap().is_empty(),
        "{text}"
    );
    let problems: Vec<&str> = doc["problems"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p.as_str())
        .collect();
    assert_eq!(problems.len(), 1, "{problems:#?}");
    assert!(
        problems[0].contains("window 1") && problems[0].contains("CPU 1's sampling timer stopped"),
        "{problems:#?}"
    );
}

/// A sampled window's estimate of counter `name`, as report.json gives it.
fn window_estimate(w: &serde_json::Value, name: &str) -> serde_json::Value {
    w["estimates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e[0] == name)
        .map(|e| e[1].clone())
        .unwrap_or_else(|| panic!("no {name}: {w}"))
}

/// Assembles a loop body: `first` at the top of a turn, then 32 tagged loads and nops.
fn trapping_loop(first: &str) -> Vec<u8> {
    let mut body = format!("{first}\n");
    body += &"ldr x9, [x0]\n".repeat(32);
    body += &"nop\n".repeat(92);
    body += "ret\n";
    match mtex::cli::snippet::assemble_source(&body).expect("running the assembler") {
        Ok(code) => code,
        Err(e) => panic!("{body}\ndid not assemble: {e}"),
    }
}

/// `TURNS` turns of `code`, sampled in units of 500 instructions 2 µs apart.
fn sampled_loop(code: &[u8], seed: u64) -> Report {
    let env = mtex::cli::snippet::Env {
        iters: TURNS,
        ..mtex::cli::snippet::Env::default()
    };
    let extra = ["sample=500:2".to_string(), format!("sample_seed={seed}")];
    let (r, console) =
        mtex::cli::snippet::run_with(images(), code, &env, &extra).expect("running QEMU");
    assert!(!console.timed_out, "host time limit hit:\n{}", console.text);
    r
}

const TURNS: u64 = 4000;

/// A loop that traps to the hypervisor at every turn (a WFI; a reset of its PMU counters:
/// both trapped, both completed by the hypervisor) spends most of its counter time in EL2,
/// all of it just before the turn's first load. Units begun on counter time would begin there
/// far more often than anywhere else in the body, and miscount its loads; units begun on the
/// guest's own instructions begin anywhere alike. The estimate of its checked reads holds the
/// loop's arithmetic: 32 loads a turn.
#[test]
fn a_loop_that_traps_at_every_turn_is_sampled_evenly_over_its_body() {
    for first in [
        "wfi",
        "mrs x11, pmcr_el0\norr x11, x11, #2\nmsr pmcr_el0, x11",
    ] {
        let code = trapping_loop(first);
        for seed in [1, 2] {
            let r = sampled_loop(&code, seed);
            assert!(r.succeeded(), "{}", mtex::output::matrix::text(&r));
            assert!(r.problems.is_empty(), "{:?}", r.problems);
            let p = r
                .phase(mtex::cli::snippet::PHASE)
                .expect("the snippet's phase");
            let units = p.sampled.as_ref().map_or(0, |s| s.units().count());
            assert!(units >= 100, "{first}, seed {seed}: {units} units");
            let e = get(&estimates(p), "mem_access_checked_rd:k");
            let want = 32 * TURNS;
            assert!(
                (e.value - want as f64).abs() <= 2.0 * e.half_width,
                "{first}, seed {seed}: {e} against the exact {want}"
            );
        }
    }
}

/// QEMU counts the rest of a block of translated code as executed when an ID-register read
/// traps from it: the phase's instruction totals are too high, and a sampled phase that made
/// such reads outside its units gives no estimate and says why.
#[test]
fn id_register_reads_outside_the_units_withhold_the_estimates_on_qemu() {
    let r = sampled_loop(&trapping_loop("mrs x11, id_aa64pfr1_el1"), 1);
    let p = r
        .phase(mtex::cli::snippet::PHASE)
        .expect("the snippet's phase");
    assert!(
        estimates(p).is_empty(),
        "{}",
        mtex::output::matrix::text(&r)
    );
    assert!(
        r.problems
            .iter()
            .any(|m| m.contains("ID- or debug-register accesses trapped outside its units")),
        "{:?}",
        r.problems
    );
}
