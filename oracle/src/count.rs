//! The oracle's count of the traced phases, from the events QEMU's plugin hooks give: an
//! instruction starting (its PC, the EL PSTATE says, its [`Class`]), a memory access, and
//! the hypervisor's markers. Free of QEMU, so its rules are tested on the host.
//!
//! Rules, each a difference between what QEMU's hooks see and the trace's unit:
//! - An instruction is counted when it starts, so the trace's `instructions_el*` plus its
//!   `abandoned_el*` (begun, then an exception taken on them) is what this counts.
//! - While a single step is pending, QEMU starts the first instruction of an exception
//!   handler only to raise the step exception (its "step stub"): the same instruction then
//!   starts again at the same EL once EL2 resumes the guest. A start at the PC and EL of the
//!   previous guest start, with only EL2 code between, at one of VBAR_EL1's entries, was that
//!   stub: it is taken back. (The hypervisor never resumes a guest instruction it let start:
//!   it completes or skips every instruction that traps to it; and a loop that comes back to
//!   the same instruction through EL2, a stepped branch to itself or a run ending at a branch
//!   the hypervisor executes, is not at a vector entry.)
//! - A window can close on a CPU during the exit the stub raised (a CPU hands in its share at
//!   whatever exit it takes next), and the instruction then starts for real after the close,
//!   where the rule above never sees it. So at a close marker, when the exit in progress is a
//!   step exception taken before the instruction at the last guest start began (ESR_EL2.EC
//!   0x32 with ISS.ISV 0, ELR_EL2 that start's PC), that start was the stub: it is taken back.
//! - An instruction reads (writes) if at least one read (write) callback fired for it: a pair,
//!   a structure load or a split access counts once, an atomic once each way.
//! - A store-exclusive's read callback is QEMU's compare-and-exchange, not an access.
//! - STGP, DC ZVA and the tag stores that zero data (STZG, STZ2G, STZGM, DC GZVA) are never
//!   instrumented ([`Class`]): their write is counted at the start.
//! - A CASP's read is counted with its write: QEMU 10.0 fires only the write callback.

use crate::classify::Class;
use mtex_abi::oracle::OracleWindow;
use std::collections::BTreeMap;

#[derive(Clone, Copy, Debug, Default)]
struct Current {
    /// The instruction is a guest one inside an open window: its accesses count.
    active: bool,
    el: u8,
    class_is_exclusive_store: bool,
    class_is_cas_pair: bool,
    read: bool,
    write: bool,
}

#[derive(Debug, Default)]
pub struct Counter {
    open: Option<OracleWindow>,
    done: Vec<OracleWindow>,
    cur: Current,
    /// The last guest instruction started in the window: its PC, EL and whether its start
    /// counted a write (undone with it if it was a stub).
    last_guest: Option<LastStart>,
    el2_since: bool,
    /// Markers out of order (an open inside a window, a close of another id...).
    pub anomalies: Vec<String>,
    /// With `detail`: by (EL, instruction word), how many started in windows and how many
    /// of those read and wrote — to find which instructions a disagreement is about.
    pub detail: Option<BTreeMap<(u8, u32), [u64; 3]>>,
    cur_word: u32,
}

impl Counter {
    pub const fn new() -> Self {
        Self {
            open: None,
            done: Vec::new(),
            cur: Current {
                active: false,
                el: 0,
                class_is_exclusive_store: false,
                class_is_cas_pair: false,
                read: false,
                write: false,
            },
            last_guest: None,
            el2_since: false,
            anomalies: Vec::new(),
            detail: None,
            cur_word: 0,
        }
    }

    pub fn is_open(&self) -> bool {
        self.open.is_some()
    }

    /// The hypervisor's open marker with phase id `id`.
    pub fn open(&mut self, id: u64) {
        if let Some(w) = self.open.take() {
            self.anomalies
                .push(format!("window {id} opened inside window {}", w.id));
            self.done.push(w);
        }
        self.open = Some(OracleWindow {
            id,
            ..OracleWindow::default()
        });
        self.cur = Current::default();
        self.last_guest = None;
        self.el2_since = true;
    }

    /// EL2 code ran on this CPU since its last guest instruction, seen another way than by
    /// an EL2 instruction's start (on a machine of several vCPUs the plugin hooks none).
    pub fn el2_ran(&mut self) {
        self.el2_since = true;
        self.cur.active = false;
    }

    /// The exit in progress is a step exception taken before the guest instruction at `pc`
    /// began (ESR_EL2.EC 0x32, ISS.ISV 0). Called at a close marker, which EL2 executes
    /// (so EL2 code ran since the last guest start, whether or not a hook saw it: on several
    /// vCPUs none does): if the guest last started at `pc`, that start was the step stub,
    /// whose real start comes after the window has closed (module rules).
    pub fn step_pending_at(&mut self, pc: u64) {
        let (Some(w), Some(last)) = (self.open.as_mut(), self.last_guest) else {
            return;
        };
        if last.pc == pc {
            take_back(w, &mut self.detail, last);
            self.last_guest = None;
        }
    }

    /// The hypervisor's close marker with phase id `id`.
    pub fn close(&mut self, id: u64) {
        match self.open.take() {
            Some(mut w) => {
                if w.id != id {
                    self.anomalies
                        .push(format!("window {} closed as {id}", w.id));
                }
                w.closed = true;
                self.done.push(w);
            }
            None => self
                .anomalies
                .push(format!("window {id} closed, none open")),
        }
        self.cur = Current::default();
    }

    /// An instruction at `pc` starts at `el` (only called while a window is open).
    /// `at_vector`: `pc` is one of VBAR_EL1's entries (the plugin reads VBAR_EL1 there).
    pub fn start(&mut self, pc: u64, el: u8, class: Class, word: u32, at_vector: bool) {
        let Some(w) = self.open.as_mut() else {
            return;
        };
        if el > 1 {
            self.el2_since = true;
            self.cur.active = false;
            return;
        }
        let e = el as usize;
        if let Some(last) = self.last_guest
            && self.el2_since
            && last.pc == pc
            && last.el == el
            && at_vector
        {
            // The previous start here was the step stub (module rules).
            take_back(w, &mut self.detail, last);
        }
        self.el2_since = false;
        w.instructions[e] += 1;
        let wrote = class.write_on_execute();
        w.writes[e] += wrote as u64;
        self.last_guest = Some(LastStart {
            pc,
            el,
            wrote,
            word,
        });
        self.cur_word = word;
        if let Some(d) = &mut self.detail {
            let n = d.entry((el, word)).or_default();
            n[0] += 1;
            n[2] += wrote as u64;
        }
        self.cur = Current {
            active: true,
            el,
            class_is_exclusive_store: class == Class::StoreExclusive,
            class_is_cas_pair: class == Class::CasPair,
            read: false,
            write: wrote,
        };
    }

    /// A memory access by the instruction that started last.
    pub fn access(&mut self, store: bool) {
        let (Some(w), true) = (self.open.as_mut(), self.cur.active) else {
            return;
        };
        let e = self.cur.el as usize;
        let c = &mut self.cur;
        let reads = (!store || c.class_is_cas_pair) && !c.class_is_exclusive_store;
        let new_write = store && !c.write;
        let new_read = reads && !c.read;
        c.write |= new_write;
        c.read |= new_read;
        w.writes[e] += new_write as u64;
        w.reads[e] += new_read as u64;
        if new_write {
            self.note_detail(2);
        }
        if new_read {
            self.note_detail(1);
        }
    }

    fn note_detail(&mut self, k: usize) {
        if let Some(d) = &mut self.detail
            && let Some(n) = d.get_mut(&(self.cur.el, self.cur_word))
        {
            n[k] += 1;
        }
    }

    /// Every window: those closed, then the one still open.
    pub fn windows(&self) -> impl Iterator<Item = &OracleWindow> {
        self.done.iter().chain(self.open.as_ref())
    }
}

/// A guest instruction's start: what undoing it, were it the step stub, needs.
#[derive(Clone, Copy, Debug)]
struct LastStart {
    pc: u64,
    el: u8,
    /// Its start counted a write (`Class::write_on_execute`).
    wrote: bool,
    word: u32,
}

/// Undoes the count of `last`, the step stub.
fn take_back(
    w: &mut OracleWindow,
    detail: &mut Option<BTreeMap<(u8, u32), [u64; 3]>>,
    last: LastStart,
) {
    let e = last.el as usize;
    w.instructions[e] -= 1;
    w.writes[e] -= last.wrote as u64;
    w.step_stubs += 1;
    if let Some(d) = detail
        && let Some(n) = d.get_mut(&(last.el, last.word))
    {
        n[0] -= 1;
        n[2] -= last.wrote as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(c: &Counter) -> OracleWindow {
        *c.windows().last().unwrap()
    }

    #[test]
    fn counts_by_el_inside_the_window_only() {
        let mut c = Counter::default();
        c.start(0x10, 0, Class::Plain, 0, false); // before the window: ignored
        c.open(3);
        c.start(0x100, 2, Class::Plain, 0, false); // the hypervisor returning
        c.start(0x1000, 0, Class::Plain, 0, false);
        c.access(false);
        c.access(false); // a pair: two callbacks, one read
        c.start(0x1004, 0, Class::Plain, 0, false);
        c.access(false);
        c.access(true); // an atomic: one read, one write
        c.start(0x8000, 1, Class::Plain, 0, false);
        c.access(true);
        c.close(3);
        c.start(0x1008, 0, Class::Plain, 0, false);
        c.access(false);
        let w = window(&c);
        assert_eq!(w.id, 3);
        assert!(w.closed);
        assert_eq!(w.instructions, [2, 1]);
        assert_eq!(w.reads, [2, 0]);
        assert_eq!(w.writes, [1, 1]);
        assert!(c.anomalies.is_empty());
    }

    #[test]
    fn the_step_stub_is_taken_back() {
        let mut c = Counter::default();
        c.open(1);
        c.start(0x1000, 0, Class::Plain, 0, false); // SVC
        c.start(0x100, 2, Class::Plain, 0, false); // step exit after it
        c.start(0x8400, 1, Class::Plain, 0, true); // the stub at the vector
        c.start(0x100, 2, Class::Plain, 0, false); // its step exception
        c.start(0x8400, 1, Class::Plain, 0, true); // the vector's instruction, for real
        c.start(0x100, 2, Class::Plain, 0, false);
        c.start(0x8404, 1, Class::Plain, 0, false);
        let w = window(&c);
        assert_eq!(w.instructions, [1, 2]);
        assert_eq!(w.step_stubs, 1);
    }

    #[test]
    fn a_stub_whose_exit_closes_the_window_is_taken_back() {
        // A CPU of a window is interrupted while a step is pending; the step exception comes
        // at the handler's first instruction (the stub), and at that exit the CPU leaves the
        // window that another CPU closed. The handler's instruction runs after the close.
        let mut c = Counter::default();
        c.open(1);
        c.start(0x1000, 1, Class::Plain, 0, false);
        c.start(0x100, 2, Class::Plain, 0, false); // step exit after it
        c.start(0x8280, 1, Class::DcZva, 0, true); // the stub, at the IRQ vector
        // Its step exception, ISV 0; on several vCPUs no hook sees EL2's code.
        c.step_pending_at(0x8280);
        c.close(1);
        c.start(0x8280, 1, Class::Plain, 0, true);
        let w = window(&c);
        assert_eq!(w.instructions, [0, 1]);
        assert_eq!(w.writes, [0, 0]);
        assert_eq!(w.step_stubs, 1);
        assert!(c.anomalies.is_empty());
    }

    #[test]
    fn a_step_pending_elsewhere_takes_nothing_back() {
        let mut c = Counter::default();
        c.open(1);
        c.start(0x1000, 1, Class::Plain, 0, false);
        c.start(0x100, 2, Class::Plain, 0, false);
        // ELR_EL2 names another instruction than the last start: not its stub.
        c.step_pending_at(0x8280);
        c.close(1);
        // Nor is a start outside a window.
        c.start(0x8280, 1, Class::Plain, 0, true);
        c.step_pending_at(0x8280);
        let w = window(&c);
        assert_eq!(w.instructions, [0, 1]);
        assert_eq!(w.step_stubs, 0);
    }

    #[test]
    fn a_loop_back_to_the_same_pc_is_not_a_stub() {
        // `b .` run twice without EL2 in between (inside a run), then stepped (EL2 in
        // between) away from a vector's alignment.
        let mut c = Counter::default();
        c.open(1);
        c.start(0x2000, 1, Class::Plain, 0, false);
        c.start(0x2000, 1, Class::Plain, 0, false);
        c.start(0x100, 2, Class::Plain, 0, false);
        c.start(0x2004, 1, Class::Plain, 0, false);
        c.start(0x100, 2, Class::Plain, 0, false);
        c.start(0x2004, 1, Class::Plain, 0, false);
        assert_eq!(window(&c).instructions, [0, 4]);
        // A two-instruction loop at a 128-byte aligned head, whose run ends at its branch and
        // the hypervisor executes the branch: the head starts again through EL2.
        c.start(0x2080, 1, Class::Plain, 0, false);
        c.start(0x100, 2, Class::Plain, 0, false);
        c.start(0x2080, 1, Class::Plain, 0, false);
        assert_eq!(window(&c).instructions, [0, 6]);
        assert_eq!(window(&c).step_stubs, 0);
    }

    #[test]
    fn uninstrumented_writes_count_at_the_start() {
        let mut c = Counter::default();
        c.open(1);
        c.start(0x3000, 1, Class::DcZva, 0, false);
        c.start(0x3004, 0, Class::Stgp, 0, false);
        c.access(true); // (never delivered; had it been, still one write)
        let w = window(&c);
        assert_eq!(w.writes, [1, 1]);
        assert_eq!(w.reads, [0, 0]);
    }

    #[test]
    fn a_store_exclusive_reads_nothing() {
        let mut c = Counter::default();
        c.open(1);
        c.start(0x4000, 0, Class::StoreExclusive, 0, false);
        c.access(false);
        c.access(true);
        assert_eq!(window(&c).reads, [0, 0]);
        assert_eq!(window(&c).writes, [1, 0]);
    }

    #[test]
    fn a_cas_pair_reads_with_its_write_once() {
        let mut c = Counter::default();
        c.open(1);
        c.start(0x5000, 1, Class::CasPair, 0, false);
        c.access(true); // QEMU 10.0: the write alone
        c.start(0x5004, 1, Class::CasPair, 0, false);
        c.access(false); // were the read to come too, still one
        c.access(true);
        assert_eq!(window(&c).reads, [0, 2]);
        assert_eq!(window(&c).writes, [0, 2]);
    }

    #[test]
    fn accesses_of_el2_code_in_the_window_do_not_count() {
        let mut c = Counter::default();
        c.open(1);
        c.start(0x100, 2, Class::Plain, 0, false);
        c.access(false);
        c.access(true);
        let w = window(&c);
        assert_eq!(
            (w.reads, w.writes, w.instructions),
            ([0, 0], [0, 0], [0, 0])
        );
    }

    #[test]
    fn markers_out_of_order_are_anomalies_and_an_open_window_is_kept() {
        let mut c = Counter::default();
        c.close(1);
        c.open(2);
        c.open(3);
        c.close(4);
        c.open(5);
        assert_eq!(c.anomalies.len(), 3);
        let ids: Vec<_> = c.windows().map(|w| (w.id, w.closed)).collect();
        assert_eq!(ids, [(2, false), (3, true), (5, false)]);
    }
}
