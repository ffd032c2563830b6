//! "Where the checks are": a phase's functions ranked by each headline counter, in the
//! manner of `perf report` (count, share, function), each list closed by what it leaves out
//! so that the counter's total is always on the page. When the kernel's stacks were
//! followed, each function is followed by what it was reached from (`stacks::reached_from`).

use super::functions::{FunctionRow, ranked};
use crate::output::text::{WIDTH, clean, thousands};

/// The counters ranked, in this order: the architectural view's four, then what the
/// kernel's reads would be with TCMA1 set and where TCF is not NONE.
pub const HEADLINE: [&str; 6] = [
    "mem_access_checked_rd:k",
    "mem_access_checked_wr:k",
    "mem_access_checked_rd:u",
    "mem_access_checked_wr:u",
    "if_tcma1.mem_access_checked_rd:k",
    "tcf_elided.mem_access_checked_rd:k",
];

/// Functions listed per counter; the rest are counted on one line.
pub const LISTED: usize = 20;

/// Columns before a function's name: `   ` + count (15) + `  ` + share (6) + `  `.
const NAME_AT: usize = 3 + 15 + 2 + 6 + 2;

/// Entries shown per function under "reached from".
const ENTRIES: usize = 2;

/// The section's lines for a phase's `rows` by function, and `stacks` (its rows by stack,
/// empty if its stacks were not followed); none when no headline counter is non-zero.
pub fn section(
    rows: &[FunctionRow],
    stacks: &[FunctionRow],
    stats: Option<mtex_trace::callstack::StackStats>,
) -> Vec<String> {
    let mut out = Vec::new();
    for counter in HEADLINE {
        let from = super::stacks::entries_by_function(stacks, counter);
        let ranked = ranked(rows, counter);
        let total: u64 = ranked.iter().map(|(_, v)| v).sum();
        if total == 0 {
            continue;
        }
        out.push(String::new());
        out.push(format!(
            "   {} {}, {} function{}:",
            thousands(total),
            counter,
            ranked.len(),
            if ranked.len() == 1 { "" } else { "s" }
        ));
        for (row, v) in ranked.iter().take(LISTED) {
            out.push(format!(
                "   {:>15}  {:>6}  {}",
                thousands(*v),
                share(*v, total),
                fit(&clean(&row.label()), WIDTH - NAME_AT)
            ));
            if let Some(entries) = from.get(&row.label()) {
                out.push(reached_line(entries, *v));
            }
        }
        if ranked.len() > LISTED {
            let rest = &ranked[LISTED..];
            out.push(format!(
                "   {:>15}  {:>6}  ({} more functions: {})",
                "",
                "",
                rest.len(),
                thousands(rest.iter().map(|(_, v)| v).sum())
            ));
        }
    }
    if !out.is_empty() {
        if let Some(line) = stats.and_then(stats_line) {
            out.insert(0, line);
        }
        out.insert(
            0,
            " Where the checks are (by function; each list adds up to its counter):".into(),
        );
    }
    out
}

/// What the call stacks could not follow, if anything: each made a stack start again from
/// `[unknown]`.
fn stats_line(s: mtex_trace::callstack::StackStats) -> Option<String> {
    let parts: Vec<String> = [
        (s.unmatched_returns, "returns matched no call"),
        (s.unmatched_erets, "exception returns had no entry"),
        (s.too_deep, "calls went past 64 frames"),
        (s.tree_full, "frames found the stack tree full"),
        (s.evicted, "saved task stacks were evicted"),
    ]
    .into_iter()
    .filter(|&(n, _)| n != 0)
    .map(|(n, what)| format!("{} {what}", thousands(n as u64)))
    .collect();
    (!parts.is_empty()).then(|| {
        fit(
            &format!(
                "   Call stacks: {}; [unknown] below each.",
                parts.join(", ")
            ),
            WIDTH,
        )
    })
}

/// `reached from futex (syscall 98) 92.0%, …` under a function of `total`: as many entries as
/// fit the width (at most [`ENTRIES`]), and `…` when some are left out.
fn reached_line(entries: &[(String, u64)], total: u64) -> String {
    let width = WIDTH - NAME_AT - 2;
    let mut n = entries.len().min(ENTRIES);
    loop {
        let shown: Vec<String> = entries[..n]
            .iter()
            .map(|(e, c)| format!("{} {}", clean(e), share(*c, total)))
            .collect();
        let more = if entries.len() > n { ", …" } else { "" };
        let line = format!("reached from {}{more}", shown.join(", "));
        if line.chars().count() <= width || n == 1 {
            let line: String = line.chars().take(width).collect();
            return format!("{:NAME_AT$}  {line}", "");
        }
        n -= 1;
    }
}

/// `62.9%`; a share that rounds to 0 but is not shown as `<0.1%`.
fn share(v: u64, total: u64) -> String {
    let p = 100.0 * v as f64 / total as f64;
    if p < 0.05 {
        "<0.1%".into()
    } else {
        format!("{p:.1}%")
    }
}

/// `name` in at most `width` characters: a long one keeps its end (the function's own
/// name, after its path) behind `…`.
pub fn fit(name: &str, width: usize) -> String {
    let n = name.chars().count();
    if n <= width {
        return name.to_string();
    }
    let tail: String = name.chars().skip(n - (width - 1)).collect();
    format!("…{tail}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::PhaseProfile;
    use crate::profile::fixture::profile;
    use crate::profile::functions::by_function;
    use crate::symbols::Symbols;
    use mtex_trace::profile::PcEntry;

    #[test]
    fn each_headline_counter_lists_its_top_functions_and_counts_the_rest() {
        let (p, s) = profile();
        let rows = by_function(&p, &s);
        let text = section(&rows, &[], None).join("\n");
        for l in text.lines() {
            assert!(l.chars().count() <= WIDTH, "{l}");
        }
        insta::assert_snapshot!(text);
    }

    #[test]
    fn with_stacks_each_function_says_what_it_was_reached_from() {
        let (p, s) = (
            crate::profile::stacks::tests::profile(),
            crate::profile::stacks::tests::symbols(),
        );
        let rows = by_function(&p, &s);
        let stacks =
            crate::profile::stacks::by_stack(&p, &s, crate::profile::stacks::Syscalls::Numbers);
        let stats = mtex_trace::callstack::StackStats {
            unmatched_returns: 3,
            evicted: 1,
            ..Default::default()
        };
        let text = section(&rows, &stacks, Some(stats)).join("\n");
        assert!(
            text.contains(
                "Call stacks: 3 returns matched no call, 1 saved task stacks were evicted; \
                 [unknown] below each."
            ),
            "{text}"
        );
        let lines: Vec<&str> = text.lines().collect();
        let at = lines
            .iter()
            .position(|l| l.ends_with("  futex_get_value_locked"))
            .unwrap();
        assert_eq!(
            lines[at + 1].trim(),
            "reached from [unknown] 66.7%, futex (syscall 98) 33.3%"
        );
        assert!(
            text.contains("reached from futex (syscall 98) 100.0%"),
            "{text}"
        );
    }

    #[test]
    fn a_long_reached_from_line_keeps_the_entries_that_fit_whole() {
        let entries = [
            ("futex (syscall 98)".to_string(), 920),
            ("rt_sigprocmask (syscall 135)".to_string(), 21),
            ("exit (syscall 93)".to_string(), 1),
        ];
        let line = reached_line(&entries, 1000);
        assert!(line.chars().count() <= WIDTH, "{line}");
        assert_eq!(line.trim(), "reached from futex (syscall 98) 92.0%, …");
        let long = [("x".repeat(200), 5)];
        assert!(reached_line(&long, 5).chars().count() <= WIDTH);
    }

    #[test]
    fn a_profile_with_no_checked_access_has_no_section() {
        let p = PhaseProfile {
            pcs: vec![PcEntry {
                pc: 4,
                el: 1,
                insns: 3,
                ..PcEntry::default()
            }],
            ..PhaseProfile::default()
        };
        assert!(section(&by_function(&p, &Symbols::default()), &[], None).is_empty());
    }
}
