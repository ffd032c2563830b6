//! A phase's profile gathered by function: every PC's counts added into the function the
//! guest's symbols put it in, under the phase's own counter names, so that the rows of any
//! counter add up to the phase's figure exactly.
//!
//! A row is one (function, EL, unprivileged): the kernel's LDTR/STTR (uaccess) are a row of
//! their own, shown as `name (uaccess)`, and counted in the `:k` counters as the phase
//! counts them. PCs no symbol covers gather in `[no symbol]` per EL; what the hypervisor's
//! table had no room for is `[other]` (its PCs were not kept).

use super::PhaseProfile;
use crate::symbols::Symbols;
use mtex_trace::profile::{PcEntry, user_space};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The row of PCs no symbol covers.
pub const NO_SYMBOL: &str = "[no symbol]";
/// The row of the counts whose PCs the hypervisor did not keep.
pub const OTHER: &str = "[other]";
/// The row of user PCs that ran in an address space other than the window opener's, when
/// the opener's program names its own (Linux mode): another process's code, whose program
/// mtex does not know.
pub const ANOTHER_PROCESS: &str = "[another process]";
/// What marks the kernel's unprivileged accesses' row.
const UACCESS: &str = " (uaccess)";

/// One function's counts in a phase.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FunctionRow {
    /// Demangled, without rustc's hash; or [`NO_SYMBOL`], [`OTHER`].
    pub name: String,
    /// 0 user (`:u`), 1 kernel (`:k`).
    pub el: u8,
    /// The kernel's LDTR/STTR accessing as EL0 (in the `:k` counters and in `uaccess_*`).
    pub unprivileged: bool,
    /// By call stack (`stacks::by_stack`): the frames above the function, outermost first;
    /// empty in rows by function.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stack: Vec<String>,
    /// Counter name → value, under the phase's names (`mem_access_checked_rd:k`); zeros left
    /// out.
    pub counters: BTreeMap<String, u64>,
}

impl FunctionRow {
    /// Its value of `counter` (0 when it has none).
    pub fn get(&self, counter: &str) -> u64 {
        self.counters.get(counter).copied().unwrap_or(0)
    }

    /// Its name as shown: `name`, or `name (uaccess)`.
    pub fn label(&self) -> String {
        if self.unprivileged {
            format!("{}{UACCESS}", self.name)
        } else {
            self.name.clone()
        }
    }
}

/// `profile` by function, ordered by EL, name, then unprivileged.
pub fn by_function(profile: &PhaseProfile, symbols: &Symbols) -> Vec<FunctionRow> {
    gather(profile, symbols, |_| Vec::new())
}

/// `profile`'s PCs and `[other]` buckets added into rows keyed by EL, the stack `stack_of`
/// gives each entry (none, by function), the function's name, and unprivileged; in that
/// order. Rows that count nothing are left out.
pub(super) fn gather(
    profile: &PhaseProfile,
    symbols: &Symbols,
    mut stack_of: impl FnMut(&PcEntry) -> Vec<String>,
) -> Vec<FunctionRow> {
    let mut rows: BTreeMap<(u8, Vec<String>, String, bool), PcEntry> = BTreeMap::new();
    let named = profile.pcs.iter().map(|e| (name_of(e, symbols), e));
    let other = profile.other.iter().map(|e| (OTHER.to_string(), e));
    for (name, e) in named.chain(other) {
        // `add` keeps the first's class: the row's is the key's.
        rows.entry((u8::from(e.el != 0), stack_of(e), name, e.unprivileged))
            .or_insert(PcEntry {
                el: e.el,
                unprivileged: e.unprivileged,
                ..PcEntry::default()
            })
            .add(e);
    }
    rows.into_iter()
        .map(|((el, stack, name, unprivileged), e)| FunctionRow {
            name,
            el,
            unprivileged,
            stack,
            counters: mtex_abi::counters::of_trace(&super::sum([&e]))
                .filter(|&(_, v)| v != 0)
                .map(|(c, v)| (c.name.to_string(), v))
                .collect(),
        })
        .filter(|r| !r.counters.is_empty())
        .collect()
}

/// The function `e`'s PC is in: in the kernel's symbols, or for a user PC in the program
/// that opened the phase, if it ran in that program's address space.
fn name_of(e: &PcEntry, symbols: &Symbols) -> String {
    let table = match symbols.program() {
        Some(_) if e.el == 0 && e.stack != user_space::OPENER => {
            return ANOTHER_PROCESS.to_string();
        }
        Some(program) if e.el == 0 => program,
        _ => symbols,
    };
    table
        .function(e.pc)
        .map_or_else(|| NO_SYMBOL.to_string(), |(n, _)| n)
}

/// The rows with a non-zero `counter`, largest first (then by name).
pub fn ranked<'a>(rows: &'a [FunctionRow], counter: &str) -> Vec<(&'a FunctionRow, u64)> {
    let mut r: Vec<_> = rows
        .iter()
        .map(|f| (f, f.get(counter)))
        .filter(|&(_, v)| v != 0)
        .collect();
    r.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.label().cmp(&b.0.label())));
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn symbols() -> Symbols {
        Symbols::from_funcs(vec![
            (0x1000, 0x100, "copy_to_user".into()),
            (0x1100, 0x100, "memcpy".into()),
            (0x2000, 0x80, "main".into()),
        ])
    }

    fn entry(pc: u64, el: u8, unprivileged: bool, n: [u64; 4]) -> PcEntry {
        PcEntry {
            pc,
            el,
            unprivileged: unprivileged && el == 1,
            stack: 0,
            insns: n[0],
            faults: n[3] % 2,
            rd: [n[1], n[1] / 2, n[1] / 3, n[1] / 4, n[1] / 5],
            wr: [n[2], n[2] / 2, n[2] / 3, n[2] / 4, n[2] / 5],
            tag_stores: n[3],
            granules: 2 * n[3],
            tco_writes: n[3] / 3,
            tfsr_reads: n[0] % 3,
        }
    }

    #[test]
    fn pcs_gather_by_function_el_and_uaccess_and_the_rest_by_name() {
        let p = PhaseProfile {
            pcs: vec![
                entry(0x1000, 1, false, [4, 4, 0, 0]),
                entry(0x1004, 1, false, [2, 2, 0, 0]),
                entry(0x1008, 1, true, [1, 6, 0, 0]),
                entry(0x1100, 0, false, [1, 2, 0, 0]),
                entry(0x9000, 1, false, [1, 2, 0, 0]),
            ],
            other: vec![entry(0, 0, false, [3, 2, 0, 0])],
            ..PhaseProfile::default()
        };
        let rows = by_function(&p, &symbols());
        let got: Vec<_> = rows
            .iter()
            .map(|r| (r.el, r.label(), r.get("mem_access_checked_rd:k")))
            .collect();
        assert_eq!(
            got,
            [
                (0, "[other]".to_string(), 0),
                (0, "memcpy".to_string(), 0),
                (1, "[no symbol]".to_string(), 1),
                (1, "copy_to_user".to_string(), 3),
                (1, "copy_to_user (uaccess)".to_string(), 3),
            ]
        );
        assert_eq!(rows[4].get("uaccess_checked_rd"), 3);
        let top: Vec<_> = ranked(&rows, "mem_access_checked_rd:k")
            .iter()
            .map(|(r, v)| (r.label(), *v))
            .collect();
        assert_eq!(
            top,
            [
                ("copy_to_user".to_string(), 3),
                ("copy_to_user (uaccess)".to_string(), 3),
                ("[no symbol]".to_string(), 1)
            ]
        );
    }

    #[test]
    fn user_pcs_are_named_by_the_opener_program_only_in_its_address_space() {
        let user = |pc, space| PcEntry {
            stack: space,
            ..entry(pc, 0, false, [1, 0, 0, 0])
        };
        let p = PhaseProfile {
            pcs: vec![
                // The kernel's copy_to_user is at the same address as the program's `spin`.
                entry(0x1000, 1, false, [5, 0, 0, 0]),
                user(0x1000, user_space::OPENER),
                user(0x1004, user_space::OPENER),
                user(0x1008, user_space::OTHER),
                user(0x4000, user_space::OPENER),
            ],
            ..PhaseProfile::default()
        };
        let program = Symbols::from_funcs(vec![(0x1000, 0x10, "spin".into())]);
        let names = |s: &Symbols| -> Vec<(u8, String, u64)> {
            by_function(&p, s)
                .iter()
                .map(|r| {
                    (
                        r.el,
                        r.label(),
                        r.get("instructions:u") + r.get("instructions:k"),
                    )
                })
                .collect()
        };
        assert_eq!(
            names(&symbols().with_program(program)),
            [
                (0, "[another process]".to_string(), 1),
                (0, "[no symbol]".to_string(), 1),
                (0, "spin".to_string(), 2),
                (1, "copy_to_user".to_string(), 5),
            ]
        );
        // Without the program's symbols (the built-in guest), one table names every PC.
        assert_eq!(
            names(&symbols()),
            [
                (0, "[no symbol]".to_string(), 1),
                (0, "copy_to_user".to_string(), 3),
                (1, "copy_to_user".to_string(), 5),
            ]
        );
    }

    fn arb_entry() -> impl Strategy<Value = PcEntry> {
        (
            prop::sample::select(vec![0x1000u64, 0x10fc, 0x1100, 0x2010, 0x3000, 0]),
            0u8..2,
            any::<bool>(),
            prop::array::uniform4(0u64..1_000_000),
        )
            .prop_map(|(pc, el, u, n)| entry(pc, el, u, n))
    }

    proptest! {
        #[test]
        fn every_counter_of_the_rows_adds_up_to_the_profiles(
            pcs in prop::collection::vec(arb_entry(), 0..40),
            other in prop::collection::vec(arb_entry(), 0..3),
        ) {
            let p = PhaseProfile { pcs, other, ..PhaseProfile::default() };
            let rows = by_function(&p, &symbols());
            for (c, total) in mtex_abi::counters::of_trace(&p.sum()) {
                let rows_sum: u64 = rows.iter().map(|r| r.get(c.name)).sum();
                prop_assert_eq!(rows_sum, total, "{}", c.name);
            }
        }
    }
}
