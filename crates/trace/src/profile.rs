//! Where a traced phase's counts happened: the same retired instructions the tally adds up,
//! kept per PC as well (per EL, and apart for the kernel's unprivileged accesses), so that
//! the host can name the functions that pay for the checks.
//!
//! The table is bounded: a fixed number of slots, open addressing, a few probes. A PC that
//! finds no slot goes into the `[other]` bucket of its class, which keeps its counts (not
//! its address), so the table and the bucket together always add up to the tally exactly.

use crate::counts::{Effect, Judged, Pending, TraceCounts};
use serde::{Deserialize, Serialize};

/// The views an access direction is kept under, in this order: every access, then checked in
/// the architectural, TCF-elided, if-TCMA1 and if-kernel-TCO views (the `Judged` bits).
pub const VIEWS: usize = 5;
/// Index of the architectural view in [`PcEntry::rd`] and [`PcEntry::wr`].
pub const ARCH: usize = 1;
/// Slots probed for a PC before it goes to `[other]`: linear probing at the load a Linux
/// window gives the hypervisor's table (about half full) left a few PCs out after 16.
const PROBES: usize = 64;
/// A key no PC has: the unprivileged bit with EL0 (only EL1 accesses unprivileged).
const EMPTY: u64 = 0b10;

/// An EL0 entry's address space, in [`PcEntry::stack`]: a user PC names a function only
/// together with the program mapped there, and the hypervisor sees which translation table
/// (TTBR0_EL1) each EL0 instruction ran under.
pub mod user_space {
    /// The address space that was current when the phase began: in Linux mode, the process
    /// that opened the window through the doorbell (its threads share it).
    pub const OPENER: u32 = 0;
    /// Any other (another process, or the opener's after an exec).
    pub const OTHER: u32 = 1;
}

/// What one PC (or one `[other]` bucket) counted. Sent as a report record; the host adds
/// these up into functions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PcEntry {
    pub pc: u64,
    /// The EL that executed it.
    pub el: u8,
    /// Its accesses were the kernel's LDTR/STTR accessing as EL0 (uaccess).
    pub unprivileged: bool,
    /// At EL1, the call stack it ran on (`mtex_trace::callstack`) when stacks are followed,
    /// else [`crate::callstack::ROOT`]. At EL0, the address space it ran in
    /// ([`user_space`]): the phase opener's or another.
    pub stack: u32,
    /// Instructions retired here.
    pub insns: u64,
    /// Tag check faults taken here (their access is counted, the instruction is not).
    pub faults: u64,
    /// Reads and writes by view ([`VIEWS`]).
    pub rd: [u64; VIEWS],
    pub wr: [u64; VIEWS],
    pub tag_stores: u64,
    pub granules: u64,
    pub tco_writes: u64,
    pub tfsr_reads: u64,
}

impl PcEntry {
    /// Adds `o`'s counts to these (the address is kept).
    pub fn add(&mut self, o: &PcEntry) {
        self.insns += o.insns;
        self.faults += o.faults;
        for v in 0..VIEWS {
            self.rd[v] += o.rd[v];
            self.wr[v] += o.wr[v];
        }
        self.tag_stores += o.tag_stores;
        self.granules += o.granules;
        self.tco_writes += o.tco_writes;
        self.tfsr_reads += o.tfsr_reads;
    }
}

/// The instruction made a data access (as `Tally::retire` decides): a load or store, or a
/// tag store's data half.
fn counts_access(p: &Pending) -> bool {
    match p.effect {
        Effect::Access => true,
        Effect::TagStore(_) => p.write.present(),
        _ => false,
    }
}

fn bit(j: Judged, v: usize) -> u32 {
    ((j.0 >> v) & 1) as u32
}

/// One slot of the table: a [`PcEntry`] in 80 bytes (counts that fit 32 bits; a slot about
/// to outgrow them sends further counts to `[other]`).
#[derive(Clone, Copy, Debug)]
#[repr(C)]
pub struct PcSlot {
    /// PC | EL | unprivileged << 1, or [`EMPTY`].
    key: u64,
    granules: u64,
    insns: u32,
    faults: u32,
    rd: [u32; VIEWS],
    wr: [u32; VIEWS],
    tag_stores: u32,
    tco_writes: u32,
    tfsr_reads: u32,
    /// The call stack's node (in what was padding).
    stack: u32,
}

const _: () = assert!(size_of::<PcSlot>() == 80);

impl Default for PcSlot {
    fn default() -> Self {
        Self {
            key: EMPTY,
            granules: 0,
            insns: 0,
            faults: 0,
            rd: [0; VIEWS],
            wr: [0; VIEWS],
            tag_stores: 0,
            tco_writes: 0,
            tfsr_reads: 0,
            stack: 0,
        }
    }
}

impl PcSlot {
    /// A slot before [`PcTable::new`] clears it: all zero, so that a static table of them
    /// needs no bytes in an image.
    pub const ZERO: PcSlot = PcSlot {
        key: 0,
        granules: 0,
        insns: 0,
        faults: 0,
        rd: [0; VIEWS],
        wr: [0; VIEWS],
        tag_stores: 0,
        tco_writes: 0,
        tfsr_reads: 0,
        stack: 0,
    };

    /// Room for one more instruction or fault: every count of a slot is at most its
    /// instructions plus its faults (one access per direction, one tag store or TCO write per
    /// instruction), so keeping that sum in 32 bits keeps them all.
    fn has_room(&self) -> bool {
        (self.insns as u64 + self.faults as u64) < u32::MAX as u64
    }

    fn entry(&self) -> PcEntry {
        PcEntry {
            pc: self.key & !3,
            el: (self.key & 1) as u8,
            unprivileged: self.key & 2 != 0,
            stack: self.stack,
            insns: self.insns as u64,
            faults: self.faults as u64,
            rd: self.rd.map(u64::from),
            wr: self.wr.map(u64::from),
            tag_stores: self.tag_stores as u64,
            granules: self.granules,
            tco_writes: self.tco_writes as u64,
            tfsr_reads: self.tfsr_reads as u64,
        }
    }

    fn note(&mut self, p: &Pending) {
        self.insns += 1;
        self.note_access(p);
        match p.effect {
            Effect::TagStore(g) => {
                self.tag_stores += 1;
                self.granules += g as u64;
            }
            Effect::TcoImm(_) | Effect::TcoReg(_) => self.tco_writes += 1,
            Effect::TfsrRead => self.tfsr_reads += 1,
            _ => {}
        }
    }

    fn note_access(&mut self, p: &Pending) {
        if !counts_access(p) {
            return;
        }
        for v in 0..VIEWS {
            self.rd[v] += bit(p.read, v);
            self.wr[v] += bit(p.write, v);
        }
    }
}

/// The per-PC table of one traced phase, over storage the caller owns (the hypervisor's is
/// a static it hands out once; the table never allocates).
pub struct PcTable {
    slots: &'static mut [PcSlot],
    shift: u32,
    /// `[other]`, by class (EL0, EL1, EL1 unprivileged): counted as a slot is, and added
    /// into `other_spilled` whenever a bucket is about to outgrow 32 bits.
    other: [PcSlot; 3],
    other_spilled: [PcEntry; 3],
    /// Notes that went to `[other]`.
    other_notes: u64,
    used: u32,
    /// The slots were sorted (by [`PcTable::sorted_entries`]): the used ones are last.
    sorted: bool,
    /// The call stack what retires now runs on ([`PcTable::set_stack`]).
    stack: u32,
}

/// The key of `pc` executed at `el`, unprivileged or not.
fn key(pc: u64, el: u8, unprivileged: bool) -> u64 {
    (pc & !3) | (el != 0) as u64 | (unprivileged as u64) << 1
}

impl PcTable {
    /// A table over `slots`, whose length must be a power of two; it is cleared.
    pub fn new(slots: &'static mut [PcSlot]) -> Self {
        assert!(slots.len().is_power_of_two() && slots.len() >= 2);
        let shift = 64 - slots.len().trailing_zeros();
        let mut t = Self {
            slots,
            shift,
            other: [PcSlot::default(); 3],
            other_spilled: [PcEntry::default(); 3],
            other_notes: 0,
            used: 0,
            sorted: false,
            stack: 0,
        };
        t.slots.fill(PcSlot::default());
        t.reset();
        t
    }

    /// Empties it. Only the slots in use are cleared: after [`sorted_entries`] they are the
    /// last ones, so a phase pays for the PCs it had, not for the table's size.
    ///
    /// [`sorted_entries`]: Self::sorted_entries
    pub fn reset(&mut self) {
        let used = self.used as usize;
        let n = self.slots.len();
        if self.sorted {
            self.slots[n - used..].fill(PcSlot::default());
        } else if used != 0 {
            self.slots.fill(PcSlot::default());
        }
        self.sorted = false;
        for (class, o) in self.other.iter_mut().enumerate() {
            let key = key(0, (class != 0) as u8, class == 2);
            *o = PcSlot {
                key,
                ..PcSlot::default()
            };
            // `[other]` keeps no stack.
            self.other_spilled[class] = o.entry();
        }
        self.other_notes = 0;
        self.used = 0;
        self.stack = 0;
    }

    /// What retires from now on ran on the call stack `node`, or at EL0 in the address
    /// space `node` ([`user_space`]): the same PC on two is kept twice.
    #[inline]
    pub fn set_stack(&mut self, node: u32) {
        self.stack = node;
    }

    /// The slot to count `key` in (on the current stack): its own, claimed if new; or, if the
    /// probes find neither it nor room (or it has outgrown 32 bits), its class's `[other]`
    /// bucket.
    #[inline]
    fn slot(&mut self, key: u64) -> &mut PcSlot {
        let mask = self.slots.len() - 1;
        let stack = self.stack;
        let h = (key >> 2) ^ (stack as u64).rotate_right(17);
        let mut i = (h.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift) as usize;
        for _ in 0..PROBES {
            let (k, st) = (self.slots[i].key, self.slots[i].stack);
            if k == key && st == stack && self.slots[i].has_room() {
                return &mut self.slots[i];
            }
            if k == key && st == stack {
                break;
            }
            if k == EMPTY {
                self.used += 1;
                self.slots[i].key = key;
                self.slots[i].stack = stack;
                return &mut self.slots[i];
            }
            i = (i + 1) & mask;
        }
        self.other(key)
    }

    /// The `[other]` bucket of `key`'s class, with room for one more note.
    fn other(&mut self, key: u64) -> &mut PcSlot {
        self.other_notes += 1;
        let class = if key & 1 == 0 {
            0
        } else if key & 2 != 0 {
            2
        } else {
            1
        };
        let o = &mut self.other[class];
        if !o.has_room() {
            self.other_spilled[class].add(&o.entry());
            *o = PcSlot {
                key: o.key,
                ..PcSlot::default()
            };
        }
        o
    }

    /// An instruction retired (as `Tally::retire`).
    #[inline]
    pub fn note(&mut self, p: &Pending) {
        self.slot(key(p.pc, p.el, p.unprivileged)).note(p);
    }

    /// An access whose tag check faulted (as `Tally::retire_faulted_access`: a data access's
    /// is counted; a tag store's data half is not).
    pub fn note_faulted(&mut self, p: &Pending) {
        let s = self.slot(key(p.pc, p.el, p.unprivileged));
        s.faults += 1;
        if p.effect == Effect::Access {
            s.note_access(p);
        }
    }

    /// An instruction that makes no access and changes nothing counted retired at `pc`
    /// (counted in bulk by the tally: a run's inert instructions, an emulated branch).
    #[inline]
    pub fn note_insn(&mut self, pc: u64, el: u8) {
        self.slot(key(pc, el, false)).insns += 1;
    }

    /// PCs that have a slot.
    pub fn used(&self) -> u32 {
        self.used
    }

    /// Notes that found no slot and went to `[other]`.
    pub fn other_notes(&self) -> u64 {
        self.other_notes
    }

    /// The `[other]` buckets that counted anything, by class.
    pub fn others(&self) -> impl Iterator<Item = PcEntry> + '_ {
        self.other
            .iter()
            .zip(&self.other_spilled)
            .filter_map(|(o, spilled)| {
                let mut e = *spilled;
                e.add(&o.entry());
                (e != empty_other(&e)).then_some(e)
            })
    }

    /// Sorts the slots by PC (EL0 and EL1 apart) so that what is sent does not depend on the
    /// order PCs were first seen in, and gives their entries. The table must be
    /// [`reset`](Self::reset) before it counts again.
    pub fn sorted_entries(&mut self) -> impl Iterator<Item = PcEntry> + '_ {
        // The used slots moved to the end (one pass; the table is not looked up again before
        // `reset`), then only they are sorted: a phase pays for the PCs it had, not for the
        // table's size.
        let n = self.slots.len();
        let mut tail = n;
        for i in (0..n).rev() {
            if self.slots[i].key != EMPTY {
                tail -= 1;
                self.slots.swap(i, tail);
            }
        }
        let used = &mut self.slots[tail..];
        used.sort_unstable_by_key(|s| (s.key, s.stack));
        self.sorted = true;
        used.iter().map(PcSlot::entry)
    }
}

/// What `entries` add up to, in the tally's terms: the fields a profile keeps (see [`kept`]),
/// the rest zero.
pub fn sum<'a>(entries: impl IntoIterator<Item = &'a PcEntry>) -> TraceCounts {
    let mut c = TraceCounts::default();
    for e in entries {
        let k = e.el != 0;
        *(if k {
            &mut c.instructions_el1
        } else {
            &mut c.instructions_el0
        }) += e.insns;
        for (v, by_el) in [
            &mut c.accesses,
            &mut c.architectural,
            &mut c.tcf_elided,
            &mut c.if_tcma1,
            &mut c.if_kernel_tco,
        ]
        .into_iter()
        .enumerate()
        {
            if k {
                by_el.rd_k += e.rd[v];
                by_el.wr_k += e.wr[v];
            } else {
                by_el.rd_u += e.rd[v];
                by_el.wr_u += e.wr[v];
            }
        }
        if e.unprivileged {
            let u = &mut c.uaccess;
            u.rd += e.rd[0];
            u.wr += e.wr[0];
            u.arch_rd += e.rd[ARCH];
            u.arch_wr += e.wr[ARCH];
            u.elided_rd += e.rd[2];
            u.elided_wr += e.wr[2];
        }
        c.tag_store_insns += e.tag_stores;
        c.granules_tagged += e.granules;
        c.tco_writes += e.tco_writes;
        c.tfsr_reads += e.tfsr_reads;
        c.tag_check_faults += e.faults;
    }
    c
}

/// The counts of `c` a profile keeps per PC (the rest zero): what [`sum`] of a phase's entries
/// must equal.
pub fn kept(c: &TraceCounts) -> TraceCounts {
    TraceCounts {
        accesses: c.accesses,
        architectural: c.architectural,
        tcf_elided: c.tcf_elided,
        if_tcma1: c.if_tcma1,
        if_kernel_tco: c.if_kernel_tco,
        uaccess: c.uaccess,
        instructions_el0: c.instructions_el0,
        instructions_el1: c.instructions_el1,
        tag_store_insns: c.tag_store_insns,
        granules_tagged: c.granules_tagged,
        tco_writes: c.tco_writes,
        tfsr_reads: c.tfsr_reads,
        tag_check_faults: c.tag_check_faults,
        ..TraceCounts::default()
    }
}

/// An `[other]` bucket of `o`'s class that counted nothing.
fn empty_other(o: &PcEntry) -> PcEntry {
    PcEntry {
        el: o.el,
        unprivileged: o.unprivileged,
        ..PcEntry::default()
    }
}

#[cfg(test)]
mod tests;
