//! The report parser against damaged consoles: real logs (a realistic sequence of records,
//! framed by `frame::encode`, with other text between them) mutated the ways a serial console
//! damages them — byte flips, lost, doubled and CRLF newlines, two frames on one line, foreign
//! text anywhere, repeated, dropped and swapped frames, truncation, bytes that are not UTF-8.
//!
//! What must hold: nothing panics; a report that says the run succeeded has exactly the records
//! that were sent (so damage that loses or alters a record is always a listed problem); damage
//! known to touch a record fails the run; damage known to touch none leaves it a success.
//!
//! Cases: 10 000 single mutations held to all three, and 3000 stacks of 1 to 5 mutations held
//! to the first two (about 0.7 s and 0.3 s in release mode on a 2-core machine).

use mtex::model::report::{self, Report};
use mtex_abi::frame;
use mtex_abi::report::{
    Boot, Conduit, ExitReason, GuestState, PhaseBegin, PhaseEnd, PhaseStats, PhaseTrace, Summary,
    SysregWrite, TcoSite, TrapMode, UnknownCall,
};
use mtex_abi::scenario::Scenario;
use mtex_abi::{Record, ShortStr};
use mtex_arch::SysReg;
use mtex_trace::counts::TraceCounts;
use proptest::prelude::*;
use proptest::sample::Index;

/// One phase of a generated run.
#[derive(Clone, Debug)]
struct PhaseSpec {
    writes: u8,
    traced: bool,
    sites: u8,
    params: bool,
    console: Option<String>,
}

#[derive(Clone, Debug)]
struct RunSpec {
    phases: Vec<PhaseSpec>,
    unknown_call: bool,
    /// Text that is not a record, before the record of this index (past the last: at the end).
    foreign: Vec<(Index, String)>,
}

/// A log as sent: its bytes, and where each frame is (marker to last hex digit).
#[derive(Clone, Debug)]
struct Log {
    bytes: Vec<u8>,
    frames: Vec<(usize, usize)>,
}

impl Log {
    /// Whether the line that a byte inserted at `p` lands on holds a frame.
    fn line_has_frame(&self, p: usize) -> bool {
        let b = &self.bytes;
        let start = b[..p]
            .iter()
            .rposition(|&c| c == b'\n')
            .map_or(0, |n| n + 1);
        let end = b[p..]
            .iter()
            .position(|&c| c == b'\n')
            .map_or(b.len(), |n| p + n);
        self.frames.iter().any(|&(o, e)| o < end && e > start)
            || self.frames.iter().any(|&(o, _)| o == start && start == end)
    }

    /// Positions of the newlines.
    fn newlines(&self) -> Vec<usize> {
        (0..self.bytes.len())
            .filter(|&i| self.bytes[i] == b'\n')
            .collect()
    }
}

fn is_hex(b: u8) -> bool {
    b.is_ascii_digit() || (b'a'..=b'f').contains(&b)
}

fn at(pc: u64, el: u8) -> GuestState {
    GuestState { pc, el, tco: false }
}

/// The records of a run shaped like `spec`, in the order the hypervisor sends them.
fn records(spec: &RunSpec) -> Vec<Record> {
    let scenario = Scenario::parse("").unwrap();
    let runs: Vec<_> = scenario.runs().collect();
    let mut out = vec![Record::Boot(Boot {
        abi_version: 0x1_0001,
        counter_hz: 62_500_000,
        trap_mode: TrapMode::FineGrained,
        hyp_start: 0x4020_0000,
        hyp_end: 0x4100_0000,
        guest_entry: 0x4100_0000,
        guest_dtb: 0x4000_0000,
        watchdog_ms: 10_000,
        pmu_instructions: true,
        midr: 0x000f_0510,
        boot_path: 1,
        guest_ram_pa: 0x6000_0000,
        console: 0x0900_0000,
    })];
    let mut ts = 1000;
    for (i, p) in spec.phases.iter().enumerate() {
        let id = i as u32 + 1;
        ts += 17;
        out.push(Record::PhaseBegin(PhaseBegin {
            id,
            name: ShortStr::truncated(&format!("phase {id}")),
            params: p.params.then(|| runs[i % runs.len()]),
            ts,
            at: at(0x4100_1000 + 4 * u64::from(id), 1),
        }));
        if let Some(c) = &p.console {
            out.push(Record::Console(ShortStr::truncated(c)));
        }
        for w in 0..u64::from(p.writes) {
            out.push(Record::SysregWrite(SysregWrite {
                reg: if w % 2 == 0 {
                    SysReg::SctlrEl1
                } else {
                    SysReg::TcrEl1
                },
                old: w << 40,
                new: (w + 1) << 40 | 0x30d5_0980,
                at: at(0x4100_2000 + 8 * w, 1),
                ts: ts + w,
                phase: id,
            }));
        }
        if p.traced {
            let mut counts = TraceCounts::default();
            counts.architectural.rd_k = 1175 + u64::from(id);
            counts.architectural.wr_k = 188;
            counts.tcf_elided.rd_u = 64;
            counts.instructions_el1 = 8511;
            counts.tco_writes = 33;
            out.push(Record::PhaseTrace(PhaseTrace { id, counts }));
            for s in 0..u64::from(p.sites) {
                out.push(Record::TcoSite(TcoSite {
                    phase: id,
                    pc: 0xffff_ff80_4100_3000 + 4 * s,
                    value: s % 2 == 0,
                    count: 33 + s,
                }));
            }
        }
        ts += 1000;
        out.push(Record::PhaseEnd(PhaseEnd {
            id,
            ts,
            at: at(0x4100_4000, 1),
            stats: PhaseStats {
                exits: 100 + u64::from(id),
                sysreg_writes: u64::from(p.writes),
                el1_instructions: Some(8511),
                ..PhaseStats::default()
            },
        }));
    }
    if spec.unknown_call {
        out.push(Record::UnknownCall(UnknownCall {
            conduit: Conduit::Hvc,
            function: 0xc600_00ff,
            at: at(0x4100_5000, 1),
        }));
    }
    let n = out.len() as u32;
    out.push(Record::Summary(Summary {
        records: n,
        exit: ExitReason::GuestExit { status: 0 },
        ts: ts + 5,
        exits: 4242,
    }));
    out
}

fn build(spec: &RunSpec) -> Log {
    let records = records(spec);
    let mut foreign: Vec<(usize, &str)> = spec
        .foreign
        .iter()
        .map(|(i, t)| (i.index(records.len() + 1), t.as_str()))
        .collect();
    foreign.sort_by_key(|&(i, _)| i);
    let mut log = Log {
        bytes: Vec::new(),
        frames: Vec::new(),
    };
    let mut buf = [0u8; frame::MAX_TEXT];
    for (i, r) in records.iter().enumerate() {
        for (_, t) in foreign.iter().filter(|&&(j, _)| j == i) {
            log.bytes.extend_from_slice(t.as_bytes());
        }
        let line = frame::encode(i as u32, r, &mut buf).expect("record fits a frame");
        let o = log.bytes.len();
        log.bytes.extend_from_slice(line.as_bytes());
        log.frames.push((o, o + line.len() - 1));
    }
    for (_, t) in foreign.iter().filter(|&&(j, _)| j == records.len()) {
        log.bytes.extend_from_slice(t.as_bytes());
    }
    log
}

fn foreign_text() -> impl Strategy<Value = String> {
    let no_marker = |s: &String| !s.contains("@mtex");
    prop_oneof![
        Just("U-Boot 2024.01 (Jan 01 2024 - 00:00:00 +0000)\n".to_string()),
        Just("qemu-system-aarch64: terminating on signal 15 from pid 7\n".to_string()),
        Just("deadbeef cafe 0123\n".to_string()),
        Just("ünïcödé → ✓ 漢字\n".to_string()),
        Just("\n".to_string()),
        "[ -~]{0,40}\n".prop_filter("no marker", no_marker),
        // A guest that printed without a newline: the next frame follows on the same line.
        "[ -~]{1,20}".prop_filter("no marker", no_marker),
        Just("partial ü→".to_string()),
    ]
}

fn run_spec() -> impl Strategy<Value = RunSpec> {
    let phase = (
        0u8..6,
        any::<bool>(),
        0u8..3,
        any::<bool>(),
        proptest::option::of("[ -~]{0,30}"),
    )
        .prop_map(|(writes, traced, sites, params, console)| PhaseSpec {
            writes,
            traced,
            sites,
            params,
            console,
        });
    (
        proptest::collection::vec(phase, 0..5),
        any::<bool>(),
        proptest::collection::vec((any::<Index>(), foreign_text()), 0..6),
    )
        .prop_map(|(phases, unknown_call, foreign)| RunSpec {
            phases,
            unknown_call,
            foreign,
        })
}

/// One way a console damages a log.
#[derive(Clone, Debug)]
enum Mutation {
    Flip(Index, u8),
    DeleteByte(Index),
    InsertNotUtf8(Index, u8),
    LoseNewline(Index),
    DoubleNewline(Index),
    Crlf,
    /// The newline between two frames lost: two frames on one line.
    JoinFrames(Index),
    InsertText(Index, String),
    InsertLine(Index, String),
    /// A copy of a frame inserted anywhere, with or without its newline.
    CopyFrame(Index, Index, bool),
    DropFrame(Index),
    SwapFrames(Index, Index),
    Truncate(Index),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let ascii = "[ -~]{1,12}".prop_filter("no marker", |s: &String| !s.contains("@mtex"));
    prop_oneof![
        (any::<Index>(), 1u8..=255).prop_map(|(i, x)| Mutation::Flip(i, x)),
        any::<Index>().prop_map(Mutation::DeleteByte),
        (any::<Index>(), 0x80u8..=0xff).prop_map(|(i, b)| Mutation::InsertNotUtf8(i, b)),
        any::<Index>().prop_map(Mutation::LoseNewline),
        any::<Index>().prop_map(Mutation::DoubleNewline),
        Just(Mutation::Crlf),
        any::<Index>().prop_map(Mutation::JoinFrames),
        (any::<Index>(), ascii.clone()).prop_map(|(i, t)| Mutation::InsertText(i, t)),
        (any::<Index>(), ascii).prop_map(|(i, t)| Mutation::InsertLine(i, t + "\n")),
        (any::<Index>(), any::<Index>(), any::<bool>())
            .prop_map(|(f, i, nl)| Mutation::CopyFrame(f, i, nl)),
        any::<Index>().prop_map(Mutation::DropFrame),
        (any::<Index>(), any::<Index>()).prop_map(|(a, b)| Mutation::SwapFrames(a, b)),
        any::<Index>().prop_map(Mutation::Truncate),
    ]
}

/// What the damage must do to the report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expect {
    /// A record was lost or altered: the run must fail.
    Fails,
    /// No record was touched: the run must still succeed.
    Succeeds,
    /// As [`Expect::Succeeds`], with a note that bytes were not UTF-8.
    SucceedsWithNote,
    /// Either, as long as a success reports exactly the records sent.
    Either,
}

/// Where `needle` occurs in `hay` as a whole frame (not followed by a hex digit).
fn frame_at(hay: &[u8], needle: &[u8]) -> Vec<usize> {
    if needle.is_empty() {
        return Vec::new();
    }
    (0..hay.len().saturating_sub(needle.len() - 1))
        .filter(|&q| hay[q..].starts_with(needle))
        .filter(|&q| !hay.get(q + needle.len()).copied().is_some_and(is_hex))
        .collect()
}

/// Whether every frame sent is still in `out`, whole, exactly once and in order: if not, a
/// record was lost, repeated or moved (its text is the only text that decodes to it).
fn frames_intact(log: &Log, out: &[u8]) -> bool {
    let mut last = None;
    for &(o, e) in &log.frames {
        match frame_at(out, &log.bytes[o..e])[..] {
            [q] if last.is_none_or(|l| q > l) => last = Some(q),
            _ => return false,
        }
    }
    // And no marker that is not one of them (a damaged frame made up by the mutation).
    let markers = out
        .windows(frame::MARKER.len())
        .filter(|w| *w == frame::MARKER.as_bytes())
        .count();
    markers == log.frames.len()
}

/// `m` applied to `log`, and what it must do.
fn mutate(log: &Log, m: &Mutation) -> (Vec<u8>, Expect) {
    let b = &log.bytes;
    let mut out = b.clone();
    let frames = &log.frames;
    // What damage that leaves every frame intact must do: kinds that can add no byte that is
    // not UTF-8 must leave a success.
    let harmless = match m {
        Mutation::Flip(i, x) => {
            let p = i.index(b.len());
            out[p] ^= x;
            Expect::Either
        }
        Mutation::DeleteByte(i) => {
            out.remove(i.index(b.len()));
            Expect::Either
        }
        Mutation::InsertNotUtf8(i, byte) => {
            let p = i.index(b.len() + 1);
            out.insert(p, *byte);
            if log.line_has_frame(p) {
                // Next to a record: listed as a problem even when the frame still decodes.
                return (out, Expect::Fails);
            }
            Expect::SucceedsWithNote
        }
        Mutation::LoseNewline(i) | Mutation::JoinFrames(i) => {
            let mut nl = log.newlines();
            if matches!(m, Mutation::JoinFrames(_)) {
                nl.retain(|&q| b[q + 1..].starts_with(frame::MARKER.as_bytes()));
            }
            if let Some(&q) = nl.get(i.index(nl.len().max(1))) {
                out.remove(q);
            }
            Expect::Succeeds
        }
        Mutation::DoubleNewline(i) => {
            let nl = log.newlines();
            out.insert(nl[i.index(nl.len())], b'\n');
            Expect::Succeeds
        }
        Mutation::Crlf => {
            out = b
                .iter()
                .flat_map(|&c| if c == b'\n' { vec![b'\r', c] } else { vec![c] })
                .collect();
            Expect::Succeeds
        }
        Mutation::InsertText(i, t) | Mutation::InsertLine(i, t) => {
            let p = i.index(b.len() + 1);
            out.splice(p..p, t.bytes());
            // Among a frame's digits (the OS printing while a record was written, through
            // UEFI): put back together by its checksum, or damaged; never another record.
            if log
                .frames
                .iter()
                .any(|&(o, e)| p >= o + frame::MARKER.len() && p < e)
            {
                return (out, Expect::Either);
            }
            // Into the middle of a character of other text: bytes that are not UTF-8.
            if b.get(p).is_some_and(|&c| (0x80..0xc0).contains(&c)) {
                Expect::Either
            } else {
                Expect::Succeeds
            }
        }
        Mutation::CopyFrame(f, i, newline) => {
            let (o, e) = frames[f.index(frames.len())];
            let mut copy = b[o..e].to_vec();
            if *newline {
                copy.push(b'\n');
            }
            let p = i.index(b.len() + 1);
            out.splice(p..p, copy);
            // Into the marker of its own original, the copy stands in for it. Into any frame,
            // a checksum may show the copy to be text inside that frame, taken out.
            if log.frames.iter().any(|&(o, e)| p > o && p < e) {
                return (out, Expect::Either);
            }
            Expect::Either
        }
        Mutation::DropFrame(f) => {
            let (o, e) = frames[f.index(frames.len())];
            out.drain(o..e + 1);
            Expect::Either
        }
        Mutation::SwapFrames(x, y) => {
            let (mut x, mut y) = (x.index(frames.len()), y.index(frames.len()));
            if x > y {
                std::mem::swap(&mut x, &mut y);
            }
            if x != y {
                let ((xo, xe), (yo, ye)) = (frames[x], frames[y]);
                out = [&b[..xo], &b[yo..ye], &b[xe..yo], &b[xo..xe], &b[ye..]].concat();
            }
            Expect::Succeeds
        }
        Mutation::Truncate(i) => {
            out.truncate(i.index(b.len()));
            Expect::Succeeds
        }
    };
    let expect = if frames_intact(log, &out) {
        harmless
    } else {
        Expect::Fails
    };
    (out, expect)
}

/// The records a report holds: everything but the text around them.
fn records_of(r: &Report) -> Report {
    Report {
        other_output: Vec::new(),
        notes: Vec::new(),
        ..r.clone()
    }
}

/// The rules every report of a damaged log keeps, `sent` being the undamaged log's.
fn check_report(r: &Report, sent: &Report) -> Result<(), TestCaseError> {
    let same = records_of(r) == records_of(sent);
    prop_assert!(
        !r.succeeded() || same,
        "a success with records that differ from those sent: {:?}",
        r
    );
    prop_assert!(
        same || !r.problems.is_empty(),
        "records lost or altered without a problem listed"
    );
    Ok(())
}

fn config(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    // 10 000 cases: about 0.7 s in release mode.
    #![proptest_config(config(10_000))]

    #[test]
    fn one_mutation_is_judged_right(spec in run_spec(), m in mutation()) {
        let log = build(&spec);
        let sent = report::parse_bytes(&log.bytes);
        prop_assert!(sent.succeeded(), "undamaged log failed: {:?}", sent.problems);
        prop_assert!(sent.notes.is_empty() && sent.problems.is_empty());
        let (damaged, expect) = mutate(&log, &m);
        let r = report::parse_bytes(&damaged);
        check_report(&r, &sent)?;
        let text = String::from_utf8_lossy(&damaged);
        match expect {
            Expect::Fails => prop_assert!(
                !r.succeeded(),
                "damage to a record not reported ({:?}):\n{}",
                m,
                text
            ),
            Expect::Succeeds | Expect::SucceedsWithNote => {
                prop_assert!(
                    r.succeeded(),
                    "harmless damage ({:?}) failed the run: {:?}\n{}",
                    m,
                    r.problems,
                    text
                );
                prop_assert_eq!(records_of(&r), records_of(&sent));
                // (A cut can leave half a character of other text: a note too.)
                if !matches!(m, Mutation::Truncate(_)) {
                    prop_assert_eq!(
                        expect == Expect::SucceedsWithNote,
                        !r.notes.is_empty(),
                        "notes {:?}",
                        r.notes
                    );
                }
            }
            Expect::Either => {}
        }
    }
}

proptest! {
    // 3000 cases of 1 to 5 mutations each: about 0.3 s in release mode.
    #![proptest_config(config(3000))]

    #[test]
    fn stacked_mutations_never_pass_for_the_records_sent(
        spec in run_spec(),
        ms in proptest::collection::vec(mutation(), 1..=5),
    ) {
        let mut log = build(&spec);
        let sent = report::parse_bytes(&log.bytes);
        for m in &ms {
            // Frame positions are the original's; after the first mutation they are a guess,
            // which is all `mutate` needs to pick places (its expectation is not used here).
            if log.bytes.is_empty() {
                break;
            }
            if log.newlines().is_empty() {
                log.bytes.push(b'\n');
            }
            log.frames.retain(|&(_, e)| e < log.bytes.len());
            if log.frames.is_empty() {
                log.frames.push((0, 0));
            }
            log.bytes = mutate(&log, m).0;
        }
        let r = report::parse_bytes(&log.bytes);
        check_report(&r, &sent)?;
    }
}

#[test]
fn two_frames_on_every_line() {
    // Every newline lost: the whole run on one line.
    let spec = RunSpec {
        phases: vec![
            PhaseSpec {
                writes: 3,
                traced: true,
                sites: 2,
                params: true,
                console: Some("hello".into()),
            };
            3
        ],
        unknown_call: true,
        foreign: Vec::new(),
    };
    let log = build(&spec);
    let sent = report::parse_bytes(&log.bytes);
    let one_line: Vec<u8> = log.bytes.iter().copied().filter(|&c| c != b'\n').collect();
    let r = report::parse_bytes(&one_line);
    assert!(r.succeeded(), "{:?}", r.problems);
    assert_eq!(records_of(&r), records_of(&sent));
    assert_eq!(r.writes.len(), 9);
}
