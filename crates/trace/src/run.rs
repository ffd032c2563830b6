//! Runs: instead of single-stepping every instruction, the step engine lets the guest run at
//! full speed through the stretch of code after a stop and stops it with hardware breakpoints
//! at every place the stretch can leave to. A stretch ([`Plan`]) holds only instructions
//! whose effect on the counts is known without the registers:
//! - inert ones (`decode::is_inert`: data processing and direct branches);
//! - *static* ones ([`NodeKind::Static`]): accesses the architecture never Tag Checks
//!   (literal and SP-based forms, prefetches, tag loads and stores), barriers, `MSR TCO,
//!   #imm`, reads of system registers;
//! - as its first instruction only, a *dynamic root*: a checkable data access judged at the
//!   stop with the live registers, exactly as a stepped one is;
//! - *predicted* accesses ([`Plan::predicted`]): later checkable accesses whose address
//!   registers no instruction before them in the run can have written (an over-approximation,
//!   [`written_registers`]), so that the registers at the stop give their address: they are
//!   judged at the stop too, with the PSTATE.TCO the run's `MSR TCO, #imm` give them.
//!
//! Everything else (checkable accesses after the first, exclusives, MSR TCO from a register,
//! system instructions, exception-generating instructions, indirect branches) is a leaf: the
//! run stops before it.
//!
//! One exception makes exclusive sequences countable at all: single-stepping cannot carry an
//! LDXR/STXR pair (every step's exception return clears the exclusive monitor, so the
//! store-exclusive always fails and the loop retries for ever). A plan may start at a
//! load-exclusive ([`is_exclusive_root_of`]): its matching store-exclusive is then part of
//! the run and the instruction after it is always a leaf, so the run stops right after the
//! store with its registers as it used them: there the store is judged (its address
//! register is never written by a store-exclusive) and its status register says whether it
//! wrote ([`Plan::exclusive_store`]). This is how GDB steps over atomic
//! sequences on arm64 (a breakpoint past the store-exclusive and at every branch out),
//! with the count coming from the decoded instructions. The count of instructions run is the depth of the place it stopped
//! at, which is unique: a plan in which any address could be reached two ways is refused, and
//! the engine steps instead; the static instructions executed are the ones on the one path
//! from the root to that place ([`Plan::path`]).
//!
//! A run never executes a store that can reach the code it runs: a plan knows its words
//! from when it was made and checks the path only when the run ends, so code patched and
//! put back inside one run would go unseen. Every instruction in a plan that writes data
//! bytes ([`data_write`]: stores of every form, SP-based and STGP included, atomics,
//! store-exclusives, and the zeroing of DC ZVA/GZVA, STZG/STZ2G and STZGM) is either a leaf
//! or has an address the registers at the start of the run give (no instruction before it
//! in the run can have written its address registers: [`Plan::stores`]). The engine
//! translates each of those addresses when it arms the run and refuses the run (steps
//! instead) if one reaches the physical page the run executes from: physical, so that an
//! alias of the code page is caught as the code page itself. (Write-protecting planned code
//! at stage 2 would catch the same without a translation per store, but would make every
//! guest write to a code page, planned or not, an exit.) Tag-only stores (STG, ST2G, STGM,
//! DC GVA) change no instruction bytes. The one exception is the store-exclusive that closes
//! an exclusive sequence: its address is often computed inside the sequence, but it is the
//! run's last instruction, so nothing it writes is executed later in the run, and code the
//! run had already executed that it rewrote shows when the path is read again at the end.

use crate::counts::BlockGranules;
use crate::decode::{Dir, Insn, MemKind, Offset, decode, is_inert};

/// Most exits a run may have (hardware breakpoints; two more are kept for the EL1 vectors).
pub const MAX_LEAVES: usize = 4;
/// Most instructions a plan looks at.
pub const MAX_VISITED: usize = 48;

/// What an instruction is to a plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeKind {
    /// No effect but one instruction; branches go where `successors` says.
    Inert,
    /// Falls through to the next instruction, with an effect on the counts that does not
    /// depend on the registers (`counts::Pending::new` of it never reads them).
    Static,
    /// The run must stop before it.
    Stop,
}

/// Classifies `word` for planning. One rule with the judge: a static access is one whose
/// form is not checkable (`MemOp::form_checkable`, the same test `Pending::new` uses).
pub fn node_kind(word: u32) -> NodeKind {
    node_kind_of(word, &decode(word))
}

/// [`node_kind`] of `word` already decoded as `insn`.
pub fn node_kind_of(word: u32, insn: &Insn) -> NodeKind {
    if is_inert(word) {
        return NodeKind::Inert;
    }
    match insn {
        // A CAS/CASP is stepped, whatever its form: only the compare register before and
        // right after it tells whether its compare failed (`decode::Compare`).
        Insn::Mem(m) if m.exclusive || m.compare.is_some() || m.form_checkable() => NodeKind::Stop,
        Insn::Mem(_) => NodeKind::Static,
        Insn::MsrTcoImm(_) | Insn::Barrier(_) | Insn::SysRegRead(..) | Insn::MrsTco(_) => {
            NodeKind::Static
        }
        _ => NodeKind::Stop,
    }
}

/// True for an instruction a run may start at with its access judged at the stop: an
/// ordinary checkable data access (not an exclusive, which stepping must watch, nor a
/// CAS/CASP, whose compare register a run would overwrite before the stop).
pub fn is_dynamic_root(word: u32) -> bool {
    is_dynamic_root_of(&decode(word))
}

/// [`is_dynamic_root`] of an instruction already decoded.
pub fn is_dynamic_root_of(insn: &Insn) -> bool {
    matches!(insn, Insn::Mem(m) if !m.exclusive && m.compare.is_none() && m.form_checkable())
}

/// True for a load-exclusive (LDXR, LDAXR, LDXP...): the start of an exclusive sequence,
/// which only a run can carry.
pub fn is_exclusive_root_of(insn: &Insn) -> bool {
    matches!(insn, Insn::Mem(m) if m.exclusive && m.dir == crate::decode::Dir::Read)
}

fn is_exclusive_store(insn: &Insn) -> bool {
    matches!(insn, Insn::Mem(m) if m.exclusive && m.dir == crate::decode::Dir::Write)
}

/// A store-exclusive a run can judge where it stops, right after it: its status register
/// is a real one (Ws = WZR discards the status: whether it wrote could not be known) and
/// not its base register (CONSTRAINED UNPREDICTABLE; the status would overwrite the address
/// the judge reads). Any other is a leaf, and stepped.
fn status_readable_after(word: u32, insn: &Insn) -> bool {
    let ws = ((word >> 16) & 0x1f) as u8;
    matches!(insn, Insn::Mem(m) if is_exclusive_store(insn) && ws != 31 && ws != m.base)
}

/// True if a run may start at `word` (decoded as `insn`).
pub fn may_start_run(word: u32, insn: &Insn) -> bool {
    node_kind_of(word, insn) != NodeKind::Stop
        || is_dynamic_root_of(insn)
        || is_exclusive_root_of(insn)
}

/// Registers an instruction a plan may hold can write: bit n for Xn, bit 31 for SP (or XZR,
/// taken as SP). Over-approximates (a load marks bits 4:0, 14:10 and 20:16 whatever its
/// form): a register wrongly taken as written only makes fewer accesses predictable.
pub fn written_registers(word: u32, insn: &Insn) -> u32 {
    let field = |lo: u32| 1u32 << ((word >> lo) & 0x1f);
    if is_inert(word) {
        return if word & 0x7c00_0000 == 0x1400_0000 {
            // B writes nothing, BL the link register.
            if word >> 31 == 1 { 1 << 30 } else { 0 }
        } else if word & 0x7c00_0000 == 0x3400_0000 || word >> 24 == 0x54 {
            // CBZ/CBNZ/TBZ/TBNZ, B.cond.
            0
        } else {
            // Data processing: Rd.
            field(0)
        };
    }
    match insn {
        Insn::Mem(m) => {
            let wb = if m.writeback { 1 << m.base } else { 0 };
            field(0) | field(10) | field(16) | wb
        }
        Insn::SysRegRead(_, rt) | Insn::MrsTco(rt) => 1 << rt,
        Insn::Barrier(_) | Insn::MsrTcoImm(_) => 0,
        _ => u32::MAX,
    }
}

/// True if `insn` is a checkable access whose address the registers at the start of a run
/// give, when the instructions before it in the run wrote (at most) `written`.
fn predictable(insn: &Insn, written: u32) -> bool {
    let Insn::Mem(m) = insn else {
        return false;
    };
    let untouched = |r: u8| written & (1 << r) == 0;
    let index_untouched = match m.offset {
        crate::decode::Offset::Reg { m: 31, .. } => true,
        crate::decode::Offset::Reg { m: r, .. } => untouched(r),
        _ => true,
    };
    is_dynamic_root_of(insn) && m.base != 31 && untouched(m.base) && index_untouched
}

/// The data bytes an instruction can change, as (address of the first, how many), given the
/// registers it runs with (x0..x30 and its SP); None if it changes none (loads, prefetches,
/// tag-only stores and everything that is not a memory instruction). The block operations
/// change their whole aligned block (DCZID_EL0's for DC ZVA/GZVA, GMID_EL1's for STZGM).
pub fn data_write(
    insn: &Insn,
    x: &[u64; 31],
    sp: u64,
    blocks: BlockGranules,
) -> Option<(u64, u64)> {
    let Insn::Mem(m) = insn else {
        return None;
    };
    // DC's operand register 31 is XZR, not SP.
    let sp = if matches!(m.kind, MemKind::DcZva | MemKind::DcTagBlock { .. }) {
        0
    } else {
        sp
    };
    let va = m.address(x, sp);
    let block = |granules: u64| {
        let len = granules.max(1) * 16;
        Some((va & !(len - 1), len))
    };
    match m.kind {
        MemKind::Data if m.dir != Dir::Read => Some((va, u64::from(m.size.max(1)))),
        MemKind::DcZva | MemKind::DcTagBlock { zero_data: true } => block(blocks.dc),
        MemKind::TagStoreBlock { zero_data: true } => block(blocks.gm),
        MemKind::TagStore {
            granules,
            data: true,
        } => Some((va, 16 * u64::from(granules))),
        _ => None,
    }
}

/// True if `word` ([`data_write`]) can change data bytes.
fn writes_data(insn: &Insn) -> bool {
    data_write(insn, &[0; 31], 0, BlockGranules { dc: 1, gm: 1 }).is_some()
}

/// The registers a memory instruction's address is formed from, as in
/// [`written_registers`] (bit 31: SP).
fn address_registers(insn: &Insn) -> u32 {
    let Insn::Mem(m) = insn else {
        return 0;
    };
    let index = match m.offset {
        Offset::Reg { m: r, .. } if r != 31 => 1 << r,
        _ => 0,
    };
    (1 << m.base) | index
}

/// Most predicted accesses in one plan.
pub const MAX_PREDICTED: usize = 8;

/// Where control can go after an inert instruction at `pc`.
pub fn successors(word: u32, pc: u64) -> [Option<u64>; 2] {
    let next = Some(pc.wrapping_add(4));
    let sext = |v: u32, bits: u32| ((v as i64) << (64 - bits)) >> (64 - bits);
    let rel = |off: i64| Some(pc.wrapping_add((off << 2) as u64));
    if word & 0x7c00_0000 == 0x1400_0000 {
        // B, BL: imm26.
        [rel(sext(word & 0x03ff_ffff, 26)), None]
    } else if word & 0x7e00_0000 == 0x3400_0000 {
        // CBZ, CBNZ: imm19 at 23:5.
        [next, rel(sext((word >> 5) & 0x7ffff, 19))]
    } else if word & 0x7e00_0000 == 0x3600_0000 {
        // TBZ, TBNZ: imm14 at 18:5.
        [next, rel(sext((word >> 5) & 0x3fff, 14))]
    } else if word >> 24 == 0x54 {
        // B.cond: imm19 at 23:5.
        [next, rel(sext((word >> 5) & 0x7ffff, 19))]
    } else {
        [next, None]
    }
}

/// Where a direct branch at `pc` goes when it executes, given the condition flags (NZCV as
/// in SPSR bits 31:28) and the registers (x0..x30): the target and whether it links (BL
/// writes `pc + 4` to x30). None for any other instruction. The step engine executes a
/// branch that ends a run itself (`Plan` makes a branch back into the run a leaf), so that
/// a loop costs one exit per iteration.
pub fn branch_outcome(word: u32, pc: u64, nzcv: u64, x: &[u64; 31]) -> Option<(u64, bool)> {
    let [next, target] = successors(word, pc);
    let reg = |n: u32| x.get(n as usize).copied().unwrap_or(0);
    let rt = word & 0x1f;
    if word & 0x7c00_0000 == 0x1400_0000 {
        // B, BL (bit 31).
        return Some((target_of_b(word, pc), word >> 31 == 1));
    }
    let taken = if word & 0x7e00_0000 == 0x3400_0000 {
        // CBZ/CBNZ (bit 24), 32-bit unless bit 31.
        let v = if word >> 31 == 1 {
            reg(rt)
        } else {
            reg(rt) as u32 as u64
        };
        (v == 0) != ((word >> 24) & 1 == 1)
    } else if word & 0x7e00_0000 == 0x3600_0000 {
        // TBZ/TBNZ (bit 24): bit b5:b40.
        let bit = ((word >> 31) << 5) | ((word >> 19) & 0x1f);
        ((reg(rt) >> bit) & 1 == 0) != ((word >> 24) & 1 == 1)
    } else if word >> 24 == 0x54 && word & 0x10 == 0 {
        condition_holds(word & 0xf, nzcv)
    } else {
        return None;
    };
    Some((if taken { target? } else { next? }, false))
}

fn target_of_b(word: u32, pc: u64) -> u64 {
    let off = (((word & 0x03ff_ffff) as i64) << 38) >> 36;
    pc.wrapping_add(off as u64)
}

/// `ConditionHolds` (Arm ARM J1) for a B.cond condition and NZCV in bits 31:28.
pub fn condition_holds(cond: u32, nzcv: u64) -> bool {
    let (n, z, c, v) = (
        nzcv >> 31 & 1 == 1,
        nzcv >> 30 & 1 == 1,
        nzcv >> 29 & 1 == 1,
        nzcv >> 28 & 1 == 1,
    );
    let base = match cond >> 1 {
        0 => z,
        1 => c,
        2 => n,
        3 => v,
        4 => c && !z,
        5 => n == v,
        6 => n == v && !z,
        _ => true,
    };
    // Odd conditions negate, except 0b1111 (always, like 0b1110).
    if cond & 1 == 1 && cond != 0xf {
        !base
    } else {
        base
    }
}

/// A planned run: the addresses it can stop at, with how many instructions it has executed
/// when it gets there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    /// (address, instructions executed on arrival) of every exit.
    pub leaves: [(u64, u32); MAX_LEAVES],
    pub n_leaves: usize,
    /// The first instruction is a checkable access judged at the stop ([`is_dynamic_root`]),
    /// or a load-exclusive ([`is_exclusive_root_of`]), also judged at the stop.
    pub dynamic_root: bool,
    /// A plan rooted at a load-exclusive: the store-exclusive that closes the sequence, as
    /// (address, status register Ws), when the plan reaches it. The run stops right after
    /// it, where the engine judges it with the registers it used; a non-zero status there
    /// means it failed and wrote nothing. It is counted among the statics on a path (to be
    /// found there), but is not one.
    pub exclusive_store: Option<(u64, u8)>,
    /// Every address in the run, leaves included, with its depth.
    visited: [(u64, u32); MAX_VISITED],
    n_visited: usize,
    /// The instruction word at each visited address when the plan was made (`NO_WORD` where
    /// it could not be read), so a reused plan can be checked against the code as it is now.
    words: [u64; MAX_VISITED],
    /// Index of each node's predecessor (the root's is itself).
    parent: [u8; MAX_VISITED],
    /// Static instructions on the path from the root to each node, the node excluded (the
    /// root counted only when it is static, never when it is dynamic).
    statics_before: [u8; MAX_VISITED],
    /// Bit i: node i is static.
    statics: u64,
    /// Bit i: node i is a predicted access.
    predicted: u64,
    /// Bit i: node i writes data bytes and the run executes it; its address registers hold
    /// at the start of the run what they will when it runs ([`Plan::stores`]).
    stores: u64,
    /// The predicted accesses' node indices, in the order they were planned.
    predicted_nodes: [u8; MAX_PREDICTED],
    pub n_predicted: usize,
    /// Registers the path to each node may have written before it ([`written_registers`]).
    written: [u32; MAX_VISITED],
    /// PSTATE.TCO after each node, as the run's `MSR TCO, #imm` set it: 0 as at the start,
    /// 1 clear, 2 set.
    tco_after: [u8; MAX_VISITED],
}

/// A visited address whose word the plan could not read.
const NO_WORD: u64 = u64::MAX;

/// The instructions a run executed before it stopped at a node: how many, and how many of
/// them are static ([`Plan::statics_on_path`] lists those).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Path {
    /// The node stopped at.
    pub stop: usize,
    pub depth: u32,
    pub n_statics: usize,
}

impl Plan {
    /// Instructions executed when the guest is at `pc` (a leaf, or an instruction inside the
    /// run where an interrupt stopped it); None if `pc` is not in the run.
    pub fn depth_of(&self, pc: u64) -> Option<u32> {
        self.index_of(pc).map(|i| self.visited[i].1)
    }

    fn index_of(&self, pc: u64) -> Option<usize> {
        self.visited[..self.n_visited]
            .iter()
            .position(|(a, _)| *a == pc)
    }

    /// The word planned at `pc`, if it is in the plan.
    pub fn word_at(&self, pc: u64) -> Option<u32> {
        let i = self.index_of(pc)?;
        (self.words[i] != NO_WORD).then_some(self.words[i] as u32)
    }

    /// The root's word as planned.
    /// True when an instruction the plan looked at (leaves included) is a call, a return or
    /// an exception return: a run must not execute what moves the call stack unseen. (An
    /// indirect branch, which may move it too, is always a leaf: stepped, never run.)
    pub fn calls_or_returns(&self) -> bool {
        use crate::decode::Flow;
        self.words[..self.n_visited].iter().any(|&w| {
            w != NO_WORD
                && matches!(
                    crate::decode::flow(w as u32),
                    Flow::Call | Flow::Return | Flow::ExceptionReturn
                )
        })
    }

    pub fn root_word(&self) -> Option<u32> {
        (self.n_visited > 0 && self.words[0] != NO_WORD).then(|| self.words[0] as u32)
    }

    /// True when every instruction the plan looked at still reads the same: code rewritten in
    /// place since (with or without an IC invalidation the engine saw) makes the plan stale.
    pub fn still_matches(&self, mut fetch: impl FnMut(u64) -> Option<u32>) -> bool {
        self.visited[..self.n_visited]
            .iter()
            .zip(&self.words)
            .all(|((pc, _), w)| fetch(*pc).map_or(NO_WORD, u64::from) == *w)
    }

    /// What the run executed if it stopped at `pc`: None if `pc` is not in the plan, or if
    /// an instruction on the path to it no longer reads as planned (code rewritten under the
    /// run: its count cannot be known, and is reported, never guessed). Reads only the
    /// path's words, so that checking costs what the run executed, not what it might have.
    pub fn path(&self, pc: u64, mut fetch: impl FnMut(u64) -> Option<u32>) -> Option<Path> {
        let stop = self.index_of(pc)?;
        let mut i = stop;
        while i != 0 {
            i = self.parent[i] as usize;
            if fetch(self.visited[i].0).map_or(NO_WORD, u64::from) != self.words[i] {
                return None;
            }
        }
        Some(Path {
            stop,
            depth: self.visited[stop].1,
            n_statics: self.statics_before[stop] as usize,
        })
    }

    /// Calls `f(address, word, predicted)` for each static instruction and predicted access
    /// the run executed on `path`, from the last to the first; `predicted` is the index of a
    /// predicted access among them ([`Plan::predicted`]).
    pub fn statics_on_path(&self, path: &Path, mut f: impl FnMut(u64, u32, Option<usize>)) {
        let mut left = path.n_statics;
        let mut i = path.stop;
        while left > 0 && i != 0 {
            i = self.parent[i] as usize;
            if (self.statics | self.predicted) & (1 << i) != 0 {
                let k = (self.predicted & (1 << i) != 0).then(|| self.slot_of(i));
                f(self.visited[i].0, self.words[i] as u32, k);
                left -= 1;
            }
        }
    }

    /// Calls `f(address)` for each inert instruction the run executed on `path` (those the
    /// tally counts by number: neither static, nor predicted, nor a dynamic root), from the
    /// last to the first.
    pub fn inert_on_path(&self, path: &Path, mut f: impl FnMut(u64)) {
        let mut i = path.stop;
        while i != 0 {
            i = self.parent[i] as usize;
            let counted_apart =
                (self.statics | self.predicted) & (1 << i) != 0 || (i == 0 && self.dynamic_root);
            if !counted_apart {
                f(self.visited[i].0);
            }
        }
    }

    /// True if `pc` is one of the plan's exits.
    pub fn is_leaf(&self, pc: u64) -> bool {
        self.leaves[..self.n_leaves].iter().any(|(a, _)| *a == pc)
    }

    /// The shortest way out.
    pub fn min_leaf_depth(&self) -> u32 {
        self.leaves[..self.n_leaves]
            .iter()
            .map(|(_, d)| *d)
            .min()
            .unwrap_or(0)
    }
}

impl Default for Plan {
    fn default() -> Self {
        Self {
            leaves: [(0, 0); MAX_LEAVES],
            n_leaves: 0,
            dynamic_root: false,
            exclusive_store: None,
            visited: [(0, 0); MAX_VISITED],
            n_visited: 0,
            words: [NO_WORD; MAX_VISITED],
            parent: [0; MAX_VISITED],
            statics_before: [0; MAX_VISITED],
            statics: 0,
            predicted: 0,
            stores: 0,
            predicted_nodes: [0; MAX_PREDICTED],
            n_predicted: 0,
            written: [0; MAX_VISITED],
            tco_after: [0; MAX_VISITED],
        }
    }
}

/// Plans a run from `start` (which must be inert or static, or a dynamic root). `fetch` reads
/// an instruction word, or None where the plan may not look (another page, not guest RAM):
/// such an address is a leaf. Returns None when there is no run to make: the start must stop,
/// an address is reached twice (a loop, or two paths joining), or there are too many exits.
pub fn plan(start: u64, fetch: impl FnMut(u64) -> Option<u32>) -> Option<Plan> {
    let mut p = Plan::default();
    p.build(start, fetch).then_some(p)
}

impl Plan {
    /// [`plan`], written in place (the step path keeps its plans and does not move them).
    pub fn build(&mut self, start: u64, mut fetch: impl FnMut(u64) -> Option<u32>) -> bool {
        self.n_leaves = 0;
        self.n_visited = 0;
        self.statics = 0;
        self.predicted = 0;
        self.stores = 0;
        self.n_predicted = 0;
        self.dynamic_root = false;
        self.exclusive_store = None;
        self.fill(start, &mut fetch).is_some()
    }

    fn fill(&mut self, start: u64, fetch: &mut impl FnMut(u64) -> Option<u32>) -> Option<()> {
        let p = self;
        // (address, depth, parent index)
        let mut work: [(u64, u32, u8); MAX_VISITED] = [(0, 0, 0); MAX_VISITED];
        let mut n_work = 1;
        work[0] = (start, 0, 0);
        while n_work > 0 {
            n_work -= 1;
            let (pc, depth, parent) = work[n_work];
            if p.depth_of(pc).is_some() || p.n_visited == MAX_VISITED {
                return None;
            }
            let i = p.n_visited;
            p.visited[i] = (pc, depth);
            p.parent[i] = parent;
            let q = parent as usize;
            (p.statics_before[i], p.written[i], p.tco_after[i]) = if i == 0 {
                (0, 0, 0)
            } else {
                let counted = ((p.statics | p.predicted) >> q) & 1;
                let w = p.words[q] as u32;
                (
                    p.statics_before[q] + counted as u8,
                    p.written[q] | written_registers(w, &decode(w)),
                    p.tco_after[q],
                )
            };
            let fetched = fetch(pc);
            p.words[i] = fetched.map_or(NO_WORD, u64::from);
            p.n_visited += 1;
            let insn = fetched.map(decode);
            // In an exclusive sequence the node after the store-exclusive is always an exit:
            // the store's status is read there.
            let after_store = p
                .exclusive_store
                .is_some_and(|(a, _)| i > 0 && p.visited[q].0 == a);
            let exclusive = i > 0 && p.exclusive_root();
            let kind = match (fetched, &insn) {
                _ if after_store => NodeKind::Stop,
                (Some(_), Some(d))
                    if i == 0 && (is_dynamic_root_of(d) || is_exclusive_root_of(d)) =>
                {
                    p.dynamic_root = true;
                    NodeKind::Static
                }
                (Some(w), Some(d))
                    if exclusive && p.exclusive_store.is_none() && status_readable_after(w, d) =>
                {
                    p.exclusive_store = Some((pc, ((w >> 16) & 0x1f) as u8));
                    NodeKind::Static
                }
                (Some(_), Some(d))
                    if i > 0 && p.n_predicted < MAX_PREDICTED && predictable(d, p.written[i]) =>
                {
                    p.predicted |= 1 << i;
                    p.predicted_nodes[p.n_predicted] = i as u8;
                    p.n_predicted += 1;
                    NodeKind::Static
                }
                (Some(w), Some(d)) => node_kind_of(w, d),
                _ => NodeKind::Stop,
            };
            // A store the run would execute must have an address known when the run is armed
            // (module doc): one whose address registers an instruction before it may have
            // written is a leaf. But for an exclusive sequence's store-exclusive, whose
            // address is often computed inside the sequence (musl's `__vm_lock`): it is the
            // run's last instruction, so what it writes is never executed later in the run;
            // code it rewrote that the run had already executed is caught where the run ends
            // (`Plan::path` reads the path again), and the engine notes the page it wrote
            // when it judges it there.
            let closes_sequence = p.exclusive_store.is_some_and(|(a, _)| a == pc);
            let kind = match (fetched, &insn) {
                (Some(_), Some(d))
                    if kind == NodeKind::Static
                        && !closes_sequence
                        && p.written[i] & address_registers(d) != 0
                        && writes_data(d) =>
                {
                    NodeKind::Stop
                }
                _ => kind,
            };
            if let Some(Insn::MsrTcoImm(v)) = insn {
                p.tco_after[i] = 1 + v as u8;
            }
            let room = p.n_visited < MAX_VISITED - 2;
            let successors = match (kind, fetched) {
                (NodeKind::Inert, Some(w)) if room => successors(w, pc),
                (NodeKind::Static, Some(_)) if room => {
                    if !(i == 0 && p.dynamic_root) && p.predicted & (1 << i) == 0 {
                        p.statics |= 1 << i;
                    }
                    if !closes_sequence && insn.is_some_and(|d| writes_data(&d)) {
                        p.stores |= 1 << i;
                    }
                    [Some(pc.wrapping_add(4)), None]
                }
                _ => {
                    p.unpredict(i);
                    if depth == 0 || p.n_leaves == MAX_LEAVES {
                        return None;
                    }
                    p.leaves[p.n_leaves] = (pc, depth);
                    p.n_leaves += 1;
                    continue;
                }
            };
            // A way back into the run (a loop's back edge, or two paths joining) would make
            // an address reachable at two depths: the instruction that leads there is a leaf
            // instead (the engine executes a branch leaf itself, `branch_outcome`).
            let seen =
                |a: u64| p.depth_of(a).is_some() || work[..n_work].iter().any(|(w, _, _)| *w == a);
            // Every path still to explore ends at one exit at least: a branch that would make
            // more than the breakpoints can hold is an exit itself.
            let ways = successors.into_iter().flatten().count();
            if successors.into_iter().flatten().any(seen) || p.n_leaves + n_work + ways > MAX_LEAVES
            {
                if i == 0 || p.n_leaves == MAX_LEAVES {
                    return None;
                }
                p.statics &= !(1 << i);
                p.unpredict(i);
                p.leaves[p.n_leaves] = (pc, depth);
                p.n_leaves += 1;
                continue;
            }
            for s in successors.into_iter().flatten() {
                if n_work == MAX_VISITED {
                    return None;
                }
                work[n_work] = (s, depth + 1, i as u8);
                n_work += 1;
            }
        }
        Some(())
    }

    /// Node `i` turned out to be a leaf: it is not executed by the run, so not predicted.
    fn unpredict(&mut self, i: usize) {
        self.stores &= !(1 << i);
        if self.predicted & (1 << i) != 0 {
            self.predicted &= !(1 << i);
            self.n_predicted -= 1;
        }
        if self
            .exclusive_store
            .is_some_and(|(a, _)| a == self.visited[i].0)
        {
            self.exclusive_store = None;
        }
    }

    /// The plan starts at a load-exclusive.
    pub fn exclusive_root(&self) -> bool {
        self.dynamic_root && self.words[0] != NO_WORD && {
            is_exclusive_root_of(&decode(self.words[0] as u32))
        }
    }

    /// The predicted accesses: (index among them, node address, word, PSTATE.TCO before it:
    /// None as at the start of the run, else the value an `MSR TCO, #imm` before it set).
    pub fn predicted(&self) -> impl Iterator<Item = (usize, u64, u32, Option<bool>)> + '_ {
        self.predicted_nodes[..self.n_predicted]
            .iter()
            .enumerate()
            .map(|(k, &i)| {
                let i = i as usize;
                let tco = match self.tco_after[self.parent[i] as usize] {
                    0 => None,
                    t => Some(t == 2),
                };
                (k, self.visited[i].0, self.words[i] as u32, tco)
            })
    }

    /// The instructions the run may execute that write data bytes ([`data_write`]), as
    /// (address, word): the registers at the start of the run give each one's address.
    pub fn stores(&self) -> impl Iterator<Item = (u64, u32)> + '_ {
        let mut left = self.stores;
        core::iter::from_fn(move || {
            let i = left.trailing_zeros() as usize;
            (left != 0).then(|| {
                left &= left - 1;
                self.store_node(i)
            })
        })
    }

    /// Bit i: node i is one of [`Plan::stores`]; none, for most plans.
    pub fn store_nodes(&self) -> u64 {
        self.stores
    }

    /// (address, word) of node `i`.
    pub fn store_node(&self, i: usize) -> (u64, u32) {
        (self.visited[i].0, self.words[i] as u32)
    }

    /// Index among the predicted accesses of the one at `pc`, if it is one.
    pub fn predicted_at(&self, pc: u64) -> Option<usize> {
        let i = self.index_of(pc)?;
        (self.predicted & (1 << i) != 0).then(|| self.slot_of(i))
    }

    fn slot_of(&self, i: usize) -> usize {
        self.predicted_nodes[..self.n_predicted]
            .iter()
            .position(|&n| n as usize == i)
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ADD: u32 = 0x9100_0421; // add x1, x1, #1
    const LDR: u32 = 0xf940_0021; // ldr x1, [x1]: its base is what ADD and LDR write
    const LDR_X3: u32 = 0xf940_0064; // ldr x4, [x3]: x3 untouched by ADD/LDR above
    const HVC: u32 = 0xd400_0002;

    fn code(words: &[u32]) -> impl FnMut(u64) -> Option<u32> + '_ {
        move |pc| words.get((pc / 4) as usize).copied()
    }

    /// b.ne with a word offset (imm19).
    fn b_ne(words: i32) -> u32 {
        0x5400_0001 | (((words as u32) & 0x7ffff) << 5)
    }

    #[test]
    fn a_cas_is_stepped_in_every_form_so_its_compare_can_be_read() {
        // cas x1, x2, [x3]; cas x1, x2, [sp] (Unchecked, but its compare still matters);
        // casp x4, x5, x6, x7, [x8]
        for w in [0xc8a1_7c62u32, 0xc8a1_7fe2, 0x4824_7d06] {
            let insn = decode(w);
            assert_eq!(node_kind_of(w, &insn), NodeKind::Stop, "{w:#x}");
            assert!(!is_dynamic_root_of(&insn), "{w:#x}");
            assert!(!may_start_run(w, &insn), "{w:#x}");
        }
        // Nor is one predicted later in a run: the plan stops before it.
        let p = plan(0, code(&[LDR_X3, ADD, 0xc8a1_7c62, HVC])).unwrap();
        assert_eq!(p.n_predicted, 0);
        assert_eq!(&p.leaves[..p.n_leaves], &[(8, 2)]);
    }

    #[test]
    fn straight_line_to_a_memory_access() {
        let p = plan(0, code(&[ADD, ADD, ADD, LDR])).unwrap();
        assert_eq!(&p.leaves[..p.n_leaves], &[(12, 3)]);
        assert_eq!(p.depth_of(4), Some(1));
        assert_eq!(p.min_leaf_depth(), 3);
    }

    #[test]
    fn a_loop_back_edge_leaves_at_the_loop_head() {
        // 0: ldr; 4: add; 8: add; 12: b.ne 0; 16: hvc
        let words = [LDR, ADD, ADD, b_ne(-3), HVC];
        let p = plan(4, code(&words)).unwrap();
        let mut leaves = p.leaves[..p.n_leaves].to_vec();
        leaves.sort();
        assert_eq!(leaves, [(0, 3), (16, 3)]);
    }

    #[test]
    fn back_edges_and_joins_end_at_the_instruction_leading_there() {
        let leaves = |p: Plan| {
            let mut l = p.leaves[..p.n_leaves].to_vec();
            l.sort();
            l
        };
        // 0: add; 4: b.ne 0 — the back edge is a leaf (the engine executes that branch).
        assert_eq!(
            leaves(plan(0, code(&[ADD, b_ne(-1), LDR])).unwrap()),
            [(4, 1)]
        );
        // The same with a dynamic root: 0: ldr; 4: add; 8: b.ne 0 (never a leaf at the root,
        // whose breakpoint would fire before it ran).
        let p = plan(0, code(&[LDR, ADD, b_ne(-2), HVC])).unwrap();
        assert!(p.dynamic_root);
        assert_eq!(leaves(p), [(8, 2)]);
        // 0: b.ne 8; 4: add; 8: hvc — two paths join at 8: the add before it is a leaf.
        assert_eq!(
            leaves(plan(0, code(&[b_ne(2), ADD, HVC])).unwrap()),
            [(4, 1), (8, 1)]
        );
        // A start that must stop is no run; nor is a branch to itself.
        assert_eq!(plan(0, code(&[HVC])), None);
        assert_eq!(plan(0, code(&[b_ne(0), LDR])), None);
    }

    #[test]
    fn every_store_a_run_executes_has_its_address_at_the_start() {
        const MOV_SP_X5: u32 = 0x9100_00bf; // mov sp, x5
        const STR_SP: u32 = 0xb900_03e7; // str w7, [sp]: SP-based, never checked
        const STGP: u32 = 0x6900_20a7; // stgp x7, x8, [x5]
        const MOV_X5: u32 = 0xaa01_03e5; // mov x5, x1
        // SP as the start left it: the store is in the run, listed with its address.
        let p = plan(0, code(&[STR_SP, ADD, ADD, HVC])).unwrap();
        assert!(p.stores().eq([(0, STR_SP)]));
        let p = plan(0, code(&[ADD, STGP, ADD, HVC])).unwrap();
        assert!(p.stores().eq([(4, STGP)]));
        // SP or x5 written before it in the run: the store is a leaf, never executed in it.
        let p = plan(0, code(&[MOV_SP_X5, ADD, STR_SP, ADD, HVC])).unwrap();
        assert_eq!(&p.leaves[..p.n_leaves], &[(8, 2)]);
        assert_eq!(p.stores().count(), 0);
        let p = plan(0, code(&[MOV_X5, ADD, STGP, ADD, HVC])).unwrap();
        assert_eq!(&p.leaves[..p.n_leaves], &[(8, 2)]);
        assert_eq!(p.stores().count(), 0);
    }

    #[test]
    fn data_writes_cover_every_form_that_changes_bytes() {
        let mut x = [0u64; 31];
        x[5] = 0x1234_5678;
        let blocks = BlockGranules { dc: 4, gm: 16 };
        let w = |word: u32| data_write(&decode(word), &x, 0x8000, blocks);
        assert_eq!(w(0xb900_03e7), Some((0x8000, 4))); // str w7, [sp]
        assert_eq!(w(0xb900_00a7), Some((0x1234_5678, 4))); // str w7, [x5]
        assert_eq!(w(0xa9bf_7bfd), Some((0x8000 - 16, 16))); // stp x29, x30, [sp, #-16]!
        assert_eq!(w(0x6900_20a7), Some((0x1234_5678, 16))); // stgp x7, x8, [x5]
        assert_eq!(w(0xd960_08a5), Some((0x1234_5678, 16))); // stzg x5, [x5]
        assert_eq!(w(0xd9e0_08a5), Some((0x1234_5678, 32))); // stz2g x5, [x5]
        assert_eq!(w(0xd920_00a1), Some((0x1234_5600, 256))); // stzgm x1, [x5]
        assert_eq!(w(0xd50b_7485), Some((0x1234_5640, 64))); // dc gzva, x5
        assert_eq!(w(0xd50b_7425), Some((0x1234_5640, 64))); // dc zva, x5
        assert_eq!(w(0xd50b_743f), Some((0, 64))); // dc zva, xzr: not SP
        // Tags only, or no write at all.
        for word in [0xd920_08a5, 0xd9a0_00a1, 0xd50b_7465, LDR, ADD, HVC] {
            assert_eq!(w(word), None, "{word:#x}");
        }
    }

    #[test]
    fn branches_go_where_the_flags_and_registers_say() {
        let mut x = [0u64; 31];
        x[1] = 0x1_0000_0000; // zero as a W register, not as an X register
        x[2] = 1 << 35;
        let z = 1 << 30;
        // b.ne .+12 at 100: not taken with Z, taken without.
        let bne = b_ne(3);
        assert_eq!(branch_outcome(bne, 100, z, &x), Some((104, false)));
        assert_eq!(branch_outcome(bne, 100, 0, &x), Some((112, false)));
        // cbz w1, .+12 (taken: w1 = 0) and cbz x1, .+12 (not taken).
        assert_eq!(branch_outcome(0x3400_0061, 100, 0, &x), Some((112, false)));
        assert_eq!(branch_outcome(0xb400_0061, 100, 0, &x), Some((104, false)));
        // tbnz x2, #35, .+8: taken.
        let tbnz = 0x3600_0000 | (1 << 31) | (1 << 24) | (3 << 19) | (2 << 5) | 2;
        assert_eq!(branch_outcome(tbnz, 100, 0, &x), Some((108, false)));
        // bl .-4 links; b .+8 does not.
        assert_eq!(branch_outcome(0x97ff_ffff, 100, 0, &x), Some((96, true)));
        assert_eq!(branch_outcome(0x1400_0002, 100, 0, &x), Some((108, false)));
        assert_eq!(branch_outcome(ADD, 100, 0, &x), None);
        assert_eq!(branch_outcome(RET, 100, 0, &x), None);
    }

    #[test]
    fn conditions_follow_the_pseudocode() {
        // (cond, N Z C V) -> holds
        let n = |f: u64| f << 28;
        for (cond, flags, want) in [
            (0x0, n(0b0100), true),  // EQ
            (0x1, n(0b0100), false), // NE
            (0x2, n(0b0010), true),  // CS
            (0x8, n(0b0010), true),  // HI: C && !Z
            (0x8, n(0b0110), false),
            (0xa, n(0b1001), true), // GE: N == V
            (0xb, n(0b1000), true), // LT
            (0xc, n(0b0000), true), // GT
            (0xc, n(0b0100), false),
            (0xd, n(0b0100), true), // LE
            (0xe, 0, true),         // AL
            (0xf, 0, true),         // NV behaves as AL
        ] {
            assert_eq!(condition_holds(cond, flags), want, "cond {cond:#x}");
        }
    }

    #[test]
    fn a_plan_of_rewritten_code_no_longer_matches() {
        let mut words = [ADD, ADD, ADD, LDR];
        let p = plan(0, code(&words)).unwrap();
        assert!(p.still_matches(code(&words)));
        // The second add becomes a branch over the third: the plan's depths are wrong now.
        words[1] = 0x1400_0002; // b .+8
        assert!(!p.still_matches(code(&words)));
        // The leaf's word counts too (it decides where the run stops).
        let mut words = [ADD, ADD, ADD, LDR];
        let p = plan(0, code(&words)).unwrap();
        words[3] = ADD;
        assert!(!p.still_matches(code(&words)));
    }

    const LDR_SP: u32 = 0xf940_07e0; // ldr x0, [sp, #8]: Unchecked
    const STR_SP_PRE: u32 = 0xf81f_0fe0; // str x0, [sp, #-16]!: writeback, checkable
    const LDR_LIT: u32 = 0x5800_0040; // ldr x0, .+8
    const TCO_SET: u32 = 0xd503_419f; // msr tco, #1
    const TCO_REG: u32 = 0xd51b_42e0; // msr tco, x0
    const DSB: u32 = 0xd503_3b9f; // dsb ish
    const LDXR: u32 = 0xc85f_7c20; // ldxr x0, [x1]
    const RET: u32 = 0xd65f_03c0;

    /// The statics on `path`, last first, padded with zeros to 2.
    fn statics(p: &Plan, path: &Path) -> [(u64, u32); 2] {
        let mut v = [(0, 0); 2];
        let mut n = 0;
        p.statics_on_path(path, |a, w, _| {
            v[n] = (a, w);
            n += 1;
        });
        v
    }

    #[test]
    fn what_a_plan_may_hold() {
        for w in [ADD, b_ne(3)] {
            assert_eq!(node_kind(w), NodeKind::Inert, "{w:#x}");
        }
        for w in [LDR_SP, LDR_LIT, TCO_SET, DSB] {
            assert_eq!(node_kind(w), NodeKind::Static, "{w:#x}");
        }
        for w in [LDR, STR_SP_PRE, TCO_REG, LDXR, RET, HVC] {
            assert_eq!(node_kind(w), NodeKind::Stop, "{w:#x}");
        }
        assert!(is_dynamic_root(LDR) && is_dynamic_root(STR_SP_PRE));
        assert!(!is_dynamic_root(LDXR) && !is_dynamic_root(LDR_SP) && !is_dynamic_root(ADD));
    }

    #[test]
    fn a_dynamic_root_runs_to_the_next_checkable_access() {
        // 0: ldr (root); 4: add; 8: ldr [sp]; 12: msr tco, #1; 16: add; 20: ldr x1, [x2]
        let words = [LDR, ADD, LDR_SP, TCO_SET, ADD, LDR];
        let p = plan(0, code(&words)).unwrap();
        assert!(p.dynamic_root);
        assert_eq!(&p.leaves[..p.n_leaves], &[(20, 5)]);
        let path = p.path(20, code(&words)).unwrap();
        assert_eq!(path.depth, 5);
        // The root is judged at the stop, not a static; the two statics, last first.
        assert_eq!(statics(&p, &path), [(12, TCO_SET), (8, LDR_SP)]);
        // Stopped inside (an interrupt at EL2 before the add at 16).
        let path = p.path(16, code(&words)).unwrap();
        assert_eq!((path.depth, path.n_statics), (4, 2));
        let path = p.path(8, code(&words)).unwrap();
        assert_eq!((path.depth, path.n_statics), (2, 0));
        assert_eq!(p.path(24, code(&words)), None);
    }

    #[test]
    fn statics_are_counted_on_the_branch_taken_only() {
        // 0: add; 4: b.ne 16; 8: dsb; 12: ldr (leaf); 16: ldr [sp]; 20: ldr (leaf)
        let words = [ADD, b_ne(3), DSB, LDR, LDR_SP, LDR];
        let p = plan(0, code(&words)).unwrap();
        assert!(!p.dynamic_root);
        let fall = p.path(12, code(&words)).unwrap();
        assert_eq!((fall.depth, statics(&p, &fall)), (3, [(8, DSB), (0, 0)]));
        let taken = p.path(20, code(&words)).unwrap();
        assert_eq!(
            (taken.depth, statics(&p, &taken)),
            (3, [(16, LDR_SP), (0, 0)])
        );
    }

    #[test]
    fn a_path_through_rewritten_code_has_no_count() {
        let mut words = [ADD, b_ne(3), DSB, LDR, LDR_SP, LDR];
        let p = plan(0, code(&words)).unwrap();
        // Off the path taken: still countable.
        words[2] = ADD;
        assert!(p.path(20, code(&words)).is_some());
        // On it: not.
        assert_eq!(p.path(12, code(&words)), None);
    }

    #[test]
    fn accesses_whose_base_the_run_cannot_have_written_are_predicted() {
        // 0: ldr x1,[x1] (root); 4: msr tco,#1; 8: ldr x4,[x3] (predicted); 12: add x1;
        // 16: ldr x1,[x1] (x1 written: a leaf)
        let words = [LDR, TCO_SET, LDR_X3, ADD, LDR];
        let p = plan(0, code(&words)).unwrap();
        assert_eq!(&p.leaves[..p.n_leaves], &[(16, 4)]);
        let predicted: [_; 1] = core::array::from_fn(|_| p.predicted().next().unwrap());
        assert_eq!(predicted, [(0, 8, LDR_X3, Some(true))]);
        assert_eq!(p.predicted_at(8), Some(0));
        assert_eq!(p.predicted_at(4), None);
        let path = p.path(16, code(&words)).unwrap();
        assert_eq!((path.depth, path.n_statics), (4, 2));
        let mut seen = [(0, 0, None); 2];
        let mut n = 0;
        p.statics_on_path(&path, |a, w, k| {
            seen[n] = (a, w, k);
            n += 1;
        });
        assert_eq!(seen, [(8, LDR_X3, Some(0)), (4, TCO_SET, None)]);
        // Written on the way: x3 by an add, or by the root's writeback, is not predicted.
        let add_x3 = 0x9100_0463; // add x3, x3, #1
        let p = plan(0, code(&[LDR, add_x3, LDR_X3, HVC])).unwrap();
        assert_eq!((p.n_predicted, &p.leaves[..p.n_leaves]), (0, &[(8, 2)][..]));
    }

    #[test]
    fn what_each_instruction_may_write() {
        let w = |word: u32| written_registers(word, &decode(word));
        assert_eq!(w(ADD), 1 << 1);
        assert_eq!(w(b_ne(3)), 0);
        assert_eq!(w(0x97ff_ffff), 1 << 30); // bl
        assert_eq!(w(0x1400_0002), 0); // b
        assert_eq!(w(DSB), 0);
        assert_eq!(w(TCO_SET), 0);
        assert_ne!(w(LDR_X3) & (1 << 4), 0);
        assert_ne!(w(STR_SP_PRE) & (1 << 31), 0, "writeback of SP");
        assert_eq!(w(HVC), u32::MAX);
    }

    proptest::proptest! {
        /// Any program, any start, any branch directions: a run that executes until it meets
        /// a leaf has executed exactly `depth` instructions, never one that must stop (but
        /// the root), never the same address twice, and the statics and predicted accesses
        /// `statics_on_path` lists are exactly those it executed after the root.
        #[test]
        fn a_plan_counts_what_any_execution_of_it_runs(
            program in proptest::collection::vec(0usize..12, 4..40),
            start in 0usize..40,
            directions: u64,
        ) {
            let palette = |i: usize, at: usize| -> u32 {
                match i {
                    0 => ADD,
                    1 => b_ne(((at as i32 * 7) % 9) - 4),
                    2 => 0xb400_0061 | ((((at as u32 * 5) % 7) & 0x7ffff) << 5), // cbz x1, fwd
                    3 => LDR,
                    4 => LDR_X3,
                    5 => LDR_SP,
                    6 => TCO_SET,
                    7 => DSB,
                    8 => HVC,
                    9 => RET,
                    10 => 0x1400_0000 | (((at as u32 * 3) % 5 + 1) & 0x03ff_ffff), // b fwd
                    _ => 0x9100_0463, // add x3, x3, #1
                }
            };
            let words: [u32; 40] = core::array::from_fn(|k| {
                program.get(k).map_or(HVC, |&i| palette(i, k))
            });
            let fetch = |pc: u64| words.get((pc / 4) as usize).copied();
            let start = (start % program.len()) as u64 * 4;
            let Some(p) = plan(start, fetch) else { return Ok(()); };
            let mut pc = start;
            let mut executed = [0u64; 64];
            let mut n = 0usize;
            let mut bits = directions;
            let stop = loop {
                if p.is_leaf(pc) {
                    break pc;
                }
                proptest::prop_assert!(p.depth_of(pc).is_some(), "left the plan at {}", pc);
                proptest::prop_assert!(!executed[..n].contains(&pc), "{} twice", pc);
                let w = fetch(pc).unwrap();
                let kind = node_kind(w);
                proptest::prop_assert!(pc == start || kind != NodeKind::Stop
                    || p.predicted_at(pc).is_some(), "ran a stop at {}", pc);
                executed[n] = pc;
                n += 1;
                let [next, target] = successors(w, pc);
                let taken = bits & 1 == 1;
                bits = bits.rotate_right(1);
                pc = match (kind, target) {
                    (NodeKind::Inert, Some(t)) if taken || next.is_none() => t,
                    _ => next.unwrap(),
                };
                if w & 0x7c00_0000 == 0x1400_0000 {
                    pc = target.unwrap_or(pc);
                }
            };
            let path = p.path(stop, fetch).unwrap();
            proptest::prop_assert_eq!(path.depth as usize, n);
            let mut listed = [0u64; 64];
            let mut m = 0;
            p.statics_on_path(&path, |a, _, _| { listed[m] = a; m += 1; });
            let mut want = [0u64; 64];
            let mut k = 0;
            for &a in executed[..n].iter().skip(1).rev() {
                let w = fetch(a).unwrap();
                if node_kind(w) == NodeKind::Static || p.predicted_at(a).is_some() {
                    want[k] = a;
                    k += 1;
                }
            }
            // A static root (not a dynamic one) is listed too: it executed.
            if !p.dynamic_root && node_kind(fetch(start).unwrap()) == NodeKind::Static && n > 0 {
                want[k] = start;
                k += 1;
            }
            proptest::prop_assert_eq!(&listed[..m], &want[..k]);
            // The rest are the inert ones, each once: with the statics and a dynamic root,
            // every instruction executed.
            let mut inert = [0u64; 64];
            let mut q = 0;
            p.inert_on_path(&path, |a| { inert[q] = a; q += 1; });
            let dynamic_root = (p.dynamic_root && n > 0) as usize;
            proptest::prop_assert_eq!(q + m + dynamic_root, n);
            for a in &inert[..q] {
                proptest::prop_assert!(executed[..n].contains(a), "{} never ran", a);
                proptest::prop_assert!(!listed[..m].contains(a), "{} counted twice", a);
                proptest::prop_assert!(dynamic_root == 0 || *a != start, "the root twice");
            }
        }
    }

    #[test]
    fn branch_targets() {
        // b .+8, bl .-4, cbz x1, .+12, tbz w1, #3, .-8, b.eq .+16
        assert_eq!(successors(0x1400_0002, 100), [Some(108), None]);
        assert_eq!(successors(0x97ff_ffff, 100), [Some(96), None]);
        assert_eq!(successors(0xb400_0061, 100), [Some(104), Some(112)]);
        assert_eq!(successors(0x361f_ffc1, 100), [Some(104), Some(92)]);
        assert_eq!(successors(0x5400_0080, 100), [Some(104), Some(116)]);
        assert_eq!(successors(ADD, 100), [Some(104), None]);
    }

    /// musl's `__vm_lock`: the store-exclusive's base is computed inside the sequence, so it
    /// can only be judged where the run stops, right after it.
    const LDAXR_W0_X0: u32 = 0x885f_fc00;
    const ADD_W0: u32 = 0x1100_0400; // add w0, w0, #1
    const ADD_X3_X1: u32 = 0x9131_c023; // add x3, x1, #0xc70
    const STLXR_W2_X3: u32 = 0x8802_fc60; // stlxr w2, w0, [x3]
    const CBNZ_W2_BACK4: u32 = 0x35ff_ff82; // cbnz w2, .-16

    #[test]
    fn an_exclusive_sequence_runs_to_just_after_its_store() {
        // Its base (x3) as the start left it: add x4, x1, #0xc70 writes another register.
        let words = [LDAXR_W0_X0, ADD_W0, 0x9131_c024, STLXR_W2_X3, CBNZ_W2_BACK4];
        assert!(may_start_run(words[0], &decode(words[0])));
        let p = plan(0, code(&words)).unwrap();
        assert!(p.dynamic_root && p.exclusive_root());
        assert_eq!(p.exclusive_store, Some((12, 2)));
        // One exit: the branch after the store (depth 4: LDAXR, 2 ADDs, STLXR).
        assert_eq!(&p.leaves[..p.n_leaves], &[(16, 4)]);
        // The store is on the path as a static-like node, judged by the engine, not predicted.
        assert_eq!(p.n_predicted, 0);
        let path = p.path(16, code(&words)).unwrap();
        assert_eq!((path.depth, path.n_statics), (4, 1));
        let mut seen = [(0u64, None::<usize>); 1];
        let mut n = 0;
        p.statics_on_path(&path, |pc, _, k| {
            seen[n] = (pc, k);
            n += 1;
        });
        assert_eq!((n, seen), (1, [(12, None)]));
    }

    /// musl's `__vm_lock` itself: the base computed inside the sequence. Stepping could never
    /// carry it (every step clears the monitor), and the store is the run's last
    /// instruction, so it runs; it is not among the stores checked when the run is armed.
    #[test]
    fn a_store_exclusive_whose_base_the_sequence_wrote_still_closes_its_run() {
        let words = [LDAXR_W0_X0, ADD_W0, ADD_X3_X1, STLXR_W2_X3, CBNZ_W2_BACK4];
        let p = plan(0, code(&words)).unwrap();
        assert_eq!(p.exclusive_store, Some((12, 2)));
        assert_eq!(&p.leaves[..p.n_leaves], &[(16, 4)]);
        assert_eq!(p.stores & (1 << 3), 0);
    }

    #[test]
    fn a_store_exclusive_whose_status_cannot_be_read_after_it_is_not_run() {
        // stlxr w3, w0, [x3] (status over the base) and stlxr wzr, w0, [x3] (status
        // discarded): the run stops before the store, which is stepped.
        for stx in [0x8803_fc60u32, 0x881f_fc60] {
            let words = [LDAXR_W0_X0, ADD_W0, ADD_X3_X1, stx, CBNZ_W2_BACK4];
            let p = plan(0, code(&words)).unwrap();
            assert_eq!(p.exclusive_store, None, "{stx:#x}");
            assert_eq!(&p.leaves[..p.n_leaves], &[(12, 3)], "{stx:#x}");
        }
    }

    #[test]
    fn a_compare_and_exchange_leaves_at_its_failure_branch_too() {
        // 0: ldxr x0, [x2]; 4: cmp x0, x1; 8: b.ne 20; 12: stxr w4, x5, [x2]; 16: ldr; 20: hvc
        let words = [0xc85f_7c40, 0xeb01_001f, b_ne(3), 0xc804_7c45, LDR, HVC];
        let p = plan(0, code(&words)).unwrap();
        assert_eq!(p.exclusive_store, Some((12, 4)));
        let mut leaves = p.leaves[..p.n_leaves].to_vec();
        leaves.sort();
        assert_eq!(leaves, [(16, 4), (20, 3)]);
    }

    #[test]
    fn without_its_store_in_the_run_a_sequence_has_none() {
        // A load between the exclusives whose address the load-exclusive wrote (ldr x1,
        // [x0]) stops the run before the store: the engine steps on (and meets the retry
        // bound if the guest loops), never counts a store it did not see.
        let words = [LDAXR_W0_X0, 0xf940_0001, STLXR_W2_X3, HVC];
        let p = plan(0, code(&words)).unwrap();
        assert_eq!(p.exclusive_store, None);
        assert_eq!(&p.leaves[..p.n_leaves], &[(4, 1)]);
        // An ordinary plan never takes a store-exclusive in.
        let p = plan(0, code(&[ADD, STLXR_W2_X3, HVC])).unwrap();
        assert_eq!(p.exclusive_store, None);
        assert_eq!(&p.leaves[..p.n_leaves], &[(4, 1)]);
    }
}
