//! The doorbell (`mtex_abi::doorbell`): the page mapped from /dev/mem, and one 64-bit store
//! per command. Outside mtex's Linux mode the page is nothing (no device there): the stores
//! fault or vanish, so `--window` is for runs under mtex only.
//!
//! Where it is: installed under a server's firmware, the EFI variable the loader set (through
//! efivarfs); otherwise mtex's fixed address.

use mtex_abi::doorbell::{
    CLOSE, CMDLINE_WORD, DOORBELL_IPA, DOORBELL_SIZE, EFIVARS_PATH, OPEN, RESULTS, RESULTS_LEN,
    RESULTS_LOST, RESULTS_NEXT,
};
use std::io::Error;

pub struct Doorbell {
    page: *mut u64,
}

impl Doorbell {
    /// The doorbell's address: from the kernel's command line (`mtex.doorbell=`, a kernel
    /// the loader started), or the EFI variable the loader set (four bytes of attributes,
    /// then eight of address), else, on a machine not booted by UEFI, the fixed one.
    pub fn address() -> Result<u64, Error> {
        let page = |a: u64| {
            a.is_multiple_of(DOORBELL_SIZE)
                .then_some(a)
                .ok_or_else(|| Error::other(format!("doorbell address {a:#x}: not a page")))
        };
        let cmdline = std::fs::read_to_string("/proc/cmdline").unwrap_or_default();
        let word = format!("{CMDLINE_WORD}=");
        if let Some(v) = cmdline
            .split_whitespace()
            .find_map(|w| w.strip_prefix(&word))
        {
            let hex = v.strip_prefix("0x").unwrap_or(v);
            return u64::from_str_radix(hex, 16)
                .map_err(|_| Error::other(format!("{word}{v}: not a hexadecimal address")))
                .and_then(page);
        }
        match std::fs::read(EFIVARS_PATH) {
            Ok(v) => match <[u8; 8]>::try_from(v.get(4..).unwrap_or_default()) {
                Ok(a) => page(u64::from_le_bytes(a)),
                _ => Err(Error::other(format!("{EFIVARS_PATH}: not an address"))),
            },
            // Booted by UEFI firmware: the fixed address is not mtex's there (it may be a
            // device, or nothing), so say where the address should have come from.
            Err(e) if std::path::Path::new("/sys/firmware/efi").exists() => {
                Err(Error::other(format!(
                    "no doorbell address: neither the kernel command line ({CMDLINE_WORD}=) nor \
                     {EFIVARS_PATH} ({e}) names it; is mtex installed, and efivarfs mounted \
                     (mount -t efivarfs efivarfs /sys/firmware/efi/efivars)?"
                )))
            }
            Err(_) => Ok(DOORBELL_IPA),
        }
    }

    /// Maps the doorbell page (needs root: /dev/mem).
    pub fn map() -> Result<Self, Error> {
        let page = map_devmem(Self::address()?, DOORBELL_SIZE as usize)?;
        Ok(Doorbell { page: page.cast() })
    }

    /// One 64-bit store of `value` at `offset` (a multiple of 8 inside the page).
    pub fn store(&self, offset: u64, value: u64) {
        assert!(offset.is_multiple_of(8) && offset < DOORBELL_SIZE);
        // SAFETY: a volatile store inside the mapped page; the hypervisor traps and decodes
        // it (a single STR from a general register, so the syndrome is valid).
        unsafe { self.page.add((offset / 8) as usize).write_volatile(value) };
    }

    /// One 64-bit load at `offset` (a multiple of 8 inside the page).
    pub fn load(&self, offset: u64) -> u64 {
        assert!(offset.is_multiple_of(8) && offset < DOORBELL_SIZE);
        // SAFETY: a volatile load inside the mapped page; the hypervisor traps and answers
        // it (a single LDR to a general register, so the syndrome is valid).
        unsafe { self.page.add((offset / 8) as usize).read_volatile() }
    }

    /// A snapshot of the hypervisor's records: their bytes as framed, and the bytes of
    /// records its ring could not keep. None when nothing answers as the ring does (not
    /// under mtex's Linux mode).
    pub fn results(&self) -> Option<(Vec<u8>, u64)> {
        self.store(RESULTS, 1);
        let len = self.load(RESULTS_LEN);
        let lost = self.load(RESULTS_LOST);
        // The ring is a few MiB; all ones is a refused load.
        if len > 1 << 30 {
            return None;
        }
        let mut bytes = Vec::with_capacity(len as usize + 8);
        while (bytes.len() as u64) < len {
            bytes.extend_from_slice(&self.load(RESULTS_NEXT).to_le_bytes());
        }
        bytes.truncate(len as usize);
        Some((bytes, lost))
    }

    pub fn open(&self, id: u32) {
        self.store(OPEN, id as u64);
    }

    pub fn close(&self, id: u32) {
        self.store(CLOSE, id as u64);
    }
}

/// A shared mapping of `len` bytes of physical memory at `at`, through /dev/mem (root).
pub fn map_devmem(at: u64, len: usize) -> Result<*mut u8, Error> {
    // SAFETY: open with a NUL-terminated path.
    let fd = unsafe { libc::open(c"/dev/mem".as_ptr(), libc::O_RDWR | libc::O_SYNC) };
    if fd < 0 {
        return Err(Error::last_os_error());
    }
    // SAFETY: a new shared mapping of physical frames through /dev/mem; no existing memory is
    // affected. The descriptor is closed after (the mapping stays).
    let p = unsafe {
        libc::mmap(
            core::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd,
            at as libc::off_t,
        )
    };
    // SAFETY: closing the descriptor opened above.
    unsafe { libc::close(fd) };
    if p == libc::MAP_FAILED {
        return Err(Error::last_os_error());
    }
    Ok(p.cast())
}
