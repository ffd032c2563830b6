//! What Linux says on its console when its clocks misbehave: a stalled grace period, a
//! locked-up CPU, a clocksource it stopped trusting, a timer interrupt that took too long.
//! Under mtex these mean the guest's time went wrong (the hypervisor takes its own time out
//! of the guest's clock on every CPU), and the counts of a window around them are of a
//! guest that was not running as it would: each is a named problem in the report.

/// Phrases of Linux's own messages (kernel/rcu, kernel/watchdog.c, kernel/time).
const CLOCK_TROUBLE: &[&str] = &[
    "self-detected stall",
    "detected stalls on CPUs",
    "detected expedited stalls",
    "kthread timer wakeup didn't happen",
    "kthread starved for",
    "BUG: soft lockup",
    "Watchdog detected hard LOCKUP",
    "timekeeping watchdog",
    "as unstable because the skew is too large",
    "hrtimer: interrupt took",
    "Clock skew too large",
];

/// One problem per kind of trouble, with its first line.
pub fn clock_problems(console: &str) -> Vec<String> {
    CLOCK_TROUBLE
        .iter()
        .filter_map(|phrase| {
            let line = console.lines().find(|l| l.contains(phrase))?;
            Some(format!(
                "Linux reported trouble with its clocks (its timekeeping under the hypervisor \
                 went wrong, and the counts of a window around it are not those of a guest \
                 running as it would): {}",
                line.trim()
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stalls_lockups_and_clock_warnings_are_problems() {
        for line in [
            "[   42.103841] rcu: INFO: rcu_sched self-detected stall on CPU",
            "[   42.103841] rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:",
            "[   63.000000] rcu: rcu_sched kthread timer wakeup didn't happen for 2502 jiffies!",
            "[   50.000001] watchdog: BUG: soft lockup - CPU#1 stuck for 22s! [mtex-work:77]",
            "[    9.912233] clocksource: timekeeping watchdog on CPU1: Marking clocksource \
             'arch_sys_counter' as unstable because the skew is too large:",
            "[    3.000000] hrtimer: interrupt took 1234567 ns",
        ] {
            let console = format!("[    0.000000] Booting Linux\n{line}\n[   70.0] more\n");
            let p = clock_problems(&console);
            assert!(!p.is_empty(), "{line}");
            assert!(p[0].ends_with(line.trim()), "{p:?}");
        }
    }

    #[test]
    fn an_ordinary_boot_has_none() {
        let console = "[    0.000000] Booting Linux on physical CPU 0x0000000000 [0x000f0510]\n\
            [    0.000000] clocksource: arch_sys_counter: mask: 0xffffffffffffff max_cycles: \
            0x1cd42e4dffb, max_idle_ns: 881590591483 ns\n\
            [    0.000051] sched_clock: 56 bits at 62MHz, resolution 16ns, wraps every 4398046511096ns\n\
            [    0.152000] rcu: Hierarchical SRCU implementation.\n\
            [    0.160000] smp: Brought up 1 node, 2 CPUs\n";
        assert!(clock_problems(console).is_empty());
    }
}
