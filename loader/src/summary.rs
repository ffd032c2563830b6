//! One line per part of the machine the loader found, naming where it was read from, so a
//! boot log says what the hypervisor was told.

use core::fmt::{self, Write};
use mtex_platform::{BootPath, ConsoleKind, Machine, PsciConduit};

use crate::PREFIX;

/// Where each part comes from on a boot path.
struct Sources {
    console: &'static str,
    gic: &'static str,
    timers: &'static str,
    psci: &'static str,
    cpus: &'static str,
}

const fn sources(path: BootPath) -> Sources {
    match path {
        BootPath::UefiAcpi => Sources {
            console: "acpi spcr",
            gic: "acpi madt",
            timers: "acpi gtdt",
            psci: "acpi fadt",
            cpus: "acpi madt",
        },
        BootPath::UefiDtb | BootPath::KernelDtb => Sources {
            console: "dt stdout-path",
            gic: "dt gic",
            timers: "dt /timer",
            psci: "dt /psci",
            cpus: "dt /cpus",
        },
    }
}

/// CPUs listed by MPIDR on the cpus line before the rest are only counted.
const CPUS_SHOWN: usize = 8;

/// Writes one `mtex-loader: ` line per part found in `m` (RAM from the UEFI memory map).
pub fn write(out: &mut impl Write, m: &Machine, path: BootPath) -> fmt::Result {
    let src = sources(path);
    if m.console.base != 0 {
        let kind = match m.console.kind() {
            Some(ConsoleKind::Pl011) => "pl011",
            Some(ConsoleKind::SbsaGeneric) => "sbsa-uart",
            None => "(unknown kind)",
        };
        writeln!(
            out,
            "{PREFIX}console {kind} at {:#x} ({})",
            m.console.base, src.console
        )?;
    }
    if m.gic.gicd != 0 || m.gic.gicr != 0 {
        writeln!(
            out,
            "{PREFIX}gic v3: distributor at {:#x}, redistributors at {:#x} ({:#x} bytes) ({})",
            m.gic.gicd, m.gic.gicr, m.gic.gicr_size, src.gic
        )?;
    }
    if m.hyp_timer_intid != 0 || m.vtimer_intid != 0 {
        writeln!(
            out,
            "{PREFIX}timers: hypervisor intid {}, virtual intid {} ({})",
            m.hyp_timer_intid, m.vtimer_intid, src.timers
        )?;
    }
    if let Some(conduit) = m.psci() {
        let name = match conduit {
            PsciConduit::Smc => "smc",
            PsciConduit::Hvc => "hvc",
        };
        writeln!(out, "{PREFIX}psci over {name} ({})", src.psci)?;
    }
    let cpus = m.cpus();
    if !cpus.is_empty() {
        write!(
            out,
            "{PREFIX}cpus: {} (mpidr",
            cpus.len() + m.cpus_dropped as usize
        )?;
        for (i, mpidr) in cpus.iter().take(CPUS_SHOWN).enumerate() {
            write!(out, "{}{mpidr:#x}", if i == 0 { " " } else { ", " })?;
        }
        if cpus.len() > CPUS_SHOWN {
            write!(out, ", ...")?;
        }
        write!(out, ")")?;
        if m.cpus_dropped != 0 {
            write!(out, ", {} beyond the table", m.cpus_dropped)?;
        }
        writeln!(out, " ({})", src.cpus)?;
    }
    let ram = m.ram();
    if let (Some(first), Some(last)) = (ram.first(), ram.last()) {
        let total: u64 = ram.iter().map(|r| r.size).sum();
        write!(
            out,
            "{PREFIX}ram: {} MiB in {} range{}, {:#x}..{:#x}",
            total >> 20,
            ram.len(),
            if ram.len() == 1 { "" } else { "s" },
            first.base,
            last.end()
        )?;
        if m.ram_dropped != 0 {
            write!(out, ", {} more ranges beyond the table", m.ram_dropped)?;
        }
        writeln!(out, " (uefi memory map)")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::String;

    #[test]
    fn qemu_virt_summary() {
        let m = mtex_platform::qemu_virt::machine(0x4000_0000, 1 << 30);
        let mut s = String::new();
        write(&mut s, &m, BootPath::UefiAcpi).unwrap();
        let lines: alloc::vec::Vec<&str> = s.lines().collect();
        assert_eq!(
            lines[0],
            "mtex-loader: console pl011 at 0x9000000 (acpi spcr)"
        );
        assert!(lines.iter().all(|l| l.starts_with(PREFIX)));
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with("mtex-loader: psci over smc"))
        );
        assert!(
            lines
                .last()
                .unwrap()
                .starts_with("mtex-loader: ram: 1024 MiB in 1 range, 0x40000000..0x80000000")
        );
        let mut empty = String::new();
        write(&mut empty, &Machine::default(), BootPath::UefiDtb).unwrap();
        assert_eq!(empty, "");
    }
}
