//! `mtex.cfg`: `key = value` lines next to the loader's own `.efi`, `#` starting a comment.
//!
//! | key | default | meaning |
//! | --- | --- | --- |
//! | `hyp` | `mtex-hyp.bin` | the hypervisor, a raw arm64 Image |
//! | `guest` | `mtex-guest.bin` | the guest program, staged for the hypervisor |
//! | `options` | `mtex-options.txt` | the run's `mtex.*` command line (one line) |
//! | `on_error` | `return` | `return`: an error status to the firmware; `shutdown`: power off (automated runs) |
//! | `mode` | `run` | `run`: boot the guest program; `install`: install the hypervisor under the firmware and go back to it |
//! | `kernel` | none | install mode: an EFI application (a Linux kernel's EFI stub) to start once installed, instead of returning |
//! | `kernel_args` | empty | install mode: its command line (`initrd=\path` loads an initramfs the standard way) |
//!
//! Paths are relative to the loader's directory (`/` or `\` separate components); one that
//! starts with a separator is taken from the root of the loader's volume. A missing
//! `mtex.cfg` means every default. A missing default options file is an empty command line,
//! while an `options` file named explicitly must exist.

use alloc::string::String;
use core::fmt;

/// The configuration file's name, in the loader's directory.
pub const FILE_NAME: &str = "mtex.cfg";

/// How the loader ends when it cannot boot the hypervisor.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OnError {
    /// Return an error status to the firmware (its boot manager moves on or shows a menu).
    #[default]
    Return,
    /// ResetSystem(EfiResetShutdown): an automated QEMU run ends at once.
    Shutdown,
}

/// What the loader does with the hypervisor.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mode {
    /// Boot the guest program under it; the firmware is left behind.
    #[default]
    Run,
    /// Install it under the firmware, which goes on at EL1 (its boot manager, or `kernel`).
    Install,
}

/// The loader's configuration, paths as written (relative, not yet joined).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    pub hyp: String,
    pub guest: String,
    pub options: String,
    /// Whether `options` was set in the file: only then must the file exist.
    pub options_explicit: bool,
    pub on_error: OnError,
    pub mode: Mode,
    /// Install mode: the EFI application to start, instead of returning to the firmware.
    pub kernel: Option<String>,
    /// Install mode: the kernel's command line.
    pub kernel_args: String,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            hyp: String::from("mtex-hyp.bin"),
            guest: String::from("mtex-guest.bin"),
            options: String::from("mtex-options.txt"),
            options_explicit: false,
            on_error: OnError::Return,
            mode: Mode::Run,
            kernel: None,
            kernel_args: String::new(),
        }
    }
}

/// What is wrong with one line of the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Problem {
    /// Not valid UTF-8 (line is where the first bad byte is).
    NotUtf8,
    /// A line with no `=`.
    NoEquals,
    UnknownKey(String),
    /// A value that is not one of the key's accepted values.
    BadValue {
        key: &'static str,
        value: String,
    },
    /// A key given a second time (the first line it appeared on).
    Repeated {
        key: &'static str,
        first: usize,
    },
    /// `kernel` or `kernel_args` without `mode = install` (the line of the key).
    NeedsInstall {
        key: &'static str,
    },
}

/// The first problem found, with the line it is on (1-based).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    pub line: usize,
    pub problem: Problem,
    /// `on_error` as the rest of the file sets it, so that an automated run with a typo
    /// elsewhere still shuts down.
    pub on_error: OnError,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: ", self.line)?;
        match &self.problem {
            Problem::NotUtf8 => write!(f, "not UTF-8"),
            Problem::NoEquals => write!(f, "expected `key = value`"),
            Problem::UnknownKey(k) => write!(
                f,
                "unknown key `{k}` (known: hyp, guest, options, on_error, mode, kernel, \
                 kernel_args)"
            ),
            Problem::BadValue { key, value } => match *key {
                "on_error" => write!(
                    f,
                    "bad value for key `on_error`: `{value}` (expected `return` or `shutdown`)"
                ),
                "mode" => write!(
                    f,
                    "bad value for key `mode`: `{value}` (expected `run` or `install`)"
                ),
                _ => write!(
                    f,
                    "bad value for key `{key}`: `{value}` (expected a file path)"
                ),
            },
            Problem::Repeated { key, first } => {
                write!(f, "key `{key}` given again (first on line {first})")
            }
            Problem::NeedsInstall { key } => {
                write!(f, "key `{key}` needs `mode = install`")
            }
        }
    }
}

const KEYS: [&str; 7] = [
    "hyp",
    "guest",
    "options",
    "on_error",
    "mode",
    "kernel",
    "kernel_args",
];

/// Parses the file's bytes. Every line is read even after a problem, so that the error
/// carries the file's `on_error`.
pub fn parse(bytes: &[u8]) -> Result<Config, ConfigError> {
    let text = match core::str::from_utf8(bytes) {
        Ok(t) => t,
        Err(e) => {
            let line = 1 + bytes[..e.valid_up_to()]
                .iter()
                .filter(|&&b| b == b'\n')
                .count();
            return Err(ConfigError {
                line,
                problem: Problem::NotUtf8,
                on_error: OnError::Return,
            });
        }
    };
    let mut config = Config::default();
    let mut seen = [0usize; KEYS.len()];
    let mut first_error: Option<(usize, Problem)> = None;
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let content = raw.split('#').next().unwrap_or("").trim();
        if content.is_empty() {
            continue;
        }
        if let Err(problem) = apply(&mut config, &mut seen, line, content) {
            first_error.get_or_insert((line, problem));
        }
    }
    if config.mode != Mode::Install {
        for (i, key) in KEYS.iter().enumerate() {
            if matches!(*key, "kernel" | "kernel_args") && seen[i] != 0 {
                first_error.get_or_insert((seen[i], Problem::NeedsInstall { key }));
            }
        }
    }
    match first_error {
        None => Ok(config),
        Some((line, problem)) => Err(ConfigError {
            line,
            problem,
            on_error: config.on_error,
        }),
    }
}

fn apply(
    config: &mut Config,
    seen: &mut [usize; KEYS.len()],
    line: usize,
    content: &str,
) -> Result<(), Problem> {
    let (key, value) = content.split_once('=').ok_or(Problem::NoEquals)?;
    let (key, value) = (key.trim(), value.trim());
    let index = KEYS
        .iter()
        .position(|k| *k == key)
        .ok_or_else(|| Problem::UnknownKey(String::from(key)))?;
    let key = KEYS[index];
    if seen[index] != 0 {
        return Err(Problem::Repeated {
            key,
            first: seen[index],
        });
    }
    seen[index] = line;
    let bad = || Problem::BadValue {
        key,
        value: String::from(value),
    };
    match key {
        "on_error" => {
            config.on_error = match value {
                "return" => OnError::Return,
                "shutdown" => OnError::Shutdown,
                _ => return Err(bad()),
            }
        }
        "mode" => {
            config.mode = match value {
                "run" => Mode::Run,
                "install" => Mode::Install,
                _ => return Err(bad()),
            }
        }
        // Free text: the kernel's own command line.
        "kernel_args" => config.kernel_args = String::from(value),
        _ => {
            let path = normalize_path(value).ok_or_else(bad)?;
            match key {
                "hyp" => config.hyp = path,
                "guest" => config.guest = path,
                "kernel" => config.kernel = Some(path),
                _ => {
                    config.options = path;
                    config.options_explicit = true;
                }
            }
        }
    }
    Ok(())
}

/// A path with `\` separators, or None for an empty one, one naming a directory (trailing
/// separator) or one with characters UEFI file names cannot hold.
fn normalize_path(value: &str) -> Option<String> {
    let path: String = value
        .chars()
        .map(|c| if c == '/' { '\\' } else { c })
        .collect();
    let name = path.rsplit('\\').next().unwrap_or("");
    let bad_char = |c: char| c.is_control() || matches!(c, '"' | '*' | ':' | '<' | '>' | '?' | '|');
    if name.is_empty() || name == "." || name == ".." || path.chars().any(bad_char) {
        return None;
    }
    Some(path)
}

/// Joins the loader's directory (`\EFI\BOOT`, `\` for the root) and a configured path.
pub fn join(dir: &str, path: &str) -> String {
    if path.starts_with('\\') {
        return String::from(path);
    }
    let mut out = String::from(dir.trim_end_matches('\\'));
    out.push('\\');
    out.push_str(path);
    out
}

/// The directory of a file path as UEFI gives it (`\EFI\BOOT\BOOTAA64.EFI` → `\EFI\BOOT`,
/// `\loader.efi` → `\`). `/` is accepted as a separator too.
pub fn directory_of(file: &str) -> String {
    let file: String = file
        .chars()
        .map(|c| if c == '/' { '\\' } else { c })
        .collect();
    match file.rfind('\\') {
        Some(0) | None => String::from("\\"),
        Some(i) => {
            let dir = &file[..i];
            if dir.starts_with('\\') {
                String::from(dir)
            } else {
                let mut out = String::from("\\");
                out.push_str(dir);
                out
            }
        }
    }
}

/// The run's command line from the options file: its first line, trailing whitespace (and
/// the newline) removed. A file with more than one non-empty line is refused: the command
/// line is one line, and a second would be silently lost.
pub fn command_line(bytes: &[u8]) -> Result<&str, &'static str> {
    let text = core::str::from_utf8(bytes).map_err(|_| "not UTF-8")?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.lines();
    let first = lines.next().unwrap_or("").trim_end();
    if lines.any(|l| !l.trim().is_empty()) {
        return Err("more than one line (the command line is one line)");
    }
    Ok(first)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_file_is_every_default() {
        assert_eq!(parse(b""), Ok(Config::default()));
        assert_eq!(parse(b"# nothing\n\n   \n"), Ok(Config::default()));
    }

    #[test]
    fn every_key_with_comments_and_crlf() {
        let c = parse(
            b"# automated run\r\nhyp = bin/hyp.img  # the hypervisor\r\nguest=g.bin\r\n\
              options = run/opts.txt\r\non_error = shutdown\r\n",
        )
        .unwrap();
        assert_eq!(c.hyp, "bin\\hyp.img");
        assert_eq!(c.guest, "g.bin");
        assert_eq!(c.options, "run\\opts.txt");
        assert!(c.options_explicit);
        assert_eq!(c.on_error, OnError::Shutdown);
    }

    #[test]
    fn errors_name_line_and_key_and_keep_on_error() {
        let e = parse(b"hyp = a\nfoo = 1\non_error = shutdown\n").unwrap_err();
        assert_eq!(e.line, 2);
        assert_eq!(e.problem, Problem::UnknownKey("foo".into()));
        assert_eq!(e.on_error, OnError::Shutdown);
        assert_eq!(
            e.to_string(),
            "line 2: unknown key `foo` (known: hyp, guest, options, on_error, mode, kernel, \
             kernel_args)"
        );

        let e = parse(b"\non_error = halt\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "line 2: bad value for key `on_error`: `halt` (expected `return` or `shutdown`)"
        );
        assert_eq!(e.on_error, OnError::Return);

        let e = parse(b"guest =\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "line 1: bad value for key `guest`: `` (expected a file path)"
        );
        let e = parse(b"hyp = dir/\n").unwrap_err();
        assert_eq!(e.line, 1);
        let e = parse(b"hyp = a\nhyp = b\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "line 2: key `hyp` given again (first on line 1)"
        );
        let e = parse(b"just words\n").unwrap_err();
        assert_eq!(e.to_string(), "line 1: expected `key = value`");
        let e = parse(b"hyp = a\nguest = \xff\n").unwrap_err();
        assert_eq!((e.line, e.problem), (2, Problem::NotUtf8));
    }

    #[test]
    fn install_mode_takes_a_kernel_and_its_command_line() {
        let c = parse(
            b"mode = install\nkernel = /EFI/linux/Image\n\
              kernel_args = initrd=\\EFI\\linux\\initrd.img console=ttyAMA0\n",
        )
        .unwrap();
        assert_eq!(c.mode, Mode::Install);
        assert_eq!(c.kernel.as_deref(), Some("\\EFI\\linux\\Image"));
        assert_eq!(
            c.kernel_args,
            "initrd=\\EFI\\linux\\initrd.img console=ttyAMA0"
        );
        assert_eq!(parse(b"mode = install\n").unwrap().kernel, None);

        let e = parse(b"kernel = Image\non_error = shutdown\n").unwrap_err();
        assert_eq!(e.to_string(), "line 1: key `kernel` needs `mode = install`");
        assert_eq!(e.on_error, OnError::Shutdown);
        let e = parse(b"mode = run\nkernel_args = quiet\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "line 2: key `kernel_args` needs `mode = install`"
        );
        let e = parse(b"mode = hypervisor\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "line 1: bad value for key `mode`: `hypervisor` (expected `run` or `install`)"
        );
    }

    #[test]
    fn paths_join_the_loader_directory() {
        assert_eq!(directory_of("\\EFI\\BOOT\\BOOTAA64.EFI"), "\\EFI\\BOOT");
        assert_eq!(directory_of("\\loader.efi"), "\\");
        assert_eq!(directory_of("loader.efi"), "\\");
        assert_eq!(directory_of("EFI/mtex/loader.efi"), "\\EFI\\mtex");
        assert_eq!(
            join("\\EFI\\BOOT", "mtex-guest.bin"),
            "\\EFI\\BOOT\\mtex-guest.bin"
        );
        assert_eq!(join("\\", "a\\b.bin"), "\\a\\b.bin");
        assert_eq!(join("\\EFI\\BOOT", "\\images\\hyp"), "\\images\\hyp");
    }

    #[test]
    fn command_line_is_one_trimmed_line() {
        assert_eq!(command_line(b"mtex.guest=spin \r\n"), Ok("mtex.guest=spin"));
        assert_eq!(command_line(b""), Ok(""));
        assert_eq!(
            command_line(b"\xef\xbb\xbfmtex.hz=100\n\n"),
            Ok("mtex.hz=100")
        );
        assert!(command_line(b"a\nb\n").is_err());
        assert!(command_line(b"\xff").is_err());
    }
}
