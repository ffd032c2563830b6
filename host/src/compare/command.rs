//! The `mtex compare` command: its arguments, reading the two documents, refusing a
//! selection that names nothing (it would compare nothing and look like "no change"), and
//! printing the comparison. Apart from the comparison itself, which the tests make without a
//! command line.

use super::{
    Select, by_function, compare, render_csv, render_functions_csv, render_functions_text,
    render_text,
};
use crate::model::results::Results;
use anyhow::Context as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Its command-line arguments.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The baseline: a results directory (holding report.json) or such a file.
    pub a: PathBuf,
    /// What is compared with it, the same way.
    pub b: PathBuf,
    /// Output: text (100 columns) or CSV (one row per phase and counter, every counter).
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
    /// Only A's runs of this name; with --b-run too, the two meet whatever their names.
    #[arg(long, value_name = "RUN")]
    pub a_run: Option<String>,
    /// Only B's runs of this name.
    #[arg(long, value_name = "RUN")]
    pub b_run: Option<String>,
    /// Only A's phases under this policy: `mtex compare r.json r.json --a-policy entry-tco
    /// --b-policy tcma1` compares two policies of one run.
    #[arg(long, value_name = "POLICY")]
    pub a_policy: Option<String>,
    /// Only B's phases under this policy.
    #[arg(long, value_name = "POLICY")]
    pub b_policy: Option<String>,
    /// List unchanged counters too (the text lists the changed ones and the checked accesses).
    #[arg(long)]
    pub all: bool,
    /// What a row is: a counter of a phase, or a function of a profiled phase
    /// (`mtex.profile=1`) for one counter (--counter).
    #[arg(long, value_enum, default_value = "phase")]
    pub by: By,
    /// The counter compared function by function (--by function).
    #[arg(long, value_name = "NAME", default_value = "mem_access_checked_rd:k")]
    pub counter: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum By {
    /// Per phase, every counter.
    Phase,
    /// Per phase, one counter by function: A, B, delta, change, largest change first.
    Function,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    Csv,
}

/// The results document of a Linux-mode directory written by an mtex before version 2 of
/// the document, whose report.json was Linux mode's own report then.
pub const RESULTS_JSON: &str = "results.json";

/// Reads a document: for a directory its `report.json`, or the `results.json` of a
/// Linux-mode directory an older mtex wrote; else the file itself.
pub fn load(path: &Path) -> anyhow::Result<Results> {
    let what = "results document";
    let limit = crate::input::DOCUMENT_LIMIT;
    let (file, text) = if path.is_dir() {
        // Read from inside the directory only, whatever links it holds.
        let name = if path.join(RESULTS_JSON).exists() {
            RESULTS_JSON
        } else {
            "report.json"
        };
        let text = crate::input::read_text_in_dir(path, name, what, limit)?;
        (path.join(name), text)
    } else {
        (
            path.to_path_buf(),
            crate::input::read_text(path, what, limit)?,
        )
    };
    Results::from_json(&text).with_context(|| format!("reading {}", file.display()))
}

/// A selection must name a run, and a policy of the runs selected, that the document has:
/// selecting nothing would compare nothing and look like "no change".
pub fn check_selection(
    doc: &Results,
    run_option: &str,
    policy_option: &str,
    run: &Option<String>,
    policy: &Option<String>,
) -> anyhow::Result<()> {
    let names = |list: Vec<&str>| {
        let mut list: Vec<String> = list.iter().map(|n| format!("{n:?}")).collect();
        list.sort();
        list.dedup();
        if list.is_empty() {
            "none".to_string()
        } else {
            list.join(", ")
        }
    };
    if let Some(r) = run
        && !doc.runs.iter().any(|x| x.name == *r)
    {
        anyhow::bail!(
            "{run_option} {r:?}: no run of that name (the document's runs: {})",
            names(doc.runs.iter().map(|x| x.name.as_str()).collect())
        );
    }
    let selected = || {
        doc.runs
            .iter()
            .filter(|x| run.as_ref().is_none_or(|r| *r == x.name))
    };
    if let Some(p) = policy
        && !selected().any(|x| x.phases.iter().any(|ph| ph.policy.as_ref() == Some(p)))
    {
        anyhow::bail!(
            "{policy_option} {p:?}: no phase under that policy{} (its policies: {})",
            run.as_ref()
                .map_or(String::new(), |r| format!(" in run {r:?}")),
            names(
                selected()
                    .flat_map(|x| x.phases.iter().filter_map(|ph| ph.policy.as_deref()))
                    .collect()
            )
        );
    }
    Ok(())
}

/// What kind of run a document is of, in words: a Linux-mode run's windows or the built-in
/// guest's phases.
fn kind(doc: &Results) -> &'static str {
    if doc.kernel.is_some() {
        "a Linux-mode run's results (the windows of a Linux kernel: `window 1`, …)"
    } else {
        "the built-in guest's results (phases of a workload under a policy, or a program's own)"
    }
}

/// When nothing of A meets anything of B and the two are of different kinds — a Linux-mode
/// run against the built-in guest — there is nothing to compare, and why: an error, not an
/// empty comparison that would look like "no change".
fn nothing_comparable(a_path: &Path, a: &Results, b_path: &Path, b: &Results) -> Option<String> {
    (a.kernel.is_some() != b.kernel.is_some()).then(|| {
        format!(
            "nothing is comparable: {} holds {} and {} {}: no phase of one meets a phase \
             of the other (phases meet by run, name and occurrence). Compare Linux-mode results \
             with Linux-mode results, and the built-in guest's with the built-in guest's",
            a_path.display(),
            kind(a),
            b_path.display(),
            kind(b)
        )
    })
}

/// Runs it: exit 0 for any comparison made, even of nothing between results of one kind;
/// unreadable input, or results of two kinds with nothing in common, is an error (`main`
/// prints it, exit 2).
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let a = load(&args.a)?;
    let b = load(&args.b)?;
    check_selection(&a, "--a-run", "--a-policy", &args.a_run, &args.a_policy)?;
    check_selection(&b, "--b-run", "--b-policy", &args.b_run, &args.b_policy)?;
    let (sa, sb) = (
        Select {
            run: args.a_run.clone(),
            policy: args.a_policy.clone(),
        },
        Select {
            run: args.b_run.clone(),
            policy: args.b_policy.clone(),
        },
    );
    if args.by == By::Function {
        anyhow::ensure!(
            mtex_abi::counters::lookup(&args.counter).is_some(),
            "--counter {:?}: no counter of that name (docs/counters.md lists them)",
            args.counter
        );
        let f = by_function(&a, &sa, &b, &sb, &args.counter);
        if f.is_empty()
            && let Some(why) = nothing_comparable(&args.a, &a, &args.b, &b)
        {
            anyhow::bail!("{why}");
        }
        if f.is_empty() {
            eprintln!(
                "mtex compare: no phase of {} meets one of {}",
                args.a.display(),
                args.b.display()
            );
        }
        match args.format {
            Format::Text => print!("{}", render_functions_text(&f, &args.counter)),
            Format::Csv => print!("{}", render_functions_csv(&f, &args.counter)),
        }
        return Ok(ExitCode::SUCCESS);
    }
    let c = compare(&a, &sa, &b, &sb);
    if c.phases.is_empty()
        && let Some(why) = nothing_comparable(&args.a, &a, &args.b, &b)
    {
        anyhow::bail!("{why}");
    }
    if c.phases.is_empty() {
        // Still a comparison (of nothing): the output lists what is on each side.
        eprintln!(
            "mtex compare: no phase of {} meets one of {} (phases meet by run name, phase name and \
             occurrence; --a-run/--b-run and --a-policy/--b-policy select them)",
            args.a.display(),
            args.b.display()
        );
    }
    match args.format {
        Format::Text => {
            // Which kernel each side booted, where they are Linux-mode runs: two builds with
            // one release string are told apart by their Images' hashes.
            for (side, path, doc) in [("A", &args.a, &a), ("B", &args.b, &b)] {
                if let Some(k) = &doc.kernel {
                    println!(
                        "{}",
                        crate::output::text::clean(&format!(
                            "{side}: {}: {}",
                            path.display(),
                            k.describe()
                        ))
                    );
                }
            }
            print!("{}", render_text(&c, args.all))
        }
        Format::Csv => print!("{}", render_csv(&c)),
    }
    Ok(ExitCode::SUCCESS)
}
