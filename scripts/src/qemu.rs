//! Booting QEMU and collecting its console, always within a time limit.

use crate::images::{Images, mtex_platform_guest_addr};
use anyhow::{Context, Result, anyhow, bail};
use mtex_abi::options::{self, GuestOptions, HypOptions, KNOWN_KEYS, OptionError};
use mtex_abi::scenario::Scenario;
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How to run the machine.
#[derive(Clone, Debug)]
pub struct RunConfig {
    /// The kernel command line (`mtex.*` options for hypervisor and guest).
    pub cmdline: String,
    /// `-icount shift=0`: deterministic instruction counts and timestamps.
    pub icount: bool,
    /// Host-side limit; QEMU is killed past it.
    pub timeout: Duration,
    /// Guest RAM in MiB.
    pub memory_mib: u32,
}

impl Default for RunConfig {
    fn default() -> Self {
        Self {
            cmdline: String::new(),
            icount: true,
            timeout: Duration::from_secs(60),
            memory_mib: 512,
        }
    }
}

/// What a run printed and how it ended.
pub struct Console {
    /// The console as text (bytes that were not UTF-8 shown as U+FFFD).
    pub text: String,
    /// The console as it came: QEMU's stdout, then its stderr.
    pub bytes: Vec<u8>,
    /// QEMU's exit status, None if it was killed at the time limit.
    pub status: Option<i32>,
    pub timed_out: bool,
    pub wall: Duration,
}

/// The QEMU command line for a run.
pub fn command(images: &Images, cfg: &RunConfig) -> Command {
    let mut c = Command::new("qemu-system-aarch64");
    c.args([
        "-machine",
        "virt,virtualization=on,mte=on,gic-version=3",
        "-cpu",
        "max",
        "-smp",
        "1",
        "-m",
        &format!("{}M", cfg.memory_mib),
        "-display",
        "none",
        "-monitor",
        "none",
        "-serial",
        "stdio",
        "-nic",
        "none",
        "-no-reboot",
    ]);
    if cfg.icount {
        c.args(["-icount", "shift=0,sleep=off"]);
    }
    c.arg("-kernel").arg(&images.hyp_elf);
    c.arg("-device").arg(format!(
        "loader,file={},addr={:#x},force-raw=on",
        images.guest_image.display(),
        mtex_platform_guest_addr()
    ));
    // QEMU refuses an empty -append; a lone space is an empty command line.
    c.arg("-append").arg(if cfg.cmdline.is_empty() {
        " "
    } else {
        &cfg.cmdline
    });
    c
}

/// Runs QEMU to completion or to the time limit.
pub fn run(images: &Images, cfg: &RunConfig) -> Result<Console> {
    let start = Instant::now();
    let mut child = command(images, cfg)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting qemu-system-aarch64 (run ./scripts/ensure-deps)")?;
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = stdout.read_to_end(&mut buf);
        buf
    });
    let err_reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = stderr.read_to_end(&mut buf);
        buf
    });
    let mut timed_out = false;
    let status = loop {
        if let Some(s) = child.try_wait()? {
            break s.code();
        }
        if start.elapsed() > cfg.timeout {
            let _ = child.kill();
            let _ = child.wait();
            timed_out = true;
            break None;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let out = reader.join().unwrap_or_default();
    let err = err_reader.join().unwrap_or_default();
    let mut bytes = out;
    bytes.extend_from_slice(&err);
    Ok(Console {
        text: String::from_utf8_lossy(&bytes).into_owned(),
        bytes,
        status,
        timed_out,
        wall: start.elapsed(),
    })
}

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
    if guest == "kernel" {
        Scenario::parse(&line).map_err(|e| option_error(&line, e, Scenario::parse))?;
    }
    HypOptions::parse(&line).map_err(|e| option_error(&line, e, HypOptions::parse))?;
    GuestOptions::parse(&line).map_err(|e| option_error(&line, e, GuestOptions::parse))?;
    Ok(line)
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
