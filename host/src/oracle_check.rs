//! The oracle's check of each traced phase (a Linux window, a built-in guest's phase): the
//! counts the `mtex-oracle` QEMU plugin made from QEMU's own hooks (`oracle/`), against the
//! trace's, per EL, in the trace's unit. They must be equal; each difference is a problem of
//! the run. [`apply`] does it to a parsed report when the run had the plugin (`--oracle`).
//!
//! The rules applied here: the plugin counts instructions that *began*, the trace those that
//! completed plus, apart, those abandoned for an exception taken on them (`abandoned_el*`);
//! and the trace's count includes the direct branches the hypervisor executed for the guest
//! at the end of a run, which the CPU never executed (`StepEngine::branches_el*`). The plugin's own rules (QEMU's step stub, uninstrumented tag
//! instructions, store-exclusives) are in `oracle/src/count.rs`.
//!
//! One case is not exact: an access whose tag check failed is counted by the trace (it was
//! made and checked) but QEMU makes it no callback; a window with such faults says so rather
//! than claiming its reads and writes agree (its instructions are still held to equality).
//! So does a window with loads and stores the trace's decoder does not model (SVE): their
//! accesses are not in the trace's counts (a problem of its own).

use crate::model::report::Report;
use mtex_abi::oracle::OracleWindow;
use mtex_trace::counts::ByEl;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// One figure, by the trace and by the oracle.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Figure {
    /// `instructions begun`, `reads` or `writes`.
    pub what: String,
    pub el: u8,
    pub trace: u64,
    pub oracle: u64,
}

/// A window's check.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Check {
    pub figures: Vec<Figure>,
    /// QEMU step stubs the oracle left out (see `oracle/src/count.rs`).
    pub step_stubs: u64,
    /// Why the reads and writes cannot be expected equal (tag-check faults), if so.
    pub inexact: Option<String>,
}

impl Check {
    pub fn agrees(&self) -> bool {
        self.figures.iter().all(|f| f.trace == f.oracle)
    }

    /// The differences that are problems, as text: all of them, or with `inexact` the
    /// instructions'.
    pub fn problems(&self) -> Vec<String> {
        let exact = self.inexact.is_none();
        self.figures
            .iter()
            .filter(|f| f.trace != f.oracle && (exact || f.what == INSTRUCTIONS))
            .map(|f| {
                format!(
                    "{} at EL{}: trace {}, oracle {}",
                    f.what, f.el, f.trace, f.oracle
                )
            })
            .collect()
    }
}

const INSTRUCTIONS: &str = "instructions begun";

/// What the trace counted in a window, as the check needs it.
pub struct TraceSide {
    pub instructions: [u64; 2],
    pub abandoned: [u64; 2],
    /// Branches the hypervisor executed for the guest (in `instructions`).
    pub hyp_branches: [u64; 2],
    /// Every data access (the trace's `accesses`).
    pub accesses: ByEl,
    pub tag_check_faults: u64,
    /// Load/store instructions the decoder does not model (`unknown_mem`).
    pub unknown_mem: u64,
}

/// Compares one window.
pub fn check(t: &TraceSide, o: &OracleWindow) -> Check {
    let mut figures = Vec::new();
    for el in 0..2u8 {
        let e = el as usize;
        let (rd, wr) = if el == 0 {
            (t.accesses.rd_u, t.accesses.wr_u)
        } else {
            (t.accesses.rd_k, t.accesses.wr_k)
        };
        figures.push(Figure {
            what: INSTRUCTIONS.into(),
            el,
            trace: (t.instructions[e] + t.abandoned[e]).saturating_sub(t.hyp_branches[e]),
            oracle: o.instructions[e],
        });
        figures.push(Figure {
            what: "reads".into(),
            el,
            trace: rd,
            oracle: o.reads[e],
        });
        figures.push(Figure {
            what: "writes".into(),
            el,
            trace: wr,
            oracle: o.writes[e],
        });
    }
    Check {
        figures,
        step_stubs: o.step_stubs,
        inexact: match (t.tag_check_faults, t.unknown_mem) {
            (0, 0) => None,
            (faults, 0) => Some(format!(
                "{faults} access(es) took a tag-check fault: the trace counts them, QEMU's hooks do not"
            )),
            (_, unknown) => Some(format!(
                "{unknown} load/store instruction(s) the decoder does not model: their accesses are not in the trace's counts"
            )),
        },
    }
}

/// A run with the oracle: the plugin, and the file it writes when QEMU exits.
#[derive(Clone, Debug)]
pub struct OracleRun {
    pub plugin: PathBuf,
    pub out: PathBuf,
    /// Only each CPU's sampled share of a window on several CPUs is counted (`shares=on`):
    /// what the shares' totals rest on on an emulator ([`apply_shares`]), no check.
    pub shares: bool,
}

impl OracleRun {
    /// QEMU's `-plugin` argument. MTEX_ORACLE_DETAIL=1: the plugin also lists, by instruction
    /// word, how many ran in windows and how many read and wrote, to find what a disagreement
    /// is about. `hyp`: where the hypervisor's code is (start, end), when known: the plugin
    /// hooks no instruction there (the guest's are all it counts; a guest instruction at
    /// those addresses would go uncounted and disagree with the trace).
    pub fn qemu_arg(&self, hyp: Option<(u64, u64)>) -> String {
        let detail = std::env::var_os("MTEX_ORACLE_DETAIL").is_some();
        format!(
            "{},out={}{}{}{}",
            self.plugin.display(),
            self.out.display(),
            if detail { ",detail=on" } else { "" },
            if self.shares { ",shares=on" } else { "" },
            hyp.map_or(String::new(), |(s, e)| format!(
                ",hyp_start={s},hyp_end={e}"
            ))
        )
    }
}

/// Checks every traced phase of `r` against the oracle's output `text` (the same order: both
/// are chronological): each phase gets its [`Check`]; every difference, missing window and
/// anomaly is one of `r`'s problems.
///
/// A window that every CPU counted is one oracle window per CPU that joined it (their opens
/// follow each other, and come before the next window's: the hypervisor never lets windows
/// overlap): each is checked against that CPU's share, and their sum against the total.
pub fn apply(r: &mut Report, text: &str) {
    let (seen, anomalies) = parse(text);
    let mut problems: Vec<String> = anomalies
        .into_iter()
        .map(|a| format!("oracle: {a}"))
        .collect();
    let mut groups = group_by_window(&seen);
    let engines = r.engines.clone();
    // A sampled phase's stretches (its units and their leads) are a window each to the
    // oracle, in order: checked together against the stretches' sum.
    let mut at = 0;
    let mut whole = Vec::new();
    for p in r.phases.iter() {
        if p.trace.is_some() {
            whole.push(groups.get(at).cloned());
            at += 1;
        } else if let Some(s) = p.sampled.as_ref().filter(|s| !s.stretches.is_empty()) {
            let n = s.stretches.len();
            let mine: Vec<OracleWindow> =
                groups.iter().skip(at).take(n).flatten().copied().collect();
            whole.push((!mine.is_empty()).then_some(mine));
            at += n;
        }
    }
    let sampled_ids: Vec<u32> = r
        .phases
        .iter()
        .filter(|p| {
            p.trace.is_none() && p.sampled.as_ref().is_some_and(|s| !s.stretches.is_empty())
        })
        .map(|p| p.id)
        .collect();
    if groups.len() != at {
        problems.push(format!(
            "oracle: it saw {} traced window(s), the trace {at}",
            groups.len()
        ));
    }
    groups = whole.into_iter().flatten().collect();
    let traced: Vec<_> = r
        .phases
        .iter_mut()
        .filter(|p| p.trace.is_some() || sampled_ids.contains(&p.id))
        .collect();
    for (p, group) in traced.into_iter().zip(&groups) {
        let name = format!("phase {} ({})", p.id, p.name);
        if group[0].id != p.id as u64 {
            problems.push(format!(
                "oracle: window {} where the trace has {name}",
                group[0].id
            ));
            continue;
        }
        if group.iter().any(|w| w.id != p.id as u64) {
            problems.push(format!("oracle: another window among those of {name}"));
            continue;
        }
        if let Some(s) = &p.sampled
            && p.trace.is_none()
        {
            let Some(how) = s.how else { continue };
            let Some(t) = crate::model::report::sampled::traced_sum(p) else {
                continue;
            };
            let c = check(
                &TraceSide {
                    instructions: [t.instructions_el0, t.instructions_el1],
                    abandoned: [t.abandoned_el0, t.abandoned_el1],
                    hyp_branches: [how.engine.branches_el0, how.engine.branches_el1],
                    accesses: t.accesses,
                    tag_check_faults: t.tag_check_faults,
                    unknown_mem: t.unknown_mem,
                },
                &sum_windows(group),
            );
            for d in c.problems() {
                problems.push(format!(
                    "{name}: over its sampled units and their leads, the oracle disagrees: {d}"
                ));
            }
            p.oracle = Some(c);
            continue;
        }
        let Some(t) = &p.trace else { continue };
        let expected = p.cpus.len().max(1);
        if group.len() != expected {
            problems.push(format!(
                "{name}: the oracle saw it on {} CPU(s), the trace on {expected}",
                group.len()
            ));
        }
        let engine = engines.iter().rev().find(|e| e.id == p.id);
        let total = sum_windows(group);
        let c = check(
            &TraceSide {
                instructions: [t.instructions_el0, t.instructions_el1],
                abandoned: [t.abandoned_el0, t.abandoned_el1],
                hyp_branches: engine.map_or([0, 0], |e| [e.branches_el0, e.branches_el1]),
                accesses: t.accesses,
                tag_check_faults: t.tag_check_faults,
                unknown_mem: t.unknown_mem,
            },
            &total,
        );
        for d in c.problems() {
            problems.push(format!("{name}: the oracle disagrees: {d}"));
        }
        p.oracle = Some(c);
        p.cpu_oracle.clear();
        for share in &p.cpus {
            let Some(o) = group.iter().find(|o| o.cpu == share.cpu) else {
                problems.push(format!(
                    "{name}: the oracle has no window on CPU {}",
                    share.cpu
                ));
                continue;
            };
            let c = check(
                &TraceSide {
                    instructions: share.instructions,
                    abandoned: share.abandoned,
                    hyp_branches: share.hyp_branches,
                    accesses: share.accesses,
                    tag_check_faults: share.tag_check_faults,
                    unknown_mem: share.unknown_mem,
                },
                o,
            );
            for d in c.problems() {
                problems.push(format!(
                    "{name}: on CPU {} the oracle disagrees: {d}",
                    share.cpu
                ));
            }
            p.cpu_oracle.push((share.cpu, c));
        }
    }
    r.problems.extend(problems);
}

/// The oracle's windows, grouped: consecutive windows with one id are one traced phase (one
/// per CPU that counted it).
pub fn group_by_window(seen: &[OracleWindow]) -> Vec<Vec<OracleWindow>> {
    let mut groups: Vec<Vec<OracleWindow>> = Vec::new();
    for w in seen {
        match groups.last_mut() {
            Some(g) if g[0].id == w.id && !g.iter().any(|o| o.cpu == w.cpu) => g.push(*w),
            _ => groups.push(vec![*w]),
        }
    }
    groups
}

/// A window's oracle counts over every CPU: closed only if each was.
fn sum_windows(group: &[OracleWindow]) -> OracleWindow {
    let mut t = OracleWindow {
        id: group[0].id,
        cpu: group[0].cpu,
        closed: true,
        ..OracleWindow::default()
    };
    for w in group {
        t.closed &= w.closed;
        for e in 0..2 {
            t.instructions[e] += w.instructions[e];
            t.reads[e] += w.reads[e];
            t.writes[e] += w.writes[e];
        }
        t.step_stubs += w.step_stubs;
    }
    t
}

/// The plugin's output file: its windows, and its anomaly lines.
/// Gives each window sampled on several CPUs the plugin's count of each CPU's share (its
/// `share` lines, `shares=on`), on which those shares' totals rest on an emulator
/// (`model::report::sampled::share_population`). The plugin's anomalies are problems; a
/// share it did not count is named by the estimates' own problems.
pub fn apply_shares(r: &mut Report, text: &str) {
    let counted: Vec<mtex_abi::oracle::OracleShare> = text
        .lines()
        .filter_map(mtex_abi::oracle::OracleShare::parse_line)
        .collect();
    let (_, anomalies) = parse(text);
    r.problems.extend(
        anomalies
            .into_iter()
            .map(|a| format!("QEMU plugin counting each CPU's share: {a}")),
    );
    // The report's problems were judged as it was parsed, without these counts: each such
    // phase's are judged again.
    use crate::model::report::sampled;
    for p in r.phases.iter_mut() {
        if p.sampled.as_ref().is_none_or(|s| s.shares.is_empty()) {
            continue;
        }
        let before = sampled::problems(p, true);
        if let Some(s) = p.sampled.as_mut() {
            s.counted = counted
                .iter()
                .filter(|c| c.id == u64::from(p.id))
                .copied()
                .collect();
        }
        r.problems.retain(|q| !before.contains(q));
        r.problems.extend(sampled::problems(p, true));
    }
}

pub fn parse(text: &str) -> (Vec<OracleWindow>, Vec<String>) {
    let windows = text.lines().filter_map(OracleWindow::parse_line).collect();
    let anomalies = text
        .lines()
        .filter_map(|l| l.strip_prefix("anomaly "))
        .map(str::to_string)
        .collect();
    (windows, anomalies)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn side() -> TraceSide {
        TraceSide {
            instructions: [100, 1000],
            abandoned: [1, 2],
            hyp_branches: [3, 4],
            accesses: ByEl {
                rd_u: 10,
                rd_k: 300,
                wr_u: 5,
                wr_k: 200,
            },
            tag_check_faults: 0,
            unknown_mem: 0,
        }
    }

    fn agreeing() -> OracleWindow {
        OracleWindow {
            id: 1,
            cpu: 0,
            closed: true,
            instructions: [98, 998],
            reads: [10, 300],
            writes: [5, 200],
            step_stubs: 4,
        }
    }

    #[test]
    fn equal_counts_agree_with_abandoned_instructions_added_and_hyp_branches_taken_out() {
        let c = check(&side(), &agreeing());
        assert!(c.agrees(), "{:?}", c.problems());
        assert_eq!(c.figures.len(), 6);
        assert_eq!(c.step_stubs, 4);
        assert!(c.inexact.is_none());
    }

    #[test]
    fn each_figure_that_differs_is_named() {
        let mut o = agreeing();
        o.reads[1] += 1;
        o.instructions[0] -= 1;
        let c = check(&side(), &o);
        assert!(!c.agrees());
        assert_eq!(
            c.problems(),
            [
                "instructions begun at EL0: trace 98, oracle 97",
                "reads at EL1: trace 300, oracle 301"
            ]
        );
    }

    #[test]
    fn tag_check_faults_make_accesses_inexact_but_not_instructions() {
        let t = TraceSide {
            tag_check_faults: 2,
            ..side()
        };
        let mut o = agreeing();
        o.reads[0] -= 2;
        let c = check(&t, &o);
        assert!(c.inexact.is_some());
        assert!(c.problems().is_empty(), "{:?}", c.problems());
        let unknown = TraceSide {
            unknown_mem: 1,
            ..side()
        };
        assert!(check(&unknown, &o).inexact.is_some());
        o.instructions[1] += 1;
        assert_eq!(
            check(&t, &o).problems(),
            ["instructions begun at EL1: trace 998, oracle 999"]
        );
    }

    #[test]
    fn parses_windows_and_anomalies() {
        let (w, a) =
            parse("window 1 0 closed 98 998 10 300 5 200 4\nanomaly window 2 closed, none open\n");
        assert_eq!(w, [agreeing()]);
        assert_eq!(a, ["window 2 closed, none open"]);
    }

    #[test]
    fn a_window_on_several_cpus_is_one_group_and_sums_them() {
        let w = |id, cpu, n| OracleWindow {
            id,
            cpu,
            closed: true,
            instructions: [n, 10 * n],
            ..OracleWindow::default()
        };
        // Window 1 on CPUs 0 and 2, window 1 again (a new phase) on CPU 0, window 2 on 1.
        let seen = [w(1, 0, 1), w(1, 2, 2), w(1, 0, 3), w(2, 1, 4)];
        let g = group_by_window(&seen);
        assert_eq!(g.len(), 3);
        assert_eq!(g[0].len(), 2);
        let t = sum_windows(&g[0]);
        assert_eq!((t.instructions, t.closed), ([3, 30], true));
        let open = [
            w(1, 0, 1),
            OracleWindow {
                closed: false,
                ..w(1, 1, 1)
            },
        ];
        assert!(!sum_windows(&open).closed);
    }

    #[test]
    fn the_plugins_count_of_each_share_reaches_its_window_and_its_problems_are_judged_again() {
        use crate::model::report::{Phase, Sampled, sampled};
        use mtex_abi::report::{CpuSampled, PhaseSampled};
        let how = PhaseSampled {
            id: 4,
            units: 40,
            ..PhaseSampled::default()
        };
        let share = |cpu| CpuSampled {
            id: 4,
            cpu,
            sampled: how,
            ..CpuSampled::default()
        };
        let phase = |id, shares| Phase {
            id,
            end: Some(Default::default()),
            sampled: Some(Sampled {
                how: Some(PhaseSampled { id, ..how }),
                shares,
                ..Sampled::default()
            }),
            ..Phase::default()
        };
        let mut r = Report::default();
        r.phases = vec![phase(3, Vec::new()), phase(4, vec![share(0), share(1)])];
        r.problems = sampled::problems(&r.phases[1], true);
        r.problems.push("another problem".into());
        assert!(r.problems.len() == 3, "{:?}", r.problems);
        apply_shares(
            &mut r,
            "share 3 0 closed 0 5 0\nshare 4 0 closed 10 20 1\nshare 4 1 closed 30 40 0\n\
             anomaly CPU 1: share 9 closed, never opened\n",
        );
        let counted = &r.phases[1].sampled.as_ref().unwrap().counted;
        assert_eq!(
            counted
                .iter()
                .map(|c| (c.cpu, c.instructions))
                .collect::<Vec<_>>(),
            [(0, [10, 20]), (1, [30, 40])]
        );
        assert!(r.phases[0].sampled.as_ref().unwrap().counted.is_empty());
        assert_eq!(
            r.problems,
            [
                "another problem".to_string(),
                "QEMU plugin counting each CPU's share: CPU 1: share 9 closed, never opened"
                    .to_string()
            ]
        );
    }
}
