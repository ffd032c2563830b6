//! A profiled phase's functions as folded stacks (the format `flamegraph.pl`, inferno and
//! speedscope read: `frame;frame COUNT` a line), one file per checked-access counter, under
//! the results directory:
//!
//! ```text
//! profile/<run>-<k>/<n>-<phase>/<counter>.folded     n: the phase's place in the run
//! ```
//!
//! `<counter>` is the counter's name with `:` as `_` (`mem_access_checked_rd_k`,
//! `if_tcma1.mem_access_checked_rd_k`). The root frame is the EL (`kernel`, `user`); then,
//! when the kernel's stacks were followed (`mtex.stacks=1`), the stack's frames (`stacks`),
//! and last the function. Each file's counts add up to the phase's counter exactly; zero
//! lines are left out, and so is a counter that is zero.

use super::functions::FunctionRow;
use crate::model::results::{PhaseOut, Results, Run};
use mtex_abi::counters::{Counter, Counts};

/// The counters written: every view's checked reads and writes, per EL.
pub fn counters() -> impl Iterator<Item = &'static Counter> {
    mtex_abi::counters::all().filter(|c| {
        matches!(
            c.counts,
            Counts::Accesses {
                checked: Some(_),
                unprivileged: false,
                ..
            }
        )
    })
}

/// A counter's name as a file name: ASCII, no `:`.
pub fn file_stem(counter: &str) -> String {
    counter
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The directory of a phase's profile outputs, relative to the results directory.
pub fn phase_dir(run: &Run, index: usize, p: &PhaseOut) -> String {
    let title = match &p.policy {
        Some(pol) => format!("{}-{pol}", p.name),
        None => p.name.clone(),
    };
    format!(
        "profile/{}-{}/{}-{}",
        slug(&run.name),
        run.repeat + 1,
        index + 1,
        slug(&title)
    )
}

/// Lower-case letters, digits and single `-`, at most 48.
fn slug(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
    }
    let out: String = out.trim_end_matches('-').chars().take(48).collect();
    if out.is_empty() { "phase".into() } else { out }
}

/// `kernel;copy_to_user 812` lines of `counter` (with the stack's frames between, for rows
/// by stack), largest first; empty when it is zero.
pub fn lines(rows: &[FunctionRow], counter: &str) -> String {
    let mut out = String::new();
    for (row, v) in super::functions::ranked(rows, counter) {
        let root = if row.el == 0 { "user" } else { "kernel" };
        out.push_str(root);
        for f in row.stack.iter().chain([&row.label()]) {
            out.push(';');
            out.push_str(&frame(f));
        }
        out.push_str(&format!(" {v}\n"));
    }
    out
}

/// The rows a phase's folded files and flame graphs are made of: by stack when its stacks
/// were followed, else by function.
pub fn rows(p: &PhaseOut) -> &[FunctionRow] {
    if p.stacks.is_empty() {
        &p.functions
    } else {
        &p.stacks
    }
}

/// A function's name as one frame: no `;` (the separator), no line breaks.
fn frame(name: &str) -> String {
    name.chars()
        .map(|c| if c == ';' || c.is_control() { '_' } else { c })
        .collect()
}

/// Every folded file of `doc`: (path relative to the results directory, contents).
pub fn files(doc: &Results) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for run in &doc.runs {
        for (i, p) in run.phases.iter().enumerate() {
            if p.functions.is_empty() {
                continue;
            }
            let dir = phase_dir(run, i, p);
            for c in counters() {
                let text = lines(rows(p), c.name);
                if !text.is_empty() {
                    out.push((format!("{dir}/{}.folded", file_stem(c.name)), text));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_file_adds_up_to_its_counter_exactly() {
        let doc = crate::profile::fixture::results();
        let files = files(&doc);
        let p = &doc.runs[0].phases[0];
        for c in counters() {
            let want = p.counters[c.name];
            let path = format!("profile/run-1/1-futex-hash/{}.folded", file_stem(c.name));
            let got = files.iter().find(|(f, _)| *f == path);
            if want == 0 {
                assert!(got.is_none(), "{path}");
                continue;
            }
            let (_, text) = got.unwrap_or_else(|| panic!("{path} missing"));
            let sum: u64 = text
                .lines()
                .map(|l| {
                    let (stack, n) = l.rsplit_once(' ').unwrap();
                    assert!(stack.starts_with(if c.name.ends_with(":k") {
                        "kernel;"
                    } else {
                        "user;"
                    }));
                    let n: u64 = n.parse().unwrap();
                    assert_ne!(n, 0, "{l}");
                    n
                })
                .sum();
            assert_eq!(sum, want, "{path}");
        }
        let (_, rd_k) = files
            .iter()
            .find(|(f, _)| f.ends_with("/mem_access_checked_rd_k.folded"))
            .unwrap();
        assert!(rd_k.starts_with("kernel;kfunc_24 25\n"), "{rd_k}");
        assert!(
            rd_k.contains("kernel;mtex_guest::kernel::very::deeply::nested::module::path::that::goes::on::and::on::copy_from_user_checked (uaccess) 7\n"),
            "{rd_k}"
        );
    }

    #[test]
    fn names_become_safe_paths() {
        assert_eq!(
            file_stem("if_tcma1.mem_access_checked_rd:k"),
            "if_tcma1.mem_access_checked_rd_k"
        );
        assert_eq!(slug("Futex Hash/../x"), "futex-hash-x");
        assert_eq!(slug("///"), "phase");
        assert_eq!(frame("a;b\nc"), "a_b_c");
    }
}
