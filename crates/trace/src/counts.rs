//! What a traced phase adds up.
//!
//! The unit is the instruction: a load, a pair, a multi-register structure load each count one
//! read; a store one write; an atomic read-modify-write (LSE atomics, SWP, CAS, CASP) one read
//! and one write. Counts are attributed to the EL that executes the instruction, as the PMU's
//! EL filters do: an LDTR at EL1 counts under `:k` though EL0's controls decide whether it is
//! checked.

use crate::decode::{Barrier, Dir, Insn, MemKind, MemOp, MteSysReg};
use crate::predicate::{Access, Controls, elides, is_tag_checked};
use serde::{Deserialize, Serialize};

/// Checked reads and writes by executing EL, named like the perf events.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ByEl {
    /// mem_access_checked_rd:u
    pub rd_u: u64,
    /// mem_access_checked_rd:k
    pub rd_k: u64,
    /// mem_access_checked_wr:u
    pub wr_u: u64,
    /// mem_access_checked_wr:k
    pub wr_k: u64,
}

impl ByEl {
    fn add(&mut self, exec_el: u8, read: bool, write: bool) {
        let (rd, wr) = if exec_el == 0 {
            (&mut self.rd_u, &mut self.wr_u)
        } else {
            (&mut self.rd_k, &mut self.wr_k)
        };
        *rd += read as u64;
        *wr += write as u64;
    }

    pub fn total(&self) -> u64 {
        self.rd_u + self.rd_k + self.wr_u + self.wr_k
    }
}

/// One access judged under each view.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Views {
    /// The architecture, with the guest's actual controls.
    pub architectural: bool,
    /// Only where TCF/TCF0 is not NONE (Arm cores, QEMU).
    pub tcf_elided: bool,
    /// As if TCR_EL1.TCMA1 were set.
    pub if_tcma1: bool,
    /// As if the kernel had left PSTATE.TCO set (EL1-executed accesses).
    pub if_kernel_tco: bool,
}

/// Judges one access under every view: the predicate is called once per view.
pub fn judge(c: &Controls, a: &Access, exec_el: u8) -> Views {
    let tcma1 = Controls {
        tcr_el1: c.tcr_el1 | 1 << 58,
        ..*c
    };
    let kernel_tco = Access {
        tco: a.tco || exec_el == 1,
        ..*a
    };
    Views {
        architectural: is_tag_checked(c, a),
        tcf_elided: elides(c, a),
        if_tcma1: is_tag_checked(&tcma1, a),
        if_kernel_tco: is_tag_checked(c, &kernel_tco),
    }
}

/// Everything counted in a traced phase.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceCounts {
    pub architectural: ByEl,
    pub tcf_elided: ByEl,
    pub if_tcma1: ByEl,
    pub if_kernel_tco: ByEl,
    /// Every data access instruction, checked or not (same unit).
    pub accesses: ByEl,
    /// Instructions executed, by EL.
    pub instructions_el0: u64,
    pub instructions_el1: u64,
    /// `MSR TCO` instructions executed, and PSTATE.TCO changes EL2 saw across a step.
    pub tco_writes: u64,
    pub tco_changes: u64,
    /// Tag-store instructions (STG, STZG, ST2G, STZ2G, STGP, DC GVA/GZVA, STGM/STZGM) and the
    /// 16-byte granules they tagged.
    pub tag_store_insns: u64,
    pub granules_tagged: u64,
    /// MRS of TFSR_EL1/TFSRE0_EL1.
    pub tfsr_reads: u64,
    pub dsb: u64,
    pub dmb: u64,
    pub isb: u64,
    /// Synchronous tag-check faults the guest took on a traced instruction.
    pub tag_check_faults: u64,
    /// Load/store-space encodings the decoder does not model.
    pub unknown_mem: u64,
    /// TCO writes not listed in a TcoSite record (the per-phase site table was full).
    pub tco_site_overflow: u64,
}

/// A decoded instruction about to execute, with its access already judged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pending {
    pub pc: u64,
    /// The EL executing it.
    pub el: u8,
    pub insn: Insn,
    /// The read and the write half judged separately: they differ under store-only
    /// checking (an atomic's read half is a load).
    pub read: Option<Views>,
    pub write: Option<Views>,
    /// For tag-block stores: the granules of the block (DCZID_EL0 block size / 16).
    pub block_granules: u64,
}

impl Pending {
    /// Judges `insn` at `pc` in `el` with PSTATE.TCO `tco`. `page_tagged(va, as_el0)` says
    /// whether the page at `va` is Tagged (the hypervisor asks the MMU).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        pc: u64,
        el: u8,
        tco: bool,
        insn: Insn,
        c: &Controls,
        x: &[u64; 31],
        sp: u64,
        block_granules: u64,
        page_tagged: impl FnOnce(u64, bool) -> bool,
    ) -> Self {
        let mut p = Self {
            pc,
            el,
            insn,
            read: None,
            write: None,
            block_granules,
        };
        let Insn::Mem(m) = insn else { return p };
        let (reads, writes) = match m.dir {
            Dir::Read => (true, false),
            Dir::Write => (false, true),
            Dir::ReadWrite => (true, true),
        };
        let form_checkable = matches!(m.kind, MemKind::Data | MemKind::DcZva) && !m.sp_based();
        let counted = matches!(m.kind, MemKind::Data | MemKind::DcZva | MemKind::Literal);
        if !counted {
            return p;
        }
        let unchecked = Views::default();
        if !form_checkable {
            p.read = reads.then_some(unchecked);
            p.write = writes.then_some(unchecked);
            return p;
        }
        let va = m.address(x, sp);
        let access_el = if m.unprivileged { 0 } else { el };
        let a = Access {
            el: access_el,
            tco,
            va,
            write: false,
            form_checkable,
            tagged_page: page_tagged(va, access_el == 0),
        };
        p.read = reads.then(|| judge(c, &a, el));
        p.write = writes.then(|| judge(c, &Access { write: true, ..a }, el));
        p
    }
}

impl TraceCounts {
    /// Adds an instruction that executed.
    pub fn retire(&mut self, p: &Pending) {
        if p.el == 0 {
            self.instructions_el0 += 1;
        } else {
            self.instructions_el1 += 1;
        }
        match p.insn {
            Insn::Mem(m) => self.retire_mem(p, &m),
            Insn::MsrTcoImm(_) | Insn::MsrTcoReg(_) => self.tco_writes += 1,
            Insn::SysRegRead(MteSysReg::TfsrEl1 | MteSysReg::Tfsre0El1, _) => self.tfsr_reads += 1,
            Insn::Barrier(Barrier::Dsb) => self.dsb += 1,
            Insn::Barrier(Barrier::Dmb) => self.dmb += 1,
            Insn::Barrier(Barrier::Isb) => self.isb += 1,
            Insn::UnknownMem => self.unknown_mem += 1,
            _ => {}
        }
    }

    fn retire_mem(&mut self, p: &Pending, m: &MemOp) {
        match m.kind {
            MemKind::TagStore { granules } => {
                self.tag_store_insns += 1;
                self.granules_tagged += granules as u64;
            }
            MemKind::DcTagBlock { .. } | MemKind::TagStoreBlock => {
                self.tag_store_insns += 1;
                self.granules_tagged += p.block_granules;
            }
            _ => {}
        }
        let (r, w) = (p.read.is_some(), p.write.is_some());
        self.accesses.add(p.el, r, w);
        let rv = p.read.unwrap_or_default();
        let wv = p.write.unwrap_or_default();
        self.architectural
            .add(p.el, rv.architectural, wv.architectural);
        self.tcf_elided.add(p.el, rv.tcf_elided, wv.tcf_elided);
        self.if_tcma1.add(p.el, rv.if_tcma1, wv.if_tcma1);
        self.if_kernel_tco
            .add(p.el, rv.if_kernel_tco, wv.if_kernel_tco);
    }
}
