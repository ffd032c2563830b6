//! The results page (`index.html` in every results directory): the summary tables, the
//! expectations and problems, the plots inline, every trapped write with its kernel symbol,
//! every phase's counters folded away, and links to the files beside it. One file with no
//! external asset and no script, so that it opens from a USB stick on a server.

use crate::model::results::{Results, Run};
use crate::output::full::{phase_title, run_label};
use crate::output::summary::{self, COLUMNS};
use crate::output::text::thousands;
use anyhow::Result;
use html_escape::{encode_double_quoted_attribute as attr, encode_text as text};
use std::fmt::Write;

const STYLE: &str = "
body { font-family: sans-serif; margin: 1.5em auto; max-width: 76em; padding: 0 1em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 1.6em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: 0.4em 0 1em; font-size: 0.9em; }
th, td { padding: 0.15em 0.6em; border-bottom: 1px solid #e4e4e4; }
th { background: #f2f2f2; } td:first-child { white-space: nowrap; } td.n { text-align: right; font-variant-numeric: tabular-nums; }
caption { text-align: left; font-weight: bold; padding: 0.3em 0; }
.ok { color: #176117; } .bad { color: #a11; font-weight: bold; }
.legend { font-size: 0.85em; color: #555; max-width: 60em; }
code, pre, td.mono { font-family: monospace; }
svg { max-width: 100%; height: auto; display: block; margin: 0.5em 0; }
details { margin: 0.3em 0; }
";

/// The page for `doc`.
pub fn page(doc: &Results) -> Result<String> {
    page_with(doc, &summary::tables(doc), "policy", &[])
}

/// The page for `doc` with the summary's `groups` (rows named under `label_header`), and
/// `preface` lines (text) said first.
pub fn page_with(
    doc: &Results,
    groups: &[summary::Group],
    label_header: &str,
    preface: &[String],
) -> Result<String> {
    let mut h = String::new();
    let title = match &doc.scenario {
        Some(s) => format!("mtex results: {s}"),
        None => "mtex results".to_string(),
    };
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>{}</h1>\n",
        text(&title),
        text(&title)
    );
    let _ = writeln!(
        h,
        "<p id=\"verdict\" class=\"{}\">{}</p>",
        if doc.success { "ok" } else { "bad" },
        if doc.success {
            "success: every run succeeded and every expectation held"
        } else {
            "FAILED: a run failed or an expectation did not hold"
        }
    );
    let _ = writeln!(
        h,
        "<p>{} ({} v{}) · files: <a href=\"report.txt\">report.txt</a> · \
         <a href=\"report.json\">report.json</a> · <a href=\"report.csv\">report.csv</a></p>",
        text(&doc.mtex),
        text(&doc.schema),
        doc.version
    );
    for l in preface {
        let _ = writeln!(h, "<p>{}</p>", text(l));
    }
    summary_tables(&mut h, groups, label_header);
    // Sampled phases: estimates with their intervals, never in the exact tables.
    let sampled = summary::sampled_lines(doc);
    if !sampled.is_empty() {
        let _ = writeln!(
            h,
            "<pre class=\"sampled\">{}</pre>",
            text(&sampled.join("\n"))
        );
    }
    expectations_and_problems(&mut h, doc);
    plots(&mut h, doc)?;
    flame_graphs(&mut h, doc);
    for run in &doc.runs {
        run_section(&mut h, doc, run);
    }
    if let Some(r) = crate::linux::report::LinuxView::of(doc) {
        // Every section of the text report: each window in every view, by function, the
        // oracle's verdict, the writes by kernel function, what the kernel left set.
        let _ = writeln!(
            h,
            "<h2 id=\"linux\">Linux: every window and write</h2>\n<pre>{}</pre>",
            text(&crate::linux::report::render(&r))
        );
    }
    h.push_str("</body>\n</html>\n");
    Ok(h)
}

fn summary_tables(h: &mut String, groups: &[summary::Group], label_header: &str) {
    h.push_str("<h2 id=\"summary\">Summary</h2>\n");
    if groups.is_empty() {
        h.push_str("<p>No traced phase: no table of counts.</p>\n");
        return;
    }
    for g in groups {
        let _ = write!(
            h,
            "<table class=\"summary\">\n<caption>{}</caption>\n<thead><tr><th>{}</th>",
            text(&g.title),
            text(label_header)
        );
        for c in COLUMNS {
            let name = if c.top.is_empty() || c.top == "checked" {
                format!("checked {}", c.bottom)
            } else {
                format!("{} {}", c.top, c.bottom)
            };
            let _ = write!(
                h,
                "<th title=\"{}\">{}</th>",
                attr(&c.counters.join(" + ")),
                text(&name)
            );
        }
        h.push_str("<th>vs first</th></tr></thead>\n<tbody>\n");
        for r in &g.rows {
            let _ = write!(h, "<tr><td>{}</td>", text(&r.label));
            for v in &r.cells {
                let v = v.map_or_else(|| "-".to_string(), thousands);
                let _ = write!(h, "<td class=\"n\">{v}</td>");
            }
            let _ = writeln!(h, "<td class=\"n\">{}</td></tr>", text(&r.change));
        }
        h.push_str("</tbody>\n</table>\n");
    }
    let _ = writeln!(h, "<p class=\"legend\">{}</p>", text(summary::LEGEND));
}

fn expectations_and_problems(h: &mut String, doc: &Results) {
    if !doc.expectations.is_empty() {
        h.push_str("<h2 id=\"expectations\">Expectations</h2>\n<ul>\n");
        for e in &doc.expectations {
            let _ = writeln!(
                h,
                "<li><span class=\"{}\">{}</span> {} ({})</li>",
                if e.held { "ok" } else { "bad" },
                e.verdict(),
                text(&e.text),
                text(&e.detail)
            );
        }
        h.push_str("</ul>\n");
    }
    let items: Vec<String> = doc
        .runs
        .iter()
        .flat_map(|run| {
            let who = run_label(doc, run);
            let failed = (!run.success).then(|| {
                format!(
                    "<li class=\"bad\">{}: FAILED: {}</li>",
                    text(&who),
                    text(&run.end)
                )
            });
            let problems = run.problems.iter().map(move |p| {
                format!(
                    "<li class=\"bad\">{}: PROBLEM: {}</li>",
                    text(&run_label(doc, run)),
                    text(p)
                )
            });
            let notes = run.notes.iter().map(move |n| {
                format!("<li>{}: NOTE: {}</li>", text(&run_label(doc, run)), text(n))
            });
            failed.into_iter().chain(problems).chain(notes)
        })
        .collect();
    if !items.is_empty() {
        h.push_str("<h2 id=\"problems\">Problems and notes</h2>\n<ul>\n");
        for i in items {
            h.push_str(&i);
            h.push('\n');
        }
        h.push_str("</ul>\n");
    }
}

/// The plots, inline: the SVG text as plotters wrote it (it has no external reference).
fn plots(h: &mut String, doc: &Results) -> Result<()> {
    let plots = crate::output::plots::render(doc)?;
    if plots.is_empty() {
        return Ok(());
    }
    h.push_str("<h2 id=\"plots\">Plots</h2>\n");
    for (name, svg) in plots {
        let _ = writeln!(
            h,
            "<figure>\n{}\n<figcaption><a href=\"{}\">{}</a></figcaption>\n</figure>",
            svg.trim_start_matches(|c| c != '<').trim(),
            attr(&name),
            text(&name)
        );
    }
    Ok(())
}

/// Links to the profiled phases' flame graphs (files beside the page, not inline: a kernel's
/// can hold thousands of functions).
fn flame_graphs(h: &mut String, doc: &Results) {
    let mut items = Vec::new();
    for run in &doc.runs {
        for (i, p) in run.phases.iter().enumerate() {
            let links: Vec<String> = crate::profile::flame::graphs(run, i, p)
                .iter()
                .map(|(counter, path)| format!("<a href=\"{}\">{}</a>", attr(path), text(counter)))
                .collect();
            if !links.is_empty() {
                items.push(format!(
                    "<li>{}, {}: {}</li>",
                    text(&phase_title(p)),
                    text(&run_label(doc, run)),
                    links.join(" · ")
                ));
            }
        }
    }
    if items.is_empty() {
        return;
    }
    h.push_str(
        "<h2 id=\"flame-graphs\">Flame graphs</h2>\n<p>Where the checked accesses are, by \
         function (the folded stacks are beside each graph).</p>\n<ul>\n",
    );
    for i in items {
        h.push_str(&i);
        h.push('\n');
    }
    h.push_str("</ul>\n");
}

fn run_section(h: &mut String, doc: &Results, run: &Run) {
    let label = run_label(doc, run);
    // A link only to a plain file name beside the page: a run's name from elsewhere is
    // never a URL or a path out of the results directory.
    let log = run.log_file().map_or_else(String::new, |f| {
        format!(" Console log: <a href=\"{}\">{}</a>", attr(&f), text(&f))
    });
    let _ = writeln!(
        h,
        "<h2>{}</h2>\n<p>{} — <span class=\"{}\">{}</span>.{log}</p>",
        text(&label),
        text(&run.end),
        if run.success { "ok" } else { "bad" },
        if run.success { "success" } else { "FAILED" },
    );
    if let Some(b) = &run.boot {
        let _ = writeln!(
            h,
            "<p>Booted by {}; MIDR_EL1 {} ({}); traps {}; counter at {} Hz.</p>",
            text(&b.path),
            text(&b.midr),
            if b.emulator { "an emulator" } else { "silicon" },
            text(&b.traps),
            thousands(b.counter_hz)
        );
    }
    if !run.writes.is_empty() {
        let _ = writeln!(
            h,
            "<table class=\"writes\">\n<caption>Trapped writes ({})</caption>\n<thead><tr>\
             <th>seq</th><th>register</th><th>old → new</th><th>MTE fields changed</th>\
             <th>pc</th><th>function</th><th>EL</th><th>TCO</th><th>phase</th></tr></thead>\n<tbody>",
            run.writes.len()
        );
        for w in &run.writes {
            let _ = writeln!(
                h,
                "<tr><td class=\"n\">{}</td><td>{}</td><td class=\"mono\">{} → {}</td><td>{}</td>\
                 <td class=\"mono\">{}</td><td class=\"mono\">{}</td><td>EL{}</td><td>{}</td>\
                 <td>{}</td></tr>",
                w.seq,
                text(&w.register),
                text(&w.old),
                text(&w.new),
                text(&w.changes.join(", ")),
                text(&w.pc),
                text(w.symbol.as_deref().unwrap_or("")),
                w.el,
                u8::from(w.tco),
                text(w.phase.as_deref().unwrap_or(""))
            );
        }
        h.push_str("</tbody>\n</table>\n");
    }
    if !run.phases.is_empty() {
        h.push_str("<h3>Every counter, per phase</h3>\n");
    }
    for p in &run.phases {
        let _ = writeln!(
            h,
            "<details><summary>{}{}</summary>\n<table class=\"counters\"><tbody>",
            text(&phase_title(p)),
            if p.partial { " (partial)" } else { "" }
        );
        for (name, v) in &p.counters {
            let _ = writeln!(
                h,
                "<tr><td class=\"n\">{}</td><td class=\"mono\">{}</td></tr>",
                thousands(*v),
                text(name)
            );
        }
        for name in &p.not_supported {
            let _ = writeln!(
                h,
                "<tr><td class=\"n\">&lt;not supported&gt;</td><td class=\"mono\">{}</td></tr>",
                text(name)
            );
        }
        for name in &p.not_counted {
            let _ = writeln!(
                h,
                "<tr><td class=\"n\">&lt;not counted&gt;</td><td class=\"mono\">{}</td></tr>",
                text(name)
            );
        }
        h.push_str("</tbody></table></details>\n");
    }
    if !run.console.is_empty() {
        let _ = writeln!(
            h,
            "<details><summary>Guest console ({} lines)</summary>\n<pre>{}</pre></details>",
            run.console.len(),
            text(&crate::output::text::clean(&run.console.join("\n")))
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_profiled_phase_links_its_flame_graphs_relatively() {
        let doc = crate::profile::fixture::results();
        let html = page(&doc).unwrap();
        assert!(
            html.contains(
                "<a href=\"profile/run-1/1-futex-hash/mem_access_checked_rd_k.svg\">\
                 mem_access_checked_rd:k</a>"
            ),
            "{html}"
        );
        assert!(!html.contains("<script"));
        let plain = page(&Results::single(&crate::model::report::Report::default())).unwrap();
        assert!(!plain.contains("flame-graphs"));
    }

    #[test]
    fn every_link_is_a_plain_file_name_beside_the_page() {
        let mut doc = crate::profile::fixture::results();
        let html = page(&doc).unwrap();
        assert!(
            html.contains("<a href=\"run-1.log\">run-1.log</a>"),
            "{html}"
        );
        for name in [
            "javascript:alert(1)//",
            "../../../../etc/passwd",
            "/abs/outside",
        ] {
            doc.runs[0].name = name.to_string();
            let html = page(&doc).unwrap();
            let hrefs: Vec<&str> = html
                .split("href=\"")
                .skip(1)
                .map(|s| &s[..s.find('"').unwrap()])
                .collect();
            assert!(!hrefs.is_empty());
            for h in hrefs {
                assert!(
                    !h.contains(':') && !h.starts_with('/') && !h.split('/').any(|c| c == ".."),
                    "{name}: href {h:?}"
                );
            }
        }
    }
}
