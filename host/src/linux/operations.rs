//! The operations a measured program says it made, read from its own output, so that a
//! window's counts are also given per operation: memcaslap's (memaslap's) `Ops: N`, and `perf
//! bench futex hash`'s per-thread rates over a run of one second. A window around a whole
//! program holds its set-up and tear-down too: the figures per operation include them, and
//! say so.

use serde::{Deserialize, Serialize};

/// A program's own count of its operations.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Operations {
    pub count: u64,
    /// Where the count was read: the program and its line.
    pub source: String,
}

/// A window's operations: the count the user gave, or else the one its output reports.
pub fn of_window(output: &[String], given: Option<u64>) -> Option<Operations> {
    match given {
        Some(count) => Some(Operations {
            count,
            source: "given by --operations".into(),
        }),
        None => read(output),
    }
}

/// The operations a window's output reports, if a program it knows printed them. A count of
/// 0 is none: nothing can be given per operation.
pub fn read(output: &[String]) -> Option<Operations> {
    memaslap(output)
        .or_else(|| perf_futex(output))
        .or_else(|| mtex_work(output))
        .filter(|ops| ops.count > 0)
}

/// mtex-work's own result line of a workload whose operations it counts and checks:
/// `mtex-work: futex-hash ok: 2 threads x 200 FUTEX_WAIT, all EAGAIN` (every wait returned,
/// or the workload fails) and `mtex-work: getpid ok: 1000 calls, pid 80`.
fn mtex_work(output: &[String]) -> Option<Operations> {
    output.iter().rev().find_map(|l| {
        let l = l.trim_start();
        if let Some(rest) = l.strip_prefix("mtex-work: futex-hash ok: ") {
            let (threads, rest) = rest.split_once(" threads x ")?;
            let (waits, _) = rest.split_once(" FUTEX_WAIT, all EAGAIN")?;
            let (t, n): (u64, u64) = (threads.parse().ok()?, waits.parse().ok()?);
            return Some(Operations {
                count: t.checked_mul(n)?,
                source: format!("mtex-work's {t} threads x {n} FUTEX_WAITs"),
            });
        }
        let rest = l.strip_prefix("mtex-work: getpid ok: ")?;
        let count = rest.split_once(" calls")?.0.parse().ok()?;
        Some(Operations {
            count,
            source: format!("mtex-work's {count} getpid calls"),
        })
    })
}

/// memaslap's closing line, `Run time: 0.5s Ops: 11000 TPS: 22178 Net_rate: 2.5M/s`: the
/// operations (gets and sets) it completed, its warm-up not among them. With several
/// statistics dumps, the last line is the run's total.
fn memaslap(output: &[String]) -> Option<Operations> {
    let line = output
        .iter()
        .rev()
        .find(|l| l.trim_start().starts_with("Run time:") && l.contains(" Ops: "))?;
    let count = line
        .split_once(" Ops: ")?
        .1
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(Operations {
        count,
        source: format!("memcaslap's \"Ops: {count}\""),
    })
}

/// `perf bench futex hash`: each thread's `[ N ops/sec ]` is its operations divided by the
/// run's whole seconds (tools/perf/bench/futex-hash.c), so over a run of one second
/// (`total secs = 1`) their sum is the exact count; over a longer run it is not, and no count
/// is read. `-s` (silent) prints no per-thread line, and so gives none either.
fn perf_futex(output: &[String]) -> Option<Operations> {
    let secs: u64 = output.iter().find_map(|l| {
        let (_, rest) = l.split_once("operations/sec")?;
        rest.split_once("total secs =")?.1.trim().parse().ok()
    })?;
    if secs != 1 {
        return None;
    }
    // Every thread's line, or no count: a line that does not read would leave its thread out.
    let rates: Vec<u64> = output
        .iter()
        .filter(|l| l.trim_start().starts_with("[thread"))
        .map(|l| {
            let inner = l.rsplit_once('[')?.1.strip_suffix(']')?;
            inner.trim().strip_suffix("ops/sec")?.trim().parse().ok()
        })
        .collect::<Option<_>>()?;
    if rates.is_empty() {
        return None;
    }
    let count = rates.iter().sum();
    Some(Operations {
        count,
        source: format!(
            "perf bench's {} threads' ops/sec over its 1 s run",
            rates.len()
        ),
    })
}

/// `2,600.4`: a count per operation, to a tenth.
pub fn per_op(value: f64, ops: u64) -> String {
    crate::output::text::thousands_f64(value / ops.max(1) as f64, 1)
}

/// The checked-access counters given per operation, by their short names.
const SHORT: [&str; 4] = ["rd:k", "wr:k", "rd:u", "wr:u"];

/// Exact counts per operation: `rd:k 2,600.4, wr:k 962.2, ...`.
fn exact_figures(count: u64, get: impl Fn(&str) -> u64) -> String {
    SHORT
        .map(|short| format!("{short} {}", per_op(get(short) as f64, count)))
        .join(", ")
}

/// Estimates per operation, each divided by the exact operation count with its interval
/// (the same relative width): `rd:k 4,960.9 ± 4.2%, ...`.
fn sampled_figures(
    count: u64,
    get: impl Fn(&str) -> Option<crate::model::results::EstimateOut>,
) -> String {
    let each: Vec<String> = SHORT
        .iter()
        .filter_map(|short| {
            let e = get(short)?;
            let v = per_op(e.value, count);
            Some(match e.half_width {
                _ if e.exact => format!("{short} {v}"),
                Some(h) if e.value > 0.0 => format!(
                    "{short} {v} ± {}",
                    crate::model::sample::percent(h / e.value)
                ),
                _ if e.value == 0.0 => format!("{short} 0 seen"),
                _ => format!("{short} ~{v} (not estimable)"),
            })
        })
        .collect();
    each.join(", ")
}

/// The line of a window's exact counts per operation.
pub fn exact_line(ops: &Operations, counts: &mtex_trace::counts::ByEl) -> String {
    let figures = exact_figures(ops.count, |short| match short {
        "rd:k" => counts.rd_k,
        "wr:k" => counts.wr_k,
        "rd:u" => counts.rd_u,
        _ => counts.wr_u,
    });
    format!("{} checked accesses: {figures}\n", heading(ops))
}

/// The line of a sampled window's estimates per operation.
pub fn sampled_line(
    ops: &Operations,
    estimates: &[(String, crate::model::results::EstimateOut)],
) -> String {
    let figures = sampled_figures(ops.count, |short| {
        let name = format!("mem_access_checked_{short}");
        estimates.iter().find(|(n, _)| *n == name).map(|(_, e)| *e)
    });
    format!("{} checked accesses (95% CI): {figures}\n", heading(ops))
}

/// A phase's checked accesses per operation, exact or estimated as the phase is.
pub fn phase_figures(ops: &Operations, p: &crate::model::results::PhaseOut) -> String {
    let name = |short: &str| format!("mem_access_checked_{short}");
    if p.sampled.is_some() {
        sampled_figures(ops.count, |s| p.estimates.get(&name(s)).copied())
    } else {
        exact_figures(ops.count, |s| {
            p.counters.get(&name(s)).copied().unwrap_or(0)
        })
    }
}

fn heading(ops: &Operations) -> String {
    format!(
        "  per operation, set-up and tear-down included ({} operations, {})",
        crate::output::text::thousands(ops.count),
        ops.source
    )
}

/// A window's phase with these counters, traced whole (for tests here and in `ab`).
#[cfg(test)]
pub(crate) fn test_phase(counters: &[(&str, u64)]) -> crate::model::results::PhaseOut {
    crate::model::results::PhaseOut::example(
        "window 1",
        counters.iter().map(|(n, v)| (n.to_string(), *v)).collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(s: &str) -> Vec<String> {
        s.lines().map(str::to_string).collect()
    }

    #[test]
    fn memaslap_gives_its_last_total() {
        let out = lines(
            "servers: 127.0.0.1:11211\nexecute number: 11000\ncmd_get: 10000\ncmd_set: 1000\n\
             Run time: 0.2s Ops: 4000 TPS: 1 Net_rate: 1M/s\n\
             Run time: 0.5s Ops: 11000 TPS: 22178 Net_rate: 2.5M/s",
        );
        let ops = read(&out).unwrap();
        assert_eq!(ops.count, 11000);
        assert_eq!(ops.source, "memcaslap's \"Ops: 11000\"");
    }

    #[test]
    fn perf_futex_hash_sums_its_threads_over_one_second() {
        let out = lines(
            "# Running 'futex/hash' benchmark:\n\
             Run summary [PID 80]: 2 threads, each operating on 64 [private] futexes for 1 secs.\n\
             \n\
             [thread  0] futexes: 0x1 ... 0x2 [ 51329 ops/sec ]\n\
             [thread  1] futexes: 0x3 ... 0x4 [ 50112 ops/sec ]\n\
             \n\
             Averaged 50720 operations/sec (+- 1.20%), total secs = 1",
        );
        let ops = read(&out).unwrap();
        assert_eq!(ops.count, 101_441);
        assert!(ops.source.contains("2 threads"), "{}", ops.source);
    }

    #[test]
    fn perf_futex_hash_over_longer_runs_or_silent_gives_no_count() {
        let longer = lines(
            "[thread  0] futexes: 0x1 ... 0x2 [ 51329 ops/sec ]\n\
             Averaged 51329 operations/sec (+- 0.00%), total secs = 3",
        );
        assert_eq!(read(&longer), None);
        let silent = lines("Averaged 51329 operations/sec (+- 0.00%), total secs = 1");
        assert_eq!(read(&silent), None);
    }

    #[test]
    fn a_count_the_user_gives_takes_the_place_of_the_printed_one() {
        let out = lines("Run time: 0.5s Ops: 11000 TPS: 22178 Net_rate: 2.5M/s");
        assert_eq!(of_window(&out, None).unwrap().count, 11000);
        let given = of_window(&out, Some(500)).unwrap();
        assert_eq!(
            (given.count, given.source.as_str()),
            (500, "given by --operations")
        );
        assert_eq!(of_window(&lines("hello"), Some(7)).unwrap().count, 7);
        assert_eq!(of_window(&lines("hello"), None), None);
    }

    #[test]
    fn no_count_is_read_from_a_zero_or_from_a_thread_line_that_does_not_read() {
        // Nothing can be divided by 0 operations.
        assert_eq!(
            read(&lines("Run time: 0.0s Ops: 0 TPS: 0 Net_rate: 0.0M/s")),
            None
        );
        let partial = lines(
            "[thread  0] futexes: 0x1 ... 0x2 [ 51329 ops/sec ]\n\
             [thread  1] futexes: 0x3 ... 0x4 [ lots ops/sec ]\n\
             Averaged 51329 operations/sec (+- 0.00%), total secs = 1",
        );
        assert_eq!(read(&partial), None);
    }

    #[test]
    fn mtex_works_own_workloads_give_what_they_made() {
        let futex = lines("mtex-work: futex-hash ok: 4 threads x 200 FUTEX_WAIT, all EAGAIN");
        let ops = read(&futex).unwrap();
        assert_eq!(ops.count, 800);
        assert_eq!(ops.source, "mtex-work's 4 threads x 200 FUTEX_WAITs");
        assert_eq!(
            read(&lines("mtex-work: getpid ok: 1000 calls, pid 80"))
                .unwrap()
                .count,
            1000
        );
        // A failed workload prints no ok line, and a line of another shape is not read.
        assert_eq!(
            read(&lines("mtex-work: futex-hash failed: 3 of 4 waits")),
            None
        );
        assert_eq!(
            read(&lines(
                "mtex-work: futex-hash ok: lots threads x 2 FUTEX_WAIT, all EAGAIN"
            )),
            None
        );
    }

    #[test]
    fn output_of_no_known_program_gives_none() {
        assert_eq!(read(&lines("hello\nOps: 12")), None);
        assert_eq!(read(&[]), None);
    }

    fn phase(counters: &[(&str, u64)]) -> crate::model::results::PhaseOut {
        test_phase(counters)
    }

    #[test]
    fn a_phase_is_given_per_operation_exactly_or_with_its_intervals() {
        let ops = Operations {
            count: 100,
            source: "x".into(),
        };
        let exact = phase(&[
            ("mem_access_checked_rd:k", 12_345),
            ("mem_access_checked_wr:k", 50),
        ]);
        assert_eq!(
            phase_figures(&ops, &exact),
            "rd:k 123.5, wr:k 0.5, rd:u 0.0, wr:u 0.0"
        );
        let mut sampled = exact.clone();
        sampled.sampled = Some(crate::model::results::SampledOut {
            units: 40,
            unit_instructions: 1000,
            gap_us: 300,
            seed: 1,
            whole: false,
        });
        let est = |value: f64, half_width: Option<f64>| crate::model::results::EstimateOut {
            value,
            half_width,
            level: 0.95,
            units: 40,
            met: 10,
            sampled: 0.01,
            exact: false,
            not_estimable: None,
        };
        sampled.estimates = [
            ("mem_access_checked_rd:k", est(10_000.0, Some(500.0))),
            ("mem_access_checked_wr:k", est(0.0, None)),
            ("mem_access_checked_rd:u", est(300.0, None)),
            ("mem_access_checked_wr:u", est(2_000.0, Some(100.0))),
        ]
        .into_iter()
        .map(|(n, e)| (n.to_string(), e))
        .collect();
        // The interval's relative width is the estimate's: the count divides both ends.
        let text = phase_figures(&ops, &sampled);
        assert!(text.starts_with("rd:k 100.0 ± 5"), "{text}");
        assert!(text.contains("wr:k 0 seen"), "{text}");
        assert!(text.contains("rd:u ~3.0 (not estimable)"), "{text}");
        assert!(text.contains("wr:u 20.0 ± 5"), "{text}");
    }

    #[test]
    fn per_op_rounds_to_a_tenth() {
        assert_eq!(per_op(286_041.0, 110), "2,600.4");
        assert_eq!(per_op(15.0, 110), "0.1");
        assert_eq!(per_op(0.0, 0), "0.0");
    }
}
