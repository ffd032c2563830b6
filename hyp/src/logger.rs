//! The hypervisor's diagnostics through the `log` crate, carried to the host as console
//! records (`hyp LEVEL: text`), at the level the run asks for (`mtex.log`).
//!
//! A log call may come from anywhere, including a handler that holds the reporter, so it only
//! queues the formatted line; the reporter sends queued lines whenever it flushes (before any
//! record and at the end), so they keep their place among the records. Lines that do not fit
//! the queue are counted, and the count is sent: nothing is dropped silently.

use crate::global::Global;
use core::fmt::Write;
use mtex_abi::report::ConsoleText;

const LINES: usize = 16;

struct Queue {
    lines: [Option<ConsoleText>; LINES],
    len: usize,
    dropped: u64,
}

static QUEUE: Global<Queue> = Global::new();

struct HypLog;

static LOGGER: HypLog = HypLog;

impl log::Log for HypLog {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.level() <= log::max_level()
    }

    fn log(&self, record: &log::Record<'_>) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let mut line = ConsoleText::new();
        let _ = write!(
            crate::report::Truncating(&mut line),
            "hyp {}: {}",
            record.level(),
            record.args()
        );
        let _ = QUEUE.try_with(|q| match q.lines.get_mut(q.len) {
            Some(slot) => {
                *slot = Some(line);
                q.len += 1;
            }
            None => q.dropped += 1,
        });
    }

    fn flush(&self) {}
}

/// Installs the logger at `level`; called once, at boot.
pub fn init(level: log::LevelFilter) {
    QUEUE.init(Queue {
        lines: [None; LINES],
        len: 0,
        dropped: 0,
    });
    // Only fails if a logger was already set, which nothing else does.
    let _ = log::set_logger(&LOGGER);
    log::set_max_level(level);
}

/// Hands every queued line to `send`, then a count of lines that did not fit, if any.
pub fn drain(mut send: impl FnMut(ConsoleText)) {
    let Some((lines, dropped)) = QUEUE.try_take() else {
        return;
    };
    for l in lines.into_iter().flatten() {
        send(l);
    }
    if dropped > 0 {
        let mut line = ConsoleText::new();
        let _ = write!(
            crate::report::Truncating(&mut line),
            "hyp WARN: {dropped} log lines lost (the queue holds {LINES})"
        );
        send(line);
    }
}

impl Global<Queue> {
    /// The queued lines and the lost count, emptying the queue; None before `init` and when
    /// nothing is queued (the common case: the reporter asks at every flush, so an empty
    /// queue must cost a compare, not a copy of the array).
    fn try_take(&self) -> Option<([Option<ConsoleText>; LINES], u64)> {
        self.try_with(|q| {
            (q.len > 0 || q.dropped > 0).then(|| {
                let taken = core::mem::replace(&mut q.lines, [None; LINES]);
                let d = q.dropped;
                q.len = 0;
                q.dropped = 0;
                (taken, d)
            })
        })
        .flatten()
    }
}
