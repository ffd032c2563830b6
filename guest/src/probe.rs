//! `mtex.guest=probe`: a fixed program that characterises the CPU's MTE choices (with
//! `mtex probe` on the host, host/src/probe.rs).
//!
//! Cells: EL1 or EL0 × TCF (TCF for EL1, TCF0 for EL0) none/sync/async/asymm × PSTATE.TCO
//! 0/1 × TCMA (TCR_EL1.TCMA1 for EL1, whose pointers are TTBR1 addresses; TCMA0 for EL0,
//! TTBR0 addresses) 0/1 × pointer tag match-all (0xF in TTBR1, 0x0 in TTBR0) or mismatching
//! (5) × Tagged or Untagged page. The granule accessed has allocation tag 3, which neither
//! pointer tag matches: every access that is checked fails its check. Each cell is one
//! untraced phase (run again as often as the PMU backend asks, PHASE_AGAIN), then one line:
//!
//! ```text
//! probe: cell el1/sync/tco0/tcma1/mm/tagged rd=sync wr=sync sctlr=0x… tcr=0x… ptr=0x…
//! ```
//!
//! `ma`/`mm`: match-all or mismatching pointer; rd/wr: `none`, `sync` or `async`; sctlr, tcr
//! and ptr: the controls and the pointer of the accesses, which the host judges with the
//! trace counter's predicate. A cell the CPU cannot run says `skipped (why)` instead of rd=.
//! Then the cost phases (cost.rs), each followed by `probe: cost <what> n=N ops=M`, and
//! `probe: done`.
//!
//! During EL1 cells TCMA0 is set too: compiled code's pointers (tag 0, TTBR0) are then
//! never checked whatever the RAM's tags, while the cell's own TTBR1 pointer follows TCMA1.
//! During EL0 cells EL1's TCF is NONE.

mod cells;
mod cost;
mod memory;

use crate::mte;
use crate::println;
use crate::programs::{write_sctlr, write_tcr};
use alloc::format;
use alloc::string::String;
use cells::Fault;
use fdt::Fdt;
use mtex_abi::hypercall::{PHASE_AGAIN, PHASE_REPEATABLE, pack_bytes, ret};
use mtex_abi::program;
use mtex_abi::scenario::Tcf;
use mtex_arch::mte_bits::{sctlr, tcr, with_tag};

/// Allocation tag of every cell's granule, and the mismatching pointer tag.
const MEMORY_TAG: u64 = 3;
const WRONG_TAG: u64 = 5;

/// TCR_EL1 of the probe: both halves walked, TBI0 and TBI1; TCMA0/TCMA1 per cell.
const TCR_BASE: u64 = program::TCR_BOTH_HALVES;
/// SCTLR_EL1 of the probe: MMU and caches on, ATA and ATA0, ITFSB (exception entry
/// synchronises asynchronous faults into TFSR*, as Linux sets it). TCF/TCF0 per cell.
const SCTLR_BASE: u64 = program::SCTLR_MMU_ON | sctlr::ATA | sctlr::ATA0 | sctlr::ITFSB;

/// Cells: 2 ELs × 4 TCF × 2 TCMA × 2 TCO × 2 pointer tags × 2 pages.
const CELLS: u32 = 128;

#[derive(Clone, Copy)]
struct Cell {
    el: u8,
    tcf: u64,
    tcma: bool,
    tco: bool,
    match_all: bool,
    tagged: bool,
}

impl Cell {
    /// Cell `i` of [`CELLS`]: EL1 first; within an EL, the controls (TCF, then TCMA) change
    /// least often, so each pair of SCTLR_EL1/TCR_EL1 writes serves eight cells.
    fn from_index(i: u32) -> Self {
        let bit = |n: u32| (i >> n) & 1 == 1;
        Cell {
            el: if bit(6) { 0 } else { 1 },
            tcf: ((i >> 4) & 3) as u64,
            tcma: bit(3),
            tco: bit(2),
            match_all: !bit(1),
            tagged: !bit(0),
        }
    }

    /// `el1/sync/tco0/tcma1/mm/tagged`: at most 32 bytes, the phase name.
    fn name(&self) -> String {
        format!(
            "el{}/{}/tco{}/tcma{}/{}/{}",
            self.el,
            Tcf::from_bits(self.tcf).name(),
            self.tco as u8,
            self.tcma as u8,
            if self.match_all { "ma" } else { "mm" },
            if self.tagged { "tagged" } else { "untagged" },
        )
    }

    fn sctlr(&self) -> u64 {
        let shift = if self.el == 1 {
            sctlr::TCF_SHIFT
        } else {
            sctlr::TCF0_SHIFT
        };
        SCTLR_BASE | self.tcf << shift
    }

    fn tcr(&self) -> u64 {
        let tcma = match (self.el, self.tcma) {
            (1, true) => tcr::TCMA0 | tcr::TCMA1,
            (1, false) => tcr::TCMA0,
            (_, true) => tcr::TCMA0,
            (_, false) => 0,
        };
        TCR_BASE | tcma
    }

    /// The pointer: the first granule of the cell's page, through TTBR1 at EL1.
    fn ptr(&self) -> u64 {
        let page = match (self.el, self.tagged) {
            (1, true) => memory::kva(memory::EL1_TAGGED.addr()),
            (1, false) => memory::kva(memory::EL1_UNTAGGED.addr()),
            (_, true) => memory::EL0_TAGGED.addr(),
            (_, false) => memory::EL0_UNTAGGED.addr(),
        };
        let match_all = if self.el == 1 { 0xf } else { 0 };
        with_tag(page, if self.match_all { match_all } else { WRONG_TAG })
    }
}

/// ID_AA64PFR1_EL1.MTE: 2 for FEAT_MTE2, 3 for FEAT_MTE3 (asymmetric mode).
fn mte_level() -> u64 {
    arm_sysregs::el1::accessors::read_id_aa64pfr1_el1()
        .mte()
        .into()
}

/// Runs `pass` as phase after phase under fresh ids from `ids`: once, then again (with
/// PHASE_AGAIN) while the hypervisor wants more passes. Returns the first pass's result, or
/// the PHASE_END error. `pass(id, flags)` gives (PHASE_END result, passes still wanted, T).
fn passes<T: PartialEq>(
    ids: &mut u32,
    name: &str,
    mut pass: impl FnMut(u32, u64) -> (u64, u64, T),
) -> Result<T, u64> {
    let mut first: Option<T> = None;
    // Repeatable: the PMU's events that do not fit one pass get passes of their own.
    let mut flags = PHASE_REPEATABLE;
    loop {
        *ids += 1;
        let (end, more, t) = pass(*ids, flags);
        if end != ret::SUCCESS {
            return Err(end);
        }
        match &first {
            None => first = Some(t),
            Some(f) if *f != t => {
                println!(
                    "probe: note: {name}: phase {} saw other faults than its first pass",
                    *ids
                )
            }
            Some(_) => {}
        }
        if more == 0 {
            return Ok(first.expect("set by the first pass"));
        }
        flags = PHASE_REPEATABLE | PHASE_AGAIN;
    }
}

pub fn run(fdt: &Fdt) -> u64 {
    let level = mte_level();
    if level < 2 {
        println!("probe: the CPU has no FEAT_MTE2 (ID_AA64PFR1_EL1.MTE = {level})");
        return 12;
    }
    let mem = fdt.memory().regions().next().expect("a /memory region");
    memory::install(mem.starting_address as usize, mem.size.unwrap_or(0));
    cells::install_vectors();
    write_tcr(TCR_BASE);
    write_sctlr(SCTLR_BASE);
    // Through the TTBR0 (identity) addresses: tags belong to the physical granule.
    for page in [memory::EL1_TAGGED.addr(), memory::EL0_TAGGED.addr()] {
        mte::tag_range(page, 16, MEMORY_TAG);
    }
    let mut ids = 0;
    let mut controls = (TCR_BASE, SCTLR_BASE);
    for cell in (0..CELLS).map(Cell::from_index) {
        let name = cell.name();
        if cell.tcf == 3 && level < 3 {
            println!("probe: cell {name} skipped (no FEAT_MTE3)");
            continue;
        }
        if (cell.tcr(), cell.sctlr()) != controls {
            controls = (cell.tcr(), cell.sctlr());
            write_tcr(controls.0);
            write_sctlr(controls.1);
        }
        let packed: [u64; 4] = pack_bytes(name.as_bytes());
        let (ptr, tco) = (cell.ptr(), cell.tco);
        let faults = passes(&mut ids, &name, |id, flags| {
            let p = if cell.el == 1 {
                cells::el1(id, &packed, flags, ptr, tco)
            } else {
                cells::el0(id, &packed, flags, ptr, tco)
            };
            (p.end, p.more, (p.rd, p.wr))
        });
        let (rd, wr): (Fault, Fault) = match faults {
            Ok(f) => f,
            Err(e) => {
                println!("probe: cell {name} failed: phase end {e:#x}");
                return 6;
            }
        };
        println!(
            "probe: cell {name} rd={} wr={} sctlr={:#x} tcr={:#x} ptr={ptr:#x}",
            rd.name(),
            wr.name(),
            controls.1,
            controls.0
        );
    }
    write_tcr(TCR_BASE);
    write_sctlr(SCTLR_BASE);
    let page = memory::COST_PAGE.addr();
    for (what, phase, ops) in cost::PHASES {
        if what == "dc-gzva" && cost::zva_prohibited() {
            println!("probe: cost {what} skipped (DCZID_EL0.DZP: DC GZVA prohibited)");
            continue;
        }
        let name = format!("cost/{what}");
        let packed: [u64; 4] = pack_bytes(name.as_bytes());
        let n = cost::COST_N;
        let r = passes(&mut ids, &name, |id, flags| {
            let (end, more) = phase(id, &packed, flags, n, page);
            (end, more, ())
        });
        if let Err(e) = r {
            println!("probe: {name} failed: phase end {e:#x}");
            return 6;
        }
        println!("probe: cost {what} n={n} ops={}", n * ops);
    }
    println!("probe: done");
    0
}
