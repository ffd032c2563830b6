//! How a run's machine is set up: the run's settings ([`RunConfig`]), the host's time limit
//! when none is given (long enough that the guest's watchdog always ends the run first),
//! and the QEMU command line they make. Apart from running QEMU, so that what a run is can
//! be read (and tested) without a QEMU to run it.

use crate::images::Images;
use mtex_abi::options::HypOptions;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

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
    /// CPUs (`-smp`): the hypervisor starts on one and gives the guest all of them.
    pub cpus: u32,
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
    /// Files handed to the machine through QEMU's fw_cfg (`-fw_cfg name=NAME,file=PATH`), for
    /// what must not be on QEMU's command line, which every user of the host can read: a
    /// snippet's code (`mtex_platform::fw_cfg::SNIPPET_FILE`).
    pub fw_cfg: Vec<(&'static str, PathBuf)>,
    /// QEMU's CPU model.
    pub cpu_model: CpuModel,
}

/// The CPU QEMU gives the guest: its `max` model (every feature QEMU implements, MTE among
/// them), whole or without the scalable vector extensions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CpuModel {
    /// `-cpu max`: with SVE and SME.
    #[default]
    Max,
    /// `-cpu max,sve=off,sme=off`: as AmpereOne, which has neither. Linux then uses no SVE,
    /// nor does glibc (its string functions choose by the hardware capabilities Linux
    /// gives), so no SVE load or store reaches the trace, whose decoder does not model them.
    MaxWithoutSve,
}

impl CpuModel {
    /// The value of QEMU's `-cpu`.
    pub fn qemu_arg(self) -> &'static str {
        match self {
            Self::Max => "max",
            Self::MaxWithoutSve => "max,sve=off,sme=off",
        }
    }

    /// How a report names it.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Max => "QEMU max, with SVE and SME",
            Self::MaxWithoutSve => "QEMU max without SVE and SME",
        }
    }
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
            cpus: 1,
            watch_budget_ms: None,
            boot: BootMethod::Kernel,
            virtualization: true,
            second_serial: None,
            oracle: None,
            fw_cfg: Vec::new(),
            cpu_model: CpuModel::Max,
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
            // The kernel's scenario on several CPUs (`mtex.cpus`) needs them; no other
            // program reads the key.
            cpus: match mtex_abi::options::GuestOptions::parse(&cmdline) {
                Ok(g) if g.program == mtex_abi::options::GuestProgram::Kernel => {
                    mtex_abi::scenario::Scenario::parse(&cmdline).map_or(1, |s| s.cpus)
                }
                _ => 1,
            },
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
        cfg.cpu_model.qemu_arg(),
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
    c.arg("-smp").arg(cfg.cpus.to_string());
    if let Some(path) = &cfg.second_serial {
        c.arg("-serial").arg(format!("file:{}", path.display()));
    }
    if cfg.icount {
        c.args(["-icount", "shift=0,sleep=off"]);
    }
    for (name, file) in &cfg.fw_cfg {
        // QEMU's option syntax: a comma inside a value is written twice.
        let file = file.display().to_string().replace(',', ",,");
        c.arg("-fw_cfg").arg(format!("name={name},file={file}"));
    }
    if let Some(o) = &cfg.oracle {
        // Nothing stale is read as this run's.
        let _ = std::fs::remove_file(&o.out);
        let hyp = match &cfg.boot {
            BootMethod::Kernel => hyp_code(&images.hyp_image),
            _ => None,
        };
        c.arg("-plugin").arg(o.qemu_arg(hyp));
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

/// Where QEMU's `-kernel` puts the hypervisor's code: RAM's base plus the Image header's
/// `text_offset`, for the file's length (what follows it is the image's zeroed memory).
fn hyp_code(image: &std::path::Path) -> Option<(u64, u64)> {
    let bytes = std::fs::read(image).ok()?;
    let len = bytes.len() as u64;
    let h = mtex_platform::arm64_image::parse(&bytes, len).ok()?;
    let start = mtex_platform::qemu_virt::RAM_BASE + h.text_offset;
    Some((start, start + len))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::qemu::{KERNEL_WATCHDOG_MS, cmdline};

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
    fn only_the_kernel_program_gets_the_cpus_its_scenario_asks_for() {
        let smp = "mtex.cpus=2 mtex.hz=0 mtex.trace=only mtex.workloads=getpid";
        let cpus = |line: String| RunConfig::with_default_limits(line, true).cpus;
        assert_eq!(cpus(format!("mtex.guest=kernel {smp}")), 2);
        assert_eq!(cpus(smp.to_string()), 2);
        assert_eq!(cpus(format!("mtex.guest=controls {smp}")), 1);
    }

    #[test]
    fn the_cpu_model_is_what_qemu_is_given() {
        let images = Images {
            hyp_elf: "hyp.elf".into(),
            hyp_image: "hyp".into(),
            guest_image: "guest".into(),
            guest_elf: "guest.elf".into(),
        };
        let cpu = |m: CpuModel| {
            let cfg = RunConfig {
                cpu_model: m,
                ..RunConfig::default()
            };
            let c = command(&images, &cfg);
            let args: Vec<_> = c
                .get_args()
                .map(|a| a.to_string_lossy().into_owned())
                .collect();
            let at = args.iter().position(|a| a == "-cpu").expect("-cpu");
            args[at + 1].clone()
        };
        assert_eq!(cpu(CpuModel::default()), "max");
        assert_eq!(cpu(CpuModel::MaxWithoutSve), "max,sve=off,sme=off");
    }
}
