//! Call stacks (`mtex.stacks=1`): following them changes no count and no PC's counts (the
//! stacks only split each PC's counts by the stack it ran on), every profile still adds up,
//! and the kernel's checked accesses are filed under the system call that reached them.

use super::equality::boot;
use mtex::cli::bench::equality::{self, FAST_RUNS, PLAIN, PROGRAMS};
use mtex::cli::snippet::{self, Env};
use mtex::images::built as images;
use mtex::model::report::Report;
use mtex::profile::PhaseProfile;
use mtex::profile::stacks::{Syscalls, by_stack};
use mtex::symbols::Symbols;
use mtex_trace::callstack::{StackFrame, StackStats, UNKNOWN};
use mtex_trace::profile::ARCH;
use std::collections::{BTreeMap, HashMap};

const STACKS: &str = "mtex.stacks=1";

/// Each PC's counts, whatever stack they ran on.
fn by_pc(r: &Report) -> Vec<BTreeMap<(u64, u8, bool), mtex_trace::profile::PcEntry>> {
    r.phases
        .iter()
        .filter_map(|p| p.profile.as_ref())
        .map(|f| {
            let mut m: BTreeMap<_, mtex_trace::profile::PcEntry> = BTreeMap::new();
            for e in &f.pcs {
                m.entry((e.pc, e.el, e.unprivileged))
                    .or_insert(mtex_trace::profile::PcEntry {
                        pc: e.pc,
                        el: e.el,
                        unprivileged: e.unprivileged,
                        ..Default::default()
                    })
                    .add(e);
            }
            m
        })
        .collect()
}

/// `calls`: the program's traced code makes calls (hostile-vector's runs in straight lines and
/// its own exception vectors, on a stack whose bottom was never seen).
fn assert_stacks_exact(program: &str, calls: bool) {
    let (_, line) = PROGRAMS.iter().find(|(n, _)| *n == program).unwrap();
    images();
    let lines = [
        format!("{line} {}", PLAIN.opts),
        format!("{line} {} mtex.profile=1", PLAIN.opts),
        format!("{line} {STACKS}"),
    ];
    let [plain, profiled, stacks] = std::thread::scope(|s| {
        let boots: Vec<_> = lines.map(|l| s.spawn(move || boot(l))).into();
        let mut r = boots.into_iter().map(|b| b.join().unwrap());
        [(); 3].map(|_| r.next().unwrap())
    });
    let problems = equality::run_problems(&stacks);
    assert!(problems.is_empty(), "{program}: {problems:#?}");
    // The same counts as the reference path. (Compared as a mode that does not step every
    // instruction: following stacks keeps runs at EL0, which the PMU sees.)
    let c = equality::compare(&plain, &stacks, FAST_RUNS);
    assert!(c.differences.is_empty(), "{program}: {:#?}", c.differences);
    let mut with_stacks = 0;
    for p in stacks.phases.iter().filter(|p| p.trace.is_some()) {
        let f = p.profile.as_ref().expect("a profile");
        assert_eq!(f.problem(p.trace.as_ref().unwrap()), None, "{}", p.name);
        assert!(f.stack_end.is_some(), "{}: no stacks", p.name);
        with_stacks += f.pcs.iter().filter(|e| e.stack >= 2).count();
    }
    assert_eq!(with_stacks > 0, calls, "{program}: PCs on known stacks");
    // Split by stack, added back by PC: the profile's own tables.
    assert_eq!(by_pc(&stacks), by_pc(&profiled), "{program}");
}

#[test]
fn kernel_matrix() {
    assert_stacks_exact("kernel", true);
}

#[test]
fn hostile_vector() {
    assert_stacks_exact("hostile-vector", false);
}

/// uaccess-heavy's checked uaccess reads are all `copy_from_user`'s, reached from the WRITE
/// system call (number 4) through the kernel's EL0 entry handler.
#[test]
fn uaccess_reads_are_reached_from_their_system_call() {
    let r = boot(format!(
        "mtex.guest=kernel mtex.policies=entry-tco mtex.workloads=uaccess-heavy \
         mtex.trace=only {STACKS}"
    ));
    let problems = equality::run_problems(&r);
    assert!(problems.is_empty(), "{problems:#?}");
    let phase = r.phases.iter().find(|p| p.trace.is_some()).unwrap();
    let trace = phase.trace.unwrap();
    let rows = by_stack(
        phase.profile.as_ref().unwrap(),
        &Symbols::load(&images().guest_elf),
        Syscalls::Numbers,
    );
    let mut in_copy = 0;
    for row in rows.iter().filter(|r| r.unprivileged) {
        let n = row.get("uaccess_checked_rd");
        if n == 0 {
            continue;
        }
        assert!(row.name.ends_with("copy_from_user"), "{row:?}");
        assert_eq!(
            row.stack.first().map(String::as_str),
            Some("[syscall 4]"),
            "{row:?}"
        );
        assert!(
            row.stack.iter().any(|f| f.ends_with("entry::el0_sync")),
            "{row:?}"
        );
        in_copy += n;
    }
    assert!(trace.uaccess.arch_rd > 0, "no checked uaccess read");
    assert_eq!(in_copy, trace.uaccess.arch_rd);
}

/// hostile-frames (guest/src/selftest/frames.rs) corrupts its frame pointers, returns
/// elsewhere than its caller and recurses past the stacks' depth: each stack is what the
/// program's calls make it, or `[unknown]` below what could not be followed, and the counts
/// are the program's whatever the stacks.
#[test]
fn a_guest_cannot_fool_its_stacks() {
    let n = mtex_abi::program::HOSTILE_N;
    images();
    let lines = [
        format!("mtex.guest=hostile-frames {}", PLAIN.opts),
        format!("mtex.guest=hostile-frames {STACKS}"),
    ];
    let [plain, stacks] = std::thread::scope(|s| {
        let boots: Vec<_> = lines.map(|l| s.spawn(move || boot(l))).into();
        let mut r = boots.into_iter().map(|b| b.join().unwrap());
        [(); 2].map(|_| r.next().unwrap())
    });
    for r in [&plain, &stacks] {
        let problems = equality::run_problems(r);
        assert!(problems.is_empty(), "{problems:#?}");
    }
    let c = equality::compare(&plain, &stacks, FAST_RUNS);
    assert!(c.differences.is_empty(), "{:#?}", c.differences);
    let phase = stacks.phases.iter().find(|p| p.trace.is_some()).unwrap();
    let trace = phase.trace.unwrap();
    // Four cases of n loads, and the `ldp x29, x30, [sp], #16` of mtex_hf_outer and of
    // mtex_hf_deep's 80 frames (writeback on the Tagged stack: checked).
    assert_eq!(trace.architectural.rd_k, 4 * n + 1 + 80);
    let profile = phase.profile.as_ref().unwrap();
    let stats = profile.stack_end.unwrap().stats;
    assert_eq!(
        (stats.unmatched_returns, stats.too_deep),
        (1, 1),
        "{stats:?}"
    );
    let rows = by_stack(
        profile,
        &Symbols::load(&images().guest_elf),
        Syscalls::Numbers,
    );
    let reads = |name: &str| -> Vec<(Vec<String>, u64)> {
        rows.iter()
            .filter(|r| r.name == name)
            .map(|r| (r.stack.clone(), r.get("mem_access_checked_rd:k")))
            .filter(|&(_, v)| v != 0)
            .collect()
    };
    let s = |v: &[&str]| v.iter().map(|f| f.to_string()).collect::<Vec<_>>();
    let main = s(&["[unknown]", "mtex_hf_main"]);
    assert_eq!(reads("mtex_hf_plain"), [(main.clone(), n)]);
    // The same stack with its frame pointers corrupted.
    assert_eq!(reads("mtex_hf_fp"), [(main, n)]);
    // After the return that matched no call, nothing below is known (its loads and its
    // epilogue's).
    assert_eq!(reads("mtex_hf_outer"), [(s(&["[unknown]"]), n + 1)]);
    assert_eq!(reads("mtex_hf_main"), []);
    // 81 frames, 64 kept: the last 17, all in mtex_hf_deep, over [unknown].
    let mut deep = s(&["[unknown]"]);
    deep.extend(s(&["mtex_hf_deep"; 17]));
    assert_eq!(reads("mtex_hf_deep_leaf"), [(deep, n)]);
}

/// Runs `source` as a snippet at EL1, once, with the call stacks followed: its phase's
/// profile, which must add up, from a run that succeeded.
fn snippet_stacks(source: &str) -> PhaseProfile {
    let code = match snippet::assemble_source(source).expect("running the assembler") {
        Ok(code) => code,
        Err(e) => panic!("{source}\ndid not assemble: {e}"),
    };
    let (r, console) = snippet::run_with(images(), &code, &Env::default(), &["stacks=1".into()])
        .expect("running QEMU");
    assert!(!console.timed_out, "host time limit hit:\n{}", console.text);
    let problems = equality::run_problems(&r);
    assert!(problems.is_empty(), "{problems:#?}");
    let phase = r.phase(snippet::PHASE).expect("the snippet's phase");
    let profile = phase.profile.clone().expect("a profile");
    assert_eq!(profile.problem(phase.trace.as_ref().unwrap()), None);
    profile
}

/// The frames of `node`'s stack, outermost first, and whether `[unknown]` is below them.
fn frames(profile: &PhaseProfile, node: u32) -> (bool, Vec<StackFrame>) {
    let tree: HashMap<u32, (u32, StackFrame)> = profile
        .stacks
        .iter()
        .map(|n| (n.node, (n.parent, n.frame)))
        .collect();
    let mut out = Vec::new();
    let mut n = node;
    while let Some(&(parent, frame)) = tree.get(&n) {
        out.push(frame);
        n = parent;
    }
    out.reverse();
    (n == UNKNOWN, out)
}

/// A callee that returns with `br x30` instead of `ret`, called 10 times in a loop (each call
/// one checked read). The phase begins in the harness, whose caller was not seen; the harness
/// calls the snippet, which calls the callee: at most two frames are ever live. Each branch
/// back to the return address is a return: the callee's read is on [unknown], the snippet's
/// frame, its own frame, every time; the snippet's loop on [unknown] and its frame.
/// (Before: the branch was not seen as a return, and the 10 reads were on stacks 1 to 10
/// frames of the callee deep, a recursion that never happened.)
#[test]
fn a_return_by_br_x30_pops_its_frame() {
    let source = "\
        mov x15, x30
        mov x14, #10
    1:  bl callee
        subs x14, x14, #1
        b.ne 1b
        mov x30, x15
        ret
    callee:
        ldr x12, [x0]
        br x30
    ";
    // Byte offsets in the snippet: the loop's call, the return address, the callee's load.
    let (bl, after_bl, load, end) = (8, 12, 28, 36);
    let profile = snippet_stacks(source);
    let loads: Vec<_> = profile.pcs.iter().filter(|e| e.rd[ARCH] != 0).collect();
    let base = loads[0].pc - load;
    let snippet = base..base + end;
    // Each PC's stacks: known frames (over [unknown]) and instructions, against the real
    // depth there — the harness, the snippet, the callee: 0, 1, 2.
    let pcs: Vec<_> = profile
        .pcs
        .iter()
        .filter(|e| e.el == 1)
        .map(|e| {
            let at = e.pc.wrapping_sub(base);
            let depth = if !snippet.contains(&e.pc) {
                0
            } else if at < load {
                1
            } else {
                2
            };
            let (unknown, f) = frames(&profile, e.stack);
            (e, at, depth, unknown, f)
        })
        .collect();
    let deeper: Vec<String> = pcs
        .iter()
        .filter(|(_, _, depth, _, f)| f.len() > *depth)
        .map(|(e, at, depth, _, f)| {
            format!(
                "+{at}: {} frames for {depth} ({} instructions)",
                f.len(),
                e.insns
            )
        })
        .collect();
    assert!(
        deeper.is_empty(),
        "stacks deeper than the calls:\n{}",
        deeper.join("\n")
    );
    let mut loop_insns = 0;
    for (e, at, depth, unknown, f) in &pcs {
        assert!(
            *unknown,
            "+{at} on a stack with no [unknown] below: {f:#x?}"
        );
        assert_eq!(f.len(), *depth, "+{at} on {f:#x?}");
        if *depth >= 1 {
            assert_eq!(f[0].entry, 0, "{f:#x?}");
            assert!(!snippet.contains(&f[0].addr), "{f:#x?}");
        }
        if *depth == 2 {
            assert_eq!(f[1], StackFrame::call(base + after_bl), "{f:#x?}");
            assert_eq!(e.insns, 10, "+{at}");
        }
        if snippet.contains(&e.pc) && (bl..load).contains(at) {
            loop_insns += e.insns;
        }
    }
    assert_eq!(loads.len(), 1, "{loads:#x?}");
    assert_eq!(loads[0].rd[ARCH], 10);
    // bl, subs, b.ne 10 times each; after them the two instructions back to the harness.
    assert_eq!(loop_insns, 3 * 10 + 2);
    assert_eq!(
        profile.stack_end.expect("the stacks' end").stats,
        StackStats::default()
    );
}

/// Frame records and frame pointers forged before each call: a record that points to itself
/// (a cycle), in the untagged page, an unmapped address, the UART's device registers, an
/// unaligned address. The stacks never read them: each of the five reads is on [unknown], the
/// snippet's frame and the call that made it, with nothing unmatched.
#[test]
fn forged_frame_records_change_no_stack() {
    let source = "\
        mov x15, x30
        mov x16, x29
        sub sp, sp, #16
        mov x29, sp
        stp x29, x30, [sp]
        bl callee
        stp x4, x30, [x4]
        mov x29, x4
        bl callee
        movz x29, #0xdead, lsl #32
        bl callee
        movz x29, #0x0900, lsl #16
        bl callee
        add x29, x0, #3
        bl callee
        add sp, sp, #16
        mov x29, x16
        mov x30, x15
        ret
    callee:
        ldr x12, [x0]
        ret
    ";
    // Byte offsets of the five return addresses and of the callee's load.
    let returns = [24, 36, 44, 52, 60];
    let load = 76;
    let profile = snippet_stacks(source);
    assert_eq!(
        profile.stack_end.expect("the stacks' end").stats,
        StackStats::default()
    );
    let loads: Vec<_> = profile.pcs.iter().filter(|e| e.rd[ARCH] != 0).collect();
    assert_eq!(loads.len(), returns.len(), "{loads:#x?}");
    let base = loads[0].pc - load;
    let mut seen: Vec<u64> = loads
        .iter()
        .map(|e| {
            assert_eq!((e.pc, e.rd[ARCH]), (base + load, 1));
            let (unknown, f) = frames(&profile, e.stack);
            assert!(unknown && f.len() == 2 && f[0].entry == 0, "{f:#x?}");
            f[1].addr - base
        })
        .collect();
    seen.sort();
    assert_eq!(seen, returns);
}
