//! The step engine's breakpoint runs (`mtex_trace::run` plans them): arming one at a stop,
//! with its predicted accesses judged and only the breakpoints that change rewritten;
//! retiring it from where the guest stopped; executing the direct branch a run ends at;
//! and knowing which code pages hold plans, so that a traced store there makes them be
//! checked again.

use super::*;

use crate::debug::{BCR_ENABLED, set_breakpoint};
use mtex_trace::callstack::Top;

/// Shortest run worth making: a run whose nearest exit is the next instruction saves no
/// exit over a step (measured on the kernel matrix: allowing them from non-inert starts
/// changes no exit count and costs 5% more EL2 instructions).
const RUN_MIN_DEPTH: u32 = 2;

impl Tracer {
    /// A run ended: count what it executed, known from where the guest stopped (a planned
    /// exit; inside the run, if an interrupt stopped it; or, at an EL1 vector, the
    /// instruction that faulted, which did not complete): the root if the run got past it,
    /// the inert instructions by number and the static ones on the path one by one.
    /// A stage-2 data abort (Linux mode's doorbell) stops a run on the aborted instruction,
    /// which is not counted: it never executed (see `Tracer::retire`). Returns whether it
    /// stopped at an EL1 synchronous vector: an exception was taken (no plan reaches one).
    pub(super) fn retire_run(
        &mut self,
        ctx: &GuestContext,
        stage2_abort: bool,
        controls: &Controls,
    ) -> bool {
        self.disarm_run();
        let now = ctx.state();
        let vbar = read_vbar_el1().bits();
        let at_sync_vector = now.el == 1 && (now.pc == vbar + 0x200 || now.pc == vbar + 0x400);
        let stopped_at = if at_sync_vector {
            self.tally.counts_mut().entries.note(now.pc - vbar);
            self.engine.entries_in_runs += 1;
            read_elr_el1().bits()
        } else {
            now.pc
        };
        // The instruction the run stopped on began and was abandoned when a synchronous
        // exception was taken on it after decoding (an SVC returns past itself: not on it);
        // the doorbell's is a stage-2 data abort. ESR_EL1 is read only at a vector.
        let abandoned_to = if stage2_abort {
            Some(ExceptionClass::DataAbortLower)
        } else if at_sync_vector {
            Some(mtex_arch::Esr(read_esr_el1().bits()).ec())
                .filter(|&ec| mtex_trace::counts::began(ec))
        } else {
            None
        };
        if let Some(ec) = abandoned_to {
            self.tally.counts_mut().note_abandoned(self.run_el, ec);
        }
        let fetch = cached_page_words(&this_block());
        let plan = &self.plans[self.run_slot];
        let Some(path) = plan.path(stopped_at, fetch) else {
            // Not in the plan, or the code on the path was rewritten under the run.
            let counts = self.tally.counts_mut();
            counts.runs_lost += 1;
            if now.tco != self.pending_tco {
                counts.tco_changes += 1;
            }
            self.forget_code();
            return at_sync_vector;
        };
        let el = self.run_el;
        self.stopped_at_leaf = !at_sync_vector && plan.is_leaf(stopped_at) && path.depth > 0;
        let mut inert = path.depth as u64 - path.n_statics as u64;
        if plan.dynamic_root {
            if path.depth == 0 {
                // The root did not complete: an interrupt before it, or an exception on it.
                if at_sync_vector {
                    access_faulted(&mut self.tally, &self.pending);
                }
            } else {
                self.tally.retire(&self.pending);
                inert -= 1;
                if plan.exclusive_root() {
                    self.impdef
                        .load_exclusive(self.pending.read.views().architectural);
                }
            }
        }
        if at_sync_vector && let Some(k) = plan.predicted_at(stopped_at) {
            // A predicted access took an exception instead of completing.
            access_faulted(&mut self.tally, &self.predicted[k]);
        }
        // An exclusive sequence's store-exclusive, judged now with the registers it used:
        // the run stopped right after it (its planned exit — or, at the vector, an exception
        // there first, such as an instruction abort on the next page, which the Arm ARM ranks
        // above the breakpoint), or on it with an exception. At a vector the PSTATE it ran
        // with is SPSR_EL1's (exception entry set TCO); the registers are unchanged.
        let stx = plan.exclusive_store.and_then(|(a, rs)| {
            let after = stopped_at == a.wrapping_add(4);
            let on = at_sync_vector && stopped_at == a;
            let word = plan.word_at(a)?;
            (after || on).then_some((a, rs, word, after))
        });
        let spsr = if at_sync_vector {
            read_spsr_el1().bits()
        } else {
            ctx.spsr
        };
        let stx_judged = stx.map(|(a, rs, word, after)| {
            let p = self.judge_now(ctx, spsr, controls, el, a, word);
            if after {
                self.impdef
                    .store_exclusive(p.write.views().architectural, self.tally.counts_mut());
            }
            (p, after && ctx.reg(rs) != 0, after)
        });
        if let Some((p, _, false)) = &stx_judged {
            access_faulted(&mut self.tally, p);
        }
        if let Some(t) = self.tally.profile_mut() {
            // The inert instructions one by one, with their PCs (the tally takes them by
            // number; the host checks the two agree).
            self.plans[self.run_slot].inert_on_path(&path, |pc| t.note_insn(pc, el));
        }
        let counts = self.tally.counts_mut();
        if el == 0 {
            counts.instructions_el0 += inert;
        } else {
            counts.instructions_el1 += inert;
        }
        // PSTATE.TCO along the path, as stepping would have seen it change: the changes are
        // the unequal neighbours in (TCO at the start, each MSR TCO's value, TCO now), which
        // the same whichever way the path is walked (backwards, here).
        let (blocks, now_tco) = (self.block_granules, now.tco);
        let mut tco = now_tco;
        let mut changes = 0;
        let (plan, tally, sites) = (&self.plans[self.run_slot], &mut self.tally, &mut self.sites);
        let (phase, predicted) = (self.phase, &self.predicted);
        let mut failed = false;
        plan.statics_on_path(&path, |pc, word, k| {
            if let Some(k) = k {
                tally.retire(&predicted[k]);
                return;
            }
            if let Some((p, stx_failed, true)) = &stx_judged
                && p.pc == pc
            {
                if *stx_failed {
                    // It failed: executed, but no access (as on the step path).
                    failed = true;
                    tally.counts_mut().failed_store_exclusives += 1;
                    tally.retire(&Pending {
                        effect: Effect::None,
                        ..*p
                    });
                } else {
                    tally.retire(p);
                }
                return;
            }
            let p = Pending::of_static(pc, el, word, blocks);
            tally.retire(&p);
            if let Effect::TcoImm(v) = p.effect {
                changes += (v != tco) as u64;
                tco = v;
                note_tco_site(sites, tally, phase, pc, v);
            }
        });
        changes += (self.pending_tco != tco) as u64;
        self.tally.counts_mut().tco_changes += changes;
        if failed {
            self.exclusive_failed(ctx);
        } else if self.plans[self.run_slot].exclusive_store.is_some() {
            self.exclusive.run_succeeded();
        }
        at_sync_vector
    }

    /// An exclusive sequence's store-exclusive failed in a run. Without stepping nothing
    /// of the hypervisor's clears the monitor, so a run that fails again and again means the
    /// guest's sequence cannot succeed as planned: after `EXCLUSIVE_RETRIES` in a row the run
    /// ends with a record, never a spin.
    fn exclusive_failed(&mut self, ctx: &GuestContext) {
        if self.exclusive.run_failed() {
            crate::report::die(mtex_abi::report::ExitReason::TraceUnsupported {
                at: ctx.state(),
                reason: mtex_abi::report::Message::truncated(
                    "exclusive sequence run: the store-exclusive fails every time",
                ),
            });
        }
    }

    /// Back to stepping: breakpoints off (MDSCR_EL1.MDE clear: they stay programmed, and the
    /// next run rewrites only those that change), single-step on.
    pub(super) fn disarm_run(&mut self) {
        self.run_armed = false;
        if core::mem::take(&mut self.irqs_at_el2) {
            route_irqs_to_el2(false);
        }
        write_mdscr_el1(MdscrEl1::from_bits_retain(self.saved_mdscr | mdscr::SS));
    }

    /// Programs breakpoint `n` unless it already holds `addr` (0: disabled).
    #[inline(always)]
    fn put_breakpoint(&mut self, n: usize, addr: u64) {
        if self.bp_armed[n] != addr {
            self.bp_armed[n] = addr;
            set_breakpoint(n, addr, if addr == 0 { 0 } else { BCR_ENABLED });
        }
    }

    pub(super) fn clear_breakpoints(&mut self) {
        for n in 0..RUN_BREAKPOINTS {
            set_breakpoint(n, 0, 0);
        }
        self.bp_armed = [0; RUN_BREAKPOINTS];
    }

    /// Tries to let the guest run from `pc` (an inert or static instruction, or a checkable
    /// access already judged in `self.pending`) to the next instruction that matters; true if
    /// a run is armed.
    pub(super) fn arm_run(
        &mut self,
        ctx: &mut GuestContext,
        controls: &Controls,
        (pc, el, word): (u64, u8, u32),
    ) -> bool {
        // In EL1t an exception goes to VBAR_EL1 + 0x000, which has no breakpoint: step.
        if ctx.spsr & 0xf == 0b0100 {
            return false;
        }
        let c = this_block();
        let pa_page = c.pa_page;
        // Plan within the code page already translated for `pc`.
        let fetch = cached_page_words(&c);
        let vbar = read_vbar_el1().bits();
        // Code is translated by the one TTBR its half of the address space uses (VA bit 55):
        // kernel plans survive every switch of user address space.
        let (ttbr0, ttbr1) = if pc >> 55 & 1 == 1 {
            (0, c.ttbr1)
        } else {
            (c.ttbr0, 0)
        };
        drop(c);
        let key = pc ^ ttbr0 ^ ttbr1;
        let slot = ((pc >> 2) as usize) % NO_RUN_SLOTS;
        if self.no_run[slot] == key {
            self.engine.stepped_starts += 1;
            return false;
        }
        let exact = [pc, ttbr0, ttbr1];
        let ps = ((pc >> 2) as usize) % PLAN_SLOTS;
        let k = &self.plan_keys[ps];
        // A cached plan is used if its root still reads as it did, and, after a traced store
        // to a page with plans, if all of it does (rewritten in place, it would count the old
        // instructions; `Plan::path` checks the executed ones again afterwards).
        let fresh = k[0] == exact[0]
            && k[1] == exact[1]
            && k[2] == exact[2]
            && self.plans[ps].root_word() == Some(word)
            && (self.plan_gens[ps] == self.code_gen || self.plans[ps].still_matches(fetch));
        if !fresh {
            self.engine.plans_made += 1;
            self.plan_keys[ps] = [u64::MAX; 3];
            let plan = &mut self.plans[ps];
            // A plan that runs into an EL1 synchronous vector could not tell falling through
            // to it from an exception taken there (both hit the vector breakpoint): step.
            if !plan.build(pc, fetch)
                || (plan.min_leaf_depth() < RUN_MIN_DEPTH && !plan.exclusive_root())
                || plan.depth_of(vbar + 0x200).is_some()
                || plan.depth_of(vbar + 0x400).is_some()
                // Following call stacks, a run may not execute a call or a return unseen.
                || (self.stacks.is_some() && el == 1 && plan.calls_or_returns())
            {
                self.engine.stepped_starts += 1;
                self.no_run[slot] = key;
                return false;
            }
            self.plan_keys[ps] = exact;
            self.note_plan_page(pa_page);
        } else {
            self.engine.plans_reused += 1;
        }
        // Following call stacks, a run may not arrive unseen at the top call's return address
        // either (a direct branch back into the caller returns from it: `CallStack::arrive`).
        if el == 1
            && let Some(Top::Call { ra, .. }) = self.stacks.as_ref().and_then(CallStack::top)
            && self.plans[ps].depth_of(ra).is_some_and(|d| d > 0)
        {
            self.engine.stepped_starts += 1;
            return false;
        }
        if !self.stores_spare_code(ctx, ps, pa_page) {
            self.engine.stepped_starts += 1;
            return false;
        }
        self.plan_gens[ps] = self.code_gen;
        self.run_slot = ps;
        self.judge_predicted(ctx, controls, el);
        let n_leaves = self.plans[ps].n_leaves;
        for n in 0..MAX_LEAVES {
            let addr = if n < n_leaves {
                self.plans[ps].leaves[n].0
            } else {
                0
            };
            self.put_breakpoint(n, addr);
        }
        self.put_breakpoint(MAX_LEAVES, vbar + 0x200);
        self.put_breakpoint(MAX_LEAVES + 1, vbar + 0x400);
        // Linux mode: the guest's interrupts go to EL1, where a run would execute their
        // handlers untraced. While the guest can take one (PSTATE.I clear), physical
        // interrupts come to EL2 instead: the run stops where it was (counted up to there,
        // `retire_run`) and the guest takes the interrupt stepped.
        if self.irqs_to_guest && ctx.spsr & spsr::I == 0 {
            route_irqs_to_el2(true);
            self.irqs_at_el2 = true;
        }
        // Stepping off (with MDSCR_EL1.SS set the guest would step at once), breakpoints on.
        write_mdscr_el1(MdscrEl1::from_bits_retain(
            (self.saved_mdscr & !mdscr::SS) | mdscr::MDE,
        ));
        ctx.spsr &= !spsr::SS;
        this_block().pending_inert = 0;
        self.run_armed = true;
        self.run_el = el;
        self.pending_tco = ctx.spsr & spsr::TCO != 0;
        self.tally.counts_mut().runs += 1;
        true
    }

    /// Judges the access of `word` at `pc` with the registers as they are now (an exclusive
    /// sequence's store-exclusive, at the stop right after it).
    /// `spsr`: the PSTATE the instruction ran with (TCO, UAO, and the SP it used).
    fn judge_now(
        &mut self,
        ctx: &GuestContext,
        spsr: u64,
        controls: &Controls,
        el: u8,
        pc: u64,
        word: u32,
    ) -> Pending {
        let insn = decode::decode(word);
        let sp = match insn {
            Insn::Mem(m) if m.base == 31 => guest_sp(spsr),
            _ => 0,
        };
        let (p, pages) = judge(
            (pc, el),
            (spsr & spsr::TCO != 0, spsr & spsr::UAO != 0),
            insn,
            controls,
            (&ctx.x, sp),
            self.block_granules,
        );
        self.note_store(pages[0]);
        self.note_store(pages[1]);
        p
    }

    /// Translates the address of every store plan `ps` may execute (`Plan::stores`: the
    /// registers now give them) and notes the pages they write, so that plans on them are
    /// checked before their next use; false if one of them can write `code_pa_page`, the
    /// physical page the run executes from (through any mapping of it): such a run could
    /// rewrite and restore its own code unseen (`mtex_trace::run`), and is not made.
    fn stores_spare_code(&mut self, ctx: &GuestContext, ps: usize, code_pa_page: u64) -> bool {
        let mut nodes = self.plans[ps].store_nodes();
        if nodes == 0 {
            return true;
        }
        let sp = guest_sp(ctx.spsr);
        let mut spare = true;
        // By node: noting a store needs `self` while the plan is borrowed from it.
        while nodes != 0 {
            let i = nodes.trailing_zeros() as usize;
            nodes &= nodes - 1;
            let (_, word) = self.plans[ps].store_node(i);
            let insn = decode::decode(word);
            let Some((va, len)) =
                mtex_trace::run::data_write(&insn, &ctx.x, sp, self.block_granules)
            else {
                continue;
            };
            let last = va.wrapping_add(len - 1);
            let pages = if (va ^ last) >> 12 == 0 {
                [Some(va), None]
            } else {
                [Some(va), Some(last)]
            };
            for a in pages.into_iter().flatten() {
                // A store whose address does not translate faults instead of writing.
                let Some((ipa, _)) = translate(a, false) else {
                    continue;
                };
                let ipa_page = ipa & !0xfff;
                if self.guest_ram.pa_of(ipa_page, 0x1000) == Some(code_pa_page) {
                    spare = false;
                }
                self.note_store(Some(ipa_page));
            }
        }
        spare
    }

    /// Word and bit in `plan_pages` of host page `pa_page` (a page of guest RAM): its page
    /// number modulo the bitmap's bits, so that consecutive pages, as many as there are bits,
    /// each have their own.
    fn page_bit(&self, pa_page: u64) -> Option<(usize, u64)> {
        let bits = (self.plan_pages.len() as u64)
            .checked_mul(64)
            .filter(|&b| b != 0)?;
        let n = (pa_page >> 12) % bits;
        Some(((n / 64) as usize, 1 << (n % 64)))
    }

    /// Judges the armed plan's predicted accesses with the registers as they are now, which
    /// is what their address registers will hold when they run (`Plan::predicted`).
    fn judge_predicted(&mut self, ctx: &GuestContext, controls: &Controls, el: u8) {
        let plan = &self.plans[self.run_slot];
        if plan.n_predicted == 0 {
            return;
        }
        let (tco_now, uao) = (ctx.spsr & spsr::TCO != 0, ctx.spsr & spsr::UAO != 0);
        let mut stores = [None; 2 * mtex_trace::run::MAX_PREDICTED];
        let mut n_stores = 0;
        for (k, pc, word, tco) in plan.predicted() {
            let (p, pages) = judge(
                (pc, el),
                (tco.unwrap_or(tco_now), uao),
                decode::decode(word),
                controls,
                (&ctx.x, 0),
                self.block_granules,
            );
            stores[n_stores] = pages[0];
            stores[n_stores + 1] = pages[1];
            n_stores += 2;
            self.predicted[k] = p;
        }
        for page in stores {
            self.note_store(page);
        }
    }

    /// Remembers that plans exist for code in the page at `pa_page`.
    pub(super) fn note_plan_page(&mut self, pa_page: u64) {
        if let Some((w, bit)) = self.page_bit(pa_page) {
            self.plan_pages[w] |= bit;
            self.any_plan_page = true;
        }
    }

    /// A traced store to guest IPA page `ipa_page` is about to run: if it may rewrite planned
    /// code, plans are checked before their next use. Inlined down to its first test, as it
    /// runs twice at every step: with no plan (runs off, `step=plain`) it costs nothing more.
    #[inline(always)]
    pub(super) fn note_store(&mut self, ipa_page: Option<u64>) {
        if let Some(ipa) = ipa_page
            && self.any_plan_page
        {
            self.note_store_in_ram(ipa);
        }
    }

    #[inline(never)]
    fn note_store_in_ram(&mut self, ipa_page: u64) {
        // Not guest RAM: not code the hypervisor reads either.
        let Some(pa) = self.guest_ram.pa_of(ipa_page, 0x1000) else {
            return;
        };
        if let Some((w, bit)) = self.page_bit(pa)
            && self.plan_pages[w] & bit != 0
        {
            self.code_gen += 1;
        }
    }

    /// A run stopped at a leaf: if it is a direct branch (a loop's back edge, `Plan`), the
    /// engine executes it for the guest, so that the loop's next iteration starts with a run
    /// rather than a step. Safe where stepping it would be the same: the branch is on the page
    /// the run just executed from (so its fetch cannot fault), it cannot fault itself, and no
    /// virtual interrupt is pending that the guest would take before it.
    pub(super) fn emulate_branch(&mut self, ctx: &mut GuestContext, controls: &Controls) {
        if self.virq_pending && crate::vtimer::virq_still_pending() {
            return;
        }
        let st = ctx.state();
        let Some(word) = self.fetch(st.pc, st.el == 0, controls.sctlr_el1) else {
            return;
        };
        let Some((target, link)) = mtex_trace::run::branch_outcome(word, st.pc, ctx.spsr, &ctx.x)
        else {
            return;
        };
        if link && self.stacks.is_some() && st.el == 1 {
            // Following call stacks, a call is stepped (the stack moves when it retires).
            return;
        }
        if link {
            ctx.x[30] = st.pc.wrapping_add(4);
        }
        ctx.elr = target;
        if st.el == 1
            && let Some(cs) = &mut self.stacks
        {
            // As if stepped (`Tracer::follow_stack`): a branch to the top call's return
            // address with its SP returns from it.
            cs.arrive(target, || guest_sp(ctx.spsr));
        }
        // Guest time follows the guest's own execution (entry.rs): the branch it did not
        // execute advances its clock as executing it would have, one tick of the counter
        // per instruction under `-icount shift=0` at 1 GHz (as entry.rs's constants count).
        // Without this, a timer interrupt would land elsewhere than on the stepped path.
        crate::guest_clock::advance_guest(1);
        if let Some(t) = self.tally.profile_mut() {
            t.note_insn(st.pc, st.el);
        }
        let counts = self.tally.counts_mut();
        if st.el == 0 {
            counts.instructions_el0 += 1;
            self.engine.branches_el0 += 1;
        } else {
            counts.instructions_el1 += 1;
            self.engine.branches_el1 += 1;
        }
    }
}

/// A run's judged access `p` (its root, or a predicted one) took an exception instead of
/// completing: as the step path does, a tag-check fault counts its access as made and
/// checked (and as a disagreement if the model judged it unchecked).
fn access_faulted(tally: &mut Tally, p: &Pending) {
    if read_elr_el1().bits() != p.pc {
        return;
    }
    if mtex_arch::Esr(read_esr_el1().bits()).is_tag_check_fault() {
        tally.retire_faulted_access(p);
        if !(p.read.views().architectural || p.write.views().architectural) {
            tally.counts_mut().unexpected_tag_check_faults += 1;
        }
    }
}

/// Sets or clears HCR_EL2.IMO (Linux mode, around a run). With ICH_HCR_EL2.En clear and no
/// list register in use, no virtual interrupt is signalled meanwhile; runs stop before every
/// system-register access but reads of the MTE controls (`mtex_trace::run`), so the guest
/// never reads the virtual CPU interface (ICV_*) in place of the physical one. The exception return that resumes the guest
/// synchronises the change.
fn route_irqs_to_el2(on: bool) {
    // AmpereOne AC04_CPU_23 (traps.rs): a DSB before every HCR_EL2 write.
    aarch64_cpu::asm::barrier::dsb(aarch64_cpu::asm::barrier::SY);
    let mut hcr = read_hcr_el2();
    hcr.set(HcrEl2::IMO, on);
    // SAFETY: IMO only decides where physical IRQs go; EL2's own vectors take them when they
    // come here (the run stops, `retire_run`), and the guest's are untouched otherwise.
    unsafe { write_hcr_el2(hcr) };
}
