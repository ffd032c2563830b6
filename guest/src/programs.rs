//! What the guest runs, chosen by `mtex.guest=` on the command line.

use crate::by_address::ByAddress;
use crate::mte::{self, Granule};
use crate::{hvc, mmu, println};
use aarch64_cpu::asm::barrier;
use arm_sysregs::el1::accessors::{write_sctlr_el1, write_tcr_el1};
use arm_sysregs::el1::registers::{SctlrEl1, TcrEl1};
use fdt::Fdt;
use mtex_abi::hypercall::{self as hc, ret};
use mtex_abi::options::{GuestOptions, GuestProgram};
use mtex_abi::program::{self, Action};

/// Runs the program and returns the exit status.
pub fn run(opts: &GuestOptions, fdt: &Fdt) -> u64 {
    match opts.program {
        GuestProgram::Kernel => {
            match mtex_abi::scenario::Scenario::parse(fdt.chosen().bootargs().unwrap_or("")) {
                Ok(s) => crate::kernel::run(fdt, s),
                Err(e) => {
                    println!("guest: {}", mtex_abi::options::describe(e));
                    2
                }
            }
        }
        GuestProgram::Default => default(fdt),
        GuestProgram::UnknownHvc => unknown_hvc(),
        GuestProgram::TouchHyp => touch_hyp(fdt),
        GuestProgram::Spin => loop {
            core::hint::spin_loop();
        },
        GuestProgram::BenchTraps => bench_traps(fdt, opts.bench_n),
        GuestProgram::Trace => trace(fdt),
        GuestProgram::BenchTrace => bench_trace(fdt, opts.bench_n),
        GuestProgram::El0 => {
            let p = trace_setup(fdt);
            write_sctlr(
                program::SCTLR_MMU_ON
                    | program::SCTLR_ATA
                    | program::SCTLR_ATA0
                    | program::SCTLR_TCF_SYNC
                    | program::SCTLR_TCF0_SYNC,
            );
            let user_sp = mmu::USER_PAGE.addr() + 4096;
            crate::el0::traced_loads(1, "el0-loads", p.user, opts.bench_n, user_sp)
        }
        GuestProgram::ExclusiveLoop => {
            let p = trace_setup(fdt);
            crate::workloads::run(
                program::Body::ExclusiveIncrement,
                1,
                "exclusive",
                &p,
                1,
                true,
            )
        }
        GuestProgram::Differential => crate::differential::run(fdt),
        GuestProgram::Snippet => crate::snippet::run(&opts.snippet, fdt),
        GuestProgram::Probe => crate::probe::run(fdt),
        GuestProgram::HostileDebug
        | GuestProgram::HostileCpu
        | GuestProgram::HostileWfx
        | GuestProgram::HostileUart
        | GuestProgram::Addresses
        | GuestProgram::HostileVector
        | GuestProgram::HostileFrames
        | GuestProgram::HostilePatch
        | GuestProgram::HostileStackPatch
        | GuestProgram::HostileTcoPatch
        | GuestProgram::HostileExclusive
        | GuestProgram::HostileImpdef
        | GuestProgram::HostileSample
        | GuestProgram::HostileRemap
        | GuestProgram::HostileYield
        | GuestProgram::HostileAbortLoop
        | GuestProgram::HostileSmp
        | GuestProgram::EveryCpu => crate::selftest::run(opts.program, fdt),
    }
}

/// Memory the traced workloads use: a granule tagged 3, a tag-0 granule, and a DC ZVA block
/// tagged 3 throughout.
#[repr(C, align(2048))]
struct ZvaBlock([u8; 2048]);
static ZVA_BLOCK: ByAddress<ZvaBlock> = ByAddress::new(ZvaBlock([0; 2048]));
static TAG0_GRANULE: ByAddress<Granule> = ByAddress::new(Granule([0; 16]));
static TAGGED_GRANULE: ByAddress<Granule> = ByAddress::new(Granule([0; 16]));

/// The same tagged-load loop untraced, then traced.
fn bench_trace(fdt: &Fdt, n: u64) -> u64 {
    let p = trace_setup(fdt);
    write_sctlr(program::SCTLR_MMU_ON | program::SCTLR_ATA | program::SCTLR_TCF_SYNC);
    for (id, name, traced) in [(1, "untraced", false), (2, "traced", true)] {
        if crate::workloads::run(program::Body::Load, id, name, &p, n, traced) != ret::SUCCESS {
            return 6;
        }
    }
    0
}

/// Identity map on, TBI and ATA set, and the tagged memory the workloads use.
pub fn trace_setup(fdt: &Fdt) -> crate::workloads::Pointers {
    install_idmap(fdt);
    write_tcr(program::TCR_MMU | program::TCR_TBI0 | program::TCR_TBI1);
    write_sctlr(program::SCTLR_MMU_ON | program::SCTLR_ATA);
    let block = mte::zva_block_bytes().min(2048);
    crate::workloads::Pointers {
        tagged: mte::tag_range(TAGGED_GRANULE.addr(), 16, 3),
        tag0: TAG0_GRANULE.addr(),
        untagged: mmu::UNTAGGED_PAGE.addr(),
        user: mte::tag_range(mmu::USER_PAGE.addr(), 16, 3),
        zva_block: mte::tag_range(ZVA_BLOCK.addr(), block, 3),
    }
}

/// Runs `program::TRACE`: each phase's controls are written (trapped and logged), then its
/// body runs as a traced phase.
fn trace(fdt: &Fdt) -> u64 {
    if mte::zva_block_bytes() > 2048 {
        println!("guest: the DC ZVA block is larger than the test block");
        return 10;
    }
    let p = trace_setup(fdt);
    for (i, t) in program::TRACE.iter().enumerate() {
        write_tcr(t.tcr);
        write_sctlr(t.sctlr);
        let r = crate::workloads::run(t.body, i as u32 + 1, t.name, &p, t.n, true);
        if r != ret::SUCCESS {
            println!("guest: traced phase {} failed: {r:#x}", t.name);
            return 6;
        }
    }
    println!("guest: trace program done");
    0
}

pub fn install_idmap(fdt: &Fdt) {
    let mem = fdt.memory().regions().next().expect("a /memory region");
    mmu::install_idmap(mem.starting_address as usize, mem.size.unwrap_or(0));
}

pub fn write_sctlr(v: u64) {
    // SAFETY: the programs' and the kernel's own SCTLR_EL1 values: the MMU goes on only over
    // an installed map of all the RAM the guest uses, and the MTE controls change tag
    // checking, not what memory holds.
    unsafe { write_sctlr_el1(SctlrEl1::from_bits_retain(v)) };
    barrier::isb(barrier::SY);
}

pub fn write_tcr(v: u64) {
    // SAFETY: the programs' and the kernel's own TCR_EL1 values, for the maps they install;
    // the TLB entries that may hold the old TBI and TCMA are dropped below.
    unsafe { write_tcr_el1(TcrEl1::from_bits_retain(v)) };
    barrier::isb(barrier::SY);
    // TBI and TCMA may be cached in TLB entries: drop them.
    // SAFETY: invalidating this CPU's EL1 TLB entries has no effect on memory.
    unsafe { core::arch::asm!("tlbi vmalle1", "dsb nsh", "isb") };
}

static GRANULE: ByAddress<Granule> = ByAddress::new(Granule([0; 16]));

/// Walks through `mtex_abi::program::DEFAULT`.
fn default(fdt: &Fdt) -> u64 {
    install_idmap(fdt);
    for (i, phase) in program::DEFAULT.iter().enumerate() {
        let id = i as u32 + 1;
        if hvc::phase_begin(id, phase.name, true) != ret::SUCCESS {
            println!("guest: phase {} refused", phase.name);
            return 6;
        }
        for action in phase.actions {
            match *action {
                Action::WriteSctlr(v) => write_sctlr(v),
                Action::WriteTcr(v) => write_tcr(v),
                Action::SetTco(on) => mte::set_tco(on),
                Action::TaggedAccess => {
                    // SAFETY: GRANULE is used only here, by the default program, which runs
                    // on one CPU: no other reference to it or access through its address
                    // exists while `g` lives.
                    let g = unsafe { &mut *GRANULE.ptr() };
                    let (tag, read_back) = mte::tagged_access(g);
                    println!(
                        "guest: {}: tagged load ok, pointer tag {tag}, memory tag {read_back}",
                        phase.name
                    );
                    if tag != read_back {
                        return 7;
                    }
                }
            }
        }
        if hvc::phase_end(id) != ret::SUCCESS {
            return 6;
        }
    }
    println!("guest: default program done");
    0
}

/// Makes a call the hypervisor does not implement. SMCCC requires NOT_SUPPORTED; the guest
/// then exits with 3 (or 4 if the answer was anything else).
fn unknown_hvc() -> u64 {
    let r = hvc::raw(hc::function_id(0xff));
    println!("guest: unknown call answered {r:#x}");
    if r == ret::NOT_SUPPORTED { 3 } else { 4 }
}

/// Loads from just past the guest's RAM. The hypervisor is not in the guest's address space
/// at all (stage 2 maps only guest RAM, `mtex_platform::guest_vm`), so the first address
/// after the device tree's `/memory` is as near as the guest can get: stage 2 must stop it.
fn touch_hyp(fdt: &Fdt) -> u64 {
    let Some(mem) = fdt.memory().regions().next() else {
        println!("guest: no /memory region");
        return 8;
    };
    let addr = mem.starting_address as usize + mem.size.unwrap_or(0);
    println!("guest: loading from past the end of RAM at {addr:#x}");
    // SAFETY: deliberately reads memory the guest does not own; stage 2 has no mapping
    // there, so this load traps to EL2 and never returns.
    let v = unsafe { core::ptr::read_volatile(addr as *const u64) };
    println!("guest: read {v:#x} from outside its RAM");
    9
}

/// Phase 1 writes SCTLR_EL1 `n` times, phase 2 `2n` times, with the MMU on, so the host can
/// take EL2 instructions per trapped write from the difference.
fn bench_traps(fdt: &Fdt, n: u64) -> u64 {
    install_idmap(fdt);
    write_tcr(program::TCR_MMU);
    write_sctlr(program::SCTLR_MMU_ON);
    for (id, name, count) in [(1, "bench-n", n), (2, "bench-2n", 2 * n)] {
        hvc::phase_begin(id, name, false);
        for _ in 0..count {
            write_sctlr(program::SCTLR_MMU_ON);
        }
        hvc::phase_end(id);
    }
    0
}
