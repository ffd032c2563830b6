//! A results page opened in a real browser: Debian's Chromium, headless, renders it to a
//! screenshot (which must hold something) and its DOM, with the page's console on stderr
//! (where an error would show: a resource it could not load, a script error).

use std::path::Path;
use std::process::Command;

/// Headless Chromium on `file` with `extra` arguments, at `size` (a window "W,H"); it must
/// succeed.
fn chromium(file: &Path, size: &str, extra: &[&str]) -> std::process::Output {
    let o = Command::new("chromium")
        // Root in CI has no user namespace sandbox; the page is our own file.
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--enable-logging=stderr",
        ])
        .args(["--v=0", &format!("--window-size={size}")])
        .args(extra)
        .arg(format!("file://{}", file.display()))
        .output()
        .expect("running chromium (./scripts/ensure-deps --browser installs it)");
    assert!(
        o.status.success(),
        "chromium: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

/// Renders `file` to a screenshot beside it, which must be a PNG of more than `min_bytes`
/// (something drawn), and says no error on its console; the screenshot is removed.
fn renders(file: &Path, size: &str, min_bytes: usize) {
    let shot = file.with_extension("png");
    let o = chromium(file, size, &[&format!("--screenshot={}", shot.display())]);
    let png = std::fs::read(&shot).expect("chromium wrote no screenshot");
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > min_bytes,
        "{}: {} bytes",
        file.display(),
        png.len()
    );
    let console: Vec<String> = String::from_utf8_lossy(&o.stderr)
        .lines()
        .filter(|l| l.contains("CONSOLE") || l.contains("Failed to load"))
        .map(String::from)
        .collect();
    assert!(
        console.is_empty(),
        "{}'s console: {console:#?}",
        file.display()
    );
    let _ = std::fs::remove_file(&shot);
}

/// Opens `page` in headless Chromium: it renders, its DOM has the summary, and the console
/// says no error.
pub fn opens(page: &Path) {
    renders(page, "1280,2000", 20_000);
    let dom = chromium(page, "1280,2000", &["--dump-dom"]);
    let dom = String::from_utf8_lossy(&dom.stdout);
    assert!(dom.contains("<table class=\"summary\">"), "{dom}");
    assert!(dom.contains("<svg"), "{dom}");
}

/// Opens a flame graph on its own in headless Chromium: it renders (a screenshot that holds
/// something) and its script logs no error.
pub fn renders_svg(svg: &Path) {
    renders(svg, "1200,800", 5_000);
}
