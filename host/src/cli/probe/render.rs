//! The probe's text: the question's line, the verdict table, the contradictions, the
//! costs and the problems.

use super::{CellVerdict, Probe, QUESTION};

use std::fmt::Write as _;

fn checked_word(rd: bool, wr: bool) -> String {
    let w = |b: bool| if b { "yes" } else { "no" };
    if rd == wr {
        w(rd).to_string()
    } else {
        format!("ld {}, st {}", w(rd), w(wr))
    }
}

/// The question's line, the verdict table, the contradictions, the costs, and the
/// problems.
pub fn render(p: &Probe) -> String {
    let mut out = format!("{QUESTION} — this CPU: {}\n\n", p.answer.describe());
    // Fits the report's 100 columns: one space between columns, short words (the legend
    // under the table spells them out).
    let mut t = crate::output::tables::bordered(vec![
        "EL", "TCF", "TCO", "TCMA", "ptr tag", "page", "load", "store", "arch.", "elided", "",
    ]);
    for c in t.column_iter_mut() {
        c.set_padding((0, 1));
    }
    for c in &p.cells {
        let (m, cell) = (&c.measured, &c.measured.cell);
        let tag = (m.ptr >> 56) & 0xf;
        t.add_row(vec![
            format!("EL{}", cell.el),
            cell.tcf.name().to_string(),
            (cell.tco as u8).to_string(),
            (cell.tcma as u8).to_string(),
            if cell.match_all {
                format!("{tag:#x} (all)")
            } else {
                format!("{tag:#x}")
            },
            if cell.tagged_page {
                "Tagged"
            } else {
                "Untagged"
            }
            .to_string(),
            c.rd.seen.short().to_string(),
            c.wr.seen.short().to_string(),
            checked_word(c.rd.architectural, c.wr.architectural),
            checked_word(c.rd.tcf_elided, c.wr.tcf_elided),
            if c.contradicts() { "✗" } else { "" }.to_string(),
        ]);
    }
    let _ = writeln!(
        out,
        "Tag checking per cell: one LDR, then one STR, through the pointer; the granule's \
         allocation tag\nmatches neither pointer tag. TCMA is TCR_EL1.TCMA1 for EL1 (TTBR1 \
         pointers), TCMA0 for EL0\n(TTBR0 pointers); TCF is TCF0 for EL0.\n{t}"
    );
    let _ = writeln!(
        out,
        "  load/store: checked? Seen by the PMU (MEM_ACCESS_CHECKED_RD/WR) where the CPU \
         has it, else by\n  the tag-check fault (sync: the abort; async: TFSR) where \
         TCF ≠ NONE; unknown: neither\n  (no MTE PMU events). arch.: the trace counter's \
         predicate (TCF is no term; AmpereOne-like);\n  elided: checked only where \
         TCF ≠ NONE (Arm cores, QEMU). (all): a match-all tag.\n  ✗: what was seen \
         matches neither view (listed below)."
    );
    let contradicting: Vec<&CellVerdict> = p.cells.iter().filter(|c| c.contradicts()).collect();
    if !contradicting.is_empty() {
        let _ = writeln!(out, "\nContradictions ({}):", contradicting.len());
        for c in contradicting {
            for (what, a) in [("load", &c.rd), ("store", &c.wr)] {
                if let Some(why) = &a.contradiction {
                    let _ = writeln!(out, "  {} {what}: {why}", c.measured.cell.name);
                }
            }
        }
    }
    let _ = writeln!(
        out,
        "\nCost on this CPU (EL1 cycles, (loop with the operation − baseline loop) / operations):"
    );
    for c in &p.costs {
        let figure = match (c.per_op, c.cycles) {
            (Some(x), Some([b, n])) => {
                format!("{x:.2} cycles ({b} → {n} cycles, {} operations)", c.ops)
            }
            _ => "unknown (no cycle counts)".to_string(),
        };
        let _ = writeln!(out, "  {:<48} {figure}", c.label);
    }
    for s in &p.skipped {
        let _ = writeln!(out, "  skipped: {} ({})", s.name, s.why);
    }
    for n in &p.notes {
        let _ = writeln!(out, "  guest: {n}");
    }
    if !p.problems.is_empty() {
        let _ = writeln!(out, "\nProblems:");
        for pr in &p.problems {
            let _ = writeln!(out, "  {pr}");
        }
    }
    let _ = writeln!(
        out,
        "\nmtex probe: {} cells, {} contradicting; {}",
        p.cells.len(),
        p.contradictions(),
        if p.passed() { "PASS" } else { "FAIL" }
    );
    out
}
