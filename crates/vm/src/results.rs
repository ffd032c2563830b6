//! The results ring: a copy of every record the hypervisor sends, byte for byte as framed, so
//! that the guest can read them back through the doorbell (`mtex_abi::doorbell::RESULTS`) on
//! a machine whose only UART is its console.
//!
//! The ring never wraps: a record that does not fit is left out whole and counted in
//! [`ResultsRing::lost`], so what it holds is always a parseable prefix of the stream and what
//! is missing is said (each `ResultsTaken` record carries the count). The last
//! [`RESERVED`] bytes take only the snapshot's own record, so a full ring can still end a
//! snapshot with one.

use mtex_abi::doorbell::{RESULTS_LEN, RESULTS_LOST, RESULTS_NEXT};

/// Bytes kept for `ResultsTaken` records (a frame of one is well under this).
pub const RESERVED: usize = 1024;

/// The ring over storage `B` (the hypervisor's memory; a `Vec` on the host).
pub struct ResultsRing<B> {
    buf: B,
    len: usize,
    lost: u64,
    /// The snapshot the guest reads: its length, and where its next load reads.
    snapshot: usize,
    read_at: usize,
}

impl<B: AsRef<[u8]> + AsMut<[u8]>> ResultsRing<B> {
    pub fn new(buf: B) -> Self {
        Self {
            buf,
            len: 0,
            lost: 0,
            snapshot: 0,
            read_at: 0,
        }
    }

    fn capacity(&self) -> usize {
        self.buf.as_ref().len()
    }

    /// Keeps `line` (one framed record) whole, or counts it lost. `snapshot_record`: the
    /// record that ends a snapshot, which may use the reserve.
    pub fn append(&mut self, line: &[u8], snapshot_record: bool) {
        let limit = if snapshot_record {
            self.capacity()
        } else {
            self.capacity().saturating_sub(RESERVED)
        };
        if self.len + line.len() > limit {
            self.lost += line.len() as u64;
            return;
        }
        self.buf.as_mut()[self.len..self.len + line.len()].copy_from_slice(line);
        self.len += line.len();
    }

    /// Bytes of records left out so far.
    pub fn lost(&self) -> u64 {
        self.lost
    }

    /// Takes a snapshot of everything kept so far; the next reads start at its beginning.
    pub fn take(&mut self) {
        self.snapshot = self.len;
        self.read_at = 0;
    }

    /// A 64-bit load of snapshot register `reg` (its doorbell offset).
    pub fn read(&mut self, reg: u64) -> u64 {
        match reg {
            RESULTS_LEN => self.snapshot as u64,
            RESULTS_LOST => self.lost,
            RESULTS_NEXT => {
                let mut word = [0u8; 8];
                let end = (self.read_at + 8).min(self.snapshot);
                if self.read_at < end {
                    word[..end - self.read_at]
                        .copy_from_slice(&self.buf.as_ref()[self.read_at..end]);
                }
                self.read_at = (self.read_at + 8).min(self.snapshot);
                u64::from_le_bytes(word)
            }
            _ => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;
    use alloc::vec::Vec;

    /// What a reader gets: the snapshot's length, then its bytes eight at a time.
    fn read_all(r: &mut ResultsRing<Vec<u8>>) -> Vec<u8> {
        let n = r.read(RESULTS_LEN) as usize;
        let mut out = Vec::new();
        while out.len() < n {
            out.extend_from_slice(&r.read(RESULTS_NEXT).to_le_bytes());
        }
        out.truncate(n);
        out
    }

    #[test]
    fn a_snapshot_is_every_record_kept_byte_for_byte() {
        let mut r = ResultsRing::new(vec![0; 4096]);
        r.append(b"first line\n", false);
        r.append(b"second\n", false);
        r.take();
        r.append(b"after the snapshot\n", false);
        assert_eq!(read_all(&mut r), b"first line\nsecond\n");
        // Past its end, zeros; a new snapshot starts from the beginning again.
        assert_eq!(r.read(RESULTS_NEXT), 0);
        r.take();
        assert_eq!(
            read_all(&mut r),
            b"first line\nsecond\nafter the snapshot\n"
        );
        assert_eq!(r.read(RESULTS_LOST), 0);
    }

    #[test]
    fn a_full_ring_leaves_records_out_whole_and_keeps_room_for_the_snapshots_record() {
        let mut r = ResultsRing::new(vec![0; RESERVED + 16]);
        r.append(b"0123456789\n", false);
        // Would reach into the reserve: left out whole, not cut.
        r.append(b"abcdefghij\n", false);
        r.append(b"xy\n", false);
        assert_eq!(r.lost(), 11);
        let end = [b'z'; 100];
        r.append(&end, true);
        r.take();
        let mut want = b"0123456789\nxy\n".to_vec();
        want.extend_from_slice(&end);
        assert_eq!(read_all(&mut r), want);
        assert_eq!(r.read(RESULTS_LOST), 11);
    }

    #[test]
    fn nothing_taken_reads_as_empty() {
        let mut r = ResultsRing::new(vec![0; 64]);
        r.append(b"kept\n", true);
        assert_eq!(r.read(RESULTS_LEN), 0);
        assert_eq!(r.read(RESULTS_NEXT), 0);
        assert_eq!(r.read(0x40), 0);
    }
}
