//! Reading an input file the user names (a console log, a scenario, a document to compare, a
//! snippet): one place that makes sure it is a regular file and not too large before reading
//! it, so that a device (`/dev/zero`) is never read without end, a FIFO never blocks the
//! command, and a directory is called a directory.

use std::fs::{File, Metadata};
use std::io::Read;
use std::os::unix::fs::FileTypeExt;
use std::path::Path;

/// The largest console log read (`mtex parse`): a Linux boot's console with every record is
/// a few MiB.
pub const LOG_LIMIT: u64 = 256 << 20;
/// The largest scenario file.
pub const SCENARIO_LIMIT: u64 = 1 << 20;
/// The largest report.json or results.json compared.
pub const DOCUMENT_LIMIT: u64 = 256 << 20;
/// The largest snippet source (its code is at most two pages).
pub const SOURCE_LIMIT: u64 = 4 << 20;

/// Why an input file was not read: the message names the file and what was wrong.
#[derive(Debug)]
pub struct InputError(pub String);

impl std::fmt::Display for InputError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for InputError {}

/// What kind of file `m` describes, when it is not a regular file or a directory.
fn kind(m: &Metadata) -> &'static str {
    let t = m.file_type();
    if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a file"
    }
}

/// Checks that `path` is a regular file of at most `limit` bytes; `what` says what it should
/// be ("console log"). Only metadata is read: nothing is opened.
pub fn check(path: &Path, what: &str, limit: u64) -> Result<(), InputError> {
    let shown = path.display();
    let m = std::fs::metadata(path).map_err(|e| {
        InputError(match e.kind() {
            std::io::ErrorKind::NotFound => format!("{shown}: no such file (the {what})"),
            _ => format!("{shown}: cannot read the {what}: {e}"),
        })
    })?;
    check_metadata(path, &m, what, limit)
}

fn check_metadata(path: &Path, m: &Metadata, what: &str, limit: u64) -> Result<(), InputError> {
    let shown = path.display();
    if m.is_dir() {
        return Err(InputError(format!(
            "{shown}: is a directory; the {what} must be a regular file"
        )));
    }
    if !m.is_file() {
        return Err(InputError(format!(
            "{shown}: not a regular file ({}): the {what} must be a regular file",
            kind(m)
        )));
    }
    if m.len() > limit {
        return Err(InputError(format!(
            "{shown}: {} bytes; a {what} is at most {limit} bytes",
            m.len()
        )));
    }
    Ok(())
}

/// Reads `path` whole after [`check`]; what is read is bounded by `limit` even if the file
/// grows meanwhile.
pub fn read(path: &Path, what: &str, limit: u64) -> Result<Vec<u8>, InputError> {
    check(path, what, limit)?;
    let shown = path.display();
    let fail = |e: std::io::Error| InputError(format!("{shown}: cannot read the {what}: {e}"));
    let f = File::open(path).map_err(fail)?;
    // The file opened may not be the one checked (replaced in between): check it again.
    check_metadata(path, &f.metadata().map_err(fail)?, what, limit)?;
    let mut bytes = Vec::new();
    f.take(limit + 1).read_to_end(&mut bytes).map_err(fail)?;
    if bytes.len() as u64 > limit {
        return Err(InputError(format!(
            "{shown}: more than {limit} bytes; a {what} is at most {limit} bytes"
        )));
    }
    Ok(bytes)
}

/// [`read`] as UTF-8 text.
pub fn read_text(path: &Path, what: &str, limit: u64) -> Result<String, InputError> {
    String::from_utf8(read(path, what, limit)?).map_err(|e| {
        InputError(format!(
            "{}: the {what} is not UTF-8 text (byte {})",
            path.display(),
            e.utf8_error().valid_up_to()
        ))
    })
}

/// Reads the file `name` of the directory `dir` (a results directory) with [`read`], and
/// nothing outside `dir`: `name` must be a plain file name, and a symbolic link must lead to
/// a file inside `dir` (a directory copied from another machine may hold any link).
pub fn read_in_dir(dir: &Path, name: &str, what: &str, limit: u64) -> Result<Vec<u8>, InputError> {
    let path = dir.join(name);
    let mut parts = Path::new(name).components();
    if !matches!(
        (parts.next(), parts.next()),
        (Some(std::path::Component::Normal(_)), None)
    ) {
        return Err(InputError(format!(
            "{name:?}: not a file name in {} (the {what} is read only from inside it)",
            dir.display()
        )));
    }
    // A file that is not there is said by `read`, as for any other input.
    if let (Ok(inside), Ok(real)) = (dir.canonicalize(), path.canonicalize()) {
        if !real.starts_with(&inside) {
            return Err(InputError(format!(
                "{}: leads to {}, outside {}: the {what} is read only from inside it",
                path.display(),
                real.display(),
                dir.display()
            )));
        }
        return read(&real, what, limit);
    }
    read(&path, what, limit)
}

/// [`read_in_dir`] as UTF-8 text.
pub fn read_text_in_dir(
    dir: &Path,
    name: &str,
    what: &str,
    limit: u64,
) -> Result<String, InputError> {
    let path = dir.join(name);
    String::from_utf8(read_in_dir(dir, name, what, limit)?).map_err(|e| {
        InputError(format!(
            "{}: the {what} is not UTF-8 text (byte {})",
            path.display(),
            e.utf8_error().valid_up_to()
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_of_a_directory_is_read_from_inside_it_only() {
        let d = std::env::temp_dir().join(format!("mtex-input-dir-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        let inside = d.join("results");
        std::fs::create_dir_all(&inside).unwrap();
        std::fs::write(d.join("secret"), b"outside").unwrap();
        std::fs::write(inside.join("a.log"), b"inside").unwrap();
        assert_eq!(
            read_in_dir(&inside, "a.log", "log", 100).unwrap(),
            b"inside"
        );
        std::os::unix::fs::symlink("a.log", inside.join("b.log")).unwrap();
        assert_eq!(
            read_in_dir(&inside, "b.log", "log", 100).unwrap(),
            b"inside"
        );
        std::os::unix::fs::symlink(d.join("secret"), inside.join("c.log")).unwrap();
        let e = read_in_dir(&inside, "c.log", "log", 100).unwrap_err().0;
        assert!(e.contains("outside") && e.contains("c.log"), "{e}");
        for name in ["../secret", "/etc/passwd", "", "x/../../secret"] {
            let e = read_in_dir(&inside, name, "log", 100).unwrap_err().0;
            assert!(e.contains("not a file name"), "{name}: {e}");
        }
        let e = read_in_dir(&inside, "none.log", "log", 100).unwrap_err().0;
        assert!(e.ends_with("none.log: no such file (the log)"), "{e}");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_regular_file_is_read_and_anything_else_named() {
        let d = std::env::temp_dir().join(format!("mtex-input-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let f = d.join("a.log");
        std::fs::write(&f, b"abc").unwrap();
        assert_eq!(read(&f, "log", 3).unwrap(), b"abc");
        let e = read(&f, "log", 2).unwrap_err().0;
        assert!(e.contains("3 bytes; a log is at most 2 bytes"), "{e}");
        let e = read(&d, "log", 10).unwrap_err().0;
        assert!(
            e.ends_with("is a directory; the log must be a regular file"),
            "{e}"
        );
        let e = read(Path::new("/dev/zero"), "log", 10).unwrap_err().0;
        assert!(e.contains("not a regular file (a character device)"), "{e}");
        let e = read(&d.join("none"), "log", 10).unwrap_err().0;
        assert!(e.ends_with("no such file (the log)"), "{e}");
        std::fs::write(&f, b"\xff").unwrap();
        let e = read_text(&f, "log", 10).unwrap_err().0;
        assert!(e.contains("not UTF-8 text (byte 0)"), "{e}");
        let _ = std::fs::remove_dir_all(&d);
    }
}

/// A clap value parser for a whole number in `lo..=hi` (`hi` = the type's maximum: no upper
/// bound). With `allow_negative_numbers` on the argument, `-1` reaches it and is refused
/// by the range, naming it, rather than taken for an unknown option.
pub fn number_in<T>(lo: T, hi: T) -> impl Fn(&str) -> Result<T, String> + Clone + Send + Sync
where
    T: Copy + Into<i128> + TryFrom<i128> + std::fmt::Display + Bounded + Send + Sync + 'static,
{
    move |s: &str| {
        let range = if hi.into() == T::MAX.into() {
            format!("a whole number, at least {lo}")
        } else {
            format!("a whole number, {lo} to {hi}")
        };
        match s.trim().parse::<i128>() {
            Ok(n) if (lo.into()..=hi.into()).contains(&n) => {
                T::try_from(n).map_err(|_| format!("expected {range}"))
            }
            Ok(_) => Err(format!("out of range: expected {range}")),
            Err(_) => Err(format!("not a number: expected {range}")),
        }
    }
}

/// The largest value of an unsigned option type.
pub trait Bounded {
    const MAX: Self;
}

impl Bounded for u8 {
    const MAX: Self = u8::MAX;
}

impl Bounded for u32 {
    const MAX: Self = u32::MAX;
}

impl Bounded for u64 {
    const MAX: Self = u64::MAX;
}

#[cfg(test)]
mod number_tests {
    use super::*;

    #[test]
    fn numbers_outside_the_range_name_it() {
        let iters = number_in(1u64, 100);
        assert_eq!(iters("7"), Ok(7));
        assert_eq!(
            iters("-1"),
            Err("out of range: expected a whole number, 1 to 100".into())
        );
        assert_eq!(
            iters("x"),
            Err("not a number: expected a whole number, 1 to 100".into())
        );
        let timeout = number_in(1u64, u64::MAX);
        assert_eq!(
            timeout("0"),
            Err("out of range: expected a whole number, at least 1".into())
        );
        assert_eq!(timeout("18446744073709551615"), Ok(u64::MAX));
        assert!(number_in(0u8, 1)("2").is_err());
    }
}
