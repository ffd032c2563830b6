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

use crate::report::Report;
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
}

impl OracleRun {
    /// QEMU's `-plugin` argument. MTEX_ORACLE_DETAIL=1: the plugin also lists, by instruction
    /// word, how many ran in windows and how many read and wrote, to find what a disagreement
    /// is about.
    pub fn qemu_arg(&self) -> String {
        let detail = std::env::var_os("MTEX_ORACLE_DETAIL").is_some();
        format!(
            "{},out={}{}",
            self.plugin.display(),
            self.out.display(),
            if detail { ",detail=on" } else { "" }
        )
    }
}

/// Checks every traced phase of `r` against the oracle's output `text` (the same order: both
/// are chronological): each phase gets its [`Check`]; every difference, missing window and
/// anomaly is one of `r`'s problems.
pub fn apply(r: &mut Report, text: &str) {
    let (seen, anomalies) = parse(text);
    let mut problems: Vec<String> = anomalies
        .into_iter()
        .map(|a| format!("oracle: {a}"))
        .collect();
    let engines = r.engines.clone();
    let traced: Vec<_> = r.phases.iter_mut().filter(|p| p.trace.is_some()).collect();
    if seen.len() != traced.len() {
        problems.push(format!(
            "oracle: it saw {} traced phase(s), the trace {}",
            seen.len(),
            traced.len()
        ));
    }
    for (p, o) in traced.into_iter().zip(&seen) {
        let name = format!("phase {} ({})", p.id, p.name);
        if o.id != p.id as u64 {
            problems.push(format!(
                "oracle: window {} where the trace has {name}",
                o.id
            ));
            continue;
        }
        let Some(t) = &p.trace else { continue };
        let engine = engines.iter().rev().find(|e| e.id == p.id);
        let c = check(
            &TraceSide {
                instructions: [t.instructions_el0, t.instructions_el1],
                abandoned: [t.abandoned_el0, t.abandoned_el1],
                hyp_branches: engine.map_or([0, 0], |e| [e.branches_el0, e.branches_el1]),
                accesses: t.accesses,
                tag_check_faults: t.tag_check_faults,
                unknown_mem: t.unknown_mem,
            },
            o,
        );
        for d in c.problems() {
            problems.push(format!("{name}: the oracle disagrees: {d}"));
        }
        p.oracle = Some(c);
    }
    r.problems.extend(problems);
}

/// The plugin's output file: its windows, and its anomaly lines.
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
            parse("window 1 closed 98 998 10 300 5 200 4\nanomaly window 2 closed, none open\n");
        assert_eq!(w, [agreeing()]);
        assert_eq!(a, ["window 2 closed, none open"]);
    }
}
