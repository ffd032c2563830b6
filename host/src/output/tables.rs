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

/// A trapped write as the table by place counts it.
pub struct WriteSite<'a> {
    pub register: &'a str,
    /// The MTE fields it changed (`TCF0 NONE→SYNC`).
    pub changes: &'a [String],
    /// Where: the function (`name+0xoff`), or the pc.
    pub place: String,
    pub cpu: u32,
}

/// Every write counted by (register, MTE fields changed, where), most frequent first, with
/// the CPUs that made them when more than one did: how a long list of writes is summed up,
/// in every text form and for both guests.
pub fn writes_by_site(writes: &[WriteSite]) -> Table {
    let several = writes.iter().any(|w| w.cpu != writes[0].cpu);
    // (register, fields changed, where) → writes, and the CPUs that made them.
    type Site<'a> = (&'a str, String, &'a str);
    let mut groups: Vec<(Site, usize, Vec<u32>)> = Vec::new();
    for w in writes {
        let key = (
            w.register,
            if w.changes.is_empty() {
                "(none)".to_string()
            } else {
                w.changes.join(", ")
            },
            w.place.as_str(),
        );
        match groups.iter_mut().find(|(k, _, _)| *k == key) {
            Some((_, n, cpus)) => {
                *n += 1;
                if !cpus.contains(&w.cpu) {
                    cpus.push(w.cpu);
                }
            }
            None => groups.push((key, 1, vec![w.cpu])),
        }
    }
    groups.sort_by_key(|g| std::cmp::Reverse(g.1));
    let mut header = vec!["writes", "register", "MTE fields changed", "where"];
    if several {
        header.push("CPUs");
    }
    let mut t = bordered(header);
    for ((reg, changes, at), n, mut cpus) in groups {
        let mut row = vec![n.to_string(), reg.to_string(), changes, at.to_string()];
        if several {
            cpus.sort_unstable();
            let cpus: Vec<String> = cpus.iter().map(u32::to_string).collect();
            row.push(cpus.join(","));
        }
        t.add_row(row);
    }
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
