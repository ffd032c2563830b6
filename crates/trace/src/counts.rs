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

/// Judges one access under every view, by definition: the predicate once per view, each with
/// the configuration that view supposes. This is the reference; [`judge`] is the same
/// function computed with one predicate call (a property test holds them equal).
pub fn judge_by_definition(c: &Controls, a: &Access, exec_el: u8) -> Views {
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

/// Judges one access under every view (the step handler's hot path). Every other view only
/// removes checks from the architectural one: eliding on TCF NONE; TCMA1, which matches all
/// upper-half pointers whose bits 59:55 are all ones; TCO left set, which unchecks whatever
/// EL1 executes.
#[inline]
pub fn judge(c: &Controls, a: &Access, exec_el: u8) -> Views {
    if !is_tag_checked(c, a) {
        return Views::default();
    }
    Views {
        architectural: true,
        tcf_elided: c.tcf(a.el) != 0,
        if_tcma1: (a.va >> 55) & 0x1f != 0x1f,
        if_kernel_tco: exec_el != 1,
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

/// One direction of an access judged under every view, as bits (the step path stores and
/// reads this on every instruction, so it is kept to a byte).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Judged(u8);

impl Judged {
    const PRESENT: u8 = 1 << 0;
    const ARCH: u8 = 1 << 1;
    const ELIDED: u8 = 1 << 2;
    const TCMA1: u8 = 1 << 3;
    const KERNEL_TCO: u8 = 1 << 4;

    /// An access in this direction, judged `v`.
    pub fn access(v: Views) -> Self {
        Self(
            Self::PRESENT
                | (v.architectural as u8) << 1
                | (v.tcf_elided as u8) << 2
                | (v.if_tcma1 as u8) << 3
                | (v.if_kernel_tco as u8) << 4,
        )
    }

    pub fn present(self) -> bool {
        self.0 & Self::PRESENT != 0
    }

    pub fn views(self) -> Views {
        Views {
            architectural: self.0 & Self::ARCH != 0,
            tcf_elided: self.0 & Self::ELIDED != 0,
            if_tcma1: self.0 & Self::TCMA1 != 0,
            if_kernel_tco: self.0 & Self::KERNEL_TCO != 0,
        }
    }

    fn bit(self, b: u8) -> u64 {
        (self.0 & b != 0) as u64
    }
}

/// What retiring an instruction adds, beyond one instruction at its EL.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Effect {
    #[default]
    None,
    /// A data access (see `Pending::read`/`write`).
    Access,
    /// A tag store over this many granules.
    TagStore(u32),
    /// `MSR TCO, #imm`.
    TcoImm(bool),
    /// `MSR TCO, Xt`.
    TcoReg(u8),
    TfsrRead,
    Dsb,
    Dmb,
    Isb,
    UnknownMem,
}

/// A decoded instruction about to execute, with its access already judged. Small and
/// word-aligned: it is written on every step.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C, align(8))]
pub struct Pending {
    pub pc: u64,
    pub effect: Effect,
    /// The EL executing it.
    pub el: u8,
    /// The read and the write half judged separately: they differ under store-only
    /// checking (an atomic's read half is a load).
    pub read: Judged,
    pub write: Judged,
}

impl Pending {
    /// Judges `insn` at `pc` in `el` with PSTATE.TCO `tco`. `page_tagged(va, as_el0)` says
    /// whether the page at `va` is Tagged (the hypervisor asks the MMU). `block_granules`
    /// is the size of a DC GVA/GZVA/STGM block in granules.
    #[allow(clippy::too_many_arguments)]
    #[inline]
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
            ..Self::default()
        };
        p.effect = match insn {
            Insn::Mem(m) => match m.kind {
                MemKind::TagStore { granules } => Effect::TagStore(granules as u32),
                MemKind::DcTagBlock { .. } | MemKind::TagStoreBlock => {
                    Effect::TagStore(block_granules as u32)
                }
                MemKind::Prefetch | MemKind::TagLoad => Effect::None,
                MemKind::Data | MemKind::DcZva | MemKind::Literal => {
                    p.judge_mem(&m, tco, c, x, sp, page_tagged);
                    Effect::Access
                }
            },
            Insn::MsrTcoImm(v) => Effect::TcoImm(v),
            Insn::MsrTcoReg(t) => Effect::TcoReg(t),
            Insn::SysRegRead(MteSysReg::TfsrEl1 | MteSysReg::Tfsre0El1, _) => Effect::TfsrRead,
            Insn::Barrier(Barrier::Dsb) => Effect::Dsb,
            Insn::Barrier(Barrier::Dmb) => Effect::Dmb,
            Insn::Barrier(Barrier::Isb) => Effect::Isb,
            Insn::UnknownMem => Effect::UnknownMem,
            _ => Effect::None,
        };
        p
    }

    fn judge_mem(
        &mut self,
        m: &MemOp,
        tco: bool,
        c: &Controls,
        x: &[u64; 31],
        sp: u64,
        page_tagged: impl FnOnce(u64, bool) -> bool,
    ) {
        let (reads, writes) = match m.dir {
            Dir::Read => (true, false),
            Dir::Write => (false, true),
            Dir::ReadWrite => (true, true),
        };
        let form_checkable = matches!(m.kind, MemKind::Data | MemKind::DcZva) && !m.sp_based();
        let unchecked = Judged::access(Views::default());
        if !form_checkable {
            self.read = if reads { unchecked } else { Judged::default() };
            self.write = if writes { unchecked } else { Judged::default() };
            return;
        }
        let va = m.address(x, sp);
        let access_el = if m.unprivileged { 0 } else { self.el };
        let a = Access {
            el: access_el,
            tco,
            va,
            write: false,
            form_checkable,
            tagged_page: page_tagged(va, access_el == 0),
        };
        if reads {
            self.read = Judged::access(judge(c, &a, self.el));
        }
        if writes {
            self.write = Judged::access(judge(c, &Access { write: true, ..a }, self.el));
        }
    }
}

impl TraceCounts {
    /// Adds an instruction that executed.
    #[inline]
    pub fn retire(&mut self, p: &Pending) {
        if p.el == 0 {
            self.instructions_el0 += 1;
        } else {
            self.instructions_el1 += 1;
        }
        match p.effect {
            Effect::None => {}
            Effect::Access => self.retire_access(p),
            Effect::TagStore(g) => {
                self.tag_store_insns += 1;
                self.granules_tagged += g as u64;
            }
            Effect::TcoImm(_) | Effect::TcoReg(_) => self.tco_writes += 1,
            Effect::TfsrRead => self.tfsr_reads += 1,
            Effect::Dsb => self.dsb += 1,
            Effect::Dmb => self.dmb += 1,
            Effect::Isb => self.isb += 1,
            Effect::UnknownMem => self.unknown_mem += 1,
        }
    }

    fn retire_access(&mut self, p: &Pending) {
        let (r, w) = (p.read, p.write);
        let views = [
            (&mut self.accesses, Judged::PRESENT),
            (&mut self.architectural, Judged::ARCH),
            (&mut self.tcf_elided, Judged::ELIDED),
            (&mut self.if_tcma1, Judged::TCMA1),
            (&mut self.if_kernel_tco, Judged::KERNEL_TCO),
        ];
        for (counter, bit) in views {
            if p.el == 0 {
                counter.rd_u += r.bit(bit);
                counter.wr_u += w.bit(bit);
            } else {
                counter.rd_k += r.bit(bit);
                counter.wr_k += w.bit(bit);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The one-call judge equals the by-definition judge on every input.
        #[test]
        fn fast_judge_is_the_definition(sctlr: u64, tcr: u64, hcr_ata: bool, va: u64,
                                        el in 0u8..2, exec_el in 0u8..2, tco: bool,
                                        write: bool, form: bool, page: bool) {
            let c = Controls { sctlr_el1: sctlr, tcr_el1: tcr, hcr_ata };
            let a = Access { el, tco, va, write, form_checkable: form, tagged_page: page };
            prop_assert_eq!(judge(&c, &a, exec_el), judge_by_definition(&c, &a, exec_el));
        }
    }

    #[test]
    fn an_atomic_counts_one_read_and_one_write() {
        let c = Controls {
            sctlr_el1: 1 << 43 | 1 << 40,
            tcr_el1: 1 << 37,
            hcr_ata: true,
        };
        let x = [0x0300_0000_4100_0000u64; 31];
        let insn = crate::decode::decode(0xf8210043); // ldadd x1, x3, [x2]
        let p = Pending::new(0, 1, false, insn, &c, &x, 0, 4, |_, _| true);
        let mut t = TraceCounts::default();
        t.retire(&p);
        assert_eq!((t.architectural.rd_k, t.architectural.wr_k), (1, 1));
        assert_eq!(t.instructions_el1, 1);
        // Under store-only checking only the write half is checked.
        let so = Controls {
            sctlr_el1: c.sctlr_el1 | 1 << 59,
            ..c
        };
        let mut t = TraceCounts::default();
        t.retire(&Pending::new(0, 1, false, insn, &so, &x, 0, 4, |_, _| true));
        assert_eq!((t.architectural.rd_k, t.architectural.wr_k), (0, 1));
    }
}
