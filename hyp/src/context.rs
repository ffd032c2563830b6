//! The guest's register context as the exception vectors save it on the EL2 stack.

use arm_sysregs::el2::registers::SpsrEl2;
use core::mem::{offset_of, size_of};
use mtex_abi::report::GuestState;
use mtex_arch::el2_bits::spsr;

/// General-purpose registers, ELR_EL2 and SPSR_EL2 of the interrupted guest. The layout is
/// shared with the assembly in `entry.rs`, hence `repr(C)` and the asserts below.
#[repr(C)]
#[derive(Clone, Debug)]
pub struct GuestContext {
    pub x: [u64; 31],
    pub elr: u64,
    pub spsr: u64,
    _pad: u64,
}

/// Bytes the vectors reserve on the stack; a multiple of 16 keeps SP aligned.
pub const CONTEXT_SIZE: usize = 272;
pub const ELR_OFFSET: usize = 248;
pub const SPSR_OFFSET: usize = 256;

const _: () = assert!(size_of::<GuestContext>() == CONTEXT_SIZE);
const _: () = assert!(CONTEXT_SIZE.is_multiple_of(16));
const _: () = assert!(offset_of!(GuestContext, x) == 0);
const _: () = assert!(offset_of!(GuestContext, elr) == ELR_OFFSET);
const _: () = assert!(offset_of!(GuestContext, spsr) == SPSR_OFFSET);

impl GuestContext {
    /// A context that starts the guest at `entry` in EL1h with DAIF masked and x0 = `x0`.
    pub fn boot(entry: u64, x0: u64) -> Self {
        let mut x = [0; 31];
        x[0] = x0;
        Self {
            x,
            elr: entry,
            spsr: spsr::EL1H_MASKED,
            _pad: 0,
        }
    }

    /// Register `n` as an instruction operand reads it (31 is XZR).
    #[inline(always)]
    pub fn reg(&self, n: u8) -> u64 {
        self.x.get(n as usize).copied().unwrap_or(0)
    }

    /// Where the guest is and its PSTATE.TCO.
    #[inline(always)]
    pub fn state(&self) -> GuestState {
        let spsr = SpsrEl2::from_bits_retain(self.spsr);
        GuestState {
            pc: self.elr,
            // M[3:2]: the exception level the guest was at.
            el: spsr.m_3_0() >> 2,
            tco: spsr.contains(SpsrEl2::TCO),
        }
    }

    /// Steps over the trapped instruction (MSR, SMC: ELR points at it).
    #[inline(always)]
    pub fn skip_instruction(&mut self) {
        self.elr += 4;
    }

    /// Sets the SMCCC results x0..x3.
    pub fn set_results(&mut self, r: &[u64]) {
        self.x[..r.len()].copy_from_slice(r);
    }
}
