//! `options::KNOWN_KEYS` against the parsers, both ways: every key a parser reads is listed
//! (so the host never rejects an option the hypervisor or guest would take), and every listed
//! key is read by a parser (so the host never accepts an option nothing reads).

use mtex_abi::options::{GuestOptions, HypOptions, KNOWN_KEYS, OptionError, unknown_key};
use mtex_abi::scenario::Scenario;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The key a parser named when it refused `cmdline`, trying all three.
fn refused_key(cmdline: &str) -> Vec<&'static str> {
    let errors: [Result<(), OptionError>; 3] = [
        HypOptions::parse(cmdline).map(drop),
        GuestOptions::parse(cmdline).map(drop),
        Scenario::parse(cmdline).map(drop),
    ];
    errors
        .into_iter()
        .filter_map(|r| r.err().map(|e| e.key))
        .collect()
}

#[test]
fn every_listed_key_is_read_by_a_parser() {
    for key in KNOWN_KEYS {
        // No parser takes this value: the one that reads the key must refuse it, naming it.
        let line = format!("mtex.{key}=?not-a-value");
        assert!(
            refused_key(&line).contains(key),
            "mtex.{key} is in KNOWN_KEYS but no parser reads it ({:?})",
            refused_key(&line)
        );
        assert_eq!(unknown_key(&line), None);
    }
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The string literal keys of `value(<arg>, "key")` and `parse_u64(<arg>, "key", ...)` calls.
fn keys_read_in(source: &str) -> Vec<String> {
    let mut keys = Vec::new();
    for call in ["value(", "parse_u64("] {
        for (at, _) in source.match_indices(call) {
            // A call of this name, not of `foo_value(` or `.value(`'s cousins.
            let before = source[..at].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                continue;
            }
            let args = &source[at + call.len()..];
            let Some((first, rest)) = args.split_once(',') else {
                continue;
            };
            if first.contains([')', '"', '\n']) {
                continue;
            }
            let Some(rest) = rest.trim_start().strip_prefix('"') else {
                continue;
            };
            if let Some((key, _)) = rest.split_once('"') {
                keys.push(key.to_string());
            }
        }
    }
    keys
}

#[test]
fn every_key_a_parser_reads_is_listed() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut dirs: Vec<PathBuf> = ["hyp", "guest", "platform"]
        .iter()
        .map(|d| root.join(d).join("src"))
        .collect();
    for c in std::fs::read_dir(root.join("crates")).unwrap().flatten() {
        dirs.push(c.path().join("src"));
    }
    let mut files = Vec::new();
    for dir in &dirs {
        rust_files(dir, &mut files);
    }
    let mut read = BTreeSet::new();
    for f in &files {
        let source = std::fs::read_to_string(f).unwrap();
        for key in keys_read_in(&source) {
            read.insert((key, f.display().to_string()));
        }
    }
    // The scan works: it sees the scenario's and the hypervisor's keys.
    for sample in ["policies", "watchdog_ms", "bench_n"] {
        assert!(read.iter().any(|(k, _)| k == sample), "{read:?}");
    }
    for (key, file) in &read {
        assert!(
            KNOWN_KEYS.contains(&key.as_str()),
            "{file} reads mtex.{key}, which is not in options::KNOWN_KEYS: the host would reject it"
        );
    }
}

#[test]
fn unknown_keys_are_found() {
    assert_eq!(
        unknown_key("mtex.guest=kernel mtex.policy=tcma1"),
        Some("policy")
    );
    assert_eq!(unknown_key("mtex.hz=20 mtex.tcf0"), None);
    assert_eq!(unknown_key("mtex.=1"), Some(""));
    assert_eq!(unknown_key("mtex.Policies=tcma1"), Some("Policies"));
    assert_eq!(
        unknown_key("console=ttyAMA0 root=/dev/vda mtex.guest=spin"),
        None
    );
    assert_eq!(unknown_key(""), None);
}
