//! The doorbell (`mtex_abi::doorbell`): the page mapped from /dev/mem, and one 64-bit store
//! per command. Outside mtex's Linux mode the page is nothing (no device there): the stores
//! fault or vanish, so `--window` is for runs under mtex only.

use mtex_abi::doorbell::{CLOSE, DOORBELL_IPA, DOORBELL_SIZE, OPEN};
use std::io::Error;

pub struct Doorbell {
    page: *mut u64,
}

impl Doorbell {
    /// Maps the doorbell page (needs root: /dev/mem).
    pub fn map() -> Result<Self, Error> {
        // SAFETY: open with a NUL-terminated path.
        let fd = unsafe { libc::open(c"/dev/mem".as_ptr(), libc::O_RDWR | libc::O_SYNC) };
        if fd < 0 {
            return Err(Error::last_os_error());
        }
        // SAFETY: a new shared mapping of the doorbell page through /dev/mem; no existing
        // memory is affected. The descriptor is closed after (the mapping stays).
        let p = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                DOORBELL_SIZE as usize,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                DOORBELL_IPA as libc::off_t,
            )
        };
        // SAFETY: closing the descriptor opened above.
        unsafe { libc::close(fd) };
        if p == libc::MAP_FAILED {
            return Err(Error::last_os_error());
        }
        Ok(Doorbell { page: p.cast() })
    }

    /// One 64-bit store of `value` at `offset` (a multiple of 8 inside the page).
    pub fn store(&self, offset: u64, value: u64) {
        assert!(offset.is_multiple_of(8) && offset < DOORBELL_SIZE);
        // SAFETY: a volatile store inside the mapped page; the hypervisor traps and decodes
        // it (a single STR from a general register, so the syndrome is valid).
        unsafe { self.page.add((offset / 8) as usize).write_volatile(value) };
    }

    pub fn open(&self, id: u32) {
        self.store(OPEN, id as u64);
    }

    pub fn close(&self, id: u32) {
        self.store(CLOSE, id as u64);
    }
}
