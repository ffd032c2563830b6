//! The documentation held to the tree it describes. Docs drift without anyone noticing: a
//! file moves and a link goes dead, a heading is reworded and every `#anchor` to it breaks,
//! a new record or hypercall flag never reaches the ABI page, and words about how mtex was
//! made creep into text about what it does. These checks read files only (no build, no
//! QEMU), so they run with the quick host tests and a change that breaks one fails at once.

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};

/// The repository's root (this crate is `host/`).
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("host/ has a parent")
        .to_path_buf()
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `path` relative to the root, for messages.
fn shown(path: &Path) -> String {
    path.strip_prefix(root())
        .unwrap_or(path)
        .display()
        .to_string()
}

/// README.md, CHANGELOG.md and every docs/*.md: the product's documentation.
fn markdown_files() -> Vec<PathBuf> {
    let root = root();
    let mut files = vec![root.join("README.md"), root.join("CHANGELOG.md")];
    let mut docs: Vec<PathBuf> = fs::read_dir(root.join("docs"))
        .expect("docs/")
        .map(|e| e.expect("docs/ entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    files
}

/// Every file under `dir` (recursively) whose name ends in `suffix` ("" for all).
fn files_under(dir: &Path, suffix: &str, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<PathBuf> = entries.map(|e| e.expect("dir entry").path()).collect();
    paths.sort();
    for p in paths {
        if p.is_dir() {
            files_under(&p, suffix, out);
        } else if p.to_string_lossy().ends_with(suffix) {
            out.push(p);
        }
    }
}

/// The lines of a markdown text outside fenced code blocks, numbered from 1: what renders as
/// prose, headings and links (a `# comment` in a shell block is not a heading).
fn outside_fences(text: &str) -> Vec<(usize, &str)> {
    let mut fence: Option<&str> = None;
    let mut lines = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let t = line.trim_start();
        let marker = ["```", "~~~"].into_iter().find(|m| t.starts_with(m));
        match (fence, marker) {
            (None, Some(m)) => fence = Some(m),
            (Some(f), Some(m)) if f == m => fence = None,
            (None, None) => lines.push((i + 1, line)),
            _ => {}
        }
    }
    lines
}

/// A line without its inline code spans: `[a](b)` between backticks is not a link.
fn without_code_spans(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(start) = rest.find('`') {
        out.push_str(&rest[..start]);
        let ticks = rest[start..].len() - rest[start..].trim_start_matches('`').len();
        let after = &rest[start + ticks..];
        let close = "`".repeat(ticks);
        match after.find(&close) {
            Some(end) => rest = &after[end + ticks..],
            // An unclosed backtick is literal text.
            None => {
                out.push_str(&rest[start..start + ticks]);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// The targets of the inline links (and images) of a line: the text between `](` and its
/// closing parenthesis, without a title.
fn link_targets(line: &str) -> Vec<String> {
    let mut targets = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        let mut depth = 0;
        let end = after.char_indices().find_map(|(i, c)| match c {
            '(' => {
                depth += 1;
                None
            }
            ')' if depth == 0 => Some(i),
            ')' => {
                depth -= 1;
                None
            }
            _ => None,
        });
        let Some(end) = end else { break };
        let target = after[..end].split_whitespace().next().unwrap_or("");
        targets.push(target.trim_matches(|c| c == '<' || c == '>').to_string());
        rest = &after[end..];
    }
    targets
}

/// `[text](target)` reduced to `text`, as a heading renders.
fn link_text_only(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(at) = rest.find("](") {
        let Some(open) = rest[..at].rfind('[') else {
            break;
        };
        let Some(close) = rest[at..].find(')') else {
            break;
        };
        out.push_str(&rest[..open]);
        out.push_str(&rest[open + 1..at]);
        rest = &rest[at + close + 1..];
    }
    out.push_str(rest);
    out
}

/// The anchor GitHub gives a heading: lower case; every character dropped but letters,
/// digits, `-`, `_` and spaces; each space a `-`.
fn slug(heading: &str) -> String {
    link_text_only(heading)
        .to_lowercase()
        .chars()
        .filter(|&c| c.is_alphanumeric() || c == '-' || c == '_' || c == ' ')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors a markdown text's headings make (a repeated heading's get `-1`, `-2`, … as
/// on GitHub).
fn anchors(text: &str) -> HashSet<String> {
    let mut found = HashSet::new();
    for (_, line) in outside_fences(text) {
        let hashes = line.len() - line.trim_start_matches('#').len();
        if !(1..=6).contains(&hashes) || !line[hashes..].starts_with(' ') {
            continue;
        }
        let base = slug(line[hashes..].trim().trim_end_matches('#').trim());
        let mut anchor = base.clone();
        let mut n = 0;
        while found.contains(&anchor) {
            n += 1;
            anchor = format!("{base}-{n}");
        }
        found.insert(anchor);
    }
    found
}

/// Every relative link of the documentation leads somewhere: the file or directory exists
/// and, for `file.md#anchor` (or `#anchor` within the page), a heading of that file makes
/// the anchor. Moving a file or rewording a heading breaks links that nothing else checks.
#[test]
fn relative_links_point_at_files_and_headings_that_exist() {
    let mut broken = Vec::new();
    for file in markdown_files() {
        let text = read(&file);
        for (n, line) in outside_fences(&text) {
            for target in link_targets(&without_code_spans(line)) {
                if target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                let (path, anchor) = target.split_once('#').unwrap_or((&target, ""));
                let dest = if path.is_empty() {
                    file.clone()
                } else {
                    file.parent().expect("a file's directory").join(path)
                };
                let at = format!("{}:{n}: ({target})", shown(&file));
                if !dest.exists() || (path.ends_with('/') && !dest.is_dir()) {
                    broken.push(format!("{at}: no such file or directory"));
                } else if !anchor.is_empty()
                    && dest.extension().is_some_and(|x| x == "md")
                    && !anchors(&read(&dest)).contains(anchor)
                {
                    broken.push(format!("{at}: no heading makes #{anchor}"));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// The prose of a Rust source, by line: its comments and the contents of its string literals
/// (help text, messages, doc strings). Code is left out, identifiers included: a test's name
/// is code, not text a user reads.
fn rust_prose(src: &str) -> Vec<(usize, String)> {
    #[derive(Clone, Copy, PartialEq)]
    enum In {
        Code,
        LineComment,
        BlockComment(u32),
        Str,
        RawStr(usize),
    }
    let c: Vec<char> = src.chars().collect();
    let at = |i: usize| c.get(i).copied().unwrap_or('\0');
    let ident = |ch: char| ch.is_alphanumeric() || ch == '_';
    let mut lines = vec![String::new()];
    let mut state = In::Code;
    let mut i = 0;
    while i < c.len() {
        let (ch, next) = (c[i], at(i + 1));
        if ch == '\n' {
            lines.push(String::new());
            if state == In::LineComment {
                state = In::Code;
            }
            i += 1;
            continue;
        }
        let line = lines.last_mut().expect("a line");
        match state {
            In::Code => match ch {
                '/' if next == '/' => (state, i) = (In::LineComment, i + 1),
                '/' if next == '*' => (state, i) = (In::BlockComment(1), i + 1),
                '"' => state = In::Str,
                // r"…", r#"…"#, br"…" (not an identifier ending in r, nor r#ident).
                'r' if !ident(at(i.wrapping_sub(1)))
                    || (at(i.wrapping_sub(1)) == 'b' && !ident(at(i.wrapping_sub(2)))) =>
                {
                    let hashes = c[i + 1..].iter().take_while(|&&h| h == '#').count();
                    if at(i + 1 + hashes) == '"' {
                        (state, i) = (In::RawStr(hashes), i + 1 + hashes);
                    }
                }
                // A char literal ('"', '\'', 'x'); otherwise a lifetime or a label.
                '\'' if next == '\\' => {
                    i += 2;
                    while i + 1 < c.len() && c[i + 1] != '\'' {
                        i += 1;
                    }
                    i += 1;
                }
                '\'' if at(i + 2) == '\'' => i += 2,
                _ => {}
            },
            In::LineComment => line.push(ch),
            In::BlockComment(depth) => match (ch, next) {
                ('*', '/') => {
                    state = if depth == 1 {
                        In::Code
                    } else {
                        In::BlockComment(depth - 1)
                    };
                    i += 1;
                }
                ('/', '*') => (state, i) = (In::BlockComment(depth + 1), i + 1),
                _ => line.push(ch),
            },
            In::Str => match ch {
                // An escape: the escaped character is text, a line continuation is not.
                '\\' if next != '\n' => {
                    line.push(next);
                    i += 1;
                }
                '\\' => {}
                '"' => state = In::Code,
                _ => line.push(ch),
            },
            In::RawStr(hashes) => {
                if ch == '"' && (1..=hashes).all(|k| at(i + k) == '#') {
                    (state, i) = (In::Code, i + hashes);
                } else {
                    line.push(ch);
                }
            }
        }
        i += 1;
    }
    lines
        .into_iter()
        .enumerate()
        .map(|(n, s)| (n + 1, s))
        .filter(|(_, s)| !s.trim().is_empty())
        .collect()
}

/// Words that make a line's "seed" a random-number generator's: RGSR_EL1's seed of IRG,
/// RNDR, Linux's generator, a sampled phase's schedule.
const GENERATOR_WORDS: [&str; 6] = ["rgsr", "irg", "rndr", "random", "generator", "sampl"];

/// What is wrong with a line of product text, if anything: "issue" followed by a number
/// (with or without `#`) or "seed(s)" for the Linux patch threads mtex was built from. QEMU's
/// `-seed` option, and a seed on a line about a random-number generator, are fine.
fn misuse(line: &str) -> Option<&'static str> {
    let lower = line.to_lowercase();
    for (i, _) in lower.match_indices("issue") {
        let after = lower[i + "issue".len()..].trim_start_matches('s');
        let number = after.trim_start_matches(' ');
        if number.starts_with('#')
            || (number.len() < after.len() && number.starts_with(|c: char| c.is_ascii_digit()))
        {
            return Some("an issue number: say what the change is");
        }
    }
    for (i, _) in lower.match_indices("seed") {
        if !lower[..i].ends_with('-') && !GENERATOR_WORDS.iter().any(|w| lower.contains(w)) {
            return Some("\"seed\": name the patch thread by its subject");
        }
    }
    None
}

/// Product text speaks of the product: the docs, the scripts and the Rust sources' comments
/// and strings say what mtex does and which Linux change each policy models, by subject
/// ("the TCMA1 change"), not which issue asked for it or what the project called its
/// source threads. A reader has neither the issue tracker nor that vocabulary.
#[test]
fn product_text_names_no_issue_numbers_and_no_seeds() {
    let root = root();
    let mut text_files = markdown_files();
    files_under(&root.join("scripts"), "", &mut text_files);
    let mut rust_files = Vec::new();
    let mut rust_dirs: Vec<PathBuf> = [
        "host/src",
        "hyp/src",
        "guest/src",
        "loader/src",
        "platform/src",
        "workloads/src",
        "oracle/src",
    ]
    .iter()
    .map(|d| root.join(d))
    .collect();
    for krate in fs::read_dir(root.join("crates")).expect("crates/") {
        rust_dirs.push(krate.expect("crates/ entry").path().join("src"));
    }
    for dir in &rust_dirs {
        assert!(dir.is_dir(), "{} is gone: update this list", shown(dir));
        files_under(dir, ".rs", &mut rust_files);
    }

    // (file, line number, the line's prose) for every line to judge.
    let mut lines: Vec<(&Path, usize, String)> = Vec::new();
    let mut found = Vec::new();
    for file in &text_files {
        for (i, line) in read(file).lines().enumerate() {
            lines.push((file, i + 1, line.to_string()));
        }
    }
    for file in &rust_files {
        let src = read(file);
        let prose = rust_prose(&src);
        // The reader's own check: every line that opens with a comment is prose to it (a
        // literal it misread would hide the comments after it from this test).
        let seen: HashSet<usize> = prose.iter().map(|(n, _)| *n).collect();
        for (i, line) in src.lines().enumerate() {
            let t = line.trim_start();
            if t.starts_with("//") && !t[2..].trim().is_empty() && !seen.contains(&(i + 1)) {
                found.push(format!(
                    "{}:{}: a comment this test did not read",
                    shown(file),
                    i + 1
                ));
            }
        }
        lines.extend(prose.into_iter().map(|(n, text)| (file.as_path(), n, text)));
    }
    for (file, n, line) in &lines {
        if let Some(why) = misuse(line) {
            found.push(format!("{}:{n}: {why}: {}", shown(file), line.trim()));
        }
    }
    assert!(found.is_empty(), "product text:\n{}", found.join("\n"));
}

/// The README is the front door: short enough to read through (the rest is in docs/), and
/// its first code block is the two commands that build, run and test everything.
#[test]
fn readme_is_a_short_front_door() {
    let readme = read(&root().join("README.md"));
    let lines = readme.lines().count();
    assert!(
        lines <= 200,
        "README.md has {lines} lines: at most 200 (move detail to docs/)"
    );
    let block: Vec<&str> = readme
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("```"))
        .skip(1)
        .take_while(|l| !l.trim_start().starts_with("```"))
        .collect();
    let block = block.join("\n");
    for command in ["./scripts/run", "./scripts/test"] {
        assert!(
            block.contains(command),
            "README.md's first code block does not hold {command}:\n{block}"
        );
    }
}

/// docs/abi.md is the ABI's reference: its tables have a row for every hypercall function
/// and PHASE_BEGIN flag of `crates/abi/src/hypercall.rs` and every `Record` variant of
/// `crates/abi/src/report.rs`. New ones are added to the code without anything else
/// pointing at the page.
#[test]
fn abi_page_names_every_call_flag_and_record() {
    let root = root();
    let page = read(&root.join("docs/abi.md"));
    let hypercall = read(&root.join("crates/abi/src/hypercall.rs"));
    let report = read(&root.join("crates/abi/src/report.rs"));
    let mut wanted = Vec::new();
    for line in hypercall.lines() {
        let Some(decl) = line.strip_prefix("pub const ") else {
            continue;
        };
        let name = decl.split(':').next().unwrap_or("");
        if decl.contains("= function_id(") {
            wanted.push(format!("| {name} |"));
        } else if name.starts_with("PHASE_") && decl.contains(": u64 = 1 <<") {
            wanted.push(format!("| `{name}` |"));
        }
    }
    let variants: Vec<&str> = report
        .lines()
        .skip_while(|l| !l.starts_with("pub enum Record {"))
        .skip(1)
        .take_while(|l| !l.starts_with('}'))
        .filter_map(|l| l.trim().split_once('(').map(|(name, _)| name))
        .filter(|name| name.chars().all(char::is_alphanumeric))
        .collect();
    assert!(
        variants.len() > 10,
        "Record's variants not found: {variants:?}"
    );
    wanted.extend(variants.iter().map(|v| format!("| `{v}` |")));
    let missing: Vec<&String> = wanted
        .iter()
        .filter(|w| !page.contains(w.as_str()))
        .collect();
    assert!(missing.is_empty(), "docs/abi.md has no row for {missing:?}");
}

/// What marks a fenced excerpt as Linux mode's output: its windows, the side-by-side table,
/// the kernel's release, system calls and uaccess rows, the oracle's lines, a Linux
/// scenario's kernel names.
const LINUX_OUTPUT: [&str; 12] = [
    "window",
    "Window",
    "Kernels side by side",
    "mtex linux",
    "linux-image",
    "(syscall ",
    "[syscall ",
    "(uaccess)",
    "oracle (QEMU",
    "(TCF0 ",
    "debian-",
    "+deb1",
];

/// The fenced blocks and tables of a markdown text that show Linux mode's figures, each with
/// its first line's number, its text and the paragraph just above it (where its caption is):
/// a fenced block (not shell, TOML, Rust or JSON) holding any of [`LINUX_OUTPUT`], or a table
/// that names Debian's 6.12 or 7.3 beside a figure of four digits or more.
fn linux_excerpts(text: &str) -> Vec<(usize, String, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let above = |start: usize| -> String {
        let mut i = start;
        while i > 0 && lines[i - 1].trim().is_empty() {
            i -= 1;
        }
        let end = i;
        while i > 0 && !lines[i - 1].trim().is_empty() && !lines[i - 1].starts_with('#') {
            i -= 1;
        }
        lines[i..end].join("\n")
    };
    let mut found = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let t = lines[i].trim_start();
        if let Some(lang) = t.strip_prefix("```") {
            let end = (i + 1..lines.len())
                .find(|&j| lines[j].trim_start().starts_with("```"))
                .unwrap_or(lines.len());
            let body = lines[i + 1..end].join("\n");
            let code = ["sh", "bash", "toml", "rust", "json"].contains(&lang.trim());
            if !code && LINUX_OUTPUT.iter().any(|m| body.contains(m)) {
                found.push((i + 2, body, above(i)));
            }
            i = end + 1;
        } else if t.starts_with('|') {
            let end = (i..lines.len())
                .find(|&j| !lines[j].trim_start().starts_with('|'))
                .unwrap_or(lines.len());
            let body = lines[i..end].join("\n");
            let kernels = ["6.12", "7.3 ", "7.3:", "7.3 |"]
                .iter()
                .any(|k| body.contains(k));
            if kernels && has_thousands(&body) {
                found.push((i + 1, body, above(i)));
            }
            i = end;
        } else {
            i += 1;
        }
    }
    found
}

/// Whether `s` holds a figure written with a thousands separator (`68,168`).
fn has_thousands(s: &str) -> bool {
    let b = s.as_bytes();
    (1..b.len().saturating_sub(3)).any(|i| {
        b[i] == b',' && b[i - 1].is_ascii_digit() && b[i + 1..i + 4].iter().all(u8::is_ascii_digit)
    })
}

/// Whether `s` names a kernel release exactly: three numbers (`6.12.117+deb12-arm64`,
/// `7.3.4`), not a series (`6.12`), nor mtex's own version (`mtex 0.1.0`).
fn names_exact_release(s: &str) -> bool {
    let words: Vec<&str> = s
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '.'))
        .filter(|w| !w.is_empty())
        .collect();
    words.iter().enumerate().any(|(i, w)| {
        let parts: Vec<&str> = w.trim_matches('.').split('.').collect();
        parts.len() == 3
            && parts
                .iter()
                .all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            && (i == 0 || words[i - 1] != "mtex")
    })
}

/// Whether `s` marks what follows as an example: `Example from 2026-12-03, mtex 0.1.0`.
fn marks_an_example(s: &str) -> bool {
    let s = s.split_whitespace().collect::<Vec<_>>().join(" ");
    s.match_indices("xample from ").any(|(at, m)| {
        let rest = &s[at + m.len()..];
        let date = rest.get(..10).unwrap_or("");
        let dated = date.len() == 10
            && date.bytes().enumerate().all(|(i, b)| {
                if i == 4 || i == 7 {
                    b == b'-'
                } else {
                    b.is_ascii_digit()
                }
            });
        dated
            && rest[10..]
                .strip_prefix(", mtex ")
                .and_then(|v| v.split(|c: char| !(c.is_ascii_digit() || c == '.')).next())
                .is_some_and(|v| v.split('.').filter(|n| !n.is_empty()).count() == 3)
    })
}

/// Linux mode's figures are one kernel's on one day: Debian's point releases move (`--kernel
/// 6.12` fetches a later 6.12 next month, whose counts differ), and no test reruns a Linux
/// excerpt. So each excerpt of Linux output in the README and docs names its exact kernel
/// (`6.12.117+deb12-arm64`, in the excerpt or its caption) and is marked as an example of a
/// date and an mtex version in the paragraph just above it (`Example from 2026-12-03, mtex
/// 0.1.0, …`).
#[test]
fn linux_excerpts_name_their_kernel_and_are_marked_as_examples() {
    let mut wrong = Vec::new();
    let mut seen = 0;
    for path in markdown_files() {
        for (line, body, caption) in linux_excerpts(&read(&path)) {
            seen += 1;
            let at = format!("{}:{line}", shown(&path));
            if !names_exact_release(&body) && !names_exact_release(&caption) {
                wrong.push(format!(
                    "{at}: names no exact kernel release (6.12.117+deb12-arm64)"
                ));
            }
            if !marks_an_example(&caption) {
                wrong.push(format!(
                    "{at}: not marked as an example (\"Example from YYYY-MM-DD, mtex X.Y.Z\" in \
                     the paragraph above it)"
                ));
            }
        }
    }
    assert!(
        seen >= 10,
        "only {seen} Linux excerpts found: the search stopped looking"
    );
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The helpers above decide what the other checks see (a heading's anchor, a line's links,
/// a source's prose, a misused word): each is pinned here on the kinds of text the tree holds,
/// so that a check that passes is not one that stopped looking.
#[test]
fn the_checks_themselves() {
    assert_eq!(slug("The options of `mtex run`"), "the-options-of-mtex-run");
    assert_eq!(slug("`report.json`"), "reportjson");
    assert_eq!(slug("PHASE_BEGIN flags"), "phase_begin-flags");
    assert_eq!(slug("What `./scripts/run` shows"), "what-scriptsrun-shows");
    assert_eq!(
        link_targets("see [a](x.md#y) and ![b](<dir/> \"title\"), `[c](z)`"),
        ["x.md#y", "dir/", "z"]
    );
    assert_eq!(link_targets(&without_code_spans("`[c](z)` [d](w)")), ["w"]);
    assert!(names_exact_release("6.12 = 6.12.117+deb12-arm64") && names_exact_release("7.3.4"));
    assert!(!names_exact_release(
        "Debian 6.12 against 7.3, 1,287,637 in 31.5 s"
    ));
    assert!(!names_exact_release("example from 2026-12-03, mtex 0.1.0"));
    assert!(marks_an_example(
        "(Example from 2026-12-03, mtex 0.1.0, with …)"
    ));
    assert!(marks_an_example("Example from\n2026-12-03, mtex 0.1.0."));
    assert!(!marks_an_example("Example from December, mtex 0.1.0") && !marks_an_example("mtex"));
    let excerpts = linux_excerpts(
        "Caption.\n\n```text\n window 1\n```\n\n```sh\ncargo mtex linux\n```\n\
         | a | b |\n| 6.12 | 68,168 |\n\n```\nphase 1: 1,270\n```\n",
    );
    let lines: Vec<usize> = excerpts.iter().map(|e| e.0).collect();
    assert_eq!(lines, [4, 10]);
    assert_eq!(excerpts[0].2, "Caption.");
    assert!(has_thousands("68,168") && !has_thousands("6.12, 7.3") && !has_thousands("1,2"));
    assert_eq!(
        misuse("the seed's v1 patch"),
        Some("\"seed\": name the patch thread by its subject")
    );
    let (n, hash) = (format!("{} 11's goals", "Issue"), format!("{} #3", "issue"));
    assert!(misuse(&n).is_some() && misuse(&hash).is_some());
    assert_eq!(misuse("QEMU is given `-seed 1`"), None);
    assert_eq!(misuse("RGSR_EL1 seeds IRG"), None);
    assert_eq!(misuse("an issue with the UART"), None);
    let prose = rust_prose(
        "/// doc seed\nfn the_seeds_matrix() { let q = '\"'; let s = \"a \\\"b\"; }\n\
         let r = r#\"raw \"x\"\"#; // tail\n/* block\n /* nested */ end */ x",
    );
    assert_eq!(
        prose,
        [
            (1, "/ doc seed".to_string()),
            (2, "a \"b".to_string()),
            (3, "raw \"x\" tail".to_string()),
            (4, " block".to_string()),
            (5, "  nested  end ".to_string()),
        ]
    );
}
