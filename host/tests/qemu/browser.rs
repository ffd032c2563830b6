//! A results page opened in a real browser: Debian's Chromium, headless, renders it to a
//! screenshot (which must hold something) and its DOM, with the page's console on stderr
//! (where an error would show: a resource it could not load, a script error).

use std::path::Path;
use std::process::Command;

/// Opens `page` in headless Chromium: it renders, its DOM has the summary, and the console
/// says no error.
pub fn opens(page: &Path) {
    let shot = page.with_file_name("screenshot.png");
    let run = |extra: &[&str]| {
        let o = Command::new("chromium")
            // Root in CI has no user namespace sandbox; the page is our own file.
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--enable-logging=stderr",
            ])
            .args(["--v=0", "--window-size=1280,2000"])
            .args(extra)
            .arg(format!("file://{}", page.display()))
            .output()
            .expect("running chromium (./scripts/ensure-deps --browser installs it)");
        assert!(
            o.status.success(),
            "chromium: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        o
    };
    let o = run(&[&format!("--screenshot={}", shot.display())]);
    let png = std::fs::read(&shot).expect("chromium wrote no screenshot");
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 20_000,
        "{} bytes",
        png.len()
    );
    let console: Vec<String> = String::from_utf8_lossy(&o.stderr)
        .lines()
        .filter(|l| l.contains("CONSOLE") || l.contains("Failed to load"))
        .map(String::from)
        .collect();
    assert!(console.is_empty(), "the page's console: {console:#?}");
    let dom = run(&["--dump-dom"]);
    let dom = String::from_utf8_lossy(&dom.stdout);
    assert!(dom.contains("<table class=\"summary\">"), "{dom}");
    assert!(dom.contains("<svg"), "{dom}");
    let _ = std::fs::remove_file(&shot);
}

/// Opens a flame graph on its own in headless Chromium: it renders (a screenshot that holds
/// something) and its script logs no error.
pub fn renders_svg(svg: &Path) {
    let shot = svg.with_extension("png");
    let o = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--enable-logging=stderr",
        ])
        .args(["--v=0", "--window-size=1200,800"])
        .arg(format!("--screenshot={}", shot.display()))
        .arg(format!("file://{}", svg.display()))
        .output()
        .expect("running chromium (./scripts/ensure-deps --browser installs it)");
    assert!(
        o.status.success(),
        "chromium: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let png = std::fs::read(&shot).expect("chromium wrote no screenshot");
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 5_000,
        "{}: {} bytes",
        svg.display(),
        png.len()
    );
    let errors: Vec<&str> = std::str::from_utf8(&o.stderr)
        .unwrap_or("")
        .lines()
        .filter(|l| l.contains("CONSOLE") || l.contains("Failed to load"))
        .collect();
    assert!(errors.is_empty(), "{}: {errors:#?}", svg.display());
    let _ = std::fs::remove_file(&shot);
}
