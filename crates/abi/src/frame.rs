//! Framing: a record travels as one line of console text that a parser can pick out of
//! anything else on the console.
//!
//! ```text
//! @mtex <lowercase hex of: seq (u32 LE) | postcard(Record) | CRC-32 of the preceding (u32 LE)>
//! ```
//!
//! The marker may follow other text on the same line (a guest that printed without a newline);
//! the frame ends at the first character that is not a lowercase hex digit, so a line can hold
//! more than one frame (a lost newline) and each is still found. CRC-32 detects every corrupted
//! byte and every burst up to 32 bits; uppercase hex is rejected, so a changed digit can never
//! decode to the same value.
//!
//! Finding and decoding are total: any input, however damaged, gives frames that decode or
//! say why not, and nothing panics.

use crate::Record;

/// Marks the start of a frame.
pub const MARKER: &str = "@mtex ";

/// Largest binary frame (sequence number, record, checksum) in bytes.
pub const MAX_BINARY: usize = 240;
/// Largest text frame: marker, hex digits and the trailing newline.
pub const MAX_TEXT: usize = MARKER.len() + 2 * MAX_BINARY + 1;

const CRC: crc::Crc<u32> = crc::Crc::<u32>::new(&crc::CRC_32_ISO_HDLC);

/// Why a frame could not be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameError {
    /// An odd number of hex digits.
    OddLength,
    /// Too short to hold a sequence number and a checksum.
    TooShort,
    /// Longer than any record can be.
    TooLong,
    /// The checksum does not match: the frame was damaged in transit.
    BadChecksum,
    /// The checksum matches but the record does not decode (a different ABI version?).
    BadRecord,
    /// A character that is not a lowercase hex digit (only when [`decode`] is handed one:
    /// [`scan`] ends a frame at the first such character).
    NotHex,
}

/// Why a record could not be framed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordTooLarge;

/// Encodes `record` with sequence number `seq` as a text frame, newline included.
pub fn encode<'a>(
    seq: u32,
    record: &Record,
    out: &'a mut [u8; MAX_TEXT],
) -> Result<&'a str, RecordTooLarge> {
    let mut bin = [0u8; MAX_BINARY];
    bin[..4].copy_from_slice(&seq.to_le_bytes());
    let body = postcard::to_slice(record, &mut bin[4..MAX_BINARY - 4])
        .map_err(|_| RecordTooLarge)?
        .len();
    let crc = CRC.checksum(&bin[..4 + body]);
    bin[4 + body..8 + body].copy_from_slice(&crc.to_le_bytes());
    let bin = &bin[..8 + body];

    const HEX: &[u8; 16] = b"0123456789abcdef";
    out[..MARKER.len()].copy_from_slice(MARKER.as_bytes());
    let mut n = MARKER.len();
    for b in bin {
        out[n] = HEX[(b >> 4) as usize];
        out[n + 1] = HEX[(b & 15) as usize];
        n += 2;
    }
    out[n] = b'\n';
    // Only ASCII was written.
    Ok(core::str::from_utf8(&out[..n + 1]).unwrap_or(""))
}

/// Decodes the hex digits of one frame (the text after [`MARKER`], up to its end).
pub fn decode(hex: &str) -> Result<(u32, Record), FrameError> {
    decode_bytes(hex.as_bytes())
}

/// [`decode`] of raw bytes: total, whatever the bytes are.
fn decode_bytes(hex: &[u8]) -> Result<(u32, Record), FrameError> {
    if !hex.len().is_multiple_of(2) {
        return Err(FrameError::OddLength);
    }
    if hex.len() / 2 > MAX_BINARY {
        return Err(FrameError::TooLong);
    }
    if hex.len() / 2 < 9 {
        return Err(FrameError::TooShort);
    }
    let mut bin = [0u8; MAX_BINARY];
    let n = hex.len() / 2;
    for (b, pair) in bin.iter_mut().zip(hex.chunks_exact(2)) {
        let (Some(hi), Some(lo)) = (nibble(pair[0]), nibble(pair[1])) else {
            return Err(FrameError::NotHex);
        };
        *b = (hi << 4) | lo;
    }
    let (data, crc) = bin[..n].split_at(n - 4);
    if CRC.checksum(data).to_le_bytes() != crc {
        return Err(FrameError::BadChecksum);
    }
    let seq = u32::from_le_bytes([data[0], data[1], data[2], data[3]]);
    let record = postcard::from_bytes(&data[4..]).map_err(|_| FrameError::BadRecord)?;
    Ok((seq, record))
}

fn is_hex(b: u8) -> bool {
    nibble(b).is_some()
}

/// The value of a lowercase hex digit.
fn nibble(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        _ => None,
    }
}

/// One frame found in console text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Found {
    /// Byte offset of the marker in the text.
    pub offset: usize,
    /// Byte offset just past the frame's last hex digit: the text from here on (its newline,
    /// or whatever a lost newline let follow on the same line) is not part of the frame.
    /// Frames come in order and never overlap: the next one starts at or after this.
    pub end: usize,
    pub result: Result<(u32, Record), FrameError>,
    /// Bytes of another writer found inside the frame and taken out of it ([`recover`]):
    /// their offsets in the text, to be read as that writer's.
    pub inserted: Option<(usize, usize)>,
}

/// Finds every frame in `text`, in order.
pub fn scan(text: &str) -> impl Iterator<Item = Found> + '_ {
    scan_bytes(text.as_bytes())
}

/// [`scan`] of raw bytes (console output that may not be UTF-8). Total: every marker found
/// gives one [`Found`], decoded (put back together if another writer's bytes landed inside
/// it, [`recover`]) or with the reason it could not be; nothing panics.
pub fn scan_bytes(text: &[u8]) -> impl Iterator<Item = Found> + '_ {
    let mut pos = 0;
    let mut attempts = 0;
    core::iter::from_fn(move || {
        let rest = text.get(pos..)?;
        let start = pos + find(rest, MARKER.as_bytes())?;
        let digits = start + MARKER.len();
        let hex = text.get(digits..).unwrap_or(&[]);
        let len = hex.iter().position(|&b| !is_hex(b)).unwrap_or(hex.len());
        pos = digits + len;
        let result = decode_bytes(&hex[..len]);
        if result.is_err() && attempts < MAX_RECOVERIES {
            attempts += 1;
            if let Some(r) = recover(hex, len) {
                pos = digits + r.end;
                return Some(Found {
                    offset: start,
                    end: pos,
                    result: Ok(r.record),
                    inserted: Some((digits + r.cut.0, digits + r.cut.1)),
                });
            }
        }
        Some(Found {
            offset: start,
            end: pos,
            result,
            inserted: None,
        })
    })
}

/// Damaged frames a scan tries to [`recover`], at most: each try decodes a few thousand
/// candidates, and a console full of damaged frames must still be read at once.
const MAX_RECOVERIES: usize = 256;

/// How far before the first character that ends a damaged frame another writer's bytes may
/// begin (they may start with characters that are hex digits, as "echo" does).
const INSERT_LEAD: usize = 64;

/// Digits of the frame that must lie on each side of another writer's bytes for [`recover`]
/// to take them out: the sequence number before, and as many after. Fewer, and a digit the
/// frame lost or had changed near an end could be made good by a run of digits borrowed from
/// the text after it (about one chance in 16 per digit); with eight on each side no such
/// borrowing matches by chance more than a CRC-32 does. Bytes that landed closer to an end
/// leave the frame damaged, as any other damage does.
const KEPT_DIGITS: usize = 8;

/// A frame put back together by [`recover`].
struct Recovered {
    record: (u32, Record),
    /// The other writer's bytes, as offsets after the marker.
    cut: (usize, usize),
    /// Just past the frame's last hex digit, after the marker.
    end: usize,
}

/// A frame that another writer's bytes landed inside — the OS printing on the UART the
/// hypervisor's records share while a record was being written — is put back together: the
/// one contiguous run of bytes whose removal leaves hex digits that decode with a matching
/// CRC-32 is taken out. `after` is the text after the marker, `len` the hex digits that
/// ended at the first other character. Only runs that start at most [`INSERT_LEAD`] bytes
/// before that character, end where a run of hex digits starts that ends its line, leave
/// [`KEPT_DIGITS`] of the frame on each side, and lie before the next marker and within a
/// frame's length of text are tried.
fn recover(after: &[u8], len: usize) -> Option<Recovered> {
    let near = &after[..after.len().min(MAX_TEXT * 2)];
    let limit = find(near, MARKER.as_bytes()).unwrap_or(near.len());
    let mut candidate = [0u8; 2 * MAX_BINARY];
    // A frame ends its line: only a cut after which the frame's digits end at a newline (or
    // the text's end) is taken. The other writer's text may itself hold a run of digits that
    // would close the same frame (as "[    4.1]" does one ending in 4), and a frame that lost
    // its last digit must not borrow one from the text after it.
    for j in len + 1..limit {
        // The frame goes on where a run of hex digits starts.
        if !is_hex(after[j]) || is_hex(after[j - 1]) {
            continue;
        }
        let tail = after[j..limit]
            .iter()
            .position(|&b| !is_hex(b))
            .unwrap_or(limit - j);
        if tail < KEPT_DIGITS || !matches!(after.get(j + tail), None | Some(b'\n' | b'\r')) {
            continue;
        }
        for i in (len.saturating_sub(INSERT_LEAD).max(KEPT_DIGITS)..=len).rev() {
            let n = i + tail;
            if n > candidate.len() || !n.is_multiple_of(2) {
                continue;
            }
            candidate[..i].copy_from_slice(&after[..i]);
            candidate[i..n].copy_from_slice(&after[j..j + tail]);
            if let Ok(record) = decode_bytes(&candidate[..n]) {
                return Some(Recovered {
                    record,
                    cut: (i, j),
                    end: j + tail,
                });
            }
        }
    }
    None
}

/// The offset of the first occurrence of `needle` (not empty) in `haystack`.
fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::ShortStr;
    use crate::report::*;
    use mtex_arch::SysReg;
    use proptest::prelude::*;
    use std::string::String;
    use std::vec;

    fn any_state() -> impl Strategy<Value = GuestState> {
        (any::<u64>(), 0u8..4, any::<bool>()).prop_map(|(pc, el, tco)| GuestState { pc, el, tco })
    }

    fn any_text<const N: usize>() -> impl Strategy<Value = ShortStr<N>> {
        ".{0,40}".prop_map(|s: String| ShortStr::truncated(&s))
    }

    fn any_exit() -> impl Strategy<Value = ExitReason> {
        prop_oneof![
            any::<u64>().prop_map(|status| ExitReason::GuestExit { status }),
            Just(ExitReason::GuestSystemOff),
            Just(ExitReason::GuestSystemReset),
            (any::<u64>(), any::<u64>(), any::<u64>(), any_state()).prop_map(
                |(esr, far, hpfar, at)| ExitReason::UnhandledGuestExit {
                    esr,
                    far,
                    hpfar,
                    at
                }
            ),
            (any::<u64>(), any_state())
                .prop_map(|(budget_ms, at)| ExitReason::Watchdog { budget_ms, at }),
            (any::<u8>(), any::<u64>(), any::<u64>(), any::<u64>()).prop_map(
                |(vector, esr, elr, far)| ExitReason::HypException {
                    vector,
                    esr,
                    elr,
                    far
                }
            ),
            any_text().prop_map(|message| ExitReason::HypPanic { message }),
            (any_state(), any_text())
                .prop_map(|(at, reason)| ExitReason::TraceUnsupported { at, reason }),
            any_text().prop_map(|reason| ExitReason::BootFailed { reason }),
            (any::<[u64; 2]>(), any::<u32>(), any_state()).prop_map(|(v, phase, at)| {
                ExitReason::ProtectedWrite {
                    far: v[0],
                    ipa: v[1],
                    phase,
                    at,
                }
            }),
        ]
    }

    fn any_opt() -> impl Strategy<Value = Option<u64>> {
        proptest::option::of(any::<u64>())
    }

    fn any_sampled() -> impl Strategy<Value = crate::report::PhaseSampled> {
        (
            any::<[u32; 6]>(),
            any::<u64>(),
            any::<bool>(),
            any::<[u64; 7]>(),
        )
            .prop_map(|(n, seed, whole, e)| crate::report::PhaseSampled {
                id: n[0],
                units: n[1],
                unit_instructions: n[2],
                gap_us: n[3],
                seed,
                whole,
                engine: crate::report::StepEngine {
                    id: n[0],
                    branches_el0: e[0],
                    branches_el1: e[1],
                    entries_in_runs: e[2],
                    plans_made: e[3],
                    plans_reused: e[4],
                    stepped_starts: e[5],
                },
                late_triggers: n[4],
                untraced_id_debug_traps: n[5],
                timer_stopped: whole,
            })
    }

    fn any_record() -> impl Strategy<Value = Record> {
        prop_oneof![
            (
                any::<u64>(),
                any::<u64>(),
                any::<bool>(),
                any::<u64>(),
                any::<u64>(),
                any::<bool>()
            )
                .prop_map(|(a, b, fgt, c, d, pmu)| Record::Boot(Boot {
                    abi_version: a,
                    counter_hz: b,
                    trap_mode: if fgt {
                        TrapMode::FineGrained
                    } else {
                        TrapMode::Tvm
                    },
                    hyp_start: c,
                    hyp_end: d,
                    guest_entry: a ^ d,
                    guest_dtb: b ^ c,
                    watchdog_ms: a,
                    pmu_instructions: pmu,
                    midr: c,
                    boot_path: 1,
                    guest_ram_pa: 0x6000_0000,
                    console: 0x0900_0000,
                })),
            (any::<u32>(), any_text(), any::<u64>(), any_state()).prop_map(|(id, name, ts, at)| {
                Record::PhaseBegin(PhaseBegin {
                    id,
                    name,
                    params: None,
                    ts,
                    at,
                })
            }),
            (
                any::<u32>(),
                any::<u64>(),
                any_state(),
                any::<[u64; 3]>(),
                any_opt(),
                any_opt(),
                any_opt()
            )
                .prop_map(|(id, ts, at, c, a, b, d)| Record::PhaseEnd(PhaseEnd {
                    id,
                    ts,
                    at,
                    stats: PhaseStats {
                        exits: c[0],
                        step_exits: c[2] / 3,
                        exits_with_tco: c[1],
                        sysreg_writes: c[2],
                        virqs: 0,
                        el2_instructions: a,
                        el1_instructions: b,
                        el0_instructions: d,
                        el2_report_instructions: a.map(|x| x / 2),
                        pmu_disturbed: c[1] & 1 == 1,
                        emulated: c[1],
                        guest_pmu_accesses: c[0],
                        guest_debug_accesses: c[2],
                        wfx_traps: c[0] ^ c[1],
                    },
                })),
            (
                0..SysReg::ALL.len(),
                any::<u64>(),
                any::<u64>(),
                any_state(),
                any::<u64>(),
                any::<u32>()
            )
                .prop_map(|(r, old, new, at, ts, phase)| Record::SysregWrite(
                    SysregWrite {
                        reg: SysReg::ALL[r],
                        old,
                        new,
                        at,
                        ts,
                        phase,
                    }
                )),
            any_text().prop_map(Record::Console),
            (any::<u32>(), any::<u64>(), any_state(), any::<u32>()).prop_map(
                |(iss, value, at, phase)| Record::DebugWrite(DebugWrite {
                    iss,
                    value,
                    at,
                    phase
                })
            ),
            (any::<bool>(), any::<u64>(), any_state()).prop_map(|(hvc, function, at)| {
                Record::UnknownCall(UnknownCall {
                    conduit: if hvc { Conduit::Hvc } else { Conduit::Smc },
                    function,
                    at,
                })
            }),
            (any::<u32>(), any_exit(), any::<u64>(), any::<u64>()).prop_map(
                |(records, exit, ts, exits)| Record::Summary(Summary {
                    records,
                    exit,
                    ts,
                    exits
                })
            ),
            (any::<u32>(), any::<[u64; 6]>()).prop_map(|(id, v)| Record::StepEngine(
                crate::report::StepEngine {
                    id,
                    branches_el0: v[0],
                    branches_el1: v[1],
                    entries_in_runs: v[5],
                    plans_made: v[2],
                    plans_reused: v[3],
                    stepped_starts: v[4],
                }
            )),
            (any::<[u32; 6]>(), any::<[u64; 2]>(), any::<[bool; 2]>()).prop_map(|(n, w, b)| {
                Record::TcoWatch(crate::report::TcoWatch {
                    id: n[0],
                    sites: n[1],
                    unwatched: n[2],
                    first: n[3],
                    watched: n[4],
                    writes_el0: w[0],
                    writes_el1: w[1],
                    lost: b[0],
                    moved: b[1],
                    pages: n[5],
                })
            }),
            (any::<[u32; 2]>(), any::<[u8; 2]>(), any_pmu_counts()).prop_map(
                |(ids, pass, counts)| Record::PhasePmu(crate::report::PhasePmu {
                    id: ids[0],
                    run: ids[1],
                    pass: pass[0],
                    passes: pass[1],
                    counts,
                })
            ),
            (any::<[u64; 2]>(), 0usize..6, any_state(), any::<u32>()).prop_map(
                |(v, why, at, open)| {
                    use crate::doorbell::Refusal::*;
                    Record::DoorbellRefused(crate::report::DoorbellRefused {
                        offset: v[0],
                        value: v[1],
                        why: [Read, NotOneStore, Offset, BadId, AlreadyOpen, NotOpen][why],
                        at,
                        open,
                    })
                }
            ),
            (any::<bool>(), any::<u64>(), any_state(), any::<u32>()).prop_map(
                |(smc, function, at, phase)| Record::CallRefused(crate::report::CallRefused {
                    conduit: if smc {
                        crate::report::Conduit::Smc
                    } else {
                        crate::report::Conduit::Hvc
                    },
                    function,
                    at,
                    phase,
                })
            ),
            (any::<u32>(), any::<bool>(), any::<u64>()).prop_map(|(id, end, guest_clock)| {
                Record::PhaseClock(crate::report::PhaseClock {
                    id,
                    end,
                    guest_clock,
                })
            }),
            (any::<u32>(), any::<bool>(), any_pc_entry()).prop_map(|(id, other, entry)| {
                Record::PcProfile(crate::report::PcProfile { id, other, entry })
            }),
            (any::<u32>(), any::<u32>(), any::<u32>(), any::<u64>()).prop_map(
                |(id, records, pcs, other_notes)| Record::PcProfileEnd(
                    crate::report::PcProfileEnd {
                        id,
                        records,
                        pcs,
                        other_notes,
                    }
                )
            ),
            (
                any::<[u32; 3]>(),
                any::<[u64; 3]>(),
                any::<i32>(),
                any_state()
            )
                .prop_map(|(n, v, result, at)| Record::PowerCall(
                    crate::report::PowerCall {
                        cpu: n[0],
                        function: n[1],
                        target: v[0],
                        entry: v[1],
                        context_id: v[2],
                        result,
                        phase: n[2],
                        at,
                    }
                )),
            (any::<[u32; 2]>(), any_state()).prop_map(|(n, at)| Record::PhaseRefused(
                crate::report::PhaseRefused {
                    id: n[0],
                    cpus_on: n[1],
                    at,
                }
            )),
            (any::<[u32; 2]>(), any::<[u64; 19]>()).prop_map(|(n, v)| Record::CpuTrace(
                crate::report::CpuTrace {
                    id: n[0],
                    cpu: n[1],
                    instructions: [v[0], v[1]],
                    abandoned: [v[2], v[3]],
                    trapped: [v[4], v[5]],
                    hyp_branches: [v[6], v[7]],
                    checked: mtex_trace::counts::ByEl {
                        rd_u: v[8],
                        rd_k: v[9],
                        wr_u: v[10],
                        wr_k: v[11],
                    },
                    accesses: mtex_trace::counts::ByEl {
                        rd_u: v[12],
                        rd_k: v[13],
                        wr_u: v[14],
                        wr_k: v[15],
                    },
                    tag_check_faults: v[16],
                    unknown_mem: v[17],
                    step_exits: v[18],
                }
            )),
            any::<u32>().prop_map(|cpu| Record::OnCpu(crate::report::OnCpu { cpu })),
            (any::<u32>(), any::<u64>()).prop_map(|(records, lost)| Record::ResultsTaken(
                crate::report::ResultsTaken { records, lost }
            )),
            (any::<u32>(), any::<u64>(), any::<[u16; 6]>()).prop_map(|(id, guest_clock, v)| {
                let mut counts = mtex_trace::counts::TraceCounts {
                    instructions_el0: v[0].into(),
                    instructions_el1: v[1].into(),
                    ..Default::default()
                };
                counts.architectural.rd_k = v[2].into();
                counts.accesses.wr_u = v[3].into();
                counts.if_tcma1.rd_u = v[4].into();
                counts.tco_writes = v[5].into();
                Record::SampleUnit(crate::report::SampleUnit {
                    id,
                    lead: v[5] & 1 == 1,
                    guest_clock,
                    counts,
                })
            }),
            any_sampled().prop_map(Record::PhaseSampled),
            (
                any_sampled(),
                any::<u32>(),
                any::<Option<[u64; 2]>>(),
                any::<[u64; 2]>()
            )
                .prop_map(|(sampled, cpu, pmu_instructions, v)| Record::CpuSampled(
                    crate::report::CpuSampled {
                        id: sampled.id,
                        cpu,
                        sampled,
                        pmu_instructions,
                        emulated: v[0],
                        step_exits: v[1],
                    }
                )),
            (any::<[u32; 2]>(), any::<u64>()).prop_map(|(n, ticks)| Record::LockWait(
                crate::report::LockWait {
                    id: n[0],
                    cpu: n[1],
                    ticks,
                }
            )),
            (any::<u32>(), any::<[u64; 3]>()).prop_map(|(id, v)| Record::TraceImpdef(
                crate::report::TraceImpdef {
                    id,
                    failed_cas: v[0],
                    exclusive_pairs_mixed: v[1],
                    tagged_impdef: v[2],
                }
            )),
            (any::<u32>(), any::<[u64; 4]>()).prop_map(|(id, v)| Record::TraceMore(
                crate::report::TraceMore {
                    id,
                    abandoned_el0: v[0],
                    abandoned_el1: v[1],
                    trapped_el0: v[2],
                    trapped_el1: v[3],
                }
            )),
            (
                any::<[u32; 2]>(),
                any::<u8>(),
                any::<u16>(),
                any::<u64>(),
                any_state()
            )
                .prop_map(|(n, counter, event, evtyper, at)| Record::GuestPmuEvent(
                    GuestPmuEvent {
                        cpu: n[0],
                        counter,
                        event,
                        evtyper,
                        phase: n[1],
                        at,
                    }
                )),
            (any::<u32>(), any::<[u64; 2]>()).prop_map(|(id, v)| Record::PhaseIterations(
                crate::report::PhaseIterations {
                    id,
                    wanted: v[0],
                    counted: v[1],
                }
            )),
        ]
    }

    fn any_pc_entry() -> impl Strategy<Value = mtex_trace::profile::PcEntry> {
        (any::<u64>(), 0u8..2, any::<bool>(), any::<[u64; 18]>()).prop_map(|(pc, el, u, v)| {
            mtex_trace::profile::PcEntry {
                pc,
                el,
                unprivileged: u,
                stack: v[16] as u32,
                insns: v[0],
                faults: v[1],
                rd: [v[2], v[3], v[4], v[5], v[6]],
                wr: [v[7], v[8], v[9], v[10], v[11]],
                tag_stores: v[12],
                granules: v[13],
                tco_writes: v[14],
                tfsr_reads: v[15],
            }
        })
    }

    #[test]
    fn the_largest_pc_profile_record_fits_a_frame() {
        let full = Record::PcProfile(crate::report::PcProfile {
            id: u32::MAX,
            other: true,
            entry: mtex_trace::profile::PcEntry {
                pc: u64::MAX,
                el: 1,
                unprivileged: true,
                stack: u32::MAX,
                insns: u64::MAX,
                faults: u64::MAX,
                rd: [u64::MAX; 5],
                wr: [u64::MAX; 5],
                tag_stores: u64::MAX,
                granules: u64::MAX,
                tco_writes: u64::MAX,
                tfsr_reads: u64::MAX,
            },
        });
        let mut buf = [0u8; MAX_TEXT];
        let text = encode(u32::MAX, &full, &mut buf).expect("fits");
        let hex = text.trim_end().strip_prefix(MARKER).unwrap();
        assert_eq!(decode(hex).unwrap().1, full);
    }

    fn any_pmu_counts()
    -> impl Strategy<Value = [Option<crate::report::PmuCount>; crate::report::PMU_COUNTS]> {
        use crate::report::{PmuCount, PmuValue};
        let value = prop_oneof![
            any::<u64>().prop_map(PmuValue::Counted),
            Just(PmuValue::NotSupported),
            Just(PmuValue::Withheld),
            Just(PmuValue::NotCounted),
        ];
        let count =
            (any::<u16>(), 0u8..2, any::<bool>(), value).prop_map(|(event, el, raw, value)| {
                PmuCount {
                    event,
                    el,
                    raw,
                    value,
                }
            });
        proptest::array::uniform12(proptest::option::of(count))
    }

    #[test]
    fn the_largest_pmu_record_fits_a_frame() {
        use crate::report::{PMU_COUNTS, PhasePmu, PmuCount, PmuValue};
        let full = Record::PhasePmu(PhasePmu {
            id: u32::MAX,
            run: u32::MAX,
            pass: u8::MAX,
            passes: u8::MAX,
            counts: [Some(PmuCount {
                event: u16::MAX,
                el: 1,
                raw: true,
                value: PmuValue::Counted(u64::MAX),
            }); PMU_COUNTS],
        });
        let mut buf = [0u8; MAX_TEXT];
        let text = encode(u32::MAX, &full, &mut buf).expect("fits");
        let hex = text.trim_end().strip_prefix(MARKER).unwrap();
        assert_eq!(decode(hex).unwrap().1, full);
    }

    proptest! {
        #[test]
        fn any_record_round_trips(seq: u32, record in any_record()) {
            let mut buf = [0u8; MAX_TEXT];
            let line = encode(seq, &record, &mut buf).expect("every record fits a frame");
            let found: std::vec::Vec<_> = scan(line).collect();
            prop_assert_eq!(found.len(), 1);
            prop_assert_eq!(found[0].result, Ok((seq, record)));
        }

        #[test]
        fn any_corrupted_byte_is_detected(
            seq: u32,
            record in any_record(),
            at in any::<prop::sample::Index>(),
            replacement: u8,
        ) {
            let mut buf = [0u8; MAX_TEXT];
            let line = String::from(encode(seq, &record, &mut buf).unwrap());
            let mut bytes = line.into_bytes();
            let hex_len = bytes.len() - MARKER.len() - 1;
            let i = MARKER.len() + at.index(hex_len);
            prop_assume!(bytes[i] != replacement);
            bytes[i] = replacement;
            let text = String::from_utf8_lossy(&bytes);
            for f in scan(&text) {
                prop_assert!(f.result.is_err(), "corruption at {} undetected: {:?}", i, f.result);
            }
        }

        #[test]
        fn any_bytes_scan_without_panicking(
            bytes in proptest::collection::vec(
                prop_oneof![any::<u8>(), Just(b'@'), Just(b'\n'), Just(b'a'), Just(b'0')],
                0..600,
            ),
            frame_at in any::<prop::sample::Index>(),
        ) {
            // Arbitrary bytes with a real frame spliced in, so markers and long hex runs occur.
            let mut buf = [0u8; MAX_TEXT];
            let line = encode(3, &Record::Console(ShortStr::truncated("x")), &mut buf).unwrap();
            let mut text = bytes.clone();
            let at = frame_at.index(text.len() + 1);
            text.splice(at..at, line.bytes());
            let mut last = 0;
            for f in scan_bytes(&text) {
                prop_assert!(f.offset >= last && f.end <= text.len());
                prop_assert!(f.end >= f.offset + MARKER.len());
                last = f.end;
            }
            let lossy = String::from_utf8_lossy(&bytes);
            prop_assert!(scan(&lossy).all(|f| f.end <= lossy.len()));
        }

        #[test]
        fn frames_are_found_inside_other_text(record in any_record(), before in "[ -~]{0,30}") {
            let mut buf = [0u8; MAX_TEXT];
            let line = encode(7, &record, &mut buf).unwrap();
            let text = std::format!("{before}{line}guest text\n");
            let found: std::vec::Vec<_> = scan(&text).collect();
            prop_assert_eq!(found.len(), 1);
            prop_assert_eq!(found[0].result, Ok((7, record)));
        }
    }

    /// What the OS prints on the UART the records share, landed inside a record as it was
    /// written, at any place in it: taken out, the record reads whole, and the bytes taken
    /// out are exactly the ones that landed.
    #[test]
    fn another_writers_bytes_inside_a_frame_are_taken_out() {
        let record = Record::Console(ShortStr::truncated("a record of some length"));
        let mut buf = [0u8; MAX_TEXT];
        let line = String::from(encode(41, &record, &mut buf).unwrap());
        let hex = line.len() - MARKER.len() - 1;
        for insert in [
            "mtex-linux: init",
            "echo hi\r\n",
            "\r\n[    4.1] x\r\nok",
            "Z",
        ] {
            for at in [8, 9, 17, hex / 2, hex - 8] {
                let at = MARKER.len() + at;
                let text = std::format!("before\n{}{insert}{}after\n", &line[..at], &line[at..]);
                let found: std::vec::Vec<_> = scan(&text).collect();
                assert_eq!(found.len(), 1, "{text:?}");
                assert_eq!(found[0].result, Ok((41, record)), "{text:?}");
                let (a, b) = found[0].inserted.expect("taken out");
                assert_eq!(b - a, insert.len(), "{text:?}");
                let mut rest = String::from(&text[..a]);
                rest.push_str(&text[b..]);
                assert_eq!(rest, std::format!("before\n{line}after\n"), "{text:?}");
                assert_eq!(&text[found[0].end..], "\nafter\n");
            }
        }
    }

    /// A frame damaged otherwise (a digit changed, bytes lost) stays damaged, and a console
    /// of thousands of damaged frames with text after them is still read at once.
    #[test]
    fn other_damage_is_never_taken_for_an_insertion() {
        let mut buf = [0u8; MAX_TEXT];
        let line =
            String::from(encode(5, &Record::Console(ShortStr::truncated("hi")), &mut buf).unwrap());
        let mut changed = line.clone().into_bytes();
        let at = MARKER.len() + 6;
        changed[at] = if changed[at] == b'0' { b'1' } else { b'0' };
        let changed = String::from_utf8(changed).unwrap();
        let lost = std::format!(
            "{}{}",
            &line[..MARKER.len() + 8],
            &line[MARKER.len() + 10..]
        );
        for text in [
            std::format!("{changed}tail 12ab\n"),
            std::format!("{lost}x\n"),
        ] {
            let found: std::vec::Vec<_> = scan(&text).collect();
            assert!(
                found[0].result.is_err() && found[0].inserted.is_none(),
                "{text:?}"
            );
        }
        let many = std::format!("{}x 0a 1b 2c\n", &line[..line.len() - 9]).repeat(5000);
        let t = std::time::Instant::now();
        assert_eq!(scan(&many).filter(|f| f.result.is_err()).count(), 5000);
        assert!(
            t.elapsed() < std::time::Duration::from_secs(5),
            "{:?}",
            t.elapsed()
        );
    }

    #[test]
    fn two_frames_on_one_line_are_both_found() {
        let mut a = [0u8; MAX_TEXT];
        let mut b = [0u8; MAX_TEXT];
        let first = encode(0, &Record::Console(ShortStr::truncated("a")), &mut a).unwrap();
        let second = encode(1, &Record::Console(ShortStr::truncated("b")), &mut b).unwrap();
        // The newline between them lost.
        let text = std::format!("{}{second}", first.trim_end());
        let found: std::vec::Vec<_> = scan(&text).collect();
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].offset, 0);
        assert_eq!(found[0].end, first.len() - 1);
        assert_eq!(found[1].offset, first.len() - 1);
        assert_eq!(found[1].end, text.len() - 1);
        assert!(found.iter().all(|f| f.result.is_ok()), "{found:?}");
    }

    #[test]
    fn decode_of_anything_is_an_error_not_a_panic() {
        assert_eq!(decode("zz00000000000000000000"), Err(FrameError::NotHex));
        assert_eq!(decode("AB00000000000000000000"), Err(FrameError::NotHex));
        assert_eq!(decode("é000000000000000000"), Err(FrameError::NotHex));
        assert_eq!(decode(""), Err(FrameError::TooShort));
        assert_eq!(decode("0"), Err(FrameError::OddLength));
        // A marker at the very end, and one followed by non-ASCII text.
        let found: std::vec::Vec<_> = scan("x @mtex ").collect();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].result, Err(FrameError::TooShort));
        let found: std::vec::Vec<_> = scan("@mtex ab\u{e9}@mtex \u{fffd}").collect();
        assert_eq!(found.len(), 2);
        assert_eq!((found[0].end, found[1].offset), (8, 10));
    }

    #[test]
    fn truncated_frame_is_reported() {
        let mut buf = [0u8; MAX_TEXT];
        let line = encode(1, &Record::Console(ShortStr::truncated("hi")), &mut buf).unwrap();
        let cut = &line[..line.len() - 5];
        let found: std::vec::Vec<_> = scan(cut).collect();
        assert_eq!(found.len(), 1);
        assert!(found[0].result.is_err());
    }
}
