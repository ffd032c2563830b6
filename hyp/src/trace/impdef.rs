//! What the Arm ARM leaves to the CPU about a stepped instruction, noticed so that the
//! report can say how many counts rest on it (the counts themselves follow the
//! architectural view, as QEMU does):
//! - a CAS/CASP whose compare failed: its write may be Tag Unchecked, or not made
//!   (D10.4.1; `MemAtomic`). Only its compare register before and after tells, so a CAS is
//!   always stepped (`mtex_trace::run::is_dynamic_root_of`).
//! - a store-exclusive whose Tag Checked property differs from its load-exclusive's: its
//!   status is UNKNOWN (B2.12.5), so whether it wrote is not known.
//!
//! (Tagged memory mapped Non-shareable or with SCTLR_EL1.C = 0 is noticed where each access
//! is judged: `judge`.)

use crate::context::GuestContext;
use mtex_trace::counts::{Pending, TraceCounts};
use mtex_trace::decode::{Compare, Dir, Insn};

/// Per CPU: the pending CAS's compare register(s), and the last load-exclusive's Tag
/// Checked property.
#[derive(Default)]
pub(super) struct Watch {
    /// The pending CAS/CASP: its PC, compare, and the register(s) before it ran.
    cas: Option<(u64, Compare, [u64; 2])>,
    /// The pending instruction is a load-exclusive (Read) or a store-exclusive (Write).
    exclusive: Option<Dir>,
    /// Whether the last load-exclusive that completed was Tag Checked (architectural view);
    /// taken by the next store-exclusive.
    load_checked: Option<bool>,
}

/// What `Watch::after` found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Outcome {
    /// Judged as the architectural view judges it (noted in the counts if the CPU may
    /// differ).
    Counted,
    /// A CAS/CASP whose compare register is XZR: whether it wrote cannot be known.
    Unknown,
}

impl Watch {
    /// Before the instruction `insn` at `pc` runs.
    pub(super) fn before(&mut self, ctx: &GuestContext, pc: u64, insn: &Insn) {
        let Insn::Mem(m) = insn else {
            (self.cas, self.exclusive) = (None, None);
            return;
        };
        self.cas = m.compare.map(|c| {
            let second = if c.pair { ctx.reg(c.rs + 1) } else { 0 };
            (pc, c, [ctx.reg(c.rs), second])
        });
        self.exclusive = m.exclusive.then_some(m.dir);
    }

    /// After the stepped instruction `p` completed, with the registers as it left them.
    pub(super) fn after(
        &mut self,
        ctx: &GuestContext,
        p: &Pending,
        counts: &mut TraceCounts,
    ) -> Outcome {
        match self.exclusive.take() {
            Some(Dir::Read) => self.load_checked = Some(p.read.views().architectural),
            Some(Dir::Write) => self.store_exclusive(p.write.views().architectural, counts),
            _ => {}
        }
        let Some((pc, c, before)) = self.cas.take() else {
            return Outcome::Counted;
        };
        if pc != p.pc {
            return Outcome::Counted;
        }
        let second = if c.pair { ctx.reg(c.rs + 1) } else { 0 };
        match c.failed(before, [ctx.reg(c.rs), second]) {
            None => Outcome::Unknown,
            Some(failed) => {
                counts.failed_cas += failed as u64;
                Outcome::Counted
            }
        }
    }

    /// A store-exclusive Tag Checked (or not) as `checked` ran, stepped or at the end of
    /// an exclusive sequence's run: against the load-exclusive before it.
    pub(super) fn store_exclusive(&mut self, checked: bool, counts: &mut TraceCounts) {
        if let Some(load) = self.load_checked.take() {
            counts.exclusive_pairs_mixed += (load != checked) as u64;
        }
    }

    /// A load-exclusive that completed in a run (the root of an exclusive sequence).
    pub(super) fn load_exclusive(&mut self, checked: bool) {
        self.load_checked = Some(checked);
    }
}
