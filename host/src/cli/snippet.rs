//! `mtex snippet FILE.S`: assembles a user's AArch64 code on the host (binutils), hands the
//! bytes to the machine as data (a file QEMU gives it through fw_cfg, which the hypervisor
//! reads and passes the guest as `mtex.snippet=<hex>`: the images are built once, never per
//! snippet, and the code is never on QEMU's command line, which every local user can read)
//! and runs them as one traced phase in a fixed environment (guest/src/snippet.rs), then
//! prints the phase's counts in every view.
//!
//! The environment, as the snippet finds it on every call (docs/snippets.md, "Environment"):
//!
//! | register | EL1 (default) | EL0 (`--el 0`) |
//! | --- | --- | --- |
//! | x0 | tagged buffer: 4096 bytes, page-aligned, allocation tag 3 throughout, pointer tag 3 | the user buffer (= x2) |
//! | x1 | 4096 (x0's size) | 2048 |
//! | x2 | user buffer: 2048 bytes, EL0 read/write, allocation tag 3, pointer tag 3 (LDTR/STTR) | the same |
//! | x3 | x0's buffer through the upper half (TTBR1), pointer tag 3 (`0xf3ff_ff80_…`) | the same value; EL1-only memory |
//! | x4 | an untagged page: 4096 bytes, Normal memory without the Tagged attribute, pointer tag 0 | the same value; EL1-only memory |
//! | SP | top of a 4096-byte stack, allocation tag 0 | top of a 2048-byte stack above the user buffer, tag 0 |
//! | x30 | the return address (end with `ret`) | the same |
//!
//! The snippet may clobber x0–x18, x30 and the flags; x19–x29 and SP must be as it found them.

use crate::images::{self, Images};
use crate::model::report::Report;
use crate::model::results::Results;
use crate::qemu::{self, RunConfig};
use anyhow::{Context, Result};
use comfy_table::CellAlignment;
use mtex_abi::options::SnippetOptions;
use mtex_trace::counts::{ByEl, TraceCounts};
use object::{Object, ObjectSection, ObjectSymbol};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// The assembler and the architecture it assembles for: MTE and everything up to Armv8.5
/// (LSE, RCpc, pointer authentication). A snippet may add more with `.arch_extension`.
pub const ASSEMBLER: &str = "aarch64-linux-gnu-as";
pub const MARCH: &str = "-march=armv8.5-a+memtag";

/// The phase's name in the report.
pub const PHASE: &str = "snippet";

/// Instructions the harness adds to the phase (guest/src/snippet.rs): at EL1, five MOVs, BLR,
/// the three of the PHASE_ITERATION call that has the hypervisor count the iteration, SUBS
/// and B.NE per iteration, then the MOV and four instructions that close the phase.
pub const HARNESS_EL1_PER_ITER: u64 = 11;
pub const HARNESS_EL1_FIXED: u64 = 5;
/// At EL0: five MOVs, BLR, the SVC to the vector that counts the iteration, SUBS and B.NE per
/// iteration, and the SVC back.
pub const HARNESS_EL0_PER_ITER: u64 = 9;
pub const HARNESS_EL0_FIXED: u64 = 1;
/// At EL1 per iteration of an EL0 snippet: the lower-EL vector's 10 that tell the
/// iteration's SVC, its PHASE_ITERATION call (3) and the ERET back.
pub const HARNESS_EL0_AT_EL1_PER_ITER: u64 = 14;
/// At EL1 around an EL0 snippet: the ERET, the lower-EL vector (11), `el0_return` (12: its 7
/// loads run with PSTATE.TCO set by the exception entry, so they are never checked), and
/// the 5 that close the phase.
pub const HARNESS_EL0_AT_EL1: u64 = 29;
/// The loads `el0_return` makes at EL1 in an EL0 run (in *accesses*, never checked).
pub const HARNESS_EL0_LOADS_AT_EL1: u64 = 7;
/// After an exception the harness's vector table ends the phase: 4 instructions (the
/// PHASE_END call) from an exception at EL1; from EL0, 8 (the first 4 tell the harness's
/// SVC from the rest). The guest's exception handler runs after the phase.
pub const VECTOR_TO_PHASE_END: u64 = 4;
pub const VECTOR_TO_PHASE_END_FROM_EL0: u64 = 8;
/// The harness's instructions in the iteration an exception cut short: the five MOVs and
/// the BLR.
pub const HARNESS_BEFORE_CALL: u64 = 6;

/// SCTLR_EL1.TCF / TCF0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Tcf {
    None,
    Sync,
    Async,
    Asymm,
}

impl Tcf {
    fn name(self) -> &'static str {
        match self {
            Tcf::None => "none",
            Tcf::Sync => "sync",
            Tcf::Async => "async",
            Tcf::Asymm => "asymm",
        }
    }
}

/// The controls and repetitions a snippet runs under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Env {
    pub tcf: Tcf,
    pub tcf0: Tcf,
    pub tcma1: bool,
    pub el: u8,
    pub iters: u64,
}

impl Default for Env {
    fn default() -> Self {
        Env {
            tcf: Tcf::Sync,
            tcf0: Tcf::Sync,
            tcma1: false,
            el: 1,
            iters: 1,
        }
    }
}

/// Its command-line arguments.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The AArch64 assembly file (GNU as syntax). The code starts at its first instruction
    /// and ends by returning (`ret`); see docs/snippets.md for the registers it finds.
    pub file: PathBuf,
    /// SCTLR_EL1.TCF: what a failed check at EL1 does (the architectural count does not
    /// depend on it; the elided one does).
    #[arg(long, value_enum, default_value = "sync")]
    pub tcf: Tcf,
    /// SCTLR_EL1.TCF0: what a failed check at EL0, or by LDTR/STTR, does.
    #[arg(long, value_enum, default_value = "sync")]
    pub tcf0: Tcf,
    /// Set TCR_EL1.TCMA1: upper-half pointers with tag 0xF are match-all (unchecked).
    #[arg(long)]
    pub tcma1: bool,
    /// The exception level the snippet runs at.
    #[arg(long, default_value_t = 1, allow_negative_numbers = true,
        value_parser = crate::input::number_in(0u8, 1))]
    pub el: u8,
    /// Run it this many times in the one phase.
    #[arg(long, default_value_t = 1, allow_negative_numbers = true,
        value_parser = crate::input::number_in(1u64, SnippetOptions::MAX_ITERS))]
    pub iters: u64,
    /// The guest's watchdog budget in milliseconds of guest time (default 10000).
    #[arg(long, allow_negative_numbers = true,
        value_parser = crate::input::number_in(1u64, 3_600_000))]
    pub watchdog_ms: Option<u64>,
    /// Also write the report as JSON (report.json schema).
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Print the raw console too.
    #[arg(long)]
    pub raw: bool,
}

/// Why a snippet was not run.
#[derive(Debug)]
pub enum AsmError {
    /// The assembler refused it: its own message (`FILE:LINE: Error: ...`).
    Assembler(String),
    /// It assembled, but cannot be loaded as it is (relocations, size, other sections).
    Refused(String),
}

impl std::fmt::Display for AsmError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AsmError::Assembler(m) => write!(f, "{}", m.trim_end()),
            AsmError::Refused(m) => write!(f, "{m}"),
        }
    }
}

/// Assembles `file`; returns the bytes of its `.text`, with the assembler's warnings, if any.
/// A missing assembler is an `Err` of the outer result.
pub fn assemble(file: &Path) -> Result<std::result::Result<(Vec<u8>, String), AsmError>> {
    let dir = qemu::TempDir::new("snippet")?;
    let obj = dir.path().join("snippet.o");
    let out = Command::new(ASSEMBLER)
        .arg(MARCH)
        .arg("-o")
        .arg(&obj)
        .arg(source_arg(file))
        .output()
        .with_context(|| {
            format!("running {ASSEMBLER} (package binutils-aarch64-linux-gnu: scripts/ensure-deps)")
        })?;
    let messages = String::from_utf8_lossy(&out.stderr).into_owned();
    if !out.status.success() {
        return Ok(Err(AsmError::Assembler(messages)));
    }
    let elf = std::fs::read(&obj).with_context(|| format!("reading {}", obj.display()))?;
    Ok(text_of(&elf).map(|code| (code, messages)))
}

/// `file` as the assembler is given it: never as an option. A relative path that starts
/// with `-` (`-o/elsewhere`, `-`) would be read as one — an output file, standard input — so
/// a relative path is given as `./PATH`.
pub fn source_arg(file: &Path) -> PathBuf {
    if file.is_absolute() {
        file.to_path_buf()
    } else {
        Path::new(".").join(file)
    }
}

/// [`assemble`] of source text (written to a temporary `snippet.S`).
pub fn assemble_source(source: &str) -> Result<std::result::Result<Vec<u8>, AsmError>> {
    let dir = qemu::TempDir::new("snippet-src")?;
    let file = dir.path().join("snippet.S");
    std::fs::write(&file, source)?;
    Ok(assemble(&file)?.map(|(code, _)| code))
}

/// ELF section flag: occupies memory at run time.
const SHF_ALLOC: u64 = 2;

/// The loadable bytes of an assembled object: its `.text`, self-contained.
pub fn text_of(elf: &[u8]) -> std::result::Result<Vec<u8>, AsmError> {
    let refuse = |m: String| Err(AsmError::Refused(m));
    let file = match object::File::parse(elf) {
        Ok(f) => f,
        Err(e) => return refuse(format!("the assembler's output is not an ELF object: {e}")),
    };
    let undefined: Vec<_> = file
        .symbols()
        .filter(|s| s.is_undefined() && !s.name().unwrap_or("").is_empty())
        .map(|s| s.name().unwrap_or("?").to_string())
        .collect();
    if !undefined.is_empty() {
        return refuse(format!(
            "the snippet refers to symbols it does not define ({}): it runs alone, with no \
             library to link against",
            undefined.join(", ")
        ));
    }
    let mut text = None;
    for s in file.sections() {
        let name = s.name().unwrap_or("?");
        let alloc = match s.flags() {
            object::SectionFlags::Elf { sh_flags } => sh_flags & SHF_ALLOC != 0,
            _ => false,
        };
        if name == ".text" {
            text = Some(s);
        } else if alloc && s.size() > 0 {
            return refuse(format!(
                "section {name} ({} bytes): only .text is loaded; put constants in .text \
                 (or use the buffers the snippet is given)",
                s.size()
            ));
        }
    }
    let Some(text) = text else {
        return refuse("no .text section".into());
    };
    if let Some((at, r)) = text.relocations().next() {
        let target = match r.target() {
            object::RelocationTarget::Symbol(i) => file
                .symbol_by_index(i)
                .ok()
                .and_then(|s| s.name().ok().map(str::to_string))
                .unwrap_or_else(|| "?".into()),
            _ => "?".into(),
        };
        return refuse(format!(
            "relocation at .text+{at:#x} against `{target}`: the snippet must be \
             self-contained (no references outside its own .text, which is loaded at an \
             address of the guest's choosing)"
        ));
    }
    let code = match text.data() {
        Ok(d) => d.to_vec(),
        Err(e) => return refuse(format!("reading .text: {e}")),
    };
    if code.is_empty() {
        return refuse("the snippet is empty: it needs at least a `ret`".into());
    }
    if code.len() % 4 != 0 {
        return refuse(format!(
            ".text is {} bytes, not whole instructions",
            code.len()
        ));
    }
    if code.len() > SnippetOptions::MAX_BYTES {
        return refuse(format!(
            "the snippet is {} bytes; at most {} (two pages) are loaded",
            code.len(),
            SnippetOptions::MAX_BYTES
        ));
    }
    Ok(code)
}

/// The `KEY=VALUE` options that carry `env` to the guest. The code itself travels apart
/// ([`run_config`]): as `mtex.snippet=HEX` it would be on QEMU's command line, which every
/// user of the host can read for the run's length.
pub fn options(env: &Env) -> Vec<String> {
    vec![
        format!("snippet_tcf={}", env.tcf.name()),
        format!("snippet_tcf0={}", env.tcf0.name()),
        format!("snippet_tcma1={}", u8::from(env.tcma1)),
        format!("snippet_el={}", env.el),
        format!("snippet_iters={}", env.iters),
    ]
}

/// The run's command line, checked as the guest will read it — the code included as
/// `mtex.snippet=HEX`, which the hypervisor adds from fw_cfg — and returned without the
/// code.
pub fn checked_cmdline(code: &[u8], env: &Env, extra: &[String]) -> Result<String> {
    let hex: String = code.iter().map(|b| format!("{b:02x}")).collect();
    let mut opts = vec![format!("snippet={hex}")];
    opts.extend(options(env));
    opts.extend_from_slice(extra);
    let line = qemu::cmdline("snippet", &opts)?;
    Ok(line
        .split_whitespace()
        .filter(|w| !w.starts_with("mtex.snippet="))
        .collect::<Vec<_>>()
        .join(" "))
}

/// The QEMU settings that run `code` under `env`: the code in `dir/snippet.bin` (made new,
/// mode 0600), handed to the machine as fw_cfg's `opt/mtex/snippet`, which the hypervisor
/// reads at boot; nothing of it on QEMU's command line.
pub fn run_config(code: &[u8], env: &Env, extra: &[String], dir: &Path) -> Result<RunConfig> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt;
    let line = checked_cmdline(code, env, extra)?;
    let file = dir.join("snippet.bin");
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&file)
        .and_then(|mut f| f.write_all(code))
        .with_context(|| format!("writing {}", file.display()))?;
    let mut cfg = RunConfig::with_default_limits(line, true);
    cfg.fw_cfg.push((mtex_platform::fw_cfg::SNIPPET_FILE, file));
    Ok(cfg)
}

/// Runs `code` under `env` (under `-icount shift=0`) and returns the report.
pub fn run_code(images: &Images, code: &[u8], env: &Env) -> Result<(Report, qemu::Console)> {
    run_with(images, code, env, &[])
}

/// [`run_code`] with more `mtex.` options for the guest (`step=plain`...).
pub fn run_with(
    images: &Images,
    code: &[u8],
    env: &Env,
    extra: &[String],
) -> Result<(Report, qemu::Console)> {
    // The code's file lives as long as the run (QEMU reads it at start).
    let dir = qemu::TempDir::new("snippet-run")?;
    let cfg = run_config(code, env, extra, dir.path())?;
    let console = qemu::run(images, &cfg)?;
    Ok((console.report(), console))
}

/// Instructions the harness adds at (EL1, EL0).
pub fn harness_instructions(env: &Env) -> (u64, u64) {
    if env.el == 0 {
        (
            HARNESS_EL0_AT_EL1_PER_ITER * env.iters + HARNESS_EL0_AT_EL1,
            HARNESS_EL0_PER_ITER * env.iters + HARNESS_EL0_FIXED,
        )
    } else {
        (HARNESS_EL1_PER_ITER * env.iters + HARNESS_EL1_FIXED, 0)
    }
}

/// The status the guest's fault report exits with (`0x100 | ESR_EL1.EC`): the snippet took
/// an exception, and the harness's vectors ended the phase there.
fn exception_class(r: &Report) -> Option<u64> {
    match r.summary?.exit {
        mtex_abi::report::ExitReason::GuestExit { status } if status >> 6 == 0x100 >> 6 => {
            Some(status & 0x3f)
        }
        _ => None,
    }
}

/// Instructions the harness adds at (EL1, EL0) when an exception ended the phase after
/// `done` whole iterations (the hypervisor's count; with one iteration, 0): not known
/// without either.
pub fn harness_instructions_to_exception(env: &Env, done: Option<u64>) -> Option<(u64, u64)> {
    let k = done.or((env.iters == 1).then_some(0))?;
    Some(if env.el == 0 {
        (
            1 + HARNESS_EL0_AT_EL1_PER_ITER * k + VECTOR_TO_PHASE_END_FROM_EL0,
            HARNESS_EL0_PER_ITER * k + HARNESS_BEFORE_CALL,
        )
    } else {
        (
            HARNESS_EL1_PER_ITER * k + HARNESS_BEFORE_CALL + VECTOR_TO_PHASE_END,
            0,
        )
    })
}

/// What is wrong with the iterations of the snippet's phase, if anything: the hypervisor
/// counted them at the harness's own call after each (`PHASE_ITERATION`), and they must be
/// those asked for. (A count that is not what the harness said is a problem of the report
/// already.)
pub fn iterations_problem(r: &Report, env: &Env) -> Option<String> {
    let p = r.phase(PHASE)?;
    match p.iterations {
        None if p.end.is_some() => Some(
            "the hypervisor sent no count of the snippet's iterations: the phase was not the \
             harness's guarded one"
                .into(),
        ),
        None => None,
        Some(it) if it.wanted != env.iters => Some(format!(
            "the harness said it makes {} iterations, not the {} asked for",
            it.wanted, env.iters
        )),
        Some(_) => None,
    }
}

/// What is wrong with the snippet's phase as the report has it, if anything: it must be
/// there once, and have ended.
pub fn phase_problem(r: &Report) -> Option<String> {
    let n = r.phases.iter().filter(|p| p.name == PHASE).count();
    match (n, r.phase(PHASE)) {
        (0, _) | (_, None) => Some("the snippet's phase never began".into()),
        (1, Some(p)) if p.end.is_none() => Some(
            "the snippet's phase never ended: its counts are up to where the run stopped".into(),
        ),
        (1, Some(_)) => None,
        (n, _) => Some(format!(
            "{n} phases named {PHASE}: the harness opens one; its counts are not the snippet's"
        )),
    }
}

/// The snippet's phase in every view: one table, then what else the trace counted.
pub fn summary(r: &Report, env: &Env, name: &str, code_len: usize) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Snippet {name}: {} instructions ({code_len} bytes) at EL{}, {} iteration{}\n  \
         TCF {}, TCF0 {}, TCMA1 {}",
        code_len / 4,
        env.el,
        env.iters,
        if env.iters == 1 { "" } else { "s" },
        env.tcf.name(),
        env.tcf0.name(),
        if env.tcma1 { "on" } else { "off" },
    );
    let Some(phase) = r.phase(PHASE) else {
        let _ = writeln!(out, "  the snippet's phase never began");
        return out;
    };
    let Some(t) = phase.trace else {
        let _ = writeln!(out, "  the snippet's phase has no trace counts");
        return out;
    };
    if phase.stats.is_none() {
        let _ = writeln!(
            out,
            "  (partial: the phase never ended; counts up to where the run stopped)"
        );
    }
    if let Some(it) = phase.iterations {
        let _ = writeln!(
            out,
            "  iterations: {} of {}, counted by the hypervisor",
            it.counted, it.wanted
        );
    }
    out.push_str(&views_table(&t));
    out.push('\n');
    let u = t.uaccess;
    let _ = writeln!(
        out,
        "  uaccess (LDTR/STTR at EL1, EL0's controls, under :k): {} rd / {} wr\n    \
         checked: architectural {} / {}, TCF-elided {} / {}",
        u.rd, u.wr, u.arch_rd, u.arch_wr, u.elided_rd, u.elided_wr
    );
    let (i1, i0) = (t.instructions_el1, t.instructions_el0);
    match exception_class(r) {
        _ if phase.end.is_none() => {
            let _ = writeln!(
                out,
                "  instructions: EL1 {i1} / EL0 {i0}: the harness's and the snippet's, and \
                 whatever ran until the run stopped (not told apart: the phase never ended)"
            );
        }
        None => {
            // The iterations the hypervisor counted are those the harness made.
            let made = Env {
                iters: phase.iterations.map_or(env.iters, |i| i.counted),
                ..*env
            };
            let (h1, h0) = harness_instructions(&made);
            let _ = writeln!(
                out,
                "  instructions: EL1 {i1} / EL0 {i0} (the harness's: {h1} / {h0}; the \
                 snippet's: {} / {})",
                i1.saturating_sub(h1),
                i0.saturating_sub(h0),
            );
        }
        Some(ec) => {
            let vector = if env.el == 0 {
                VECTOR_TO_PHASE_END_FROM_EL0
            } else {
                VECTOR_TO_PHASE_END
            };
            let _ = writeln!(
                out,
                "  instructions: EL1 {i1} / EL0 {i0}, up to the exception (EC {ec:#x}) that \
                 ended the phase\n    (the vector's {vector} that end it are in; the guest's \
                 exception handler after it is not)"
            );
            match harness_instructions_to_exception(env, phase.iterations.map(|i| i.counted)) {
                Some((h1, h0)) => {
                    let _ = writeln!(
                        out,
                        "    the harness's: {h1} / {h0} (with the vector's); the snippet's: {} / {}",
                        i1.saturating_sub(h1),
                        i0.saturating_sub(h0),
                    );
                }
                None => {
                    let _ = writeln!(
                        out,
                        "    the harness's: {HARNESS_BEFORE_CALL} in the iteration cut short, its \
                         whole iterations before it, and the vector's; how many iterations \
                         there were is not known, so the snippet's share is not shown"
                    );
                }
            }
        }
    }
    if env.el == 0 {
        let _ = writeln!(
            out,
            "  (at EL0 the harness's {HARNESS_EL0_LOADS_AT_EL1} restoring loads at EL1 are in \
             `all accesses rd:k`,\n   never checked)"
        );
    }
    let _ = writeln!(
        out,
        "  tag-check faults {}; MSR TCO {} (TCO changes {}); tag stores {} ({} granules)\n  \
         TFSR reads {}; DSB / DMB / ISB {} / {} / {}; kernel entries {}",
        t.tag_check_faults,
        t.tco_writes,
        t.tco_changes,
        t.tag_store_insns,
        t.granules_tagged,
        t.tfsr_reads,
        t.dsb,
        t.dmb,
        t.isb,
        t.entries.total(),
    );
    if t.unknown_mem > 0 {
        let _ = writeln!(
            out,
            "  {} load/stores not modelled (not judged)",
            t.unknown_mem
        );
    }
    out
}

fn views_table(t: &TraceCounts) -> String {
    let mut table = crate::output::tables::bordered(vec![
        "view",
        "checked_rd:k",
        "checked_wr:k",
        "checked_rd:u",
        "checked_wr:u",
    ]);
    let rows: [(&str, ByEl); 5] = [
        ("architectural (AmpereOne-like)", t.architectural),
        ("TCF-elided (Arm cores, QEMU)", t.tcf_elided),
        ("if TCR_EL1.TCMA1 were set", t.if_tcma1),
        ("if the kernel left TCO set", t.if_kernel_tco),
        ("all accesses, checked or not", t.accesses),
    ];
    for (name, c) in rows {
        table.add_row(vec![
            name.to_string(),
            c.rd_k.to_string(),
            c.wr_k.to_string(),
            c.rd_u.to_string(),
            c.wr_u.to_string(),
        ]);
    }
    for col in 1..5 {
        if let Some(c) = table.column_mut(col) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    table.to_string()
}

/// Runs it.
pub fn run(args: Args) -> Result<ExitCode> {
    let env = Env {
        tcf: args.tcf,
        tcf0: args.tcf0,
        tcma1: args.tcma1,
        el: args.el,
        iters: args.iters,
    };
    // The assembler reads it: a regular file of bounded size (a FIFO would block it, a
    // device feed it without end).
    crate::input::check(&args.file, "snippet source", crate::input::SOURCE_LIMIT)?;
    let (code, warnings) = match assemble(&args.file)? {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            if matches!(e, AsmError::Refused(_)) {
                eprintln!("mtex snippet: {} not run", args.file.display());
            }
            return Ok(ExitCode::from(2));
        }
    };
    eprint!("{warnings}");
    if !code
        .chunks(4)
        .any(|w| w == 0xd65f_03c0u32.to_le_bytes().as_slice())
    {
        eprintln!(
            "mtex snippet: note: no `ret` in {}: it must return to the harness (x30)",
            args.file.display()
        );
    }
    let mut extra = Vec::new();
    if let Some(ms) = args.watchdog_ms {
        extra.push(format!("watchdog_ms={ms}"));
    }
    // The command line is checked before anything is built.
    checked_cmdline(&code, &env, &extra)?;
    let mut json = crate::output::json::JsonOut::open(args.json.as_deref())?;
    let images = images::build()?;
    let (r, console) = run_with(&images, &code, &env, &extra)?;
    if args.raw {
        println!("{}", console.text);
    }
    let mut doc = Results::single(&r);
    doc.symbolize(&crate::symbols::Symbols::load(&images.guest_elf));
    print!("{}", crate::output::full::render(&doc));
    let name = args.file.file_name().map_or_else(
        || args.file.display().to_string(),
        |n| n.to_string_lossy().into(),
    );
    print!("\n{}", summary(&r, &env, &name, code.len()));
    // What the hypervisor's guard refused is among the report's problems already; the
    // phase's own shape is checked here too, so that no count is taken for the snippet's
    // whole run unless the harness opened and closed its one phase.
    let problem = phase_problem(&r).or_else(|| iterations_problem(&r, &env));
    if let Some(p) = &problem {
        println!("PROBLEM: {p}");
    }
    if let Some(json) = &mut json {
        json.write(&doc)?;
    }
    Ok(if r.succeeded() && problem.is_none() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// The code travels in a file of the run's own directory (mode 0600), handed to QEMU by
    /// name: no byte of it is on QEMU's command line, which `ps` shows every user.
    #[test]
    fn the_qemu_command_line_carries_no_snippet_bytes() {
        // A `.incbin` of a file only its owner may read: these bytes must stay theirs.
        let code: Vec<u8> = b"\x5f\x24\x03\xd5secret-bytes-012\xc0\x03\x5f\xd6".to_vec();
        let dir = qemu::TempDir::new("snippet-cmdline-test").unwrap();
        let env = Env::default();
        let cfg = run_config(&code, &env, &["step=plain".into()], dir.path()).unwrap();
        let images = Images {
            hyp_elf: "hyp.elf".into(),
            hyp_image: "hyp.bin".into(),
            guest_image: "guest.bin".into(),
            guest_elf: "guest.elf".into(),
        };
        let cmd = qemu::command(&images, &cfg);
        let args: Vec<String> = cmd
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let line = args.join(" ");
        let hex: String = code.iter().map(|b| format!("{b:02x}")).collect();
        assert!(!line.contains(&hex), "{line}");
        assert!(!line.contains(&hex[..16]), "{line}");
        assert!(!line.contains("mtex.snippet="), "{line}");
        assert!(!line.contains("secret-bytes"), "{line}");
        // The environment is still on it, and the code's file by name.
        assert!(
            line.contains("mtex.guest=snippet mtex.snippet_tcf=sync"),
            "{line}"
        );
        assert!(line.contains("mtex.step=plain"), "{line}");
        let file = dir.path().join("snippet.bin");
        let fw = format!("name=opt/mtex/snippet,file={}", file.display());
        assert!(
            args.windows(2).any(|w| w[0] == "-fw_cfg" && w[1] == fw),
            "{line}"
        );
        assert_eq!(std::fs::read(&file).unwrap(), code);
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        // A file already there (another user's) is never written through.
        assert!(run_config(&code, &env, &[], dir.path()).is_err());
    }

    #[test]
    fn a_relative_source_path_is_never_an_option() {
        assert_eq!(
            source_arg(Path::new("-o/abs/path")),
            Path::new("./-o/abs/path")
        );
        assert_eq!(source_arg(Path::new("-")), Path::new("./-"));
        assert_eq!(source_arg(Path::new("/a/b.S")), Path::new("/a/b.S"));
    }
}
