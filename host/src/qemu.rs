//! Booting QEMU and collecting its console, always within a time limit. When the host has to
//! end a run, it first asks QEMU (over QMP) where the guest was, so that the report says it.

use crate::images::Images;
use crate::report::{self, Report};
use anyhow::{Context, Result, anyhow, bail};
use mtex_abi::options::{self, GuestOptions, HypOptions, KNOWN_KEYS, OptionError};
use mtex_abi::scenario::Scenario;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// How to run the machine.
#[derive(Clone, Debug)]
pub struct RunConfig {
    /// The kernel command line (`mtex.*` options for hypervisor and guest).
    pub cmdline: String,
    /// `-icount shift=0`: deterministic instruction counts and timestamps.
    pub icount: bool,
    /// Host-side limit in wall time; QEMU is killed past it (after saying where the guest was).
    pub timeout: Duration,
    /// Guest RAM in MiB.
    pub memory_mib: u32,
    /// The guest's watchdog budget, to also watch the guest's clock under `-icount` (through
    /// QMP, once a second) and end a run that no watchdog can end any more: one whose clock
    /// stopped (nothing retires) or ran past the budget without the run ending. None: the wall
    /// limit only.
    pub watch_budget_ms: Option<u64>,
    /// How the hypervisor is started.
    pub boot: BootMethod,
    /// `virtualization=on`: EL2 exists. Off only to test that the loader refuses EL1.
    pub virtualization: bool,
    /// A second UART, written to this file: Linux mode's console for Linux itself, so that
    /// its text never shares the report UART's stream.
    pub second_serial: Option<PathBuf>,
    /// The oracle plugin, whose check `Console::report` applies (`crate::oracle_check`).
    pub oracle: Option<crate::oracle_check::OracleRun>,
}

/// How QEMU starts the hypervisor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BootMethod {
    /// `-kernel` (the hypervisor's Image) and `-initrd` (the guest's): QEMU's own boot
    /// loader, a device tree in x0.
    Kernel,
    /// Debian's edk2 firmware boots the ESP tree in `esp` (`mtex esp`) from a virtual FAT
    /// disk; the UEFI loader chain-loads the hypervisor. `acpi`: firmware describes the
    /// machine with ACPI only, as a server does; otherwise with a device tree.
    Uefi { esp: PathBuf, acpi: bool },
}

/// Debian's edk2 build for QEMU's virt board (package qemu-efi-aarch64).
pub const EDK2_FIRMWARE: &str = "/usr/share/qemu-efi-aarch64/QEMU_EFI.fd";

/// Guest counter time the firmware may use before the hypervisor arms its watchdog, added
/// to the budget the guest's clock is held to on the UEFI path.
pub const FIRMWARE_CLOCK_MS: u64 = 20_000;

impl Default for RunConfig {
    fn default() -> Self {
        Self {
            cmdline: String::new(),
            icount: true,
            timeout: Duration::from_secs(60),
            memory_mib: 512,
            watch_budget_ms: None,
            boot: BootMethod::Kernel,
            virtualization: true,
            second_serial: None,
            oracle: None,
        }
    }
}

/// `cmdline` with `mtex.guest_time=coarse` added when QEMU runs without `-icount` and the
/// line does not choose: there, every CNTVOFF_EL2 write makes QEMU re-arm the guest's timer
/// and wake its I/O thread (hyp/src/entry.rs, guest time), which made a traced kernel matrix
/// 15 times slower; and without `-icount` the guest's time is not exact anyway.
pub fn guest_time_for(cmdline: &str, icount: bool) -> String {
    if icount || mtex_abi::options::value(cmdline, "guest_time").is_some() {
        cmdline.to_string()
    } else {
        format!("{cmdline} mtex.guest_time=coarse")
            .trim_start()
            .to_string()
    }
}

impl RunConfig {
    /// A run of `cmdline` with the host's limits derived from the watchdog budget the command
    /// line gives the guest ([`default_timeout`], and the guest's clock watched).
    pub fn with_default_limits(cmdline: String, icount: bool) -> Self {
        let budget_ms =
            HypOptions::parse(&cmdline).map_or(HypOptions::DEFAULT_WATCHDOG_MS, |o| o.watchdog_ms);
        Self {
            // The ESP of a --uefi run carries the line: it must say so itself.
            cmdline: guest_time_for(&cmdline, icount),
            icount,
            timeout: default_timeout(budget_ms, icount),
            watch_budget_ms: Some(budget_ms),
            ..Self::default()
        }
    }
}

impl RunConfig {
    /// The same run, booted by edk2 from the ESP tree in `esp`. Firmware needs its share of
    /// RAM: at least 1 GiB.
    pub fn through_uefi(mut self, esp: &Path, acpi: bool) -> Self {
        self.boot = BootMethod::Uefi {
            esp: esp.to_path_buf(),
            acpi,
        };
        self.memory_mib = self.memory_mib.max(1024);
        self
    }
}

/// A directory removed when dropped (the ESP of a `--uefi` run).
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(what: &str) -> Result<Self> {
        static N: AtomicU32 = AtomicU32::new(0);
        let p = std::env::temp_dir().join(format!(
            "mtex-{what}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&p).with_context(|| format!("creating {}", p.display()))?;
        Ok(TempDir(p))
    }
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Host time per second of guest counter time, at most, measured on QEMU 10.0 here with
/// `-icount shift=0` (the counter advances one tick per instruction, at CNTFRQ = 1 GHz): plain
/// code 5-10x, a single-stepped phase 22x (the kernel matrix: 0.91 s of counter in 20 s), a
/// loop of instructions that each trap to EL2 (WFE, YIELD) 117-157x; with some headroom.
pub const WALL_PER_GUEST_ICOUNT: u64 = 200;
/// Without `-icount` the counter is the host's clock while the machine runs.
pub const WALL_PER_GUEST_REALTIME: u64 = 2;
/// Starting QEMU, booting the hypervisor and sending the last records, on a slow host.
pub const HOST_MARGIN: Duration = Duration::from_secs(30);

/// The host's time limit when none is given: long enough that a guest's watchdog always ends
/// the run first, with its record, whatever the guest does: `HOST_MARGIN + budget x (host
/// time per guest second, at most)`. The watchdog counts the counter's time, and under
/// `-icount` that is instructions retired, which a trap-heavy guest retires 150 times slower
/// than the host's clock: so the limit is long (30 s + 200 x 10 s = 34 min for the default
/// budget, 33 h for the kernel scenario's 600 s). It is the backstop; what ends a hopeless run early is
/// watching the guest's clock ([`RunConfig::watch_budget_ms`]).
pub fn default_timeout(budget_ms: u64, icount: bool) -> Duration {
    let ratio = if icount {
        WALL_PER_GUEST_ICOUNT
    } else {
        WALL_PER_GUEST_REALTIME
    };
    HOST_MARGIN + Duration::from_millis(budget_ms.saturating_mul(ratio))
}

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
}

impl Console {
    /// The report of the run: the console parsed, and the host's kill, if any, as a problem.
    pub fn report(&self) -> Report {
        let mut r = report::parse_bytes(&self.bytes);
        r.problems.extend(self.killed.clone());
        if let Some(text) = &self.oracle {
            crate::oracle_check::apply(&mut r, text);
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

/// The CPU's state as QEMU's `info registers` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuState {
    pub pc: u64,
    pub pstate: u64,
    /// Syndrome and fault-address registers, when QEMU shows them (`ESR_EL2=...`; QEMU 10.0
    /// shows none for AArch64).
    pub faults: Vec<(String, u64)>,
}

impl CpuState {
    /// PSTATE.EL.
    pub fn el(&self) -> u8 {
        ((self.pstate >> 2) & 3) as u8
    }

    /// `guest at pc 0x41005fa8, EL1 (PSTATE 0x600003c5)`, or the hypervisor's place.
    pub fn describe(&self) -> String {
        let mut s = if self.el() >= 2 {
            format!(
                "CPU in the hypervisor at pc {:#x}, EL{}",
                self.pc,
                self.el()
            )
        } else {
            format!("guest at pc {:#x}, EL{}", self.pc, self.el())
        };
        s.push_str(&format!(" (PSTATE {:#x})", self.pstate));
        for (name, v) in &self.faults {
            s.push_str(&format!(", {name} {v:#x}"));
        }
        s
    }
}

/// PC, PSTATE and any ESR/FAR registers from QEMU's `info registers` (AArch64). None when
/// PC or PSTATE is missing.
pub fn parse_registers(text: &str) -> Option<CpuState> {
    let mut pc = None;
    let mut pstate = None;
    let mut faults = Vec::new();
    for token in text.split_whitespace() {
        let Some((name, value)) = token.split_once('=') else {
            continue;
        };
        let Ok(v) = u64::from_str_radix(value, 16) else {
            continue;
        };
        match name {
            "PC" => pc = pc.or(Some(v)),
            "PSTATE" => pstate = pstate.or(Some(v)),
            _ if name.starts_with("ESR") || name.starts_with("FAR") => {
                faults.push((name.to_string(), v))
            }
            _ => {}
        }
    }
    Some(CpuState {
        pc: pc?,
        pstate: pstate?,
        faults,
    })
}

/// `Host - Guest clock  2653 ms` from QEMU's `info jit` (shown under `-icount`): how far the
/// guest's clock is behind the host's since the machine started.
pub fn parse_clock_lag_ms(info_jit: &str) -> Option<i64> {
    info_jit.lines().find_map(|l| {
        l.trim()
            .strip_prefix("Host - Guest clock")?
            .trim()
            .strip_suffix("ms")?
            .trim()
            .parse()
            .ok()
    })
}

/// Host time without the guest's clock advancing after which no watchdog can end the run.
pub const CLOCK_STALL: Duration = Duration::from_secs(10);
/// Guest time that counts as the clock advancing (the estimate's noise is a few ms; a guest
/// advancing this little in [`CLOCK_STALL`] would run 500 times slower than the host).
pub const CLOCK_PROGRESS_MS: i64 = 20;
/// Guest time past the budget after which the watchdog has failed (it is armed within the
/// first 0.1 s; the estimate errs by QEMU's start-up time, well below a second).
pub const CLOCK_PAST_BUDGET_MS: i64 = 2000;

/// The guest's clock, sampled: says when a watchdog can no longer end the run.
#[derive(Clone, Debug)]
pub struct ClockWatch {
    budget_ms: u64,
    /// The last time the clock advanced: host time, guest ms.
    progress: Option<(Duration, i64)>,
}

impl ClockWatch {
    pub fn new(budget_ms: u64) -> Self {
        Self {
            budget_ms,
            progress: None,
        }
    }

    /// The guest's clock read `guest_ms` at host time `host` (both since the machine started):
    /// why the run must be ended, if it must.
    pub fn observe(&mut self, host: Duration, guest_ms: i64) -> Option<String> {
        if guest_ms > self.budget_ms as i64 + CLOCK_PAST_BUDGET_MS {
            return Some(format!(
                "the guest's clock reached {guest_ms} ms, past its watchdog budget of {} ms, and the run did not end",
                self.budget_ms
            ));
        }
        match self.progress {
            Some((_, g)) if guest_ms > g + CLOCK_PROGRESS_MS => {
                self.progress = Some((host, guest_ms))
            }
            Some((since, g)) if host.saturating_sub(since) >= CLOCK_STALL => {
                return Some(format!(
                    "the guest's clock stopped at {g} ms for {} s of host time: nothing retires, so no watchdog can end the run",
                    host.saturating_sub(since).as_secs()
                ));
            }
            Some(_) => {}
            None => self.progress = Some((host, guest_ms)),
        }
        None
    }
}

/// A QMP connection to QEMU, in command mode.
struct Qmp {
    stream: BufReader<UnixStream>,
}

impl Qmp {
    /// Connects to QEMU's QMP socket (trying for up to `within` while QEMU creates it) and
    /// enters command mode. Every read and write is bounded: a wedged QEMU is an error.
    fn connect(path: &Path, within: Duration) -> Result<Self, String> {
        let start = Instant::now();
        let stream = loop {
            match UnixStream::connect(path) {
                Ok(s) => break s,
                Err(e) if start.elapsed() >= within => return Err(format!("connecting: {e}")),
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        };
        let limit = Some(Duration::from_secs(2));
        stream
            .set_read_timeout(limit)
            .and_then(|()| stream.set_write_timeout(limit))
            .map_err(|e| e.to_string())?;
        let mut q = Self {
            stream: BufReader::new(stream),
        };
        q.line()?; // the greeting
        q.execute(serde_json::json!({"execute": "qmp_capabilities"}))?;
        Ok(q)
    }

    fn line(&mut self) -> Result<serde_json::Value, String> {
        let mut l = String::new();
        match self.stream.read_line(&mut l) {
            Ok(0) => Err("QEMU closed the connection".into()),
            Ok(_) => serde_json::from_str(&l).map_err(|e| format!("bad reply {l:?}: {e}")),
            Err(e) => Err(format!("reading: {e}")),
        }
    }

    /// Sends a command and returns its `return` value (events in between are skipped).
    fn execute(&mut self, cmd: serde_json::Value) -> Result<serde_json::Value, String> {
        let mut text = cmd.to_string();
        text.push('\n');
        self.stream
            .get_mut()
            .write_all(text.as_bytes())
            .map_err(|e| format!("writing: {e}"))?;
        loop {
            let mut reply = self.line()?;
            if let Some(r) = reply.get_mut("return") {
                return Ok(r.take());
            }
            if let Some(e) = reply.get("error") {
                return Err(format!("{cmd}: {e}"));
            }
        }
    }

    /// A human-monitor command's output.
    fn hmp(&mut self, line: &str) -> Result<String, String> {
        let r = self.execute(serde_json::json!({
            "execute": "human-monitor-command",
            "arguments": {"command-line": line},
        }))?;
        r.as_str()
            .map(String::from)
            .ok_or_else(|| format!("{line}: no text in the reply"))
    }
}

/// Stops the machine and asks where the CPU is: `guest at pc ..., EL1 (...)`, or why that is
/// not known. Called just before QEMU is killed.
fn locate(qmp: &mut Option<Qmp>, path: &Path) -> String {
    let q = match qmp {
        Some(q) => q,
        None => match Qmp::connect(path, Duration::from_secs(1)) {
            Ok(q) => qmp.insert(q),
            Err(e) => return format!("where the guest was is unknown (QMP: {e})"),
        },
    };
    // Stopped, the CPU's registers are the place it was in, not a moment of a moving run.
    let regs = q
        .execute(serde_json::json!({"execute": "stop"}))
        .and_then(|_| q.hmp("info registers"));
    match regs {
        Ok(text) => match parse_registers(&text) {
            Some(cpu) => cpu.describe(),
            None => format!(
                "where the guest was is unknown (QMP: no PC/PSTATE in {:?})",
                text.lines().next().unwrap_or_default()
            ),
        },
        Err(e) => format!("where the guest was is unknown (QMP: {e})"),
    }
}

/// A path for QEMU's QMP socket, unique to this run (tests run several at once).
fn qmp_socket_path() -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    let name = format!(
        "mtex-qmp-{}-{}.sock",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    );
    let dir = std::env::temp_dir();
    // A Unix socket's path is at most 107 bytes.
    if dir.as_os_str().len() + name.len() < 100 {
        dir.join(name)
    } else {
        Path::new("/tmp").join(name)
    }
}

/// The QEMU command line for a run.
pub fn command(images: &Images, cfg: &RunConfig) -> Command {
    let mut c = Command::new("qemu-system-aarch64");
    let acpi = match &cfg.boot {
        BootMethod::Kernel => "",
        BootMethod::Uefi { acpi: true, .. } => ",acpi=on",
        BootMethod::Uefi { acpi: false, .. } => ",acpi=off",
    };
    let virt = if cfg.virtualization { "on" } else { "off" };
    c.args([
        "-machine",
        &format!("virt,virtualization={virt},mte=on,gic-version=3{acpi}"),
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
    // The guest's random numbers (RNDR, from which Linux initialises its generator, and IRG)
    // come from a fixed `-seed`: without it a Linux run is not repeatable, even under -icount.
    c.args(["-seed", "1"]);
    if let Some(path) = &cfg.second_serial {
        c.arg("-serial").arg(format!("file:{}", path.display()));
    }
    if cfg.icount {
        c.args(["-icount", "shift=0,sleep=off"]);
    }
    if let Some(o) = &cfg.oracle {
        // Nothing stale is read as this run's.
        let _ = std::fs::remove_file(&o.out);
        c.arg("-plugin").arg(o.qemu_arg());
    }
    match &cfg.boot {
        BootMethod::Kernel => {
            // The hypervisor is an arm64 Image, which QEMU loads as it would Linux (RAM base
            // plus the header's text_offset, x0 = its device tree); the guest's Image travels
            // as the initrd, named by the tree's /chosen/linux,initrd-*. No address is given.
            c.arg("-kernel").arg(&images.hyp_image);
            c.arg("-initrd").arg(&images.guest_image);
            // QEMU refuses an empty -append; a lone space is an empty command line.
            let line = guest_time_for(&cfg.cmdline, cfg.icount);
            c.arg("-append")
                .arg(if line.is_empty() { " " } else { &line });
        }
        BootMethod::Uefi { esp, .. } => {
            // The ESP directory as a FAT disk (QEMU's vvfat; edk2 does not boot a read-only
            // one, so it may write there: it is a fresh temporary tree); the options are in
            // it (`mtex esp`), not on QEMU's command line. The boot menu with no timeout and
            // no network keep firmware to about a second: it boots the removable-media path
            // EFI/BOOT/BOOTAA64.EFI at once.
            c.args(["-bios", EDK2_FIRMWARE]);
            c.arg("-drive").arg(format!(
                "file=fat:rw:{},format=raw,if=virtio",
                esp.display()
            ));
            c.args(["-boot", "menu=on,splash-time=0"]);
        }
    }
    c
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
    fn guest_time_is_coarse_only_without_icount_and_unless_chosen() {
        assert_eq!(guest_time_for("mtex.guest=trace", true), "mtex.guest=trace");
        assert_eq!(
            guest_time_for("mtex.guest=trace", false),
            "mtex.guest=trace mtex.guest_time=coarse"
        );
        assert_eq!(guest_time_for("", false), "mtex.guest_time=coarse");
        let chosen = "mtex.guest_time=exact";
        assert_eq!(guest_time_for(chosen, false), chosen);
    }

    /// QEMU 10.0's `info registers` for AArch64 (vector registers cut).
    const INFO_REGISTERS: &str = "CPU#0
 PC=00000000410057a0 X00=00000000000003e8 X01=0000000000000004
X02=000000004112aee0 X03=0000000000000000 X04=0000000000000000
X29=0000000000000000 X30=0000000041001e6c  SP=000000004112a540
PSTATE=600003c5 -ZC- EL1h  SVCR=00000000 --  BTYPE=0     FPCR=00000000 FPSR=00000000
Q00=0000000000000000:0000000000000000 Q01=0000000000000000:0000000000000000
";

    #[test]
    fn the_place_of_the_cpu_is_read_from_info_registers() {
        let cpu = parse_registers(INFO_REGISTERS).unwrap();
        assert_eq!(
            (cpu.pc, cpu.pstate, cpu.el()),
            (0x4100_57a0, 0x6000_03c5, 1)
        );
        assert_eq!(
            cpu.describe(),
            "guest at pc 0x410057a0, EL1 (PSTATE 0x600003c5)"
        );
        // In the hypervisor, with syndrome registers shown.
        let el2 = INFO_REGISTERS
            .replace("PSTATE=600003c5", "PSTATE=000003c9")
            .replace("BTYPE=0", "ESR_EL2=5a000000 FAR_EL2=40001000");
        assert_eq!(
            parse_registers(&el2).unwrap().describe(),
            "CPU in the hypervisor at pc 0x410057a0, EL2 (PSTATE 0x3c9), ESR_EL2 0x5a000000, FAR_EL2 0x40001000"
        );
        assert_eq!(parse_registers("CPU#0\n X00=0\n"), None);
        assert_eq!(parse_registers(""), None);
    }

    #[test]
    fn the_guest_clock_lag_is_read_from_info_jit() {
        let text = "Statistics:\nTB flush count      0\n[TCG profiler not compiled]\n\
                    Host - Guest clock  2653 ms\nMax guest delay     NA\n";
        assert_eq!(parse_clock_lag_ms(text), Some(2653));
        assert_eq!(parse_clock_lag_ms("Host - Guest clock  -12 ms"), Some(-12));
        // Without -icount QEMU prints no such line.
        assert_eq!(parse_clock_lag_ms("TB count            1813\n"), None);
    }

    #[test]
    fn a_clock_that_stops_or_passes_the_budget_ends_the_run() {
        let s = Duration::from_secs;
        let mut w = ClockWatch::new(10_000);
        assert_eq!(w.observe(s(1), 40), None);
        // Advancing slowly is progress (a trap-heavy guest: 30 ms in 9 s).
        assert_eq!(w.observe(s(9), 70), None);
        // Noise is not progress; a stop of CLOCK_STALL is the end.
        assert_eq!(w.observe(s(12), 75), None);
        assert_eq!(w.observe(s(18), 70), None);
        let stop = w.observe(s(19), 80).unwrap();
        assert_eq!(
            stop,
            "the guest's clock stopped at 70 ms for 10 s of host time: nothing retires, so no watchdog can end the run"
        );
        let mut w = ClockWatch::new(10_000);
        assert_eq!(w.observe(s(1), 12_000), None);
        let past = w.observe(s(2), 12_001).unwrap();
        assert!(
            past.starts_with(
                "the guest's clock reached 12001 ms, past its watchdog budget of 10000 ms"
            ),
            "{past}"
        );
    }

    #[test]
    fn the_default_host_limit_outlasts_the_watchdog() {
        // The slowest guest measured, a trap on every instruction, runs 157 times slower than
        // the host's clock under -icount: the default limit leaves it its whole budget.
        for budget in [50, 10_000, KERNEL_WATCHDOG_MS, 3_600_000] {
            let limit = default_timeout(budget, true);
            assert!(limit > Duration::from_millis(budget * 157), "{budget}");
            let limit = default_timeout(budget, false);
            assert!(limit > Duration::from_millis(budget) + Duration::from_secs(10));
        }
        assert_eq!(default_timeout(10_000, true), Duration::from_secs(2030));
        let cfg = RunConfig::with_default_limits(cmdline("kernel", &[]).unwrap(), true);
        assert_eq!(cfg.watch_budget_ms, Some(KERNEL_WATCHDOG_MS));
        assert_eq!(cfg.timeout, default_timeout(KERNEL_WATCHDOG_MS, true));
        let line = cmdline("spin", &["watchdog_ms=200".into()]).unwrap();
        let cfg = RunConfig::with_default_limits(line, false);
        assert_eq!(cfg.timeout, Duration::from_millis(30_400));
        let cfg = RunConfig::with_default_limits("mtex.guest=spin".into(), true);
        assert_eq!(cfg.watch_budget_ms, Some(HypOptions::DEFAULT_WATCHDOG_MS));
    }

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
