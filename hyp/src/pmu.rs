//! The hypervisor's slice of the PMU: the top three event counters, reserved for EL2 through
//! MDCR_EL2.HPMN, count instructions (event 0x08) at EL2, EL1 and EL0 separately.
//!
//! aarch64-cpu has no accessors for the PMU's EL0 registers, hence the few `mrs`/`msr` here.

use aarch64_cpu::registers::MDCR_EL2;
use tock_registers::interfaces::Writeable;

/// INST_RETIRED. QEMU counts it only under `-icount`.
const EVENT_INST_RETIRED: u64 = 0x08;
/// PMEVTYPER<n>_EL0 filter bits: P (don't count EL1), U (don't count EL0), NSH (count EL2).
const P: u64 = 1 << 31;
const U: u64 = 1 << 30;
const NSH: u64 = 1 << 27;
/// MDCR_EL2.HPME: enables the counters at and above HPMN.
const HPME: u64 = 1 << 7;

macro_rules! sysreg_read {
    ($name:literal) => {{
        let v: u64;
        // SAFETY: reading a PMU register has no side effects.
        unsafe { core::arch::asm!(concat!("mrs {}, ", $name), out(reg) v) };
        v
    }};
}

macro_rules! sysreg_write {
    ($name:literal, $v:expr) => {{
        let v: u64 = $v;
        // SAFETY: the PMU registers written here only configure counting of events.
        unsafe { core::arch::asm!(concat!("msr ", $name, ", {}"), in(reg) v) };
    }};
}

/// Counters `first`, `first + 1`, `first + 2` count EL2, EL1, EL0 instructions.
#[derive(Clone, Copy)]
pub struct Pmu {
    first: u64,
}

impl Pmu {
    /// Reserves and starts the counters; None (with the whole PMU left to the guest) when the
    /// PMU has fewer than three counters or does not count instructions.
    pub fn init() -> Option<Self> {
        let n = (sysreg_read!("pmcr_el0") >> 11) & 0x1f;
        let counts_instructions = sysreg_read!("pmceid0_el0") & (1 << EVENT_INST_RETIRED) != 0;
        if n < 3 || !counts_instructions {
            MDCR_EL2.set(n);
            return None;
        }
        let first = n - 3;
        MDCR_EL2.set(first | HPME);
        let pmu = Self { first };
        for (i, filter) in [(0, P | U | NSH), (1, U), (2, P)] {
            pmu.select(i);
            sysreg_write!("pmxevtyper_el0", filter | EVENT_INST_RETIRED);
            sysreg_write!("pmxevcntr_el0", 0);
        }
        sysreg_write!("pmcntenset_el0", 0b111 << first);
        aarch64_cpu::asm::barrier::isb(aarch64_cpu::asm::barrier::SY);
        Some(pmu)
    }

    fn select(&self, i: u64) {
        sysreg_write!("pmselr_el0", self.first + i);
        aarch64_cpu::asm::barrier::isb(aarch64_cpu::asm::barrier::SY);
    }

    fn counter(&self, i: u64) -> u64 {
        // PMSELR_EL0 is the guest's: put it back.
        let guest_selection = sysreg_read!("pmselr_el0");
        self.select(i);
        let v = sysreg_read!("pmxevcntr_el0");
        sysreg_write!("pmselr_el0", guest_selection);
        v
    }

    /// Instructions so far at EL2.
    pub fn el2(&self) -> u64 {
        self.counter(0)
    }

    /// Instructions so far at EL2, EL1, EL0.
    pub fn read(&self) -> [u64; 3] {
        [self.counter(0), self.counter(1), self.counter(2)]
    }
}
