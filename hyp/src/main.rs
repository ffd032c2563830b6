//! mtex-hyp: the EL2 hypervisor that boots the guest kernel, traps its MTE control writes and
//! streams report records to the host.
//!
//! Boot order: heap, the machine and the run from x0 (device tree or the UEFI loader's boot
//! information), console and options, EL2 MMU, stage 2, the guest's Image and device tree
//! into its RAM, traps, PMU, watchdog; then the guest is entered exactly as a Linux arm64
//! kernel would be. The image runs wherever it was loaded (it relocates itself, entry.rs).
#![no_std]
#![no_main]

extern crate alloc;

mod boot;
mod context;
mod debug;
mod doorbell;
mod entry;
mod exits;
mod fast_step;
mod fiq;
mod global;
mod guest_boot;
mod guest_clock;
mod heap;
mod hypercall;
mod id_regs;
mod linux_boot;
mod logger;
mod mmu;
mod oracle_mark;
mod phase;
mod pmu;
mod profile_table;
mod psci;
mod report;
mod smp;
mod stage2_roots;
mod state;
mod stepped_clock;
mod sysreg_trap;
mod tco_watch;
mod trace;
mod traps;
mod vtimer;
mod watchdog;

use mtex_abi::options::{self, HypOptions};
use mtex_abi::report::{ExitReason, Message};

unsafe extern "C" {
    static __hyp_start: u8;
    static __hyp_end: u8;
}

/// The hypervisor's own memory (image, bss, heap, stack): what the guest must never see.
pub fn hyp_region() -> mtex_platform::Region {
    // Only the addresses of these linker symbols are used, never their contents; they are
    // PC-relative, so they are where the image was loaded.
    let start = (&raw const __hyp_start) as u64;
    let end = (&raw const __hyp_end) as u64;
    mtex_platform::Region::new(start, end - start)
}

/// Rust entry, called by `entry::_start` with the firmware's x0: a device tree or the
/// loader's boot information.
extern "C" fn hyp_main(x0: u64) -> ! {
    heap::init();
    // Before anything that may report (a failed boot included): the report path uses it.
    fast_step::install_this_cpu();
    let boot = match boot::discover(x0) {
        Ok(b) => b,
        Err(e) => match e.console {
            Some(c) => {
                report::set_console(c);
                report::fail_boot(&mut report::Reporter::new(), e.why)
            }
            // No console to say it on: wait for the host's limit (or a person) to end it.
            None => loop {
                aarch64_cpu::asm::wfe();
            },
        },
    };
    report::set_console(boot.machine.console);
    let mut reporter = report::Reporter::new();

    let opts = match HypOptions::parse(&boot.cmdline) {
        Ok(o) => o,
        Err(e) => report::fail_boot_msg(&mut reporter, options::describe(e)),
    };
    // The host refuses unknown keys before it boots; a command line that reached here some
    // other way (a UEFI options file, a hand-written -append) is refused the same, rather
    // than leaving a default silently in force.
    if let Some(key) = options::unknown_key(&boot.cmdline) {
        let mut m = Message::new();
        m.push_str_truncating("unknown option mtex.");
        m.push_str_truncating(key);
        report::fail_boot_msg(&mut reporter, m);
    }

    logger::init(opts.log);
    let midr = arm_sysregs::el1::accessors::read_midr_el1().bits();
    let errata = mtex_platform::Errata::for_midr(midr);
    let m = &boot.machine;
    // The guest's CPUs are the machine's, by MPIDR; this one is on, the others off until the
    // guest starts them.
    let boot_cpu = {
        use mtex_platform::machine::MPIDR_AFFINITY;
        let me = arm_sysregs::el1::accessors::read_mpidr_el1().bits() & MPIDR_AFFINITY;
        match m.cpus().iter().position(|c| c & MPIDR_AFFINITY == me) {
            Some(i) => i,
            None => report::fail_boot(&mut reporter, "this CPU is not among the machine's CPUs"),
        }
    };
    log::info!(
        "booted by {}: console {:#x}, GICD {:#x}, GICR {:#x}+{:#x}, timers {}/{}, {} CPUs",
        boot.path.name(),
        m.console.base,
        m.gic.gicd,
        m.gic.gicr,
        m.gic.gicr_size,
        m.hyp_timer_intid,
        m.vtimer_intid,
        m.cpus().len()
    );
    log::info!(
        "hypervisor at {:#x}, guest RAM at {:#x} (guest {:#x}+{:#x})",
        hyp_region().base,
        boot.guest_ram.pa,
        boot.guest_ram.ipa.base,
        boot.guest_ram.ipa.size
    );
    log::debug!("MIDR_EL1 {midr:#x}: errata {errata:?}");
    let gic = mtex_platform::Region::new(m.gic.gicd, 0x1_0000);
    let gicr = mtex_platform::Region::new(m.gic.gicr, m.gic.gicr_size);
    let uart = mtex_platform::Region::new(m.console.base, 0x1000);
    let [staged_a, staged_b] = boot.staging;
    let mut normal = alloc::vec![hyp_region(), staged_a, staged_b];
    normal.extend(boot.guest_ram.host_ranges());
    normal.extend(boot.cpu_heap);
    mmu::enable_el2(&normal, &[uart, gic, gicr]);
    if let Some(r) = boot.cpu_heap {
        // SAFETY: free RAM outside the guest's window, the hypervisor and what was staged
        // (`boot::secondaries_heap`), just mapped at EL2 with the caches on; never in stage 2.
        unsafe { heap::add(r) };
        log::info!("heap: {:#x}+{:#x} for the secondary CPUs", r.base, r.size);
    }
    smp::check_heap(m.cpus().len(), boot.guest_ram.ipa.size, boot.cpu_heap);
    // Linux mode passes its UART and the GIC through; the built-in guest sees RAM only;
    // installed under the firmware, the guest sees everything but the hypervisor and the
    // doorbell page.
    let passed = match &boot.linux {
        Some(l) => alloc::vec![l.uart, gic, gicr],
        None => alloc::vec![],
    };
    let loaded = match (&boot.firmware, &boot.linux) {
        (Some(f), _) => {
            let heap = boot.cpu_heap.unwrap_or_default();
            mmu::enable_stage2_identity(&f.ram, &[hyp_region(), heap, f.doorbell], errata);
            Ok((f.resume.pc, 0))
        }
        (None, Some(l)) => {
            mmu::enable_stage2(boot.guest_ram, &passed, errata);
            linux_boot::load(&boot, l)
        }
        (None, None) => {
            mmu::enable_stage2(boot.guest_ram, &passed, errata);
            guest_boot::load(&boot)
        }
    };
    let (entry, guest_dtb) = match loaded {
        Ok(v) => v,
        Err(why) => report::fail_boot(&mut reporter, why),
    };

    // Installed under the firmware, the guest owns the machine as Linux mode's does.
    let linux = boot.linux.is_some() || boot.firmware.is_some();
    if linux {
        // The guest can read the records back through the doorbell (`mtex-work results`).
        reporter.keep_results();
    }
    let trap_mode = traps::configure_traps(opts.traps, errata, linux);
    debug::init();
    // The guest's PMU has the MTE events only in a run that can trace whole: not where every
    // traced phase is sampled (`mtex.sample`), nor where the guest traces nothing (the
    // built-in guest's `mtex.trace=0`, the PMU backend alone).
    let guest_events = opts
        .guest_pmu_events
        .filter(|_| opts.sample.is_none() && options::value(&boot.cmdline, "trace") != Some("0"));
    let pmu = pmu::Pmu::init(opts.pmu_events.as_slice(), guest_events);
    if let Some(event) = pmu::missing_required(pmu.as_ref(), opts.pmu_require.as_slice()) {
        let mut why = Message::new();
        let _ = core::fmt::Write::write_fmt(
            &mut report::Truncating(&mut why),
            format_args!(
                "PMU event {event:#06x} ({}) is required (mtex.pmu_require) but not supported",
                mtex_abi::report::pmu_event::name(event).unwrap_or("raw")
            ),
        );
        report::fail_boot_msg(&mut reporter, why);
    }
    if linux {
        // No interrupt reaches EL2 in Linux mode: the run is bounded by the host's watch of
        // the guest clock and its wall-time limit instead of the EL2 timer.
        linux_boot::pass_gic_through();
    } else {
        watchdog::arm(opts.watchdog_ms, m.gic, m.hyp_timer_intid, m.vtimer_intid);
    }

    let region = hyp_region();
    reporter.send(&mtex_abi::Record::Boot(mtex_abi::report::Boot {
        abi_version: mtex_abi::hypercall::ABI_VERSION,
        counter_hz: watchdog::counter_hz(),
        trap_mode,
        hyp_start: region.base,
        hyp_end: region.base + region.size,
        guest_entry: entry,
        guest_dtb,
        watchdog_ms: if linux { 0 } else { opts.watchdog_ms },
        pmu_instructions: pmu.is_some(),
        midr,
        boot_path: boot.path as u8,
        guest_ram_pa: boot.guest_ram.pa,
        console: m.console.base,
    }));

    reporter.set_pmu(pmu);
    match opts.selftest {
        Some(options::SelfTest::HypFault) => {
            // SAFETY: deliberately undefined: the EL2 vector must turn it into a record.
            unsafe { core::arch::asm!("udf #0x5e1f") };
        }
        Some(options::SelfTest::HypPanic) => panic!("self-test panic"),
        None => {}
    }
    if opts.guest_time == options::GuestTime::Coarse {
        fast_step::set_coarse((watchdog::counter_hz() / 10_000).max(1));
    }
    let mut hyp = state::Hyp::new(
        reporter,
        pmu,
        opts.watchdog_ms,
        boot.guest_ram,
        trace::block_granules(),
        opts.runs,
        opts.step,
    );
    hyp.set_cpus(m.cpus(), boot_cpu);
    if opts.profile {
        hyp.enable_profile(opts.profile_slots as usize, opts.stacks);
    }
    hyp.tco = tco_watch::Watcher::new(
        opts.tco_watch,
        boot.guest_ram,
        (mtex_platform::guest_vm::IMAGE_ADDR, boot.guest_image.size),
    );
    hyp.linux = linux;
    // The sampling timer is the watchdog's; in Linux modes, an FIQ routed for each sampled
    // window (`fiq.rs`).
    hyp.set_sampling(opts.sample);
    if linux {
        fiq::init(m.gic, m.hyp_timer_intid);
    }
    if let Some(f) = &boot.firmware {
        hyp.doorbell_ipa = f.doorbell.base;
    }
    if linux {
        hyp.vcpu().tracer.set_irqs_to_guest();
        hyp.tracer_config.irqs_to_guest = true;
    }
    global::HYP.init(hyp);
    match &boot.firmware {
        Some(f) => guest_boot::resume(&f.resume),
        None => guest_boot::enter(entry, guest_dtb),
    }
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    use core::fmt::Write;
    let mut message = Message::new();
    let _ = write!(report::Truncating(&mut message), "{}", info.message());
    if let Some(l) = info.location() {
        let _ = write!(
            report::Truncating(&mut message),
            " at {}:{}",
            l.file(),
            l.line()
        );
    }
    report::die(ExitReason::HypPanic { message })
}
