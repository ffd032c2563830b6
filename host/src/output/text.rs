//! Plain text every form shares: the width lines fit, thousands separators, a document's
//! strings made safe to print, and lines wrapped to the width.

use std::borrow::Cow;

/// The width every line fits, in characters (a terminal column per character: the report's
/// own text is ASCII plus `→`, `≠`, `…`, `—`; wide characters in a document's strings may
/// take two columns on a terminal).
pub const WIDTH: usize = 100;

/// Trapped writes listed per run; the rest are counted (all of them are in report.json).
pub const WRITES_LISTED: usize = 20;

/// `1,234,567`.
pub fn thousands(v: u64) -> String {
    group_digits(&v.to_string())
}

/// `-1,240`, `+157`, `0`: a signed difference as the comparison shows it.
pub fn signed_thousands(v: i128) -> String {
    let digits = group_digits(&v.unsigned_abs().to_string());
    match v.signum() {
        1 => format!("+{digits}"),
        -1 => format!("-{digits}"),
        _ => digits,
    }
}

/// `9,453.3`: a mean with `decimals` decimals, its integer part grouped. Not finite values
/// (a sum past f64's range) are shown as Rust prints them rather than grouped.
pub fn thousands_f64(v: f64, decimals: usize) -> String {
    if !v.is_finite() {
        return format!("{v}");
    }
    let s = format!("{:.*}", decimals, v.abs());
    let (int, frac) = s.split_once('.').map_or((s.as_str(), ""), |(i, f)| (i, f));
    let mut out = String::new();
    // `-0.0` after rounding is shown as `0.0`.
    if v < 0.0 && s.chars().any(|c| c.is_ascii_digit() && c != '0') {
        out.push('-');
    }
    out.push_str(&group_digits(int));
    if !frac.is_empty() {
        out.push('.');
        out.push_str(frac);
    }
    out
}

/// Inserts a comma every three digits from the right of a string of ASCII digits.
fn group_digits(digits: &str) -> String {
    let n = digits.len();
    let mut out = String::with_capacity(n + n / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (n - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Characters shown escaped: control characters, and the bidirectional overrides that would
/// reorder what follows them on the terminal.
fn unsafe_char(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{061c}')
}

/// A document's string made safe to print: control characters (a newline in a problem, an
/// escape sequence from a guest's console) and bidirectional overrides are shown escaped
/// (`\n`, `\u{1b}`) so that they can neither break the layout nor drive the terminal.
pub fn clean(s: &str) -> Cow<'_, str> {
    if !s.chars().any(unsafe_char) {
        return Cow::Borrowed(s);
    }
    Cow::Owned(
        s.chars()
            .map(|c| {
                if unsafe_char(c) {
                    c.escape_default().to_string()
                } else {
                    c.to_string()
                }
            })
            .collect(),
    )
}

/// Breaks `line` into lines of at most `width` characters: at the last space that fits,
/// else anywhere; continuation lines are indented 4 more than the line was (at most half the
/// width, so that each continuation still carries text). `width` must be at least 2.
pub fn wrap(line: &str, width: usize) -> Vec<String> {
    let chars: Vec<char> = line.chars().collect();
    if chars.len() <= width {
        return vec![line.to_string()];
    }
    let indent = chars.iter().take_while(|c| **c == ' ').count();
    let cont = (indent + 4).min(width / 2);
    let mut out = Vec::new();
    let mut rest = &chars[..];
    let mut prefix = 0;
    loop {
        let room = width - prefix;
        if rest.len() <= room {
            out.push(format!(
                "{}{}",
                " ".repeat(prefix),
                rest.iter().collect::<String>()
            ));
            break;
        }
        // A space at index `room` still allows a break: the space itself is dropped. Never
        // break inside the indentation (no progress).
        let cut = (1..=room)
            .rev()
            .find(|&i| rest[i] == ' ' && rest[..i].iter().any(|c| *c != ' '))
            .unwrap_or(room);
        let part: String = rest[..cut].iter().collect();
        out.push(format!("{}{}", " ".repeat(prefix), part.trim_end()));
        rest = &rest[cut..];
        while rest.first() == Some(&' ') {
            rest = &rest[1..];
        }
        if rest.is_empty() {
            break;
        }
        prefix = cont;
    }
    out
}

/// Text assembled line by line, every line wrapped to [`WIDTH`] and its trailing spaces
/// dropped.
#[derive(Debug, Default)]
pub struct Lines(String);

impl Lines {
    /// Appends `text`: one line, or several if it holds newlines.
    pub fn push(&mut self, text: &str) {
        for l in text.split('\n') {
            for w in wrap(l.trim_end(), WIDTH) {
                self.0.push_str(&w);
                self.0.push('\n');
            }
        }
    }

    /// An empty line.
    pub fn blank(&mut self) {
        self.0.push('\n');
    }

    pub fn into_string(self) -> String {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digits_are_grouped_by_three() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(1_272), "1,272");
        assert_eq!(thousands(u64::MAX), "18,446,744,073,709,551,615");
        assert_eq!(signed_thousands(-1240), "-1,240");
        assert_eq!(signed_thousands(157), "+157");
        assert_eq!(signed_thousands(0), "0");
        assert_eq!(thousands_f64(9453.333, 1), "9,453.3");
        assert_eq!(thousands_f64(-1234567.0, 0), "-1,234,567");
        assert_eq!(thousands_f64(-0.01, 1), "0.0");
        assert_eq!(thousands_f64(f64::INFINITY, 1), "inf");
    }

    #[test]
    fn long_lines_wrap_at_spaces_and_within_words() {
        let l = format!("  {}", "word ".repeat(50));
        let w = wrap(&l, 30);
        assert!(w.len() > 1);
        assert!(w.iter().all(|l| l.chars().count() <= 30), "{w:?}");
        assert!(w[1].starts_with("      word"), "{w:?}");
        let l = "x".repeat(250);
        let w = wrap(&l, 100);
        assert_eq!(w.iter().map(|l| l.trim().len()).sum::<usize>(), 250);
        assert!(w.iter().all(|l| l.chars().count() <= 100));
        // All indentation: still progress.
        let l = " ".repeat(120) + "x";
        assert!(wrap(&l, 100).iter().all(|l| l.chars().count() <= 100));
    }

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(clean("a\nb\u{1b}[2J"), "a\\nb\\u{1b}[2J");
        assert_eq!(clean("x\u{202e}y"), "x\\u{202e}y");
        assert!(matches!(clean("plain → text"), Cow::Borrowed(_)));
    }
}
