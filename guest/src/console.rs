//! `println!` over the console hypercall: the hypervisor frames guest text into the report
//! stream, so it never interleaves with a record.

use core::fmt;

pub struct Console;

impl fmt::Write for Console {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        crate::hvc::console_write(s.as_bytes());
        Ok(())
    }
}

#[macro_export]
macro_rules! println {
    ($($arg:tt)*) => {{
        use core::fmt::Write as _;
        let _ = writeln!($crate::console::Console, $($arg)*);
    }};
}

/// The guest's diagnostics through the `log` crate, as console lines (`guest LEVEL: text`) at
/// the level the run asks for (`mtex.log`). They cost guest instructions: a kernel that logs
/// inside a phase changes that phase's counts, so the guest logs only between phases.
struct GuestLog;

static LOGGER: GuestLog = GuestLog;

impl log::Log for GuestLog {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.level() <= log::max_level()
    }

    fn log(&self, record: &log::Record<'_>) {
        if self.enabled(record.metadata()) {
            crate::println!("guest {}: {}", record.level(), record.args());
        }
    }

    fn flush(&self) {}
}

/// Installs the logger at `level`; called once, at boot.
pub fn init_log(level: log::LevelFilter) {
    // Only fails if a logger was already set, which nothing else does.
    let _ = log::set_logger(&LOGGER);
    log::set_max_level(level);
}
