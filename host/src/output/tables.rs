//! Tables every text form draws the same way: a bordered table, and a phase's (a window's)
//! shares per CPU.

use crate::output::text::thousands;
use comfy_table::Table;
use comfy_table::presets::UTF8_BORDERS_ONLY;
use mtex_trace::counts::ByEl;

/// An empty table with `header`, in the borders every text table has.
pub fn bordered(header: Vec<&str>) -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_BORDERS_ONLY).set_header(header);
    t
}

/// One row of a per-CPU table: a CPU's share, or the total.
pub struct CpuRow {
    /// The CPU's index, or `total`.
    pub name: String,
    /// Instructions at [EL0, EL1].
    pub instructions: [u64; 2],
    /// The architectural view's checked accesses.
    pub checked: ByEl,
    /// The last column's value.
    pub last: String,
}

/// A phase counted on several CPUs: a row per CPU's share and one for their total; `last`
/// names the last column (all accesses, or the oracle's verdict).
pub fn cpu_table(last: &str, rows: impl IntoIterator<Item = CpuRow>) -> Table {
    let mut t = bordered(vec![
        "CPU",
        "instructions EL0",
        "EL1",
        "checked rd:u",
        "rd:k",
        "wr:u",
        "wr:k",
        last,
    ]);
    for r in rows {
        t.add_row(vec![
            r.name,
            thousands(r.instructions[0]),
            thousands(r.instructions[1]),
            thousands(r.checked.rd_u),
            thousands(r.checked.rd_k),
            thousands(r.checked.wr_u),
            thousands(r.checked.wr_k),
            r.last,
        ]);
    }
    t
}
