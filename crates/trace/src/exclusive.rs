//! Store-exclusive retry loops under trace. Single-stepping clears the exclusive monitor
//! (every ERET does), so an LDXR/STXR retry loop can never succeed while it is stepped, and
//! a run whose store-exclusive fails every time cannot succeed as planned either. The guard
//! follows the store-exclusives the engine retires and says when one has been retried more
//! than [`EXCLUSIVE_RETRIES`] times in a row: the engine then ends the run with a record
//! rather than spinning to the watchdog. A loop that merely runs one LDXR/STXR pair per
//! iteration, whatever the status, is not a retry and is traced to its end.

use crate::EXCLUSIVE_RETRIES;
use crate::decode::{Dir, Insn};

/// What the engine has seen of store-exclusives: the one about to retire, the one that just
/// failed, and the retries of the last one that failed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RetryGuard {
    /// The pending instruction is a store-exclusive: its PC and status register.
    pending: Option<(u64, u8)>,
    /// The instruction just retired was a store-exclusive that failed: its PC and status
    /// register.
    failed: Option<(u64, u8)>,
    /// The store-exclusive retried, and how many times in a row.
    pc: u64,
    retries: u32,
}

impl RetryGuard {
    /// Before `word` (decoded as `insn`) at `pc` is stepped. True when it is the branch
    /// back of a retry loop whose store-exclusive has now been retried more than
    /// [`EXCLUSIVE_RETRIES`] times in a row.
    pub fn before(&mut self, pc: u64, word: Option<u32>, insn: &Insn) -> bool {
        let failed = self.failed.take();
        if let Insn::Mem(m) = insn
            && m.exclusive
            && m.dir == Dir::Write
            && let Some(w) = word
        {
            self.pending = Some((pc, status_register(w)));
            return false;
        }
        self.pending = None;
        let (Some((stxr_pc, rs)), Some(w)) = (failed, word) else {
            return false;
        };
        if !branches_back_on(w, pc, rs, stxr_pc) {
            return false;
        }
        if self.pc == stxr_pc {
            self.retries += 1;
        } else {
            (self.pc, self.retries) = (stxr_pc, 1);
        }
        self.retries > EXCLUSIVE_RETRIES
    }

    /// The status register of the store-exclusive retiring at `pc`, if it is one.
    pub fn store_exclusive_at(&self, pc: u64) -> Option<u8> {
        self.pending.filter(|&(at, _)| at == pc).map(|(_, rs)| rs)
    }

    /// The store-exclusive at `pc` failed: its status register `rs` is not zero.
    pub fn failed_at(&mut self, pc: u64, rs: u8) {
        self.failed = Some((pc, rs));
    }

    /// A run's store-exclusive failed; true when runs have failed more than
    /// [`EXCLUSIVE_RETRIES`] times in a row.
    pub fn run_failed(&mut self) -> bool {
        self.retries += 1;
        self.retries > EXCLUSIVE_RETRIES
    }

    /// A run's store-exclusive succeeded: the count starts again.
    pub fn run_succeeded(&mut self) {
        self.retries = 0;
    }
}

/// The status register (Ws, bits 20:16) of a store-exclusive.
fn status_register(word: u32) -> u8 {
    ((word >> 16) & 0x1f) as u8
}

/// `word` at `pc` is a CBNZ/CBZ/TBNZ/TBZ on register `rs` whose target is at or before
/// `stxr_pc`: the branch of a retry loop going back for another attempt.
fn branches_back_on(word: u32, pc: u64, rs: u8, stxr_pc: u64) -> bool {
    let tests_rs = word & 0x1f == rs as u32;
    let is_test_branch = word & 0x7e00_0000 == 0x3400_0000 || word & 0x7e00_0000 == 0x3600_0000;
    let [_, target] = crate::run::successors(word, pc);
    is_test_branch && tests_rs && target.is_some_and(|t| t <= stxr_pc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::decode;

    /// `loop: ldxr x1, [x0]; stxr w2, x1, [x0]; cbnz w2, loop` at 0x1000.
    const LDXR: u32 = 0xc85f_7c01;
    const STXR_W2: u32 = 0xc802_7c01;
    const CBNZ_W2_BACK_8: u32 = 0x35ff_ffc2;
    /// `cbnz w3, .-8`: the same branch on another register.
    const CBNZ_W3_BACK_8: u32 = 0x35ff_ffc3;
    const AT: u64 = 0x1000;

    /// One attempt of the loop, its store-exclusive failing; true if the guard ends it.
    fn failing_attempt(g: &mut RetryGuard, branch: u32) -> bool {
        assert!(!g.before(AT, Some(LDXR), &decode(LDXR)));
        assert!(!g.before(AT + 4, Some(STXR_W2), &decode(STXR_W2)));
        let rs = g.store_exclusive_at(AT + 4).expect("a store-exclusive");
        assert_eq!(rs, 2);
        g.failed_at(AT + 4, rs);
        g.before(AT + 8, Some(branch), &decode(branch))
    }

    #[test]
    fn a_retry_loop_ends_after_its_allowed_retries_and_not_before() {
        let mut g = RetryGuard::default();
        for i in 1..=EXCLUSIVE_RETRIES {
            assert!(!failing_attempt(&mut g, CBNZ_W2_BACK_8), "retry {i}");
        }
        assert!(failing_attempt(&mut g, CBNZ_W2_BACK_8));
    }

    #[test]
    fn a_branch_on_another_register_or_forward_is_no_retry() {
        let mut g = RetryGuard::default();
        for _ in 0..3 * EXCLUSIVE_RETRIES {
            assert!(!failing_attempt(&mut g, CBNZ_W3_BACK_8));
        }
        // Forward, past the store-exclusive: `cbnz w2, .+8`.
        for _ in 0..3 * EXCLUSIVE_RETRIES {
            assert!(!failing_attempt(&mut g, 0x3500_0042));
        }
        // Not a store-exclusive where the guard is asked.
        assert_eq!(g.store_exclusive_at(AT + 8), None);
    }

    #[test]
    fn runs_count_their_failures_in_a_row() {
        let mut g = RetryGuard::default();
        for _ in 0..EXCLUSIVE_RETRIES {
            assert!(!g.run_failed());
        }
        g.run_succeeded();
        for _ in 0..EXCLUSIVE_RETRIES {
            assert!(!g.run_failed());
        }
        assert!(g.run_failed());
    }
}
