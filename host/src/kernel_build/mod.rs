//! `mtex kernel build`: an arm64 Image for Linux mode, built from Debian's `linux-source-X`
//! or a tree of the user's, with a configuration made for mtex's machine (`mtex.config`),
//! optionally KASAN in its hardware tag-based mode, and the user's patches applied in order.
//!
//! Every input (the source and its version, the configuration lines, each patch's bytes, the
//! compiler's version) goes into one hash that names the output directory under
//! `target/kernels/`: asking again for the same kernel is answered from there without running
//! make. Compiles go through ccache when it is installed (its cache is outside the clone), so
//! that a kernel differing by one patch recompiles only what the patch touches.

pub mod config;
pub mod progress;
pub mod source;

use anyhow::{Context, Result, bail};
use progress::{Progress, Stage};
use serde::{Deserialize, Serialize};
use sha2::Digest;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

/// How built kernels are described beside their Image; Linux mode reads it.
pub const KERNEL_JSON: &str = "mtex-kernel.json";

/// Bumped when the build recipe changes what the same inputs produce.
const RECIPE: &str = "mtex-kernel-build 1";

/// `mtex kernel build`'s arguments.
#[derive(clap::Args, Clone, Debug, PartialEq, Eq)]
pub struct Args {
    /// The kernel version of Debian's source package to build (linux-source-VERSION:
    /// 6.12 from bookworm, 7.x from Debian's newer suites), fetched with apt.
    #[arg(long, default_value = "6.12", conflicts_with = "tree")]
    pub source: String,
    /// Build this Linux source tree instead (out of tree: the tree is not written to).
    #[arg(long)]
    pub tree: Option<PathBuf>,
    /// KASAN in its hardware tag-based mode (MTE), in this mode: booted with
    /// kasan.mode=MODE.
    #[arg(long, value_parser = ["sync", "async", "asymm"])]
    pub kasan: Option<String>,
    /// A patch to apply (`patch -p1`, as `git format-patch` writes); give it once per patch,
    /// in the order they apply. Only with a Debian source (commit to your tree instead).
    #[arg(long = "patch", value_name = "FILE", conflicts_with = "tree")]
    pub patches: Vec<PathBuf>,
    /// Start from Debian's own configuration of this kernel (linux-config-VERSION at the
    /// source's version, the flavour of linux-image-*-arm64) rather than mtex's small one:
    /// what Debian builds as a module is left out, debug information is off, and mtex's
    /// options are added and checked as always.
    #[arg(long, conflicts_with = "tree")]
    pub debian_config: bool,
    /// A configuration fragment of your own (CONFIG_X=value lines), merged last.
    #[arg(long = "config", value_name = "FILE")]
    pub configs: Vec<PathBuf>,
    /// Parallel compile jobs, 1 to 1024 (default: the machine's cores).
    #[arg(long, allow_negative_numbers = true,
        value_parser = crate::input::number_in(1u32, MAX_JOBS))]
    pub jobs: Option<u32>,
}

/// The most compile jobs `--jobs` takes.
pub const MAX_JOBS: u32 = 1024;

/// What `mtex-kernel.json` says of a built kernel.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Built {
    /// `uname -r` of the kernel.
    pub release: String,
    /// What it was built from: `linux-source-6.12 6.12.118-1~deb12u1`, or a tree's path.
    pub source: String,
    /// KASAN's mode, if built with KASAN_HW_TAGS.
    pub kasan: Option<String>,
    /// The configuration it started from, when not mtex's own: `Debian's linux-config-6.12
    /// 6.12.118-1~deb12u1`.
    #[serde(default)]
    pub config_base: Option<String>,
    /// The patches applied, in order: file name and SHA-256.
    pub patches: Vec<(String, String)>,
    /// Words the kernel must be booted with (KASAN's mode).
    pub append: Vec<String>,
    /// Files the compile took (the next build's progress estimate).
    pub compiled: u64,
}

impl Built {
    /// One line naming the kernel: release, KASAN mode and patches.
    pub fn label(&self) -> String {
        let mut s = self.release.clone();
        if self.config_base.is_some() {
            s += ", Debian's configuration";
        }
        if let Some(k) = &self.kasan {
            s += &format!(", KASAN_HW_TAGS {k}");
        }
        for (p, _) in &self.patches {
            s += &format!(", +{p}");
        }
        s
    }

    /// A built kernel's description beside its Image, if it was built by mtex.
    pub fn beside(image: &Path) -> Option<Built> {
        let text = std::fs::read_to_string(image.with_file_name(KERNEL_JSON)).ok()?;
        serde_json::from_str(&text).ok()
    }
}

/// The build's inputs, checked and read before anything runs.
struct Inputs {
    source: Source,
    settings: Vec<config::Setting>,
    patches: Vec<(PathBuf, Vec<u8>)>,
    compiler: String,
}

enum Source {
    Debian(String),
    Tree(PathBuf),
}

const CROSS: &str = "aarch64-linux-gnu-";

/// The tools a build runs, each with the Debian package that has it.
const TOOLS: [(&str, &str); 8] = [
    ("make", "make"),
    ("aarch64-linux-gnu-gcc", "gcc-aarch64-linux-gnu"),
    ("bison", "bison"),
    ("flex", "flex"),
    ("bc", "bc"),
    ("patch", "patch"),
    ("tar", "tar"),
    ("xz", "xz-utils"),
];

fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
}

fn check_tools() -> Result<()> {
    let missing: Vec<&str> = TOOLS
        .iter()
        .filter(|(t, _)| !on_path(t))
        .map(|(_, p)| *p)
        .collect();
    if !missing.is_empty() {
        bail!(
            "building a kernel needs {}: apt-get install {} (or ./scripts/ensure-deps --kernel)",
            missing.join(", "),
            missing.join(" ")
        );
    }
    Ok(())
}

fn read_inputs(args: &Args) -> Result<Inputs> {
    let source = match &args.tree {
        Some(t) => Source::Tree(source::check_tree(t)?),
        None => Source::Debian(source::package_for(&args.source)?),
    };
    let mut parts = vec![config::parse(config::MTEX, "mtex.config")?];
    if args.debian_config {
        parts.push(config::parse(config::DEBIAN, "debian.config")?);
    }
    if args.kasan.is_some() {
        parts.push(config::parse(config::KASAN, "kasan.config")?);
    }
    for f in &args.configs {
        let bytes = crate::input::read(f, "configuration fragment", 1 << 20)?;
        parts.push(config::parse(
            &String::from_utf8_lossy(&bytes),
            &f.display().to_string(),
        )?);
    }
    let patches = args
        .patches
        .iter()
        .map(|p| {
            let bytes = source::check_patch(p)?;
            // patch runs in the unpacked tree: the path must not depend on where mtex runs.
            Ok((p.canonicalize()?, bytes))
        })
        .collect::<Result<Vec<_>>>()?;
    check_tools()?;
    let compiler = crate::debian::run(
        Command::new(format!("{CROSS}gcc")).arg("--version"),
        "aarch64-linux-gnu-gcc --version",
    )?
    .lines()
    .next()
    .unwrap_or_default()
    .to_string();
    Ok(Inputs {
        source,
        settings: config::merge(&parts),
        patches,
        compiler,
    })
}

/// Bytes as lower-case hex (a SHA-256 digest's usual spelling).
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The hash of every input, which names the kernel's directory.
fn key(i: &Inputs, source_id: &str, base: Option<&source::DebianConfig>) -> String {
    let mut h = sha2::Sha256::new();
    h.update(RECIPE);
    h.update([0]);
    h.update(source_id);
    h.update([0]);
    if let Some(b) = base {
        h.update(&b.text);
        h.update([0]);
    }
    for s in &i.settings {
        h.update(s.line());
        h.update([b'\n']);
    }
    for (_, bytes) in &i.patches {
        h.update(sha2::Sha256::digest(bytes));
    }
    h.update(&i.compiler);
    hex(&h.finalize())[..16].to_string()
}

/// Where built kernels are kept.
pub fn kernels_dir() -> PathBuf {
    crate::images::workspace_root().join("target/kernels")
}

/// Runs `mtex kernel build`.
pub fn run(args: Args) -> Result<ExitCode> {
    let (dir, built) = build(&args)?;
    println!("mtex: kernel {}", built.label());
    println!("mtex: Image      {}", dir.join("Image").display());
    println!("mtex: System.map {}", dir.join("System.map").display());
    println!(
        "mtex: boot it with: mtex linux --kernel {} --workload futex-hash",
        dir.join("Image").display()
    );
    Ok(ExitCode::SUCCESS)
}

/// Builds (or finds already built) the kernel `args` describe; returns its directory.
pub fn build(args: &Args) -> Result<(PathBuf, Built)> {
    let inputs = read_inputs(args)?;
    let root = kernels_dir();
    std::fs::create_dir_all(&root)?;
    let mut progress = Progress::new(None);
    // The source packages and their unpacked trees are shared by every build: one process
    // at a time fetches or unpacks (held until this build has its own copy).
    let source_lock = std::fs::File::create(root.join(".source-lock"))?;
    source_lock.lock()?;
    // The source: a Debian package (fetched once) or the user's tree.
    let (tarball, source_id, shown) = match &inputs.source {
        Source::Debian(pkg) => {
            progress.stage(Stage::Fetch, pkg);
            let t = source::fetch(pkg, &root.join("debs"))?;
            let id = format!("{} {}", t.package, t.version);
            (Some(t), id.clone(), id)
        }
        Source::Tree(t) => (None, t.display().to_string(), t.display().to_string()),
    };
    let base = match (&tarball, args.debian_config) {
        (Some(t), true) => {
            progress.stage(
                Stage::Fetch,
                &t.package.replace("linux-source-", "linux-config-"),
            );
            Some(source::debian_config(t, &root.join("debs"))?)
        }
        _ => None,
    };
    let key = key(&inputs, &source_id, base.as_ref());
    let dir = root.join(&key);
    std::fs::create_dir_all(&dir)?;
    // One build of a kernel at a time; a second asker waits, then finds it built.
    let lock = std::fs::File::create(dir.join(".lock"))?;
    lock.lock()?;
    let is_tree = tarball.is_none();
    if !is_tree && let Some(b) = cached(&dir) {
        progress.done(&format!("{} (built before: {})", b.label(), dir.display()));
        return Ok((dir, b));
    }
    progress.expect(previous_count(&root, &inputs.settings));
    let src = match (&tarball, &inputs.source) {
        (Some(t), _) => {
            let src = dir.join("src");
            progress.stage(Stage::Unpack, &t.path.display().to_string());
            let pristine = root.join(format!(
                "src-{}_{}",
                t.package,
                t.version.replace(':', "%3a")
            ));
            source::copy_for_build(t, &pristine, &src)?;
            for (p, _) in &inputs.patches {
                progress.stage(Stage::Patch, &p.display().to_string());
                if let Err(e) = source::apply(p, &src, &shown) {
                    let _ = std::fs::remove_dir_all(&src);
                    return Err(e);
                }
            }
            src
        }
        (None, Source::Tree(t)) => t.clone(),
        (None, Source::Debian(_)) => unreachable!("a Debian source always has its tarball"),
    };
    drop(source_lock);
    let out = dir.join("build");
    std::fs::create_dir_all(&out)?;
    let fragment: String = inputs.settings.iter().map(|s| s.line() + "\n").collect();
    let log_path = dir.join("build.log");
    let mut log = std::fs::File::create(&log_path)?;
    let configured = match &base {
        // Debian's configuration with mtex's lines after it (a later line of a .config
        // replaces an earlier one); mod2noconfig turns each module off where it can.
        Some(b) => {
            progress.stage(
                Stage::Config,
                &format!("{} + mtex.config, modules off", b.id),
            );
            std::fs::write(out.join(".config"), format!("{}\n{fragment}", b.text))?;
            make(&src, &out, &["mod2noconfig"], 1, &mut log, None)
        }
        None => {
            progress.stage(Stage::Config, "allnoconfig + mtex.config");
            let path = out.join("mtex.fragment");
            std::fs::write(&path, &fragment)?;
            make(
                &src,
                &out,
                &[
                    &format!("KCONFIG_ALLCONFIG={}", path.display()),
                    "allnoconfig",
                ],
                1,
                &mut log,
                None,
            )
        }
    };
    configured.with_context(|| {
        format!(
            "the kernel's configuration failed; see {}",
            log_path.display()
        )
    })?;
    let final_config = std::fs::read_to_string(out.join(".config"))?;
    let mut dropped = config::dropped_settings(&inputs.settings, &final_config);
    if !dropped.is_empty() {
        // An option of mtex's own fragment that this version no longer has (ARM64_PAN and
        // LSE atomics became unconditional in Linux 7) is not missing: it is always there.
        // The user's options and KASAN's must all exist.
        let kconfig = config::kconfig_of(&src);
        let mut own = config::parse(config::MTEX, "mtex.config")?;
        own.extend(config::parse(config::DEBIAN, "debian.config")?);
        let (gone, rest): (Vec<&config::Setting>, Vec<&config::Setting>) =
            dropped.into_iter().partition(|s| {
                own.iter().any(|o| o.name == s.name) && !config::defines(&kconfig, &s.name)
            });
        if !gone.is_empty() {
            eprintln!(
                "mtex kernel build: not options in this version (built in, or gone): {}",
                gone.iter()
                    .map(|s| s.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        dropped = rest;
    }
    let dropped: Vec<String> = dropped.into_iter().map(config::Setting::line).collect();
    if !dropped.is_empty() {
        bail!(
            "{shown}: Kconfig did not keep {} (a dependency is missing or the option does not \
             exist in this version); the kernel was not built",
            dropped.join(", ")
        );
    }
    if let Some(b) = &base {
        let k = config::kept(&b.text, &final_config);
        let listing = dir.join("debian-config-lost.txt");
        std::fs::write(
            &listing,
            format!(
                "# Options {} builds in that this kernel does not (most depend on a module)\n{}",
                b.id,
                k.lost.iter().map(|l| format!("{l}\n")).collect::<String>()
            ),
        )?;
        eprintln!(
            "mtex kernel build: {} builds in {} options: {} kept, {} not ({}); {} modules left out",
            b.id,
            k.built_in,
            k.built_in - k.lost.len(),
            k.lost.len(),
            listing.display(),
            k.modules
        );
    }
    let jobs = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get() as u32));
    progress.stage(Stage::Compile, &format!("{jobs} jobs"));
    make(&src, &out, &["Image"], jobs, &mut log, Some(&mut progress)).with_context(|| {
        let tail = std::fs::read_to_string(&log_path).unwrap_or_default();
        let last: Vec<&str> = tail.lines().rev().take(20).collect();
        format!(
            "the kernel build failed; the end of {}:\n{}",
            log_path.display(),
            last.into_iter().rev().collect::<Vec<_>>().join("\n")
        )
    })?;
    let release = std::fs::read_to_string(out.join("include/config/kernel.release"))
        .context("the build wrote no include/config/kernel.release")?
        .trim()
        .to_string();
    for (from, to) in [
        ("arch/arm64/boot/Image", "Image"),
        ("System.map", "System.map"),
        (".config", "config"),
    ] {
        std::fs::copy(out.join(from), dir.join(to))
            .with_context(|| format!("the build left no {from}"))?;
    }
    let built = Built {
        release,
        source: shown,
        kasan: args.kasan.clone(),
        config_base: base.as_ref().map(|b| format!("Debian's {}", b.id)),
        patches: inputs
            .patches
            .iter()
            .map(|(p, b)| {
                (
                    p.file_name()
                        .map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
                    hex(&sha2::Sha256::digest(b)),
                )
            })
            .collect(),
        append: args
            .kasan
            .iter()
            .flat_map(|m| ["kasan=on".to_string(), format!("kasan.mode={m}")])
            .collect(),
        compiled: progress.compiled(),
    };
    // Written last, by rename: its presence is what makes the directory a finished kernel.
    let tmp = dir.join(".kernel.json.tmp");
    std::fs::write(&tmp, serde_json::to_string_pretty(&built)?)?;
    std::fs::rename(&tmp, dir.join(KERNEL_JSON))?;
    std::fs::write(
        root.join(count_name(&inputs.settings)),
        built.compiled.to_string(),
    )?;
    if !is_tree {
        // The output is kept by its inputs' hash; the tree and objects are not needed again
        // (ccache keeps the compiles).
        let _ = std::fs::remove_dir_all(&src);
        let _ = std::fs::remove_dir_all(&out);
    }
    progress.done(&format!("{} in {}", built.label(), dir.display()));
    Ok((dir, built))
}

/// A finished kernel in `dir`, if there is one.
fn cached(dir: &Path) -> Option<Built> {
    let b = Built::beside(&dir.join("Image"))?;
    (dir.join("Image").is_file() && dir.join("System.map").is_file()).then_some(b)
}

/// The file that keeps how many files a configuration's compile took.
fn count_name(settings: &[config::Setting]) -> String {
    let mut h = sha2::Sha256::new();
    for s in settings {
        h.update(s.line());
    }
    format!("compiled-{}.txt", &hex(&h.finalize())[..16])
}

fn previous_count(root: &Path, settings: &[config::Setting]) -> Option<u64> {
    std::fs::read_to_string(root.join(count_name(settings)))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Runs Kbuild for `targets` with mtex's cross compiler (through ccache when installed); its
/// output goes to `log`, and through `progress` when given.
fn make(
    src: &Path,
    out: &Path,
    targets: &[&str],
    jobs: u32,
    log: &mut std::fs::File,
    mut progress: Option<&mut Progress>,
) -> Result<()> {
    use std::io::Write;
    let cc = if on_path("ccache") {
        format!("CC=ccache {CROSS}gcc")
    } else {
        format!("CC={CROSS}gcc")
    };
    let mut child = Command::new("make")
        .arg("-C")
        .arg(src)
        .arg(format!("O={}", out.display()))
        .args(["ARCH=arm64", &format!("CROSS_COMPILE={CROSS}"), &cc])
        .arg(format!("-j{jobs}"))
        .args(targets)
        // The same inputs give the same Image: its banner names no host, user or time.
        .env("KBUILD_BUILD_USER", "mtex")
        .env("KBUILD_BUILD_HOST", "mtex")
        .env("KBUILD_BUILD_TIMESTAMP", "1970-01-01")
        // Compiles of two builds' trees share ccache entries: their paths are taken
        // relative to the kernel's directory, which is the same shape in every build.
        .env("CCACHE_BASEDIR", out.parent().unwrap_or(out))
        .env("CCACHE_NOHASHDIR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("running make (apt-get install make)")?;
    // stderr is read on its own thread so that neither pipe fills while the other is read.
    let stderr = child.stderr.take().expect("piped");
    let errors = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut BufReader::new(stderr), &mut s);
        s
    });
    for line in BufReader::new(child.stdout.take().expect("piped")).lines() {
        let line = line?;
        writeln!(log, "{line}")?;
        if let Some(p) = progress.as_deref_mut() {
            p.line(&line);
        }
    }
    let status = child.wait()?;
    let errors = errors.join().unwrap_or_default();
    log.write_all(errors.as_bytes())?;
    if !status.success() {
        bail!("make {} failed ({status})", targets.join(" "));
    }
    Ok(())
}
