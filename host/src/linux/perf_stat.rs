//! `perf stat` inside the guest, beside mtex: the figures perf printed in a window for the
//! MTE events (`mem_access_checked`, `_rd`, `_wr`, by name or as `r4024`–`r4026`) and
//! what the guest's own PMU counters counted for the same events and ELs in that window,
//! which the hypervisor kept from the trace (`guest_pmu.*`). One engine feeds both, so they
//! must be equal: a difference, or a figure perf scaled (it multiplexed the event) or did
//! not count, is a problem of the run.

use mtex_abi::options::GuestEventsView;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One event of perf's, beside mtex's figure for it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PerfBeside {
    /// As perf printed it (`mem_access_checked_rd:u`).
    pub event: String,
    /// Its figure (summed over the lines perf printed for it); None where perf printed
    /// `<not counted>` or `<not supported>`.
    pub perf: Option<u64>,
    /// perf scaled it: it printed the share of the time the event was on a counter.
    pub scaled: bool,
    /// The report's counter for the same event and ELs (in the view the guest's counters
    /// counted), and its value in the window.
    pub counter: String,
    pub mtex: u64,
}

/// The report's counter for perf's event name in `view`: `guest_pmu.EVENT:u|k|uk`; None for
/// an event that is not one of the three, or modifiers other than `u` and `k`.
pub fn counter_of(event: &str, view: GuestEventsView) -> Option<String> {
    use mtex_abi::report::pmu_event;
    // `armv8_pmuv3_0/mem_access_checked_rd/u`, or `mem_access_checked_rd:u`.
    let (name, modifiers) = match event.split('/').collect::<Vec<_>>()[..] {
        [_pmu, name, modifiers] => (name, modifiers),
        [name] => event.split_once(':').map_or((name, ""), |(n, m)| (n, m)),
        _ => return None,
    };
    let number = match name.strip_prefix('r') {
        Some(hex) if u16::from_str_radix(hex, 16).is_ok() => u16::from_str_radix(hex, 16).ok()?,
        _ => *mtex_abi::counters::GUEST_PMU_EVENTS
            .iter()
            .find(|&&e| pmu_event::name(e) == Some(name))?,
    };
    if !mtex_abi::counters::GUEST_PMU_EVENTS.contains(&number) {
        return None;
    }
    let (u, k) = (modifiers.contains('u'), modifiers.contains('k'));
    if modifiers.chars().any(|c| c != 'u' && c != 'k') {
        return None;
    }
    let els = match (u, k) {
        (true, false) => 0,
        (false, true) => 1,
        _ => 2,
    };
    Some(crate::model::results::guest_pmu_name(view, number, els))
}

/// perf stat's lines for the MTE events in `output`: (event, figure, scaled).
fn lines(output: &[String]) -> Vec<(String, Option<u64>, bool)> {
    output
        .iter()
        .filter_map(|l| {
            let l = l.trim();
            let (figure, rest) = if let Some(rest) = l
                .strip_prefix("<not counted>")
                .or_else(|| l.strip_prefix("<not supported>"))
            {
                (None, rest)
            } else {
                let (value, rest) = l.split_once(char::is_whitespace)?;
                let digits: String = value.chars().filter(|&c| c != ',').collect();
                (Some(digits.parse::<u64>().ok()?), rest)
            };
            let mut words = rest.split_whitespace();
            let event = words.next()?;
            counter_of(event, GuestEventsView::Architectural)?;
            let scaled = rest.contains('(') && rest.trim_end().ends_with("%)");
            Some((event.to_string(), figure, scaled))
        })
        .collect()
}

/// perf's figures in a window's output beside the window's counters, those of the guest's
/// counters in `view` (None: the guest's counters counted nothing there, the default view).
pub fn beside(
    output: &[String],
    counters: &BTreeMap<String, u64>,
    view: Option<GuestEventsView>,
) -> Vec<PerfBeside> {
    let view = view.unwrap_or(GuestEventsView::Architectural);
    let mut out: Vec<PerfBeside> = Vec::new();
    for (event, figure, scaled) in lines(output) {
        let counter = counter_of(&event, view).expect("only the events' lines are read");
        match out.iter_mut().find(|b| b.event == event) {
            Some(b) => {
                b.perf = b.perf.zip(figure).map(|(a, f)| a + f);
                b.scaled |= scaled;
            }
            None => out.push(PerfBeside {
                mtex: counters.get(&counter).copied().unwrap_or(0),
                event,
                perf: figure,
                scaled,
                counter,
            }),
        }
    }
    out
}

/// What in `rows` (window `id`'s) is not a count equal to mtex's.
pub fn problems(id: u32, rows: &[PerfBeside]) -> Vec<String> {
    rows.iter()
        .filter_map(|b| {
            let head = format!("window {id}: perf stat's {}", b.event);
            match b.perf {
                None => Some(format!(
                    "{head} was not counted (mtex's {} is {})",
                    b.counter, b.mtex
                )),
                Some(_) if b.scaled => Some(format!(
                    "{head} was scaled by perf (it multiplexed the event onto a counter part \
                     of the time): an estimate, not the count (mtex's {} is {})",
                    b.counter, b.mtex
                )),
                Some(v) if v != b.mtex => Some(format!(
                    "{head} is {v}, mtex's {} is {}: the guest's PMU and the trace disagree",
                    b.counter, b.mtex
                )),
                Some(_) => None,
            }
        })
        .collect()
}

/// The window's lines: perf's figure beside mtex's, and whether they agree.
pub fn text(rows: &[PerfBeside]) -> String {
    use crate::output::text::thousands;
    use std::fmt::Write;
    if rows.is_empty() {
        return String::new();
    }
    let view = if rows.iter().any(|b| b.counter.contains(".tcf_elided.")) {
        "the Arm cores' view: only where TCF is not NONE"
    } else {
        "the architecture's view, as AmpereOne's PMU counts"
    };
    let mut out = format!(
        "  perf stat inside the guest, beside mtex's count of the same events (the guest's PMU \
         counters, kept by the hypervisor from the trace; {view}):\n"
    );
    let width = rows.iter().map(|b| b.event.len()).max().unwrap_or(0);
    for b in rows {
        let perf = b.perf.map_or("<not counted>".into(), thousands);
        let verdict = match b.perf {
            Some(v) if v == b.mtex && !b.scaled => "equal",
            Some(_) if b.scaled => "SCALED by perf",
            _ => "DIFFERENT",
        };
        let _ = writeln!(
            out,
            "    {:<width$}  perf {perf:>12}  mtex {:>12}  {verdict}",
            b.event,
            thousands(b.mtex)
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn out(lines: &[&str]) -> Vec<String> {
        lines.iter().map(|l| l.to_string()).collect()
    }

    #[test]
    fn perf_names_map_to_the_report_counters() {
        let c = |e: &str| counter_of(e, GuestEventsView::Architectural);
        assert_eq!(
            c("mem_access_checked_rd:u").as_deref(),
            Some("guest_pmu.mem_access_checked_rd:u")
        );
        assert_eq!(
            c("mem_access_checked:k").as_deref(),
            Some("guest_pmu.mem_access_checked:k")
        );
        assert_eq!(
            c("mem_access_checked_wr").as_deref(),
            Some("guest_pmu.mem_access_checked_wr:uk")
        );
        assert_eq!(
            c("armv8_pmuv3_0/mem_access_checked_wr/u").as_deref(),
            Some("guest_pmu.mem_access_checked_wr:u")
        );
        assert_eq!(
            c("r4025:k").as_deref(),
            Some("guest_pmu.mem_access_checked_rd:k")
        );
        assert_eq!(c("cycles:k"), None);
        assert_eq!(c("r11:k"), None);
        // A modifier the hypervisor's counters do not keep apart (`h`, `G`, `p`...): no
        // counter to compare with.
        assert_eq!(c("mem_access_checked_rd:kh"), None);
        // The Arm cores' view has its own names.
        assert_eq!(
            counter_of("mem_access_checked_rd:k", GuestEventsView::TcfElided).as_deref(),
            Some("guest_pmu.tcf_elided.mem_access_checked_rd:k")
        );
    }

    #[test]
    fn perfs_figures_are_read_beside_mtexs_and_compared() {
        let output = out(&[
            " Performance counter stats for 'perf bench futex hash -r 0':",
            "",
            "             1,234      mem_access_checked_rd:u",
            "                 5      mem_access_checked_rd:k",
            "     <not counted>      mem_access_checked_wr:u",
            "                 9      mem_access_checked_wr:k          (50.00%)",
            "               100      cycles:k",
            "       0.012345678 seconds time elapsed",
        ]);
        let counters = BTreeMap::from([
            ("guest_pmu.mem_access_checked_rd:u".to_string(), 1234),
            ("guest_pmu.mem_access_checked_rd:k".to_string(), 6),
        ]);
        let rows = beside(&output, &counters, Some(GuestEventsView::Architectural));
        assert_eq!(rows.len(), 4);
        assert_eq!(
            (rows[0].perf, rows[0].mtex, rows[0].scaled),
            (Some(1234), 1234, false)
        );
        assert_eq!(rows[2].perf, None);
        assert!(rows[3].scaled);
        let p = problems(2, &rows);
        assert_eq!(p.len(), 3, "{p:#?}");
        assert!(p[0].contains("window 2: perf stat's mem_access_checked_rd:k is 5, mtex's"));
        assert!(p[1].contains("was not counted"));
        assert!(p[2].contains("scaled"));
        // A window where perf printed nothing of them: nothing to compare.
        assert!(beside(&out(&["hello"]), &counters, None).is_empty());
    }
}
