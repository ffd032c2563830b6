//! The discovered machine: a plain `#[repr(C)]` value, because the UEFI loader hands it to the
//! hypervisor in memory (inside [`crate::BootInfo`]). Enumerations are stored as `u32` and
//! decoded by accessors, so a corrupt value is an error rather than undefined behaviour.

/// A physical memory range.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Region {
    pub base: u64,
    pub size: u64,
}

impl Region {
    pub const fn new(base: u64, size: u64) -> Self {
        Region { base, size }
    }
    pub const fn end(&self) -> u64 {
        self.base + self.size
    }
    pub const fn overlaps(&self, other: &Region) -> bool {
        self.base < other.end() && other.base < self.end()
    }
    pub const fn contains(&self, other: &Region) -> bool {
        other.base >= self.base && other.end() <= self.end()
    }
}

/// How PSCI calls reach firmware from EL2.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum PsciConduit {
    /// SMC to EL3 firmware (or QEMU's built-in PSCI under `virtualization=on`).
    Smc = 1,
    /// HVC: firmware that expects its OS at EL1 under a hypervisor providing PSCI. From EL2
    /// an HVC would call the hypervisor itself, so mtex cannot use this conduit.
    Hvc = 2,
}

/// The console UART's programming model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum ConsoleKind {
    /// Arm PL011 (ACPI SPCR interface type 0x03, DT "arm,pl011").
    Pl011 = 1,
    /// SBSA Generic UART (SPCR type 0x0E or 0x0D): a PL011 subset with UARTDR and UARTFR
    /// only; firmware owns baud rate and line control, so mtex must not program them.
    SbsaGeneric = 2,
}

/// The console: where the report stream goes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Console {
    /// [`ConsoleKind`] as `u32`.
    pub kind: u32,
    pub _reserved: u32,
    pub base: u64,
}

impl Console {
    pub const fn new(kind: ConsoleKind, base: u64) -> Self {
        Console {
            kind: kind as u32,
            _reserved: 0,
            base,
        }
    }
    pub fn kind(&self) -> Option<ConsoleKind> {
        match self.kind {
            1 => Some(ConsoleKind::Pl011),
            2 => Some(ConsoleKind::SbsaGeneric),
            _ => None,
        }
    }
}

/// A GICv3 (mtex needs system-register CPU interfaces and list registers; GICv2 is refused).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Gic {
    /// Distributor frame (64 KiB).
    pub gicd: u64,
    /// First redistributor frame of the region holding this CPU's redistributor.
    pub gicr: u64,
    /// Size of that redistributor region (all frames the hypervisor may scan).
    pub gicr_size: u64,
}

/// The affinity fields of MPIDR_EL1 (Aff3 at 39:32, Aff2..Aff0 at 23:0): what names a CPU in
/// firmware's tables and in GICR_TYPER.
pub const MPIDR_AFFINITY: u64 = 0xff_00ff_ffff;

/// Most RAM ranges and CPUs a [`Machine`] lists; more are counted in the `*_dropped` fields,
/// never silently lost.
pub const MAX_RAM_REGIONS: usize = 32;
/// Two sockets of the largest Arm servers (AmpereOne: 192 cores each) fit.
pub const MAX_CPUS: usize = 512;

/// Everything the hypervisor needs from the machine it runs on.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Machine {
    pub console: Console,
    pub gic: Gic,
    /// INTID of the EL2 non-secure physical timer (CNTHP): the hypervisor's watchdog.
    pub hyp_timer_intid: u32,
    /// INTID of the EL1 virtual timer (CNTV): the guest's tick.
    pub vtimer_intid: u32,
    /// [`PsciConduit`] as `u32`.
    pub psci: u32,
    pub ram_count: u32,
    pub ram: [Region; MAX_RAM_REGIONS],
    /// RAM ranges that did not fit `ram`.
    pub ram_dropped: u32,
    pub cpu_count: u32,
    /// MPIDR_EL1 affinity values (Aff3..Aff0) of the CPUs firmware lists.
    pub cpus: [u64; MAX_CPUS],
    pub cpus_dropped: u32,
    pub _reserved: u32,
}

impl Default for Machine {
    fn default() -> Self {
        Machine {
            console: Console::default(),
            gic: Gic::default(),
            hyp_timer_intid: 0,
            vtimer_intid: 0,
            psci: 0,
            ram_count: 0,
            ram: [Region::default(); MAX_RAM_REGIONS],
            ram_dropped: 0,
            cpu_count: 0,
            cpus: [0; MAX_CPUS],
            cpus_dropped: 0,
            _reserved: 0,
        }
    }
}

/// What is missing or unusable in a discovered machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MachineError {
    NoConsole,
    NoGic,
    NoTimer,
    NoPsci,
    PsciHvc,
    NoRam,
}

impl MachineError {
    pub const fn describe(self) -> &'static str {
        match self {
            MachineError::NoConsole => "no usable console UART (SPCR / stdout-path)",
            MachineError::NoGic => "no GICv3 distributor and redistributor (MADT / DT)",
            MachineError::NoTimer => "no timer interrupts (GTDT / DT /timer)",
            MachineError::NoPsci => "no PSCI (FADT boot flags / DT /psci)",
            MachineError::PsciHvc => "firmware offers PSCI over HVC only, which EL2 cannot call",
            MachineError::NoRam => "no RAM listed",
        }
    }
}

impl Machine {
    pub fn psci(&self) -> Option<PsciConduit> {
        match self.psci {
            1 => Some(PsciConduit::Smc),
            2 => Some(PsciConduit::Hvc),
            _ => None,
        }
    }
    pub fn set_psci(&mut self, c: PsciConduit) {
        self.psci = c as u32;
    }

    /// Adds a RAM range, or counts it as dropped when the table is full.
    pub fn push_ram(&mut self, r: Region) {
        match self.ram.get_mut(self.ram_count as usize) {
            Some(slot) => {
                *slot = r;
                self.ram_count += 1;
            }
            None => self.ram_dropped += 1,
        }
    }

    pub fn ram(&self) -> &[Region] {
        &self.ram[..(self.ram_count as usize).min(MAX_RAM_REGIONS)]
    }

    /// Adds a CPU's MPIDR, or counts it as dropped when the table is full.
    pub fn push_cpu(&mut self, mpidr: u64) {
        match self.cpus.get_mut(self.cpu_count as usize) {
            Some(slot) => {
                *slot = mpidr;
                self.cpu_count += 1;
            }
            None => self.cpus_dropped += 1,
        }
    }

    pub fn cpus(&self) -> &[u64] {
        &self.cpus[..(self.cpu_count as usize).min(MAX_CPUS)]
    }

    /// Checks that the hypervisor can run on this machine: every field it uses is present
    /// and usable.
    pub fn validate(&self) -> Result<(), MachineError> {
        if self.console.kind().is_none() || self.console.base == 0 {
            return Err(MachineError::NoConsole);
        }
        if self.gic.gicd == 0 || self.gic.gicr == 0 || self.gic.gicr_size == 0 {
            return Err(MachineError::NoGic);
        }
        // Both are PPIs (16..32).
        if !(16..32).contains(&self.hyp_timer_intid) || !(16..32).contains(&self.vtimer_intid) {
            return Err(MachineError::NoTimer);
        }
        match self.psci() {
            None => return Err(MachineError::NoPsci),
            Some(PsciConduit::Hvc) => return Err(MachineError::PsciHvc),
            Some(PsciConduit::Smc) => {}
        }
        if self.ram().is_empty() {
            return Err(MachineError::NoRam);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qemu_virt_validates_and_each_missing_part_is_named() {
        let m = crate::qemu_virt::machine(0x4000_0000, 512 << 20);
        assert_eq!(m.validate(), Ok(()));
        let mut no_uart = m;
        no_uart.console.kind = 7;
        assert_eq!(no_uart.validate(), Err(MachineError::NoConsole));
        let mut hvc = m;
        hvc.set_psci(PsciConduit::Hvc);
        assert_eq!(hvc.validate(), Err(MachineError::PsciHvc));
        let mut spi = m;
        spi.hyp_timer_intid = 40;
        assert_eq!(spi.validate(), Err(MachineError::NoTimer));
        let mut nogic = m;
        nogic.gic.gicr = 0;
        assert_eq!(nogic.validate(), Err(MachineError::NoGic));
    }

    #[test]
    fn overflowing_tables_count_what_they_drop() {
        let mut m = Machine::default();
        for i in 0..(MAX_RAM_REGIONS as u64 + 3) {
            m.push_ram(Region::new(i << 30, 1 << 20));
        }
        assert_eq!(m.ram().len(), MAX_RAM_REGIONS);
        assert_eq!(m.ram_dropped, 3);
        for i in 0..(MAX_CPUS as u64 + 1) {
            m.push_cpu(i);
        }
        assert_eq!((m.cpus().len(), m.cpus_dropped), (MAX_CPUS, 1));
    }
}
