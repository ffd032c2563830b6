//! How phases make runs: which run and pass a PHASE_BEGIN opens (`hypercall::PHASE_AGAIN`).
//! The hypervisor decides with [`next_phase`]; the host folds a run's passes by the run's
//! serial number (`report::PhasePmu::run`).

use crate::hypercall::{PHASE_AGAIN, PHASE_PARAMS, PHASE_REPEATABLE, PHASE_TRACED};

/// The run the last phase belonged to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LastRun {
    /// The run's serial number (1, 2, … in the order runs began).
    pub run: u32,
    /// The last phase's pass: 1-based untraced pass, 0 for a traced phase.
    pub pass: u8,
    /// Untraced passes the run needs (known when its first pass ends; 0 until then).
    pub passes: u8,
    /// The last phase's PHASE_BEGIN flags.
    pub flags: u64,
    /// Its name (x2..x5) and parameter (x7..x10) registers.
    pub regs: [u64; 8],
}

/// The (run, pass) a PHASE_BEGIN with `flags` and `regs` opens, given the last run and the
/// serial number a new run would take; None when PHASE_AGAIN repeats nothing it may:
/// another name or parameters, a traced phase after a traced one, an untraced pass after the
/// traced phase or past the passes the run needs, or a change of PHASE_REPEATABLE.
pub fn next_phase(
    last: Option<&LastRun>,
    serial: u32,
    flags: u64,
    regs: [u64; 8],
) -> Option<(u32, u8)> {
    let traced = flags & PHASE_TRACED != 0;
    if flags & PHASE_AGAIN == 0 {
        return Some((serial, if traced { 0 } else { 1 }));
    }
    let l = last?;
    let params = flags & PHASE_PARAMS;
    let same = l.regs[..4] == regs[..4]
        && l.flags & PHASE_PARAMS == params
        && (params == 0 || l.regs[4..] == regs[4..]);
    if !same || l.pass == 0 {
        return None;
    }
    if traced {
        return Some((l.run, 0));
    }
    let same_kind = l.flags & PHASE_REPEATABLE == flags & PHASE_REPEATABLE;
    (same_kind && l.pass < l.passes).then_some((l.run, l.pass + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    const NAME: [u64; 8] = [u64::from_le_bytes(*b"getpid\0\0"), 0, 0, 0, 7, 8, 9, 10];

    fn after(pass: u8, passes: u8, flags: u64) -> LastRun {
        LastRun {
            run: 4,
            pass,
            passes,
            flags,
            regs: NAME,
        }
    }

    #[test]
    fn a_new_phase_is_a_new_run() {
        assert_eq!(next_phase(None, 5, 0, NAME), Some((5, 1)));
        assert_eq!(next_phase(None, 5, PHASE_TRACED, NAME), Some((5, 0)));
        let l = after(1, 3, PHASE_PARAMS);
        assert_eq!(next_phase(Some(&l), 5, PHASE_PARAMS, NAME), Some((5, 1)));
    }

    #[test]
    fn again_takes_the_next_pass_then_the_traced_phase() {
        let f = PHASE_PARAMS | PHASE_REPEATABLE;
        let l = after(1, 3, f);
        assert_eq!(next_phase(Some(&l), 5, f | PHASE_AGAIN, NAME), Some((4, 2)));
        let traced = PHASE_PARAMS | PHASE_AGAIN | PHASE_TRACED;
        assert_eq!(next_phase(Some(&l), 5, traced, NAME), Some((4, 0)));
    }

    #[test]
    fn again_refuses_what_it_cannot_repeat() {
        let f = PHASE_PARAMS | PHASE_REPEATABLE;
        let again = f | PHASE_AGAIN;
        // Nothing before it.
        assert_eq!(next_phase(None, 5, again, NAME), None);
        // Another name, other parameters, or parameters given only now.
        let mut other = NAME;
        other[0] ^= 1;
        assert_eq!(next_phase(Some(&after(1, 3, f)), 5, again, other), None);
        let mut other = NAME;
        other[6] ^= 1;
        assert_eq!(next_phase(Some(&after(1, 3, f)), 5, again, other), None);
        let plain = after(1, 3, PHASE_REPEATABLE);
        assert_eq!(next_phase(Some(&plain), 5, again, NAME), None);
        // Past the passes the run needs.
        assert_eq!(next_phase(Some(&after(3, 3, f)), 5, again, NAME), None);
        // After the traced phase: neither another pass nor another traced phase.
        let traced = after(0, 3, PHASE_PARAMS | PHASE_TRACED);
        assert_eq!(next_phase(Some(&traced), 5, again, NAME), None);
        assert_eq!(
            next_phase(Some(&traced), 5, again | PHASE_TRACED, NAME),
            None
        );
        // A guest that stops honouring the passes midway.
        assert_eq!(
            next_phase(Some(&after(1, 3, f)), 5, PHASE_PARAMS | PHASE_AGAIN, NAME),
            None
        );
    }
}
