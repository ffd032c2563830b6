//! The decoder against a corpus assembled by a real assembler (binutils' aarch64-linux-gnu-as,
//! installed by scripts/ensure-deps): every line of tests/corpus.s is one instruction and the
//! decoding it must get.

use mtex_trace::decode::{Barrier, DataKey, Dir, Extend, Insn, MemKind, MteSysReg, Offset, decode};
use object::{Object, ObjectSection};
use std::path::Path;
use std::process::Command;

fn describe(i: Insn) -> String {
    match i {
        Insn::Mem(m) => {
            let kind = match m.kind {
                MemKind::Data => "data".to_string(),
                MemKind::Literal => "literal".into(),
                MemKind::Prefetch => "prefetch".into(),
                MemKind::DcZva => "zva".into(),
                MemKind::DcTagBlock { zero_data: false } => "gva".into(),
                MemKind::DcTagBlock { zero_data: true } => "gzva".into(),
                MemKind::TagStore { granules, data } => {
                    format!("tagstore{granules}{}", if data { "+data" } else { "" })
                }
                MemKind::TagStoreBlock { zero_data } => {
                    format!("tagblock{}", if zero_data { "+data" } else { "" })
                }
                MemKind::TagLoad => "tagload".into(),
            };
            let dir = match m.dir {
                Dir::Read => "r",
                Dir::Write => "w",
                Dir::ReadWrite => "rw",
            };
            let form = match m.offset {
                Offset::Imm(i) => format!("imm:{i}"),
                Offset::PostIndex => "post".into(),
                Offset::Reg { m, extend, shift } => {
                    let e = match extend {
                        Extend::Uxtw => "uxtw",
                        Extend::Lsl => "lsl",
                        Extend::Sxtw => "sxtw",
                        Extend::Sxtx => "sxtx",
                    };
                    format!("reg:{m}:{e}:{shift}")
                }
            };
            let unpriv = if m.unprivileged { " unpriv" } else { "" };
            let wb = if m.writeback { " wb" } else { "" };
            let ex = if m.exclusive { " excl" } else { "" };
            let auth = match m.auth {
                None => "",
                Some(DataKey::A) => " auth:a",
                Some(DataKey::B) => " auth:b",
            };
            format!(
                "{kind} {dir} {} {form} base:{}{unpriv}{wb}{ex}{auth}",
                m.size, m.base
            )
        }
        Insn::MsrTcoImm(b) => format!("msr-tco #{}", b as u8),
        Insn::MsrTcoReg(t) => format!("msr-tco x{t}"),
        Insn::MrsTco(t) => format!("mrs-tco x{t}"),
        Insn::SysRegWrite(r, t) => format!("msr {} x{t}", reg(r)),
        Insn::SysRegRead(r, t) => format!("mrs {} x{t}", reg(r)),
        Insn::Barrier(Barrier::Dsb) => "dsb".into(),
        Insn::Barrier(Barrier::Dmb) => "dmb".into(),
        Insn::Barrier(Barrier::Isb) => "isb".into(),
        Insn::UnknownMem => "unknown-mem".into(),
        Insn::Other => "other".into(),
    }
}

fn reg(r: MteSysReg) -> &'static str {
    match r {
        MteSysReg::SctlrEl1 => "sctlr",
        MteSysReg::TcrEl1 => "tcr",
        MteSysReg::TfsrEl1 => "tfsr",
        MteSysReg::Tfsre0El1 => "tfsre0",
        MteSysReg::GcrEl1 => "gcr",
        MteSysReg::RgsrEl1 => "rgsr",
    }
}

#[test]
fn decoder_matches_the_assembled_corpus() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let source = std::fs::read_to_string(dir.join("corpus.s")).unwrap();
    let cases: Vec<(&str, &str)> = source
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (insn, expect) = l.split_once("//").expect("every line has an expectation");
            (insn.trim(), expect.trim())
        })
        .collect();
    let out = std::env::temp_dir().join(format!("mtex-corpus-{}", std::process::id()));
    std::fs::create_dir_all(&out).unwrap();
    let asm = out.join("corpus.s");
    let obj = out.join("corpus.o");
    let text: String = cases.iter().map(|(i, _)| format!("{i}\n")).collect();
    std::fs::write(&asm, text).unwrap();
    let status = Command::new("aarch64-linux-gnu-as")
        .args(["-march=armv8.8-a+memtag+ls64+sve+sme", "-o"])
        .arg(&obj)
        .arg(&asm)
        .status()
        .expect("aarch64-linux-gnu-as (binutils-aarch64-linux-gnu; run scripts/ensure-deps)");
    assert!(status.success(), "the corpus does not assemble");
    let bytes = std::fs::read(&obj).unwrap();
    let file = object::File::parse(&*bytes).unwrap();
    let code = file
        .section_by_name(".text")
        .unwrap()
        .data()
        .unwrap()
        .to_vec();
    assert_eq!(code.len(), 4 * cases.len(), "one instruction per line");
    let mut wrong = Vec::new();
    for ((insn, expect), word) in cases.iter().zip(code.chunks_exact(4)) {
        let w = u32::from_le_bytes(word.try_into().unwrap());
        let got = describe(decode(w));
        if got != *expect {
            wrong.push(format!(
                "{insn:<40} {w:#010x}: expected `{expect}`, decoded `{got}`"
            ));
        }
    }
    let _ = std::fs::remove_dir_all(&out);
    assert!(
        wrong.is_empty(),
        "{} of {} wrong:\n{}",
        wrong.len(),
        cases.len(),
        wrong.join("\n")
    );
}
