//! `mtex snippet`: one test per register and buffer of the snippet's environment
//! (docs/snippets.md, "Environment"), under `-icount shift=0`. Every expectation comes from the
//! snippet's own instructions: N loads through a register are N reads, each checked or not as
//! the environment says that register's memory and pointer are.

use mtex::cli::snippet::{self, AsmError, Env, Tcf};
use mtex::images;
use mtex::model::report::Report;
use mtex_trace::counts::{ByEl, TraceCounts};
use std::process::{Command, Stdio};

use mtex::images::built as images;

fn assemble(source: &str) -> Vec<u8> {
    match snippet::assemble_source(source).expect("running the assembler") {
        Ok(code) => code,
        Err(e) => panic!("{source}\ndid not assemble: {e}"),
    }
}

/// Runs `source` under `env`; the report and the snippet phase's trace counts.
fn run(source: &str, env: Env) -> (Report, TraceCounts) {
    let (r, console) = snippet::run_code(images(), &assemble(source), &env).expect("running QEMU");
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
    (r, t)
}

/// Like [`run`], and the run must have succeeded.
fn run_ok(source: &str, env: Env) -> TraceCounts {
    let (r, t) = run(source, env);
    assert!(r.succeeded(), "{}", mtex::output::matrix::text(&r));
    assert_eq!(t.tag_check_faults, 0);
    t
}

/// `n` copies of `line`, then `ret`.
fn repeat(line: &str, n: u64) -> String {
    let mut s = String::new();
    for _ in 0..n {
        s.push_str(line);
        s.push('\n');
    }
    s + "ret\n"
}

fn el0() -> Env {
    Env {
        el: 0,
        ..Env::default()
    }
}

const fn rd_k(n: u64) -> ByEl {
    ByEl {
        rd_k: n,
        wr_k: 0,
        rd_u: 0,
        wr_u: 0,
    }
}

const fn wr_k(n: u64) -> ByEl {
    ByEl {
        rd_k: 0,
        wr_k: n,
        rd_u: 0,
        wr_u: 0,
    }
}

const fn rd_u(n: u64) -> ByEl {
    ByEl {
        rd_k: 0,
        wr_k: 0,
        rd_u: n,
        wr_u: 0,
    }
}

const NONE: ByEl = rd_k(0);

/// x0 at EL1: a buffer of allocation tag 3 through a pointer tagged 3: N loads are N checked
/// reads under :k in every view but the one where the kernel left TCO set; the instructions
/// are the snippet's N + 1 and the harness's.
#[test]
fn tagged_loads_through_x0_are_checked_reads_at_el1() {
    const N: u64 = 7;
    let t = run_ok(&repeat("ldr x9, [x0]", N), Env::default());
    assert_eq!(t.architectural, rd_k(N));
    assert_eq!(t.tcf_elided, rd_k(N));
    assert_eq!(t.if_tcma1, rd_k(N));
    assert_eq!(t.if_kernel_tco, NONE);
    assert_eq!(t.accesses, rd_k(N));
    let env = Env::default();
    let (h1, h0) = snippet::harness_instructions(&env);
    assert_eq!((h1, h0), (16, 0));
    assert_eq!(t.instructions_el1, N + 1 + h1);
    assert_eq!(t.instructions_el0, 0);
}

/// x1 is x0's size: a store to its last word stays inside the buffer and is checked; a store
/// one byte past it would be the next page (not the buffer).
#[test]
fn stores_through_x0_are_checked_writes_up_to_x1() {
    const N: u64 = 5;
    let src = format!(
        "{}sub x10, x1, #8\nstr x9, [x0, x10]\nret\n",
        "str x9, [x0]\n".repeat(N as usize)
    );
    let t = run_ok(&src, Env::default());
    assert_eq!(t.architectural, wr_k(N + 1));
    assert_eq!(t.accesses, wr_k(N + 1));
}

/// The example in scripts/snippets: 8 reads (one a pair), and with --iters 3 three times
/// as many, and three times the snippet's instructions.
#[test]
fn the_tagged_loads_example_and_iters_multiply_the_counts() {
    let file = images::workspace_root().join("scripts/snippets/tagged-loads.S");
    let src = std::fs::read_to_string(&file).unwrap();
    let one = run_ok(&src, Env::default());
    assert_eq!(one.architectural, rd_k(8));
    let three = run_ok(
        &src,
        Env {
            iters: 3,
            ..Env::default()
        },
    );
    assert_eq!(three.architectural, rd_k(24));
    assert_eq!(three.tcf_elided, rd_k(24));
    let per_iter = 9 + snippet::HARNESS_EL1_PER_ITER;
    assert_eq!(three.instructions_el1 - one.instructions_el1, 2 * per_iter);
}

/// The memcpy example copies 256 bytes 32 at a time: 8 loops of two LDPs and two STPs.
#[test]
fn the_memcpy_example_counts_its_pairs() {
    let file = images::workspace_root().join("scripts/snippets/memcpy-variant.S");
    let t = run_ok(&std::fs::read_to_string(&file).unwrap(), Env::default());
    let pairs = 256 / 32 * 2;
    assert_eq!(
        t.architectural,
        ByEl {
            rd_k: pairs,
            wr_k: pairs,
            rd_u: 0,
            wr_u: 0
        }
    );
}

/// At EL0, x0 is the user buffer: the same loads are checked reads under :u. The harness adds
/// its EL0 loop and SVC, and at EL1 the return path, whose 7 loads are never checked.
#[test]
fn el0_loads_are_checked_reads_under_u() {
    const N: u64 = 6;
    let env = el0();
    let t = run_ok(&repeat("ldr x9, [x0]", N), env);
    assert_eq!(t.architectural, rd_u(N));
    assert_eq!(t.tcf_elided, rd_u(N));
    assert_eq!(
        t.accesses,
        ByEl {
            rd_k: snippet::HARNESS_EL0_LOADS_AT_EL1,
            wr_k: 0,
            rd_u: N,
            wr_u: 0
        }
    );
    let (h1, h0) = snippet::harness_instructions(&env);
    assert_eq!(t.instructions_el0, N + 1 + h0);
    assert_eq!(t.instructions_el1, h1);
    // x2 is the same buffer, and TCF0 none elides the checks but not the architectural count.
    let t = run_ok(
        &repeat("ldr x9, [x2]", N),
        Env {
            tcf0: Tcf::None,
            ..el0()
        },
    );
    assert_eq!(t.architectural, rd_u(N));
    assert_eq!(t.tcf_elided, NONE);
}

/// x2 from EL1 by LDTR/STTR: user accesses judged by EL0's controls, counted under :k, and
/// as uaccess.
#[test]
fn ldtr_and_sttr_through_x2_are_uaccess() {
    const R: u64 = 4;
    const W: u64 = 3;
    let src = format!(
        "{}{}ret\n",
        "ldtr x9, [x2]\n".repeat(R as usize),
        "sttr x9, [x2, #8]\n".repeat(W as usize)
    );
    let t = run_ok(&src, Env::default());
    let u = t.uaccess;
    assert_eq!((u.rd, u.wr), (R, W));
    assert_eq!((u.arch_rd, u.arch_wr), (R, W));
    assert_eq!((u.elided_rd, u.elided_wr), (R, W));
    assert_eq!(
        t.architectural,
        ByEl {
            rd_k: R,
            wr_k: W,
            rd_u: 0,
            wr_u: 0
        }
    );
    // TCF0 decides the elided view of a uaccess, TCF does not.
    let t = run_ok(
        &src,
        Env {
            tcf0: Tcf::None,
            ..Env::default()
        },
    );
    assert_eq!((t.uaccess.arch_rd, t.uaccess.arch_wr), (R, W));
    assert_eq!((t.uaccess.elided_rd, t.uaccess.elided_wr), (0, 0));
    assert_eq!(t.tcf_elided, NONE);
}

/// x3 is x0's buffer through TTBR1, tag 3: checked. With tag 0xF and TCMA1 it is match-all:
/// unchecked, though still an access.
#[test]
fn tcma1_makes_tag_f_upper_half_pointers_unchecked() {
    const N: u64 = 5;
    let through_x3 = repeat("ldr x9, [x3]", N);
    let t = run_ok(&through_x3, Env::default());
    assert_eq!(t.architectural, rd_k(N));
    let tcma1 = Env {
        tcma1: true,
        ..Env::default()
    };
    // Tag 3 is not match-all: TCMA1 changes nothing.
    let t = run_ok(&through_x3, tcma1);
    assert_eq!(t.architectural, rd_k(N));

    let tag_f = format!(
        "orr x10, x3, #0x0f00000000000000\n{}",
        repeat("ldr x9, [x10]", N)
    );
    let t = run_ok(&tag_f, tcma1);
    assert_eq!(t.architectural, NONE);
    assert_eq!(t.tcf_elided, NONE);
    assert_eq!(t.accesses, rd_k(N));
    // Without TCMA1 the same pointer is checked (and mismatches: TCF none lets it run); the
    // counterfactual view says what TCMA1 would have saved.
    let t = run_ok(
        &tag_f,
        Env {
            tcf: Tcf::None,
            ..Env::default()
        },
    );
    assert_eq!(t.architectural, rd_k(N));
    assert_eq!(t.tcf_elided, NONE);
    assert_eq!(t.if_tcma1, NONE);
}

/// x4 is a page without the Tagged attribute: nothing through it is checked.
#[test]
fn loads_through_x4_the_untagged_page_are_not_checked() {
    const N: u64 = 6;
    let t = run_ok(&repeat("ldr x9, [x4]", N), Env::default());
    assert_eq!(t.architectural, NONE);
    assert_eq!(t.tcf_elided, NONE);
    assert_eq!(t.if_tcma1, NONE);
    assert_eq!(t.accesses, rd_k(N));
}

/// SP: a stack of allocation tag 0. A push and pop with writeback are checked (and match);
/// SP-relative accesses without writeback are not checkable.
#[test]
fn the_stack_matches_sp_and_only_writeback_is_checked() {
    let src = "stp x29, x30, [sp, #-32]!\n\
               str x9, [sp, #16]\n\
               ldr x9, [sp, #16]\n\
               ldp x29, x30, [sp], #32\n\
               ret\n";
    let t = run_ok(src, Env::default());
    assert_eq!(
        t.architectural,
        ByEl {
            rd_k: 1,
            wr_k: 1,
            rd_u: 0,
            wr_u: 0
        }
    );
    assert_eq!(
        t.accesses,
        ByEl {
            rd_k: 2,
            wr_k: 2,
            rd_u: 0,
            wr_u: 0
        }
    );
}

/// TCF none: the architectural count is unchanged and nothing is elided-checked.
#[test]
fn tcf_none_leaves_the_architectural_count() {
    const N: u64 = 4;
    let t = run_ok(
        &repeat("ldr x9, [x0]", N),
        Env {
            tcf: Tcf::None,
            ..Env::default()
        },
    );
    assert_eq!(t.architectural, rd_k(N));
    assert_eq!(t.tcf_elided, NONE);
}

/// A pointer tag that does not match: under TCF sync the snippet faults, which ends the run
/// (failed, the phase ended by the harness's vector at the fault, the fault counted); under
/// async the access completes and the fault recorded in TFSR_EL1 fails the run after the
/// phase.
#[test]
fn a_mismatching_tag_fails_the_run() {
    let src = "eor x9, x0, #0x0100000000000000\nldr x10, [x9]\nret\n";
    let (r, t) = run(src, Env::default());
    assert!(!r.succeeded());
    assert_eq!(t.tag_check_faults, 1);
    assert!(r.phase(snippet::PHASE).unwrap().stats.is_some());

    let (r, t) = run(
        src,
        Env {
            tcf: Tcf::Async,
            ..Env::default()
        },
    );
    assert!(!r.succeeded());
    assert_eq!(t.tag_check_faults, 0);
    assert_eq!(t.architectural, rd_k(1));
    assert!(
        r.console
            .iter()
            .any(|l| l.contains("asynchronous tag-check fault recorded")),
        "{:?}",
        r.console
    );
}

/// An SVC of the snippet's own at EL0 comes back to EL1 before the loop ends: the run fails,
/// saying so, rather than reporting the iterations it skipped.
#[test]
fn an_svc_at_el0_ends_the_run_as_a_failure() {
    let (r, t) = run("ldr x9, [x0]\nsvc #0\nret\n", el0());
    assert!(!r.succeeded());
    assert_eq!(t.architectural, rd_u(1));
    assert!(
        r.console
            .iter()
            .any(|l| l.contains("ended the snippet early")),
        "{:?}",
        r.console
    );
}

/// Runs the mtex binary; (exit code, stderr).
fn mtex(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_mtex"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

/// The command exits 0 on a clean run and 1 when the snippet faulted, with the fault in the
/// summary.
#[test]
fn the_command_exits_1_when_the_snippet_faults() {
    let file = images::workspace_root().join("scripts/snippets/tagged-loads.S");
    let (code, stderr) = mtex(&["snippet", file.to_str().unwrap(), "--iters", "2"]);
    assert_eq!(code, Some(0), "{stderr}");
    let dir = mtex::qemu::TempDir::new("snippet-test").unwrap();
    let bad = dir.path().join("mismatch.S");
    std::fs::write(
        &bad,
        "eor x9, x0, #0x0100000000000000\nldr x10, [x9]\nret\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_mtex"))
        .args(["snippet", bad.to_str().unwrap()])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("tag-check faults 1;"), "{stdout}");
}

/// A snippet that does not assemble: exit 2 with the assembler's own line, before any boot.
#[test]
fn bad_assembly_exits_2_with_the_assemblers_line() {
    let dir = mtex::qemu::TempDir::new("snippet-test").unwrap();
    let file = dir.path().join("bad.S");
    std::fs::write(&file, "ldr x9, [x0]\nldr x9, [x0, #1, lsl #3]\nret\n").unwrap();
    let (code, stderr) = mtex(&["snippet", file.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{stderr}");
    let line = format!("{}:2: Error: ", file.display());
    assert!(stderr.contains(&line), "{stderr}");
}

/// A snippet that needs a symbol it does not define is refused (exit 2), naming it.
#[test]
fn external_symbols_are_refused() {
    match snippet::assemble_source("bl memcpy\nret\n").unwrap() {
        Err(AsmError::Refused(m)) => assert!(m.contains("memcpy"), "{m}"),
        other => panic!("{other:?}"),
    }
    match snippet::assemble_source(".data\n.quad 1\n.text\nret\n").unwrap() {
        Err(AsmError::Refused(m)) => assert!(m.contains(".data"), "{m}"),
        other => panic!("{other:?}"),
    }
    match snippet::assemble_source(".rept 2049\nnop\n.endr\nret\n").unwrap() {
        Err(AsmError::Refused(m)) => assert!(m.contains("8192"), "{m}"),
        other => panic!("{other:?}"),
    }
    let dir = mtex::qemu::TempDir::new("snippet-test").unwrap();
    let file = dir.path().join("ext.S");
    std::fs::write(&file, "bl memcpy\nret\n").unwrap();
    let (code, stderr) = mtex(&["snippet", file.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("memcpy"), "{stderr}");
}

/// `movz`/`movk` lines that put the 64-bit `value` in `reg`.
fn load_imm(reg: &str, value: u64) -> String {
    let mut s = format!("movz {reg}, #{:#x}\n", value & 0xffff);
    for shift in [16, 32, 48] {
        let part = (value >> shift) & 0xffff;
        if part != 0 {
            s.push_str(&format!("movk {reg}, #{part:#x}, lsl #{shift}\n"));
        }
    }
    s
}

/// The snippet phase, exactly once in the report.
fn only_phase(r: &Report) -> TraceCounts {
    let phases: Vec<_> = r
        .phases
        .iter()
        .filter(|p| p.name == snippet::PHASE)
        .collect();
    assert_eq!(phases.len(), 1, "{}", mtex::output::matrix::text(r));
    phases[0].trace.expect("traced")
}

/// The run failed, with a problem saying the snippet's call was refused.
fn refused_call(r: &Report, call: &str) {
    assert!(!r.succeeded(), "{}", mtex::output::matrix::text(r));
    assert!(
        r.problems
            .iter()
            .any(|p| p.contains("refused") && p.contains(call)),
        "{:?}",
        r.problems
    );
}

/// A snippet that ends the harness's phase and opens another of the same name is refused
/// both calls by the hypervisor: the one phase holds every load (2 before, 2 after), and the
/// run fails, naming the calls.
#[test]
fn a_snippet_cannot_end_and_reopen_its_phase() {
    use mtex_abi::hypercall as hc;
    let name: [u64; 4] = hc::pack_bytes(snippet::PHASE.as_bytes());
    let src = format!(
        "mov x11, x0\nldr x9, [x0]\nldr x9, [x0, #8]\n{}mov x1, #1\nhvc #0\n\
         {}mov x1, #1\n{}mov x3, xzr\nmov x4, xzr\nmov x5, xzr\nmov x6, #{}\nhvc #0\n\
         ldr x9, [x11]\nldr x9, [x11, #8]\nret\n",
        load_imm("x0", u64::from(hc::PHASE_END)),
        load_imm("x0", u64::from(hc::PHASE_BEGIN)),
        load_imm("x2", name[0]),
        hc::PHASE_TRACED,
    );
    let (r, _) = run(&src, Env::default());
    let t = only_phase(&r);
    assert_eq!(t.architectural, rd_k(4));
    refused_call(&r, "PHASE_END");
    refused_call(&r, "PHASE_BEGIN");
}

/// A snippet that ends the run on its first of 10 iterations (mtex's EXIT call, PSCI
/// SYSTEM_OFF, or an HVC it wrote into its buffer and called there) is refused: the 10
/// iterations run, each load counted, and the run fails naming the call.
#[test]
fn a_snippet_cannot_end_the_run_early() {
    use mtex_abi::hypercall as hc;
    let ten = Env {
        iters: 10,
        ..Env::default()
    };
    let exit = format!(
        "ldr x9, [x0]\n{}mov x1, xzr\nhvc #0\nret\n",
        load_imm("x0", u64::from(hc::EXIT))
    );
    let (r, _) = run(&exit, ten);
    assert_eq!(only_phase(&r).architectural, rd_k(10));
    refused_call(&r, "EXIT");

    let off = format!("ldr x9, [x0]\n{}smc #0\nret\n", load_imm("x0", 0x8400_0008));
    let (r, _) = run(&off, ten);
    assert_eq!(only_phase(&r).architectural, rd_k(10));
    refused_call(&r, "SYSTEM_OFF");

    // `hvc #0; ret` written at x0 + 64 (untagged for the branch) and called there: the call
    // is outside the snippet's code, and still not the harness's.
    let elsewhere = format!(
        "ldr x9, [x0]\n{}str w10, [x0, #64]\n{}str w10, [x0, #68]\ndsb ish\nisb\n\
         and x9, x0, #0x00ffffffffffffff\nadd x9, x9, #64\nmov x17, x30\n{}mov x1, xzr\n\
         blr x9\nmov x30, x17\nret\n",
        load_imm("x10", 0xd400_0002),
        load_imm("x10", 0xd65f_03c0),
        load_imm("x0", u64::from(hc::EXIT)),
    );
    let (r, _) = run(&elsewhere, ten);
    // Each iteration: one load, and the two stores that write the call (checked: x0's tag).
    let wr = ByEl {
        wr_k: 20,
        ..rd_k(10)
    };
    assert_eq!(only_phase(&r).architectural, wr);
    refused_call(&r, "EXIT");
}

/// After a fault the guest's exception handler runs (and ends the run); the phase ends at
/// the exception vector, so its instructions are the harness's 6 (five MOVs, BLR), the
/// snippet's 2 (the faulting load is abandoned, not counted) and the vector's, and the
/// summary says which are the snippet's.
#[test]
fn after_a_fault_the_snippets_instructions_are_its_own() {
    let src = "mov x10, #1\neor x9, x0, #0x0100000000000000\nldr x10, [x9]\nret\n";
    let (r, t) = run(src, Env::default());
    assert!(!r.succeeded());
    assert_eq!(t.tag_check_faults, 1);
    assert_eq!(
        t.instructions_el1,
        6 + 2 + snippet::VECTOR_TO_PHASE_END,
        "{}",
        mtex::output::matrix::text(&r)
    );
    let s = snippet::summary(&r, &Env::default(), "fault.S", src.len());
    assert!(s.contains("the snippet's: 2 / 0"), "{s}");

    // At EL0: the harness's 6 and the snippet's 2 at EL0; at EL1 the ERET in and the
    // vector's 8 (it first tells the harness's SVC from the fault).
    let (r, t) = run(src, el0());
    assert!(!r.succeeded());
    assert_eq!(t.tag_check_faults, 1);
    assert_eq!(
        (t.instructions_el1, t.instructions_el0),
        (1 + snippet::VECTOR_TO_PHASE_END_FROM_EL0, 6 + 2),
        "{}",
        mtex::output::matrix::text(&r)
    );
    let s = snippet::summary(&r, &el0(), "fault.S", src.len());
    assert!(s.contains("the snippet's: 0 / 2"), "{s}");
}

/// The exported counter of `name` (report.json's, the text's, CSV's) in `t`.
fn exported(t: &TraceCounts, name: &str) -> u64 {
    *mtex::model::results::trace_counters(t)
        .get(name)
        .unwrap_or_else(|| panic!("no counter {name}"))
}

/// LDTR/STTR with PSTATE.TCO set are accesses the kernel makes to user memory, none of them
/// Tag Checked: the exported `uaccess_checked_*` must say 0, as `mem_access_checked_*:k`
/// does, and `uaccess_rd`/`uaccess_wr` hold them all.
#[test]
fn ldtr_and_sttr_with_tco_set_are_uaccess_but_not_checked() {
    const N: usize = 10;
    let src = format!(
        "msr tco, #1\n{}{}msr tco, #0\nret\n",
        "ldtr x9, [x2]\n".repeat(N),
        "sttr x9, [x2, #8]\n".repeat(N)
    );
    let t = run_ok(&src, Env::default());
    for (name, want) in [
        ("uaccess_rd", N as u64),
        ("uaccess_wr", N as u64),
        ("uaccess_checked_rd", 0),
        ("uaccess_checked_wr", 0),
        ("tcf_elided.uaccess_checked_rd", 0),
        ("mem_access_checked_rd:k", 0),
        ("mem_access_checked_wr:k", 0),
        ("mem_access_rd:k", N as u64),
        ("mem_access_wr:k", N as u64),
    ] {
        assert_eq!(exported(&t, name), want, "{name}");
    }
}

/// Every data write is in `mem_access_wr:k`: STGP's 16 bytes, the zeroing of STZG, STZ2G,
/// STZGM and DC GZVA (each one Unchecked write), and DC ZVA (a checked one, the tag
/// matching); STG only stores tags.
#[test]
fn tag_stores_that_zero_data_are_data_writes() {
    const N: usize = 10;
    let body = "stgp x9, x10, [x0]\nstzg x0, [x0, #16]\nstz2g x0, [x0, #32]\n\
                stzgm x0, [x0]\ndc gzva, x0\ndc zva, x0\nstg x0, [x0, #64]\n";
    let t = run_ok(&format!("{}ret\n", body.repeat(N)), Env::default());
    let n = N as u64;
    assert_eq!(exported(&t, "mem_access_wr:k"), 6 * n);
    assert_eq!(exported(&t, "mem_access_checked_wr:k"), n);
    assert_eq!(exported(&t, "tag_store_insns"), 6 * n);
}

/// SSBB and PSSBB share DSB's encoding but are speculation barriers; DSB with nXS is a DSB.
#[test]
fn only_data_synchronization_barriers_are_dsb() {
    let src = ".arch armv8.7-a+memtag\nssbb\npssbb\ndsb ishnxs\ndsb sy\ndmb ish\nisb\nret\n";
    let t = run_ok(src, Env::default());
    assert_eq!(
        (
            exported(&t, "dsb"),
            exported(&t, "dmb"),
            exported(&t, "isb")
        ),
        (2, 1, 1)
    );
}

/// The guest reads a feature in its ID register and loads through x0 once if it is there:
/// the checked reads say what the guest was told (1: present, 0: hidden).
fn guest_sees(register: &str, lsb: u8) -> u64 {
    let src = format!(
        "mrs x9, {register}\nubfx x9, x9, #{lsb}, #4\ncbz x9, 1f\nldr x10, [x0]\n1:\nret\n"
    );
    run_ok(&src, Env::default()).architectural.rd_k
}

/// What the hypervisor does not handle is hidden from the guest in its ID registers: SME,
/// GCS and the rest read as absent on a CPU (QEMU's max) that has them, while MTE stays.
#[test]
fn features_the_hypervisor_does_not_handle_are_hidden_from_the_guest() {
    assert_eq!(guest_sees("id_aa64pfr1_el1", 8), 1, "MTE is told");
    assert_eq!(guest_sees("id_aa64pfr1_el1", 24), 0, "SME is hidden");
    assert_eq!(guest_sees("s3_0_c0_c4_1", 44), 0, "GCS is hidden");
    assert_eq!(guest_sees("s3_0_c0_c7_3", 8), 0, "S1PIE is hidden");
    assert_eq!(guest_sees("s3_0_c0_c7_3", 16), 0, "S1POE is hidden");
    assert_eq!(guest_sees("s3_0_c0_c7_3", 0), 0, "TCR2 is hidden");
}

/// A guest that uses a hidden feature's register anyway never runs unseen: where the CPU
/// has the feature (QEMU's max has SME), the access traps and the run ends with a record
/// naming the register and the feature; where it does not, the guest takes the UNDEFINED
/// exception the CPU gives (the snippet's harness ends with 0x100 | EC 0). Never a hang.
#[test]
fn a_hidden_features_register_used_anyway_ends_the_run_naming_it() {
    for (insn, named, cpu_has_it) in [
        (
            "mrs x9, s3_0_c1_c2_4",
            "MRS SMPRI_EL1, a register of FEAT_SME",
            true,
        ),
        (
            "mrs x9, s3_3_c13_c0_5",
            "MRS TPIDR2_EL0, a register of FEAT_SME",
            true,
        ),
        (
            "msr s3_0_c2_c5_0, x9",
            "MSR GCSCR_EL1, a register of FEAT_GCS",
            false,
        ),
        (
            "msr s3_0_c10_c2_4, xzr",
            "MSR POR_EL1, a register of FEAT_S1POE",
            false,
        ),
        (
            "msr s3_0_c2_c0_3, xzr",
            "MSR TCR2_EL1, a register of FEAT_TCR2",
            false,
        ),
    ] {
        let (r, console) = snippet::run_code(
            images(),
            &assemble(&format!("{insn}\nret\n")),
            &Env::default(),
        )
        .expect("running QEMU");
        assert!(!console.timed_out, "{insn}: host time limit hit");
        assert!(!r.succeeded(), "{insn}");
        let text = mtex::output::matrix::text(&r);
        let undefined = matches!(
            r.summary.map(|s| s.exit),
            Some(mtex_abi::report::ExitReason::GuestExit { status: 0x100 })
        );
        assert!(text.contains(named) || undefined, "{insn}:\n{text}");
        if cpu_has_it {
            assert!(text.contains(named), "{insn}:\n{text}");
        }
    }
}

/// perf in a guest programs a counter with a raw MTE event (`perf stat -e r4025:k`) in a
/// run that leaves the guest the hardware's events alone (`mtex.guest_pmu_events=0`); QEMU
/// implements none of 0x4024-0x4026, so that counter counts nothing and perf would print 0.
/// The run names the counter and the event once, and fails; an event the CPU implements
/// (cycles) raises nothing.
#[test]
fn a_pmu_counter_given_an_mte_event_the_cpu_lacks_is_a_problem() {
    let source = "mov x0, #0x11\nmsr pmevtyper0_el0, x0\n\
                  mov x0, #0x4025\nmsr pmevtyper0_el0, x0\n\
                  msr pmselr_el0, xzr\nmov x0, #0x4026\nmsr pmxevtyper_el0, x0\n\
                  mov x0, #0x4025\nmsr pmevtyper0_el0, x0\nret\n";
    let off = ["guest_pmu_events=0".to_string()];
    let (r, _) = snippet::run_with(images(), &assemble(source), &Env::default(), &off)
        .expect("running QEMU");
    assert!(!r.succeeded(), "{}", mtex::output::matrix::text(&r));
    let named: Vec<_> = r
        .problems
        .iter()
        .filter(|p| p.contains("PMU counter"))
        .collect();
    assert_eq!(named.len(), 1, "{:#?}", r.problems);
    assert!(
        named[0].contains("counter 0 with event 0x4025 (mem_access_checked_rd)"),
        "{}",
        named[0]
    );
    assert!(
        !r.problems.iter().any(|p| p.contains("0x0011")),
        "{:#?}",
        r.problems
    );
}

/// SME is hidden from the guest (whether Streaming SVE mode's loads and stores are Tag
/// Checked is IMPLEMENTATION DEFINED): a snippet that enables SME at EL1 anyway
/// (CPACR_EL1.SMEN), enters streaming mode and loads through a SIMD register ends the run,
/// named, before the load is counted as anything.
#[test]
fn streaming_mode_is_refused_before_any_access_is_counted() {
    let (r, console) = snippet::run_code(
        images(),
        &assemble(
            ".arch armv9-a+sme\nmrs x0, cpacr_el1\norr x0, x0, #(3 << 24)\nmsr cpacr_el1, x0\n\
             isb\nsmstart\nldr q0, [x9]\nsmstop\nret\n",
        ),
        &Env::default(),
    )
    .expect("running QEMU");
    assert!(!console.timed_out, "host time limit hit");
    assert!(!r.succeeded());
    let text = mtex::output::matrix::text(&r);
    assert!(text.contains("SME instruction"), "{text}");
    assert!(
        r.phase(snippet::PHASE)
            .and_then(|p| p.trace)
            .is_none_or(|t| t.accesses.rd_k == 0 && t.architectural.rd_k == 0),
        "{text}"
    );
}

/// The 32-bit words of `source`'s instructions.
fn words(source: &str) -> Vec<u32> {
    assemble(source)
        .chunks(4)
        .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
        .collect()
}

/// Runs `mtex snippet` on `source` with `args`: (exit code, standard output).
fn mtex_snippet(source: &str, args: &[&str]) -> (Option<i32>, String) {
    let dir = mtex::qemu::TempDir::new("snippet-test").unwrap();
    let file = dir.path().join("hostile.S");
    std::fs::write(&file, source).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_mtex"))
        .arg("snippet")
        .arg(&file)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    (out.status.code(), format!("{stdout}\n{stderr}"))
}

/// A snippet that finds the harness's loop counter instruction from its return address
/// (`subs x27, x27, #1`, within 8 instructions of x30) and makes it count 5 at a time, so
/// that `--iters 10` calls it twice. The harness's code is read-only while the snippet runs:
/// the store ends the run with a record naming it, and the command exits 1.
#[test]
fn a_snippet_that_rewrites_the_harness_loop_counter_fails_the_run() {
    let subs = words("subs x27, x27, #1\nsubs x27, x27, #5\n");
    let src = format!(
        "ldr x9, [x0]\n{}{}mov x10, x30\nmov x11, #8\n\
         1: ldr w12, [x10]\ncmp w12, w13\nb.eq 2f\nadd x10, x10, #4\nsubs x11, x11, #1\n\
         b.ne 1b\nret\n\
         2: str w14, [x10]\ndc cvau, x10\ndsb ish\nic ivau, x10\ndsb ish\nisb\nret\n",
        load_imm("x13", u64::from(subs[0])),
        load_imm("x14", u64::from(subs[1])),
    );
    stopped_by_read_only_code(&src);
}

/// `src`, run 10 times, writes code that is read-only while its phase is open: the write
/// ends the run, named as a problem, and the command exits 1.
fn stopped_by_read_only_code(src: &str) {
    let (code, out) = mtex_snippet(src, &["--iters", "10"]);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("PROBLEM: ") && out.contains("read-only while"),
        "{out}"
    );
}

/// A snippet that rewrites the guest's fault reporter (the branch target of its exception
/// vector, found from VBAR_EL1) to call EXIT(0), then faults on a mismatching tag: the run
/// would end "successfully" a third of the way into its first of 10 iterations. The guest's
/// code is read-only while the snippet runs: the store ends the run, and the command exits 1.
#[test]
fn a_snippet_that_rewrites_the_guests_fault_reporter_fails_the_run() {
    use mtex_abi::hypercall as hc;
    let exit0 = words(&format!(
        "{}mov x1, xzr\nhvc #0\n",
        load_imm("x0", u64::from(hc::EXIT))
    ));
    let mut write = String::new();
    for (i, w) in exit0.iter().enumerate() {
        write.push_str(&load_imm("x15", u64::from(*w)));
        write.push_str(&format!("str w15, [x10, #{}]\n", 4 * i));
    }
    let src = format!(
        "ldr x9, [x0]\nmrs x10, vbar_el1\nadd x10, x10, #0x200\nmov x11, #16\n\
         movz w14, #0x1400, lsl #16\n\
         1: ldr w12, [x10]\nand w13, w12, #0xfc000000\ncmp w13, w14\nb.eq 2f\n\
         add x10, x10, #4\nsubs x11, x11, #1\nb.ne 1b\nret\n\
         2: sbfx x12, x12, #0, #26\nadd x10, x10, x12, lsl #2\n{write}\
         dc cvau, x10\nadd x11, x10, #{last}\ndc cvau, x11\ndsb ish\n\
         ic ivau, x10\nic ivau, x11\ndsb ish\nisb\n\
         eor x9, x0, #0x0100000000000000\nldr x9, [x9]\nret\n",
        last = 4 * (exit0.len() - 1),
    );
    stopped_by_read_only_code(&src);
}

/// A snippet that breaks the calling convention and sets the harness's loop counter (x27)
/// to 1 runs once where 10 iterations were asked for, at EL1 and at EL0: the hypervisor
/// counts the harness's iterations itself, and the command exits 1 naming the shortfall.
#[test]
fn a_snippet_that_changes_the_harness_loop_register_fails_the_run() {
    for el in ["1", "0"] {
        let (code, out) = mtex_snippet(
            "ldr x9, [x0]\nmov x27, #1\nret\n",
            &["--iters", "10", "--el", el],
        );
        assert_eq!(code, Some(1), "EL{el}: {out}");
        assert!(
            out.contains("PROBLEM: ") && out.contains("1 of the 10 iterations"),
            "EL{el}: {out}"
        );
    }
}

/// A snippet that keeps the convention, with `--iters 10`: exactly 10 iterations, each
/// counted by the hypervisor, 10 checked reads, exit 0.
#[test]
fn ten_iterations_are_ten_and_the_hypervisor_counted_them() {
    let (code, out) = mtex_snippet("ldr x9, [x0]\nret\n", &["--iters", "10"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("10 iterations"), "{out}");
    assert!(
        out.contains("iterations: 10 of 10, counted by the hypervisor"),
        "{out}"
    );
    assert!(!out.contains("PROBLEM"), "{out}");
    let t = run_ok(
        "ldr x9, [x0]\nret\n",
        Env {
            iters: 10,
            ..Env::default()
        },
    );
    assert_eq!(t.architectural, rd_k(10));
}

/// The guest's accesses to PMU and debug registers are counters of their phase, each
/// access once: reads of PMCCNTR_EL0 and MDSCR_EL1 counted apart, and an ID register read
/// (trapped and emulated too) in neither.
#[test]
fn pmu_and_debug_register_accesses_are_counted_apart() {
    let source = format!(
        "{}{}{}",
        repeat("mrs x1, pmccntr_el0", 5).trim_end_matches("ret\n"),
        repeat("mrs x1, mdscr_el1", 3).trim_end_matches("ret\n"),
        repeat("mrs x1, id_aa64pfr1_el1", 2)
    );
    let (r, _) = run(&source, Env::default());
    assert!(r.succeeded(), "{}", mtex::output::matrix::text(&r));
    let c = mtex::model::results::counters(r.phase(snippet::PHASE).expect("the snippet's phase"));
    assert_eq!(c["pmu_register_accesses"], 5, "{c:?}");
    assert_eq!(c["debug_register_accesses"], 3, "{c:?}");
    assert_eq!(c["wfx_traps"], 0, "{c:?}");
}
