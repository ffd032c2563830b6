//! Linux mode's report: the kernel's MTE control writes, decoded and named by kernel
//! function, what it left set, how the run ended, and every problem. Built from the
//! hypervisor's records (the report UART) and Linux's own console (the second UART), which
//! carries the init script's markers and the workload's output (and, on the short boot that
//! reads them, the kernel's symbols).

use crate::debian::kernel::Kernel;
use crate::model::linux::{CpuInfo, LinuxSection, UnclosedWindow, WindowInfo, bits};
use crate::model::results::{KernelId, PhaseOut, Results, Run};
use crate::output::text::thousands;
use crate::profile::PhaseProfile;
use crate::profile::functions::by_function;
use crate::qemu::Console;
use crate::symbols::Symbols;
use comfy_table::Table;
use mtex_arch::SysReg;
use mtex_arch::fields::mte_fields;
use mtex_trace::counts::{ByEl, EntryCounts};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;

const MARK: &str = "mtex-linux: ";

/// One trapped write, as the report shows it.
#[derive(Clone, Debug, Serialize)]
pub struct LinuxWrite {
    pub seq: u32,
    /// The CPU that wrote it (its index among the machine's). Each CPU has its own
    /// SCTLR_EL1 and TCR_EL1, and the records of several CPUs arrive as each CPU hands its
    /// writes in: the list is in time order (`t_ms`), not in record order.
    pub cpu: u32,
    /// Milliseconds of the physical counter (CNTPCT_EL0: the hypervisor's own time
    /// included) since Linux's first trapped write.
    pub t_ms: f64,
    pub register: String,
    pub old: u64,
    pub new: u64,
    /// `TCF0 NONE→SYNC` for each MTE field that changed.
    pub changes: Vec<String>,
    pub el: u8,
    pub pc: u64,
    /// `function+0xoff` from the kernel's symbols; early boot runs at physical addresses,
    /// translated through the Image's load offset first.
    pub symbol: Option<String>,
}

/// One trace window as the Linux report shows it: what the CPU executed at EL0 and EL1
/// between the workload's OPEN and CLOSE doorbell stores, stepped. Read from the document:
/// its phase's counters and the Linux section's facts about it.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Window {
    pub id: u32,
    /// The workload's own line naming it (`mtex-work --window 1 ...`), if it printed one.
    pub label: Option<String>,
    /// Always true: a window never closed is an `UnclosedWindow`, without counts.
    pub closed: bool,
    pub instructions_el0: u64,
    pub instructions_el1: u64,
    /// The PMU's instruction counts per EL over the window, where it counted.
    pub pmu_el0: Option<u64>,
    pub pmu_el1: Option<u64>,
    /// See `WindowInfo::guest_clock_ms`.
    pub guest_clock_ms: Option<f64>,
    pub opened_ms: Option<f64>,
    /// mem_access_checked_{rd,wr}:{u,k} in each view: architectural, TCF-elided, if
    /// TCR_EL1.TCMA1 were set, if the kernel ran with PSTATE.TCO set; then every data access.
    pub views: Vec<(String, ByEl)>,
    /// Kernel entries from EL0 and EL1 (synchronous and IRQ).
    pub entries: EntryCounts,
    /// See `WindowInfo::user_tcf0`.
    pub user_tcf0: Vec<String>,
    /// See `WindowInfo::operations`.
    pub operations: Option<super::operations::Operations>,
    /// `perf stat` inside the guest: its figures for the MTE events beside mtex's.
    pub perf_stat: Vec<super::perf_stat::PerfBeside>,
    pub tag_check_faults: u64,
    /// Load/store instructions the decoder does not model (their accesses are not counted).
    pub unknown_mem: u64,
    pub failed_store_exclusives: u64,
    /// CAS/CASP whose compare failed: counted as a read and a write, judged alike; a CPU may
    /// make that write Unchecked, or not make it.
    pub failed_cas: u64,
    pub step_exits: u64,
    pub exits: u64,
    /// Instructions that began but were abandoned for an exception taken on them (not in
    /// `instructions_el*`).
    pub abandoned_el0: u64,
    pub abandoned_el1: u64,
    /// Direct branches the hypervisor executed for the guest at the end of a run: in
    /// `instructions_el*`, never executed by the CPU.
    pub hyp_branches_el0: u64,
    pub hyp_branches_el1: u64,
    /// The oracle's check of the window (`mtex linux --oracle`).
    pub oracle: Option<crate::oracle_check::Check>,
    /// Its counts by kernel function, when profiled by PC (`mtex.profile=1`) and the
    /// profile adds up to its counts.
    pub functions: Vec<crate::profile::functions::FunctionRow>,
    /// The same by kernel call stack, when the stacks were followed (`mtex.stacks=1`).
    pub stacks: Vec<crate::profile::functions::FunctionRow>,
    /// What its call stacks could not follow (`mtex.stacks=1`).
    pub stack_stats: Option<mtex_trace::callstack::StackStats>,
    /// A window every CPU counted: each CPU's share (the figures above are their sum).
    pub cpus: Vec<WindowCpu>,
}

/// One CPU's share of a window that every CPU counted.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct WindowCpu {
    /// The CPU's index among the machine's.
    pub cpu: u32,
    pub instructions_el0: u64,
    pub instructions_el1: u64,
    /// mem_access_checked_{rd,wr}:{u,k} (the architectural view), and every data access.
    pub checked: ByEl,
    pub accesses: ByEl,
    pub step_exits: u64,
    /// The oracle's check of this CPU's share (`mtex linux --oracle`).
    pub oracle: Option<crate::oracle_check::Check>,
}

/// The views a window's checked accesses are shown in, each with the prefix of its counters'
/// names in the one table (`mtex_abi::counters`); the last is every data access.
const VIEWS: [(&str, &str); 5] = [
    ("architectural", "mem_access_checked_"),
    ("TCF-elided", "tcf_elided.mem_access_checked_"),
    ("if TCMA1", "if_tcma1.mem_access_checked_"),
    ("if kernel TCO", "if_kernel_tco.mem_access_checked_"),
    ("all data accesses", "mem_access_"),
];

/// The four counters `PREFIX{rd,wr}:{k,u}` of `counters` (absent ones 0).
fn by_el(counters: &BTreeMap<String, u64>, prefix: &str) -> ByEl {
    let get = |s: &str| counters.get(&format!("{prefix}{s}")).copied().unwrap_or(0);
    ByEl {
        rd_k: get("rd:k"),
        wr_k: get("wr:k"),
        rd_u: get("rd:u"),
        wr_u: get("wr:u"),
    }
}

impl Window {
    /// Window `p` of a document, with what the Linux section says of it.
    pub fn of(p: &PhaseOut, info: Option<&WindowInfo>) -> Self {
        let c = |name: &str| p.counters.get(name).copied().unwrap_or(0);
        let info = info.cloned().unwrap_or_default();
        Window {
            id: p.id,
            label: info.label,
            closed: true,
            instructions_el0: c("instructions:u"),
            instructions_el1: c("instructions:k"),
            pmu_el0: p.counters.get("pmu.instructions:u").copied(),
            pmu_el1: p.counters.get("pmu.instructions:k").copied(),
            guest_clock_ms: info.guest_clock_ms,
            opened_ms: info.opened_ms,
            views: VIEWS
                .iter()
                .map(|(name, prefix)| (name.to_string(), by_el(&p.counters, prefix)))
                .collect(),
            entries: EntryCounts {
                sync_el0: c("kernel_entries.sync_el0"),
                irq_el0: c("kernel_entries.irq_el0"),
                sync_el1: c("kernel_entries.sync_el1"),
                irq_el1: c("kernel_entries.irq_el1"),
                other: c("kernel_entries.other"),
            },
            user_tcf0: info.user_tcf0.clone(),
            operations: info.operations.clone(),
            perf_stat: info.perf_stat.clone(),
            tag_check_faults: c("tag_check_faults"),
            unknown_mem: c("unknown_mem"),
            failed_store_exclusives: c("failed_store_exclusives"),
            failed_cas: c("failed_cas"),
            step_exits: c("step_exits"),
            exits: c("exits"),
            abandoned_el0: info.abandoned[0],
            abandoned_el1: info.abandoned[1],
            hyp_branches_el0: c("engine.branches:u"),
            hyp_branches_el1: c("engine.branches:k"),
            oracle: info.oracle,
            functions: p.functions.clone(),
            stacks: p.stacks.clone(),
            stack_stats: info.stack_stats,
            cpus: p
                .cpus
                .iter()
                .map(|share| {
                    let cpu = info.cpus.iter().find(|c| c.cpu == share.cpu);
                    let c = |name: &str| share.counters.get(name).copied().unwrap_or(0);
                    WindowCpu {
                        cpu: share.cpu,
                        instructions_el0: c("instructions:u"),
                        instructions_el1: c("instructions:k"),
                        checked: by_el(&share.counters, "mem_access_checked_"),
                        accesses: by_el(&share.counters, "mem_access_"),
                        step_exits: cpu.map_or(0, |c| c.step_exits),
                        oracle: cpu.and_then(|c| c.oracle.clone()),
                    }
                })
                .collect(),
        }
    }

    /// The counts of view `name` (zero for a view the window does not have).
    pub fn view(&self, name: &str) -> ByEl {
        self.views
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| *v)
            .unwrap_or_default()
    }
}

/// A window sampled (`--sample`): units of it traced at random, and every counter an
/// estimate with its interval. Nothing exact is claimed for it.
#[derive(Clone, Debug, Serialize)]
pub struct SampledWindow {
    pub id: u32,
    pub label: Option<String>,
    /// How it was sampled (None: its record was lost).
    pub sampled: Option<crate::model::results::SampledOut>,
    /// Its exact instructions at [EL0, EL1] (the PMU's), which the estimates scale to.
    pub instructions: Option<[u64; 2]>,
    /// Of them, the instructions its units traced, at [EL0, EL1].
    pub traced: Option<[u64; 2]>,
    /// Every trace counter's estimate, in the counters' table order.
    pub estimates: Vec<(String, crate::model::results::EstimateOut)>,
    /// Sampled on several CPUs: each CPU's share and its own estimates.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cpus: Vec<crate::model::results::CpuEstimatesOut>,
    /// See `WindowInfo::user_tcf0`: the trapped writes are all seen, sampled or not.
    pub user_tcf0: Vec<String>,
    /// See `WindowInfo::operations`.
    pub operations: Option<super::operations::Operations>,
    /// The oracle's check of what the units and their leads traced (`--oracle`).
    pub oracle: Option<crate::oracle_check::Check>,
}

impl SampledWindow {
    /// Sampled window `p` of a document, with what the Linux section says of it.
    pub fn of(p: &PhaseOut, info: Option<&WindowInfo>) -> Self {
        let info = info.cloned().unwrap_or_default();
        SampledWindow {
            id: p.id,
            label: info.label,
            sampled: p.sampled.clone(),
            instructions: info.population,
            traced: info.traced,
            estimates: mtex_abi::counters::all()
                .filter_map(|c| p.estimates.get(c.name).map(|e| (c.name.to_string(), *e)))
                .collect(),
            cpus: p.cpu_estimates.clone(),
            user_tcf0: info.user_tcf0.clone(),
            operations: info.operations.clone(),
            oracle: info.oracle,
        }
    }
}

/// A Linux-mode run as its report shows it: the document's Linux section, its kernel, its
/// one run, and its windows read from the run's phases.
pub struct LinuxView<'a> {
    pub doc: &'a Results,
    pub section: &'a LinuxSection,
    pub kernel: &'a KernelId,
    pub run: &'a Run,
    /// The trapped writes in time order.
    pub writes: Vec<LinuxWrite>,
    pub windows: Vec<Window>,
    pub sampled_windows: Vec<SampledWindow>,
}

impl std::ops::Deref for LinuxView<'_> {
    type Target = LinuxSection;
    fn deref(&self) -> &LinuxSection {
        self.section
    }
}

impl<'a> LinuxView<'a> {
    /// The view of a Linux-mode run's document; None for any other document.
    pub fn of(doc: &'a Results) -> Option<Self> {
        let (section, kernel, run) = (doc.linux.as_ref()?, doc.kernel.as_ref()?, doc.runs.first()?);
        let info = |id: u32| section.windows.iter().find(|w| w.id == id);
        let hz = run.boot.as_ref().map_or(1, |b| b.counter_hz.max(1)) as f64;
        let t0 = run.writes.iter().map(|w| w.ts).min().unwrap_or(0);
        let mut writes: Vec<LinuxWrite> = run
            .writes
            .iter()
            .map(|w| LinuxWrite {
                seq: w.seq,
                cpu: w.cpu,
                t_ms: (w.ts.saturating_sub(t0)) as f64 * 1000.0 / hz,
                register: w.register.clone(),
                old: bits(&w.old),
                new: bits(&w.new),
                changes: w.changes.clone(),
                el: w.el,
                pc: bits(&w.pc),
                symbol: w.symbol.clone(),
            })
            .collect();
        // One CPU's writes arrive in order; several CPUs' as each hands its queue in.
        writes.sort_by_key(|w| (w.t_ms.to_bits(), w.seq));
        Some(LinuxView {
            doc,
            section,
            kernel,
            run,
            writes,
            windows: run
                .phases
                .iter()
                .filter(|p| p.traced && !info(p.id).is_some_and(|w| w.sampled))
                .map(|p| Window::of(p, info(p.id)))
                .collect(),
            sampled_windows: run
                .phases
                .iter()
                .filter(|p| info(p.id).is_some_and(|w| w.sampled))
                .map(|p| SampledWindow::of(p, info(p.id)))
                .collect(),
        })
    }

    pub fn problems(&self) -> &'a [String] {
        &self.run.problems
    }

    pub fn notes(&self) -> &'a [String] {
        &self.run.notes
    }

    pub fn power_calls(&self) -> &'a [crate::model::results::PowerCallOut] {
        &self.run.power_calls
    }

    /// The window's label, where the workload printed one.
    pub fn label(&self, id: u32) -> Option<&'a str> {
        self.section
            .windows
            .iter()
            .find(|w| w.id == id)
            .and_then(|w| w.label.as_deref())
    }
}

/// The lines between the init script's kallsyms markers.
pub fn kallsyms_section(text: &str) -> Option<String> {
    let start = text.find(&format!("{MARK}kallsyms-begin"))?;
    let rest = &text[start..];
    let body_start = rest.find('\n')? + 1;
    let end = rest.find(&format!("{MARK}kallsyms-end"))?;
    Some(rest[body_start..end].replace('\r', ""))
}

/// Lines of the workload's output kept (the last ones).
const OUTPUT_LINES: usize = 200;
/// Lines of Linux's console shown when /init was not reached.
const TAIL_LINES: usize = 25;

/// A kernel message (`[    1.234567] ...`), not the workload's output.
fn is_printk(line: &str) -> bool {
    line.strip_prefix('[')
        .and_then(|r| r.split_once(']'))
        .is_some_and(|(t, _)| {
            !t.trim().is_empty() && t.trim().chars().all(|c| c.is_ascii_digit() || c == '.')
        })
}

/// What the workload printed (its programs and the shell, stdout and stderr): the lines
/// between the init script's workload and done markers, kernel messages left out; the last
/// `OUTPUT_LINES` of them.
pub fn workload_output(linux: &str) -> Vec<String> {
    let begin = format!("{MARK}workload");
    let done = format!("{MARK}done ");
    let lines: Vec<String> = linux
        .lines()
        .map(|l| l.trim_end_matches(['\r', ' ']))
        .skip_while(|l| l.trim() != begin)
        .skip(1)
        .take_while(|l| !l.trim().starts_with(&done))
        .filter(|l| !l.trim().is_empty() && !is_printk(l))
        .map(str::to_string)
        .collect();
    lines[lines.len().saturating_sub(OUTPUT_LINES)..].to_vec()
}

/// What window `id`'s command printed: the lines after its `mtex-work: window ID:` line, up
/// to the next window's or the workload's end, kernel messages left out.
pub fn window_output(linux: &str, id: u32) -> Vec<String> {
    let own = format!("mtex-work: window {id}: ");
    linux
        .lines()
        .map(|l| l.trim_end_matches(['\r', ' ']))
        .skip_while(|l| !l.trim_start().starts_with(&own))
        .skip(1)
        .take_while(|l| {
            let l = l.trim_start();
            !l.starts_with("mtex-work: window ") && !l.starts_with(&format!("{MARK}done "))
        })
        .filter(|l| !l.trim().is_empty() && !is_printk(l))
        .map(str::to_string)
        .collect()
}

/// A window sampled on several CPUs (a share from each).
fn sampled_on_several(p: &crate::model::report::Phase) -> bool {
    p.sampled.as_ref().is_some_and(|s| s.shares.len() > 1)
}

/// The last `TAIL_LINES` non-empty lines of Linux's console.
pub fn console_tail(linux: &str) -> Vec<String> {
    let lines: Vec<&str> = linux
        .lines()
        .map(|l| l.trim_end_matches(['\r', ' ']))
        .filter(|l| !l.trim().is_empty())
        .collect();
    lines[lines.len().saturating_sub(TAIL_LINES)..]
        .iter()
        .map(|l| l.to_string())
        .collect()
}

/// Whether /init was reached, the workload's status, and the problems those say: a
/// workload that failed is named with the last line it printed (a shell's "not found").
fn workload_problems(linux: &str, output: &[String]) -> (bool, Option<i32>, Vec<String>) {
    let reached_init = linux.contains(&format!("{MARK}init"));
    let status = linux
        .lines()
        .find_map(|l| l.trim().strip_prefix(&format!("{MARK}done ")))
        .and_then(|s| s.trim().parse().ok());
    let mut problems = Vec::new();
    let setup_failed = linux.lines().find_map(|l| {
        let rest = l.trim().strip_prefix(super::SETUP_FAILED)?;
        let mut words = rest.split_whitespace();
        Some((words.next()?.to_string(), words.next()?.to_string()))
    });
    match status {
        _ if !reached_init => {
            // A panic's own line is above its stack trace: named here, whatever the tail holds.
            let panic = linux
                .lines()
                .rev()
                .find_map(|l| l.split_once("Kernel panic - ").map(|(_, p)| p.trim_end()));
            problems.push(format!(
                "Linux did not reach the initramfs's /init{}: the last lines of its console \
                 follow",
                panic.map_or(String::new(), |p| format!(" (kernel panic - {p})"))
            ))
        }
        None => {
            problems.push("the workload did not finish (no done marker on Linux's console)".into())
        }
        Some(0) => {}
        Some(_) if let Some((n, s)) = setup_failed => problems.push(format!(
            "set-up command {n} (--setup) exited with status {s}{}: no window ran after it",
            output
                .iter()
                .rev()
                .find(|l| !l.starts_with(super::SETUP_FAILED))
                .map_or(String::new(), |l| format!(" ({l})"))
        )),
        Some(s) => problems.push(match output.last() {
            Some(last) => format!("the workload exited with status {s}: {last}"),
            None => format!("the workload exited with status {s} (it printed nothing)"),
        }),
    }
    (reached_init, status, problems)
}

/// `FIELD=value` for every MTE field of `reg` in `value`.
fn fields(reg: SysReg, value: u64) -> Vec<String> {
    mte_fields(reg)
        .iter()
        .map(|f| format!("{}={}", f.name, f.value_name(f.extract(value))))
        .collect()
}

/// The PC as a kernel virtual address: early boot runs with the MMU off at the Image's
/// physical address (`entry`), which maps to `_text`.
fn kernel_va(pc: u64, entry: u64, text_va: Option<u64>) -> u64 {
    match text_va {
        Some(t) if pc >> 63 == 0 && pc >= entry => pc - entry + t,
        _ => pc,
    }
}

/// `f` with its kernel PCs as virtual addresses (user PCs are not the kernel's to move).
fn kernel_pcs(f: &PhaseProfile, entry: u64, text_va: Option<u64>) -> PhaseProfile {
    let mut f = f.clone();
    for e in f.pcs.iter_mut().filter(|e| e.el != 0) {
        e.pc = kernel_va(e.pc, entry, text_va);
    }
    // The kernel's frames too: calls' return addresses and what interrupts in the kernel
    // interrupted (an entry from EL0 holds a user PC).
    for n in f.stacks.iter_mut().filter(|n| !n.frame.from_el0()) {
        n.frame.addr = kernel_va(n.frame.addr, entry, text_va);
    }
    f
}

/// What mtex set up for a run: the machine Linux had, and what was asked of its user space.
#[derive(Clone, Debug)]
pub struct Setup {
    /// Whether QEMU ran with -icount.
    pub icount: bool,
    pub cpus: u32,
    pub cpu_model: crate::qemu::CpuModel,
    /// `--tagged-heap`.
    pub tagged_heap: Option<super::tagged_heap::TaggedHeap>,
    /// Operation counts the user gave (`--operations`), by window: they take the place of
    /// what the window's command printed.
    pub operations: Vec<(u32, u64)>,
    /// What preparing the guest found worth saying (two packages with the same file: which
    /// one's was kept): the report's notes.
    pub notes: Vec<String>,
}

/// A run's results document from what its boot printed: its windows are the phases (a
/// window never closed was not measured: it has no phase), and the Linux section holds the
/// rest. `symbols` is the kernel's symbol table (kallsyms' form) and the symbols of the
/// program that opens the windows; `icount` whether QEMU ran with -icount.
pub fn document(
    kernel: &Kernel,
    console: &Console,
    linux: &str,
    (kallsyms, program): (&str, Symbols),
    setup: Setup,
) -> Results {
    let Setup {
        icount,
        cpus,
        cpu_model,
        tagged_heap,
        operations: given_operations,
        notes: setup_notes,
    } = setup;
    let r = console.report();
    let mut measured = r.clone();
    measured.phases.retain(|p| p.end.is_some());
    let mut run = crate::model::results::run("linux", 0, &measured);
    let symbols = Symbols::from_kallsyms(kallsyms).with_program(program);
    let text_va = kallsyms.lines().find_map(|l| {
        let mut f = l.split_whitespace();
        let a = u64::from_str_radix(f.next()?, 16).ok()?;
        (f.nth(1)? == "_text").then_some(a)
    });
    // Through firmware (install mode) the Image's physical address is the EFI stub's
    // choice, unknown here: PCs with the MMU off stay physical and unnamed, rather than be
    // named after the wrong function.
    let through_firmware = r
        .boot
        .is_some_and(|b| b.boot_path != mtex_platform::BootPath::KernelDtb as u8);
    let entry = match r.boot {
        Some(b) if !through_firmware => b.guest_entry,
        _ => u64::MAX,
    };
    let hz = r.boot.map_or(1, |b| b.counter_hz.max(1)) as f64;
    let mut problems = r.problems.clone();
    let mut notes = r.notes.clone();
    notes.extend(setup_notes);
    // The writes by kernel function.
    for w in &mut run.writes {
        w.symbol = crate::model::results::from_hex(&w.pc)
            .and_then(|pc| symbols.lookup(kernel_va(pc, entry, text_va)));
    }
    let last = |name: &str, reg: SysReg| {
        r.writes
            .iter()
            .rev()
            .find(|w| w.register == name)
            .map(|w| (crate::model::results::hex(w.new), fields(reg, w.new)))
    };
    let output = workload_output(linux);
    let (reached_init, workload_status, found) = workload_problems(linux, &output);
    problems.extend(found);
    problems.extend(super::console_checks::clock_problems(linux));
    if r.writes.is_empty() {
        problems.push("no SCTLR_EL1/TCR_EL1 write was trapped: Linux writes both at boot".into());
    }
    if symbols.is_empty() {
        notes.push("no kernel symbols (the symbol boot did not give them): PCs only".into());
    }
    let exit = r.end();
    if let Some(s) = &r.summary
        && !s.exit.is_success()
        && !problems.iter().any(|p| p.contains(&exit))
    {
        problems.push(format!("the run ended badly: {exit}"));
    }
    let label = |id: u32| {
        linux.lines().find_map(|l| {
            l.trim()
                .strip_prefix(&format!("mtex-work: window {id}: "))
                .map(|a| format!("mtex-work {a}"))
        })
    };
    // The guest's clock starts at 0 at Linux's first instruction.
    let clock_ms = |ticks: u64| ticks as f64 * 1000.0 / hz;
    let unclosed_windows: Vec<UnclosedWindow> = r
        .phases
        .iter()
        .filter(|p| p.end.is_none())
        .map(|p| UnclosedWindow {
            id: p.id,
            label: label(p.id),
            opened_ms: p.begin_guest_clock.map(clock_ms),
        })
        .collect();
    for w in &unclosed_windows {
        // The general checks of its counts ("never ended: counts up to ...", accesses not
        // judged) give way to this one: the report shows no count of such a window.
        let general = format!("phase {} (window {})", w.id, w.id);
        problems.retain(|p| !p.starts_with(&general));
        problems.push(format!(
            "window {}{} was opened and never closed: not measured, no counts shown (the \
             workload ended, failed or was killed with it open)",
            w.id,
            w.label
                .as_ref()
                .map_or(String::new(), |l| format!(" ({l})"))
        ));
    }
    let emulator = r.boot.is_none_or(|b| b.is_emulator());
    let windows: Vec<WindowInfo> = measured
        .phases
        .iter()
        .map(|p| WindowInfo {
            id: p.id,
            label: label(p.id),
            sampled: p.sampled.is_some(),
            guest_clock_ms: p
                .begin_guest_clock
                .zip(p.end_guest_clock)
                // A close read behind the open (on several CPUs each CPU's counter may
                // run ahead of the others'): no length, rather than a made-up zero.
                .and_then(|(b, e)| e.checked_sub(b))
                .map(clock_ms)
                // Sampled on several CPUs, the CPUs' clocks do not agree: no length.
                .filter(|_| !sampled_on_several(p)),
            opened_ms: p.begin_guest_clock.map(clock_ms),
            abandoned: p
                .trace
                .as_ref()
                .map_or([0, 0], |t| [t.abandoned_el0, t.abandoned_el1]),
            user_tcf0: super::tagged_heap::tcf0_set(&r.writes, &p.name),
            perf_stat: super::perf_stat::beside(
                &window_output(linux, p.id),
                &crate::model::results::counters(p),
                p.guest_pmu.first().map(|g| g.view),
            ),
            operations: super::operations::of_window(
                &window_output(linux, p.id),
                given_operations
                    .iter()
                    .find(|(id, _)| *id == p.id)
                    .map(|(_, n)| *n),
            ),
            oracle: p.oracle.clone(),
            stack_stats: crate::profile::of_phase(p)
                .and_then(|f| f.stack_end)
                .map(|e| e.stats),
            cpus: p
                .cpus
                .iter()
                .map(|c| CpuInfo {
                    cpu: c.cpu,
                    step_exits: c.step_exits,
                    oracle: p
                        .cpu_oracle
                        .iter()
                        .find(|(cpu, _)| *cpu == c.cpu)
                        .map(|(_, check)| check.clone()),
                })
                .collect(),
            population: p
                .sampled
                .is_some()
                .then(|| crate::model::report::sampled::population(p, emulator))
                .flatten(),
            traced: p
                .sampled
                .is_some()
                .then(|| crate::model::report::sampled::traced_sum(p))
                .flatten()
                .map(|t| [t.instructions_el0, t.instructions_el1]),
        })
        .collect();
    problems.extend(super::tagged_heap::problems(tagged_heap, &windows));
    for w in &windows {
        problems.extend(super::perf_stat::problems(w.id, &w.perf_stat));
    }
    // The windows by kernel function: kernel PCs named by the kernel's symbols.
    for (out, p) in run.phases.iter_mut().zip(&measured.phases) {
        if let Some(f) = crate::profile::of_phase(p) {
            let f = kernel_pcs(f, entry, text_va);
            out.functions = by_function(&f, &symbols);
            out.stacks = crate::profile::stacks::by_stack(
                &f,
                &symbols,
                crate::profile::stacks::Syscalls::Linux,
            );
        }
    }
    let tick = std::fs::read_to_string(&kernel.config)
        .ok()
        .and_then(|c| super::interrupt_rate::config_hz(&c));
    let shown: Vec<Window> = run
        .phases
        .iter()
        .filter(|p| p.traced)
        .map(|p| Window::of(p, windows.iter().find(|w| w.id == p.id)))
        .collect();
    notes.extend(super::interrupt_rate::notes(&shown, tick));
    for p in run.phases.iter().filter(|p| p.sampled.is_some()) {
        let several = measured
            .phases
            .iter()
            .find(|m| m.id == p.id)
            .is_some_and(sampled_on_several);
        if several {
            notes.push(format!(
                "{}: sampled on several CPUs, whose guest clocks are not held together: each                  CPU's virtual counter is held back by the hypervisor's time at its own exits                  only, so while one CPU steps a unit the others' run ahead of it; its length on                  the guest's clock is not given, and a program that times itself across CPUs                  inside it can see time go back (docs/sampling.md#several-cpus)",
                p.name
            ));
        }
    }
    if !icount && !shown.is_empty() {
        notes.push(
            "without -icount the guest clock's times are approximate (QEMU's own time per exit \
             is not taken out)"
                .into(),
        );
    }
    run.success = run.success && problems.is_empty();
    run.problems = problems;
    run.notes = notes;
    let mut doc = Results::new(None, vec![run], Vec::new());
    doc.kernel = Some(KernelId {
        release: kernel.release.clone(),
        package: kernel.package.name.clone(),
        version: kernel.package.version.clone(),
        sha256: kernel.sha256.clone(),
    });
    doc.linux = Some(LinuxSection {
        cpus,
        cpu_model: cpu_model.describe().into(),
        tagged_heap: tagged_heap.map(|h| h.name().into()),
        through_firmware,
        reached_init,
        workload_status,
        workload_output: output,
        windows,
        unclosed_windows,
        icount,
        final_sctlr_el1: last("SCTLR_EL1", SysReg::SctlrEl1),
        final_tcr_el1: last("TCR_EL1", SysReg::TcrEl1),
        exit,
        wall_s: console.wall.as_secs_f64(),
        symbols: symbols.len(),
        unknown_calls: r
            .unknown_calls
            .iter()
            .map(|c| format!("{:?} {:#x} at pc {:#x}", c.conduit, c.function, c.at.pc))
            .collect(),
        debug_writes: r.debug_writes.len(),
        console_tail: if reached_init {
            Vec::new()
        } else {
            console_tail(linux)
        },
    });
    doc
}

/// Writes listed one by one; past this, a table by place.
const WRITES_LISTED: usize = 40;

/// Whether the writes come from more than one CPU (the tables then name each write's).
fn several_cpus(writes: &[LinuxWrite]) -> bool {
    writes.iter().any(|w| w.cpu != writes[0].cpu)
}

/// One window's block: instructions per EL against the PMU, then the checked accesses in
/// each view.
/// Whether the kernel ran its user space with TCR_EL1.TCMA1 set: the value it left has it,
/// and no trapped write ever cleared it (a kernel sets it once, in `__cpu_setup`).
pub fn tcma1_set(r: &LinuxView) -> bool {
    let left = r
        .final_tcr_el1
        .as_ref()
        .is_some_and(|(tcr, _)| bits(tcr) & mtex_arch::mte_bits::tcr::TCMA1 != 0);
    let cleared = r
        .writes
        .iter()
        .any(|w| w.changes.iter().any(|c| c.starts_with("TCMA1 1→0")));
    left && !cleared
}

fn window_text(w: &Window, tcma1_is_set: bool) -> String {
    use crate::output::text::thousands;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Window {}{}",
        w.id,
        w.label.as_ref().map_or(String::new(), |l| format!(": {l}")),
    );
    let pmu = |v: Option<u64>| v.map_or("-".into(), thousands);
    match (w.opened_ms, w.guest_clock_ms) {
        (Some(at), Some(open)) if w.cpus.len() > 1 => writeln!(
            out,
            "  opened at {at:.1} ms of the guest's clock (since Linux's first instruction); open \
             for {open:.3} ms of it: the machine's one guest time, which every read of a CPU's \
             clock in the window gives once past what the CPUs had seen as they joined (a \
             nanosecond for each instruction any CPU retired, and the time every CPU was idle), \
             not any one CPU's own"
        ),
        (Some(at), Some(open)) => writeln!(
            out,
            "  opened at {at:.1} ms of the guest's clock (since Linux's first instruction); open \
             for {open:.3} ms of it (its virtual counter: the hypervisor's stepping left out)"
        ),
        (Some(at), None) => writeln!(
            out,
            "  opened at {at:.1} ms of the guest's clock (since Linux's first instruction); its \
             length on that clock is not known: the clock read at its close was behind the one \
             read at its open (on several CPUs, one CPU's counter may run ahead of another's \
             while QEMU runs the other)"
        ),
        _ => writeln!(out, "  the guest's clock was not recorded for this window"),
    }
    .ok();
    let _ = writeln!(
        out,
        "  instructions: EL0 {} (PMU {}), EL1 {} (PMU {}); {} steps, {} other exits",
        thousands(w.instructions_el0),
        pmu(w.pmu_el0),
        thousands(w.instructions_el1),
        pmu(w.pmu_el1),
        thousands(w.step_exits),
        thousands(w.exits),
    );
    out.push_str(&user_tcf0_line(&w.user_tcf0));
    if let Some(ops) = &w.operations {
        out.push_str(&super::operations::exact_line(
            ops,
            &w.view("architectural"),
        ));
    }
    out.push_str(&super::perf_stat::text(&w.perf_stat));
    let _ = writeln!(
        out,
        "  kernel entries: {} from EL0 ({} IRQ), {} from EL1 ({} IRQ); tag-check faults {}; failed store-exclusives {}{}",
        w.entries.sync_el0 + w.entries.irq_el0,
        w.entries.irq_el0,
        w.entries.sync_el1 + w.entries.irq_el1,
        w.entries.irq_el1,
        w.tag_check_faults,
        w.failed_store_exclusives,
        if w.failed_cas > 0 {
            format!(
                "; CAS whose compare failed {} (counted as writes, judged alike; a CPU may write them Unchecked, or not write)",
                w.failed_cas
            )
        } else {
            String::new()
        }
    );
    if let Some(c) = &w.oracle {
        let _ = writeln!(out, "{}", oracle_text(c));
    }
    if !w.cpus.is_empty() {
        let _ = writeln!(out, "{}", cpus_text(w));
    }
    let (arch, tcma1) = (w.view("architectural"), w.view("if TCMA1"));
    if tcma1_is_set {
        let _ = writeln!(
            out,
            "  TCMA1: set by this kernel (TCR_EL1.TCMA1=1): the checked reads above are already \
             what it leaves ({} at EL1)",
            thousands(arch.rd_k)
        );
    } else if arch.rd_k > 0 {
        let cut = 100.0 * (arch.rd_k - tcma1.rd_k.min(arch.rd_k)) as f64 / arch.rd_k as f64;
        let _ = writeln!(
            out,
            "  TCMA1: the kernel's checked reads {} → {} if TCR_EL1.TCMA1 were set ({cut:.1}% fewer; \
             the \"Set TCMA1 whenever MTE is present\" change measured over 98% fewer kernel tag \
             checks on an Ampere system)",
            thousands(arch.rd_k),
            thousands(tcma1.rd_k)
        );
    }
    let mut t = crate::output::tables::bordered(vec![
        "view",
        "mem_access_checked_rd:u",
        "rd:k",
        "wr:u",
        "wr:k",
    ]);
    for (name, v) in &w.views {
        t.add_row(vec![
            name.clone(),
            thousands(v.rd_u),
            thousands(v.rd_k),
            thousands(v.wr_u),
            thousands(v.wr_k),
        ]);
    }
    let _ = writeln!(out, "{t}");
    let by_function = crate::profile::text::section(&w.functions, &w.stacks, w.stack_stats);
    if !by_function.is_empty() {
        let _ = writeln!(out, "\n{}", by_function.join("\n"));
    }
    out
}

/// A window every CPU counted: each CPU's share, and their sum.
fn cpus_text(w: &Window) -> String {
    use crate::output::tables::{CpuRow, cpu_table};
    let verdict = |c: &Option<crate::oracle_check::Check>| match c {
        None => "-".to_string(),
        Some(c) if c.problems().is_empty() => "agrees".to_string(),
        Some(_) => "DISAGREES".to_string(),
    };
    let rows = w.cpus.iter().map(|c| CpuRow {
        name: c.cpu.to_string(),
        instructions: [c.instructions_el0, c.instructions_el1],
        checked: c.checked,
        last: verdict(&c.oracle),
    });
    let total = CpuRow {
        name: "total".into(),
        instructions: [w.instructions_el0, w.instructions_el1],
        checked: w.view("architectural"),
        last: verdict(&w.oracle),
    };
    let t = cpu_table("oracle", rows.chain([total]));
    format!(
        "  counted on {} CPUs, each from its first instruction after the open to its first exit \
         after the close (the PMU figures are withheld: a CPU's PMU counts that CPU only; \
         every CPU's clock is the machine's one guest time: docs/linux.md#cpus):\n{t}",
        w.cpus.len()
    )
}

/// The oracle's verdict on a window, on one line when it agrees.
fn oracle_text(c: &crate::oracle_check::Check) -> String {
    use crate::output::text::thousands;
    let figures = |el: u8| {
        c.figures
            .iter()
            .filter(|f| f.el == el)
            .map(|f| format!("{} {}", f.what, thousands(f.oracle)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let verdict = match (&c.inexact, c.agrees(), c.problems().is_empty()) {
        (_, true, _) => "agrees with the trace".to_string(),
        (Some(why), false, true) => {
            format!("agrees on instructions; reads and writes not comparable exactly ({why})")
        }
        _ => format!("DISAGREES: {}", c.problems().join("; ")),
    };
    format!(
        "  oracle (QEMU's own hooks) {verdict}\n    EL0: {}\n    EL1: {}; {} QEMU step stub(s) left out",
        figures(0),
        figures(1),
        c.step_stubs
    )
}

/// The windows in one table: instructions, then the checked accesses of each view that
/// tells policies apart (kernel reads and writes architecturally, what is left where checks
/// are elided with TCF NONE, with TCMA1, with kernel TCO).
fn compare_windows(windows: &[Window]) -> Table {
    use crate::output::text::thousands;
    let mut t = crate::output::tables::bordered(vec![
        "window",
        "instructions :u / :k",
        "architectural rd:k wr:k rd:u wr:u",
        "TCF-elided rd:k rd:u wr:u",
        "if TCMA1 rd:k",
        "if kernel TCO rd:k",
    ]);
    for w in windows {
        let v = |name: &str| w.view(name);
        let (a, e) = (v("architectural"), v("TCF-elided"));
        t.add_row(vec![
            format!(
                "{}{}",
                w.id,
                w.label
                    .as_deref()
                    .and_then(|l| l.split("--tcf0 ").nth(1))
                    .and_then(|m| m.split_whitespace().next())
                    .map_or(String::new(), |m| format!(" (TCF0 {m})"))
            ),
            format!(
                "{} / {}",
                thousands(w.instructions_el0),
                thousands(w.instructions_el1)
            ),
            format!(
                "{} {} {} {}",
                thousands(a.rd_k),
                thousands(a.wr_k),
                thousands(a.rd_u),
                thousands(a.wr_u)
            ),
            format!(
                "{} {} {}",
                thousands(e.rd_k),
                thousands(e.rd_u),
                thousands(e.wr_u)
            ),
            thousands(v("if TCMA1").rd_k),
            thousands(v("if kernel TCO").rd_k),
        ]);
    }
    t
}

/// `one CPU`, `4 CPUs`.
/// A sampled window: how it was sampled, then each counter's estimate that is not zero in
/// every unit, `62,541 ± 0.8% (95% CI, 312 units)` or
/// `~64 (not estimable: 1 unit met it, an interval needs 10)`.
/// A window's line of the tag checking its tasks set, read from its trapped writes.
fn user_tcf0_line(set: &[String]) -> String {
    format!(
        "  user tag checking its tasks set (TCF0 of its trapped SCTLR_EL1 writes): {}\n",
        if set.is_empty() {
            "none (every task kept the TCF0 it had)".to_string()
        } else {
            set.join(", ")
        }
    )
}

/// A window sampled on several CPUs: each CPU's share, with its checked accesses estimated
/// from its own units (its every counter is in report.json).
fn cpu_shares_text(cpus: &[crate::model::results::CpuEstimatesOut]) -> String {
    let mut out = String::new();
    if cpus.is_empty() {
        return out;
    }
    let _ = writeln!(
        out,
        "  by CPU (each from its own units and its own instructions: its PMU's, or on QEMU the \
         plugin's count, as QEMU's PMU counts every vCPU's; the window's \
         figures above are their sum):"
    );
    for c in cpus {
        let [el0, el1] = c.instructions.unwrap_or_default();
        let _ = writeln!(
            out,
            "    CPU {}: {} units, {} instructions (EL0 {}, EL1 {}){}",
            c.cpu,
            c.units,
            thousands(el0 + el1),
            thousands(el0),
            thousands(el1),
            if c.timer_stopped {
                ": its sampling timer stopped, no estimate (see PROBLEMS)"
            } else if c.instructions.is_none() {
                ": no instruction total, no estimate (see PROBLEMS)"
            } else {
                ""
            }
        );
        for (name, e) in c
            .estimates
            .iter()
            .filter(|(n, e)| n.starts_with("mem_access_checked_") && e.value != 0.0)
        {
            let _ = writeln!(out, "      {name:<26}  {}", e.estimate());
        }
    }
    out
}

fn sampled_window_text(w: &SampledWindow) -> String {
    let mut out = format!(
        "Window {}{}\n",
        w.id,
        w.label.as_ref().map_or(String::new(), |l| format!(": {l}"))
    );
    let traced: u64 = w.traced.map_or(0, |[a, b]| a + b);
    match (&w.sampled, w.instructions) {
        (Some(s), Some([el0, el1])) => {
            let _ = writeln!(
                out,
                "  SAMPLED: {} units of about {} instructions, after random gaps of 0 to {} µs: \
                 {} of its {} instructions (EL0 {}, EL1 {}) traced; every figure below is an \
                 estimate, ± its 95% confidence interval, or `~` and why it is not estimable",
                s.units,
                thousands(s.unit_instructions as u64),
                2 * s.gap_us as u64,
                thousands(traced),
                thousands(el0 + el1),
                thousands(el0),
                thousands(el1)
            );
        }
        _ => {
            let _ = writeln!(
                out,
                "  SAMPLED: no estimate (its instruction totals or its record are missing: see \
                 PROBLEMS)"
            );
        }
    }
    out.push_str(&user_tcf0_line(&w.user_tcf0));
    if let Some(ops) = &w.operations {
        out.push_str(&super::operations::sampled_line(ops, &w.estimates));
    }
    let width = w.estimates.iter().map(|(c, _)| c.len()).max().unwrap_or(0);
    for (name, e) in w.estimates.iter().filter(|(_, e)| e.value != 0.0) {
        let _ = writeln!(out, "  {name:<width$}  {}", e.estimate());
    }
    out.push_str(&cpu_shares_text(&w.cpus));
    if let Some(c) = &w.oracle {
        let _ = writeln!(out, "  of its units and their leads, together:");
        let _ = writeln!(out, "{}", oracle_text(c));
    }
    out
}

/// The CPUs Linux had: how many, and which model where the document says.
pub fn cpus(r: &LinuxView) -> String {
    let n = if r.cpus == 1 {
        "one CPU".into()
    } else {
        format!("{} CPUs", r.cpus)
    };
    if r.cpu_model.is_empty() {
        n
    } else {
        format!("{n} ({})", r.cpu_model)
    }
}

/// How Linux came to run under the hypervisor.
pub fn how_booted(r: &LinuxView) -> &'static str {
    if r.through_firmware {
        "booted by UEFI firmware (ACPI) with the hypervisor installed under it"
    } else {
        "under the hypervisor in Linux mode"
    }
}

/// The report as text.
pub fn render(r: &LinuxView) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "mtex linux: {} {} ({}), {}, {}",
        r.kernel.package,
        r.kernel.version,
        r.kernel.release,
        cpus(r),
        how_booted(r)
    );
    let _ = writeln!(
        out,
        "  /init reached: {}; workload status: {}; ended: {}; wall {:.1} s",
        if r.reached_init { "yes" } else { "no" },
        r.workload_status.map_or("-".into(), |s| s.to_string()),
        r.exit,
        r.wall_s
    );
    if let Some(h) = &r.tagged_heap {
        let _ = writeln!(
            out,
            "  glibc's tagged heap asked for, {h}: each window shows the tag checking its tasks set"
        );
    }
    for l in &r.workload_output {
        let _ = writeln!(out, "  {l}");
    }
    let count = |name: &str| r.writes.iter().filter(|w| w.register == name).count();
    let _ = writeln!(
        out,
        "\nMTE control writes trapped: {} (SCTLR_EL1 {}, TCR_EL1 {}); kernel symbols: {}",
        r.writes.len(),
        count("SCTLR_EL1"),
        count("TCR_EL1"),
        r.symbols
    );
    let several = several_cpus(&r.writes);
    let mut header = vec!["seq"];
    if several {
        header.push("CPU");
    }
    header.extend([
        "counter (ms)",
        "register",
        "old → new",
        "MTE fields changed",
        "where",
    ]);
    let mut t = crate::output::tables::bordered(header);
    for w in r.writes.iter().take(WRITES_LISTED) {
        let mut row = vec![w.seq.to_string()];
        if several {
            row.push(w.cpu.to_string());
        }
        row.extend([
            format!("{:.3}", w.t_ms),
            w.register.to_string(),
            format!("{:#x} → {:#x}", w.old, w.new),
            if w.changes.is_empty() {
                "(none)".into()
            } else {
                w.changes.join(", ")
            },
            match &w.symbol {
                Some(s) => format!("EL{} {s}", w.el),
                None => format!("EL{} {:#x}", w.el, w.pc),
            },
        ]);
        t.add_row(row);
    }
    let _ = writeln!(out, "{t}");
    if r.writes.len() > WRITES_LISTED {
        let _ = writeln!(
            out,
            "  ... {} more (all of them in --json); by place:",
            r.writes.len() - WRITES_LISTED
        );
        let sites: Vec<crate::output::tables::WriteSite> = r
            .writes
            .iter()
            .map(|w| crate::output::tables::WriteSite {
                register: &w.register,
                changes: &w.changes,
                place: w.symbol.clone().unwrap_or_else(|| format!("{:#x}", w.pc)),
                cpu: w.cpu,
            })
            .collect();
        let _ = writeln!(out, "{}", crate::output::tables::writes_by_site(&sites));
    }
    for w in &r.windows {
        let _ = write!(out, "\n{}", window_text(w, tcma1_set(r)));
    }
    for w in &r.sampled_windows {
        let _ = write!(out, "\n{}", sampled_window_text(w));
    }
    for w in &r.unclosed_windows {
        let _ = writeln!(
            out,
            "\nWindow {}{}\n  NEVER CLOSED: opened{} and not measured (no counts)",
            w.id,
            w.label.as_ref().map_or(String::new(), |l| format!(": {l}")),
            w.opened_ms.map_or(String::new(), |m| format!(
                " at {m:.1} ms of the guest's clock"
            ))
        );
    }
    if r.windows.len() > 1 {
        let _ = write!(
            out,
            "\nWindows side by side\n{}\n",
            compare_windows(&r.windows)
        );
    }
    let _ = writeln!(out, "\nWhat the kernel left set");
    for (name, v) in [
        ("SCTLR_EL1", &r.final_sctlr_el1),
        ("TCR_EL1", &r.final_tcr_el1),
    ] {
        if let Some((value, f)) = v {
            let _ = writeln!(out, "  {name:<9} {:#018x}: {}", bits(value), f.join(" "));
        }
    }
    if let Some((tcr, _)) = &r.final_tcr_el1 {
        let tcr = bits(tcr);
        let tbi1 = tcr & mtex_arch::mte_bits::tcr::TBI1 != 0;
        let tcma1 = tcr & mtex_arch::mte_bits::tcr::TCMA1 != 0;
        if tbi1 && !tcma1 {
            let _ = writeln!(
                out,
                "  TCMA1=0: kernel accesses through 0xF-tagged (match-all) pointers are tag-checked \
                 wherever the CPU checks with TCF=NONE (AmpereOne does)"
            );
        }
    }
    if r.debug_writes > 0 {
        let _ = writeln!(
            out,
            "\n{} debug-register writes kept in the guest's shadow",
            r.debug_writes
        );
    }
    if !r.power_calls().is_empty() {
        // Starting the CPUs is routine: one line, unless a call failed.
        let failed: Vec<&str> = r
            .power_calls()
            .iter()
            .filter(|c| !c.succeeded)
            .map(|c| c.call.as_str())
            .collect();
        let _ = writeln!(
            out,
            "\n{} CPU power calls (CPU_ON, CPU_OFF), {} answered with an error",
            r.power_calls().len(),
            failed.len()
        );
        for c in failed {
            let _ = writeln!(out, "  {c}");
        }
    }
    for c in &r.unknown_calls {
        let _ = writeln!(out, "unknown call answered NOT_SUPPORTED: {c}");
    }
    for n in r.notes() {
        let _ = writeln!(out, "note: {n}");
    }
    if r.problems().is_empty() {
        let _ = writeln!(out, "\nno problems");
    } else {
        let _ = writeln!(out, "\nPROBLEMS ({})", r.problems().len());
        for p in r.problems() {
            let _ = writeln!(out, "  - {p}");
        }
    }
    if !r.console_tail.is_empty() {
        let _ = writeln!(out, "\nLinux's console, last lines");
        for l in &r.console_tail {
            let _ = writeln!(out, "  | {l}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOOTED: &str = "[    0.000000] Booting Linux on physical CPU 0x0\n\
                          mtex-linux: init\n\
                          mtex-linux: workload\n";

    #[test]
    fn a_failed_workload_is_named_with_what_it_printed() {
        // The shell's own message for a command it cannot find, and its status.
        let linux = format!(
            "{BOOTED}/init: line 9: nonexistent-cmd: not found\r\n\
             [   12.345678] a kernel message\n\
             mtex-linux: done 127\n"
        );
        let out = workload_output(&linux);
        assert_eq!(out, ["/init: line 9: nonexistent-cmd: not found"]);
        let (init, status, problems) = workload_problems(&linux, &out);
        assert!(init);
        assert_eq!(status, Some(127));
        assert_eq!(
            problems,
            ["the workload exited with status 127: /init: line 9: nonexistent-cmd: not found"]
        );
        // Success: no problem, the programs' lines kept.
        let linux = format!("{BOOTED}mtex-work: getpid ok: 10 calls\nmtex-linux: done 0\n");
        let out = workload_output(&linux);
        assert_eq!(out, ["mtex-work: getpid ok: 10 calls"]);
        assert!(workload_problems(&linux, &out).2.is_empty());
    }

    #[test]
    fn a_failed_setup_command_is_named_and_no_window_ran() {
        let linux = format!(
            "{BOOTED}can't find the user nobody to switch to\n\
             mtex-linux: setup-failed 2 71\n\
             mtex-linux: done 1\n"
        );
        let out = workload_output(&linux);
        let (_, status, problems) = workload_problems(&linux, &out);
        assert_eq!(status, Some(1));
        assert_eq!(
            problems,
            [
                "set-up command 2 (--setup) exited with status 71 (can't find the user nobody to \
              switch to): no window ran after it"
            ]
        );
    }

    #[test]
    fn each_window_keeps_its_own_output() {
        let linux = format!(
            "{BOOTED}started\n\
             mtex-work: window 1: --window 1 exec memcaslap -x 11\n\
             Run time: 0.0s Ops: 11 TPS: 5102 Net_rate: 0.6M/s\n\
             [   12.345678] a kernel message\n\
             mtex-work: window 2: --window 2 exec memcaslap -x 22\n\
             Run time: 0.0s Ops: 22 TPS: 5102 Net_rate: 0.6M/s\n\
             mtex-linux: done 0\n\
             after\n"
        );
        assert_eq!(
            window_output(&linux, 1),
            ["Run time: 0.0s Ops: 11 TPS: 5102 Net_rate: 0.6M/s"]
        );
        assert_eq!(
            window_output(&linux, 2),
            ["Run time: 0.0s Ops: 22 TPS: 5102 Net_rate: 0.6M/s"]
        );
        assert!(window_output(&linux, 3).is_empty());
    }

    #[test]
    fn a_boot_that_never_reaches_init_keeps_the_console_tail() {
        let mut linux = String::new();
        for i in 0..100 {
            linux.push_str(&format!("[    1.{i:06}] line {i}\n"));
        }
        linux.push_str("Kernel panic - not syncing: System is deadlocked on memory\n");
        let (init, status, problems) = workload_problems(&linux, &workload_output(&linux));
        assert!(!init);
        assert_eq!(status, None);
        assert_eq!(
            problems,
            [
                "Linux did not reach the initramfs's /init (kernel panic - not syncing: System is \
              deadlocked on memory): the last lines of its console follow"
            ]
        );
        let tail = console_tail(&linux);
        assert_eq!(tail.len(), TAIL_LINES);
        assert_eq!(
            tail.last().unwrap(),
            "Kernel panic - not syncing: System is deadlocked on memory"
        );
        assert_eq!(tail[0], "[    1.000076] line 76");
    }

    fn kernel() -> Kernel {
        let package = crate::debian::kernel::Unpacked {
            name: "linux-image-test-arm64".into(),
            version: "1".into(),
            root: "/nonexistent".into(),
        };
        Kernel {
            package,
            release: "test".into(),
            image: "/nonexistent/Image".into(),
            config: "/nonexistent/config".into(),
            sha256: "0".repeat(64),
            append: Vec::new(),
        }
    }

    /// The hypervisor's console for `records`, then a summary of a clean power-off.
    /// The report of a run whose console holds `records`, Linux's console `linux` and the
    /// kernel's symbols `kallsyms`, under -icount.
    fn analysed(records: Vec<mtex_abi::Record>, linux: &str, kallsyms: &str) -> Results {
        analysed_with(records, linux, kallsyms, Vec::new())
    }

    /// As `analysed`, with the notes preparing the guest gave.
    fn analysed_with(
        records: Vec<mtex_abi::Record>,
        linux: &str,
        kallsyms: &str,
        notes: Vec<String>,
    ) -> Results {
        document(
            &kernel(),
            &console(records),
            linux,
            (kallsyms, Symbols::default()),
            Setup {
                icount: true,
                cpus: 1,
                cpu_model: crate::qemu::CpuModel::MaxWithoutSve,
                tagged_heap: None,
                operations: Vec::new(),
                notes,
            },
        )
    }

    fn console(records: Vec<mtex_abi::Record>) -> Console {
        use mtex_abi::report::{ExitReason, Summary};
        let n = records.len() as u32;
        let mut text = String::new();
        let summary = mtex_abi::Record::Summary(Summary {
            records: n,
            exit: ExitReason::GuestExit { status: 0 },
            ts: 0,
            exits: 0,
        });
        for (seq, r) in records.iter().chain([&summary]).enumerate() {
            let mut buf = [0u8; mtex_abi::frame::MAX_TEXT];
            text.push_str(mtex_abi::frame::encode(seq as u32, r, &mut buf).unwrap());
        }
        Console {
            bytes: text.clone().into_bytes(),
            text,
            status: Some(0),
            timed_out: false,
            killed: None,
            wall: std::time::Duration::ZERO,
            stderr: String::new(),
            oracle: None,
            oracle_shares: false,
        }
    }

    fn window_records(id: u32, guest_clock: (u64, u64), closed: bool) -> Vec<mtex_abi::Record> {
        use mtex_abi::Record;
        use mtex_abi::report::{
            GuestState, PhaseBegin, PhaseClock, PhaseEnd, PhaseStats, PhaseTrace,
        };
        let counts = mtex_trace::counts::TraceCounts {
            instructions_el0: 2_600_000,
            ..Default::default()
        };
        let mut v = vec![
            Record::PhaseBegin(PhaseBegin {
                id,
                name: mtex_abi::ShortStr::truncated(&format!("window {id}")),
                params: None,
                // The physical counter runs on through the hypervisor's stepping.
                ts: 1_000,
                at: GuestState::default(),
            }),
            Record::PhaseClock(PhaseClock {
                id,
                end: false,
                guest_clock: guest_clock.0,
            }),
            Record::PhaseTrace(PhaseTrace { id, counts }),
        ];
        if closed {
            v.push(Record::PhaseClock(PhaseClock {
                id,
                end: true,
                guest_clock: guest_clock.1,
            }));
            v.push(Record::PhaseEnd(PhaseEnd {
                id,
                ts: 900_000,
                at: GuestState::default(),
                stats: PhaseStats::default(),
            }));
        }
        v
    }

    /// Opened on one CPU and closed on another whose counter was behind: no length is made
    /// up (it was shown as 0.000 ms), and the line says why there is none.
    #[test]
    fn a_window_whose_close_reads_behind_its_open_has_no_length() {
        let records = window_records(1, (130, 100), true);
        let linux = format!("{BOOTED}mtex-linux: done 0\n");
        let doc = analysed(records, &linux, "");
        let r = LinuxView::of(&doc).expect("a Linux document");
        assert_eq!(r.windows[0].guest_clock_ms, None);
        assert_eq!(r.windows[0].opened_ms, Some(130_000.0));
        let text = window_text(&r.windows[0], false);
        assert!(
            text.contains("its length on that clock is not known"),
            "{text}"
        );
    }

    /// Two packages with the same file: which one was kept is in the report, not only on the
    /// terminal.
    #[test]
    fn the_packages_collisions_are_notes_of_the_report() {
        let records = window_records(1, (100, 130), true);
        let linux = format!("{BOOTED}mtex-linux: done 0\n");
        let said = "user space: usr/bin/x is in both a and b: b's is kept".to_string();
        let doc = analysed_with(records, &linux, "", vec![said.clone()]);
        let r = LinuxView::of(&doc).expect("a Linux document");
        assert!(r.notes().contains(&said), "{:?}", r.notes());
    }

    #[test]
    fn a_window_takes_the_guests_clock_and_one_never_closed_shows_no_counts() {
        let mut records = window_records(1, (100, 130), true);
        records.extend(window_records(2, (200, 0), false));
        let linux = format!("{BOOTED}mtex-work: window 2: --window 2 spin\nmtex-linux: done 0\n");
        let doc = analysed(records, &linux, "");
        let r = LinuxView::of(&doc).expect("a Linux document");
        // No boot record: the counter's frequency is taken as 1 Hz. The guest's clock ran 30
        // ticks in window 1 (the physical counter 899,000).
        assert_eq!(r.windows.len(), 1, "{:?}", r.windows);
        assert_eq!(r.windows[0].guest_clock_ms, Some(30_000.0));
        assert_eq!(r.windows[0].opened_ms, Some(100_000.0));
        assert_eq!(r.windows[0].instructions_el0, 2_600_000);
        // Window 2 never closed: listed without counts, a problem that says so.
        assert_eq!(r.unclosed_windows.len(), 1);
        assert_eq!(r.unclosed_windows[0].id, 2);
        assert!(
            r.problems().iter().any(|p| p
                .starts_with("window 2 (mtex-work --window 2 spin) was opened and never closed")),
            "{:?}",
            r.problems()
        );
        assert!(
            !r.problems().iter().any(|p| p.contains("partial")),
            "{:?}",
            r.problems()
        );
        let text = render(&r);
        assert!(text.contains("NEVER CLOSED"), "{text}");
        assert_eq!(text.matches("2,600,000").count(), 1, "{text}");
        assert!(text.contains("open for 30000.000 ms of it"), "{text}");
        let json = serde_json::to_value(&doc).unwrap();
        assert!(
            json["linux"]["unclosed_windows"][0]
                .get("instructions_el0")
                .is_none()
        );
    }

    #[test]
    fn a_profiled_window_names_its_kernel_functions() {
        use mtex_abi::Record;
        use mtex_abi::report::{PcProfile, PcProfileEnd};
        use mtex_trace::profile::PcEntry;
        let entries = [
            PcEntry {
                pc: 0xffff_8000_8001_0010,
                el: 1,
                insns: 9,
                rd: [5, 5, 0, 1, 0],
                ..PcEntry::default()
            },
            PcEntry {
                pc: 0x40_0000,
                el: 0,
                insns: 2_600_000,
                ..PcEntry::default()
            },
        ];
        let mut records = window_records(1, (100, 130), true);
        for r in &mut records {
            if let Record::PhaseTrace(t) = r {
                t.counts = crate::profile::sum(&entries);
            }
        }
        let end = records.len() - 2;
        let profile = entries.iter().map(|&entry| {
            Record::PcProfile(PcProfile {
                id: 1,
                other: false,
                entry,
            })
        });
        let closing = Record::PcProfileEnd(PcProfileEnd {
            id: 1,
            records: 2,
            ..PcProfileEnd::default()
        });
        records.splice(end..end, profile.chain([closing]));
        let linux = format!("{BOOTED}mtex-linux: done 0\n");
        let kallsyms = "ffff800080010000 T do_sys_openat2\nffff800080010100 T other\n";
        let doc = analysed(records, &linux, kallsyms);
        let r = LinuxView::of(&doc).expect("a Linux document");
        assert!(
            !r.problems().iter().any(|p| p.contains("profile")),
            "{:?}",
            r.problems()
        );
        let rows = &r.windows[0].functions;
        assert_eq!(rows.len(), 2, "{rows:?}");
        assert_eq!(rows[1].name, "do_sys_openat2");
        assert_eq!(rows[1].get("mem_access_checked_rd:k"), 5);
        let text = render(&r);
        assert!(text.contains("Where the checks are"), "{text}");
        assert!(
            text.contains("                 5  100.0%  do_sys_openat2"),
            "{text}"
        );
    }
}
