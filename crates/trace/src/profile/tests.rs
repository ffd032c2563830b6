extern crate std;
use std::{vec, vec::Vec};

use super::*;
use crate::counts::{Tally, TraceCounts};
use crate::profile::{kept, sum};
use proptest::prelude::*;

/// A judgement as the predicate makes them: absent, unchecked, or checked in the
/// architectural view with any of the three others.
fn judged() -> impl Strategy<Value = Judged> {
    prop_oneof![
        Just(Judged(0)),
        Just(Judged(1)),
        (0u8..8).prop_map(|others| Judged(0b11 | others << 2)),
    ]
}

fn effect() -> impl Strategy<Value = Effect> {
    prop_oneof![
        4 => Just(Effect::Access),
        1 => Just(Effect::None),
        1 => (1u32..300).prop_map(Effect::TagStore),
        1 => any::<bool>().prop_map(Effect::TcoImm),
        1 => Just(Effect::TfsrRead),
        1 => Just(Effect::Dsb),
        1 => Just(Effect::UnknownMem),
    ]
}

/// An instruction at one of a few dozen PCs (more than the small table holds).
fn pending() -> impl Strategy<Value = Pending> {
    (
        0u64..40,
        0u8..2,
        effect(),
        judged(),
        judged(),
        any::<bool>(),
    )
        .prop_map(|(i, el, effect, read, write, unpriv)| Pending {
            pc: 0xffff_8000_0010_0000 + i * 4,
            effect,
            el,
            read,
            write,
            unprivileged: unpriv && el == 1 && effect == Effect::Access,
            tagged_impdef: false,
        })
}

#[derive(Clone, Debug)]
enum Step {
    Retire(Pending),
    Fault(Pending),
    /// An inert instruction counted in bulk (a run's, an emulated branch).
    Insn(u64, u8),
    /// What follows runs on another call stack.
    Stack(u32),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => pending().prop_map(Step::Retire),
        1 => pending().prop_map(Step::Fault),
        2 => (0u64..40, 0u8..2).prop_map(|(i, el)| Step::Insn(0x4000_0000 + i * 4, el)),
        1 => (0u32..3).prop_map(Step::Stack),
    ]
}

fn table(slots: usize) -> PcTable {
    PcTable::new(Vec::leak(vec![PcSlot::default(); slots]))
}

fn run(steps: &[Step], slots: usize) -> (TraceCounts, Vec<PcEntry>, u64) {
    let mut tally = Tally::default();
    tally.set_profile(table(slots));
    for s in steps {
        match s {
            Step::Retire(p) => tally.retire(p),
            Step::Fault(p) => tally.retire_faulted_access(p),
            Step::Insn(pc, el) => {
                let c = tally.counts_mut();
                if *el == 0 {
                    c.instructions_el0 += 1;
                } else {
                    c.instructions_el1 += 1;
                }
                tally.profile_mut().unwrap().note_insn(*pc, *el);
            }
            Step::Stack(n) => tally.profile_mut().unwrap().set_stack(*n),
        }
    }
    let counts = tally.finish();
    let t = tally.profile_mut().unwrap();
    let other = t.other_notes();
    let mut entries: Vec<PcEntry> = t.others().collect();
    entries.extend(t.sorted_entries());
    (counts, entries, other)
}

proptest! {
    /// The slots and the `[other]` buckets add up to the tally, field by field, whether
    /// the table holds every PC or overflows.
    #[test]
    fn the_table_adds_up_to_the_tally(steps in prop::collection::vec(step(), 0..300)) {
        for slots in [2, 8, 256] {
            let (counts, entries, _) = run(&steps, slots);
            prop_assert_eq!(sum(&entries), kept(&counts), "{} slots", slots);
        }
    }

    /// With room for every PC, nothing goes to `[other]`, each PC has one entry per call
    /// stack it ran on, and the entries come sorted by PC.
    #[test]
    fn with_room_every_pc_keeps_its_own(steps in prop::collection::vec(step(), 0..300)) {
        let (_, entries, other) = run(&steps, 1024);
        prop_assert_eq!(other, 0);
        let keys: Vec<_> = entries
            .iter()
            .map(|e| (e.pc, e.el, e.unprivileged, e.stack))
            .collect();
        let mut sorted = keys.clone();
        sorted.sort();
        sorted.dedup();
        prop_assert_eq!(keys, sorted);
    }
}

#[test]
fn a_pc_about_to_outgrow_its_slot_counts_on_in_other() {
    let mut t = table(4);
    let p = Pending {
        pc: 0x4000_1000,
        effect: Effect::Access,
        el: 1,
        read: Judged(0b11),
        ..Pending::default()
    };
    t.note(&p);
    let k = key(p.pc, 1, false);
    let s = t.slots.iter_mut().find(|s| s.key == k).unwrap();
    s.insns = u32::MAX;
    t.note(&p);
    assert_eq!(t.other_notes(), 1);
    let other: Vec<_> = t.others().collect();
    assert_eq!(other.len(), 1);
    assert_eq!((other[0].insns, other[0].rd[ARCH], other[0].el), (1, 1, 1));
    let e: Vec<_> = t.sorted_entries().collect();
    assert_eq!(e[0].insns, u32::MAX as u64);
}

/// A table reset after its entries were taken (the cheap reset) or before (the full one)
/// counts the next phase from nothing, PCs included.
#[test]
fn a_reset_table_counts_only_the_next_phase() {
    for take_first in [true, false] {
        let mut t = table(16);
        // PC 0 at EL1 too: its key is below an empty slot's.
        for i in 0..12u64 {
            t.note_insn(4 * i, 1);
        }
        if take_first {
            assert_eq!(t.sorted_entries().count(), 12);
        }
        t.reset();
        t.note_insn(0x5000_0000, 0);
        let e: Vec<_> = t.sorted_entries().collect();
        assert_eq!(e.len(), 1, "{take_first}");
        assert_eq!((e[0].pc, e[0].el, e[0].insns), (0x5000_0000, 0, 1));
        assert!(t.slots.iter().filter(|s| s.key != EMPTY).count() == 1);
    }
}

/// An `[other]` bucket about to outgrow 32 bits adds what it has into its wide sums and
/// counts on: nothing is lost, whatever a guest runs.
#[test]
fn an_other_bucket_about_to_outgrow_32_bits_keeps_every_count() {
    let mut t = table(2);
    for i in 0..3u64 {
        t.note_insn(0x4000_0000 + 4 * i, 1);
    }
    assert_eq!(t.other_notes(), 1);
    t.other[1].insns = u32::MAX;
    t.note_insn(0x4000_0100, 1);
    let other: Vec<_> = t.others().collect();
    assert_eq!(other.len(), 1);
    assert_eq!((other[0].el, other[0].insns), (1, u32::MAX as u64 + 1));
}

#[test]
fn reset_empties_the_table_and_the_buckets() {
    let mut t = table(2);
    for i in 0..10u64 {
        t.note_insn(0x4000_0000 + 4 * i, 0);
    }
    assert!(t.other_notes() > 0);
    t.reset();
    assert_eq!((t.used(), t.other_notes(), t.others().count()), (0, 0, 0));
    assert_eq!(t.sorted_entries().count(), 0);
}
