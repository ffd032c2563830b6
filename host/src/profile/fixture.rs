//! A profiled phase for the tests of what shows profiles: 25 kernel functions, a long Rust
//! name doing uaccess, a user function and an `[other]` bucket, with symbols for them.

use super::PhaseProfile;
use crate::model::report::{Phase, Report};
use crate::symbols::Symbols;
use mtex_abi::report::PcProfileEnd;
use mtex_trace::profile::PcEntry;

/// 25 kernel functions reading `i + 1` checked each (half with TCMA1), a user one, and
/// a long Rust name.
pub fn profile() -> (PhaseProfile, Symbols) {
    let mut funcs = Vec::new();
    let mut pcs = Vec::new();
    for i in 0..25u64 {
        funcs.push((0x1000 * (i + 1), 0x100, format!("kfunc_{i:02}")));
        pcs.push(PcEntry {
            pc: 0x1000 * (i + 1) + 4,
            el: 1,
            insns: 10,
            rd: [i + 1, i + 1, i + 1, i.div_ceil(2), 0],
            wr: [1, 1, 0, 0, 0],
            ..PcEntry::default()
        });
    }
    let long = "mtex_guest::kernel::very::deeply::nested::module::path::that::goes::on::\
                and::on::copy_from_user_checked";
    funcs.push((0x10_0000, 0x100, long.into()));
    pcs.push(PcEntry {
        pc: 0x10_0010,
        el: 1,
        unprivileged: true,
        insns: 3,
        rd: [7, 7, 0, 7, 0],
        ..PcEntry::default()
    });
    funcs.push((0x20_0000, 0x100, "main".into()));
    pcs.push(PcEntry {
        pc: 0x20_0010,
        el: 0,
        insns: 5,
        rd: [40, 40, 40, 40, 40],
        wr: [2, 2, 0, 2, 2],
        ..PcEntry::default()
    });
    let other = vec![PcEntry {
        el: 0,
        rd: [1, 1, 0, 0, 0],
        ..PcEntry::default()
    }];
    let p = PhaseProfile {
        pcs,
        other,
        ..PhaseProfile::default()
    };
    (p, Symbols::from_funcs(funcs))
}

/// A report of one traced phase (`futex-hash`) whose counts are [`profile`]'s, exactly.
pub fn report() -> (Report, Symbols) {
    let (mut p, s) = profile();
    p.end = Some(PcProfileEnd {
        records: (p.pcs.len() + p.other.len()) as u32,
        ..PcProfileEnd::default()
    });
    let phase = Phase {
        id: 3,
        name: "futex-hash".into(),
        end_ts: Some(10),
        end: Some(Default::default()),
        trace: Some(p.sum()),
        profile: Some(p),
        ..Phase::default()
    };
    (
        Report {
            phases: vec![phase],
            ..Report::default()
        },
        s,
    )
}

/// [`report`] as the results document a run writes, its functions named by the symbols.
pub fn results() -> crate::model::results::Results {
    let (r, symbols) = report();
    let mut doc = crate::model::results::Results::single(&r);
    doc.symbolize(&symbols);
    doc
}
