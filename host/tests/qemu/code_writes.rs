//! Snippets that write the code they run, under `-icount shift=0`: whatever the store's form
//! (SP-based, STGP, an ordinary store with the cache maintenance the architecture asks for),
//! the counts are those of the instructions the CPU executed — with breakpoint runs on (the
//! default) as when every instruction is stepped (`mtex.step=plain`) — or the report names
//! a problem. Every expectation comes from the snippet's own instructions.

use mtex::cli::snippet::{self, Env};
use mtex::model::report::Report;
use mtex_trace::counts::TraceCounts;

use mtex::images::built as images;

fn assemble(source: &str) -> Vec<u8> {
    match snippet::assemble_source(source).expect("running the assembler") {
        Ok(code) => code,
        Err(e) => panic!("{source}\ndid not assemble: {e}"),
    }
}

/// Runs `source` once at EL1 with the extra `mtex.` options; the report and the snippet
/// phase's counts, which must have come with no problem.
fn run(source: &str, extra: &[&str]) -> (Report, TraceCounts) {
    let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
    let (r, console) = snippet::run_with(images(), &assemble(source), &Env::default(), &extra)
        .expect("running QEMU");
    assert!(!console.timed_out, "host time limit hit:\n{}", console.text);
    let t = r
        .phase(snippet::PHASE)
        .and_then(|p| p.trace)
        .unwrap_or_else(|| {
            panic!(
                "no traced snippet phase:\n{}",
                mtex::output::matrix::text(&r)
            )
        });
    assert!(r.succeeded(), "{}", mtex::output::matrix::text(&r));
    assert_eq!((t.runs_lost, t.unknown_mem), (0, 0));
    (r, t)
}

/// The harness's instructions around one call at EL1.
fn harness() -> u64 {
    snippet::harness_instructions(&Env::default()).0
}

/// Runs `source` stepped and with runs; both must count `instructions` at EL1, `reads`
/// checked reads and `writes` checked writes, all under :k.
fn assert_both_ways(source: &str, instructions: u64, (reads, writes): (u64, u64)) {
    for extra in [&["step=plain"][..], &[]] {
        let (_, t) = run(source, extra);
        let what = if extra.is_empty() { "runs" } else { "stepped" };
        assert_eq!(
            (t.instructions_el1, t.instructions_el0),
            (instructions + harness(), 0),
            "{what}: instructions"
        );
        assert_eq!(
            (t.architectural.rd_k, t.architectural.wr_k),
            (reads, writes),
            "{what}: checked reads and writes"
        );
        assert_eq!(
            t.accesses.rd_k, reads,
            "{what}: every read is a tagged load"
        );
    }
}

/// An SP-based store (never checked, so no address is needed to count it) turns the ADD at
/// `2:` into a load through x0 (tag 3 pointer, tag 3 buffer: a checked read), DSB + ISB, the
/// load runs, and a second SP-based store puts the ADD back: 5 iterations, 5 checked reads.
#[test]
fn code_patched_and_restored_by_sp_based_stores_in_a_loop_is_counted_exactly() {
    let src = "
        movz w7, #0x0009
        movk w7, #0xf940, lsl #16   // ldr x9, [x0]
        movz w8, #0x0129
        movk w8, #0x9100, lsl #16   // add x9, x9, #0
        adr x5, 2f
        mov x14, sp
        mov x10, #5
    1:  mov sp, x5
        str w7, [sp]
        mov sp, x14
        dsb ish
        isb
    2:  add x9, x9, #0
        mov sp, x5
        str w8, [sp]
        mov sp, x14
        dsb ish
        isb
        subs x10, x10, #1
        b.ne 1b
        ret
    ";
    // 7 to set up, 13 per iteration, ret; the stores are SP-based: never checked.
    assert_both_ways(src, 7 + 13 * 5 + 1, (5, 0));
}

/// The same with STGP (a tag and data store, never checked) writing the four words at `2:`:
/// a load and three ADDs, then four ADDs again: 4 iterations, 4 checked reads.
#[test]
fn code_patched_and_restored_by_stgp_in_a_loop_is_counted_exactly() {
    let src = "
        movz x7, #0x0009
        movk x7, #0xf940, lsl #16   // ldr x9, [x0]
        movk x7, #0x0129, lsl #32
        movk x7, #0x9100, lsl #48   // add x9, x9, #0
        movz x11, #0x0129
        movk x11, #0x9100, lsl #16
        movk x11, #0x0129, lsl #32
        movk x11, #0x9100, lsl #48
        mov x8, x11
        adr x5, 2f
        mov x10, #4
    1:  stgp x7, x8, [x5]
        dsb ish
        isb
        b 2f
        .balign 16
    2:  add x9, x9, #0
        add x9, x9, #0
        add x9, x9, #0
        add x9, x9, #0
        stgp x11, x8, [x5]
        dsb ish
        isb
        subs x10, x10, #1
        b.ne 1b
        ret
    ";
    // 11 to set up, 13 per iteration, ret.
    assert_both_ways(src, 11 + 13 * 4 + 1, (4, 0));
}

/// The architecture's own recipe for self-modifying code: STR, DC CVAU, DSB, IC IVAU, DSB,
/// ISB, then the new instruction. Each of 3 iterations flips the word at `2:` between a load
/// through x0 and an ADD (load, add, load: 2 checked reads); each STR is a checked write
/// (tag 0 pointer, tag 0 code page).
#[test]
fn the_str_dc_cvau_ic_ivau_self_modifying_loop_is_counted_exactly() {
    let src = "
        movz w7, #0x0009
        movk w7, #0xf940, lsl #16   // ldr x9, [x0]
        movz w8, #0x0129
        movk w8, #0x9100, lsl #16   // add x9, x9, #0
        eor w12, w7, w8
        adr x5, 2f
        mov x10, #3
    1:  str w7, [x5]
        dc cvau, x5
        dsb ish
        ic ivau, x5
        dsb ish
        isb
    2:  add x9, x9, #0
        eor w7, w7, w12
        subs x10, x10, #1
        b.ne 1b
        ret
    ";
    // 7 to set up, 10 per iteration, ret.
    assert_both_ways(src, 7 + 10 * 3 + 1, (2, 3));
}
