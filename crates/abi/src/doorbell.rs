//! Linux mode's doorbell: how a workload in Linux's user space opens and closes a trace
//! window. HVC from EL0 is UNDEFINED, so the workload stores to a page of guest physical
//! address space that stage 2 leaves unmapped, mapped into the process through /dev/mem
//! (Debian's STRICT_DEVMEM allows a hole no driver claims). The store is a stage-2 data
//! abort whose syndrome (ISV) gives the register and size; the hypervisor decodes it here
//! and skips the store.
//!
//! One 64-bit store per command: `OPEN` with the window's id (non-zero, 32 bits) starts a
//! traced phase with that id right after the store; `CLOSE` with the same id ends it. A read,
//! another size, another offset, an id of 0 or above 32 bits, an OPEN while a window is open
//! and a CLOSE of another id are refused with a record (and nothing else happens): a
//! workload's mistake is visible, never a silently wrong window.
//!
//! The records themselves can be read back the same way, for a machine whose only UART is
//! its console (`mtex-work results FILE`): the hypervisor keeps a copy of every record it
//! sends, byte for byte as framed, in a ring of its own memory. A store to `RESULTS` takes a
//! snapshot (the hypervisor first sends a `ResultsTaken` record, so the snapshot ends with
//! it); 64-bit loads then read it: `RESULTS_LEN` its length in bytes, `RESULTS_LOST` the
//! bytes of records that did not fit the ring, and `RESULTS_NEXT` its next eight bytes
//! (little-endian; zeros past the end). Each load is one exit, so reading is slow (about a
//! microsecond per eight bytes on silicon) but needs no mapping of the hypervisor's memory,
//! whose cache attributes the guest could not match.

/// The doorbell page's guest physical address when mtex boots Linux itself: a hole in QEMU
/// virt's memory map (between the virtio-mmio transports and the platform bus) that Linux
/// mode's device tree leaves out. Installed under a server's firmware, the doorbell is
/// instead a page of memory the loader reserved, wherever the firmware gave it, and its
/// address is the EFI variable [`EFI_VARIABLE`] (volatile: gone at the next boot), which
/// Linux shows at [`EFIVARS_PATH`].
pub const DOORBELL_IPA: u64 = 0x0b00_0000;
/// The kernel command-line word that gives the doorbell's address (`mtex.doorbell=0x…`) to
/// a kernel the loader starts itself.
pub const CMDLINE_WORD: &str = "mtex.doorbell";
/// The EFI variable holding the doorbell's address (8 bytes, little-endian) in install mode.
pub const EFI_VARIABLE: &str = "MtexDoorbell";
/// Its vendor GUID.
pub const EFI_VENDOR: &str = "b2f0a9c4-6d74-4578-9d0b-6f6f72626c6c";
/// Where Linux's efivarfs shows it: four bytes of attributes, then the address.
pub const EFIVARS_PATH: &str =
    "/sys/firmware/efi/efivars/MtexDoorbell-b2f0a9c4-6d74-4578-9d0b-6f6f72626c6c";
/// Its size: one page.
pub const DOORBELL_SIZE: u64 = 0x1000;
/// Offset of the OPEN register.
pub const OPEN: u64 = 0x0;
/// Offset of the CLOSE register.
pub const CLOSE: u64 = 0x8;
/// Offset of the RESULTS register: a store takes a snapshot of the records.
pub const RESULTS: u64 = 0x10;
/// Offsets of the snapshot's registers, each read by a 64-bit load.
pub const RESULTS_LEN: u64 = 0x18;
pub const RESULTS_LOST: u64 = 0x20;
pub const RESULTS_NEXT: u64 = 0x28;

/// A decoded doorbell access.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Command {
    Open(u32),
    Close(u32),
    /// Take a snapshot of the records (`RESULTS`).
    TakeResults,
    /// A 64-bit load of one of the snapshot's registers (its offset).
    ReadResults(u64),
}

/// Why a doorbell access was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Refusal {
    /// A load, not a store.
    Read,
    /// Not a 64-bit store with a valid syndrome (e.g. a pair or a store from SIMD registers).
    NotOneStore,
    /// Neither OPEN nor CLOSE.
    Offset,
    /// An id of 0 or wider than 32 bits.
    BadId,
    /// OPEN while a window is open.
    AlreadyOpen,
    /// CLOSE with no window open, or of another window.
    NotOpen,
    /// OPEN while another CPU is starting, or while other CPUs are on with the per-PC
    /// profile or call stacks asked for (they follow one CPU). Last, so that older logs
    /// still decode.
    OtherCpusOn,
}

impl Refusal {
    pub const fn describe(self) -> &'static str {
        match self {
            Refusal::Read => {
                "a load from the doorbell other than a 64-bit load of RESULTS_LEN (0x18), \
                 RESULTS_LOST (0x20) or RESULTS_NEXT (0x28)"
            }
            Refusal::NotOneStore => "not one 64-bit store from a general register",
            Refusal::Offset => {
                "a store to an offset that is none of OPEN (0x0), CLOSE (0x8) and RESULTS (0x10)"
            }
            Refusal::BadId => "a window id of 0 or wider than 32 bits",
            Refusal::AlreadyOpen => "OPEN while a window is open",
            Refusal::NotOpen => "CLOSE of a window that is not the open one",
            Refusal::OtherCpusOn => {
                "OPEN while another CPU is starting, or while other CPUs are on with the \
                 per-PC profile or call stacks asked for (those follow one CPU)"
            }
        }
    }
}

/// What the data abort's syndrome says of the access.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Access {
    /// ISS.ISV: size and register are known.
    pub valid: bool,
    pub write: bool,
    /// Bytes (ISS.SAS).
    pub size: u8,
    /// The stored value (the register ISS.SRT names).
    pub value: u64,
    /// Offset in the doorbell page.
    pub offset: u64,
}

/// Decodes an access to the doorbell given the window open now, if any.
pub fn decode(a: Access, open: Option<u32>) -> Result<Command, Refusal> {
    if !a.write {
        return match a.offset {
            RESULTS_LEN | RESULTS_LOST | RESULTS_NEXT if a.valid && a.size == 8 => {
                Ok(Command::ReadResults(a.offset))
            }
            _ => Err(Refusal::Read),
        };
    }
    if !a.valid || a.size != 8 {
        return Err(Refusal::NotOneStore);
    }
    if a.offset == RESULTS {
        return Ok(Command::TakeResults);
    }
    if a.value == 0 || a.value > u32::MAX as u64 {
        return Err(Refusal::BadId);
    }
    let id = a.value as u32;
    match (a.offset, open) {
        (OPEN, None) => Ok(Command::Open(id)),
        (OPEN, Some(_)) => Err(Refusal::AlreadyOpen),
        (CLOSE, Some(o)) if o == id => Ok(Command::Close(id)),
        (CLOSE, _) => Err(Refusal::NotOpen),
        _ => Err(Refusal::Offset),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_efivars_path_is_the_variable_and_its_vendor() {
        assert_eq!(
            EFIVARS_PATH,
            std::format!("/sys/firmware/efi/efivars/{EFI_VARIABLE}-{EFI_VENDOR}")
        );
    }

    fn store(offset: u64, value: u64) -> Access {
        Access {
            valid: true,
            write: true,
            size: 8,
            value,
            offset,
        }
    }

    #[test]
    fn open_then_close_the_same_window() {
        assert_eq!(decode(store(OPEN, 7), None), Ok(Command::Open(7)));
        assert_eq!(decode(store(CLOSE, 7), Some(7)), Ok(Command::Close(7)));
    }

    #[test]
    fn every_mistake_is_refused_by_name() {
        assert_eq!(decode(store(OPEN, 7), Some(3)), Err(Refusal::AlreadyOpen));
        assert_eq!(decode(store(CLOSE, 7), Some(3)), Err(Refusal::NotOpen));
        assert_eq!(decode(store(CLOSE, 7), None), Err(Refusal::NotOpen));
        assert_eq!(decode(store(OPEN, 0), None), Err(Refusal::BadId));
        assert_eq!(decode(store(OPEN, 1 << 32), None), Err(Refusal::BadId));
        assert_eq!(decode(store(0x30, 7), None), Err(Refusal::Offset));
        assert_eq!(decode(store(RESULTS_LEN, 7), None), Err(Refusal::Offset));
        let read = Access {
            write: false,
            ..store(OPEN, 7)
        };
        assert_eq!(decode(read, None), Err(Refusal::Read));
        let word = Access {
            size: 4,
            ..store(OPEN, 7)
        };
        assert_eq!(decode(word, None), Err(Refusal::NotOneStore));
        let pair = Access {
            valid: false,
            ..store(OPEN, 7)
        };
        assert_eq!(decode(pair, None), Err(Refusal::NotOneStore));
    }

    #[test]
    fn the_results_are_taken_by_a_store_and_read_by_64_bit_loads() {
        // Whatever is stored, and with a window open or not.
        assert_eq!(decode(store(RESULTS, 0), None), Ok(Command::TakeResults));
        assert_eq!(decode(store(RESULTS, 9), Some(3)), Ok(Command::TakeResults));
        let load = |offset, size, valid| Access {
            valid,
            write: false,
            size,
            value: 0,
            offset,
        };
        for r in [RESULTS_LEN, RESULTS_LOST, RESULTS_NEXT] {
            assert_eq!(decode(load(r, 8, true), None), Ok(Command::ReadResults(r)));
            // A narrower load, or one whose register is unknown, would read part of a word.
            assert_eq!(decode(load(r, 4, true), None), Err(Refusal::Read));
            assert_eq!(decode(load(r, 8, false), None), Err(Refusal::Read));
        }
        assert_eq!(decode(load(RESULTS, 8, true), None), Err(Refusal::Read));
        assert_eq!(decode(load(OPEN, 8, true), None), Err(Refusal::Read));
    }
}
