//! Running QEMU to its end, or until the host ends it, and keeping what it printed: the
//! console as it came, QEMU's own errors, and why the host killed it, with where the guest
//! was (`qmp`). The report of a run starts here ([`Console::report`]).

use super::clock_watch::{ClockWatch, parse_clock_lag_ms};
use super::config::{BootMethod, FIRMWARE_CLOCK_MS, RunConfig, command};
use super::qmp::{Qmp, locate, qmp_socket_path};
use crate::images::Images;
use crate::model::report::{self, Report};
use anyhow::{Context, Result};
use std::io::Read;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// What a run printed and how it ended.
pub struct Console {
    /// The console as text (bytes that were not UTF-8 shown as U+FFFD).
    pub text: String,
    /// The console as it came: QEMU's stdout, then its stderr.
    pub bytes: Vec<u8>,
    /// QEMU's exit status, None if the host killed it.
    pub status: Option<i32>,
    /// The host killed QEMU (time limit, or a guest clock that showed the run could not end).
    pub timed_out: bool,
    /// Why the host killed QEMU and where the guest was: a problem of the run.
    pub killed: Option<String>,
    pub wall: Duration,
    /// QEMU's own stderr (also at the end of `bytes`): its error messages.
    pub stderr: String,
    /// What the oracle plugin wrote, for a run with it (empty if it wrote nothing).
    pub oracle: Option<String>,
    /// The plugin counted only each CPU's sampled share (`OracleRun::shares`).
    pub oracle_shares: bool,
}

impl Console {
    /// The report of the run: the console parsed, and the host's kill, if any, as a problem.
    pub fn report(&self) -> Report {
        let mut r = report::parse_bytes(&self.bytes);
        r.problems.extend(self.killed.clone());
        match &self.oracle {
            Some(text) if self.oracle_shares => crate::oracle_check::apply_shares(&mut r, text),
            Some(text) => crate::oracle_check::apply(&mut r, text),
            None => {}
        }
        // A run that did not finish: what QEMU itself said is often why (a bad -drive, a
        // missing firmware file, a machine option this QEMU lacks).
        if r.summary.is_none() && self.killed.is_none() {
            let said = self.stderr.trim();
            r.problems.push(match (self.status, said.is_empty()) {
                (Some(s), true) => format!("QEMU exited with status {s}"),
                (Some(s), false) => format!("QEMU exited with status {s}: {said}"),
                (None, _) => format!("QEMU ended by a signal: {said}"),
            });
        }
        r
    }
}

/// Runs QEMU to completion or until the host ends it: at the time limit, or, when the guest's
/// clock is watched, when it shows that no watchdog can end the run.
pub fn run(images: &Images, cfg: &RunConfig) -> Result<Console> {
    let qmp_path = qmp_socket_path();
    let _ = std::fs::remove_file(&qmp_path);
    let result = run_with_qmp(images, cfg, &qmp_path);
    let _ = std::fs::remove_file(&qmp_path);
    result
}

fn run_with_qmp(images: &Images, cfg: &RunConfig, qmp_path: &Path) -> Result<Console> {
    let start = Instant::now();
    let mut child = command(images, cfg)
        .arg("-qmp")
        .arg(format!("unix:{},server=on,wait=off", qmp_path.display()))
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
    let mut qmp: Option<Qmp> = None;
    // Through UEFI the clock also runs through firmware before the watchdog is armed.
    let firmware_ms = match cfg.boot {
        BootMethod::Kernel => 0,
        BootMethod::Uefi { .. } => FIRMWARE_CLOCK_MS,
    };
    let mut watch = cfg
        .watch_budget_ms
        .filter(|_| cfg.icount)
        .map(|b| ClockWatch::new(b + firmware_ms));
    let mut next_look = Duration::from_secs(1);
    let mut killed = None;
    let status = loop {
        if let Some(s) = child.try_wait()? {
            break s.code();
        }
        let now = start.elapsed();
        let mut reason = (now > cfg.timeout)
            .then(|| format!("host time limit of {} s reached", cfg.timeout.as_secs_f64()));
        if let Some(w) = watch
            .as_mut()
            .filter(|_| reason.is_none() && now >= next_look)
        {
            next_look = now + Duration::from_secs(1);
            if qmp.is_none() {
                // QEMU may not have made its socket yet: tried again at the next look.
                qmp = Qmp::connect(qmp_path, Duration::ZERO).ok();
            }
            let lag = qmp
                .as_mut()
                .and_then(|q| q.hmp("info jit").ok())
                .and_then(|t| parse_clock_lag_ms(&t));
            if let Some(lag) = lag {
                // The guest's clock: the host's since QEMU started, less the lag.
                let guest_ms = start.elapsed().as_millis() as i64 - lag;
                reason = w.observe(start.elapsed(), guest_ms);
            }
        }
        if let Some(reason) = reason {
            let place = locate(&mut qmp, qmp_path);
            let _ = child.kill();
            let _ = child.wait();
            killed = Some(format!("{reason}: QEMU killed; {place}"));
            break None;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    drop(qmp);
    let out = reader.join().unwrap_or_default();
    let err = err_reader.join().unwrap_or_default();
    let stderr = String::from_utf8_lossy(&err).into_owned();
    let mut bytes = out;
    bytes.extend_from_slice(&err);
    Ok(Console {
        text: String::from_utf8_lossy(&bytes).into_owned(),
        bytes,
        status,
        timed_out: killed.is_some(),
        killed,
        wall: start.elapsed(),
        stderr,
        oracle: cfg
            .oracle
            .as_ref()
            .map(|o| std::fs::read_to_string(&o.out).unwrap_or_default()),
        oracle_shares: cfg.oracle.as_ref().is_some_and(|o| o.shares),
    })
}
