//! QEMU tests of the guest kernel's policies and workloads (the default matrix), under
//! `-icount shift=0`. Every expectation comes from what the workload does — its user
//! program's loop (guest/src/kernel/user.rs), its system calls, the sizes it allocates —
//! never from a figure of an earlier run or of the patches' own measurements.

use mtex::model::report::{self, Phase, Report};
use mtex::qemu::{self, RunConfig};
use mtex_abi::report::PmuValue;
use mtex_abi::scenario::{Scenario, Workload};
use mtex_trace::counts::TraceCounts;
use std::time::Duration;

use mtex::images::built as images;

/// Boots the kernel scenario given by `opts` (`mtex.` words) and returns its report, after
/// checking that the run succeeded with no problem and no tag-check fault.
fn scenario(opts: &str, timeout_s: u64) -> Report {
    let cmdline = format!("mtex.guest=kernel mtex.watchdog_ms=600000 {opts}");
    let cfg = RunConfig {
        cmdline,
        timeout: Duration::from_secs(timeout_s),
        ..RunConfig::default()
    };
    let console = qemu::run(images(), &cfg).expect("running QEMU");
    assert!(!console.timed_out, "host time limit hit:\n{}", console.text);
    let r = report::parse(&console.text);
    assert!(r.succeeded(), "{}", mtex::output::matrix::text(&r));
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    let expected_runs = Scenario::parse(opts).unwrap().runs().count();
    assert_eq!(r.phases.len(), expected_runs, "one phase per run");
    for p in &r.phases {
        let t = trace(p);
        assert_eq!(t.tag_check_faults, 0, "{}", p.name);
        assert_eq!((t.unknown_mem, t.runs_lost), (0, 0), "{}", p.name);
    }
    r
}

fn trace(p: &Phase) -> TraceCounts {
    p.trace
        .unwrap_or_else(|| panic!("phase {} was not traced", p.name))
}

/// The phase of `workload` (with `size`, when given) under `policy`.
fn phase<'a>(r: &'a Report, workload: Workload, size: Option<u32>, policy: &str) -> &'a Phase {
    r.phases
        .iter()
        .find(|p| {
            let q = p.params.expect("phase parameters");
            q.workload == workload
                && q.policy.name().as_str() == policy
                && size.is_none_or(|s| q.params.size == s)
        })
        .unwrap_or_else(|| panic!("no {workload:?} phase under {policy}"))
}

fn iters(p: &Phase) -> u64 {
    p.params.unwrap().params.iters as u64
}

fn checked_k(t: &TraceCounts) -> u64 {
    t.architectural.rd_k + t.architectural.wr_k
}

/// The guest kernel's account of run `id`: (stack bytes allocated, freed, page-table bytes
/// allocated, freed) from its console line.
fn allocations(r: &Report, id: u32) -> (u64, u64, u64, u64) {
    let n = console_numbers(r, id);
    (n[0], n[1], n[2], n[3])
}

/// The numbers of the kernel's line about run `id`: stack bytes allocated and freed, page
/// table bytes allocated and freed (in the phase), context switches, ticks, page faults.
fn console_numbers(r: &Report, id: u32) -> Vec<u64> {
    let prefix = format!("kernel: run {id}: ");
    let line = r
        .console
        .iter()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no console line for run {id}"));
    let n: Vec<u64> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap())
        .collect();
    assert_eq!(n.len(), 7, "{line}");
    n
}

/// Kernel stack size (Linux's THREAD_SIZE with 4 KiB pages) and the page-table pages of a
/// fresh address space (root, first-GiB L2, L3 for code, stack and heap, the image's L2),
/// plus one L3 per 2 MiB mapped — the guest kernel's layout (guest/src/kernel/layout.rs).
const THREAD_SIZE: u64 = 16 << 10;
const MM_TABLE_PAGES: u64 = 6;

#[test]
fn futex_hash_tcma1_removes_the_kernels_checks_not_the_users() {
    let r = scenario(
        "mtex.policies=entry-tco,tcma1 mtex.workloads=futex-hash",
        120,
    );
    let base = phase(&r, Workload::FutexHash, None, "entry-tco");
    let fix = phase(&r, Workload::FutexHash, None, "tcma1");
    let (b, f) = (trace(base), trace(fix));
    let n = iters(base);
    // The user loop: per iteration LDR of the futex word, then LDR + STR of the counter,
    // all through its IRG-tagged heap pointer, TCF0 sync: checked, under both policies.
    for t in [&b, &f] {
        assert_eq!(t.architectural.rd_u, 2 * n);
        assert_eq!(t.architectural.wr_u, n);
    }
    // With TCMA1 every kernel pointer (tag 0xF) is match-all: what stays checked at EL1 is
    // the one LDTR of the futex word per call (an EL0 access, TCF0 sync, TCO clear).
    assert_eq!(f.uaccess.arch_rd, n);
    assert_eq!(checked_k(&f), n);
    // Without it, the kernel's own accesses with TCO cleared on entry are checked too.
    assert!(
        checked_k(&f) * 100 <= checked_k(&b) * 3,
        "EL1 checked accesses fell from {} to {}: less than 97%",
        checked_k(&b),
        checked_k(&f)
    );
    // The trace of the baseline already answered "what would TCMA1 save?": all but those.
    assert_eq!(b.if_tcma1.rd_k + b.if_tcma1.wr_k, n);
    // Arm-like cores and QEMU elide kernel checks with TCF NONE: only the uaccess remains.
    assert_eq!(b.tcf_elided.rd_k + b.tcf_elided.wr_k, n);
}

#[test]
fn tco_writes_follow_the_policy_and_copy_paths_escape_uaccess_sections() {
    let r = scenario(
        "mtex.policies=entry-tco,uaccess-tco mtex.workloads=getpid,futex-hash,uaccess-heavy,memcached,getpid:tcf0=async",
        180,
    );
    // entry-tco with TCF0 sync: one MSR TCO per kernel entry. A phase holds its workload's
    // system calls, the entry of the PHASE call that closes it, and any timer interrupt.
    let entries = |w: Workload, per_iter: u64| {
        let p = phase(&r, w, None, "entry-tco");
        let t = trace(p);
        assert_eq!(
            t.entries.sync_el0,
            per_iter * iters(p) + 1,
            "{w:?}: system calls"
        );
        (t.tco_writes, t.entries.total())
    };
    let (got, want) = entries(Workload::Getpid, 1);
    assert_eq!(got, want, "getpid");
    let (got, want) = entries(Workload::FutexHash, 1);
    assert_eq!(got, want, "futex-hash");
    let (got, want) = entries(Workload::UaccessHeavy, 2);
    assert_eq!(got, want, "uaccess-heavy: write + read per iteration");

    // uaccess-tco: never at entry; twice per user_access_begin/end section (futex_wait has
    // one); none on the copy paths, which open no section.
    let ua = |w| trace(phase(&r, w, None, "uaccess-tco"));
    assert_eq!(ua(Workload::Getpid).tco_writes, 0);
    let futex = phase(&r, Workload::FutexHash, None, "uaccess-tco");
    assert_eq!(trace(futex).tco_writes, 2 * iters(futex));
    assert_eq!(ua(Workload::UaccessHeavy).tco_writes, 0);
    // The section's LDTR is checked under both policies.
    assert_eq!(trace(futex).uaccess.arch_rd, iters(futex));

    // copy_from_user / copy_to_user: one LDTR / STTR per 8 bytes. Checked under entry-tco,
    // made but unchecked under uaccess-tco (TCO still set from the exception entry).
    let p = phase(&r, Workload::UaccessHeavy, None, "entry-tco");
    let words = iters(p) * p.params.unwrap().params.size as u64 / 8;
    let (e, u) = (trace(p).uaccess, ua(Workload::UaccessHeavy).uaccess);
    assert_eq!(
        (e.rd, e.wr, e.arch_rd, e.arch_wr),
        (words, words, words, words)
    );
    assert_eq!((u.rd, u.wr, u.arch_rd, u.arch_wr), (words, words, 0, 0));

    // memcached: request i is a set when i % 11 == 0. Client: set = STP + v/8 STR, write
    // (16 + v), read 16; get = STP, write 16, read (16 + v), v/8 LDR. Server: set = LDP,
    // v/8 LDR + STR, STP, write 16; get = LDP, v/8 LDR + STR, STP, write (16 + v).
    let p = phase(&r, Workload::Memcached, None, "entry-tco");
    let q = p.params.unwrap().params;
    let (n, w) = (q.iters as u64, q.size as u64 / 8);
    let sets = n.div_ceil(11);
    let gets = n - sets;
    let rd_u = gets * w + sets * (1 + w) + gets * (1 + w);
    let wr_u = sets * (1 + w) + gets + sets * (w + 1) + gets * (w + 1);
    let copied = sets * (2 + w + 2) + gets * (2 + 2 + w);
    for policy in ["entry-tco", "uaccess-tco"] {
        let t = trace(phase(&r, Workload::Memcached, None, policy));
        assert_eq!(
            (t.architectural.rd_u, t.architectural.wr_u),
            (rd_u, wr_u),
            "{policy}"
        );
        assert_eq!((t.uaccess.rd, t.uaccess.wr), (copied, copied), "{policy}");
    }
    let e = trace(p).uaccess;
    assert_eq!((e.arch_rd, e.arch_wr), (copied, copied));
    let u = trace(phase(&r, Workload::Memcached, None, "uaccess-tco")).uaccess;
    assert_eq!((u.arch_rd, u.arch_wr), (0, 0));

    // With TCF0 async (here one workload's own mode), v6.18 leaves TCO set on entry: no
    // write at all.
    let async_getpid = r
        .phases
        .iter()
        .find(|p| p.params.unwrap().tcf0 == mtex_abi::scenario::Tcf::Async)
        .unwrap();
    assert_eq!(
        async_getpid.params.unwrap().policy.name().as_str(),
        "entry-tco"
    );
    assert_eq!(trace(async_getpid).tco_writes, 0);
    let r = scenario(
        "mtex.policies=entry-tco mtex.workloads=getpid mtex.tcf0=async",
        60,
    );
    assert_eq!(trace(&r.phases[0]).tco_writes, 0);
}

#[test]
fn tfsr_sync_skip_drops_the_tfsr_reads_and_barriers_in_sync_mode_only() {
    let r = scenario(
        "mtex.policies=kasan-sync,kasan-sync+tfsr-sync-skip,kasan-async,kasan-async+tfsr-sync-skip mtex.workloads=getpid",
        120,
    );
    for (policy, skipped) in [
        ("kasan-sync", false),
        ("kasan-sync+tfsr-sync-skip", true),
        ("kasan-async", false),
        ("kasan-async+tfsr-sync-skip", false),
    ] {
        let p = phase(&r, Workload::Getpid, None, policy);
        let t = trace(p);
        assert_eq!(
            t.entries.sync_el0,
            iters(p) + 1,
            "getpid calls and the closing PHASE"
        );
        assert_eq!(
            tfsr_checks(&t, skipped),
            (t.tfsr_reads, t.dsb, t.isb),
            "{policy}"
        );
    }
}

/// The TFSR_EL1 reads, DSBs and ISBs a phase of a single-task workload must show. Every
/// entry from EL0 has kernel_entry's ISB (MTE is present). When the kernel checks TFSR_EL1
/// (not `skipped`), every exit to user space (one per system call in the phase — the
/// opening PHASE call's exit is in it, the closing one's is not — and one per interrupt from
/// EL0) checks it after DSB NSH + ISB, and an interrupt in the kernel checks it on entry (no
/// barrier) and on exit (with both).
fn tfsr_checks(t: &TraceCounts, skipped: bool) -> (u64, u64, u64) {
    let e = t.entries;
    let entry_isbs = e.sync_el0 + e.irq_el0;
    if skipped {
        return (0, 0, entry_isbs);
    }
    let exits = e.sync_el0 + e.irq_el0 + e.irq_el1;
    (exits + e.irq_el1, exits, exits + entry_isbs)
}

#[test]
fn timer_interrupts_enter_the_kernel_like_linux_and_the_policies_apply_to_them() {
    // A fast tick, so interrupts land in the phases, from EL0 and from the kernel (system
    // calls run with IRQs unmasked).
    let r = scenario(
        "mtex.hz=20000 mtex.policies=entry-tco,kasan-sync,kasan-sync+tfsr-sync-skip mtex.workloads=getpid,uaccess-heavy:iters=48",
        180,
    );
    let mut irqs = (0, 0);
    for policy in ["entry-tco", "kasan-sync", "kasan-sync+tfsr-sync-skip"] {
        for w in [Workload::Getpid, Workload::UaccessHeavy] {
            let p = phase(&r, w, None, policy);
            let t = trace(p);
            irqs.0 += t.entries.irq_el0;
            irqs.1 += t.entries.irq_el1;
            // Every kernel entry, system call or interrupt, clears TCO once (TCF0 sync).
            assert_eq!(t.tco_writes, t.entries.total(), "{policy} {w:?}");
            assert_eq!(t.entries.sync_el1 + t.entries.other, 0, "no kernel fault");
            if policy != "entry-tco" {
                let skipped = policy.contains("skip");
                assert_eq!(
                    tfsr_checks(&t, skipped),
                    (t.tfsr_reads, t.dsb, t.isb),
                    "{policy} {w:?}"
                );
            }
            // Whatever interrupts came, the workload's own arithmetic holds.
            if w == Workload::UaccessHeavy {
                let words = iters(p) * p.params.unwrap().params.size as u64 / 8;
                assert_eq!((t.uaccess.rd, t.uaccess.wr), (words, words));
            }
        }
    }
    // These workloads spend almost all their time in the kernel, so the ticks land there;
    // one from EL0 takes the same enter_from_user_mode/exit_to_user_mode path as a system
    // call, and the formulas above count it if it comes.
    assert!(
        irqs.1 > 0,
        "no timer interrupt in the kernel was traced ({irqs:?})"
    );
}

#[test]
fn skipping_stack_and_page_table_tags_saves_one_store_per_granule() {
    let r = scenario(
        "mtex.policies=kasan-sync,kasan-sync+skip-tag-stacks-pgtables mtex.workloads=thread-create,fork-pgtable",
        120,
    );
    for w in [Workload::ThreadCreate, Workload::ForkPgtable] {
        let tagged = phase(&r, w, None, "kasan-sync");
        let skipped = phase(&r, w, None, "kasan-sync+skip-tag-stacks-pgtables");
        let q = tagged.params.unwrap().params;
        let n = q.iters as u64;
        // What the workload allocates (and frees again) in its phase.
        let (stacks, tables) = match w {
            Workload::ThreadCreate => (n * q.tasks as u64 * THREAD_SIZE, 0),
            _ => (
                n * THREAD_SIZE,
                n * (MM_TABLE_PAGES + q.size as u64 / 2) * 4096,
            ),
        };
        for p in [tagged, skipped] {
            assert_eq!(
                allocations(&r, p.id),
                (stacks, stacks, tables, tables),
                "{w:?}: the kernel's own account"
            );
            if w == Workload::ForkPgtable {
                // The mapping was faulted in by one store per 4 KiB page.
                assert_eq!(console_numbers(&r, p.id)[6], q.size as u64 * 256);
            }
        }
        // KASAN sets a tag on every granule at allocation and poisons it at free; the
        // policy skips both for stacks and page tables, and nothing else changes.
        let (a, b) = (trace(tagged), trace(skipped));
        assert_eq!(
            a.granules_tagged - b.granules_tagged,
            2 * (stacks + tables) / 16,
            "{w:?}"
        );
        assert_eq!(
            a.tag_store_insns - b.tag_store_insns,
            2 * (stacks + tables) / 16
        );
    }
}

#[test]
fn kbuf_probe_kernel_checks_grow_with_n_and_vanish_when_tcf_is_elided() {
    let (small, large) = (256u32, 1024u32);
    let r = scenario(
        &format!(
            // No tick: an interrupt in one phase and not the other would add its own checks.
            "mtex.hz=0 mtex.policies=entry-tco,kasan-sync mtex.workloads=kbuf-probe:size={small},kbuf-probe:size={large}"
        ),
        120,
    );
    for policy in ["entry-tco", "kasan-sync"] {
        let (a, b) = (
            phase(&r, Workload::KbufProbe, Some(small), policy),
            phase(&r, Workload::KbufProbe, Some(large), policy),
        );
        // One LDR per 8 bytes of the kernel buffer, per call.
        let extra = iters(a) * (large - small) as u64 / 8;
        let (ta, tb) = (trace(a), trace(b));
        assert_eq!(
            tb.architectural.rd_k - ta.architectural.rd_k,
            extra,
            "{policy}"
        );
        assert_eq!(tb.accesses.rd_k - ta.accesses.rd_k, extra, "{policy}");
        if policy == "entry-tco" {
            // The kernel's TCF is NONE: an Arm-like core checks none of them.
            assert_eq!(tb.tcf_elided.rd_k + tb.tcf_elided.wr_k, 0);
            assert_eq!(ta.tcf_elided.rd_k + ta.tcf_elided.wr_k, 0);
        } else {
            // KASAN sync: the buffer's tagged pointer is checked by every core.
            assert_eq!(tb.tcf_elided.rd_k - ta.tcf_elided.rd_k, extra);
        }
    }
}

/// What `./scripts/run` prints: `mtex run` of scripts/scenarios/default.toml, with its
/// results directory the first in `mtex-results`.
fn default_matrix_as_scripts_run_prints_it() -> (Vec<Report>, [String; 3]) {
    use mtex::output::{self, Form};
    let file = mtex::images::workspace_root().join("scripts/scenarios/default.toml");
    let plan = mtex::scenario::file::load(&file).expect("the default scenario");
    let dir = qemu::TempDir::new("test-default-matrix").unwrap();
    let (doc, reports) =
        mtex::scenario::run::run(&plan, images(), dir.path(), &|cfg| Ok((cfg, None)))
            .expect("running the default matrix");
    let rest = output::rest(std::path::Path::new("mtex-results/default-matrix-1"));
    let [text, full, matrix] = [Form::Text, Form::Full, Form::Matrix].map(|form| {
        output::render(&doc, form, || Ok(reports.clone()), Some(&rest)).expect("rendering")
    });
    (reports, [text, full, matrix])
}

/// The fenced excerpt of `doc` (a path from the workspace root) whose first line starts with
/// `first`.
fn excerpt(doc: &str, first: &str) -> Vec<String> {
    let text = std::fs::read_to_string(mtex::images::workspace_root().join(doc)).unwrap();
    let mut blocks = text.split("```").skip(1).step_by(2).filter_map(|b| {
        let body = b.split_once('\n')?.1;
        body.starts_with(first)
            .then(|| body.lines().map(str::to_string).collect::<Vec<_>>())
    });
    let block = blocks
        .next()
        .unwrap_or_else(|| panic!("{doc}: no excerpt starting {first:?}"));
    assert!(
        blocks.next().is_none(),
        "{doc}: two excerpts start {first:?}"
    );
    block
}

/// `doc`'s excerpt that starts with `first` is what `printed` holds: its lines one after
/// another, where a line `...` stands for lines left out and a line ending in ` ...` for the
/// rest of a line cut short.
fn assert_excerpt_printed(doc: &str, first: &str, printed: &str) {
    let printed_lines: Vec<&str> = printed.lines().collect();
    let matches = |want: &str, line: &str| match want.strip_suffix(" ...") {
        Some(start) => line.starts_with(start.trim_end()),
        None => line == want,
    };
    let mut at = 0; // the next printed line
    let mut skip = true; // the next excerpt line may be further on
    for want in excerpt(doc, first) {
        if want.trim() == "..." {
            skip = true;
            continue;
        }
        let found = if skip {
            printed_lines[at..]
                .iter()
                .position(|l| matches(&want, l))
                .map(|i| at + i)
        } else {
            printed_lines
                .get(at)
                .filter(|l| matches(&want, l))
                .map(|_| at)
        };
        let Some(i) = found else {
            panic!(
                "{doc}: the excerpt's line\n{want}\nis not what the run prints there; regenerate \
                 the excerpt from what it prints now:\n{printed}"
            );
        };
        (at, skip) = (i + 1, false);
    }
}

#[test]
fn the_default_matrix_runs_every_workload_under_every_policy_and_prints_the_readme_s_excerpt() {
    // The scenario `./scripts/run` shows, as it runs it: success, one traced phase per
    // (policy, workload), no tag-check fault, nothing the decoder could not model.
    let (reports, [text, full, matrix]) = default_matrix_as_scripts_run_prints_it();
    let [r] = &reports[..] else { panic!("one run") };
    assert!(r.succeeded(), "{}", mtex::output::matrix::text(r));
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    let s = Scenario::parse("").unwrap();
    assert_eq!(r.phases.len(), s.runs().count(), "one phase per run");
    for (p, want) in r.phases.iter().zip(s.runs()) {
        assert_eq!(p.params, Some(want));
        let t = trace(p);
        assert_eq!(t.tag_check_faults, 0, "{}", p.name);
        assert_eq!((t.unknown_mem, t.runs_lost), (0, 0), "{}", p.name);
    }
    // The figures the README and getting-started show are what `./scripts/run` prints.
    let summary = format!(
        "mtex {}: 1 run of scenario default-matrix",
        env!("CARGO_PKG_VERSION")
    );
    assert_excerpt_printed("README.md", &summary, &text);
    assert_excerpt_printed("docs/getting-started.md", &summary, &text);
    let block = " Performance counter stats for 'futex-hash";
    assert_excerpt_printed("docs/getting-started.md", block, &full);
    assert_excerpt_printed("docs/getting-started.md", "Policy matrix", &matrix);
}

#[test]
fn breakpoint_runs_change_exits_not_counts_on_the_kernel() {
    let opts = "mtex.policies=entry-tco,kasan-sync mtex.workloads=getpid,memcached,thread-create";
    let stepped = scenario(&format!("{opts} mtex.runs=0"), 180);
    let ran = scenario(&format!("{opts} mtex.runs=1"), 180);
    for (a, b) in stepped.phases.iter().zip(&ran.phases) {
        let (ta, tb) = (trace(a), trace(b));
        assert!(tb.runs > 0, "{}: no run was made", b.name);
        let same = |t: TraceCounts| TraceCounts {
            runs: 0,
            runs_lost: 0,
            ..t
        };
        assert_eq!(same(ta), same(tb), "{}", a.name);
        assert!(b.stats.unwrap().step_exits < a.stats.unwrap().step_exits);
    }
}

#[test]
fn every_workload_runs_in_every_user_mode_and_async_modes_check_tfsre0() {
    for tcf0 in ["none", "async", "asymm"] {
        let r = scenario(
            &format!("mtex.tcf0={tcf0} mtex.policies=entry-tco,uaccess-tco,kasan-asymm"),
            300,
        );
        let p = phase(&r, Workload::Getpid, None, "entry-tco");
        let t = trace(p);
        let entries = t.entries.sync_el0 + t.entries.irq_el0;
        // v6.18 clears TCO on entry only for sync/asymm (TCF0 bit 0).
        let tco = if tcf0 == "asymm" {
            t.entries.total()
        } else {
            0
        };
        assert_eq!(t.tco_writes, tco, "tcf0={tcf0}");
        // With TCF0 async or asymm (bit 1), every entry from EL0 reads TFSRE0_EL1
        // (check_mte_async_tcf) and every exit clears it after a DSB ISH; without KASAN
        // nothing reads TFSR_EL1.
        let async_user = tcf0 != "none";
        let want = if async_user { entries } else { 0 };
        assert_eq!(t.tfsr_reads, want, "tcf0={tcf0}");
        assert_eq!(t.dsb, want, "tcf0={tcf0}");
    }
}

#[test]
fn each_run_goes_untraced_for_the_pmu_then_traced_and_the_counts_agree_exactly() {
    // The default (`mtex.trace=1`, also `both`, what `cargo mtex bench` times): each run once
    // at full speed for the PMU backend, then traced. No tick (hz=0), so both passes do the
    // same work to the instruction, and each counter can be held to the other exactly.
    let cmdline = "mtex.guest=kernel mtex.watchdog_ms=600000 mtex.trace=both mtex.hz=0 \
                   mtex.policies=entry-tco,kasan-sync mtex.workloads=getpid,futex-hash,memcached";
    let cfg = RunConfig {
        cmdline: cmdline.to_string(),
        timeout: Duration::from_secs(120),
        ..RunConfig::default()
    };
    let console = qemu::run(images(), &cfg).expect("running QEMU");
    let r = report::parse(&console.text);
    assert!(r.succeeded(), "{}", mtex::output::matrix::text(&r));
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    // Two policies × three workloads, each shown as its traced phase with one untraced pass
    // (QEMU's PMU has no MTE events: cycles alone fill the per-phase counters).
    assert_eq!(r.phases.len(), 6);
    let cycles = mtex_abi::report::pmu_event::CPU_CYCLES;
    for p in &r.phases {
        let t = p.trace.unwrap_or_else(|| panic!("{}: not traced", p.name));
        let u = p
            .untraced
            .as_ref()
            .unwrap_or_else(|| panic!("{}: no untraced pass", p.name));
        assert_eq!((u.passes, u.runs.len()), (1, 1), "{}", p.name);
        assert_ne!(u.runs[0].id, p.id);
        // The PMU at full speed counts what the trace counted instruction by instruction, per
        // EL, across every system call of the run: the EL0/EL1 split is exact.
        let [_, k, user] = u.instructions();
        assert_eq!(
            (k, user),
            (Some(t.instructions_el1), Some(t.instructions_el0)),
            "{}",
            p.name
        );
        assert!(t.entries.sync_el0 > 0, "{}: no system call", p.name);
        // One cycle per instruction under -icount shift=0, per EL.
        assert_eq!(
            p.pmu(cycles, 1),
            Some(PmuValue::Counted(t.instructions_el1))
        );
        assert_eq!(
            p.pmu(cycles, 0),
            Some(PmuValue::Counted(t.instructions_el0))
        );
    }
}

/// The scenario `opts` on `cpus` CPUs, without the tick and traced only, as several CPUs
/// need (`mtex.cpus`).
fn on_cpus(cpus: u32, opts: &str) -> Report {
    let opts = format!("mtex.cpus={cpus} mtex.hz=0 mtex.trace=only {opts}");
    let cfg = RunConfig {
        cmdline: format!("mtex.guest=kernel mtex.watchdog_ms=600000 {opts}"),
        timeout: Duration::from_secs(300),
        cpus,
        ..RunConfig::default()
    };
    let console = qemu::run(images(), &cfg).expect("running QEMU");
    assert!(!console.timed_out, "host time limit hit:\n{}", console.text);
    let r = report::parse(&console.text);
    assert!(r.succeeded(), "{}", mtex::output::matrix::text(&r));
    assert_eq!(
        r.phases.len(),
        Scenario::parse(&opts).unwrap().runs().count()
    );
    r
}

/// The kernel on four CPUs runs each workload once on every CPU, in one phase counted on all
/// of them: each CPU's user program counts exactly what it counts on one CPU alone (its
/// loop's arithmetic), and with TCMA1 set — the kernel's own accesses unchecked — so does
/// each CPU's kernel: one checked read per futex-hash iteration (the futex word, through
/// uaccess). (Without TCMA1 each CPU's kernel figures also hold its part in the PHASE calls'
/// rendezvous, which depends on the order the CPUs arrive in.) memcached's pairs each talk
/// across two CPUs — pair k's server on CPU 2k, its client on CPU 2k + 1 — and each pair's
/// two CPUs make exactly the user accesses one CPU's pair makes. The phase is their sum, and
/// every CPU's policy writes are in the trap log under its CPU.
#[test]
fn on_four_cpus_each_cpu_counts_what_one_cpu_counts_alone() {
    const CPUS: u32 = 4;
    let opts =
        "mtex.policies=entry-tco,tcma1,kasan-sync mtex.workloads=getpid,futex-hash,memcached";
    let one = on_cpus(1, opts);
    let four = on_cpus(CPUS, opts);
    for (alone, p) in one.phases.iter().zip(&four.phases) {
        let a = trace(alone);
        let t = trace(p);
        let n = iters(p);
        let q = p.params.unwrap();
        let name = format!("{} {}", p.name, q.policy.name().as_str());
        assert_eq!(p.cpus.len(), CPUS as usize, "{name}: {:?}", p.cpus);
        // The user program's own accesses: futex-hash's two reads and one write per
        // iteration, getpid's none.
        let (rd_u, wr_u) = match q.workload {
            Workload::FutexHash => (2 * n, n),
            Workload::Getpid => (0, 0),
            _ => (a.architectural.rd_u, a.architectural.wr_u),
        };
        assert_eq!((a.architectural.rd_u, a.architectural.wr_u), (rd_u, wr_u));
        if q.workload == Workload::Memcached {
            for k in 0..CPUS / 2 {
                let user = |cpu: u32| {
                    let c = p.cpus.iter().find(|c| c.cpu == cpu).expect("a share");
                    (c.checked.rd_u, c.checked.wr_u)
                };
                let (server, client) = (user(2 * k), user(2 * k + 1));
                assert_eq!(
                    (server.0 + client.0, server.1 + client.1),
                    (rd_u, wr_u),
                    "{name}, pair {k}"
                );
            }
            continue;
        }
        for c in &p.cpus {
            let at = format!("{name}, CPU {}", c.cpu);
            assert_eq!(c.instructions[0], a.instructions_el0, "{at}");
            assert_eq!((c.checked.rd_u, c.checked.wr_u), (rd_u, wr_u), "{at}");
            assert_eq!(c.tag_check_faults, 0, "{at}");
            // TCMA1 and no KASAN: every kernel pointer is match-all.
            if q.policy.tcma1_set() && q.policy.kasan == mtex_abi::scenario::Tcf::None {
                let kernel = match q.workload {
                    Workload::FutexHash => n,
                    _ => 0,
                };
                assert_eq!(checked_k(&a), kernel, "{name} alone");
                assert_eq!(c.checked.rd_k + c.checked.wr_k, kernel, "{at}");
            }
        }
        assert_eq!(
            (t.architectural.rd_u, t.architectural.wr_u),
            (CPUS as u64 * rd_u, CPUS as u64 * wr_u),
            "{name}"
        );
    }
    // Each CPU applies each run's policy itself: TCMA1 set on every CPU by its own write.
    for cpu in 0..CPUS {
        assert!(
            four.writes
                .iter()
                .any(|w| w.cpu == cpu
                    && w.changes.iter().any(|c| c.field == "TCMA1" && c.new == "1")),
            "CPU {cpu}: {}",
            mtex::output::matrix::text(&four)
        );
    }
}
