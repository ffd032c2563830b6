//! Install mode on QEMU with Debian's edk2 and ACPI, as on a server: the loader installs the
//! hypervisor under the firmware, the firmware goes on at EL1 and starts Debian's kernel
//! (its EFI stub) with an initramfs, and Linux boots under the hypervisor, which traps its
//! MTE control writes.

use mtex::cli::esp::{self, Install, Kernel, OnError};
use mtex::images;
use mtex::qemu::{self, RunConfig, TempDir};
use std::time::Duration;

use super::linux::ONE_AT_A_TIME;

#[test]
fn installed_under_edk2_the_firmware_boots_linux_whose_mte_writes_are_trapped() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let args = mtex::linux::Args {
        timeout: 300,
        uefi: true,
        ..super::linux::linux_args()
    };
    let p = mtex::linux::prepare(&args).expect("fetching and bundling");
    let built = images::build().unwrap();
    let loader = images::build_loader().unwrap();
    let dir = TempDir::new("test-install-esp").unwrap();
    esp::write_install(
        dir.path(),
        &Install {
            hyp_image: &built.hyp_image,
            loader: &loader,
            options: "",
            kernel: Some(Kernel {
                image: &p.kernel.image,
                initrd: &p.initrd,
                args: &mtex::linux::cmdline(&args, false, &[]),
            }),
            on_error: OnError::Shutdown,
        },
    )
    .unwrap();
    let mut cfg = RunConfig {
        timeout: Duration::from_secs(args.timeout),
        watch_budget_ms: Some(args.timeout * 1000),
        ..RunConfig::default()
    }
    .through_uefi(dir.path(), true);
    cfg.memory_mib = 1024;
    let console = qemu::run(&built, &cfg).unwrap();
    // Kept for `mtex parse` when the test fails.
    let _ = std::fs::write(
        std::env::temp_dir().join("mtex-install-console.log"),
        &console.bytes,
    );
    let text = &console.text;
    let r = console.report();
    assert!(r.succeeded(), "{}\n{text}", mtex::output::matrix::text(&r));
    // The loader installed and came back at EL1, and the firmware started the kernel.
    assert!(text.contains("the firmware at EL1"), "{text}");
    // Linux found the machine through ACPI, as the firmware described it, and ran its init.
    assert!(text.contains("ACPI: SPCR"), "{text}");
    assert!(text.contains("Run /init as init process"), "{text}");
    // The doorbell is a page the loader reserved, wherever the firmware gave it, and Linux
    // was told where: its command line carries the address the loader printed.
    let doorbell = text
        .split("doorbell at ")
        .nth(1)
        .and_then(|t| t.split_whitespace().next())
        .expect("the loader names the doorbell");
    assert_ne!(doorbell, "0xb000000", "{text}");
    assert!(
        text.lines().any(|l| l.contains("Kernel command line:")
            && l.contains(&format!("mtex.doorbell={doorbell}"))),
        "{text}"
    );
    // Its MTE set-up was trapped: the write that turns on allocation-tag access at EL1
    // (SCTLR_EL1.ATA, bit 43), from the kernel's own addresses (the top half), not the
    // firmware's or the EFI stub's (identity-mapped, low).
    let ata = r.writes.iter().find(|w| {
        w.register == "SCTLR_EL1" && w.at.el == 1 && w.old >> 43 & 1 == 0 && w.new >> 43 & 1 == 1
    });
    let ata = ata.unwrap_or_else(|| panic!("no SCTLR_EL1.ATA write: {:#?}", r.writes));
    assert!(ata.at.pc >= 0xffff_0000_0000_0000, "{ata:#?}");
    assert!(
        r.writes
            .iter()
            .any(|w| w.register == "TCR_EL1" && w.at.pc >= 0xffff_0000_0000_0000),
        "no TCR_EL1 write by the kernel"
    );
}

#[test]
fn mtex_linux_through_uefi_counts_a_window_the_oracle_agrees_with() {
    // `mtex linux --uefi`: the same report as the -kernel path, Linux booted by edk2 with
    // ACPI, the hypervisor installed under the firmware; a futex-hash window checked by
    // QEMU's own hooks.
    let (status, doc, text) =
        super::linux::linux(&["--uefi", "--oracle", "--workload", "futex-hash 20 1"]);
    assert_eq!(status, 0, "{text}");
    assert_eq!(doc["through_firmware"], true, "{text}");
    assert!(text.contains("booted by UEFI firmware (ACPI)"), "{text}");
    assert_eq!(doc["reached_init"], true);
    let w = super::linux::window(&doc, 1);
    super::linux::assert_oracle_agrees(w, &text);
    // 20 waits on one futex: each a kernel entry from EL0 with checked kernel reads.
    assert!(w["entries"]["sync_el0"].as_u64().unwrap_or(0) >= 20, "{w}");
}

/// An install-mode ESP with no kernel: the loader goes back to the firmware, whose next boot
/// option is its shell; `startup.nsh` says it ran and powers off (ResetSystem: PSCI
/// SYSTEM_OFF, through the hypervisor if it is there).
fn returning_esp(cfg: Option<&str>, options: &str) -> TempDir {
    let dir = TempDir::new("test-install-return").unwrap();
    esp::write_install(
        dir.path(),
        &Install {
            hyp_image: &images::build().unwrap().hyp_image,
            loader: &images::build_loader().unwrap(),
            options,
            kernel: None,
            on_error: OnError::Shutdown,
        },
    )
    .unwrap();
    // The test's own configuration in place of the one `mtex esp --install` writes.
    if let Some(cfg) = cfg {
        std::fs::write(esp::boot_dir(dir.path()).join("mtex.cfg"), cfg).unwrap();
    }
    std::fs::write(
        dir.path().join("startup.nsh"),
        "echo mtex-startup-ran\r\ndmpstore MtexDoorbell -guid b2f0a9c4-6d74-4578-9d0b-6f6f72626c6c\r\nreset -s\r\n",
    )
    .unwrap();
    dir
}

fn run_returning(dir: &TempDir) -> (mtex::model::report::Report, String) {
    run_returning_at(dir, true)
}

/// As `run_returning`, with the firmware at EL2 (`virtualization`) or at EL1.
fn run_returning_at(dir: &TempDir, virtualization: bool) -> (mtex::model::report::Report, String) {
    let mut cfg = RunConfig::default().through_uefi(dir.path(), true);
    cfg.virtualization = virtualization;
    cfg.memory_mib = 1024;
    // The shell's 5 s countdown is a busy loop: under -icount it takes 5e9 instructions.
    cfg.icount = false;
    cfg.timeout = Duration::from_secs(120);
    let console = qemu::run(&images::build().unwrap(), &cfg).unwrap();
    assert!(!console.timed_out, "{}", console.text);
    (console.report(), console.text)
}

#[test]
fn installed_with_no_kernel_the_firmware_boots_its_next_option_under_the_hypervisor() {
    let dir = returning_esp(None, "");
    let (r, text) = run_returning(&dir);
    let after = |what: &str, then: &str| {
        let at = text
            .find(what)
            .unwrap_or_else(|| panic!("no {what:?}:\n{text}"));
        assert!(
            text[at..].contains(then),
            "no {then:?} after {what:?}:\n{text}"
        );
    };
    after("the firmware at EL1", "back to the boot manager");
    // The boot manager went on to its next option (a success would have stopped it at its
    // menu), and that ran under the hypervisor: the shell's power-off is the run's end.
    after("back to the boot manager", "failed to start");
    after("failed to start", "mtex-startup-ran");
    // The doorbell's address is in a volatile variable for the OS (runtime access, no NV).
    // (The shell colours its words: each part is matched alone.)
    for part in [
        "RT+BS",
        "B2F0A9C4-6D74-4578-9D0B-6F6F72626C6C",
        "' DataSize = 0x08",
    ] {
        after("mtex-startup-ran", part);
    }
    assert!(r.succeeded(), "{}\n{text}", mtex::output::matrix::text(&r));
    let exit = r
        .summary
        .map(|s| mtex::model::report::describe_exit(&s.exit));
    assert!(
        exit.as_deref().is_some_and(|e| e.contains("SYSTEM_OFF")),
        "{exit:?}"
    );
}

#[test]
fn a_failed_install_is_named_and_the_machine_boots_as_it_would_have() {
    // Each mistake is found before anything is handed over: the loader says what, returns
    // the error, and the firmware goes on with no hypervisor (no record is ever sent).
    for (cfg, options, said, el2) in [
        (
            "mode = install\nkernel = missing.efi\n",
            "",
            "cannot load the kernel \\EFI\\BOOT\\missing.efi: NOT_FOUND",
            true,
        ),
        (
            "mode = install\n",
            "mtex.bogus=1",
            "mtex-options.txt: unknown option mtex.bogus",
            true,
        ),
        ("mode = installed\n", "", "bad value for key `mode`", true),
        // Firmware that runs UEFI applications at EL1 has no EL2 to give.
        ("mode = install\n", "", "started at EL1", false),
    ] {
        let dir = returning_esp(Some(cfg), options);
        let (r, text) = run_returning_at(&dir, el2);
        let at = text
            .find(said)
            .unwrap_or_else(|| panic!("no {said:?}:\n{text}"));
        assert!(!text.contains("installing the hypervisor"), "{text}");
        assert!(text[at..].contains("mtex-startup-ran"), "{text}");
        assert!(
            text.contains("No matching variables found"),
            "a variable was left:\n{text}"
        );
        assert!(r.boot.is_none(), "a record was sent:\n{text}");
    }
}

#[test]
fn through_uefi_linux_starts_its_second_cpu_from_acpi_and_a_window_counts_both() {
    // The CPUs come from ACPI's MADT and Linux starts them through the firmware's PSCI
    // conduit (FADT: SMC), which the hypervisor traps: CPU 1 runs under it and a window opened
    // with both CPUs on counts each.
    let (status, doc, text) = super::linux::linux(&[
        "--uefi",
        "--cpus",
        "2",
        "--workload",
        "mtex-work --tcf0 sync --window 1 futex-hash 10 2; mtex-work --window 2 clock 100 2",
    ]);
    assert_eq!(status, 0, "{text}");
    super::linux::assert_clock_reads_answered(&doc, &text, 2, 100, 2);
    let calls = doc["power_calls"].as_array().unwrap();
    assert!(
        calls.iter().any(
            |c| c["succeeded"] == true && c["call"].as_str().unwrap().contains("CPU_ON of 0x1")
        ),
        "{calls:?}"
    );
    let w = super::linux::window(&doc, 1);
    let cpus: Vec<u64> = w["cpus"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["cpu"].as_u64().unwrap())
        .collect();
    assert_eq!(cpus, [0, 1], "{w}");
}

/// A server's usual way: the loader installs and returns, and the boot manager's next option
/// (here the shell's startup.nsh, as a Boot#### entry would) starts Debian's kernel through
/// its EFI stub with an initramfs. Linux runs under the hypervisor: its MTE set-up is
/// trapped, its user space finds the doorbell through the EFI variable alone (the loader did
/// not start this kernel, so no command-line word names it), opens a window, and reads the
/// records back through the doorbell, whole, for `mtex parse`.
#[test]
fn installed_and_returned_the_next_boot_option_boots_linux_under_the_hypervisor() {
    use super::results::{BEGIN, END};
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let args = mtex::linux::Args {
        workload: Some(format!(
            "mtex-work --tcf0 sync --window 1 getpid 100; mtex-work results /tmp/results; \
             echo {BEGIN}; base64 /tmp/results; echo {END}"
        )),
        // A UEFI boot's initramfs: it loads efivarfs, where the doorbell's address is.
        uefi: true,
        ..super::linux::linux_args()
    };
    let p = mtex::linux::prepare(&args).expect("fetching and bundling");
    let dir = returning_esp(None, "");
    let boot = esp::boot_dir(dir.path());
    std::fs::copy(&p.kernel.image, boot.join("linux.efi")).unwrap();
    std::fs::copy(&p.initrd, boot.join("initrd.img")).unwrap();
    std::fs::write(
        dir.path().join("startup.nsh"),
        format!(
            "fs0:\r\n\\EFI\\BOOT\\linux.efi initrd=\\EFI\\BOOT\\initrd.img {}\r\n",
            mtex::linux::cmdline(&args, false, &[])
        ),
    )
    .unwrap();
    let (r, text) = run_returning(&dir);
    let after = |what: &str, then: &str| {
        let at = text
            .find(what)
            .unwrap_or_else(|| panic!("no {what:?}:\n{text}"));
        assert!(
            text[at..].contains(then),
            "no {then:?} after {what:?}:\n{text}"
        );
    };
    after("the firmware at EL1", "back to the boot manager");
    after("back to the boot manager", "ACPI: SPCR");
    after("ACPI: SPCR", "Run /init as init process");
    assert!(
        !text.contains("mtex.doorbell="),
        "the kernel was told the doorbell:\n{text}"
    );
    assert!(r.succeeded(), "{}\n{text}", mtex::output::matrix::text(&r));
    let ata = r.writes.iter().find(|w| {
        w.register == "SCTLR_EL1" && w.at.el == 1 && w.old >> 43 & 1 == 0 && w.new >> 43 & 1 == 1
    });
    assert!(
        ata.is_some_and(|w| w.at.pc >= 0xffff_0000_0000_0000),
        "{:#?}",
        r.writes
    );
    // The window was opened through the doorbell the EFI variable named, and counted.
    let w = r.phases.first().expect("window 1");
    assert_eq!(w.id, 1);
    assert!(w.trace.is_some_and(|t| t.instructions_el0 > 0), "{w:?}");
    // The records read back inside Linux: the same window, whole.
    let tmp = TempDir::new("test-install-results").unwrap();
    let taken = mtex::model::report::parse_bytes(&super::results::printed_file(&text, tmp.path()));
    assert!(taken.problems.is_empty(), "{:?}", taken.problems);
    assert_eq!(taken.phases.len(), 1, "{:?}", taken.phases);
    assert_eq!(taken.phases[0].trace, w.trace);
}
