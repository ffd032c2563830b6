//! One CPU's sampled shares of windows on several CPUs, counted by the plugin: that CPU's own
//! guest instructions begun between its share markers, by EL. Under `-icount` an emulated
//! PMU counts every vCPU's instructions, so on several vCPUs only the emulator itself can say
//! what one CPU executed. Free of QEMU, so its rules are tested on the host.
//!
//! How the plugin feeds it: one count of every guest instruction begun on the machine (QEMU
//! 10.0 gives every hook vCPU index 0 on several vCPUs), and a hook at each guest block's
//! start, which knows the CPU (TPIDR_EL2) and the EL, gives the
//! count since the previous block's start to that previous block ([`Share::ran`]). Under
//! `-icount` one vCPU runs at a time and another takes over only between blocks, so that
//! count is the previous block's alone, however far it got before an exception ended it.
//!
//! QEMU's step stub (`count` module): with a step pending, an exception handler's first
//! instruction is begun only to raise the step exception, and begun again when EL2 resumes
//! the guest there. A block that starts at one of VBAR_EL1's entries where EL2 has just
//! returned ([`Share::starts`] with `el2_returned_here`), right after this CPU's last block
//! began one instruction at the same address, follows a stub: that one is taken back.

use mtex_abi::oracle::OracleShare;

#[derive(Debug, Default)]
pub struct Share {
    open: Option<OracleShare>,
    done: Vec<OracleShare>,
    /// This CPU's last block that ran: its start address and how many instructions began.
    last: Option<(u64, u64)>,
    /// Markers out of order.
    pub anomalies: Vec<String>,
}

impl Share {
    pub fn is_open(&self) -> bool {
        self.open.is_some()
    }

    /// The share markers of window `id` on CPU `cpu` (the markers' X2): counting starts.
    pub fn open(&mut self, id: u64, cpu: u32) {
        if let Some(o) = self.open.take() {
            self.anomalies
                .push(format!("share {} still open as share {id} opened", o.id));
            self.done.push(o);
        }
        self.open = Some(OracleShare {
            id,
            cpu,
            ..OracleShare::default()
        });
        self.last = None;
    }

    pub fn close(&mut self, id: u64) {
        match self.open.take() {
            Some(o) if o.id == id => self.done.push(OracleShare { closed: true, ..o }),
            Some(o) => {
                self.anomalies
                    .push(format!("share {id} closed while share {} was open", o.id));
                self.open = Some(o);
            }
            None => self
                .anomalies
                .push(format!("share {id} closed, never opened")),
        }
    }

    /// A guest block of this CPU that started at `pc`, at `el`, has run: `begun` of its
    /// instructions began.
    pub fn ran(&mut self, pc: u64, el: u8, begun: u64) {
        self.last = Some((pc, begun));
        if let Some(o) = &mut self.open
            && el < 2
        {
            o.instructions[el as usize] += begun;
        }
    }

    /// A guest block of this CPU starts at `pc`, at `el`; `el2_returned_here`: at one of
    /// VBAR_EL1's entries, where EL2 has just returned (ELR_EL2 is `pc`).
    pub fn starts(&mut self, pc: u64, el: u8, el2_returned_here: bool) {
        if el2_returned_here
            && self.last == Some((pc, 1))
            && let Some(o) = &mut self.open
            && el < 2
            && o.instructions[el as usize] > 0
        {
            o.instructions[el as usize] -= 1;
            o.step_stubs += 1;
        }
    }

    /// Every share, in the order opened (one still open last, if any).
    pub fn shares(&self) -> impl Iterator<Item = OracleShare> + '_ {
        self.done.iter().copied().chain(self.open)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_only_between_its_markers_by_el() {
        let mut s = Share::default();
        s.ran(0x1000, 1, 5);
        s.open(7, 1);
        s.starts(0x2000, 0, false);
        s.ran(0x2000, 0, 3);
        s.starts(0x3000, 1, false);
        s.ran(0x3000, 1, 4);
        s.close(7);
        s.ran(0x4000, 1, 100);
        let v: Vec<_> = s.shares().collect();
        assert_eq!(
            v,
            [OracleShare {
                id: 7,
                cpu: 1,
                closed: true,
                instructions: [3, 4],
                step_stubs: 0
            }]
        );
        assert!(s.anomalies.is_empty());
    }

    #[test]
    fn a_step_stub_is_taken_back_and_nothing_else_is() {
        let mut s = Share::default();
        s.open(1, 0);
        // The handler's first instruction begun alone, then EL2 returns there: a stub.
        s.ran(0x800, 1, 1);
        s.starts(0x800, 1, true);
        s.ran(0x800, 1, 6);
        // EL2 returns to a vector entry after a block there that began more than one.
        s.starts(0x800, 1, true);
        s.ran(0x800, 1, 2);
        // A block of one at another address.
        s.ran(0x880, 1, 1);
        s.starts(0x800, 1, true);
        // Not where EL2 returned.
        s.ran(0x900, 1, 1);
        s.starts(0x900, 1, false);
        let v = s.shares().next().unwrap();
        assert_eq!(v.instructions, [0, 1 + 6 + 2 + 1 + 1 - 1]);
        assert_eq!(v.step_stubs, 1);
        assert!(!v.closed);
    }

    #[test]
    fn markers_out_of_order_are_anomalies_and_lose_nothing() {
        let mut s = Share::default();
        s.close(3);
        s.open(1, 0);
        s.ran(0, 1, 2);
        s.close(2);
        s.open(4, 0);
        s.close(4);
        assert_eq!(s.anomalies.len(), 3, "{:?}", s.anomalies);
        let v: Vec<_> = s.shares().collect();
        assert_eq!(v.len(), 2);
        assert_eq!(
            (v[0].id, v[0].closed, v[0].instructions),
            (1, false, [0, 2])
        );
        assert_eq!((v[1].id, v[1].closed), (4, true));
    }
}
