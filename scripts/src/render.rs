//! The readable report: phases, then every trapped write with its decoded MTE fields.

use crate::report::{Report, describe_exit};
use comfy_table::{Table, presets::UTF8_BORDERS_ONLY};
use mtex_abi::report::TrapMode;
use std::fmt::Write as _;

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
            "mtex: hypervisor {:#x}..{:#x}, guest entry {:#x}, dtb {:#x}\n      traps: {traps}; counter {} Hz; watchdog {} ms; PMU instruction counts: {}",
            b.hyp_start,
            b.hyp_end,
            b.guest_entry,
            b.guest_dtb,
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
    if !r.phases.is_empty() {
        let mut t = Table::new();
        t.load_preset(UTF8_BORDERS_ONLY).set_header(vec![
            "phase",
            "exits",
            "exits with TCO",
            "trapped writes",
            "EL2 instr",
            "EL1 instr",
            "EL0 instr",
            "TCO at end",
        ]);
        for p in &r.phases {
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
        let _ = writeln!(out, "\nPhases\n{t}");
    }
    let traces = trace_table(r);
    if !traces.is_empty() {
        let _ = write!(out, "\n{traces}");
    }
    if !r.writes.is_empty() {
        let mut t = Table::new();
        t.load_preset(UTF8_BORDERS_ONLY).set_header(vec![
            "seq",
            "phase",
            "register",
            "old → new",
            "MTE fields changed",
            "pc",
            "EL",
            "TCO",
        ]);
        for w in &r.writes {
            let changes = w
                .changes
                .iter()
                .map(|c| format!("{} {}→{}", c.field, c.old, c.new))
                .collect::<Vec<_>>()
                .join(", ");
            t.add_row(vec![
                w.seq.to_string(),
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
        }
        let _ = writeln!(out, "\nTrapped writes\n{t}");
    }
    for c in &r.unknown_calls {
        let _ = writeln!(
            out,
            "\nunknown call {:#x} by {:?} at pc {:#x}: answered NOT_SUPPORTED",
            c.function, c.conduit, c.at.pc
        );
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
            let _ = writeln!(out, "\nEnd: no summary record");
        }
    }
    for p in &r.problems {
        let _ = writeln!(out, "PROBLEM: {p}");
    }
    out
}

/// The trace counter's figures, one row per traced phase: the architectural and TCF-elided
/// views side by side with perf's event names, then the counterfactual kernel counts.
pub fn trace_table(r: &Report) -> String {
    let traced: Vec<_> = r.phases.iter().filter(|p| p.trace.is_some()).collect();
    if traced.is_empty() {
        return String::new();
    }
    let mut table = Table::new();
    table.load_preset(UTF8_BORDERS_ONLY).set_header(vec![
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
            format!("{} {}", p.id, p.name),
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
        for s in &p.tco_sites {
            let _ = writeln!(
                notes,
                "  {}: MSR TCO, #{} at {:#x}, {} times",
                p.name, s.value as u8, s.pc, s.count
            );
        }
        if t.unknown_mem > 0 || t.tco_site_overflow > 0 {
            let _ = writeln!(
                notes,
                "  {}: NOTE {} load/store encodings not modelled; {} TCO writes beyond the site table",
                p.name, t.unknown_mem, t.tco_site_overflow
            );
        }
    }
    format!(
        "Tag-checked accesses (trace; arch = architectural, AmpereOne-like; elided = only when TCF is not NONE, Arm cores and QEMU)\n{table}\n{notes}"
    )
}
