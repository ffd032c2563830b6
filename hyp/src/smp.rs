//! Secondary CPUs: a guest's PSCI CPU_ON, once `mtex_vm::power` has accepted it, starts the
//! physical CPU through the firmware's PSCI at the hypervisor's own entry. That CPU takes
//! the EL2 set-up the calling CPU has (its MMU, vectors, traps, stage 2: one VM), gets a
//! stack and fast-path block of its own, and enters the guest at the entry point the guest
//! gave, with its context id in x0, at EL1 with the MMU off, as PSCI specifies.

use crate::fast_step::FastStep;
use crate::state::Hyp;
use arm_sysregs::el1::accessors::{read_midr_el1, read_mpidr_el1, write_sctlr_el1, write_tcr_el1};
use arm_sysregs::el1::registers::{SctlrEl1, TcrEl1};
use arm_sysregs::el2::accessors::{
    read_cnthctl_el2, read_cptr_el2, read_hcr_el2, read_hdfgrtr_el2, read_hdfgwtr_el2,
    read_hfgitr_el2, read_hfgrtr_el2, read_hfgwtr_el2, read_icc_sre_el2, read_ich_hcr_el2,
    read_mair_el2, read_mdcr_el2, read_sctlr_el2, read_tcr_el2, read_ttbr0_el2, read_vbar_el2,
    read_vtcr_el2, write_cnthctl_el2, write_cntvoff_el2, write_cptr_el2, write_hcr_el2,
    write_hdfgrtr_el2, write_hdfgwtr_el2, write_hfgitr_el2, write_hfgrtr_el2, write_hfgwtr_el2,
    write_icc_sre_el2, write_ich_hcr_el2, write_mdcr_el2, write_vmpidr_el2, write_vpidr_el2,
    write_vtcr_el2, write_vttbr_el2,
};
use arm_sysregs::el2::registers::{
    CnthctlEl2, CntvoffEl2, CptrEl2, HcrEl2, HdfgrtrEl2, HdfgwtrEl2, HfgitrEl2, HfgrtrEl2,
    HfgwtrEl2, IccSreEl2, IchHcrEl2, MdcrEl2, VmpidrEl2, VpidrEl2, VtcrEl2, VttbrEl2,
};
use core::arch::naked_asm;
use core::mem::offset_of;
use mtex_vm::power::Start;
use smccc::Smc;
use smccc::psci::error::Error;

/// The EL2 stack of a secondary CPU (as the boot CPU's, link.ld).
const STACK_SIZE: usize = 0x20000;

/// What a starting CPU needs, written by the CPU that starts it and cleaned to the point of
/// coherency: the entry reads the first fields with its MMU and caches still off.
#[repr(C)]
pub struct SecondaryBoot {
    mair: u64,
    tcr: u64,
    ttbr0: u64,
    sctlr: u64,
    vbar: u64,
    stack_top: u64,
    /// This CPU's fast-path block, for TPIDR_EL2 before anything can take an exception.
    block: *mut FastStep,
    // Read from Rust, with the MMU on.
    start: Start,
    /// The guest's first context on this CPU (here, not on the stack `enter_guest` copies
    /// it to the top of).
    ctx: crate::context::GuestContext,
    hcr: HcrEl2,
    vtcr: VtcrEl2,
    vttbr: VttbrEl2,
    mdcr: MdcrEl2,
    cptr: CptrEl2,
    cnthctl: CnthctlEl2,
    /// The fine-grained traps (with FEAT_FGT).
    fgt: Option<FineGrainedTraps>,
    ich_hcr: IchHcrEl2,
    icc_sre: IccSreEl2,
    vpidr: VpidrEl2,
}

/// FEAT_FGT's trap registers, as the boot CPU has them.
#[derive(Clone, Copy)]
struct FineGrainedTraps {
    hfgrtr: HfgrtrEl2,
    hfgwtr: HfgwtrEl2,
    hfgitr: HfgitrEl2,
    hdfgrtr: HdfgrtrEl2,
    hdfgwtr: HdfgwtrEl2,
}

const _: () = assert!(offset_of!(SecondaryBoot, mair) == 0);
const _: () = assert!(offset_of!(SecondaryBoot, tcr) == 8);
const _: () = assert!(offset_of!(SecondaryBoot, ttbr0) == 16);
const _: () = assert!(offset_of!(SecondaryBoot, sctlr) == 24);
const _: () = assert!(offset_of!(SecondaryBoot, vbar) == 32);
const _: () = assert!(offset_of!(SecondaryBoot, stack_top) == 40);
const _: () = assert!(offset_of!(SecondaryBoot, block) == 48);

/// Where a secondary CPU lives at EL2, kept from one power-up to the next (addresses): its
/// stack's top, its fast-path block and its boot record.
#[derive(Clone, Copy)]
pub struct CpuHome {
    stack_top: u64,
    block: u64,
    boot: u64,
}

impl CpuHome {
    /// Its fast-path block's address.
    pub fn block(&self) -> u64 {
        self.block
    }
}

/// How many times `start` asks the firmware whether a CPU that went off is off yet.
const OFF_POLLS: u32 = 1_000_000;

/// Starts the CPU `start` names. Called by a CPU of the guest (holding the state), after
/// `Cpus::cpu_on` accepted the call; Err (and the CPU marked off again) if the firmware
/// refuses, if a CPU that went off is not off yet, or if there is no memory for it.
pub fn start(hyp: &mut Hyp, start: Start) -> Result<(), Error> {
    let r = start_cpu(hyp, start);
    if r.is_err() {
        hyp.cpus.started(start.cpu, false);
    }
    r
}

fn start_cpu(hyp: &mut Hyp, start: Start) -> Result<(), Error> {
    let mpidr = hyp.machine_cpus[start.cpu];
    let (total, before) = crate::heap::usage();
    let first = hyp.cpu_homes[start.cpu].is_none();
    let vcpu = hyp.prepare_vcpu(start.cpu).ok_or_else(|| {
        log::warn!(
            "CPU_ON {mpidr:#x}: no memory for its state ({before} of {total} bytes of heap in use)"
        );
        Error::InternalFailure
    })?;
    let home = match hyp.cpu_homes[start.cpu] {
        // A CPU keeps its stack, block and boot record from one power-up to the next. The
        // guest saw it go off when its CPU_OFF was accepted, but the CPU then still lets go
        // of the state and calls the firmware: they are reused only once the firmware says
        // the CPU is off.
        Some(home) => {
            if !firmware_says_off(mpidr) {
                log::warn!("CPU_ON {mpidr:#x}: the CPU has not gone off yet");
                return Err(Error::InternalFailure);
            }
            crate::fast_step::reset_block(home.block as *mut FastStep);
            home
        }
        None => {
            let home = new_home(start.cpu, vcpu).ok_or_else(|| {
                log::warn!("CPU_ON {mpidr:#x}: no memory for its stack and block");
                Error::InternalFailure
            })?;
            hyp.cpu_homes[start.cpu] = Some(home);
            home
        }
    };
    // The heap taken from RAM at boot was sized by `allocations`: a CPU that took more
    // than it lists means the list is out of date, and a large machine may run short.
    let (_, after) = crate::heap::usage();
    let listed = mtex_vm::heap::per_cpu(&allocations(hyp.guest_ram.ipa.size));
    if first && after.saturating_sub(before) > listed {
        log::error!(
            "CPU {}: its set-up took {} bytes of heap, more than the {listed} its allocations list",
            start.cpu,
            after - before
        );
    }
    let (stack_top, block) = (home.stack_top, home.block as *mut FastStep);
    // Its own copy of stage 2's root, whole again if a window cleared it while it was off.
    let root = {
        // SAFETY: the CPU's state, owned by `Hyp`, whose lock this CPU holds; the CPU is
        // off, so nothing else uses it.
        let v = unsafe { &mut *vcpu };
        crate::stage2_roots::refill(v.s2_root);
        v.kicked = false;
        v.s2_root
    };
    let boot_record = SecondaryBoot {
        mair: read_mair_el2().bits(),
        tcr: read_tcr_el2().bits(),
        ttbr0: read_ttbr0_el2().bits(),
        sctlr: read_sctlr_el2().bits(),
        vbar: read_vbar_el2().bits(),
        stack_top,
        block,
        start,
        ctx: crate::context::GuestContext::boot(start.entry, start.context_id),
        hcr: read_hcr_el2(),
        vtcr: read_vtcr_el2(),
        vttbr: crate::stage2_roots::vttbr_with(root),
        mdcr: read_mdcr_el2(),
        cptr: read_cptr_el2(),
        // Its counter reads trap only once it joins a window (`stepped_clock.rs`).
        cnthctl: read_cnthctl_el2() - CnthctlEl2::EL1TVCT,
        fgt: crate::traps::has_fgt().then(|| FineGrainedTraps {
            hfgrtr: read_hfgrtr_el2(),
            hfgwtr: read_hfgwtr_el2(),
            hfgitr: read_hfgitr_el2(),
            hdfgrtr: read_hdfgrtr_el2(),
            hdfgwtr: read_hdfgwtr_el2(),
        }),
        ich_hcr: read_ich_hcr_el2(),
        icc_sre: read_icc_sre_el2(),
        vpidr: VpidrEl2::from_bits_retain(read_midr_el1().bits()),
    };
    let at = home.boot;
    // SAFETY: the home's boot record is this CPU's alone, and the CPU is off (above): the
    // firmware reads it again only at the CPU_ON below.
    unsafe { (at as *mut SecondaryBoot).write(boot_record) };
    crate::mmu::clean_invalidate_to_poc(mtex_platform::Region::new(
        at,
        size_of::<SecondaryBoot>() as u64,
    ));
    let entry = secondary_entry as *const () as u64;
    log::debug!(
        "CPU_ON {mpidr:#x}: guest entry {:#x}, context {:#x}; hyp entry {entry:#x}, boot {at:#x}",
        start.entry,
        start.context_id
    );
    smccc::psci::cpu_on::<Smc>(mpidr, entry, at)
}

/// Whether the firmware reports `mpidr` off, asking up to OFF_POLLS times (a CPU whose
/// CPU_OFF was accepted is at most a few instructions from its firmware call).
fn firmware_says_off(mpidr: u64) -> bool {
    use smccc::psci::{AffinityState, LowestAffinityLevel, affinity_info};
    (0..OFF_POLLS)
        .any(|_| affinity_info::<Smc>(mpidr, LowestAffinityLevel::All) == Ok(AffinityState::Off))
}

/// Every allocation a secondary CPU makes when the guest first starts it (`new_home`,
/// `Hyp::prepare_vcpu`), for a guest of `ram_size` bytes of RAM: what the heap must hold
/// for each.
pub fn allocations(ram_size: u64) -> alloc::vec::Vec<mtex_vm::heap::Alloc> {
    use mtex_vm::heap::Alloc;
    let of = |l: core::alloc::Layout| Alloc {
        size: l.size(),
        align: l.align(),
    };
    let mut a = alloc::vec![
        Alloc {
            size: STACK_SIZE,
            align: 16
        },
        of(core::alloc::Layout::new::<SecondaryBoot>()),
        of(core::alloc::Layout::new::<crate::state::Vcpu>()),
        crate::stage2_roots::ROOT_ALLOC,
    ];
    a.extend(crate::fast_step::BLOCK_ALLOCS);
    a.extend(crate::trace::Tracer::table_allocs(ram_size));
    a
}

/// Says at boot whether the heap taken for the secondary CPUs holds every one of a machine
/// of `cpus` CPUs with `ram_size` bytes of guest RAM (the loader reserves a fixed amount per
/// CPU; a machine that needs more gets a warning here and INTERNAL_FAILURE, with its record,
/// at the CPU_ON that finds no room).
pub fn check_heap(cpus: usize, ram_size: u64, heap: Option<mtex_platform::Region>) {
    use mtex_vm::heap;
    let per = heap::per_cpu(&allocations(ram_size));
    let need = heap::for_secondaries(cpus, per).unwrap_or(usize::MAX) as u64;
    let have = heap.map_or(0, |h| h.size);
    if cpus > 1 {
        log::info!(
            "secondary CPUs: {per} bytes of EL2 state each, {need} bytes for {} CPUs",
            cpus - 1
        );
    }
    if have < need {
        log::warn!(
            "the secondary CPUs' heap has {have} bytes of the {need} that {} CPUs need: \
             the static heap holds the first few",
            cpus - 1
        );
    }
}

/// A new CPU's stack, block and boot record, or None without the memory for them (the
/// guest's CPU_ON then fails, and says so, rather than the hypervisor).
fn new_home(cpu: usize, vcpu: *mut crate::state::Vcpu) -> Option<CpuHome> {
    use alloc::alloc::{Layout, alloc};
    let stack_layout = Layout::from_size_align(STACK_SIZE, 16).ok()?;
    // SAFETY: a layout of non-zero size; the stack needs no initial contents.
    let stack = unsafe { alloc(stack_layout) };
    // SAFETY: as above; the record is written before each use.
    let boot = unsafe { alloc(Layout::new::<SecondaryBoot>()) };
    if stack.is_null() || boot.is_null() {
        return None;
    }
    let block = crate::fast_step::new_block(cpu, vcpu)?;
    Some(CpuHome {
        stack_top: (stack as u64 + STACK_SIZE as u64) & !0xf,
        block: block as u64,
        boot: boot as u64,
    })
}

/// Where the firmware starts a secondary CPU: at EL2, MMU off, x0 = its `SecondaryBoot`.
/// Points TPIDR_EL2 at its block (the vectors use it), turns the MMU on with the boot CPU's
/// tables, takes its stack and goes to Rust.
#[unsafe(naked)]
unsafe extern "C" fn secondary_entry() -> ! {
    naked_asm!(
        "msr daifset, #0xf",
        "ldr x1, [x0, #{block}]",
        "msr tpidr_el2, x1",
        "ldr x1, [x0, #{mair}]",
        "msr mair_el2, x1",
        "ldr x1, [x0, #{tcr}]",
        "msr tcr_el2, x1",
        "ldr x1, [x0, #{ttbr0}]",
        "msr ttbr0_el2, x1",
        "isb",
        "tlbi alle2",
        "dsb nsh",
        "isb",
        "ldr x1, [x0, #{sctlr}]",
        "msr sctlr_el2, x1",
        "isb",
        "ldr x1, [x0, #{vbar}]",
        "msr vbar_el2, x1",
        "ldr x1, [x0, #{stack}]",
        "mov sp, x1",
        "isb",
        "bl {main}",
        "b .",
        mair = const offset_of!(SecondaryBoot, mair),
        tcr = const offset_of!(SecondaryBoot, tcr),
        ttbr0 = const offset_of!(SecondaryBoot, ttbr0),
        sctlr = const offset_of!(SecondaryBoot, sctlr),
        vbar = const offset_of!(SecondaryBoot, vbar),
        stack = const offset_of!(SecondaryBoot, stack_top),
        block = const offset_of!(SecondaryBoot, block),
        main = sym secondary_main,
    )
}

/// A secondary CPU with its MMU on: the rest of the EL2 set-up, then the guest.
extern "C" fn secondary_main(boot: &'static SecondaryBoot) -> ! {
    // SAFETY: the starting CPU's trap and stage 2 controls, whose tables (each CPU's own
    // copy of the root, `stage2_roots`) and handlers every CPU shares; they only decide how
    // the guest runs, which it has not on this CPU since it came up.
    unsafe {
        if let Some(t) = boot.fgt {
            write_hfgrtr_el2(t.hfgrtr);
            write_hfgwtr_el2(t.hfgwtr);
            write_hfgitr_el2(t.hfgitr);
            write_hdfgrtr_el2(t.hdfgrtr);
            write_hdfgwtr_el2(t.hdfgwtr);
        }
        write_vtcr_el2(boot.vtcr);
        write_vttbr_el2(boot.vttbr);
    }
    write_mdcr_el2(boot.mdcr);
    // SAFETY: CPTR_EL2 only traps the guest's FP, SVE and SME use: as on the boot CPU.
    unsafe { write_cptr_el2(boot.cptr) };
    write_cnthctl_el2(boot.cnthctl);
    // Its guest starts on the machine's clock (`guest_clock.rs`).
    write_cntvoff_el2(CntvoffEl2::from_bits_retain(
        crate::guest_clock::machine_offset(),
    ));
    write_vmpidr_el2(VmpidrEl2::from_bits_retain(read_mpidr_el1().bits()));
    write_vpidr_el2(boot.vpidr);
    // SAFETY: these set only whether EL1 may use the GIC's system registers and the
    // virtual CPU interface: as on the boot CPU.
    unsafe {
        write_icc_sre_el2(boot.icc_sre);
        aarch64_cpu::asm::barrier::isb(aarch64_cpu::asm::barrier::SY);
        write_ich_hcr_el2(boot.ich_hcr);
    }
    crate::debug::init();
    // SAFETY: the guest's EL1 state as PSCI leaves it, MMU and caches off; EL2 (E2H = 0)
    // does not use EL1's translation regime, and the guest has not run on this CPU since it
    // came up.
    unsafe {
        write_sctlr_el1(SctlrEl1::from_bits_retain(
            mtex_abi::program::SCTLR_EL1_AT_ENTRY,
        ));
        write_tcr_el1(TcrEl1::from_bits_retain(
            mtex_abi::program::TCR_EL1_AT_ENTRY,
        ));
    }
    // SAFETY: the starting CPU's HCR_EL2 (`traps::configure_traps`); the guest has not run
    // on this CPU since it came up.
    unsafe { write_hcr_el2(boot.hcr) };
    crate::traps::clear_hcrx();
    aarch64_cpu::asm::barrier::isb(aarch64_cpu::asm::barrier::SY);
    crate::global::HYP.with(|hyp| {
        hyp.cpus.started(boot.start.cpu, true);
        // Its trap fast path as the rule has it (its block starts with it off).
        hyp.sync_fast_traps();
    });
    log::debug!(
        "CPU {} entering the guest at {:#x}",
        boot.start.cpu,
        boot.start.entry
    );
    // SAFETY: stage 2, traps and the EL1 state are set up above; the stack is this CPU's own
    // and nothing on it is needed any more; the context is not on it.
    unsafe { crate::entry::enter_guest(&boot.ctx, boot.stack_top) }
}
