//! The results page (index.html) read as a browser's parser reads it (html5ever, through
//! scraper): its structure, that it holds every table, plot and write of the document, that
//! it refers to nothing outside its directory, and that no string of the document becomes
//! markup. The QEMU suite opens a real run's page in headless Chromium.

use mtex::model::report;
use mtex::model::results::Results;
use mtex::output::html;
use scraper::{Html, Selector};

fn fixture(name: &str) -> Results {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut doc = Results::single(&report::parse_bytes(&bytes));
    doc.runs[0].writes[0].symbol = Some("mtex_guest::kernel::mte_init+0x1c".into());
    doc
}

fn select<'a>(page: &'a Html, css: &str) -> Vec<scraper::ElementRef<'a>> {
    page.select(&Selector::parse(css).unwrap()).collect()
}

fn texts(page: &Html, css: &str) -> Vec<String> {
    select(page, css)
        .iter()
        .map(|e| e.text().collect::<String>().trim().to_string())
        .collect()
}

#[test]
fn the_page_holds_the_summary_the_plots_and_every_write() {
    let doc = fixture("kernel-getpid-futex.log");
    let text = html::page(&doc).unwrap();
    let page = Html::parse_document(&text);
    assert!(page.errors.is_empty(), "{:?}", page.errors);
    assert_eq!(texts(&page, "h1").len(), 1);
    assert_eq!(
        texts(&page, "#verdict")[0].split(':').next(),
        Some("success")
    );
    // One summary table per workload, one row per policy, the summary's own figures.
    let groups = mtex::output::summary::tables(&doc);
    let tables = select(&page, "table.summary");
    assert_eq!(tables.len(), groups.len());
    for (t, g) in tables.iter().zip(&groups) {
        let rows: Vec<Vec<String>> = t
            .select(&Selector::parse("tbody tr").unwrap())
            .map(|r| {
                r.text()
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(String::from)
                    .collect()
            })
            .collect();
        assert_eq!(rows.len(), g.rows.len());
        for (r, row) in rows.iter().zip(&g.rows) {
            assert_eq!(r[0], row.label);
            assert_eq!(r.last().unwrap(), &row.change);
        }
    }
    // Each column names the counters it adds up.
    let titles: Vec<String> = select(&page, "table.summary th[title]")
        .iter()
        .map(|e| e.value().attr("title").unwrap().to_string())
        .collect();
    assert!(
        titles.iter().any(|t| t == "mem_access_checked_rd:k"),
        "{titles:?}"
    );
    // Every plot inline, as SVG.
    let plots = mtex::output::plots::render(&doc).unwrap();
    assert_eq!(select(&page, "figure svg").len(), plots.len());
    assert!(!plots.is_empty());
    // Every trapped write, with its function.
    let writes = select(&page, "table.writes tbody tr");
    assert_eq!(writes.len(), doc.runs[0].writes.len());
    assert!(text.contains("mtex_guest::kernel::mte_init+0x1c"));
    // Every phase's counters, folded.
    assert_eq!(
        select(&page, "details table.counters").len(),
        doc.runs[0].phases.len()
    );
    // Links only to the files beside it; nothing loaded from anywhere.
    let links: Vec<&str> = select(&page, "a[href]")
        .iter()
        .map(|a| a.value().attr("href").unwrap())
        .collect();
    for l in &links {
        assert!(
            !l.contains(':') && !l.contains('/') && !l.starts_with('.'),
            "{l}"
        );
    }
    for f in ["report.json", "report.csv", "report.txt", "run-1.log"] {
        assert!(links.contains(&f), "no link to {f}: {links:?}");
    }
    assert!(select(&page, "script, link, img, iframe, object").is_empty());
    assert!(only_svg_namespaces(&text));
}

/// The only URLs allowed are the SVG and XLink namespace names, which load nothing.
fn only_svg_namespaces(text: &str) -> bool {
    let stripped = text
        .replace("http://www.w3.org/2000/svg", "")
        .replace("http://www.w3.org/1999/xlink", "");
    !stripped.contains("http://") && !stripped.contains("https://")
}

#[test]
fn no_string_of_the_document_becomes_markup() {
    let mut doc = fixture("kernel-getpid-futex.log");
    let evil = "<script>alert(1)</script><img src=x onerror=alert(2)>\"'&";
    let run = &mut doc.runs[0];
    run.name = evil.into();
    run.phases[0].policy = Some(evil.into());
    run.phases[0].name = evil.into();
    run.console.push(format!("</pre>{evil}"));
    run.problems.push(evil.into());
    run.writes[0].symbol = Some(evil.into());
    doc.scenario = Some(evil.into());
    let text = html::page(&doc).unwrap();
    let page = Html::parse_document(&text);
    assert!(select(&page, "script, img").is_empty(), "{text}");
    assert!(texts(&page, "h1")[0].contains(evil));
    assert!(texts(&page, "li").iter().any(|l| l.contains(evil)));
    assert!(
        texts(&page, "pre")
            .iter()
            .any(|l| l.contains("</pre><script>"))
    );
}
