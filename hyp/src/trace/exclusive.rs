//! Store-exclusive retry loops: the guard's decisions are `mtex_trace::exclusive`'s (tested
//! on the host); here the engine asks it before each step and ends the run when it says so.
//! Apart because it is a guard about the guest's code, not part of counting it.

use super::*;

impl Tracer {
    /// Before `word` at `pc` runs: the guard notes a store-exclusive, or sees a retry loop
    /// branch back after its store-exclusive failed; after `EXCLUSIVE_RETRIES` retries of one
    /// the run ends with a record that says so, instead of spinning to the watchdog.
    pub(super) fn note_exclusive(
        &mut self,
        ctx: &GuestContext,
        pc: u64,
        word: Option<u32>,
        insn: &Insn,
    ) {
        if self.exclusive.before(pc, word, insn) {
            crate::report::die(mtex_abi::report::ExitReason::TraceUnsupported {
                at: ctx.state(),
                reason: mtex_abi::report::Message::truncated(
                    "LDXR/STXR retry loop: stepping clears the exclusive monitor; use LSE atomics",
                ),
            });
        }
    }
}
