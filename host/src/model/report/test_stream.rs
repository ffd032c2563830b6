//! Test records framed into console text as the hypervisor sends them, shared by the
//! parser's tests and the checks' tests.

use mtex_abi::Record;
use mtex_abi::ShortStr;
use mtex_abi::frame;
use mtex_abi::report::{
    ExitReason, GuestState, PhasePmu, PhaseStats, PmuCount, PmuValue, Summary, SysregWrite,
};
use mtex_arch::SysReg;
use mtex_trace::counts::TraceCounts;

pub(super) fn frame(seq: u32, r: Record) -> String {
    let mut buf = [0u8; frame::MAX_TEXT];
    frame::encode(seq, &r, &mut buf).unwrap().to_string()
}

pub(super) fn summary(records: u32) -> Record {
    Record::Summary(Summary {
        records,
        exit: ExitReason::GuestExit { status: 0 },
        ts: 0,
        exits: 0,
    })
}

pub(super) fn write(old: u64, new: u64) -> Record {
    Record::SysregWrite(SysregWrite {
        reg: SysReg::SctlrEl1,
        old,
        new,
        at: GuestState::default(),
        ts: 1,
        phase: 0,
    })
}

/// The records of one phase: begin, PMU record (run, pass, passes, counts), end with
/// `instructions` at EL1 and EL0.
pub(super) fn pmu_phase(
    id: u32,
    run: u32,
    pass: u8,
    passes: u8,
    counts: &[(u16, u8, PmuValue)],
    instructions: [u64; 2],
) -> Vec<Record> {
    let mut c = [None; mtex_abi::report::PMU_COUNTS];
    for (slot, &(event, el, value)) in c.iter_mut().zip(counts) {
        *slot = Some(PmuCount {
            event,
            el,
            raw: false,
            value,
        });
    }
    let stats = PhaseStats {
        el1_instructions: Some(instructions[0]),
        el0_instructions: Some(instructions[1]),
        ..PhaseStats::default()
    };
    vec![
        Record::PhaseBegin(mtex_abi::report::PhaseBegin {
            id,
            name: ShortStr::truncated("getpid"),
            params: None,
            ts: u64::from(id) * 10,
            at: GuestState::default(),
        }),
        Record::PhasePmu(PhasePmu {
            id,
            run,
            pass,
            passes,
            counts: c,
        }),
        Record::PhaseEnd(mtex_abi::report::PhaseEnd {
            id,
            ts: u64::from(id) * 10 + 5,
            at: GuestState::default(),
            stats,
        }),
    ]
}

pub(super) fn stream(records: Vec<Record>) -> String {
    let n = records.len() as u32;
    records
        .into_iter()
        .chain([summary(n)])
        .enumerate()
        .map(|(i, r)| frame(i as u32, r))
        .collect()
}

pub(super) fn begin(id: u32, name: &str) -> Record {
    Record::PhaseBegin(mtex_abi::report::PhaseBegin {
        id,
        name: ShortStr::truncated(name),
        params: None,
        ts: 0,
        at: GuestState::default(),
    })
}

pub(super) fn end(id: u32, stats: PhaseStats) -> Record {
    Record::PhaseEnd(mtex_abi::report::PhaseEnd {
        id,
        ts: 1,
        at: GuestState::default(),
        stats,
    })
}

pub(super) fn traced(id: u32, counts: TraceCounts) -> Record {
    Record::PhaseTrace(mtex_abi::report::PhaseTrace { id, counts })
}
