//! The console's bytes into a [`Report`]: every frame found is checked for damage, order
//! and repeats, then applied to the report; text outside frames is kept as other output.
//! Then each run's phases are folded into the phase that stands for the run, and the
//! figures checked (`super::checks`). Apart from the types so that the stream's rules (what
//! counts as damaged, missing or out of order) read in one place.

use super::checks::check_figures;
use super::{FieldChange, Phase, Report, Untraced, UntracedPass, Write, call_name};
use mtex_abi::Record;
use mtex_abi::frame;
use mtex_arch::fields::changed_fields;

#[cfg(test)]
mod tests;

/// Parses the console text of a run.
pub fn parse(text: &str) -> Report {
    parse_bytes(text.as_bytes())
}

/// Parses the console output of a run as it came, bytes that are not UTF-8 included. Total:
/// any input gives a report, and any damage to a record is listed in its problems.
pub fn parse_bytes(bytes: &[u8]) -> Report {
    let mut r = Report::default();
    // Sequence numbers as u64, so that nothing wraps whatever a damaged stream holds.
    let mut next_seq: u64 = 0;
    // The CPU sending the records (Record::OnCpu): the boot CPU until one says otherwise.
    let mut cpu = 0u32;
    let mut seen = std::collections::HashSet::new();
    // Records before the summary, and the summary's own sequence number.
    let mut at_summary: Option<(u64, u64)> = None;
    let mut last_end = 0;
    // Where the frames were, to tell which bytes that are not UTF-8 hit a record's line.
    let mut spans = Vec::new();
    let mut recovered = 0;
    for found in frame::scan_bytes(bytes) {
        collect_other(
            &mut r,
            bytes.get(last_end..found.offset).unwrap_or_default(),
        );
        last_end = found.end.max(last_end);
        spans.push((found.offset, found.end));
        if let Some((a, b)) = found.inserted {
            // Another writer's bytes inside the frame (the OS's console on the shared UART),
            // taken out of it by the checksum: theirs, not the record's.
            collect_other(&mut r, bytes.get(a..b).unwrap_or_default());
            recovered += 1;
        }
        let (seq, record) = match found.result {
            Ok(ok) => ok,
            Err(e) => {
                let after = match next_seq {
                    0 => "before any record".to_string(),
                    n => format!("after record {}", n - 1),
                };
                r.problems.push(format!(
                    "damaged record at byte {} ({after}): {e:?}",
                    found.offset
                ));
                continue;
            }
        };
        let seq64 = u64::from(seq);
        if r.summary.is_some() {
            r.problems.push(format!("record {seq} after the summary"));
        }
        if seq64 >= next_seq {
            if seq64 > next_seq {
                r.problems
                    .push(format!("records {next_seq}..{} missing", seq64 - 1));
            }
            next_seq = seq64 + 1;
        } else if seen.contains(&seq) {
            // Applying it again would count it twice.
            r.problems
                .push(format!("record {seq} repeated (expected {next_seq})"));
            continue;
        } else {
            r.problems
                .push(format!("record {seq} out of order (expected {next_seq})"));
        }
        seen.insert(seq);
        if matches!(record, Record::Summary(_)) {
            at_summary = Some((seen.len() as u64 - 1, seq64));
        }
        apply(&mut r, seq, record, &mut cpu);
    }
    collect_other(&mut r, bytes.get(last_end..).unwrap_or_default());
    if recovered > 0 {
        r.notes.push(format!(
            "{recovered} record(s) had other console text inside them (a UART shared with the \
             OS): each whole again once that text was taken out, as its checksum shows; the text \
             is the console's"
        ));
    }
    // The UEFI loader speaks before any record exists: its errors are why a run never began.
    let loader_errors: Vec<String> = r
        .other_output
        .iter()
        .filter_map(|l| {
            l.split_once(LOADER_ERROR)
                .map(|(_, why)| why.trim().to_string())
        })
        .map(|why| format!("the UEFI loader stopped: {why}"))
        .collect();
    r.problems.extend(loader_errors);
    match (r.summary, at_summary) {
        (Some(s), Some((before, seq))) if u64::from(s.records) != before || before != seq => {
            r.problems.push(format!(
                "the summary counts {} records before it, {before} arrived (it is record {seq})",
                s.records
            ))
        }
        (Some(_), _) => {}
        // The guest's snapshot of the records (`mtex-work results`): whole if it ends with
        // the snapshot's own record, after every record it counts.
        (None, _)
            if r.results_taken.last().is_some_and(|&(seq, t)| {
                u64::from(seq) + 1 == next_seq && u64::from(t.records) == u64::from(seq)
            }) =>
        {
            let (seq, _) = r.results_taken[r.results_taken.len() - 1];
            r.is_results_snapshot = true;
            r.notes.push(format!(
                "results taken by the guest after record {}: the run went on after this snapshot",
                seq.saturating_sub(1)
            ));
        }
        (None, _) => r
            .problems
            .push("no summary record: the run did not finish (report truncated)".to_string()),
    }
    for &(seq, t) in &r.results_taken {
        if t.lost > 0 {
            r.problems.push(format!(
                "record {seq}: {} bytes of records before it did not fit the hypervisor's results ring (they went to the UART only)",
                t.lost
            ));
        }
    }
    not_utf8(&mut r, bytes, &spans);
    fold_runs(&mut r);
    check_figures(&mut r);
    r
}

/// The console as the other writers on its UART wrote it (the OS's console, through UEFI):
/// every record taken out, and whatever landed inside a record given back where it landed.
pub fn console_without_records(bytes: &[u8]) -> String {
    let mut out = Vec::with_capacity(bytes.len());
    let mut last = 0;
    for found in frame::scan_bytes(bytes) {
        out.extend_from_slice(bytes.get(last..found.offset).unwrap_or_default());
        if let Some((a, b)) = found.inserted {
            out.extend_from_slice(bytes.get(a..b).unwrap_or_default());
        }
        last = found.end.max(last);
    }
    out.extend_from_slice(bytes.get(last..).unwrap_or_default());
    String::from_utf8_lossy(&out).into_owned()
}

/// How the UEFI loader (loader/) starts an error line on the console.
pub const LOADER_ERROR: &str = "mtex-loader: error: ";

/// Lists bytes that are not UTF-8: a problem when they sit on a line that holds a record (the
/// record may be damaged), a note elsewhere. `spans` are the frames' byte ranges, in order.
fn not_utf8(r: &mut Report, bytes: &[u8], spans: &[(usize, usize)]) {
    // (bytes, first offset) on record lines and elsewhere.
    let mut hit: (usize, Option<usize>) = (0, None);
    let mut other: (usize, Option<usize>) = (0, None);
    let mut at = 0;
    // The line of the last bad bytes, and whether it holds a frame.
    let mut line: Option<(usize, usize, bool)> = None;
    for chunk in bytes.utf8_chunks() {
        at += chunk.valid().len();
        let bad = chunk.invalid().len();
        if bad == 0 {
            continue;
        }
        let on_record_line = match line {
            Some((_, end, framed)) if at < end => framed,
            _ => {
                let start = bytes[..at]
                    .iter()
                    .rposition(|&b| b == b'\n')
                    .map_or(0, |n| n + 1);
                let end = bytes[at..]
                    .iter()
                    .position(|&b| b == b'\n')
                    .map_or(bytes.len(), |n| at + n);
                // The first frame ending after the line starts: does it begin before it ends?
                let i = spans.partition_point(|&(_, e)| e <= start);
                let framed = spans.get(i).is_some_and(|&(o, _)| o < end);
                line = Some((start, end, framed));
                framed
            }
        };
        let tally = if on_record_line { &mut hit } else { &mut other };
        tally.0 += bad;
        tally.1.get_or_insert(at);
        at += bad;
    }
    if let (n @ 1.., Some(first)) = hit {
        r.problems.push(format!(
            "console: {n} bytes were not UTF-8 on lines holding records (first at byte {first}): those records may be damaged"
        ));
    }
    if let (n @ 1.., Some(first)) = other {
        r.notes.push(format!(
            "console: {n} bytes were not UTF-8 in text outside records (first at byte {first}), shown as U+FFFD"
        ));
    }
}

fn collect_other(r: &mut Report, bytes: &[u8]) {
    r.other_output.extend(
        String::from_utf8_lossy(bytes)
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(String::from),
    );
}

/// Applies one record; `cpu` is the CPU sending (`Record::OnCpu`), 0 until one says.
fn apply(r: &mut Report, seq: u32, record: Record, cpu: &mut u32) {
    match record {
        Record::OnCpu(o) => *cpu = o.cpu,
        Record::ResultsTaken(t) => r.results_taken.push((seq, t)),
        Record::Boot(b) => r.boot = Some(b),
        Record::PhaseBegin(p) => {
            r.phases_begun += 1;
            r.phases.push(Phase {
                id: p.id,
                name: p.name.as_str().to_string(),
                params: p.params,
                begin_ts: p.ts,
                begin: p.at,
                end_ts: None,
                end: None,
                ..Phase::default()
            })
        }
        Record::PhaseEnd(e) => match r.phases.iter_mut().rev().find(|p| p.id == e.id) {
            Some(p) if p.stats.is_none() => {
                p.end_ts = Some(e.ts);
                p.end = Some(e.at);
                p.stats = Some(e.stats);
            }
            _ => r.problems.push(format!(
                "record {seq}: end of phase {} that was not open",
                e.id
            )),
        },
        Record::SysregWrite(w) => {
            let phase = if w.phase == 0 {
                None
            } else {
                r.phase_name(w.phase)
            };
            r.writes.push(Write {
                seq,
                cpu: *cpu,
                register: w.reg.name(),
                old: w.old,
                new: w.new,
                changes: changed_fields(w.reg, w.old, w.new)
                    .map(|c| FieldChange {
                        field: c.field.name,
                        old: c.field.value_name(c.old),
                        new: c.field.value_name(c.new),
                    })
                    .collect(),
                at: w.at,
                ts: w.ts,
                phase,
            });
        }
        Record::PhaseTrace(t) => match r.phases.iter_mut().rev().find(|p| p.id == t.id) {
            Some(p) if p.trace.is_none() => p.trace = Some(t.counts),
            _ => r.problems.push(format!(
                "record {seq}: trace of phase {} that was not open",
                t.id
            )),
        },
        Record::PhaseClock(c) => match r.phases.iter_mut().rev().find(|p| p.id == c.id) {
            Some(p) if p.stats.is_none() => {
                *(if c.end {
                    &mut p.end_guest_clock
                } else {
                    &mut p.begin_guest_clock
                }) = Some(c.guest_clock)
            }
            _ => r.problems.push(format!(
                "record {seq}: guest clock of phase {} that was not open",
                c.id
            )),
        },
        Record::TraceMore(a) => match more_counts_of(&mut r.phases, a.id) {
            Some(t) => {
                (t.abandoned_el0, t.abandoned_el1) = (a.abandoned_el0, a.abandoned_el1);
                (t.trapped_el0, t.trapped_el1) = (a.trapped_el0, a.trapped_el1);
            }
            None => r.problems.push(format!(
                "record {seq}: more trace counts of phase {} that has no trace",
                a.id
            )),
        },
        Record::TraceImpdef(a) => match more_counts_of(&mut r.phases, a.id) {
            Some(t) => {
                t.failed_cas = a.failed_cas;
                t.exclusive_pairs_mixed = a.exclusive_pairs_mixed;
                t.tagged_impdef = a.tagged_impdef;
            }
            None => r.problems.push(format!(
                "record {seq}: IMPLEMENTATION DEFINED counts of phase {} that has no trace",
                a.id
            )),
        },
        Record::PcProfile(e) => match r.phases.iter_mut().rev().find(|p| p.id == e.id) {
            Some(p) => {
                let profile = p.profile.get_or_insert_default();
                if e.other {
                    profile.other.push(e.entry);
                } else {
                    profile.pcs.push(e.entry);
                }
            }
            None => r
                .problems
                .push(format!("record {seq}: profile of unknown phase {}", e.id)),
        },
        Record::PcProfileEnd(e) => match r.phases.iter_mut().rev().find(|p| p.id == e.id) {
            Some(p) => p.profile.get_or_insert_default().end = Some(e),
            None => r.problems.push(format!(
                "record {seq}: profile end of unknown phase {}",
                e.id
            )),
        },
        Record::StackNode(n) => match r.phases.iter_mut().rev().find(|p| p.id == n.id) {
            Some(p) => p.profile.get_or_insert_default().stacks.push(n),
            None => r.problems.push(format!(
                "record {seq}: call stack of unknown phase {}",
                n.id
            )),
        },
        Record::StackEnd(e) => match r.phases.iter_mut().rev().find(|p| p.id == e.id) {
            Some(p) => p.profile.get_or_insert_default().stack_end = Some(e),
            None => r.problems.push(format!(
                "record {seq}: call stacks' end of unknown phase {}",
                e.id
            )),
        },
        Record::TcoSite(s) => match r.phases.iter_mut().rev().find(|p| p.id == s.phase) {
            Some(p) => p.tco_sites.push(s),
            None => r.problems.push(format!(
                "record {seq}: TCO site of unknown phase {}",
                s.phase
            )),
        },
        Record::Console(t) => r.console.push(t.as_str().to_string()),
        Record::UnknownCall(c) => r.unknown_calls.push(c),
        Record::GuestPmuEvent(e) => r.problems.push(format!(
            "CPU {} programmed its PMU counter {} with event {:#06x} ({}) at pc {:#x}, which \
             this CPU does not implement: that counter counts nothing, and perf inside the \
             guest would print 0 for it (mtex's own counts of the same accesses are in this \
             report)",
            e.cpu,
            e.counter,
            e.event,
            mtex_abi::report::pmu_event::name(e.event).unwrap_or("an MTE event"),
            e.at.pc
        )),
        Record::PowerCall(c) => {
            r.power_call_phases_begun.push(r.phases_begun);
            r.power_calls.push(c)
        }
        Record::SampleUnit(u) => match r.phases.iter_mut().rev().find(|p| p.id == u.id) {
            Some(p) if p.end.is_none() && p.trace.is_none() => {
                let s = p.sampled.get_or_insert_default();
                s.stretches.push(u);
                s.stretch_cpus.push(*cpu);
            }
            _ => r.problems.push(format!(
                "record {seq}: a sampled unit of phase {}, which was not open or was traced",
                u.id
            )),
        },
        Record::PhaseSampled(h) => match r.phases.iter_mut().rev().find(|p| p.id == h.id) {
            Some(p) if p.end.is_none() && p.sampled.as_ref().is_none_or(|s| s.how.is_none()) => {
                let s = p.sampled.get_or_insert_default();
                let units = s.units().count();
                if units != h.units as usize {
                    r.problems.push(format!(
                        "phase {} ({}): {units} sampled units sent, its record says {}",
                        p.id, p.name, h.units
                    ));
                }
                s.how = Some(h);
            }
            _ => r.problems.push(format!(
                "record {seq}: how phase {} was sampled, which was not open or had said it",
                h.id
            )),
        },
        // A guarded phase's iterations, counted by the hypervisor at its harness's own call:
        // a loop that did not run as the harness said is not the measurement it claims.
        Record::PhaseIterations(it) => match r.phases.iter_mut().rev().find(|p| p.id == it.id) {
            Some(p) if p.iterations.is_none() => {
                if it.counted != it.wanted {
                    r.problems.push(format!(
                        "phase {} ({}): {} of the {} iterations its harness makes were made, \
                         as the hypervisor counted them at the harness's own call after each; \
                         its counts are not those of {} iterations",
                        p.id, p.name, it.counted, it.wanted, it.wanted
                    ));
                }
                p.iterations = Some(it);
            }
            _ => r.problems.push(format!(
                "record {seq}: iterations of phase {}, which was not open or had them already",
                it.id
            )),
        },
        Record::GuestPmuCounted(g) => match r.phases.iter_mut().rev().find(|p| p.id == g.phase) {
            // A CPU that powered off and on again in a window hands in twice: both count.
            Some(p) if p.stats.is_none() => p.guest_pmu.push(g),
            _ => r.problems.push(format!(
                "record {seq}: CPU {}'s guest PMU counts of phase {}, which was not open",
                g.cpu, g.phase
            )),
        },
        Record::GuestPmuInexact(e) => r.problems.push(super::describe::guest_pmu_inexact(&e)),
        Record::LockWait(l) => match r.phases.iter_mut().rev().find(|p| p.id == l.id) {
            Some(p) if p.stats.is_none() && !p.lock_waits.iter().any(|o| o.cpu == l.cpu) => {
                p.lock_waits.push(l)
            }
            _ => r.problems.push(format!(
                "record {seq}: CPU {}'s lock wait in phase {}, which was not open or had it \
                 already",
                l.cpu, l.id
            )),
        },
        Record::CpuSampled(c) => match r.phases.iter_mut().rev().find(|p| p.id == c.id) {
            Some(p)
                if p.end.is_none()
                    && p.trace.is_none()
                    && !p
                        .sampled
                        .as_ref()
                        .is_some_and(|s| s.shares.iter().any(|o| o.cpu == c.cpu)) =>
            {
                let s = p.sampled.get_or_insert_default();
                let units = s.stretches_on(c.cpu).filter(|u| !u.lead).count();
                if units != c.sampled.units as usize {
                    r.problems.push(format!(
                        "phase {} ({}): CPU {} sent {units} sampled units, its share says {}",
                        p.id, p.name, c.cpu, c.sampled.units
                    ));
                }
                let at = s.shares.partition_point(|o| o.cpu < c.cpu);
                s.shares.insert(at, c)
            }
            _ => r.problems.push(format!(
                "record {seq}: CPU {}'s sampled share of phase {}, which was not open or had it \
                 already",
                c.cpu, c.id
            )),
        },
        Record::CpuTrace(c) => match r.phases.iter_mut().rev().find(|p| p.id == c.id) {
            Some(p) if p.trace.is_none() && !p.cpus.iter().any(|o| o.cpu == c.cpu) => {
                // The CPUs' shares arrive in the order they end; every output lists them by
                // CPU number.
                let at = p.cpus.partition_point(|o| o.cpu < c.cpu);
                p.cpus.insert(at, c)
            }
            _ => r.problems.push(format!(
                "record {seq}: CPU {}'s share of phase {}, which was not open or had it already",
                c.cpu, c.id
            )),
        },
        // The guest meant to measure a phase that would have counted one CPU of several.
        Record::PhaseRefused(p) => r.problems.push(format!(
            "PHASE_BEGIN of phase {} at pc {:#x} EL{} refused: {} CPUs were on or starting, \
             and only a traced phase without a per-PC profile, opened with every CPU on, is \
             counted on all of them",
            p.id,
            p.at.pc.wrapping_sub(4),
            p.at.el,
            p.cpus_on
        )),
        // A workload's mistake with the doorbell: the window it meant is not what ran.
        Record::DoorbellRefused(d) => r.problems.push(format!(
            "doorbell store of {:#x} at offset {:#x} refused ({}) at pc {:#x} EL{}{}",
            d.value,
            d.offset,
            d.why.describe(),
            d.at.pc,
            d.at.el,
            if d.open != 0 {
                format!(", window {} open", d.open)
            } else {
                String::new()
            }
        )),
        // Code inside a guarded phase (a snippet) tried to end it, open another or end the
        // run: refused, and the run cannot be taken as it would have been.
        Record::CallRefused(c) => r.problems.push(format!(
            "{} call {} by the code at pc {:#x} EL{} refused: while phase {} is open only its \
             harness may make calls",
            match c.conduit {
                mtex_abi::report::Conduit::Hvc => "HVC",
                mtex_abi::report::Conduit::Smc => "SMC",
            },
            call_name(c.function),
            c.at.pc.wrapping_sub(4),
            c.at.el,
            c.phase
        )),
        Record::DebugWrite(w) => r.debug_writes.push(w),
        Record::Summary(s) => r.summary = Some(s),
        Record::StepEngine(e) => r.engines.push(e),
        Record::TcoWatch(w) => match r.phases.iter_mut().rev().find(|p| p.id == w.id) {
            Some(p) if p.tco_watch.is_none() => p.tco_watch = Some(w),
            _ => r.problems.push(format!(
                "record {seq}: TCO watch of phase {} that was not open",
                w.id
            )),
        },
        Record::PhasePmu(m) => match r.phases.iter_mut().rev().find(|p| p.id == m.id) {
            Some(p) if p.pmu_record.is_none() => p.pmu_record = Some(m),
            _ => r.problems.push(format!(
                "record {seq}: PMU figures of phase {} that was not open",
                m.id
            )),
        },
    }
}

/// Folds each run's phases into one: its untraced passes go into `untraced` of the phase
/// that stands for the run (its traced phase; or its first pass when it is not traced), and
/// only that phase stays in `phases`. Runs are told apart by the hypervisor's serial number,
/// whatever ids the guest gave; phases without a PMU record (older logs) stay as they are.
fn fold_runs(r: &mut Report) {
    use std::collections::{BTreeMap, HashSet};
    let mut passes: BTreeMap<u32, Untraced> = BTreeMap::new();
    for p in &r.phases {
        let Some(m) = p.pmu_record.filter(|m| m.pass > 0) else {
            continue;
        };
        let u = passes.entry(m.run).or_insert_with(|| Untraced {
            passes: m.passes,
            runs: Vec::new(),
        });
        u.runs.push(UntracedPass {
            id: p.id,
            begin_ts: p.begin_ts,
            end_ts: p.end_ts,
            stats: p.stats,
            counts: m.counts.iter().flatten().copied().collect(),
            tco_watch: p.tco_watch,
            tco_sites: if p.tco_watch.is_some() {
                p.tco_sites.clone()
            } else {
                Vec::new()
            },
        });
    }
    let traced: HashSet<u32> = r
        .phases
        .iter()
        .filter_map(|p| p.pmu_record.filter(|m| m.pass == 0).map(|m| m.run))
        .collect();
    r.phases.retain_mut(|p| {
        let Some(m) = p.pmu_record else {
            return true;
        };
        let stands_for_run = m.pass == 0 || (m.pass == 1 && !traced.contains(&m.run));
        if stands_for_run {
            p.untraced = passes.remove(&m.run);
        }
        stands_for_run
    });
}

/// The counts a TraceMore or TraceImpdef record of phase `id` completes: its trace's, or a
/// sampled phase's unit (or lead) just before it.
fn more_counts_of(phases: &mut [Phase], id: u32) -> Option<&mut mtex_trace::counts::TraceCounts> {
    phases.iter_mut().rev().find(|p| p.id == id).and_then(|p| {
        match (&mut p.trace, &mut p.sampled) {
            (Some(t), _) => Some(t),
            (None, Some(s)) if p.end.is_none() => s.stretches.last_mut().map(|u| &mut u.counts),
            _ => None,
        }
    })
}
