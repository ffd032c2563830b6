//! The readable report: phases, then every trapped write with its decoded MTE fields.

use crate::model::report::{Phase, Report, describe_exit};
use comfy_table::{CellAlignment, Table};
use mtex_abi::report::TrapMode;
use mtex_abi::scenario::{PhaseParams, Tcf, Workload, WorkloadParams};
use mtex_trace::counts::TraceCounts;
use std::fmt::Write as _;

/// Above this many trapped writes, only the first [`WRITES_SAMPLE`] are listed.
const MAX_WRITES_LISTED: usize = 40;
const WRITES_SAMPLE: usize = 20;

fn opt(v: Option<u64>) -> String {
    v.map_or("-".into(), |v| v.to_string())
}

fn el(e: u8) -> &'static str {
    ["EL0", "EL1", "EL2", "EL3"][e as usize & 3]
}

/// Renders the report as text.
pub fn text(r: &Report) -> String {
    let mut out = String::new();
    if let Some(b) = &r.boot {
        let traps = match b.trap_mode {
            TrapMode::FineGrained => "FEAT_FGT (HFGWTR_EL2: SCTLR_EL1, TCR_EL1)",
            TrapMode::Tvm => "HCR_EL2.TVM (all EL1 VM controls)",
        };
        let _ = writeln!(
            out,
            "mtex: booted by {}; console {:#x}; hypervisor {:#x}..{:#x}; guest RAM at {:#x}\n      guest entry {:#x}, dtb {:#x} (guest addresses)\n      cpu: MIDR_EL1 {:#x}{}\n      traps: {traps}; counter {} Hz; watchdog {} ms; PMU instruction counts: {}",
            mtex_platform::BootPath::from_u32(b.boot_path.into())
                .map_or("an unknown path", |p| p.name()),
            b.console,
            b.hyp_start,
            b.hyp_end,
            b.guest_ram_pa,
            b.guest_entry,
            b.guest_dtb,
            b.midr,
            if b.is_emulator() {
                " (an emulator: implementer 0; the trace is held to QEMU's PMU rule)"
            } else {
                " (silicon: the trace is held to the architecture's PMU rule)"
            },
            b.counter_hz,
            b.watchdog_ms,
            if b.pmu_instructions {
                "yes"
            } else {
                "no (run under -icount)"
            }
        );
    }
    if !r.console.is_empty() {
        let _ = writeln!(out, "\nGuest console");
        for l in &r.console {
            let _ = writeln!(out, "  {l}");
        }
    }
    let matrix = matrix_table(r);
    // The scenario's traced phases are in the matrix; the generic tables keep the rest (all
    // phases, for a report without a scenario).
    let rest: Vec<&Phase> = if matrix.is_empty() {
        r.phases.iter().collect()
    } else {
        r.phases.iter().filter(|p| !in_matrix(p)).collect()
    };
    if !rest.is_empty() {
        let _ = writeln!(out, "\nPhases\n{}", phases_table(&rest));
    }
    if !matrix.is_empty() {
        let _ = write!(out, "\n{matrix}");
    }
    let traces = trace_table_of(&rest, matrix.is_empty());
    if !traces.is_empty() {
        let _ = write!(out, "\n{traces}");
    }
    // Sampled phases have estimates, not counts: none is in the tables above.
    for p in &r.phases {
        if let Some(s) = p.sampled.as_ref().filter(|_| p.trace.is_none()) {
            let _ = writeln!(
                out,
                "\nphase {} ({}) was sampled: {} units; its estimates, with their 95% \
                 intervals, are in the summary and the full report",
                p.id,
                p.name,
                s.units().count()
            );
        }
    }
    let shares = cpu_shares(&r.phases);
    if !shares.is_empty() {
        let _ = write!(out, "\nPhases counted on several CPUs, by CPU\n{shares}");
    }
    let notes = phase_notes(&r.phases);
    if !notes.is_empty() {
        let _ = write!(out, "\nAlso counted, per phase (what is not zero)\n{notes}");
    }
    if !r.debug_writes.is_empty() {
        let _ = write!(out, "\n{}", debug_writes(r));
    }
    if !r.writes.is_empty() {
        // The scenario traps hundreds of writes: a sample here, all of them in the JSON.
        let shown = if r.writes.len() > MAX_WRITES_LISTED {
            WRITES_SAMPLE
        } else {
            r.writes.len()
        };
        // Each CPU has its own SCTLR_EL1 and TCR_EL1: name the CPU once more than one wrote.
        let several = r.writes.iter().any(|w| w.cpu != r.writes[0].cpu);
        let mut header = vec!["seq"];
        if several {
            header.push("CPU");
        }
        header.extend([
            "phase",
            "register",
            "old → new",
            "MTE fields changed",
            "pc",
            "EL",
            "TCO",
        ]);
        let mut t = crate::output::tables::bordered(header);
        for w in r.writes.iter().take(shown) {
            let changes = w
                .changes
                .iter()
                .map(|c| format!("{} {}→{}", c.field, c.old, c.new))
                .collect::<Vec<_>>()
                .join(", ");
            let mut row = vec![w.seq.to_string()];
            if several {
                row.push(w.cpu.to_string());
            }
            row.extend([
                w.phase.clone().unwrap_or_else(|| "-".into()),
                w.register.to_string(),
                format!("{:#x} → {:#x}", w.old, w.new),
                if changes.is_empty() {
                    "(none)".into()
                } else {
                    changes
                },
                format!("{:#x}", w.at.pc),
                el(w.at.el).into(),
                (w.at.tco as u8).to_string(),
            ]);
            t.add_row(row);
        }
        let _ = writeln!(out, "\nTrapped writes\n{t}");
        if shown < r.writes.len() {
            let _ = writeln!(
                out,
                "  ... {} more trapped writes (all of them are in --json)",
                r.writes.len() - shown
            );
        }
    }
    for c in &r.unknown_calls {
        let _ = writeln!(
            out,
            "\nunknown call {:#x} by {:?} at pc {:#x}: answered NOT_SUPPORTED",
            c.function, c.conduit, c.at.pc
        );
    }
    if !r.power_calls.is_empty() {
        let _ = writeln!(out, "\nCPU power calls");
        for c in &r.power_calls {
            let _ = writeln!(out, "  {}", crate::model::report::describe_power_call(c));
        }
    }
    match &r.summary {
        Some(s) => {
            let _ = writeln!(
                out,
                "\nEnd: {} ({} records, {} guest exits)",
                describe_exit(&s.exit),
                s.records,
                s.exits
            );
        }
        None => {
            let _ = writeln!(out, "\nEnd: {}", r.end());
        }
    }
    for n in &r.notes {
        let _ = writeln!(out, "NOTE: {n}");
    }
    for p in &r.problems {
        let _ = writeln!(out, "PROBLEM: {p}");
    }
    out
}

/// Text output stays within this many columns where it can (the tables of many figures are
/// wider).
const COLUMNS: usize = 100;

/// One line per phase with something the tables do not show, only what is not zero: the
/// trace's failed store-exclusives, lost breakpoint runs, load/stores it does not model, TCO
/// writes beyond the site table, and the instructions the hypervisor emulated after a trap.
/// Lines are wrapped at [`COLUMNS`].
/// Each phase counted on several CPUs: every CPU's share and their sum (the run fails if
/// they disagree with the phase's figures).
fn cpu_shares(phases: &[Phase]) -> String {
    use crate::output::tables::{CpuRow, cpu_table};
    use crate::output::text::thousands;
    let all = |a: &mtex_trace::counts::ByEl| thousands(a.rd_u + a.rd_k + a.wr_u + a.wr_k);
    let mut out = String::new();
    for p in phases.iter().filter(|p| !p.cpus.is_empty()) {
        let mut shares: Vec<_> = p.cpus.iter().collect();
        shares.sort_by_key(|c| c.cpu);
        let rows = shares.into_iter().map(|c| CpuRow {
            name: c.cpu.to_string(),
            instructions: c.instructions,
            checked: c.checked,
            last: all(&c.accesses),
        });
        let total = p.trace.as_ref().map(|t| CpuRow {
            name: "total".into(),
            instructions: [t.instructions_el0, t.instructions_el1],
            checked: t.architectural,
            last: all(&t.accesses),
        });
        let t = cpu_table("all accesses", rows.chain(total));
        let _ = writeln!(out, "  phase {} ({})\n{t}", p.id, p.name);
    }
    out
}

fn phase_notes(phases: &[Phase]) -> String {
    let mut out = String::new();
    for p in phases {
        let mut items = Vec::new();
        if let Some(t) = &p.trace {
            for (n, what) in [
                (
                    t.failed_store_exclusives,
                    "failed store-exclusives (no access; a CPU may tag-check them)",
                ),
                (
                    t.failed_cas,
                    "CAS whose compare failed (counted as a write, judged alike; a CPU may write Unchecked, or not write)",
                ),
                (t.runs_lost, "breakpoint runs lost (not counted)"),
                (t.unknown_mem, "load/stores not modelled (not judged)"),
                (t.tco_site_overflow, "TCO writes beyond the site table"),
            ] {
                if n > 0 {
                    items.push(format!("{n} {what}"));
                }
            }
        }
        if let Some(s) = p.stats.filter(|s| s.emulated > 0) {
            // The rest are the trapped MTE and VM control writes and ID register reads.
            let other = s
                .emulated
                .saturating_sub(s.guest_pmu_accesses + s.guest_debug_accesses + s.wfx_traps);
            let parts: Vec<_> = [
                (s.guest_pmu_accesses, "PMU"),
                (s.guest_debug_accesses, "debug-register"),
                (s.wfx_traps, "WFI/WFE"),
                (other, "control/ID-register"),
            ]
            .into_iter()
            .filter(|&(n, _)| n > 0)
            .map(|(n, what)| format!("{n} {what}"))
            .collect();
            items.push(format!(
                "{} emulated after a trap ({})",
                s.emulated,
                parts.join(", ")
            ));
        }
        if items.is_empty() {
            continue;
        }
        let mut line = format!("  {} {}{}:", p.id, p.name, partial(p));
        for (i, item) in items.iter().enumerate() {
            let sep = if i == 0 { " " } else { "; " };
            if line.len() + sep.len() + item.len() > COLUMNS {
                let _ = writeln!(out, "{}", line.trim_end_matches(' '));
                line = format!("      {item}");
            } else {
                line.push_str(sep);
                line.push_str(item);
            }
        }
        let _ = writeln!(out, "{line}");
    }
    out
}

/// Above this many debug-register writes, only the first [`WRITES_SAMPLE`] are listed.
const MAX_DEBUG_WRITES_LISTED: usize = 40;

/// The guest's debug-register writes, and once what became of them.
fn debug_writes(r: &Report) -> String {
    let mut out = String::from(
        "Guest debug-register writes: held in the guest's shadow, never given to the hardware\n  \
         (its breakpoints, watchpoints, single-step and OS locks take no effect; reads give them back)\n",
    );
    let shown = if r.debug_writes.len() > MAX_DEBUG_WRITES_LISTED {
        WRITES_SAMPLE
    } else {
        r.debug_writes.len()
    };
    for w in r.debug_writes.iter().take(shown) {
        let phase = match r.phases.iter().rev().find(|p| p.id == w.phase) {
            _ if w.phase == 0 => "outside any phase".to_string(),
            Some(p) => format!("phase {} {}", p.id, p.name),
            None => format!("phase {}", w.phase),
        };
        let _ = writeln!(
            out,
            "  {} = {:#x} at pc {:#x} {}, {phase}",
            debug_reg_name(w.iss),
            w.value,
            w.at.pc,
            el(w.at.el)
        );
    }
    if shown < r.debug_writes.len() {
        let _ = writeln!(
            out,
            "  ... {} more debug-register writes (all of them are in --json)",
            r.debug_writes.len() - shown
        );
    }
    out
}

/// `DBGBCR0_EL1`: the register a DebugWrite's ISS names, with its number.
fn debug_reg_name(iss: u32) -> String {
    use mtex_arch::DebugReg;
    match DebugReg::from_iss(mtex_arch::esr::SysRegIss::from_iss(iss)) {
        Some(r @ (DebugReg::Bvr(n) | DebugReg::Bcr(n) | DebugReg::Wvr(n) | DebugReg::Wcr(n))) => {
            r.name().replace("<n>", &n.to_string())
        }
        Some(r) => r.name().to_string(),
        None => format!("debug register ISS {iss:#x}"),
    }
}

/// ` (partial)` after the name of a phase that never ended: its trace counts stop where the
/// run did (the problems say where).
fn partial(p: &Phase) -> &'static str {
    if p.stats.is_none() && p.trace.is_some() {
        " (partial)"
    } else {
        ""
    }
}

/// The generic phase table: exits, trapped writes and PMU instruction counts.
fn phases_table(phases: &[&Phase]) -> Table {
    let mut t = crate::output::tables::bordered(vec![
        "phase",
        "exits",
        "exits with TCO",
        "trapped writes",
        "EL2 instr",
        "EL1 instr",
        "EL0 instr",
        "TCO at end",
    ]);
    for p in phases {
        let s = p.stats;
        t.add_row(vec![
            format!("{} {}", p.id, p.name),
            opt(s.map(|s| s.exits)),
            opt(s.map(|s| s.exits_with_tco)),
            opt(s.map(|s| s.sysreg_writes)),
            opt(s.and_then(|s| s.el2_instructions)),
            opt(s.and_then(|s| s.el1_instructions)),
            opt(s.and_then(|s| s.el0_instructions)),
            p.end
                .map_or("(not ended)".into(), |e| (e.tco as u8).to_string()),
        ]);
    }
    t
}

/// The trace counter's figures, one row per traced phase: the architectural and TCF-elided
/// views side by side with perf's event names, then the counterfactual kernel counts.
pub fn trace_table(r: &Report) -> String {
    trace_table_of(&r.phases.iter().collect::<Vec<_>>(), true)
}

/// [`trace_table`] of these phases, with or without the TCO write sites.
fn trace_table_of(phases: &[&Phase], tco_sites: bool) -> String {
    let traced: Vec<_> = phases.iter().filter(|p| p.trace.is_some()).collect();
    if traced.is_empty() {
        return String::new();
    }
    let mut table = crate::output::tables::bordered(vec![
        "phase",
        "arch\nrd:k",
        "arch\nwr:k",
        "arch\nrd:u",
        "arch\nwr:u",
        "elided\nrd:k",
        "elided\nwr:k",
        "elided\nrd:u",
        "elided\nwr:u",
        "if TCMA1\n:k",
        "if kernel\nTCO :k",
        "accesses\nrd / wr",
        "instr\nEL1 / EL0",
        "TCO\nwrites",
        "tag\ngranules",
        "TFSR\nreads",
        "DSB / ISB",
        "tag-check\nfaults",
    ]);
    let mut notes = String::new();
    for p in traced {
        let t = p.trace.unwrap();
        let (a, e) = (t.architectural, t.tcf_elided);
        table.add_row(vec![
            format!("{} {}{}", p.id, p.name, partial(p)),
            a.rd_k.to_string(),
            a.wr_k.to_string(),
            a.rd_u.to_string(),
            a.wr_u.to_string(),
            e.rd_k.to_string(),
            e.wr_k.to_string(),
            e.rd_u.to_string(),
            e.wr_u.to_string(),
            (t.if_tcma1.rd_k + t.if_tcma1.wr_k).to_string(),
            (t.if_kernel_tco.rd_k + t.if_kernel_tco.wr_k).to_string(),
            format!(
                "{} / {}",
                t.accesses.rd_k + t.accesses.rd_u,
                t.accesses.wr_k + t.accesses.wr_u
            ),
            format!("{} / {}", t.instructions_el1, t.instructions_el0),
            t.tco_writes.to_string(),
            t.granules_tagged.to_string(),
            t.tfsr_reads.to_string(),
            format!("{} / {}", t.dsb, t.isb),
            t.tag_check_faults.to_string(),
        ]);
        for s in p.tco_sites.iter().filter(|_| tco_sites) {
            let _ = writeln!(
                notes,
                "  {}: MSR TCO, #{} at {:#x}, {} times",
                p.name, s.value as u8, s.pc, s.count
            );
        }
    }
    format!(
        "Tag-checked accesses (trace; arch = architectural, AmpereOne-like; elided = only when TCF is not NONE, Arm cores and QEMU)\n{table}\n{notes}"
    )
}

/// A phase of the kernel scenario that was traced: a row of the policy matrix.
fn in_matrix(p: &Phase) -> bool {
    p.params.is_some() && p.trace.is_some()
}

/// `futex-hash i=32 s=16 t=16`: the workload and the parameters that mean something for it.
fn workload_label(pp: &PhaseParams) -> String {
    let (size, tasks) = pp.workload.units();
    let mut s = format!("{} i={}", pp.workload.name(), pp.params.iters);
    if size != "-" {
        let _ = write!(s, " s={}", pp.params.size);
    }
    if tasks != "-" {
        let _ = write!(s, " t={}", pp.params.tasks);
    }
    s
}

/// The change from `base` to `n`, as perf prints it: `-97.5%`, `+0.0%`; `n/a` from zero.
fn change(base: u64, n: u64) -> String {
    if base == 0 {
        return if n == 0 { "+0.0%".into() } else { "n/a".into() };
    }
    let pct = (n as f64 - base as f64) * 100.0 / base as f64;
    format!("{pct:+.1}%")
}

/// The kernel scenario's traced phases as a policy matrix: one row per (workload, policy),
/// the rows of a workload together (workloads in the order they first ran, policies in phase
/// order), each compared with the workload's first policy. Empty when there are none.
pub fn matrix_table(r: &Report) -> String {
    let rows: Vec<(&Phase, PhaseParams, TraceCounts)> = r
        .phases
        .iter()
        .filter_map(|p| Some((p, p.params?, p.trace?)))
        .collect();
    if rows.is_empty() {
        return String::new();
    }
    // A workload named twice with different parameters is two workloads here.
    // A group is one workload with its parameters and user mode: rows compare policies only.
    let key = |pp: &PhaseParams| (pp.workload, pp.params, pp.tcf0);
    let mut groups: Vec<(Workload, WorkloadParams, Tcf)> = Vec::new();
    for (_, pp, _) in &rows {
        if !groups.contains(&key(pp)) {
            groups.push(key(pp));
        }
    }
    let mut table = crate::output::tables::bordered(vec![
        "workload",
        "policy",
        "checked\nrd:k",
        "checked\nwr:k",
        "checked\nrd:u",
        "checked\nwr:u",
        "uaccess checked\nrd / wr",
        "elided\n:k",
        ":k vs\nfirst",
        "if TCMA1\n:k",
        "kernel entries\nsvc / irq",
        "TCO\nwrites",
        "TFSR\nreads",
        "DSB / ISB",
        "tag\ngranules",
        "trapped\nwrites",
        "instr\nEL1 / EL0",
        "faults",
    ]);
    // Figures right-aligned, as perf stat prints them.
    for c in table.column_iter_mut().skip(2) {
        c.set_cell_alignment(CellAlignment::Right);
    }
    for g in &groups {
        let mut base = None;
        for (p, pp, t) in rows.iter().filter(|(_, pp, _)| key(pp) == *g) {
            let (a, e) = (t.architectural, t.tcf_elided);
            let k = a.rd_k + a.wr_k;
            let first = base.is_none();
            let b = *base.get_or_insert(k);
            let vs_first = if first { "=".into() } else { change(b, k) };
            let mut policy = pp.policy.name().as_str().to_string();
            if pp.tcf0 != Tcf::Sync {
                let _ = write!(policy, " tcf0={}", pp.tcf0.name());
            }
            policy.push_str(partial(p));
            table.add_row(vec![
                if first {
                    workload_label(pp)
                } else {
                    String::new()
                },
                policy,
                a.rd_k.to_string(),
                a.wr_k.to_string(),
                a.rd_u.to_string(),
                a.wr_u.to_string(),
                format!("{} / {}", t.uaccess.arch_rd, t.uaccess.arch_wr),
                (e.rd_k + e.wr_k).to_string(),
                vs_first,
                (t.if_tcma1.rd_k + t.if_tcma1.wr_k).to_string(),
                format!(
                    "{} / {}",
                    t.entries.sync_el0 + t.entries.sync_el1,
                    t.entries.irq_el0 + t.entries.irq_el1
                ),
                t.tco_writes.to_string(),
                t.tfsr_reads.to_string(),
                format!("{} / {}", t.dsb, t.isb),
                t.granules_tagged.to_string(),
                opt(p.stats.map(|s| s.sysreg_writes)),
                format!("{} / {}", t.instructions_el1, t.instructions_el0),
                t.tag_check_faults.to_string(),
            ]);
        }
    }
    format!(
        "Policy matrix (trace counter, exact)\n{table}\n  \
         checked = architecturally Tag Checked (AmpereOne-like: TCF does not matter); \
         elided = only when the EL's TCF is not NONE (Arm cores, QEMU);\n  \
         uaccess = the kernel's LDTR/STTR to user memory (judged as EL0's, also counted in :k as perf does); \
         \"vs first\" = checked :k against the first policy listed for the workload;\n  \
         kernel entries = exceptions taken to EL1 (system calls and faults / timer interrupts);\n  \
         i/s/t = the workload's iterations / size / tasks.\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::report::Write;
    use mtex_abi::report::{GuestState, PhaseStats};
    use mtex_abi::scenario::Policy;

    fn phase(id: u32, policy: &str, k: (u64, u64), params: bool) -> Phase {
        let mut t = TraceCounts::default();
        (t.architectural.rd_k, t.architectural.wr_k) = k;
        t.uaccess.arch_rd = 7;
        t.tfsr_reads = 3;
        Phase {
            id,
            name: format!("run{id}"),
            params: params.then(|| PhaseParams {
                workload: Workload::FutexHash,
                policy: Policy::parse(policy).unwrap(),
                tcf0: Tcf::Sync,
                params: WorkloadParams {
                    iters: 32,
                    size: 16,
                    tasks: 16,
                },
            }),
            begin_ts: 0,
            begin: GuestState::default(),
            end_ts: Some(1),
            end: Some(GuestState::default()),
            stats: Some(PhaseStats {
                sysreg_writes: 4,
                virqs: 0,
                ..PhaseStats::default()
            }),
            trace: Some(t),
            ..Phase::default()
        }
    }

    #[test]
    fn matrix_compares_policies_of_a_workload_with_the_first() {
        let r = Report {
            phases: vec![
                phase(1, "entry-tco", (150, 50), true),
                phase(2, "tcma1", (4, 1), true),
            ],
            ..Report::default()
        };
        let m = matrix_table(&r);
        assert!(m.contains("futex-hash i=32 s=16 t=16"), "{m}");
        assert!(m.contains("entry-tco"), "{m}");
        assert!(m.contains("tcma1"), "{m}");
        assert!(m.contains("-97.5%"), "{m}");
        let all = text(&r);
        assert!(
            all.contains("Policy matrix (trace counter, exact)"),
            "{all}"
        );
        assert!(!all.contains("\nPhases\n"), "{all}");
        assert!(!all.contains("Tag-checked accesses"), "{all}");
        // Without scenario parameters: the generic tables, no matrix.
        let plain = Report {
            phases: vec![phase(1, "entry-tco", (150, 50), false)],
            ..Report::default()
        };
        assert!(matrix_table(&plain).is_empty());
        let all = text(&plain);
        assert!(all.contains("\nPhases\n") && all.contains("Tag-checked accesses"));
        assert_eq!(change(0, 0), "+0.0%");
        assert_eq!(change(0, 5), "n/a");
        assert_eq!(change(10, 10), "+0.0%");
    }

    #[test]
    fn a_phase_that_never_ended_is_marked_partial() {
        let mut p = phase(1, "entry-tco", (150, 50), false);
        (p.end, p.end_ts, p.stats) = (None, None, None);
        let r = Report {
            phases: vec![p.clone()],
            ..Report::default()
        };
        let all = text(&r);
        assert!(all.contains("1 run1 (partial)"), "{all}");
        assert!(all.contains("(not ended)"), "{all}");
        p.params = phase(1, "entry-tco", (150, 50), true).params;
        let r = Report {
            phases: vec![p],
            ..Report::default()
        };
        assert!(matrix_table(&r).contains("entry-tco (partial)"));
    }

    #[test]
    fn what_the_tables_do_not_show_is_listed_per_phase_within_100_columns() {
        let mut p = phase(3, "entry-tco", (1, 1), false);
        p.name = "a-phase-name-of-thirty-two-bytes".into();
        let t = p.trace.as_mut().unwrap();
        (t.failed_store_exclusives, t.runs_lost, t.unknown_mem) = (100, 2, 3);
        t.tco_site_overflow = 4;
        p.stats = Some(PhaseStats {
            emulated: 10,
            guest_pmu_accesses: 6,
            guest_debug_accesses: 1,
            wfx_traps: 2,
            ..PhaseStats::default()
        });
        let mut quiet = phase(4, "entry-tco", (1, 1), false);
        quiet.name = "quiet".into();
        let notes = phase_notes(&[p, quiet]);
        let all = notes.replace("\n     ", "");
        for item in [
            "3 a-phase-name-of-thirty-two-bytes: 100 failed store-exclusives (no access; a CPU may tag-check them)",
            "2 breakpoint runs lost (not counted)",
            "3 load/stores not modelled (not judged)",
            "4 TCO writes beyond the site table",
            "10 emulated after a trap (6 PMU, 1 debug-register, 2 WFI/WFE, 1 control/ID-register)",
        ] {
            assert!(all.contains(item), "{item}: {notes}");
        }
        assert!(!notes.contains("quiet"), "{notes}");
        assert!(notes.lines().count() > 1, "{notes}");
        assert!(
            notes.lines().all(|l| l.chars().count() <= COLUMNS),
            "{notes}"
        );
        // Only the kinds that occurred.
        let mut p = phase(5, "entry-tco", (1, 1), false);
        p.stats = Some(PhaseStats {
            emulated: 6,
            guest_pmu_accesses: 6,
            ..PhaseStats::default()
        });
        assert_eq!(
            phase_notes(&[p]),
            "  5 run5: 6 emulated after a trap (6 PMU)\n"
        );
    }

    #[test]
    fn debug_register_writes_are_named_and_said_once_to_be_held() {
        use mtex_abi::report::DebugWrite;
        // DBGBCR3_EL1: op0 2, op1 0, CRn 0, CRm 3, op2 5; OSLAR_EL1: op0 2, op1 0, CRn 1, CRm 0,
        // op2 4 (ISS: op0 21:20, op2 19:17, op1 16:14, CRn 13:10, CRm 4:1).
        let iss = |op1: u32, crn: u32, crm: u32, op2: u32| {
            2 << 20 | op2 << 17 | op1 << 14 | crn << 10 | crm << 1
        };
        let w = |iss, phase| DebugWrite {
            iss,
            value: 0x1e7,
            at: GuestState {
                pc: 0x4100_0010,
                el: 1,
                tco: false,
            },
            phase,
        };
        let r = Report {
            phases: vec![phase(1, "entry-tco", (1, 1), false)],
            debug_writes: vec![w(iss(0, 0, 3, 5), 1), w(iss(0, 1, 0, 4), 0), w(0, 0)],
            ..Report::default()
        };
        let all = text(&r);
        assert!(
            all.contains("  DBGBCR3_EL1 = 0x1e7 at pc 0x41000010 EL1, phase 1 run1\n"),
            "{all}"
        );
        assert!(
            all.contains("  OSLAR_EL1 = 0x1e7 at pc 0x41000010 EL1, outside any phase\n"),
            "{all}"
        );
        assert!(all.contains("  debug register ISS 0x0 = "), "{all}");
        assert_eq!(all.matches("never given to the hardware").count(), 1);
        let many = Report {
            debug_writes: vec![w(iss(0, 1, 0, 4), 0); 41],
            ..Report::default()
        };
        assert!(text(&many).contains("  ... 21 more debug-register writes"));
    }

    #[test]
    fn long_write_lists_are_cut_to_a_sample() {
        let w = |seq| Write {
            seq,
            cpu: 0,
            register: "SCTLR_EL1",
            old: 0,
            new: 1,
            changes: Vec::new(),
            at: GuestState::default(),
            ts: 0,
            phase: None,
        };
        let r = Report {
            writes: (0..45).map(w).collect(),
            ..Report::default()
        };
        assert!(text(&r).contains("  ... 25 more trapped writes (all of them are in --json)"));
        let r = Report {
            writes: (0..40).map(w).collect(),
            ..Report::default()
        };
        assert!(!text(&r).contains("more trapped writes"));
    }
}
