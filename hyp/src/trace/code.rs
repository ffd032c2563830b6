//! Reading guest code: instruction words only from guest RAM, through the code-page cache
//! the step fast path shares (`FastStep`), and forgetting everything cached about code (the
//! page's translation, the run plans) when the guest may have changed its code or its
//! mappings. Apart from the step path because it is the engine's one view of guest code,
//! and the rule for when it is stale must be read in one place.

use super::*;

/// Reads instruction words of the code page `c` caches (None elsewhere): what runs are
/// planned and checked from. The page is captured now; the reader does not follow the cache.
pub(super) fn cached_page_words(c: &FastStep) -> impl Fn(u64) -> Option<u32> + Copy + use<> {
    let (va_page, pa_page) = (c.va_page, c.pa_page);
    move |a: u64| {
        // SAFETY: `pa_page` is the host memory behind a page of guest RAM (checked when the
        // page was cached), which EL2 identity-maps as Normal memory; reading an instruction
        // word has no side effects.
        (pa_page != 0 && a & !0xfff == va_page)
            .then(|| unsafe { core::ptr::read_volatile((pa_page | (a & 0xffc)) as *const u32) })
    }
}

impl Tracer {
    /// A trapped write of a register that decides what an address translates to (SCTLR_EL1,
    /// TCR_EL1, the TTBRs, MAIR_EL1) was done for the guest: the code page's translation
    /// and the plans go, as at a TLBI. The caches are keyed on the TTBRs' values, not on
    /// these registers nor on the tables behind them: a table changed without a TLBI and
    /// then one of these written (even with its own value, which makes QEMU flush its TLB)
    /// is fetched from anew by the CPU, and must be by the engine.
    pub fn note_translation_change(&mut self) {
        if self.active {
            self.forget_code();
        }
    }

    /// Notes the pages a store the judge did not translate writes (`note_store`).
    #[cold]
    pub(super) fn note_unchecked_store(&mut self, ctx: &GuestContext, insn: &Insn, sp: u64) {
        if !self.any_plan_page {
            return;
        }
        let Some((va, len)) = mtex_trace::run::data_write(insn, &ctx.x, sp, self.block_granules)
        else {
            return;
        };
        for a in [va, va.wrapping_add(len - 1)] {
            let page = translate(a, false).map(|(ipa, _)| ipa & !0xfff);
            self.note_store(page);
        }
    }

    /// Trusts nothing cached about guest code until it is read again: the code page's
    /// translation is dropped, and every plan is checked word by word before its next use.
    pub(super) fn recheck_code(&mut self) {
        this_block().pa_page = 0;
        self.code_gen += 1;
    }

    /// Drops everything cached about guest code: the code page's translation and the run
    /// plans.
    #[cold]
    pub(super) fn forget_code(&mut self) {
        this_block().pa_page = 0;
        self.plan_keys.fill([u64::MAX; 3]);
        self.no_run.fill(u64::MAX);
        if self.any_plan_page {
            self.plan_pages.fill(0);
            self.any_plan_page = false;
        }
    }

    /// Reads the guest instruction at `pc`, only from guest RAM, through the code-page cache
    /// the fast path shares. The cache is dropped at every TLBI the guest executes under
    /// trace (`forget_code`): a live code mapping changed in place must be followed by one.
    #[inline(always)]
    pub(super) fn fetch(&mut self, pc: u64, as_el0: bool, sctlr: u64) -> Option<u32> {
        let mut c = this_block();
        // Field-by-field compares: an array compare or struct copy becomes a byte-wise
        // memcmp/memcpy on this strict-alignment target.
        let (t0, t1) = (read_ttbr0_el1().bits(), read_ttbr1_el1().bits());
        let mode = (sctlr & 1) | (as_el0 as u64) << 1;
        let va_page = pc & !0xfff;
        let hit = c.pa_page != 0
            && c.va_page == va_page
            && c.ttbr0 == t0
            && c.ttbr1 == t1
            && c.mode == mode;
        if !hit {
            // AT S1E1R even for EL0 code: execute-only user pages are not EL0-readable, but
            // EL1 can read them (AT ignores PAN).
            // Stage 1 gives the guest's physical address; stage 2 (mmu.rs) maps guest RAM
            // at a fixed offset, and nothing else the guest could execute from.
            let (ipa, _) = translate(pc, false)?;
            let pa_page = self.guest_ram.pa_of(ipa & !0xfff, 0x1000)?;
            c.va_page = va_page;
            c.ttbr0 = t0;
            c.ttbr1 = t1;
            c.mode = mode;
            c.pa_page = pa_page;
        }
        let pa = c.pa_page | (pc & 0xffc);
        // SAFETY: `pa` lies in the host memory behind a page of guest RAM (checked when the
        // page was cached), which EL2 identity-maps as Normal memory; reading an instruction word has no side effects.
        Some(unsafe { core::ptr::read_volatile(pa as *const u32) })
    }
}
