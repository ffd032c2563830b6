//! Runs: instead of single-stepping a stretch of inert instructions (`decode::is_inert`:
//! data processing and direct branches, which neither access memory nor change TCO, the EL
//! or the MTE controls), the step engine lets the guest run through it at full speed and
//! stops it with hardware breakpoints at every place the stretch can leave to. The count of
//! instructions run is the depth of the place it stopped at, which is unique: a plan in which
//! any address could be reached two ways is refused, and the engine steps instead.

use crate::decode::is_inert;

/// Most exits a run may have (hardware breakpoints; two more are kept for the EL1 vectors).
pub const MAX_LEAVES: usize = 4;
/// Most instructions a plan looks at.
pub const MAX_VISITED: usize = 48;

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

/// A planned run: the addresses it can stop at, with how many instructions it has executed
/// when it gets there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    /// (address, instructions executed on arrival) of every exit.
    pub leaves: [(u64, u32); MAX_LEAVES],
    pub n_leaves: usize,
    /// Every address in the run, leaves included, with its depth.
    visited: [(u64, u32); MAX_VISITED],
    n_visited: usize,
    /// The instruction word at each visited address when the plan was made (`NO_WORD` where
    /// it could not be read), so a reused plan can be checked against the code as it is now.
    words: [u64; MAX_VISITED],
}

/// A visited address whose word the plan could not read.
const NO_WORD: u64 = u64::MAX;

impl Plan {
    /// Instructions executed when the guest is at `pc` (a leaf, or an instruction inside the
    /// run where an interrupt stopped it); None if `pc` is not in the run.
    pub fn depth_of(&self, pc: u64) -> Option<u32> {
        self.visited[..self.n_visited]
            .iter()
            .find(|(a, _)| *a == pc)
            .map(|(_, d)| *d)
    }

    /// True when every instruction the plan looked at still reads the same: code rewritten in
    /// place since (with or without an IC invalidation the engine saw) makes the plan stale.
    pub fn still_matches(&self, mut fetch: impl FnMut(u64) -> Option<u32>) -> bool {
        self.visited[..self.n_visited]
            .iter()
            .zip(&self.words)
            .all(|((pc, _), w)| fetch(*pc).map_or(NO_WORD, u64::from) == *w)
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
            visited: [(0, 0); MAX_VISITED],
            n_visited: 0,
            words: [NO_WORD; MAX_VISITED],
        }
    }
}

/// Plans a run from `start` (which must be inert). `fetch` reads an instruction word, or
/// None where the plan may not look (another page, not guest RAM): such an address is a leaf.
/// Returns None when there is no run to make: the start is not inert, an address is reached
/// twice (a loop, or two paths joining), or there are too many exits.
pub fn plan(start: u64, fetch: impl FnMut(u64) -> Option<u32>) -> Option<Plan> {
    let mut p = Plan::default();
    p.build(start, fetch).then_some(p)
}

impl Plan {
    /// [`plan`], written in place (the step path keeps one `Plan` and does not move it).
    pub fn build(&mut self, start: u64, mut fetch: impl FnMut(u64) -> Option<u32>) -> bool {
        self.n_leaves = 0;
        self.n_visited = 0;
        self.fill(start, &mut fetch).is_some()
    }

    fn fill(&mut self, start: u64, fetch: &mut impl FnMut(u64) -> Option<u32>) -> Option<()> {
        let p = self;
        let mut work: [(u64, u32); MAX_VISITED] = [(0, 0); MAX_VISITED];
        let mut n_work = 1;
        work[0] = (start, 0);
        while n_work > 0 {
            n_work -= 1;
            let (pc, depth) = work[n_work];
            if p.depth_of(pc).is_some() || p.n_visited == MAX_VISITED {
                return None;
            }
            p.visited[p.n_visited] = (pc, depth);
            let fetched = fetch(pc);
            p.words[p.n_visited] = fetched.map_or(NO_WORD, u64::from);
            p.n_visited += 1;
            let word = fetched.filter(|w| is_inert(*w));
            let Some(word) = word.filter(|_| p.n_visited < MAX_VISITED - 2) else {
                if depth == 0 || p.n_leaves == MAX_LEAVES {
                    return None;
                }
                p.leaves[p.n_leaves] = (pc, depth);
                p.n_leaves += 1;
                continue;
            };
            for s in successors(word, pc).into_iter().flatten() {
                if n_work == MAX_VISITED {
                    return None;
                }
                work[n_work] = (s, depth + 1);
                n_work += 1;
            }
        }
        Some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ADD: u32 = 0x9100_0421; // add x1, x1, #1
    const LDR: u32 = 0xf940_0041; // ldr x1, [x2]
    const HVC: u32 = 0xd400_0002;

    fn code(words: &[u32]) -> impl FnMut(u64) -> Option<u32> + '_ {
        move |pc| words.get((pc / 4) as usize).copied()
    }

    /// b.ne with a word offset (imm19).
    fn b_ne(words: i32) -> u32 {
        0x5400_0001 | (((words as u32) & 0x7ffff) << 5)
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
    fn loops_and_joins_are_refused() {
        // 0: add; 4: b.ne 0 — an inert loop revisits 0.
        assert_eq!(plan(0, code(&[ADD, b_ne(-1), LDR])), None);
        // A non-inert start is no run.
        assert_eq!(plan(0, code(&[LDR])), None);
        // 0: b.ne 8; 4: add; 8: ldr — two paths join at 8 with depths 1 and 2.
        assert_eq!(plan(0, code(&[b_ne(2), ADD, LDR])), None);
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
}
