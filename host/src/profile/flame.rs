//! Flame graphs (SVG, by inferno, as cargo-flamegraph draws them) of a profiled phase's
//! headline counters, next to their folded files: `<phase dir>/<counter>.svg`. Every
//! function is drawn, however narrow (no minimum width), so the graph leaves nothing out.

use super::folded::{file_stem, lines, phase_dir, rows};
use super::functions::FunctionRow;
use crate::model::results::{PhaseOut, Results, Run};
use crate::output::full::{phase_title, run_label};
use crate::output::text::thousands;
use inferno::flamegraph::{self, Options};

/// The graphs of a phase: (counter, path relative to the results directory) of each
/// headline counter that is not zero.
pub fn graphs(run: &Run, index: usize, p: &PhaseOut) -> Vec<(&'static str, String)> {
    if p.functions.is_empty() {
        return Vec::new();
    }
    let dir = phase_dir(run, index, p);
    super::text::HEADLINE
        .iter()
        .filter(|c| total(&p.functions, c) != 0)
        .map(|&c| (c, format!("{dir}/{}.svg", file_stem(c))))
        .collect()
}

fn total(rows: &[FunctionRow], counter: &str) -> u64 {
    rows.iter().map(|r| r.get(counter)).sum()
}

/// `counter`'s flame graph of `rows`, titled `title`.
pub fn svg(title: &str, rows: &[FunctionRow], counter: &str) -> anyhow::Result<String> {
    let folded = lines(rows, counter);
    let mut opt = Options::default();
    opt.title = title.to_string();
    opt.subtitle = Some(format!(
        "{} {counter}: each function's width is its share",
        thousands(total(rows, counter))
    ));
    opt.count_name = "accesses".into();
    opt.name_type = "Function:".into();
    opt.hash = true;
    opt.deterministic = true;
    opt.min_width = 0.0;
    let mut out = Vec::new();
    flamegraph::from_lines(&mut opt, folded.lines(), &mut out)?;
    Ok(String::from_utf8(out)?)
}

/// Every flame graph of `doc`: (path relative to the results directory, SVG).
pub fn files(doc: &Results) -> anyhow::Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    for run in &doc.runs {
        for (i, p) in run.phases.iter().enumerate() {
            for (counter, path) in graphs(run, i, p) {
                let title = format!("{}, {}: {counter}", phase_title(p), run_label(doc, run));
                out.push((path, svg(&title, rows(p), counter)?));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_graph_per_headline_counter_is_well_formed_xml_naming_the_functions() {
        let doc = crate::profile::fixture::results();
        let files = files(&doc).unwrap();
        let names: Vec<_> = files.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(
            names,
            [
                "profile/run-1/1-futex-hash/mem_access_checked_rd_k.svg",
                "profile/run-1/1-futex-hash/mem_access_checked_wr_k.svg",
                "profile/run-1/1-futex-hash/mem_access_checked_rd_u.svg",
                "profile/run-1/1-futex-hash/mem_access_checked_wr_u.svg",
                "profile/run-1/1-futex-hash/if_tcma1.mem_access_checked_rd_k.svg",
                "profile/run-1/1-futex-hash/tcf_elided.mem_access_checked_rd_k.svg",
            ]
        );
        let (_, svg) = &files[0];
        let mut reader = quick_xml::Reader::from_str(svg);
        loop {
            match reader.read_event() {
                Ok(quick_xml::events::Event::Eof) => break,
                Ok(_) => {}
                Err(e) => panic!("not XML at {}: {e}", reader.buffer_position()),
            }
        }
        assert!(svg.contains("kfunc_24"), "{svg}");
        assert!(svg.contains("mem_access_checked_rd:k"), "{svg}");
        assert!(svg.contains("futex-hash"), "{svg}");
    }
}
