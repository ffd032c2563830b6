//! What a traced phase adds up.
//!
//! The unit is the instruction: a load, a pair, a multi-register structure load each count one
//! read; a store one write; an atomic read-modify-write (LSE atomics, SWP, CAS, CASP) one read
//! and one write. Counts are attributed to the EL that executes the instruction, as the PMU's
//! EL filters do: an LDTR at EL1 counts under `:k` though EL0's controls decide whether it is
//! checked.

use crate::decode::{Barrier, Dir, Insn, MemKind, MemOp, MteSysReg};
use crate::predicate::{Access, Controls, elides, is_tag_checked};
use mtex_arch::esr::ExceptionClass;
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

    /// Adds `o`'s counts to these.
    pub fn add(&mut self, o: &ByEl) {
        let ByEl {
            rd_u,
            rd_k,
            wr_u,
            wr_k,
        } = *o;
        self.rd_u += rd_u;
        self.rd_k += rd_k;
        self.wr_u += wr_u;
        self.wr_k += wr_k;
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

impl Views {
    /// Checked in a view if either part is: an access split in two parts (one per page) is
    /// Tag Checked if either part is, and counted once.
    #[inline]
    pub fn or(self, o: Views) -> Views {
        Views {
            architectural: self.architectural || o.architectural,
            tcf_elided: self.tcf_elided || o.tcf_elided,
            if_tcma1: self.if_tcma1 || o.if_tcma1,
            if_kernel_tco: self.if_kernel_tco || o.if_kernel_tco,
        }
    }
}

/// Judges one access under every view, by definition: the predicate once per view, each with
/// the configuration that view supposes. This is the reference; [`judge`] is the same
/// function computed with one predicate call (a property test holds them equal).
pub fn judge_by_definition(c: &Controls, a: &Access, exec_el: u8) -> Views {
    let tcma1 = Controls {
        tcr_el1: c.tcr_el1 | mtex_arch::mte_bits::tcr::TCMA1,
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
    /// The kernel's accesses to user memory with LDTR/STTR (judged as EL0's, counted under
    /// `:k` above as the PMU counts them, by the EL that executes them).
    pub uaccess: UaccessCounts,
    /// Exceptions the guest took to EL1 (kernel entries), by kind.
    pub entries: EntryCounts,
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
    /// Stretches of inert instructions run at full speed between two breakpoints instead of
    /// being stepped, and runs that ended somewhere the plan did not know (their
    /// instructions could not be counted: reported, never guessed).
    pub runs: u64,
    pub runs_lost: u64,
    /// Store-exclusives that failed (status 1): executed, but no access, so not in the
    /// access counts.
    pub failed_store_exclusives: u64,
    /// Tag-check faults taken on an access the predicate judged not Tag Checked: the model
    /// and the CPU disagree, so every figure of the phase is in doubt (a problem).
    pub unexpected_tag_check_faults: u64,
    /// Instructions that began but did not complete, by EL: a synchronous exception was
    /// taken on them after they were decoded ([`began`]: a data abort, a tag-check fault, an
    /// undefined instruction, Linux mode's doorbell store). Not in `instructions_el*`, as
    /// the PMU does not count them; an emulator's per-instruction hook does (the oracle).
    /// They travel in their own record (`Record::TraceMore`), not in this one's encoding, so
    /// that saved logs still decode.
    #[serde(skip)]
    pub abandoned_el0: u64,
    #[serde(skip)]
    pub abandoned_el1: u64,
    /// Of the abandoned, those whose exception the instruction raised itself rather than its
    /// memory access ([`raised_by_the_instruction`]: an undefined instruction, a system
    /// register access Linux emulates...). QEMU raises these from its translated code, and its
    /// PMU counts them as executed (measured: glibc's static start-up reads MIDR_EL1 at EL0,
    /// which Linux emulates: one EL0 instruction more from the PMU than the trace counts).
    #[serde(skip)]
    pub trapped_el0: u64,
    #[serde(skip)]
    pub trapped_el1: u64,
    /// CAS/CASP whose compare failed (`decode::Compare`): counted as a read and a write,
    /// judged alike, but the Arm ARM lets a CPU make that write Tag Unchecked, or not make
    /// it (CONSTRAINED UNPREDICTABLE). Their own record (`Record::TraceImpdef`), as above.
    #[serde(skip)]
    pub failed_cas: u64,
    /// Store-exclusives whose Tag Checked property differed from their load-exclusive's:
    /// the Arm ARM makes the store's status UNKNOWN, so whether it wrote is not known.
    #[serde(skip)]
    pub exclusive_pairs_mixed: u64,
    /// Accesses judged Tag Checked only because their memory is Tagged in a way whose
    /// Tagged-ness is IMPLEMENTATION DEFINED ([`crate::predicate::tagged_is_impdef`]:
    /// mapped Non-shareable, or with SCTLR_EL1.C = 0).
    #[serde(skip)]
    pub tagged_impdef: u64,
}

impl TraceCounts {
    /// Adds `o`'s counts to these: a window's total over the CPUs that counted it. Every
    /// field is named, so that a new one cannot be left out of the sum.
    pub fn add(&mut self, o: &TraceCounts) {
        let TraceCounts {
            architectural,
            tcf_elided,
            if_tcma1,
            if_kernel_tco,
            accesses,
            uaccess,
            entries,
            instructions_el0,
            instructions_el1,
            tco_writes,
            tco_changes,
            tag_store_insns,
            granules_tagged,
            tfsr_reads,
            dsb,
            dmb,
            isb,
            tag_check_faults,
            unknown_mem,
            tco_site_overflow,
            runs,
            runs_lost,
            failed_store_exclusives,
            unexpected_tag_check_faults,
            abandoned_el0,
            abandoned_el1,
            trapped_el0,
            trapped_el1,
            failed_cas,
            exclusive_pairs_mixed,
            tagged_impdef,
        } = *o;
        self.architectural.add(&architectural);
        self.tcf_elided.add(&tcf_elided);
        self.if_tcma1.add(&if_tcma1);
        self.if_kernel_tco.add(&if_kernel_tco);
        self.accesses.add(&accesses);
        let UaccessCounts {
            rd,
            wr,
            arch_rd,
            arch_wr,
            elided_rd,
            elided_wr,
        } = uaccess;
        self.uaccess.rd += rd;
        self.uaccess.wr += wr;
        self.uaccess.arch_rd += arch_rd;
        self.uaccess.arch_wr += arch_wr;
        self.uaccess.elided_rd += elided_rd;
        self.uaccess.elided_wr += elided_wr;
        let EntryCounts {
            sync_el0,
            irq_el0,
            sync_el1,
            irq_el1,
            other,
        } = entries;
        self.entries.sync_el0 += sync_el0;
        self.entries.irq_el0 += irq_el0;
        self.entries.sync_el1 += sync_el1;
        self.entries.irq_el1 += irq_el1;
        self.entries.other += other;
        self.instructions_el0 += instructions_el0;
        self.instructions_el1 += instructions_el1;
        self.tco_writes += tco_writes;
        self.tco_changes += tco_changes;
        self.tag_store_insns += tag_store_insns;
        self.granules_tagged += granules_tagged;
        self.tfsr_reads += tfsr_reads;
        self.dsb += dsb;
        self.dmb += dmb;
        self.isb += isb;
        self.tag_check_faults += tag_check_faults;
        self.unknown_mem += unknown_mem;
        self.tco_site_overflow += tco_site_overflow;
        self.runs += runs;
        self.runs_lost += runs_lost;
        self.failed_store_exclusives += failed_store_exclusives;
        self.unexpected_tag_check_faults += unexpected_tag_check_faults;
        self.abandoned_el0 += abandoned_el0;
        self.abandoned_el1 += abandoned_el1;
        self.trapped_el0 += trapped_el0;
        self.trapped_el1 += trapped_el1;
        self.failed_cas += failed_cas;
        self.exclusive_pairs_mixed += exclusive_pairs_mixed;
        self.tagged_impdef += tagged_impdef;
    }

    /// Counts one abandoned instruction at `el`, on which an exception of class `ec` was taken.
    pub fn note_abandoned(&mut self, el: u8, ec: ExceptionClass) {
        let trapped = raised_by_the_instruction(ec) as u64;
        if el == 0 {
            self.abandoned_el0 += 1;
            self.trapped_el0 += trapped;
        } else {
            self.abandoned_el1 += 1;
            self.trapped_el1 += trapped;
        }
    }
}

/// Whether an exception of class `ec` taken on an instruction that began was raised by the
/// instruction itself (an undefined instruction, a trapped system register or FP access, BRK)
/// rather than by its memory access (a data abort, a tag-check fault, a watchpoint).
pub fn raised_by_the_instruction(ec: ExceptionClass) -> bool {
    use ExceptionClass::*;
    !matches!(ec, DataAbortLower | DataAbortSame | Other(0x34 | 0x35))
}

/// Whether an instruction on which a synchronous exception of class `ec` (ESR.EC) was taken,
/// returning to the instruction itself, had begun: fetched and decoded, so that an emulator's
/// per-instruction hook saw it. Instruction aborts (0x20/0x21), PC alignment faults (0x22),
/// breakpoints (0x30/0x31) and software steps (0x32/0x33) are taken before the instruction is
/// decoded; SVC (0x15), HVC and SMC complete (they return past themselves, so they never come
/// here, but are answered for completeness).
pub fn began(ec: ExceptionClass) -> bool {
    use ExceptionClass::*;
    !matches!(
        ec,
        InstructionAbortLower
            | InstructionAbortSame
            | BreakpointLower
            | SoftwareStepLower
            | Hvc64
            | Smc64
            | Other(0x15 | 0x22 | 0x31 | 0x33)
    )
}

/// Kernel entries: exceptions taken to EL1, told apart by the vector a step lands on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntryCounts {
    /// Synchronous from EL0 (SVC, aborts), and IRQ from EL0.
    pub sync_el0: u64,
    pub irq_el0: u64,
    /// Synchronous from EL1 (faults), and IRQ from EL1.
    pub sync_el1: u64,
    pub irq_el1: u64,
    /// FIQ and SError, and AArch32 vectors (never expected).
    pub other: u64,
}

impl EntryCounts {
    /// Counts the exception whose vector is at `offset` from VBAR_EL1 (a multiple of 0x80
    /// below 0x800).
    pub fn note(&mut self, offset: u64) {
        match offset {
            0x000 | 0x200 => self.sync_el1 += 1,
            0x080 | 0x280 => self.irq_el1 += 1,
            0x400 => self.sync_el0 += 1,
            0x480 => self.irq_el0 += 1,
            _ => self.other += 1,
        }
    }

    /// Every kernel entry.
    pub fn total(&self) -> u64 {
        self.sync_el0 + self.irq_el0 + self.sync_el1 + self.irq_el1 + self.other
    }
}

/// Unprivileged (LDTR/STTR) accesses made at EL1: all of them, and those checked in the
/// architectural and TCF-elided views.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UaccessCounts {
    pub rd: u64,
    pub wr: u64,
    pub arch_rd: u64,
    pub arch_wr: u64,
    pub elided_rd: u64,
    pub elided_wr: u64,
}

/// One direction of an access judged under every view, as bits (the step path stores and
/// reads this on every instruction, so it is kept to a byte).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Judged(pub u8);

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

/// Granules stored by the block tag-store instructions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlockGranules {
    /// DC GVA/GZVA: the DCZID_EL0 block.
    pub dc: u64,
    /// STGM/STZGM: the GMID_EL1 block.
    pub gm: u64,
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
    /// An LDTR/STTR at EL1 that accesses as EL0 (the kernel's uaccess).
    pub unprivileged: bool,
    /// Judged Tag Checked only because a page it touches is Tagged in a way a CPU may
    /// treat as Untagged (`TraceCounts::tagged_impdef`). Set by the judge's caller, which
    /// asks the MMU.
    pub tagged_impdef: bool,
}

impl Pending {
    /// Judges `insn` at `pc` in `el` with PSTATE.TCO `tco` and PSTATE.UAO `uao` (which
    /// makes LDTR/STTR at EL1 privileged). `page_tagged(va, as_el0)` says whether the page at
    /// `va` is Tagged (the hypervisor asks the MMU); it is asked twice for an access that
    /// crosses into another page. `blocks` gives the granules of the DC GVA/GZVA block
    /// (DCZID_EL0) and of the STGM/STZGM block (GMID_EL1).
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub fn new(
        pc: u64,
        el: u8,
        (tco, uao): (bool, bool),
        insn: Insn,
        c: &Controls,
        x: &[u64; 31],
        sp: u64,
        blocks: BlockGranules,
        page_tagged: impl FnMut(u64, bool) -> bool,
    ) -> Self {
        let mut p = Self {
            pc,
            el,
            ..Self::default()
        };
        p.effect = match insn {
            Insn::Mem(m) => match m.kind {
                // Their data half (STGP's 16 bytes; the zeroing of STZG, STZ2G, DC GZVA and
                // STZGM): a write that is never Tag Checked, but an access, as DC ZVA's is.
                MemKind::TagStore { granules, data } => {
                    p.write = unchecked_write_if(data);
                    Effect::TagStore(granules as u32)
                }
                MemKind::DcTagBlock { zero_data } => {
                    p.write = unchecked_write_if(zero_data);
                    Effect::TagStore(blocks.dc as u32)
                }
                MemKind::TagStoreBlock { zero_data } => {
                    p.write = unchecked_write_if(zero_data);
                    Effect::TagStore(blocks.gm as u32)
                }
                MemKind::Prefetch | MemKind::TagLoad => Effect::None,
                MemKind::Data | MemKind::DcZva | MemKind::Literal => {
                    p.judge_mem(&m, tco, uao, c, x, sp, page_tagged);
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

    /// A static instruction of a run (`run::NodeKind::Static`), retired without its
    /// registers: its effect never depends on them (an Unchecked access, a tag store, a
    /// barrier, `MSR TCO, #imm`...), so the registers and controls given are placeholders.
    pub fn of_static(pc: u64, el: u8, word: u32, blocks: BlockGranules) -> Self {
        let mut asked = false;
        let p = Self::new(
            pc,
            el,
            (false, false),
            crate::decode::decode(word),
            &Controls::default(),
            &[0; 31],
            0,
            blocks,
            |_, _| {
                asked = true;
                false
            },
        );
        debug_assert!(!asked, "a static instruction was judged: {word:#x}");
        p
    }

    #[allow(clippy::too_many_arguments)]
    fn judge_mem(
        &mut self,
        m: &MemOp,
        tco: bool,
        uao: bool,
        c: &Controls,
        x: &[u64; 31],
        sp: u64,
        mut page_tagged: impl FnMut(u64, bool) -> bool,
    ) {
        let (reads, writes) = match m.dir {
            Dir::Read => (true, false),
            Dir::Write => (false, true),
            Dir::ReadWrite => (true, true),
        };
        let form_checkable = m.form_checkable();
        let unchecked = Judged::access(Views::default());
        if !form_checkable {
            self.read = if reads { unchecked } else { Judged::default() };
            self.write = if writes { unchecked } else { Judged::default() };
            return;
        }
        // LDRAA/LDRAB access the authenticated pointer plus the offset.
        let base = m.base_value(x, sp);
        let base = m.auth.map_or(base, |key| c.authenticated(base, key));
        let va = m.address_from(base, x);
        // AArch64.IsUnprivAccessPriv: with PSTATE.UAO set, LDTR/STTR at EL1 are privileged.
        let access_el = if m.unprivileged && !uao { 0 } else { self.el };
        self.unprivileged = access_el != self.el;
        let a = Access {
            el: access_el,
            tco,
            va,
            write: false,
            form_checkable,
            tagged_page: page_tagged(va, access_el == 0),
        };
        // An access whose bytes reach into the next page (unaligned, at most 64 bytes, so
        // never a third page) is made in parts, one per page, each translated and checked on
        // its own (`Mem[]` splits it; `AArch64.CheckTag` checks a part only if its page is
        // Tagged): it is Tag Checked if the part on either page is. The second part is judged
        // at the access's last byte. (4KB steps: with larger pages both lookups may land on
        // the same page, which only costs the second lookup.)
        let last = va.wrapping_add((m.size as u64).saturating_sub(1));
        let second = ((va ^ last) >> 12 != 0).then(|| Access {
            va: last,
            tagged_page: page_tagged(last, access_el == 0),
            ..a
        });
        let judge_parts = |write: bool| {
            let v = judge(c, &Access { write, ..a }, self.el);
            match second {
                Some(b) => v.or(judge(c, &Access { write, ..b }, self.el)),
                None => v,
            }
        };
        if reads {
            self.read = Judged::access(judge_parts(false));
        }
        if writes {
            self.write = Judged::access(judge_parts(true));
        }
    }
}

/// A write access never Tag Checked, if `data` (the data half of a tag store).
fn unchecked_write_if(data: bool) -> Judged {
    if data {
        Judged::access(Views::default())
    } else {
        Judged::default()
    }
}

/// How one direction of an access was judged, as one of ten states: absent, present but
/// unchecked, or checked with each combination of the three other views. (The other views
/// only ever remove checks from the architectural one, so these are all that occur.)
const fn state(j: Judged) -> usize {
    if j.0 & Judged::PRESENT == 0 {
        0
    } else if j.0 & Judged::ARCH == 0 {
        1
    } else {
        2 + ((j.0 >> 2) & 7) as usize
    }
}

/// The judgement of a state (inverse of [`state`]).
const fn judged_of(state: usize) -> Judged {
    match state {
        0 => Judged(0),
        1 => Judged(Judged::PRESENT),
        s => Judged(Judged::PRESENT | Judged::ARCH | (((s - 2) as u8) << 2)),
    }
}

const STATES: usize = 10;

/// The histogram class of an access: 0 EL0, 1 EL1, 2 EL1 unprivileged.
#[inline]
fn class(p: &Pending) -> usize {
    if p.el == 0 {
        0
    } else if p.unprivileged {
        2
    } else {
        1
    }
}

/// Adds up retired instructions. Accesses go into a histogram keyed by (EL, read state,
/// write state) — one increment on the step path instead of one per view — and are spread
/// into the per-view counts by [`Tally::finish`].
#[derive(Default)]
pub struct Tally {
    counts: TraceCounts,
    /// By class: EL0, EL1, EL1 unprivileged (uaccess).
    accesses: [[[u64; STATES]; STATES]; 3],
    /// The same instructions by PC, when asked for (`mtex.profile`).
    profile: Option<crate::profile::PcTable>,
}

impl Tally {
    /// Adds an instruction that executed.
    #[inline]
    pub fn retire(&mut self, p: &Pending) {
        if let Some(t) = &mut self.profile {
            t.note(p);
        }
        let c = &mut self.counts;
        if p.el == 0 {
            c.instructions_el0 += 1;
        } else {
            c.instructions_el1 += 1;
        }
        match p.effect {
            Effect::None => {}
            Effect::Access => {
                self.accesses[class(p)][state(p.read)][state(p.write)] += 1;
                c.tagged_impdef += p.tagged_impdef as u64;
            }
            Effect::TagStore(g) => {
                c.tag_store_insns += 1;
                c.granules_tagged += g as u64;
                if p.write.0 & Judged::PRESENT != 0 {
                    self.accesses[class(p)][state(p.read)][state(p.write)] += 1;
                }
            }
            Effect::TcoImm(_) | Effect::TcoReg(_) => c.tco_writes += 1,
            Effect::TfsrRead => c.tfsr_reads += 1,
            Effect::Dsb => c.dsb += 1,
            Effect::Dmb => c.dmb += 1,
            Effect::Isb => c.isb += 1,
            Effect::UnknownMem => c.unknown_mem += 1,
        }
    }

    /// Adds the access of an instruction that did not complete because its tag check
    /// failed: the access was made and checked; the instruction is not counted as executed
    /// (the PMU does not count it either, and a handler may run it again).
    pub fn retire_faulted_access(&mut self, p: &Pending) {
        if let Some(t) = &mut self.profile {
            t.note_faulted(p);
        }
        self.counts.tag_check_faults += 1;
        if p.effect == Effect::Access {
            self.accesses[class(p)][state(p.read)][state(p.write)] += 1;
        }
    }

    /// The counts that are not per access (instructions, TCO, faults...), to add to.
    pub fn counts_mut(&mut self) -> &mut TraceCounts {
        &mut self.counts
    }

    /// Keeps the retired instructions by PC as well, in `table`, from now on.
    pub fn set_profile(&mut self, table: crate::profile::PcTable) {
        self.profile = Some(table);
    }

    /// Gives up the per-PC table (to the tally of another CPU that is about to count).
    pub fn take_profile(&mut self) -> Option<crate::profile::PcTable> {
        self.profile.take()
    }

    /// The retired instructions are kept by PC too.
    #[inline]
    pub fn profiling(&self) -> bool {
        self.profile.is_some()
    }

    /// The per-PC table, if kept: where the callers that count instructions in bulk (with
    /// `counts_mut`) say which PCs they were.
    pub fn profile_mut(&mut self) -> Option<&mut crate::profile::PcTable> {
        self.profile.as_mut()
    }

    /// Starts again from zero, in place (no copy of the histogram).
    pub fn reset(&mut self) {
        if let Some(t) = &mut self.profile {
            t.reset();
        }
        self.counts = TraceCounts::default();
        for by_read in self.accesses.iter_mut().flatten() {
            by_read.fill(0);
        }
    }

    /// Everything counted, the accesses spread into their views.
    pub fn finish(&self) -> TraceCounts {
        let mut c = self.counts;
        let cells = self.accesses.iter().enumerate().flat_map(|(el, by_read)| {
            by_read.iter().enumerate().flat_map(move |(r, by_write)| {
                by_write
                    .iter()
                    .enumerate()
                    .map(move |(w, &n)| (el, r, w, n))
            })
        });
        for (class, r, w, n) in cells {
            if n == 0 {
                continue;
            }
            let el1 = class != 0;
            let (r, w) = (judged_of(r), judged_of(w));
            if class == 2 {
                let u = &mut c.uaccess;
                u.rd += n * r.bit(Judged::PRESENT);
                u.wr += n * w.bit(Judged::PRESENT);
                u.arch_rd += n * r.bit(Judged::ARCH);
                u.arch_wr += n * w.bit(Judged::ARCH);
                u.elided_rd += n * r.bit(Judged::ELIDED);
                u.elided_wr += n * w.bit(Judged::ELIDED);
            }
            for (counter, bit) in [
                (&mut c.accesses, Judged::PRESENT),
                (&mut c.architectural, Judged::ARCH),
                (&mut c.tcf_elided, Judged::ELIDED),
                (&mut c.if_tcma1, Judged::TCMA1),
                (&mut c.if_kernel_tco, Judged::KERNEL_TCO),
            ] {
                if el1 {
                    counter.rd_k += n * r.bit(bit);
                    counter.wr_k += n * w.bit(bit);
                } else {
                    counter.rd_u += n * r.bit(bit);
                    counter.wr_u += n * w.bit(bit);
                }
            }
        }
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_sum_of_shares_adds_every_field() {
        let one = TraceCounts {
            architectural: ByEl {
                rd_u: 1,
                rd_k: 2,
                wr_u: 3,
                wr_k: 4,
            },
            accesses: ByEl {
                rd_u: 5,
                rd_k: 6,
                wr_u: 7,
                wr_k: 8,
            },
            uaccess: UaccessCounts {
                rd: 9,
                ..Default::default()
            },
            entries: EntryCounts {
                irq_el1: 10,
                ..Default::default()
            },
            instructions_el0: 11,
            instructions_el1: 12,
            abandoned_el1: 13,
            trapped_el0: 14,
            tag_check_faults: 15,
            ..Default::default()
        };
        let mut sum = TraceCounts::default();
        sum.add(&one);
        assert_eq!(sum, one);
        sum.add(&one);
        assert_eq!(
            sum.architectural,
            ByEl {
                rd_u: 2,
                rd_k: 4,
                wr_u: 6,
                wr_k: 8
            }
        );
        assert_eq!(sum.accesses.total(), 2 * one.accesses.total());
        assert_eq!((sum.uaccess.rd, sum.entries.irq_el1), (18, 20));
        assert_eq!((sum.instructions_el0, sum.instructions_el1), (22, 24));
        assert_eq!((sum.abandoned_el1, sum.trapped_el0), (26, 28));
        assert_eq!(sum.tag_check_faults, 30);
    }

    #[test]
    fn faults_on_a_decoded_instruction_began_and_those_before_decoding_did_not() {
        let began_ec = |ec: u8| began(ExceptionClass::from_bits(ec));
        // Data aborts (lower, same), an UNDEFINED instruction, a trapped FP access, BRK.
        for ec in [0x24, 0x25, 0x00, 0x07, 0x3c] {
            assert!(began_ec(ec), "EC {ec:#x}");
        }
        // Instruction aborts, PC alignment, breakpoints, software steps, SVC/HVC/SMC.
        for ec in [0x20, 0x21, 0x22, 0x30, 0x31, 0x32, 0x33, 0x15, 0x16, 0x17] {
            assert!(!began_ec(ec), "EC {ec:#x}");
        }
    }

    #[test]
    fn abandoned_instructions_count_by_el_and_those_that_trapped_apart() {
        let mut c = TraceCounts::default();
        let (data_abort, sysreg, undefined) = (
            ExceptionClass::from_bits(0x24),
            ExceptionClass::from_bits(0x18),
            ExceptionClass::from_bits(0x00),
        );
        c.note_abandoned(0, data_abort);
        c.note_abandoned(0, sysreg);
        c.note_abandoned(1, data_abort);
        c.note_abandoned(1, undefined);
        c.note_abandoned(1, ExceptionClass::from_bits(0x25));
        assert_eq!((c.abandoned_el0, c.abandoned_el1), (2, 3));
        assert_eq!((c.trapped_el0, c.trapped_el1), (1, 1));
        // A watchpoint is its memory access's too.
        assert!(!raised_by_the_instruction(ExceptionClass::from_bits(0x35)));
    }

    proptest! {
        /// The one-call judge equals the by-definition judge on every input.
        #[test]
        fn fast_judge_is_the_definition(sctlr: u64, tcr: u64, hcr_ata: bool, va: u64,
                                        el in 0u8..2, exec_el in 0u8..2, tco: bool,
                                        write: bool, form: bool, page: bool) {
            let c = Controls { sctlr_el1: sctlr, tcr_el1: tcr, hcr_ata, features: crate::predicate::MteFeatures::ALL };
            let a = Access { el, tco, va, write, form_checkable: form, tagged_page: page };
            prop_assert_eq!(judge(&c, &a, exec_el), judge_by_definition(&c, &a, exec_el));
        }
    }

    proptest! {
        /// What a run counts for a static instruction without its registers is what the
        /// step path counts with them, whatever they hold.
        #[test]
        fn static_instructions_do_not_depend_on_registers(
            r: u32, seed: [u64; 4], sp: u64, sctlr: u64, tcr: u64,
            el in 0u8..2, tco: bool, uao: bool, tagged: bool, pc: u64,
        ) {
            // Mostly load/store space with SP as the base register, where statics are.
            let word = ((r & !0x0a00_0000) | 0x0800_0000) | (31 << 5);
            let words = [word, r];
            for w in words {
                if crate::run::node_kind(w) != crate::run::NodeKind::Static {
                    continue;
                }
                let mut x = [0u64; 31];
                for (i, v) in x.iter_mut().enumerate() {
                    *v = seed[i % 4].rotate_left(i as u32);
                }
                let c = Controls { sctlr_el1: sctlr, tcr_el1: tcr, hcr_ata: true,
                                   features: crate::predicate::MteFeatures::ALL };
                let blocks = BlockGranules { dc: 4, gm: 16 };
                let live = Pending::new(pc, el, (tco, uao), crate::decode::decode(w), &c, &x, sp,
                                        blocks, |_, _| tagged);
                prop_assert_eq!(live, Pending::of_static(pc, el, w, blocks), "{:#x}", w);
            }
        }
    }

    /// Every tag store that writes data (STGP's 16 bytes; STZG, STZ2G, STZGM and DC GZVA
    /// zeroing what they tag) is one Unchecked data write, as DC ZVA is one (checked) write;
    /// those that store tags only are no data access.
    #[test]
    fn tag_stores_that_write_data_are_one_unchecked_write_each() {
        let c = Controls {
            sctlr_el1: u64::MAX,
            tcr_el1: 0,
            hcr_ata: true,
            features: crate::predicate::MteFeatures::ALL,
        };
        let blocks = BlockGranules { dc: 4, gm: 16 };
        let mut t = Tally::default();
        // Words as GNU as assembles them (tests/corpus.s has each form).
        let writing = [
            0x6900_0440u32, // stgp x0, x1, [x2]
            0xd960_0820,    // stzg x0, [x1]
            0xd9e0_0820,    // stz2g x0, [x1]
            0xd920_0020,    // stzgm x0, [x1]
            0xd50b_7483,    // dc gzva, x3
        ];
        let tags_only = [
            0xd920_0820u32, // stg x0, [x1]
            0xd9a0_0820,    // st2g x0, [x1]
            0xd9a0_0020,    // stgm x0, [x1]
            0xd50b_7463,    // dc gva, x3
        ];
        let x = [0x0300_0000_4000_0000u64; 31];
        for w in writing.iter().chain(&tags_only) {
            let p = Pending::new(
                0,
                1,
                (false, false),
                crate::decode::decode(*w),
                &c,
                &x,
                0,
                blocks,
                |_, _| true,
            );
            t.retire(&p);
        }
        let f = t.finish();
        assert_eq!(f.accesses.wr_k, writing.len() as u64);
        assert_eq!(f.architectural, ByEl::default());
        assert_eq!(f.tag_store_insns, (writing.len() + tags_only.len()) as u64);
    }

    #[test]
    fn entries_are_told_apart_by_vector() {
        let mut e = EntryCounts::default();
        for off in [
            0x400, 0x400, 0x480, 0x200, 0x280, 0x080, 0x000, 0x100, 0x600,
        ] {
            e.note(off);
        }
        assert_eq!(
            (e.sync_el0, e.irq_el0, e.sync_el1, e.irq_el1, e.other),
            (2, 1, 2, 2, 2)
        );
        assert_eq!(e.total(), 9);
    }

    proptest! {
        /// The histogram spreads every access into exactly the views its judgement says,
        /// at the EL that executed it.
        #[test]
        fn tally_spreads_judgements_into_views(
            items in proptest::collection::vec((0u8..2, 0u8..32, 0u8..32, any::<bool>()), 0..50)
        ) {
            let mut t = Tally::default();
            let mut expect = TraceCounts::default();
            for &(el, r, w, unpriv) in &items {
                let unprivileged = unpriv && el == 1;
                // Only judgements the views can produce: checked ones carry ARCH.
                let valid = |j: u8| if j & 2 == 0 { j & 1 } else { j | 1 };
                let (r, w) = (Judged(valid(r) | 1), Judged(valid(w)));
                t.retire(&Pending { pc: 0, effect: Effect::Access, el, read: r, write: w, unprivileged, tagged_impdef: false });
                if el == 0 { expect.instructions_el0 += 1 } else { expect.instructions_el1 += 1 }
                let (vr, vw) = (r.views(), w.views());
                if unprivileged {
                    let u = &mut expect.uaccess;
                    u.rd += r.present() as u64;
                    u.wr += w.present() as u64;
                    u.arch_rd += vr.architectural as u64;
                    u.arch_wr += vw.architectural as u64;
                    u.elided_rd += vr.tcf_elided as u64;
                    u.elided_wr += vw.tcf_elided as u64;
                }
                for (counter, in_r, in_w) in [
                    (&mut expect.accesses, r.present(), w.present()),
                    (&mut expect.architectural, vr.architectural, vw.architectural),
                    (&mut expect.tcf_elided, vr.tcf_elided, vw.tcf_elided),
                    (&mut expect.if_tcma1, vr.if_tcma1, vw.if_tcma1),
                    (&mut expect.if_kernel_tco, vr.if_kernel_tco, vw.if_kernel_tco),
                ] {
                    if el == 0 {
                        counter.rd_u += in_r as u64;
                        counter.wr_u += in_w as u64;
                    } else {
                        counter.rd_k += in_r as u64;
                        counter.wr_k += in_w as u64;
                    }
                }
            }
            prop_assert_eq!(t.finish(), expect);
        }
    }

    /// EL1 with ATA, TCF SYNC and TBI0, every feature.
    fn el1_controls() -> Controls {
        Controls {
            sctlr_el1: 1 << 43 | 1 << 40,
            tcr_el1: 1 << 37,
            hcr_ata: true,
            features: crate::predicate::MteFeatures::ALL,
        }
    }

    /// The counts of `word` executed once at EL1 under `c`, every register a pointer tagged 3
    /// into a Tagged page.
    fn retire_once(c: &Controls, word: u32) -> TraceCounts {
        let x = [0x0300_0000_4100_0000u64; 31];
        let p = Pending::new(
            0,
            1,
            (false, false),
            crate::decode::decode(word),
            c,
            &x,
            0,
            BlockGranules::default(),
            |_, _| true,
        );
        let mut t = Tally::default();
        t.retire(&p);
        t.finish()
    }

    #[test]
    fn stgp_counts_its_data_store_as_an_unchecked_write() {
        let t = retire_once(&el1_controls(), 0x6900_0c41); // stgp x1, x3, [x2]
        assert_eq!((t.accesses.rd_k, t.accesses.wr_k), (0, 1));
        assert_eq!(t.architectural.wr_k, 0);
        assert_eq!((t.tag_store_insns, t.granules_tagged), (1, 1));
    }

    #[test]
    fn an_atomic_counts_one_read_and_one_write() {
        const LDADD: u32 = 0xf821_0043; // ldadd x1, x3, [x2]
        let c = el1_controls();
        let t = retire_once(&c, LDADD);
        assert_eq!((t.architectural.rd_k, t.architectural.wr_k), (1, 1));
        assert_eq!((t.accesses.rd_k, t.accesses.wr_k), (1, 1));
        assert_eq!(t.instructions_el1, 1);
        // Under store-only checking only the write half is checked.
        let so = Controls {
            sctlr_el1: c.sctlr_el1 | 1 << 59,
            ..c
        };
        let t = retire_once(&so, LDADD);
        assert_eq!((t.architectural.rd_k, t.architectural.wr_k), (0, 1));
    }

    /// EL1 with ATA, TCF SYNC, TBI0 and 39-bit VAs (T0SZ 25), the data keys enabled.
    fn addr_controls() -> Controls {
        Controls {
            sctlr_el1: 1 << 43 | 1 << 40 | 1 << 27 | 1 << 13,
            tcr_el1: 1 << 37 | 25,
            hcr_ata: true,
            features: crate::predicate::MteFeatures::ALL,
        }
    }

    /// `insn` judged at EL1 with `x2 = base`; the addresses `page_tagged` was asked about (at
    /// most two), and what one retirement of it counts.
    fn judge_at(
        c: &Controls,
        insn: u32,
        base: u64,
        mut page_tagged: impl FnMut(u64) -> bool,
    ) -> ([Option<u64>; 2], TraceCounts) {
        let mut x = [0u64; 31];
        x[2] = base;
        let mut asked = [None; 2];
        let p = Pending::new(
            0,
            1,
            (false, false),
            crate::decode::decode(insn),
            c,
            &x,
            0,
            BlockGranules::default(),
            |va, _| {
                let free = asked.iter().position(Option::is_none);
                asked[free.expect("asked at most twice")] = Some(va);
                page_tagged(va)
            },
        );
        let mut t = Tally::default();
        t.retire(&p);
        (asked, t.finish())
    }

    /// A Tagged page at 0x4100_0000 and nothing else; a non-canonical address (bits 54:39
    /// not all equal to bit 55) finds no page, as AT would.
    fn one_tagged_page(va: u64) -> bool {
        let canonical = (va >> 39) & 0xffff == 0;
        canonical && va & 0x00ff_ffff_ffff_f000 == 0x4100_0000
    }

    #[test]
    fn ldraa_and_ldrab_are_judged_at_the_authenticated_address() {
        let c = addr_controls();
        // Tag 3, a code in bits 54:39 (any: the predicate does not compute it).
        let signed = 0x0300_0000_4100_0000 | 0x0012_3480_0000_0000;
        for (insn, base) in [
            (0xf820_1441, signed),      // ldraa x1, [x2, #8]
            (0xf8ff_fc41, signed + 16), // ldrab x1, [x2, #-8]!
        ] {
            let (asked, t) = judge_at(&c, insn, base, one_tagged_page);
            assert_eq!(asked, [Some(0x0300_0000_4100_0008), None], "{insn:#x}");
            assert_eq!(t.architectural.rd_k, 1, "{insn:#x}");
        }
        // With EnDA clear, LDRAA authenticates nothing: the signed pointer is the address
        // (no page there; the load would fault).
        let off = Controls {
            sctlr_el1: c.sctlr_el1 & !(1 << 27),
            ..c
        };
        let (asked, t) = judge_at(&off, 0xf820_1441, signed, one_tagged_page);
        assert_eq!(asked, [Some(signed + 8), None]);
        assert_eq!((t.architectural.rd_k, t.accesses.rd_k), (0, 1));
    }

    #[test]
    fn an_access_over_two_pages_is_checked_if_either_page_is_tagged_and_counted_once() {
        let c = addr_controls();
        let end = 0x0300_0000_4100_1000u64; // the Tagged page's first byte
        let tagged = |va: u64| va & 0x00ff_ffff_ffff_f000 == 0x4100_1000;
        // ldr x1, [x2] from 4 bytes before the Tagged page: Untagged, then Tagged.
        let (asked, t) = judge_at(&c, 0xf940_0041, end - 4, tagged);
        assert_eq!(asked, [Some(end - 4), Some(end + 3)]);
        assert_eq!((t.architectural.rd_k, t.accesses.rd_k), (1, 1));
        assert_eq!(t.tcf_elided.rd_k, 1);
        // Tagged, then Untagged.
        let (_, t) = judge_at(&c, 0xf940_0041, end - 4, |va| !tagged(va));
        assert_eq!(t.architectural.rd_k, 1);
        // Neither page Tagged: unchecked; both: checked once.
        let (_, t) = judge_at(&c, 0xf940_0041, end - 4, |_| false);
        assert_eq!((t.architectural.rd_k, t.accesses.rd_k), (0, 1));
        let (_, t) = judge_at(&c, 0xf940_0041, end - 4, |_| true);
        assert_eq!(t.architectural.rd_k, 1);
        // A store and a pair (16 bytes from 8 before the page) likewise.
        let (asked, t) = judge_at(&c, 0xf900_0041, end - 4, tagged); // str x1, [x2]
        assert_eq!((asked[1], t.architectural.wr_k), (Some(end + 3), 1));
        let (asked, t) = judge_at(&c, 0xa940_0c41, end - 8, tagged); // ldp x1, x3, [x2]
        assert_eq!(
            (asked, t.architectural.rd_k),
            ([Some(end - 8), Some(end + 7)], 1)
        );
        // An atomic: one read and one write, each checked once.
        let (_, t) = judge_at(&c, 0xf8e1_0043, end - 4, tagged); // ldaddal x1, x3, [x2]
        assert_eq!((t.architectural.rd_k, t.architectural.wr_k), (1, 1));
        // Ending on the page's last byte is one page: asked once.
        let (asked, t) = judge_at(&c, 0xf940_0041, end - 8, tagged);
        assert_eq!((asked, t.architectural.rd_k), ([Some(end - 8), None], 0));
        // The other terms still apply to both parts: TCO unchecks the whole access.
        let mut x = [0u64; 31];
        x[2] = end - 4;
        let p = Pending::new(
            0,
            1,
            (true, false),
            crate::decode::decode(0xf940_0041),
            &c,
            &x,
            0,
            BlockGranules::default(),
            |va, _| tagged(va),
        );
        assert!(!p.read.views().architectural);
    }
}
