//! Whether a window's interrupts came far more often than the kernel's tick. A window's
//! counts are exact for what ran, but a guest whose clock ran ahead of its work (timer
//! interrupts again and again) did other work than it would have: on several CPUs under
//! `-icount` that was once the case, and nothing in the figures showed it. Interrupts other
//! than the tick (IPIs of a workload that wakes threads across CPUs, a device's) count here
//! too, so this is said, not called wrong.

use super::report::Window;

/// The tick when the kernel's configuration does not say: the most Linux offers
/// (CONFIG_HZ_1000).
pub const HIGHEST_TICK: u32 = 1000;

/// Interrupts per CPU-second above this many ticks' worth are far above the tick.
pub const TICKS_FAR_ABOVE: f64 = 4.0;

/// Windows with fewer interrupts than this are never said to be far above the tick: a short
/// window's few ticks make no rate.
pub const FEWEST: u64 = 100;

/// The kernel's tick rate (`CONFIG_HZ=N` of its configuration), if it says.
pub fn config_hz(config: &str) -> Option<u32> {
    config
        .lines()
        .find_map(|l| l.strip_prefix("CONFIG_HZ="))
        .and_then(|v| v.trim().parse().ok())
        .filter(|&hz| hz > 0)
}

/// Interrupts per CPU and second of guest time: `irqs` in `ms` milliseconds on `cpus` CPUs.
pub fn per_cpu_second(irqs: u64, ms: f64, cpus: usize) -> f64 {
    irqs as f64 / (ms / 1000.0) / cpus.max(1) as f64
}

/// Whether `rate` (per CPU-second) is far above a tick of `tick` a second, from `irqs`
/// interrupts.
pub fn far_above(irqs: u64, rate: f64, tick: u32) -> bool {
    irqs >= FEWEST && rate > TICKS_FAR_ABOVE * f64::from(tick)
}

/// A note for each window whose interrupts per CPU and second of its guest time were more
/// than [`TICKS_FAR_ABOVE`] times the kernel's tick (`hz`, [`HIGHEST_TICK`] when unknown).
pub fn notes(windows: &[Window], hz: Option<u32>) -> Vec<String> {
    let tick = hz.unwrap_or(HIGHEST_TICK);
    windows
        .iter()
        .filter_map(|w| {
            let ms = w.guest_clock_ms.filter(|&ms| ms > 0.0)?;
            let irqs = w.entries.irq_el0 + w.entries.irq_el1;
            let cpus = w.cpus.len().max(1);
            let rate = per_cpu_second(irqs, ms, cpus);
            far_above(irqs, rate, tick).then(|| {
                format!(
                    "window {}: {} interrupts in {ms:.3} ms of guest time on {cpus} CPU{}, {} \
                     per CPU-second, more than {TICKS_FAR_ABOVE}× the kernel's tick ({tick} a \
                     second{}): timer interrupts that often mean the guest's clock ran ahead of \
                     its work and the window's counts include that work; IPIs between CPUs and \
                     device interrupts count here too",
                    w.id,
                    crate::output::text::thousands(irqs),
                    if cpus == 1 { "" } else { "s" },
                    crate::output::text::thousands(rate.round() as u64),
                    if hz.is_some() {
                        ", CONFIG_HZ"
                    } else {
                        ", the most Linux offers: its configuration was not read"
                    }
                )
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(irq_el1: u64, ms: f64, cpus: usize) -> Window {
        let mut w = Window {
            id: 1,
            guest_clock_ms: Some(ms),
            ..Window::default()
        };
        w.entries.irq_el1 = irq_el1;
        w.cpus = (0..cpus)
            .map(|cpu| super::super::report::WindowCpu {
                cpu: cpu as u32,
                ..Default::default()
            })
            .collect();
        w
    }

    #[test]
    fn the_tick_is_read_from_the_configuration() {
        assert_eq!(
            config_hz("# c\nCONFIG_HZ_250=y\nCONFIG_HZ=250\n"),
            Some(250)
        );
        assert_eq!(config_hz("CONFIG_HZ_250=y\n"), None);
        assert_eq!(config_hz("CONFIG_HZ=0\n"), None);
    }

    #[test]
    fn a_storm_is_said_and_a_tick_is_not() {
        // The storm seen on two CPUs: 7,805 interrupts in 20 ms, 195,125 per CPU-second.
        let n = notes(&[window(7805, 20.0, 2)], Some(250));
        assert_eq!(n.len(), 1, "{n:?}");
        assert!(n[0].contains("7,805 interrupts") && n[0].contains("195,125 per CPU-second"));
        assert!(n[0].contains("250 a second, CONFIG_HZ"), "{}", n[0]);
        // The tick itself, on one CPU and on four: nothing to say.
        assert!(notes(&[window(250, 1000.0, 1)], Some(250)).is_empty());
        assert!(notes(&[window(4 * 250, 1000.0, 4)], Some(250)).is_empty());
        // 4 × 250 per CPU-second is the edge; above it, said.
        assert!(notes(&[window(1000, 1000.0, 1)], Some(250)).is_empty());
        assert_eq!(notes(&[window(1001, 1000.0, 1)], Some(250)).len(), 1);
        // Too few to make a rate, or no clock: nothing.
        assert!(notes(&[window(99, 1.0, 1)], Some(250)).is_empty());
        let mut no_clock = window(7805, 20.0, 2);
        no_clock.guest_clock_ms = None;
        assert!(notes(&[no_clock], Some(250)).is_empty());
        // Unknown tick: judged against the highest.
        let n = notes(&[window(4001, 1000.0, 1)], None);
        assert!(
            n[0].contains("1000 a second, the most Linux offers"),
            "{n:?}"
        );
        assert!(notes(&[window(4000, 1000.0, 1)], None).is_empty());
    }
}
