//! Asking a running QEMU, over QMP, where the CPU is: just before the host kills a run, so
//! that the report says where the guest was, and to read the guest's clock for
//! `clock_watch`. Every read and write is bounded: a wedged QEMU is an error, never a hang.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// The CPU's state as QEMU's `info registers` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuState {
    pub pc: u64,
    pub pstate: u64,
    /// Syndrome and fault-address registers, when QEMU shows them (`ESR_EL2=...`; QEMU 10.0
    /// shows none for AArch64).
    pub faults: Vec<(String, u64)>,
}

impl CpuState {
    /// PSTATE.EL.
    pub fn el(&self) -> u8 {
        ((self.pstate >> 2) & 3) as u8
    }

    /// `guest at pc 0x41005fa8, EL1 (PSTATE 0x600003c5)`, or the hypervisor's place.
    pub fn describe(&self) -> String {
        let mut s = if self.el() >= 2 {
            format!(
                "CPU in the hypervisor at pc {:#x}, EL{}",
                self.pc,
                self.el()
            )
        } else {
            format!("guest at pc {:#x}, EL{}", self.pc, self.el())
        };
        s.push_str(&format!(" (PSTATE {:#x})", self.pstate));
        for (name, v) in &self.faults {
            s.push_str(&format!(", {name} {v:#x}"));
        }
        s
    }
}

/// Each CPU's state from QEMU's `info registers -a`: one `CPU#n` block per CPU, in order;
/// a block without PC or PSTATE is left out. Text without `CPU#` headers is one CPU's.
pub fn parse_all_registers(text: &str) -> Vec<CpuState> {
    let blocks: Vec<&str> = text
        .split("CPU#")
        .filter(|b| !b.trim().is_empty())
        .collect();
    blocks.iter().filter_map(|b| parse_registers(b)).collect()
}

/// Where every CPU was, in words: one CPU as [`CpuState::describe`] says it, several as
/// `CPU 0: ...; CPU 1: ...`. None when no CPU's place was read.
pub fn describe_all(cpus: &[CpuState]) -> Option<String> {
    match cpus {
        [] => None,
        [one] => Some(one.describe()),
        many => Some(
            many.iter()
                .enumerate()
                .map(|(i, c)| format!("CPU {i}: {}", c.describe()))
                .collect::<Vec<_>>()
                .join("; "),
        ),
    }
}

/// PC, PSTATE and any ESR/FAR registers from QEMU's `info registers` (AArch64). None when
/// PC or PSTATE is missing.
pub fn parse_registers(text: &str) -> Option<CpuState> {
    let mut pc = None;
    let mut pstate = None;
    let mut faults = Vec::new();
    for token in text.split_whitespace() {
        let Some((name, value)) = token.split_once('=') else {
            continue;
        };
        let Ok(v) = u64::from_str_radix(value, 16) else {
            continue;
        };
        match name {
            "PC" => pc = pc.or(Some(v)),
            "PSTATE" => pstate = pstate.or(Some(v)),
            _ if name.starts_with("ESR") || name.starts_with("FAR") => {
                faults.push((name.to_string(), v))
            }
            _ => {}
        }
    }
    Some(CpuState {
        pc: pc?,
        pstate: pstate?,
        faults,
    })
}

/// A QMP connection to QEMU, in command mode.
pub(super) struct Qmp {
    stream: BufReader<UnixStream>,
}

impl Qmp {
    /// Connects to QEMU's QMP socket (trying for up to `within` while QEMU creates it) and
    /// enters command mode. Every read and write is bounded: a wedged QEMU is an error.
    pub(super) fn connect(path: &Path, within: Duration) -> Result<Self, String> {
        let start = Instant::now();
        let stream = loop {
            match UnixStream::connect(path) {
                Ok(s) => break s,
                Err(e) if start.elapsed() >= within => return Err(format!("connecting: {e}")),
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        };
        let limit = Some(Duration::from_secs(2));
        stream
            .set_read_timeout(limit)
            .and_then(|()| stream.set_write_timeout(limit))
            .map_err(|e| e.to_string())?;
        let mut q = Self {
            stream: BufReader::new(stream),
        };
        q.line()?; // the greeting
        q.execute(serde_json::json!({"execute": "qmp_capabilities"}))?;
        Ok(q)
    }

    fn line(&mut self) -> Result<serde_json::Value, String> {
        let mut l = String::new();
        match self.stream.read_line(&mut l) {
            Ok(0) => Err("QEMU closed the connection".into()),
            Ok(_) => serde_json::from_str(&l).map_err(|e| format!("bad reply {l:?}: {e}")),
            Err(e) => Err(format!("reading: {e}")),
        }
    }

    /// Sends a command and returns its `return` value (events in between are skipped).
    fn execute(&mut self, cmd: serde_json::Value) -> Result<serde_json::Value, String> {
        let mut text = cmd.to_string();
        text.push('\n');
        self.stream
            .get_mut()
            .write_all(text.as_bytes())
            .map_err(|e| format!("writing: {e}"))?;
        loop {
            let mut reply = self.line()?;
            if let Some(r) = reply.get_mut("return") {
                return Ok(r.take());
            }
            if let Some(e) = reply.get("error") {
                return Err(format!("{cmd}: {e}"));
            }
        }
    }

    /// A human-monitor command's output.
    pub(super) fn hmp(&mut self, line: &str) -> Result<String, String> {
        let r = self.execute(serde_json::json!({
            "execute": "human-monitor-command",
            "arguments": {"command-line": line},
        }))?;
        r.as_str()
            .map(String::from)
            .ok_or_else(|| format!("{line}: no text in the reply"))
    }
}

/// Stops the machine and asks where each CPU is: `guest at pc ..., EL1 (...)` (with several
/// CPUs, `CPU 0: ...; CPU 1: ...`), or why that is not known. Called just before QEMU is
/// killed.
pub(super) fn locate(qmp: &mut Option<Qmp>, path: &Path) -> String {
    let q = match qmp {
        Some(q) => q,
        None => match Qmp::connect(path, Duration::from_secs(1)) {
            Ok(q) => qmp.insert(q),
            Err(e) => return format!("where the guest was is unknown (QMP: {e})"),
        },
    };
    // Stopped, the CPU's registers are the place it was in, not a moment of a moving run.
    let regs = q
        .execute(serde_json::json!({"execute": "stop"}))
        .and_then(|_| q.hmp("info registers -a"));
    match regs {
        Ok(text) => match describe_all(&parse_all_registers(&text)) {
            Some(place) => place,
            None => format!(
                "where the guest was is unknown (QMP: no PC/PSTATE in {:?})",
                text.lines().next().unwrap_or_default()
            ),
        },
        Err(e) => format!("where the guest was is unknown (QMP: {e})"),
    }
}

/// A path for QEMU's QMP socket, unique to this run (tests run several at once).
pub(super) fn qmp_socket_path() -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    let name = format!(
        "mtex-qmp-{}-{}.sock",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    );
    let dir = std::env::temp_dir();
    // A Unix socket's path is at most 107 bytes.
    if dir.as_os_str().len() + name.len() < 100 {
        dir.join(name)
    } else {
        Path::new("/tmp").join(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// QEMU 10.0's `info registers` for AArch64 (vector registers cut).
    const INFO_REGISTERS: &str = "CPU#0
 PC=00000000410057a0 X00=00000000000003e8 X01=0000000000000004
X02=000000004112aee0 X03=0000000000000000 X04=0000000000000000
X29=0000000000000000 X30=0000000041001e6c  SP=000000004112a540
PSTATE=600003c5 -ZC- EL1h  SVCR=00000000 --  BTYPE=0     FPCR=00000000 FPSR=00000000
Q00=0000000000000000:0000000000000000 Q01=0000000000000000:0000000000000000
";

    #[test]
    fn the_place_of_the_cpu_is_read_from_info_registers() {
        let cpu = parse_registers(INFO_REGISTERS).unwrap();
        assert_eq!(
            (cpu.pc, cpu.pstate, cpu.el()),
            (0x4100_57a0, 0x6000_03c5, 1)
        );
        assert_eq!(
            cpu.describe(),
            "guest at pc 0x410057a0, EL1 (PSTATE 0x600003c5)"
        );
        // In the hypervisor, with syndrome registers shown.
        let el2 = INFO_REGISTERS
            .replace("PSTATE=600003c5", "PSTATE=000003c9")
            .replace("BTYPE=0", "ESR_EL2=5a000000 FAR_EL2=40001000");
        assert_eq!(
            parse_registers(&el2).unwrap().describe(),
            "CPU in the hypervisor at pc 0x410057a0, EL2 (PSTATE 0x3c9), ESR_EL2 0x5a000000, FAR_EL2 0x40001000"
        );
        assert_eq!(parse_registers("CPU#0\n X00=0\n"), None);
        // `info registers -a` on two CPUs: both places, in order.
        let two = format!(
            "{INFO_REGISTERS}{}",
            INFO_REGISTERS
                .replace("CPU#0", "CPU#1")
                .replace("PC=00000000410057a0", "PC=0000000041000000")
                .replace("PSTATE=600003c5", "PSTATE=000003c9")
        );
        let cpus = parse_all_registers(&two);
        assert_eq!(cpus.len(), 2);
        assert_eq!(
            describe_all(&cpus).unwrap(),
            "CPU 0: guest at pc 0x410057a0, EL1 (PSTATE 0x600003c5); \
             CPU 1: CPU in the hypervisor at pc 0x41000000, EL2 (PSTATE 0x3c9)"
        );
        // One CPU is named as before; none is None.
        assert_eq!(
            describe_all(&parse_all_registers(INFO_REGISTERS)).unwrap(),
            "guest at pc 0x410057a0, EL1 (PSTATE 0x600003c5)"
        );
        assert_eq!(describe_all(&[]), None);
        assert_eq!(parse_registers(""), None);
    }
}
