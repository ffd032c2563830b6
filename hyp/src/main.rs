//! mtex-hyp: the EL2 hypervisor that boots the guest kernel, traps its MTE control writes and
//! streams report records to the host.
//!
//! Boot order: heap and console, device tree and options, EL2 MMU, stage 2, traps, PMU,
//! watchdog, then the guest is entered exactly as a Linux arm64 kernel would be.
#![no_std]
#![no_main]

extern crate alloc;

mod context;
mod debug;
mod entry;
mod exits;
mod fast_step;
mod global;
mod guest_boot;
mod heap;
mod hypercall;
mod id_regs;
mod mmu;
mod pmu;
mod psci;
mod report;
mod state;
mod sysreg_trap;
mod trace;
mod vtimer;
mod watchdog;

use mtex_abi::options::{self, HypOptions};
use mtex_abi::report::{ExitReason, Message};
use mtex_platform::Platform;

/// The board this binary is built for.
pub type Board = mtex_platform::QemuVirt;

unsafe extern "C" {
    static __hyp_start: u8;
    static __hyp_end: u8;
}

/// The hypervisor's own memory: what the guest must never see.
pub fn hyp_region() -> mtex_dt::Region {
    // Only the addresses of these linker symbols are used, never their contents.
    let start = (&raw const __hyp_start) as u64;
    let end = (&raw const __hyp_end) as u64;
    mtex_dt::Region {
        base: start,
        size: end - start,
    }
}

/// Rust entry, called by `entry::_start` with the firmware's x0 (a device tree, or 0).
extern "C" fn hyp_main(x0: u64) -> ! {
    heap::init();
    let mut reporter = report::Reporter::new();

    let dtb = match guest_boot::find_dtb(x0) {
        Some(d) => d,
        None => report::fail_boot(&mut reporter, "no device tree in x0 or at the start of RAM"),
    };
    // What the hypervisor needs from the tree, copied out: no borrow of it outlives this.
    let (opts, ram) = guest_boot::with_dtb(&dtb, |tree| {
        let info = match mtex_dt::boot_info(tree) {
            Ok(i) => i,
            Err(_) => report::fail_boot(&mut reporter, "the device tree does not parse"),
        };
        let opts = match HypOptions::parse(info.bootargs) {
            Ok(o) => o,
            Err(e) => report::fail_boot_msg(&mut reporter, options::describe(e)),
        };
        // The host refuses unknown keys before it boots; a command line that reached here some
        // other way (a UEFI options file, a hand-written -append) is refused the same, rather
        // than leaving a default silently in force.
        if let Some(key) = options::unknown_key(info.bootargs) {
            let mut m = Message::new();
            m.push_str_truncating("unknown option mtex.");
            m.push_str_truncating(key);
            report::fail_boot_msg(&mut reporter, m);
        }
        let ram = info.memory.unwrap_or(mtex_dt::Region {
            base: Board::RAM_BASE as u64,
            size: 0x2000_0000,
        });
        (opts, ram)
    });

    mmu::enable_el2(ram);
    mmu::enable_stage2(ram, hyp_region());

    let guest_dtb = match guest_boot::hand_on_dtb(dtb) {
        Ok(a) => a,
        Err(why) => report::fail_boot(&mut reporter, why),
    };
    let entry = match guest_boot::check_image(Board::GUEST_IMAGE_ADDR) {
        Ok(e) => e,
        Err(why) => report::fail_boot(&mut reporter, why),
    };

    let trap_mode = guest_boot::configure_traps(opts.traps);
    debug::init();
    let pmu = pmu::Pmu::init();
    watchdog::arm(opts.watchdog_ms);

    let region = hyp_region();
    reporter.send(&mtex_abi::Record::Boot(mtex_abi::report::Boot {
        abi_version: mtex_abi::hypercall::ABI_VERSION,
        counter_hz: watchdog::counter_hz(),
        trap_mode,
        hyp_start: region.base,
        hyp_end: region.base + region.size,
        guest_entry: entry,
        guest_dtb,
        watchdog_ms: opts.watchdog_ms,
        pmu_instructions: pmu.is_some(),
        midr: {
            use tock_registers::interfaces::Readable;
            aarch64_cpu::registers::MIDR_EL1.get()
        },
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
    let hyp = region;
    let guest_ram = [
        mtex_dt::Region {
            base: ram.base,
            size: hyp.base.saturating_sub(ram.base),
        },
        mtex_dt::Region {
            base: hyp.base + hyp.size,
            size: (ram.base + ram.size).saturating_sub(hyp.base + hyp.size),
        },
    ];
    global::HYP.init(state::Hyp::new(
        reporter,
        pmu,
        opts.watchdog_ms,
        guest_ram,
        trace::block_granules(),
        opts.runs,
    ));
    guest_boot::enter(entry, guest_dtb)
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
