//! Store-exclusive retry loops: single-stepping clears the exclusive monitor (every ERET
//! does), so an LDXR/STXR retry loop can never succeed under trace. The engine notices a
//! failed store-exclusive's branch back and ends the run with a record after
//! `EXCLUSIVE_RETRIES`, rather than spinning to the watchdog. Apart because it is a guard
//! about the guest's code, not part of counting it.

use super::*;

impl Tracer {
    /// Before `word` at `pc` runs: if it is a store-exclusive, remembers its status register
    /// so that `retire` can tell a failed one; if it follows a failed store-exclusive and
    /// branches back on its status, it is a retry. Single-stepping clears the exclusive
    /// monitor (every ERET does), so a retry loop can never succeed: after
    /// `EXCLUSIVE_RETRIES` retries of one store-exclusive the run ends with a record that
    /// says so, instead of spinning to the watchdog. A loop that merely runs one LDXR/STXR
    /// pair per iteration, whatever the status, is not a retry and is traced to its end.
    pub(super) fn note_exclusive(
        &mut self,
        ctx: &GuestContext,
        pc: u64,
        word: Option<u32>,
        insn: &Insn,
    ) {
        let failed = self.failed_stxr.take();
        if let Insn::Mem(m) = insn
            && m.exclusive
            && m.dir == mtex_trace::decode::Dir::Write
            && let Some(w) = word
        {
            self.stxr_status = Some((pc, exclusive_status_register(w)));
            return;
        }
        self.stxr_status = None;
        let (Some((stxr_pc, rs)), Some(w)) = (failed, word) else {
            return;
        };
        if !branches_back_on(w, pc, rs, stxr_pc) {
            return;
        }
        if self.exclusive_pc == stxr_pc {
            self.exclusive_retries += 1;
        } else {
            (self.exclusive_pc, self.exclusive_retries) = (stxr_pc, 1);
        }
        if self.exclusive_retries > EXCLUSIVE_RETRIES {
            crate::report::die(mtex_abi::report::ExitReason::TraceUnsupported {
                at: ctx.state(),
                reason: mtex_abi::report::Message::truncated(
                    "LDXR/STXR retry loop: stepping clears the exclusive monitor; use LSE atomics",
                ),
            });
        }
    }
}

/// The status register (Ws, bits 20:16) of a store-exclusive.
fn exclusive_status_register(word: u32) -> u8 {
    ((word >> 16) & 0x1f) as u8
}

/// `word` at `pc` is a CBNZ/CBZ/TBNZ/TBZ on register `rs` whose target is at or before
/// `stxr_pc`: the branch of a retry loop going back for another attempt.
fn branches_back_on(word: u32, pc: u64, rs: u8, stxr_pc: u64) -> bool {
    let tests_rs = word & 0x1f == rs as u32;
    let is_test_branch = word & 0x7e00_0000 == 0x3400_0000 || word & 0x7e00_0000 == 0x3600_0000;
    let [_, target] = mtex_trace::run::successors(word, pc);
    is_test_branch && tests_rs && target.is_some_and(|t| t <= stxr_pc)
}
