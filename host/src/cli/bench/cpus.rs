//! What tracing costs on several CPUs: machine instructions per traced guest instruction for
//! one traced phase of the guest kernel on 1 CPU and on N.
//!
//! A CPU's PMU counts that CPU's EL2 instructions, and under QEMU its instruction event reads
//! the machine's instruction count (the other CPUs' instructions too, while it waits its turn),
//! so per-CPU PMU figures cannot be summed there. The machine's own clock can: under `-icount
//! shift=0` QEMU's virtual time advances one nanosecond per instruction any CPU executes, so a
//! phase's span on the counter is the instructions the whole machine executed in it — the
//! guest's traced instructions plus every CPU's EL2 work for them. On one CPU the same figure
//! from the PMU (EL2 instructions over traced ones) stands beside it as the cross-check.

use crate::cli::bench::Boots;
use anyhow::{Context, Result, bail};
use std::fmt::Write;
use std::time::Duration;

/// One run's cost.
#[derive(Clone, Debug)]
pub struct CpuCost {
    pub cpus: u32,
    /// Guest instructions the phase traced, summed over its CPUs.
    pub traced: u64,
    /// Instructions the machine executed in the phase (its span under -icount shift=0).
    pub machine: u64,
    /// EL2 instructions per traced instruction from the machine's clock: (machine − traced)
    /// / traced, every CPU's EL2 work included.
    pub el2_per_traced: f64,
    /// The same from the PMU, on one CPU only (EL2 instructions framing included).
    pub el2_per_traced_pmu: Option<f64>,
    /// Checked kernel reads the phase counted (the workload's arithmetic times the CPUs).
    pub checked_rd_k: u64,
    /// The share of the phase's span each CPU spent waiting for the hypervisor's lock, on
    /// average over the CPUs (its `lock_wait_ticks` over the span's ticks).
    pub lock_wait: f64,
    /// Wall-clock time of the whole run, boot included.
    pub wall: Duration,
}

/// The guest kernel's futex-hash of `iters` iterations under entry-tco, traced, on each of
/// `cpus` CPU counts.
pub fn cost(boots: &Boots, cpus: &[u32], iters: u64) -> Result<Vec<CpuCost>> {
    let lines: Vec<(String, bool)> = cpus.iter().map(|&n| (cmdline(n, iters), true)).collect();
    boots.prefetch(&lines, 1)?;
    cpus.iter().map(|&n| one(boots, n, iters)).collect()
}

fn cmdline(cpus: u32, iters: u64) -> String {
    format!(
        "mtex.guest=kernel mtex.watchdog_ms=600000 mtex.cpus={cpus} mtex.hz=0 \
         mtex.trace=only mtex.workloads=futex-hash:iters={iters} mtex.policies=entry-tco"
    )
}

fn one(boots: &Boots, cpus: u32, iters: u64) -> Result<CpuCost> {
    let b = boots.ok(&cmdline(cpus, iters), true)?;
    let r = &b.report;
    let [p] = r.phases.as_slice() else {
        bail!("{cpus} CPUs: expected one phase, got {}", r.phases.len());
    };
    let t = p.trace.context("the phase was not traced")?;
    if cpus > 1 && p.cpus.len() != cpus as usize {
        bail!(
            "{cpus} CPUs: the phase was counted on {} CPUs",
            p.cpus.len()
        );
    }
    let hz = r.boot.context("no boot record")?.counter_hz;
    let ticks = p.end_ts.context("the phase did not end")? - p.begin_ts;
    // One instruction per nanosecond under -icount shift=0.
    let machine = (ticks as u128 * 1_000_000_000 / hz as u128) as u64;
    let traced = t.instructions_el1 + t.instructions_el0;
    if p.lock_waits.len() != cpus as usize {
        bail!(
            "{cpus} CPUs: the phase has {} CPUs' lock waits",
            p.lock_waits.len()
        );
    }
    let waited: u64 = p.lock_waits.iter().map(|l| l.ticks).sum();
    let lock_wait = waited as f64 / (ticks.max(1) as f64 * cpus as f64);
    let pmu = (cpus == 1)
        .then(|| p.stats.and_then(|s| s.el2_instructions))
        .flatten()
        .map(|el2| el2 as f64 / traced.max(1) as f64);
    Ok(CpuCost {
        cpus,
        traced,
        machine,
        el2_per_traced: machine.saturating_sub(traced) as f64 / traced.max(1) as f64,
        el2_per_traced_pmu: pmu,
        checked_rd_k: t.architectural.rd_k,
        lock_wait,
        wall: b.wall,
    })
}

pub fn render(costs: &[CpuCost], iters: u64) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "bench cpus: the guest kernel's futex-hash ({iters} iterations on each CPU, entry-tco), \
         traced, under -icount shift=0"
    );
    let _ = writeln!(
        s,
        "  {:>4}  {:>12}  {:>12}  {:>16}  {:>8}  {:>12}  {:>10}  {:>8}",
        "CPUs", "traced", "machine", "EL2 per traced", "(PMU)", "checked rd:k", "lock wait", "wall"
    );
    for c in costs {
        let pmu = c
            .el2_per_traced_pmu
            .map_or_else(|| "-".to_string(), |v| format!("{v:.1}"));
        let _ = writeln!(
            s,
            "  {:>4}  {:>12}  {:>12}  {:>16.1}  {:>8}  {:>12}  {:>9.1}%  {:>7.2}s",
            c.cpus,
            c.traced,
            c.machine,
            c.el2_per_traced,
            pmu,
            c.checked_rd_k,
            100.0 * c.lock_wait,
            c.wall.as_secs_f64()
        );
    }
    let _ = writeln!(
        s,
        "  machine: instructions every CPU executed in the phase, from its span on the clock; \
         EL2 per traced: (machine - traced) / traced, all CPUs' EL2 work; (PMU): the same from \
         the one CPU's PMU, where there is one CPU; lock wait: the part of the phase's span a \
         CPU spent at EL2 waiting for the hypervisor's lock while another held it, the mean \
         over its CPUs"
    );
    s
}
