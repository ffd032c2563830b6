//! A guest that misuses PSCI's CPU power calls (on QEMU with two CPUs): CPU_ON with an
//! unaligned entry point, with one outside its RAM, of a CPU that does not exist; CPU_OFF of
//! the only CPU on; CPU_ON inside a traced phase; CPU_ON twice; an untraced phase opened
//! while the second CPU is on (refused), a traced one (counted on both CPUs); then the second
//! CPU turned off and on again before a traced phase. The
//! second CPU writes a debug register, which this CPU's own copy must not show. Last, this
//! CPU goes off and the second runs a traced phase alone and ends the run. Each
//! answer goes to the console (`hostile-smp NAME RESULT`); the hypervisor records each call.
//! The traced phases' counts are the loop's arithmetic, the calls inside them included.

use crate::hvc::{self, begin_args, phase_asm, phase_end_call};
use core::sync::atomic::{AtomicU64, Ordering};
use mtex_abi::program::HOSTILE_N;
use smccc::Smc;
use smccc::psci::{self, AffinityState, LowestAffinityLevel};

/// The second CPU's MPIDR affinity on QEMU's virt machine.
const SECOND_CPU: u64 = 1;
/// A target no CPU of the machine has.
const NO_SUCH_CPU: u64 = 0xff00;
/// Below QEMU virt's RAM (its flash): not an entry point in the guest's RAM.
const OUTSIDE_RAM: u64 = 0x1000;
/// How many AFFINITY_INFO calls a wait for the second CPU may take.
const WAIT_CALLS: u32 = 1_000_000;

/// Set when the second CPU may turn itself off. Read by that CPU with its MMU off, so it is
/// cleaned to the point of coherency after each write.
static GO_OFF: AtomicU64 = AtomicU64::new(0);

pub fn run(tagged: u64) -> u64 {
    let entry = second_cpu_entry as *const () as u64;
    let flag = GO_OFF.as_ptr() as u64;
    let mut ok = true;
    let mut expect = |name: &str, got: i64, want: &[i64]| {
        crate::println!("hostile-smp {name} {got}");
        ok &= want.contains(&got);
    };
    expect("unaligned", on(SECOND_CPU, entry + 2, flag), &[-9]);
    expect("outside-ram", on(SECOND_CPU, OUTSIDE_RAM, flag), &[-9]);
    expect("no-such-cpu", on(NO_SUCH_CPU, entry, flag), &[-2]);
    expect("off-last", code(psci::cpu_off::<Smc>()), &[-3]);
    let (end, inside) = cpu_on_in_phase(tagged, entry, flag);
    expect("phase-end", end as i64, &[0]);
    expect("inside-phase", inside as i64, &[-3]);
    expect("on", on(SECOND_CPU, entry, flag), &[0]);
    // Started, or still starting: either way not startable again.
    expect("on-again", on(SECOND_CPU, entry, flag), &[-4, -5]);
    // Untraced: the PMU counts one CPU, so it is refused.
    let refused = hvc::phase_begin(2, "two-cpus-on", false);
    expect("phase-with-two-on", refused as i64, &[-3]);
    expect("came-on", wait_for(AffinityState::On), &[1]);
    // Traced with both on: counted on both (refused with a per-PC profile asked for).
    let both = loads_phase(5, "two-cpus", tagged);
    expect("phase-on-two", both as i64, &[0, -3]);
    set_go_off(1);
    expect("went-off", wait_for(AffinityState::Off), &[1]);
    // The second power-up: GO_OFF is still set, so it turns itself off at once.
    expect("on-once-more", on(SECOND_CPU, entry, flag), &[0]);
    expect("went-off-again", wait_for(AffinityState::Off), &[1]);
    // The second CPU wrote its DBGBVR0_EL1 (into its own shadow); this CPU never wrote its.
    let own: u64;
    // SAFETY: reading a debug register (trapped and emulated) has no side effects.
    unsafe { core::arch::asm!("mrs {}, dbgbvr0_el1", out(reg) own) };
    expect("own-dbgbvr0", own as i64, &[0]);
    let last = loads_phase(3, "one-cpu-again", tagged);
    expect("last-phase", last as i64, &[0]);
    if !ok {
        return 6;
    }
    // The last act: the second CPU runs a traced phase alone, once this one is off, and
    // ends the run.
    let handed = on(SECOND_CPU, last_act as *const () as u64, flag);
    let off = code(psci::cpu_off::<Smc>());
    crate::println!("hostile-smp hand-over {handed} {off}");
    6
}

/// CPU_ON of `target` at `entry`, with GO_OFF's address as its context id: PSCI's answer.
fn on(target: u64, entry: u64, flag: u64) -> i64 {
    code(psci::cpu_on::<Smc>(target, entry, flag))
}

fn code(r: Result<(), psci::error::Error>) -> i64 {
    r.map_or_else(i64::from, |()| 0)
}

/// Polls AFFINITY_INFO until the second CPU is in `state`: 1 when it got there, 0 if not
/// within WAIT_CALLS calls.
fn wait_for(state: AffinityState) -> i64 {
    for _ in 0..WAIT_CALLS {
        if psci::affinity_info::<Smc>(SECOND_CPU, LowestAffinityLevel::All) == Ok(state) {
            return 1;
        }
    }
    0
}

fn set_go_off(v: u64) {
    GO_OFF.store(v, Ordering::SeqCst);
    // SAFETY: cleaning and invalidating a line of the guest's own static to the point of
    // coherency changes no data; SEV only wakes the other CPU's WFE.
    unsafe {
        core::arch::asm!(
            "dc civac, {}", "dsb sy", "sev",
            in(reg) GO_OFF.as_ptr(),
        )
    };
}

/// Traced phase 1: CPU_ON of the second CPU (refused: a phase is open), then HOSTILE_N
/// loads. Six instructions before the loop, the SMC among them. Returns PHASE_END's result
/// and CPU_ON's.
fn cpu_on_in_phase(tagged: u64, entry: u64, flag: u64) -> (u64, u64) {
    let (x0, id, name, flags) = begin_args(1, "cpu-on-inside");
    let (end, inside): (u64, u64);
    // SAFETY: the HVCs are mtex calls and the SMC a PSCI call, which change only x0..x3
    // (declared); the body loads from the guest's tagged granule.
    unsafe {
        core::arch::asm!(
            "hvc #0",
            "mov x0, x11",
            "mov x1, x12",
            "mov x2, x13",
            "mov x3, x14",
            "smc #0",
            "mov x14, x0",
            "1: ldr x12, [x9]",
            "subs x10, x10, #1",
            "b.ne 1b",
            phase_end_call!(),
            end_lo = const hvc::PHASE_END_LO,
            end_hi = const hvc::PHASE_END_HI,
            inout("x0") x0 => end,
            inout("x1") id => _,
            inout("x2") name[0] => _,
            inout("x3") name[1] => _,
            in("x4") name[2],
            in("x5") name[3],
            in("x6") flags,
            in("x15") id,
            in("x9") tagged,
            inout("x10") HOSTILE_N => _,
            in("x11") u64::from(psci::PSCI_CPU_ON_64),
            inout("x12") SECOND_CPU => _,
            in("x13") entry,
            inout("x14") flag => inside,
        )
    };
    (end, inside)
}

/// A traced phase of HOSTILE_N loads, nothing else.
fn loads_phase(id: u64, name: &str, tagged: u64) -> u64 {
    phase_asm!(
        id: id, name: name, traced: true,
        before: [],
        body: ["1: ldr x12, [x9]", "subs x10, x10, #1", "b.ne 1b"],
        in("x9") tagged,
        inout("x10") HOSTILE_N => _,
        out("x12") _,
    )
}

/// Where the second CPU starts: EL1, MMU off, x0 = GO_OFF's address. It writes its own
/// DBGBVR0_EL1, waits for GO_OFF and turns itself off.
#[unsafe(naked)]
extern "C" fn second_cpu_entry() -> ! {
    core::arch::naked_asm!(
        "msr dbgbvr0_el1, x0",
        "1: ldr x1, [x0]",
        "cbnz x1, 2f",
        "wfe",
        "b 1b",
        "2: movz w0, #{off_lo}",
        "movk w0, #{off_hi}, lsl #16",
        "smc #0",
        "b .",
        off_lo = const psci::PSCI_CPU_OFF & 0xffff,
        off_hi = const psci::PSCI_CPU_OFF >> 16,
    )
}

/// The second CPU's last act (EL1, MMU off, x0 = GO_OFF's address): waits until the first CPU
/// is off, runs traced phase 4 ("cpu1") of HOSTILE_N loads from GO_OFF alone, and ends the
/// run with status 0.
#[unsafe(naked)]
extern "C" fn last_act() -> ! {
    core::arch::naked_asm!(
        "mov x9, x0",
        "1: movz w0, #{aff_lo}",
        "movk w0, #{aff_hi}, lsl #16",
        "mov x1, xzr",
        "mov x2, xzr",
        "smc #0",
        "cmp x0, #1",
        "b.ne 1b",
        "movz w0, #{begin_lo}",
        "movk w0, #{begin_hi}, lsl #16",
        "mov x1, #4",
        "movz x2, #0x7063",
        "movk x2, #0x3175, lsl #16",
        "mov x3, xzr",
        "mov x4, xzr",
        "mov x5, xzr",
        "mov x6, #{traced}",
        "mov x15, #4",
        "mov x10, #{n}",
        "hvc #0",
        "2: ldr x12, [x9]",
        "subs x10, x10, #1",
        "b.ne 2b",
        crate::hvc::phase_end_call!(),
        "movz w0, #{exit_lo}",
        "movk w0, #{exit_hi}, lsl #16",
        "mov x1, xzr",
        "hvc #0",
        "b .",
        aff_lo = const psci::PSCI_AFFINITY_INFO_64 & 0xffff,
        aff_hi = const psci::PSCI_AFFINITY_INFO_64 >> 16,
        begin_lo = const mtex_abi::hypercall::PHASE_BEGIN & 0xffff,
        begin_hi = const mtex_abi::hypercall::PHASE_BEGIN >> 16,
        traced = const mtex_abi::hypercall::PHASE_TRACED,
        n = const HOSTILE_N,
        end_lo = const hvc::PHASE_END_LO,
        end_hi = const hvc::PHASE_END_HI,
        exit_lo = const mtex_abi::hypercall::EXIT & 0xffff,
        exit_hi = const mtex_abi::hypercall::EXIT >> 16,
    )
}
