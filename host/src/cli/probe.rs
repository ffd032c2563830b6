//! `mtex probe`: boots the fixed guest program `probe` (guest/src/probe.rs) and says what
//! this CPU does with MTE: for each cell (EL × TCF × TCO × TCMA × pointer tag × page), whether
//! its load and its store were tag checked, judged against the trace counter's predicate
//! (`mtex_trace::predicate`, the architectural and the TCF-elided view); and what a TCO
//! write, a TFSR_EL1 read with its barriers, an STG, an ST2G and a DC GZVA cost in cycles.
//!
//! An access is seen checked or unchecked through the PMU (MEM_ACCESS_CHECKED_RD/_WR at the
//! cell's EL) where the CPU has those events; else, where TCF is not NONE, through its
//! tag-check fault (the granule's allocation tag matches neither pointer tag, so every
//! checked access fails its check); else it is unknown. The MTE threads' open question — does the
//! CPU check kernel accesses with TCF = NONE? — is only answered by the PMU.
//!
//! The guest's console protocol, one line per cell after its phase (named as the cell):
//!
//! ```text
//! probe: cell el1/sync/tco0/tcma1/mm/tagged rd=sync wr=sync sctlr=0x… tcr=0x… ptr=0x…
//! probe: cell el0/asymm/tco0/tcma0/ma/tagged skipped (no FEAT_MTE3)
//! probe: cost tco-write n=1000 ops=2000
//! probe: cost dc-gzva skipped (DCZID_EL0.DZP: DC GZVA prohibited)
//! probe: done
//! ```
//!
//! A cell is `el<0|1>/<tcf>/tco<0|1>/tcma<0|1>/<ma|mm>/<tagged|untagged>`: `ma` a match-all
//! pointer tag (0xF for EL1's TTBR1 address, 0x0 for EL0's TTBR0 address), `mm` a
//! mismatching one. rd/wr: `none`, `sync` or `async`. A cost phase is `cost/<what>`; its
//! cost per operation is (EL1 cycles − EL1 cycles of `cost/baseline`) / ops.

use crate::images;
use crate::model::report::{self, Report};
use crate::qemu::{self, RunConfig};
use anyhow::Result;
use mtex_abi::report::{PmuValue, pmu_event};
use mtex_abi::scenario::Tcf;
use mtex_trace::predicate::{Access, Controls, MteFeatures, elides, is_tag_checked};
use serde::Serialize;
use std::path::PathBuf;
use std::process::ExitCode;

mod render;
#[cfg(test)]
mod tests;

pub use render::render;

/// The first line's question, which the arm64 MTE patch threads left open.
pub const QUESTION: &str =
    "Are kernel (EL1) accesses tag-checked with TCF=NONE? (AmpereOne: yes, Pixel 9: no)";

/// `mtex probe`'s command-line arguments.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Also write the verdicts (cells, answer, costs, problems) as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Judge a saved console log of the probe (`--guest probe` on a server, through `mtex
    /// esp`) instead of booting QEMU.
    #[arg(long, value_name = "FILE")]
    pub from_log: Option<PathBuf>,
    /// Print the raw console too.
    #[arg(long)]
    pub raw: bool,
}

/// One cell of the matrix.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Cell {
    /// The guest's spelling, also its phase's name: `el1/sync/tco0/tcma1/mm/tagged`.
    pub name: String,
    pub el: u8,
    /// SCTLR_EL1.TCF for EL1, TCF0 for EL0.
    pub tcf: Tcf,
    pub tco: bool,
    /// TCR_EL1.TCMA1 for EL1 (TTBR1 pointers), TCMA0 for EL0 (TTBR0 pointers).
    pub tcma: bool,
    /// The pointer tag is match-all (0xF in TTBR1, 0x0 in TTBR0); else mismatching.
    pub match_all: bool,
    /// The page is Tagged Normal (MAIR 0xF0); else Normal without the Tagged attribute.
    pub tagged_page: bool,
}

impl Cell {
    fn new(el: u8, tcf: Tcf, tco: bool, tcma: bool, match_all: bool, tagged_page: bool) -> Self {
        let name = format!(
            "el{el}/{}/tco{}/tcma{}/{}/{}",
            tcf.name(),
            tco as u8,
            tcma as u8,
            if match_all { "ma" } else { "mm" },
            if tagged_page { "tagged" } else { "untagged" }
        );
        Cell {
            name,
            el,
            tcf,
            tco,
            tcma,
            match_all,
            tagged_page,
        }
    }

    /// Every cell, in the guest's order: 2 × 4 × 2 × 2 × 2 × 2 = 128.
    pub fn all() -> Vec<Cell> {
        let mut v = Vec::new();
        for el in [1, 0] {
            for (_, tcf) in Tcf::ALL {
                for tcma in [false, true] {
                    for tco in [false, true] {
                        for match_all in [true, false] {
                            for tagged in [true, false] {
                                v.push(Cell::new(el, tcf, tco, tcma, match_all, tagged));
                            }
                        }
                    }
                }
            }
        }
        v
    }

    /// The cell a name spells, if it spells one.
    pub fn parse(name: &str) -> Option<Cell> {
        let [el, tcf, tco, tcma, ptr, page] = name.split('/').collect::<Vec<_>>()[..] else {
            return None;
        };
        let bit = |s: &str, key: &str| match s.strip_prefix(key)? {
            "0" => Some(false),
            "1" => Some(true),
            _ => None,
        };
        let el = match el {
            "el0" => 0,
            "el1" => 1,
            _ => return None,
        };
        let tcf = Tcf::ALL.iter().find(|(n, _)| *n == tcf)?.1;
        let match_all = match ptr {
            "ma" => true,
            "mm" => false,
            _ => return None,
        };
        let tagged = match page {
            "tagged" => true,
            "untagged" => false,
            _ => return None,
        };
        Some(Cell::new(
            el,
            tcf,
            bit(tco, "tco")?,
            bit(tcma, "tcma")?,
            match_all,
            tagged,
        ))
    }
}

/// What an access did, as the guest saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Fault {
    None,
    /// A synchronous Data Abort, DFSC 0b010001.
    Sync,
    /// TFSR_EL1 (EL1) or TFSRE0_EL1 (EL0) recorded it.
    Async,
}

impl Fault {
    fn parse(s: &str) -> Option<Fault> {
        Some(match s {
            "none" => Fault::None,
            "sync" => Fault::Sync,
            "async" => Fault::Async,
            _ => return None,
        })
    }
}

/// A cell as the guest ran it: its faults, and the controls and pointer of its accesses.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Measured {
    pub cell: Cell,
    pub rd: Fault,
    pub wr: Fault,
    pub sctlr_el1: u64,
    pub tcr_el1: u64,
    pub ptr: u64,
}

/// How an access was seen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Seen {
    /// MEM_ACCESS_CHECKED_RD or _WR at the cell's EL counted this many (the phase holds
    /// only the cell's two accesses at that EL).
    Pmu(u64),
    /// No PMU figure, TCF ≠ NONE: the fault (or its absence) says.
    Fault(Fault),
    /// TCF = NONE and the CPU has no MTE PMU events.
    NoEvents,
    /// TCF = NONE and the PMU figure was withheld (the counters were disturbed).
    Withheld,
}

impl Seen {
    /// Checked (Some(true)), unchecked (Some(false)), or not observable.
    pub fn checked(self) -> Option<bool> {
        match self {
            Seen::Pmu(n) => Some(n > 0),
            Seen::Fault(f) => Some(f != Fault::None),
            Seen::NoEvents | Seen::Withheld => None,
        }
    }

    /// The table's short form (the legend under it says the rest).
    pub fn short(self) -> &'static str {
        match self {
            Seen::Pmu(0) => "no (PMU)",
            Seen::Pmu(_) => "yes (PMU)",
            Seen::Fault(Fault::Sync) => "yes (sync)",
            Seen::Fault(Fault::Async) => "yes (async)",
            Seen::Fault(Fault::None) => "no (no fault)",
            Seen::NoEvents => "unknown",
            Seen::Withheld => "withheld",
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            Seen::Pmu(0) => "unchecked (PMU)",
            Seen::Pmu(_) => "checked (PMU)",
            Seen::Fault(Fault::Sync) => "checked (sync fault)",
            Seen::Fault(Fault::Async) => "checked (async, TFSR)",
            Seen::Fault(Fault::None) => "unchecked (no fault)",
            Seen::NoEvents => "unknown (no MTE PMU events)",
            Seen::Withheld => "unknown (PMU withheld)",
        }
    }
}

/// One access of a cell: what was seen, and what the predicate says.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct AccessVerdict {
    pub seen: Seen,
    pub fault: Fault,
    /// `is_tag_checked`: the architecture (TCF is no term; AmpereOne-like).
    pub architectural: bool,
    /// `elides`: checked only where TCF ≠ NONE (Arm cores, QEMU).
    pub tcf_elided: bool,
    /// Why what was seen contradicts the predicate or the architecture, if it does.
    pub contradiction: Option<String>,
}

/// A cell's load and store.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CellVerdict {
    pub measured: Measured,
    pub rd: AccessVerdict,
    pub wr: AccessVerdict,
}

impl CellVerdict {
    pub fn contradicts(&self) -> bool {
        self.rd.contradiction.is_some() || self.wr.contradiction.is_some()
    }
}

/// The answer to [`QUESTION`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum Answer {
    Yes,
    No,
    /// Some such accesses were checked, some not.
    Mixed,
    /// Not observable, and why.
    Unknown(&'static str),
}

impl Answer {
    pub fn describe(&self) -> String {
        match self {
            Answer::Yes => "yes".into(),
            Answer::No => "no".into(),
            Answer::Mixed => "mixed (see the table)".into(),
            Answer::Unknown(why) => format!("unknown ({why})"),
        }
    }
}

/// A cell or cost phase the guest did not run, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Skipped {
    pub name: String,
    pub why: String,
}

/// What one operation costs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Cost {
    /// The guest's name (phase `cost/<what>`).
    pub what: String,
    pub label: &'static str,
    pub ops: u64,
    /// EL1 cycles of the baseline phase and of this one, when the PMU counted both.
    pub cycles: Option<[u64; 2]>,
    /// (cycles − baseline cycles) / ops.
    pub per_op: Option<f64>,
}

/// Everything `mtex probe` says.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Probe {
    pub answer: Answer,
    pub cells: Vec<CellVerdict>,
    pub skipped: Vec<Skipped>,
    pub costs: Vec<Cost>,
    /// Lines of the guest the probe did not expect (shown).
    pub notes: Vec<String>,
    /// Why the probe's figures cannot be trusted: the run failed, lines are missing or
    /// malformed. Each makes `mtex probe` fail.
    pub problems: Vec<String>,
}

impl Probe {
    pub fn contradictions(&self) -> usize {
        self.cells.iter().filter(|c| c.contradicts()).count()
    }

    /// The run succeeded, every cell reported, none contradicts.
    pub fn passed(&self) -> bool {
        self.problems.is_empty() && self.contradictions() == 0
    }
}

/// The cost phases the guest runs, with what each measures.
const COSTS: [(&str, &str); 5] = [
    ("tco-write", "TCO write (MSR TCO, #imm)"),
    (
        "tfsr-read",
        "TFSR_EL1 read with barriers (DSB NSH; MRS; ISB)",
    ),
    ("stg", "STG (one granule)"),
    ("st2g", "ST2G (two granules)"),
    ("dc-gzva", "DC GZVA (one DCZID_EL0 block)"),
];

/// One line of the guest's protocol.
#[derive(Debug, PartialEq, Eq)]
enum Line {
    Cell(Measured),
    CellSkipped(Skipped),
    Cost { what: String, ops: u64 },
    CostSkipped(Skipped),
    Done,
    Other(String),
}

const PREFIX: &str = "probe: ";

/// The protocol line `line` is, None if it is not the probe's, or what is wrong with it.
fn parse_line(line: &str) -> Option<Result<Line, String>> {
    let rest = line.strip_prefix(PREFIX)?;
    let bad = || Err(format!("malformed probe line: {line:?}"));
    let skipped = |s: &str| -> Option<Skipped> {
        let (name, why) = s.split_once(" skipped (")?;
        Some(Skipped {
            name: name.to_string(),
            why: why.strip_suffix(')')?.to_string(),
        })
    };
    Some(if let Some(s) = rest.strip_prefix("cell ") {
        if let Some(sk) = skipped(s) {
            if Cell::parse(&sk.name).is_none() {
                return Some(bad());
            }
            Ok(Line::CellSkipped(sk))
        } else {
            parse_cell(s).map_or_else(bad, |m| Ok(Line::Cell(m)))
        }
    } else if let Some(s) = rest.strip_prefix("cost ") {
        if let Some(sk) = skipped(s) {
            Ok(Line::CostSkipped(sk))
        } else {
            let mut words = s.split_whitespace();
            let what = words.next().unwrap_or_default().to_string();
            let ops = words
                .find_map(|w| w.strip_prefix("ops="))
                .and_then(|v| v.parse().ok());
            match ops {
                Some(ops) if !what.is_empty() => Ok(Line::Cost { what, ops }),
                _ => bad(),
            }
        }
    } else if rest == "done" {
        Ok(Line::Done)
    } else {
        Ok(Line::Other(line.to_string()))
    })
}

fn parse_cell(s: &str) -> Option<Measured> {
    let mut words = s.split_whitespace();
    let cell = Cell::parse(words.next()?)?;
    let (mut rd, mut wr, mut sctlr, mut tcr, mut ptr) = (None, None, None, None, None);
    for w in words {
        let (k, v) = w.split_once('=')?;
        let hex = || u64::from_str_radix(v.strip_prefix("0x")?, 16).ok();
        match k {
            "rd" => rd = Fault::parse(v),
            "wr" => wr = Fault::parse(v),
            "sctlr" => sctlr = hex(),
            "tcr" => tcr = hex(),
            "ptr" => ptr = hex(),
            _ => {}
        }
    }
    Some(Measured {
        cell,
        rd: rd?,
        wr: wr?,
        sctlr_el1: sctlr?,
        tcr_el1: tcr?,
        ptr: ptr?,
    })
}

/// Judges one access of `m` against the predicate, with the PMU's figure for it.
fn judge(m: &Measured, write: bool, pmu: Option<PmuValue>) -> AccessVerdict {
    let c = Controls {
        sctlr_el1: m.sctlr_el1,
        tcr_el1: m.tcr_el1,
        // The hypervisor sets HCR_EL2.ATA (the guest has allocation tag access).
        hcr_ata: true,
        // The cells set no control of an optional feature (TCSO, MTX): none is a term.
        features: MteFeatures::default(),
    };
    let a = Access {
        el: m.cell.el,
        tco: m.cell.tco,
        va: m.ptr,
        write,
        form_checkable: true,
        tagged_page: m.cell.tagged_page,
    };
    let (architectural, tcf_elided) = (is_tag_checked(&c, &a), elides(&c, &a));
    let tcf = Tcf::from_bits(c.tcf(a.el));
    let fault = if write { m.wr } else { m.rd };
    let seen = match pmu {
        Some(PmuValue::Counted(n)) => Seen::Pmu(n),
        _ if tcf != Tcf::None => Seen::Fault(fault),
        // Withheld, or a pass the probe did not run: no figure either way.
        Some(PmuValue::Withheld | PmuValue::NotCounted) => Seen::Withheld,
        Some(PmuValue::NotSupported) | None => Seen::NoEvents,
    };
    // The fault the architecture requires of a failed check in this mode.
    let required = match tcf {
        Tcf::None => Fault::None,
        Tcf::Sync => Fault::Sync,
        Tcf::Async => Fault::Async,
        Tcf::Asymm if write => Fault::Async,
        Tcf::Asymm => Fault::Sync,
    };
    let contradiction = match seen.checked() {
        Some(true) if !architectural && !tcf_elided => {
            Some("checked, where the predicate says unchecked in both views".to_string())
        }
        Some(false) if architectural && tcf_elided => {
            Some("unchecked, where the predicate says checked in both views".to_string())
        }
        _ if fault != Fault::None && fault != required => Some(format!(
            "a {fault:?} fault with TCF={}",
            tcf.name().to_uppercase()
        )),
        _ => match seen {
            Seen::Pmu(n) if tcf != Tcf::None && (n > 0) != (fault != Fault::None) => Some(format!(
                "the PMU counted {n} checked, the fault says {fault:?}"
            )),
            _ => None,
        },
    };
    AccessVerdict {
        seen,
        fault,
        architectural,
        tcf_elided,
        contradiction,
    }
}

/// The probe's verdicts from a run's report, PMU figures from [`report::Phase::pmu`].
pub fn analyse(r: &Report) -> Probe {
    analyse_with(r, |name, event, el| r.phase(name)?.pmu(event, el))
}

/// [`analyse`] with the PMU figures from `pmu(phase name, event, el)`.
pub fn analyse_with(r: &Report, pmu: impl Fn(&str, u16, u8) -> Option<PmuValue>) -> Probe {
    let mut problems = Vec::new();
    if !r.succeeded() {
        let how = r
            .summary
            .map_or("no summary".to_string(), |s| report::describe_exit(&s.exit));
        problems.push(format!("the run failed: {how}"));
        problems.extend(r.problems.iter().cloned());
    }
    let (mut measured, mut skipped, mut cost_lines, mut notes) = (vec![], vec![], vec![], vec![]);
    let mut done = false;
    for line in &r.console {
        match parse_line(line) {
            None => {}
            Some(Err(e)) => problems.push(e),
            Some(Ok(Line::Cell(m))) => measured.push(m),
            Some(Ok(Line::CellSkipped(s))) => skipped.push(s),
            Some(Ok(Line::Cost { what, ops })) => cost_lines.push((what, ops)),
            Some(Ok(Line::CostSkipped(s))) => skipped.push(Skipped {
                name: format!("cost/{}", s.name),
                why: s.why,
            }),
            Some(Ok(Line::Done)) => done = true,
            Some(Ok(Line::Other(l))) => notes.push(l),
        }
    }
    for cell in Cell::all() {
        let n = measured.iter().filter(|m| m.cell == cell).count()
            + skipped.iter().filter(|s| s.name == cell.name).count();
        if n != 1 {
            problems.push(format!("cell {}: {n} lines, expected one", cell.name));
        }
    }
    if !done {
        problems.push("the probe did not finish (no \"probe: done\")".to_string());
    }
    let cells: Vec<CellVerdict> = measured
        .into_iter()
        .map(|m| {
            let figure = |event| pmu(&m.cell.name, event, m.cell.el);
            CellVerdict {
                rd: judge(&m, false, figure(pmu_event::MEM_ACCESS_CHECKED_RD)),
                wr: judge(&m, true, figure(pmu_event::MEM_ACCESS_CHECKED_WR)),
                measured: m,
            }
        })
        .collect();
    let cycles = |what: &str| match pmu(&format!("cost/{what}"), pmu_event::CPU_CYCLES, 1) {
        Some(PmuValue::Counted(n)) => Some(n),
        _ => None,
    };
    let baseline = cycles("baseline");
    let costs = cost_lines
        .into_iter()
        .filter(|(what, _)| what != "baseline")
        .map(|(what, ops)| {
            let label = COSTS
                .iter()
                .find(|(w, _)| *w == what)
                .map_or("(unknown operation)", |(_, l)| l);
            let cycles = baseline.zip(cycles(&what)).map(|(b, c)| [b, c]);
            let per_op = cycles
                .filter(|_| ops > 0)
                .map(|[b, c]| (c as f64 - b as f64) / ops as f64);
            Cost {
                what,
                label,
                ops,
                cycles,
                per_op,
            }
        })
        .collect();
    Probe {
        answer: answer(&cells),
        cells,
        skipped,
        costs,
        notes,
        problems,
    }
}

/// [`QUESTION`] from the EL1 cells with TCF = NONE whose accesses the architecture checks.
fn answer(cells: &[CellVerdict]) -> Answer {
    let relevant: Vec<&AccessVerdict> = cells
        .iter()
        .filter(|c| c.measured.cell.el == 1 && c.measured.cell.tcf == Tcf::None)
        .flat_map(|c| [&c.rd, &c.wr])
        .filter(|a| a.architectural)
        .collect();
    let seen: Vec<bool> = relevant.iter().filter_map(|a| a.seen.checked()).collect();
    if relevant.is_empty() {
        Answer::Unknown("no such cell ran")
    } else if seen.is_empty() {
        if relevant.iter().any(|a| a.seen == Seen::Withheld) {
            Answer::Unknown("PMU figures withheld")
        } else {
            Answer::Unknown("no MTE PMU events")
        }
    } else if seen.iter().all(|&c| c) {
        Answer::Yes
    } else if seen.iter().all(|&c| !c) {
        Answer::No
    } else {
        Answer::Mixed
    }
}

/// Boots the probe under `-icount shift=0` and returns the console.
pub fn boot(images: &images::Images) -> Result<qemu::Console> {
    let line = qemu::cmdline("probe", &[])?;
    qemu::run(images, &RunConfig::with_default_limits(line, true))
}

/// Runs `mtex probe`.
pub fn run(args: Args) -> Result<ExitCode> {
    let mut json = crate::output::json::JsonOut::open(args.json.as_deref())?;
    let r = match &args.from_log {
        Some(path) => report::parse_bytes(&crate::input::read(
            path,
            "console log",
            crate::input::LOG_LIMIT,
        )?),
        None => {
            let console = boot(&images::build()?)?;
            if args.raw {
                println!("{}", console.text);
            }
            console.report()
        }
    };
    let p = analyse(&r);
    print!("{}", render(&p));
    if let Some(json) = &mut json {
        json.write(&p)?;
    }
    Ok(if p.passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
