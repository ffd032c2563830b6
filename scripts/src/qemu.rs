//! Booting QEMU and collecting its console, always within a time limit.

use crate::images::{Images, mtex_platform_guest_addr};
use anyhow::{Context, Result, bail};
use mtex_abi::options::{GuestOptions, HypOptions, describe};
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

/// The command line handed to hypervisor and guest for guest program `guest` and extra
/// `KEY=VALUE` options, checked with the same parsers they use, before any boot: a bad
/// option is an error naming its field.
/// The guest budget of a kernel scenario run unless `--opt watchdog_ms=` says otherwise.
pub const KERNEL_WATCHDOG_MS: u64 = 600_000;

pub fn cmdline(guest: &str, opts: &[String]) -> Result<String> {
    let mut words = vec![format!("mtex.guest={guest}")];
    for o in opts {
        if !o.contains('=') || o.contains(char::is_whitespace) {
            bail!("--opt {o:?}: expected KEY=VALUE without spaces");
        }
        words.push(format!("mtex.{o}"));
    }
    // The kernel scenario traces every run: give it a budget to match unless one was given.
    if guest == "kernel" && !opts.iter().any(|o| o.starts_with("watchdog_ms=")) {
        words.push(format!("mtex.watchdog_ms={KERNEL_WATCHDOG_MS}"));
    }
    let line = words.join(" ");
    if guest == "kernel" {
        Scenario::parse(&line).map_err(|e| anyhow::anyhow!("{}", describe(e)))?;
    }
    HypOptions::parse(&line).map_err(|e| anyhow::anyhow!("{}", describe(e)))?;
    GuestOptions::parse(&line).map_err(|e| anyhow::anyhow!("{}", describe(e)))?;
    Ok(line)
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
}
