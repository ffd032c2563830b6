//! Instructions through which a guest can see its clock: its virtual counter, directly or
//! through the timer's state or an interrupt the timer raises. Between two exits, a CPU
//! that ran none of them cannot have seen its clock, so the hypervisor may set that clock
//! back to the machine's guest time (`mtex_vm::guest_clock`) without the guest ever
//! seeing it go back.

/// MRS (L = 1, op0 = 2 or 3: bits 31:20 = 1101 0101 0011).
const MRS_TOP: u32 = 0xd53;

/// Any MRS in the generic timer's block (CRn = 14: CNTVCT_EL0, CNTVCTSS_EL0, CNTV_TVAL_EL0,
/// CNTV_CTL_EL0's ISTATUS …) or the interrupt block (CRn = 12: ISR_EL1, the GIC CPU
/// interface's acknowledge and pending registers), and WFI, WFE, WFIT, WFET (a wait ends
/// when the timer fires). Loads from the GIC's memory-mapped pending registers are not
/// recognised.
pub fn observes_guest_clock(word: u32) -> bool {
    let crn = (word >> 12) & 0xf;
    if word >> 20 == MRS_TOP {
        return matches!(crn, 12 | 14);
    }
    // WFE = d503205f, WFI = d503207f; WFET = d5031000 | Rd, WFIT = d5031020 | Rd.
    matches!(word, 0xd503_205f | 0xd503_207f) || word & 0xffff_ffc0 == 0xd503_1000
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timer_and_interrupt_reads_and_waits_see_the_clock() {
        // Encodings from binutils' assembler.
        for w in [
            0xd53b_e040, // mrs x0, cntvct_el0
            0xd53b_e0c1, // mrs x1, cntvctss_el0
            0xd53b_e300, // mrs x0, cntv_tval_el0
            0xd53b_e320, // mrs x0, cntv_ctl_el0
            0xd53b_e020, // mrs x0, cntpct_el0
            0xd538_c100, // mrs x0, isr_el1
            0xd538_cc00, // mrs x0, icc_iar1_el1
            0xd538_cc40, // mrs x0, icc_hppir1_el1
            0xd503_207f, // wfi
            0xd503_205f, // wfe
            0xd503_1003, // wfet x3
            0xd503_1023, // wfit x3
        ] {
            assert!(observes_guest_clock(w), "{w:#x}");
        }
    }

    #[test]
    fn other_instructions_do_not() {
        for w in [
            0xd538_d080, // mrs x0, tpidr_el1
            0xd538_1000, // mrs x0, sctlr_el1
            0xd51b_e040, // msr cntvct_el0 (no such write: an MSR all the same)
            0xd51b_e320, // msr cntv_ctl_el0, x0
            0xd503_201f, // nop
            0xd503_203f, // yield
            0xd503_209f, // sev
            0xd503_233f, // paciasp
            0xf940_0000, // ldr x0, [x0]
            0x9100_0400, // add x0, x0, #1
            0xd65f_03c0, // ret
        ] {
            assert!(!observes_guest_clock(w), "{w:#x}");
        }
    }
}
