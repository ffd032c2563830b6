//! Watching the guest's clock under `-icount`: a run whose clock stopped (nothing retires)
//! or ran past the watchdog's budget without the run ending can no longer be ended by any
//! watchdog, so the host ends it early rather than at its long backstop limit. Pure logic
//! on samples (`console` takes them over QMP), so that it is tested without QEMU.

use std::time::Duration;

/// `Host - Guest clock  2653 ms` from QEMU's `info jit` (shown under `-icount`): how far the
/// guest's clock is behind the host's since the machine started.
pub fn parse_clock_lag_ms(info_jit: &str) -> Option<i64> {
    info_jit.lines().find_map(|l| {
        l.trim()
            .strip_prefix("Host - Guest clock")?
            .trim()
            .strip_suffix("ms")?
            .trim()
            .parse()
            .ok()
    })
}

/// Host time without the guest's clock advancing after which no watchdog can end the run.
pub const CLOCK_STALL: Duration = Duration::from_secs(10);

/// Guest time that counts as the clock advancing (the estimate's noise is a few ms; a guest
/// advancing this little in [`CLOCK_STALL`] would run 500 times slower than the host).
pub const CLOCK_PROGRESS_MS: i64 = 20;

/// Guest time past the budget after which the watchdog has failed (it is armed within the
/// first 0.1 s; the estimate errs by QEMU's start-up time, well below a second).
pub const CLOCK_PAST_BUDGET_MS: i64 = 2000;

/// The guest's clock, sampled: says when a watchdog can no longer end the run.
#[derive(Clone, Debug)]
pub struct ClockWatch {
    budget_ms: u64,
    /// The last time the clock advanced: host time, guest ms.
    progress: Option<(Duration, i64)>,
}

impl ClockWatch {
    pub fn new(budget_ms: u64) -> Self {
        Self {
            budget_ms,
            progress: None,
        }
    }

    /// The guest's clock read `guest_ms` at host time `host` (both since the machine started):
    /// why the run must be ended, if it must.
    pub fn observe(&mut self, host: Duration, guest_ms: i64) -> Option<String> {
        if guest_ms > self.budget_ms as i64 + CLOCK_PAST_BUDGET_MS {
            return Some(format!(
                "the guest's clock reached {guest_ms} ms, past its watchdog budget of {} ms, and the run did not end",
                self.budget_ms
            ));
        }
        match self.progress {
            Some((_, g)) if guest_ms > g + CLOCK_PROGRESS_MS => {
                self.progress = Some((host, guest_ms))
            }
            Some((since, g)) if host.saturating_sub(since) >= CLOCK_STALL => {
                return Some(format!(
                    "the guest's clock stopped at {g} ms for {} s of host time: nothing retires, so no watchdog can end the run",
                    host.saturating_sub(since).as_secs()
                ));
            }
            Some(_) => {}
            None => self.progress = Some((host, guest_ms)),
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_guest_clock_lag_is_read_from_info_jit() {
        let text = "Statistics:\nTB flush count      0\n[TCG profiler not compiled]\n\
                    Host - Guest clock  2653 ms\nMax guest delay     NA\n";
        assert_eq!(parse_clock_lag_ms(text), Some(2653));
        assert_eq!(parse_clock_lag_ms("Host - Guest clock  -12 ms"), Some(-12));
        // Without -icount QEMU prints no such line.
        assert_eq!(parse_clock_lag_ms("TB count            1813\n"), None);
    }

    #[test]
    fn a_clock_that_stops_or_passes_the_budget_ends_the_run() {
        let s = Duration::from_secs;
        let mut w = ClockWatch::new(10_000);
        assert_eq!(w.observe(s(1), 40), None);
        // Advancing slowly is progress (a trap-heavy guest: 30 ms in 9 s).
        assert_eq!(w.observe(s(9), 70), None);
        // Noise is not progress; a stop of CLOCK_STALL is the end.
        assert_eq!(w.observe(s(12), 75), None);
        assert_eq!(w.observe(s(18), 70), None);
        let stop = w.observe(s(19), 80).unwrap();
        assert_eq!(
            stop,
            "the guest's clock stopped at 70 ms for 10 s of host time: nothing retires, so no watchdog can end the run"
        );
        let mut w = ClockWatch::new(10_000);
        assert_eq!(w.observe(s(1), 12_000), None);
        let past = w.observe(s(2), 12_001).unwrap();
        assert!(
            past.starts_with(
                "the guest's clock reached 12001 ms, past its watchdog budget of 10000 ms"
            ),
            "{past}"
        );
    }
}
