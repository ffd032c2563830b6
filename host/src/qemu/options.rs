//! The `mtex.*` command line handed to hypervisor and guest, built from `--guest` and
//! `--opt` and checked with the parsers they use before anything is built or booted: an
//! unknown key (with the key it likely meant), a malformed option or a bad value is an error
//! that names it, in full. Apart from running QEMU because it is the CLI's contract with the
//! guest, not with QEMU.

use anyhow::{Result, anyhow, bail};
use mtex_abi::options::{self, GuestOptions, GuestProgram, HypOptions, KNOWN_KEYS, OptionError};
use mtex_abi::scenario::Scenario;

/// The guest budget of a kernel scenario run unless `--opt watchdog_ms=` says otherwise.
pub const KERNEL_WATCHDOG_MS: u64 = 600_000;

/// The command line handed to hypervisor and guest for guest program `guest` and extra
/// `KEY=VALUE` options, checked before any boot with the same parsers they use: an unknown
/// key, a malformed option or a bad value is an error that names it, in full.
pub fn cmdline(guest: &str, opts: &[String]) -> Result<String> {
    if guest.is_empty() || guest.contains(char::is_whitespace) {
        bail!("--guest {guest:?}: expected a program name without spaces");
    }
    let mut words = vec![format!("mtex.guest={guest}")];
    for o in opts {
        let Some((key, _)) = o
            .split_once('=')
            .filter(|_| !o.contains(char::is_whitespace))
        else {
            bail!("--opt {o:?}: expected KEY=VALUE without spaces");
        };
        if !KNOWN_KEYS.contains(&key) {
            bail!("--opt {o}: {}", unknown_key_message(key));
        }
        // It would override --guest behind the host's back (time limit, watchdog, checks).
        if key == "guest" {
            bail!("--opt {o}: the program is chosen with --guest");
        }
        words.push(format!("mtex.{o}"));
    }
    // The kernel scenario traces every run: give it a budget to match unless one was given.
    if guest == "kernel" && !opts.iter().any(|o| o.starts_with("watchdog_ms=")) {
        words.push(format!("mtex.watchdog_ms={KERNEL_WATCHDOG_MS}"));
    }
    let line = words.join(" ");
    if let Some(key) = options::unknown_key(&line) {
        bail!("{}", unknown_key_message(key));
    }
    let program = GuestOptions::parse(&line)
        .map_err(|e| option_error(&line, e, GuestOptions::parse))?
        .program;
    // A key the program does not read would boot with its default in force, unsaid.
    for o in opts {
        let key = o.split_once('=').map_or(o.as_str(), |(k, _)| k);
        if !program.reads(key) {
            bail!("--opt {o}: {}", not_read_message(program, key));
        }
    }
    if program == GuestProgram::Kernel {
        Scenario::parse(&line).map_err(|e| option_error(&line, e, Scenario::parse))?;
    }
    let hyp = HypOptions::parse(&line).map_err(|e| option_error(&line, e, HypOptions::parse))?;
    // A phase on several CPUs is counted on each, but the per-PC table follows one CPU: the
    // hypervisor would refuse every phase.
    if let Ok(s) = Scenario::parse(&line)
        && program == GuestProgram::Kernel
        && s.cpus > 1
        && (hyp.profile || hyp.stacks)
    {
        bail!(
            "--opt cpus={}: a per-PC profile (--profile, --stacks) follows one CPU; profile the \
             kernel on one CPU",
            s.cpus
        );
    }
    Ok(line)
}

/// `the controls program does not read mtex.cpus: it is an option of --guest kernel`.
fn not_read_message(program: GuestProgram, key: &str) -> String {
    let readers: Vec<&str> = GuestProgram::ALL
        .iter()
        .filter(|(_, p)| p.reads(key))
        .map(|(name, _)| *name)
        .collect();
    format!(
        "the {} program does not read mtex.{key}: it is an option of --guest {}",
        program.name(),
        readers.join(", --guest ")
    )
}

/// `unknown option mtex.policy (did you mean mtex.policies?); the options are ...`, every
/// known key listed.
pub fn unknown_key_message(key: &str) -> String {
    let given = key.strip_prefix("mtex.").unwrap_or(key);
    let hint = if given != key && KNOWN_KEYS.contains(&given) {
        format!(" (give the key without \"mtex.\": {given}=...)")
    } else {
        // A key two edits away, or one that starts the same (`policy`, `probe`).
        let given = given.to_ascii_lowercase();
        let common = |k: &str| {
            k.bytes()
                .zip(given.bytes())
                .take_while(|(a, b)| a == b)
                .count()
        };
        KNOWN_KEYS
            .iter()
            .map(|k| (edit_distance(&given, k), k))
            .filter(|&(d, k)| d <= 2 || common(k) >= 4)
            .min()
            .map_or(String::new(), |(_, k)| format!(" (did you mean mtex.{k}?)"))
    };
    let mut keys = KNOWN_KEYS.to_vec();
    keys.sort_unstable();
    format!(
        "unknown option mtex.{key}{hint}; the options are: {}",
        keys.join(", ")
    )
}

/// Levenshtein distance, for suggesting the key a typo meant.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diag = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let next = (diag + usize::from(ca != cb))
                .min(row[j] + 1)
                .min(row[j + 1] + 1);
            diag = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

/// The full message for an option a parser refused, built from its fields (never cut to the
/// length the hypervisor's console message has): the key, the problem, the value given and,
/// in a comma-separated list, the item that is wrong (found by giving `parse` each item alone).
pub fn option_error<T>(
    line: &str,
    e: OptionError,
    parse: impl Fn(&str) -> Result<T, OptionError>,
) -> anyhow::Error {
    let OptionError { key, problem } = e;
    let Some(value) = options::value(line, key) else {
        return anyhow!("bad option mtex.{key}: {problem}");
    };
    let bad_item = value
        .contains(',')
        .then(|| {
            value.split(',').find(|item| {
                parse(&format!("{line} mtex.{key}={item}")).is_err_and(|e| e.key == key)
            })
        })
        .flatten();
    match bad_item {
        Some(item) => anyhow!("bad option mtex.{key}: {problem}: {item:?} (in mtex.{key}={value})"),
        None => anyhow!("bad option mtex.{key}: {problem} (given mtex.{key}={value})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_options_are_rejected_naming_the_field() {
        let e = cmdline("controls", &["watchdog_ms=soon".into()]).unwrap_err();
        assert!(e.to_string().contains("mtex.watchdog_ms"), "{e}");
        let smp = [
            "cpus=2",
            "hz=0",
            "trace=only",
            "workloads=getpid",
            "profile=1",
        ]
        .map(String::from);
        let e = cmdline("kernel", &smp).unwrap_err();
        assert!(e.to_string().contains("follows one CPU"), "{e}");
        assert!(cmdline("kernel", &smp[..4]).is_ok());
        let e = cmdline("nonsense", &[]).unwrap_err();
        assert!(e.to_string().contains("mtex.guest"), "{e}");
        let e = cmdline("kernel", &["policies=kasan".into()]).unwrap_err();
        assert!(e.to_string().contains("mtex.policies"), "{e}");
        let e = cmdline("kernel", &["workloads=getpid:iters=x".into()]).unwrap_err();
        assert!(e.to_string().contains("mtex.workloads"), "{e}");
        let e = cmdline("controls", &["traps".into()]).unwrap_err();
        assert!(e.to_string().contains("KEY=VALUE"), "{e}");
        assert_eq!(
            cmdline("spin", &["watchdog_ms=200".into()]).unwrap(),
            "mtex.guest=spin mtex.watchdog_ms=200"
        );
    }

    #[test]
    fn a_key_the_program_does_not_read_is_refused_naming_it_and_the_program() {
        // Without the check, cpus=2 gave one CPU, and two once the kernel's keys parsed too.
        for opts in [
            &["cpus=2"][..],
            &["cpus=2", "hz=0", "trace=only", "workloads=getpid"],
        ] {
            let opts: Vec<String> = opts.iter().map(|o| o.to_string()).collect();
            let m = cmdline("controls", &opts).unwrap_err().to_string();
            assert!(
                m.starts_with("--opt cpus=2: the controls program does not read mtex.cpus"),
                "{m}"
            );
            assert!(m.ends_with("--guest kernel"), "{m}");
        }
        let m = cmdline("trace", &["bench_n=5".into()])
            .unwrap_err()
            .to_string();
        assert!(
            m.ends_with("--guest bench-traps, --guest bench-trace, --guest el0"),
            "{m}"
        );
        let m = cmdline("kernel", &["snippet_el=0".into()])
            .unwrap_err()
            .to_string();
        assert!(
            m.contains("mtex.snippet_el") && m.contains("--guest snippet"),
            "{m}"
        );
        // The hypervisor's keys apply to every program.
        assert!(cmdline("controls", &["sample=1000:25".into(), "runs=0".into()]).is_ok());
        assert!(cmdline("el0", &["bench_n=5".into()]).is_ok());
    }

    #[test]
    fn sampling_the_kernel_on_several_cpus_or_untraced_is_refused_naming_sample() {
        let smp = ["cpus=2", "hz=0", "trace=only", "workloads=getpid"].map(String::from);
        let mut opts = smp.to_vec();
        opts.push("sample=1000:25".into());
        let m = cmdline("kernel", &opts).unwrap_err().to_string();
        assert!(
            m.starts_with("bad option mtex.sample: a sampled phase runs on one CPU"),
            "{m}"
        );
        let m = cmdline("kernel", &["trace=0".into(), "sample=1000:25".into()])
            .unwrap_err()
            .to_string();
        assert!(
            m.starts_with("bad option mtex.sample: sampling samples traced"),
            "{m}"
        );
        assert!(cmdline("kernel", &["sample=1000:25".into()]).is_ok());
    }

    #[test]
    fn unknown_keys_are_rejected_listing_the_known_ones() {
        // A typo would otherwise boot the default scenario.
        let e = cmdline("kernel", &["policy=tcma1".into()]).unwrap_err();
        let m = e.to_string();
        assert!(m.contains("unknown option mtex.policy "), "{m}");
        assert!(m.contains("did you mean mtex.policies?"), "{m}");
        for k in KNOWN_KEYS {
            assert!(m.contains(k), "{m} does not list {k}");
        }
        let e = cmdline("controls", &["mtex.traps=tvm".into()]).unwrap_err();
        assert!(e.to_string().contains("without \"mtex.\""), "{e}");
        let e = cmdline("kernel", &["guest=spin".into()]).unwrap_err();
        assert!(e.to_string().contains("--guest"), "{e}");
        let e = cmdline("controls", &["=1".into()]).unwrap_err();
        assert!(e.to_string().contains("unknown option mtex. "), "{e}");
        // Words smuggled in through the program name.
        let e = cmdline("spin mtex.policy=tcma1", &[]).unwrap_err();
        assert!(e.to_string().contains("--guest"), "{e}");
        for k in KNOWN_KEYS {
            assert!(unknown_key_message(k).contains("the options are"));
        }
        assert_eq!(edit_distance("tfc0", "tcf0"), 2);
        assert_eq!(edit_distance("", "hz"), 2);
    }

    #[test]
    fn option_errors_are_printed_in_full_naming_the_bad_item() {
        // The guest's list of programs is longer than a console message holds.
        let m = cmdline("nonsense", &[]).unwrap_err().to_string();
        assert!(m.contains("exclusive-loop"), "{m}");
        assert!(m.ends_with(") (given mtex.guest=nonsense)"), "{m}");
        assert!(m.len() > 96, "{m}");
        let m = cmdline("kernel", &["policies=entry-tco,kasan,tcma1".into()])
            .unwrap_err()
            .to_string();
        assert!(
            m.starts_with("bad option mtex.policies: unknown policy token"),
            "{m}"
        );
        assert!(
            m.ends_with(
                "skip-tag-stacks-pgtables): \"kasan\" (in mtex.policies=entry-tco,kasan,tcma1)"
            ),
            "{m}"
        );
        let m = cmdline("kernel", &["workloads=getpid,kbuf-probe:size=7".into()])
            .unwrap_err()
            .to_string();
        assert!(m.contains("\"kbuf-probe:size=7\""), "{m}");
        let m = cmdline("kernel", &["hz=fast".into()])
            .unwrap_err()
            .to_string();
        assert!(m.contains("(given mtex.hz=fast)"), "{m}");
    }
}
