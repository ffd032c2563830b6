//! How the hypervisor marks a traced phase's bounds for an emulator's own count of it (the
//! `mtex-oracle` QEMU plugin), without a channel of its own: at EL2, as the trace starts and
//! stops, it executes one of two marker instructions with the phase id in a fixed register.
//!
//! The markers are `ORR XZR, XZR, Xm`: architecturally a no-op (the result goes to the zero
//! register) on every CPU, so the hypervisor runs them everywhere, and an encoding no compiler
//! emits, so nothing else at EL2 looks like one. Only EL2 executions count as markers.

/// `ORR XZR, XZR, X0`, with X0 the id of the phase whose trace starts.
pub const OPEN_MARKER: u32 = 0xaa00_03ff;
/// `ORR XZR, XZR, X1`, with X1 the id of the phase whose trace stops.
pub const CLOSE_MARKER: u32 = 0xaa01_03ff;

/// The general-purpose register that holds the phase id at each marker.
pub const OPEN_ID_REG: u8 = 0;
pub const CLOSE_ID_REG: u8 = 1;
/// The general-purpose register that holds, at either marker, the index among the machine's
/// CPUs of the CPU whose trace starts or stops (a window on every CPU has one pair per CPU).
pub const CPU_REG: u8 = 2;

/// `ORR XZR, XZR, X3`, with X3 the id of the window whose sampled share starts on the CPU in
/// X2: an emulator's plugin counts that CPU's own guest instructions from here
/// ([`OracleShare`]), which an emulator's PMU cannot give when it has several vCPUs.
pub const SHARE_OPEN_MARKER: u32 = 0xaa03_03ff;
/// `ORR XZR, XZR, X4`, with X4 the id of the window whose sampled share stops on the CPU in X2.
pub const SHARE_CLOSE_MARKER: u32 = 0xaa04_03ff;
pub const SHARE_OPEN_ID_REG: u8 = 3;
pub const SHARE_CLOSE_ID_REG: u8 = 4;

/// What the plugin counted of one CPU's sampled share of a window: that CPU's own guest
/// instructions begun between its share markers, by EL (index 0: EL0, 1: EL1), with the
/// executions QEMU starts only to raise a pending step exception (its "step stub", see
/// [`OracleWindow::step_stubs`]) left out and counted apart.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OracleShare {
    pub id: u64,
    /// The CPU's index among the machine's CPUs (the markers' X2).
    pub cpu: u32,
    /// The close marker was seen (false: the run ended with the share open).
    pub closed: bool,
    pub instructions: [u64; 2],
    pub step_stubs: u64,
}

impl OracleShare {
    /// One line: `share ID CPU closed|open I0 I1 STUBS`.
    pub fn write_line(&self, w: &mut impl core::fmt::Write) -> core::fmt::Result {
        writeln!(
            w,
            "share {} {} {} {} {} {}",
            self.id,
            self.cpu,
            state(self.closed),
            self.instructions[0],
            self.instructions[1],
            self.step_stubs
        )
    }

    /// Reads back a line [`write_line`](Self::write_line) wrote; None for any other line.
    pub fn parse_line(line: &str) -> Option<Self> {
        let (id, cpu, closed, [i0, i1, step_stubs]) = parse_tagged(line, "share")?;
        Some(Self {
            id,
            cpu,
            closed,
            instructions: [i0, i1],
            step_stubs,
        })
    }
}

/// What the oracle counted in one traced phase, by executing EL (index 0: EL0, 1: EL1), in
/// the trace's unit: instructions begun, and instructions that read / wrote data memory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OracleWindow {
    /// The phase id the markers carried.
    pub id: u64,
    /// The vCPU that executed them (QEMU's index, the machine's CPU order).
    pub cpu: u32,
    /// The close marker was seen (false: the run ended with the phase open).
    pub closed: bool,
    pub instructions: [u64; 2],
    pub reads: [u64; 2],
    pub writes: [u64; 2],
    /// Executions QEMU starts for an exception handler's first instruction while a single
    /// step is pending, which raise the step exception instead (its "step stub"): left out of
    /// `instructions`, and counted here.
    pub step_stubs: u64,
}

impl OracleWindow {
    /// One line: `window ID CPU closed|open I0 I1 R0 R1 W0 W1 STUBS`.
    pub fn write_line(&self, w: &mut impl core::fmt::Write) -> core::fmt::Result {
        writeln!(
            w,
            "window {} {} {} {} {} {} {} {} {} {}",
            self.id,
            self.cpu,
            state(self.closed),
            self.instructions[0],
            self.instructions[1],
            self.reads[0],
            self.reads[1],
            self.writes[0],
            self.writes[1],
            self.step_stubs
        )
    }

    /// Reads back a line [`write_line`](Self::write_line) wrote; None for any other line.
    pub fn parse_line(line: &str) -> Option<Self> {
        let (id, cpu, closed, [i0, i1, r0, r1, w0, w1, step_stubs]) = parse_tagged(line, "window")?;
        Some(Self {
            id,
            cpu,
            closed,
            instructions: [i0, i1],
            reads: [r0, r1],
            writes: [w0, w1],
            step_stubs,
        })
    }
}

/// `closed` or `open`, as both kinds of line say it.
fn state(closed: bool) -> &'static str {
    if closed { "closed" } else { "open" }
}

/// A line `TAG ID CPU closed|open` followed by exactly `N` numbers: its id, CPU, whether it
/// says closed, and the numbers; None for any other line.
fn parse_tagged<const N: usize>(line: &str, tag: &str) -> Option<(u64, u32, bool, [u64; N])> {
    let mut words = line.split_ascii_whitespace();
    if words.next()? != tag {
        return None;
    }
    let id = words.next()?.parse().ok()?;
    let cpu = words.next()?.parse().ok()?;
    let closed = match words.next()? {
        "closed" => true,
        "open" => false,
        _ => return None,
    };
    let mut numbers = [0u64; N];
    for n in numbers.iter_mut() {
        *n = words.next()?.parse().ok()?;
    }
    words.next().is_none().then_some((id, cpu, closed, numbers))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ORR (shifted register), 64-bit: sf=1 opc=01 01010 shift=00 N=0 Rm imm6=0 Rn Rd.
    fn orr_xzr_xzr(m: u32) -> u32 {
        0xaa00_0000 | m << 16 | 31 << 5 | 31
    }

    #[test]
    fn markers_are_orr_into_xzr_of_their_id_register() {
        assert_eq!(OPEN_MARKER, orr_xzr_xzr(OPEN_ID_REG as u32));
        assert_eq!(CLOSE_MARKER, orr_xzr_xzr(CLOSE_ID_REG as u32));
        assert_ne!(OPEN_MARKER, CLOSE_MARKER);
        assert_eq!(SHARE_OPEN_MARKER, orr_xzr_xzr(SHARE_OPEN_ID_REG as u32));
        assert_eq!(SHARE_CLOSE_MARKER, orr_xzr_xzr(SHARE_CLOSE_ID_REG as u32));
        let ids = [
            OPEN_ID_REG,
            CLOSE_ID_REG,
            CPU_REG,
            SHARE_OPEN_ID_REG,
            SHARE_CLOSE_ID_REG,
        ];
        for (i, a) in ids.iter().enumerate() {
            assert!(!ids[i + 1..].contains(a), "register x{a} has two roles");
        }
    }

    #[test]
    fn a_share_line_reads_back_and_no_other_line_does() {
        let s = OracleShare {
            id: 9,
            cpu: 1,
            closed: true,
            instructions: [10, 20],
            step_stubs: 3,
        };
        let mut t = std::string::String::new();
        s.write_line(&mut t).unwrap();
        assert_eq!(t, "share 9 1 closed 10 20 3\n");
        assert_eq!(OracleShare::parse_line(&t), Some(s));
        assert_eq!(OracleWindow::parse_line(&t), None);
        for l in [
            "",
            "share 9 1 closed 10 20",
            "share 9 1 ajar 10 20 3",
            "window 9 1 closed 10 20 3",
        ] {
            assert_eq!(OracleShare::parse_line(l), None, "{l}");
        }
    }

    #[test]
    fn a_window_line_reads_back() {
        let w = OracleWindow {
            id: 7,
            cpu: 3,
            closed: true,
            instructions: [1, 2],
            reads: [3, 4],
            writes: [5, 6],
            step_stubs: 8,
        };
        let mut s = std::string::String::new();
        w.write_line(&mut s).unwrap();
        assert_eq!(s, "window 7 3 closed 1 2 3 4 5 6 8\n");
        assert_eq!(OracleWindow::parse_line(&s), Some(w));
        let open = OracleWindow { closed: false, ..w };
        s.clear();
        open.write_line(&mut s).unwrap();
        assert_eq!(OracleWindow::parse_line(&s), Some(open));
    }

    #[test]
    fn other_lines_are_not_windows() {
        for l in [
            "",
            "window 1 0 closed 1 2 3",
            "window 1 0 shut 1 2 3 4 5 6 7",
            "anomaly x",
            "window 1 0 closed 1 2 3 4 5 6 7 8",
            "window -1 0 closed 1 2 3 4 5 6 7",
            "window 1 closed 1 2 3 4 5 6 7",
            "window 1 4294967296 closed 1 2 3 4 5 6 7",
        ] {
            assert_eq!(OracleWindow::parse_line(l), None, "{l}");
        }
    }
}
