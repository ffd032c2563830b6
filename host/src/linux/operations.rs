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

/// The operations a window's output reports, if a program it knows printed them.
pub fn read(output: &[String]) -> Option<Operations> {
    memaslap(output).or_else(|| perf_futex(output))
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
    let rates: Vec<u64> = output
        .iter()
        .filter(|l| l.trim_start().starts_with("[thread"))
        .filter_map(|l| {
            let inner = l.rsplit_once('[')?.1.strip_suffix(']')?;
            inner.trim().strip_suffix("ops/sec")?.trim().parse().ok()
        })
        .collect();
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

/// The line of a window's exact counts per operation.
pub fn exact_line(ops: &Operations, counts: &mtex_trace::counts::ByEl) -> String {
    let each = [
        ("rd:k", counts.rd_k),
        ("wr:k", counts.wr_k),
        ("rd:u", counts.rd_u),
        ("wr:u", counts.wr_u),
    ]
    .map(|(n, v)| format!("{n} {}", per_op(v as f64, ops.count)))
    .join(", ");
    format!("{} checked accesses: {each}\n", heading(ops))
}

/// The line of a sampled window's estimates per operation: each estimate divided by the
/// exact operation count, its interval with it (the same relative width).
pub fn sampled_line(
    ops: &Operations,
    estimates: &[(String, crate::model::results::EstimateOut)],
) -> String {
    let each: Vec<String> = ["rd:k", "wr:k", "rd:u", "wr:u"]
        .iter()
        .filter_map(|short| {
            let name = format!("mem_access_checked_{short}");
            let e = &estimates.iter().find(|(n, _)| *n == name)?.1;
            let v = per_op(e.value, ops.count);
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
    format!(
        "{} checked accesses (95% CI): {}\n",
        heading(ops),
        each.join(", ")
    )
}

fn heading(ops: &Operations) -> String {
    format!(
        "  per operation, set-up and tear-down included ({} operations, {})",
        crate::output::text::thousands(ops.count),
        ops.source
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
    fn output_of_no_known_program_gives_none() {
        assert_eq!(read(&lines("hello\nOps: 12")), None);
        assert_eq!(read(&[]), None);
    }

    #[test]
    fn per_op_rounds_to_a_tenth() {
        assert_eq!(per_op(286_041.0, 110), "2,600.4");
        assert_eq!(per_op(15.0, 110), "0.1");
        assert_eq!(per_op(0.0, 0), "0.0");
    }
}
