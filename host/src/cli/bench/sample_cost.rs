//! What a Linux window sampled on every CPU costs, against the same program unmeasured, in one
//! run of the bench: three boots of one kernel with the same CPUs and QEMU's options
//! (`-icount shift=0`), each timed on the wall clock from QEMU's start to its end:
//!
//! 1. the boot alone: a window around `true`;
//! 2. the program unmeasured: run by `--setup`, outside every window, then the same window
//!    around `true`;
//! 3. the program measured: in a window sampled at the schedule given.
//!
//! The program's wall time is (2) less (1) unmeasured and (3) less (1) measured; their ratio is
//! what measuring it costs. On QEMU the sampled boot also loads the `mtex-oracle` plugin to
//! count each CPU's instructions (QEMU's PMU counts every vCPU's): its cost is the
//! measurement's, so it is in the ratio.

use crate::linux::{self, Args};
use crate::model::report::Phase;
use anyhow::{Result, bail};
use std::path::Path;
use std::time::Duration;

/// The counters whose precision the bench gives.
const PRECISION: [&str; 2] = ["mem_access_checked_rd:k", "mem_access_checked_rd:u"];

/// What the bench measured.
pub struct CostFigures {
    pub cpus: u32,
    pub command: String,
    pub schedule: (u32, u32),
    pub boot: Duration,
    pub unmeasured: Duration,
    pub sampled: Duration,
    /// The sampled window's instructions (EL0 + EL1, every CPU's) and units.
    pub instructions: u64,
    pub units: u64,
    /// Each of [`PRECISION`]: the estimate and its 95% interval's half width, if it has one.
    pub precision: Vec<(&'static str, f64, Option<f64>)>,
}

impl CostFigures {
    /// The program's wall time measured over unmeasured.
    pub fn ratio(&self) -> f64 {
        let over = |d: Duration| d.saturating_sub(self.boot).as_secs_f64();
        over(self.sampled) / over(self.unmeasured).max(1e-3)
    }
}

/// The user's options for all three boots: the kernel, CPUs, user space and environment.
pub struct Given<'a> {
    pub base: &'a [String],
    pub cpus: u32,
    pub command: &'a str,
    pub schedule: (u32, u32),
}

fn args(g: &Given, out: &Path, extra: &[&str]) -> Result<Args> {
    use clap::Parser;
    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }
    let mut words: Vec<String> = vec!["linux".into(), "--cpus".into(), g.cpus.to_string()];
    words.extend(g.base.iter().cloned());
    words.extend(extra.iter().map(|s| s.to_string()));
    words.extend(["--out".into(), out.display().to_string()]);
    Ok(Cli::try_parse_from(words)?.args)
}

/// One boot, timed; its window 1, which must have closed with no problem.
fn boot(a: &Args, what: &str) -> Result<(Phase, Duration)> {
    eprintln!("mtex: bench sample --cost: {what}");
    let p = linux::prepare(a)?;
    // The kernel's symbols, read once (a boot of their own the first time), outside the time.
    linux::symbols(a, &p)?;
    super::sample_linux::window(a, &p, what)
}

/// Runs the three boots.
pub fn cost(g: &Given, out: &Path) -> Result<CostFigures> {
    let (_, boot_wall) = boot(&args(g, out, &["--run", "true"])?, "the boot alone")?;
    let (_, unmeasured) = boot(
        &args(g, out, &["--setup", g.command, "--run", "true"])?,
        "the program unmeasured",
    )?;
    let schedule = format!("{}:{}", g.schedule.0, g.schedule.1);
    let (w, sampled) = boot(
        &args(g, out, &["--run", g.command, "--sample", &schedule])?,
        "the program sampled",
    )?;
    let problems = crate::model::report::sampled::problems(&w, true);
    if !problems.is_empty() {
        bail!("the sampled window: {}", problems.join("; "));
    }
    let [el0, el1] = crate::model::report::sampled::population(&w, true).unwrap_or([0, 0]);
    let estimates = crate::model::report::sampled::estimates(&w, true);
    let precision = PRECISION
        .iter()
        .map(|name| {
            let e = estimates.iter().find(|(c, _)| c.name == *name);
            match e {
                Some((_, e)) => (
                    *name,
                    e.value,
                    e.half_width.is_finite().then_some(e.half_width),
                ),
                None => (*name, 0.0, None),
            }
        })
        .collect();
    Ok(CostFigures {
        cpus: g.cpus,
        command: g.command.to_string(),
        schedule: g.schedule,
        boot: boot_wall,
        unmeasured,
        sampled,
        instructions: el0 + el1,
        units: w.sampled.as_ref().map_or(0, |s| s.units().count() as u64),
        precision,
    })
}

/// The figures as text.
pub fn render(f: &CostFigures) -> String {
    let mut out = format!(
        "bench sample --cost: `{}` on {} CPU{}, sampled at {}:{} (units of {} instructions, gaps of \
         0 to {} µs), QEMU wall time:\n",
        f.command,
        f.cpus,
        if f.cpus == 1 { "" } else { "s" },
        f.schedule.0,
        f.schedule.1,
        f.schedule.0,
        2 * f.schedule.1
    );
    let s = |d: Duration| d.as_secs_f64();
    out.push_str(&format!(
        "  the boot alone {:.1} s; with the program unmeasured {:.1} s; with it sampled {:.1} s\n",
        s(f.boot),
        s(f.unmeasured),
        s(f.sampled)
    ));
    out.push_str(&format!(
        "  the program: {:.1} s unmeasured, {:.1} s sampled: {:.2}x ({} instructions, {} units)\n",
        s(f.unmeasured.saturating_sub(f.boot)),
        s(f.sampled.saturating_sub(f.boot)),
        f.ratio(),
        crate::output::text::thousands(f.instructions),
        f.units
    ));
    for (name, value, half) in &f.precision {
        out.push_str(&match half {
            Some(h) if *value > 0.0 => format!(
                "  {name}: {} ± {}\n",
                crate::output::text::thousands(value.round() as u64),
                crate::model::sample::percent(h / value)
            ),
            _ => format!("  {name}: ~{} (no interval)\n", value.round()),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ratio_is_of_the_programs_time_with_the_boot_taken_out() {
        let f = CostFigures {
            cpus: 8,
            command: "perf bench futex hash -r 1 -t 8".into(),
            schedule: (1000, 300),
            boot: Duration::from_secs(30),
            unmeasured: Duration::from_secs(50),
            sampled: Duration::from_secs(90),
            instructions: 1_000_000_000,
            units: 5000,
            precision: vec![
                ("mem_access_checked_rd:k", 1000.0, Some(10.0)),
                ("mem_access_checked_rd:u", 5.0, None),
            ],
        };
        assert_eq!(f.ratio(), 3.0);
        let text = render(&f);
        assert!(
            text.contains("20.0 s unmeasured, 60.0 s sampled: 3.00x"),
            "{text}"
        );
        assert!(
            text.contains("mem_access_checked_rd:k: 1,000 ± 1"),
            "{text}"
        );
        assert!(
            text.contains("mem_access_checked_rd:u: ~5 (no interval)"),
            "{text}"
        );
    }
}
