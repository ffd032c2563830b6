//! The UEFI path on QEMU with Debian's edk2: the loader chain-loads the hypervisor, which
//! discovers the machine from ACPI (as on a server) or from firmware's device tree, and the
//! report is the `-kernel` run's, counter for counter, wherever firmware put things.

use mtex::cli::esp::{self, OnError};
use mtex::images::{self, Images};
use mtex::model::report::Report;
use mtex::qemu::{self, RunConfig, TempDir};
use mtex_platform::BootPath;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

fn images() -> &'static (Images, PathBuf) {
    static IMAGES: OnceLock<(Images, PathBuf)> = OnceLock::new();
    IMAGES.get_or_init(|| {
        let i = images::build().expect("building the images");
        let l = images::build_loader().expect("building the loader");
        (i, l)
    })
}

/// A short kernel scenario: two policies × two workloads, every phase traced.
const SCENARIO: &str = "mtex.guest=kernel mtex.watchdog_ms=600000 \
                        mtex.policies=entry-tco,tcma1 mtex.workloads=getpid,futex-hash";

fn run(cfg: &RunConfig) -> (Report, Duration) {
    let start = Instant::now();
    let console = qemu::run(&images().0, cfg).expect("running QEMU");
    assert!(!console.timed_out, "host time limit hit:\n{}", console.text);
    (console.report(), start.elapsed())
}

fn esp(cmdline: &str) -> TempDir {
    esp_with(cmdline, OnError::Shutdown)
}

fn esp_with(cmdline: &str, on_error: OnError) -> TempDir {
    let dir = TempDir::new("test-esp").unwrap();
    let (i, loader) = images();
    esp::write(dir.path(), i, loader, cmdline, on_error).unwrap();
    dir
}

fn uefi(esp: &Path, acpi: bool, memory_mib: u32) -> RunConfig {
    let mut cfg = RunConfig {
        cmdline: SCENARIO.to_string(),
        timeout: Duration::from_secs(180),
        ..RunConfig::default()
    }
    .through_uefi(esp, acpi);
    cfg.memory_mib = memory_mib;
    cfg
}

/// The report as JSON without what names the boot path, host addresses or time: the Boot
/// record, timestamps (firmware's time shifts them), firmware's own console output.
fn comparable(r: &Report) -> Value {
    fn strip(v: &mut Value) {
        match v {
            Value::Object(m) => {
                for k in ["boot", "ts", "begin_ts", "end_ts", "other_output", "notes"] {
                    m.remove(k);
                }
                m.values_mut().for_each(strip);
            }
            Value::Array(a) => a.iter_mut().for_each(strip),
            _ => {}
        }
    }
    let mut v = serde_json::to_value(r).unwrap();
    strip(&mut v);
    v
}

fn ok(r: &Report) {
    assert!(r.succeeded(), "{}", mtex::output::matrix::text(r));
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    assert_eq!(r.phases.len(), 4, "one phase per policy x workload");
    assert!(r.phases.iter().all(|p| p.trace.is_some()));
}

#[test]
fn uefi_runs_report_what_the_kernel_path_reports() {
    let kernel = RunConfig {
        cmdline: SCENARIO.to_string(),
        timeout: Duration::from_secs(180),
        ..RunConfig::default()
    };
    let (base, _) = run(&kernel);
    ok(&base);
    assert_eq!(base.boot.unwrap().boot_path, BootPath::KernelDtb as u8);
    let want = comparable(&base);

    let dir = esp(SCENARIO);
    for (acpi, mib, path) in [
        (true, 1024, BootPath::UefiAcpi),
        (false, 1024, BootPath::UefiDtb),
        // Another RAM size: firmware puts everything elsewhere.
        (true, 3072, BootPath::UefiAcpi),
    ] {
        let (r, wall) = run(&uefi(dir.path(), acpi, mib));
        ok(&r);
        let b = r.boot.unwrap();
        assert_eq!(b.boot_path, path as u8, "acpi={acpi} -m {mib}M");
        assert_eq!(b.console, mtex_platform::qemu_virt::UART_BASE);
        // The loader's allocations: the hypervisor's memory is not behind guest RAM.
        let guest = b.guest_ram_pa..b.guest_ram_pa + mtex_platform::guest_vm::RAM_SIZE;
        assert!(
            b.hyp_end <= guest.start || b.hyp_start >= guest.end,
            "{b:?}"
        );
        assert_eq!(
            comparable(&r),
            want,
            "acpi={acpi} -m {mib}M differs from the -kernel run (in {wall:?})"
        );
        eprintln!(
            "acpi={acpi} -m {mib}M: guest RAM at {:#x}, hypervisor at {:#x}, {wall:?}",
            b.guest_ram_pa, b.hyp_start
        );
    }
}

#[test]
fn the_loader_started_at_el1_says_so_and_powers_off() {
    let dir = esp("mtex.guest=default");
    let mut cfg = uefi(dir.path(), true, 1024);
    cfg.virtualization = false;
    cfg.timeout = Duration::from_secs(60);
    let (r, wall) = run(&cfg);
    assert!(!r.succeeded());
    assert!(r.boot.is_none());
    assert!(
        r.problems
            .iter()
            .any(|p| p.contains("the UEFI loader stopped") && p.contains("EL1")),
        "{:?}\n{:?}",
        r.problems,
        r.other_output
    );
    assert!(wall < Duration::from_secs(30), "{wall:?}");
}

#[test]
fn by_default_the_loader_hands_an_error_back_to_the_firmware() {
    // `mtex esp`'s default, for a person at a server: the loader returns an error status and
    // firmware's boot manager goes on (here to its shell, whose startup script powers off).
    let dir = esp_with("mtex.guest=default", OnError::Return);
    std::fs::write(dir.path().join("startup.nsh"), "reset -s\r\n").unwrap();
    let mut cfg = uefi(dir.path(), true, 1024);
    cfg.virtualization = false;
    // The shell's 5 s countdown is a busy loop: under -icount it takes 5e9 instructions.
    cfg.icount = false;
    cfg.timeout = Duration::from_secs(60);
    let (r, wall) = run(&cfg);
    assert!(!r.succeeded());
    let lines = &r.other_output;
    let error = lines
        .iter()
        .position(|l| l.contains("mtex-loader: error: started at EL1"))
        .unwrap_or_else(|| panic!("no loader error in {lines:?}"));
    // Firmware took the error back and went on to its next boot option.
    assert!(
        lines[error..]
            .iter()
            .any(|l| l.contains("failed to start") && l.contains("Unsupported")),
        "{lines:?}"
    );
    assert!(wall < Duration::from_secs(20), "{wall:?}");
}

#[test]
fn a_missing_guest_image_is_named() {
    let dir = esp("mtex.guest=default");
    std::fs::remove_file(esp::boot_dir(dir.path()).join("mtex-guest.bin")).unwrap();
    let mut cfg = uefi(dir.path(), true, 1024);
    cfg.timeout = Duration::from_secs(60);
    let (r, wall) = run(&cfg);
    assert!(!r.succeeded());
    assert!(
        r.problems
            .iter()
            .any(|p| p.contains("the UEFI loader stopped") && p.contains("mtex-guest.bin")),
        "{:?}\n{:?}",
        r.problems,
        r.other_output
    );
    assert!(wall < Duration::from_secs(30), "{wall:?}");
}

#[test]
fn what_qemu_says_when_it_cannot_start_is_a_problem_of_the_run() {
    let missing = std::env::temp_dir().join(format!("mtex-no-such-esp-{}", std::process::id()));
    let mut cfg = uefi(&missing, true, 1024);
    cfg.timeout = Duration::from_secs(30);
    let (r, _) = run(&cfg);
    assert!(!r.succeeded());
    let p = r
        .problems
        .iter()
        .find(|p| p.starts_with("QEMU exited with status"))
        .unwrap_or_else(|| panic!("{:?}", r.problems));
    // QEMU's own message, naming what it could not open.
    assert!(p.contains(&missing.display().to_string()), "{p}");
}

/// Through the loader (ACPI's MADT names the CPUs), a machine with more CPUs than the
/// hypervisor's static heap holds: the loader reserves the secondary CPUs' EL2 memory, and
/// every CPU the guest starts comes up and goes off again.
#[test]
fn through_the_loader_every_cpu_of_a_64_cpu_machine_starts() {
    const CPUS: u32 = 64;
    let dir = esp("mtex.guest=every-cpu");
    let mut cfg = uefi(dir.path(), true, 2048);
    cfg.cpus = CPUS;
    cfg.cmdline = "mtex.guest=every-cpu".into();
    let (r, _) = run(&cfg);
    let others = CPUS - 1;
    for line in [
        format!("every-cpu started {others} of {others}"),
        format!("every-cpu off {others} of {others}"),
    ] {
        assert!(r.console.contains(&line), "{line}: {:#?}", r.console);
    }
    assert!(r.succeeded(), "{:?} {:#?}", r.problems, r.console);
    assert_eq!(r.power_calls.len(), 2 * others as usize);
    assert!(
        r.power_calls.iter().all(|c| c.result == 0),
        "{:?}",
        r.power_calls
    );
}
