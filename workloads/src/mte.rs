//! The process's MTE set-up through Linux's user ABI (Documentation/arch/arm64/
//! memory-tagging-extension.rst): the tag-check mode by prctl, tagged memory by PROT_MTE.
//!
//! The `libc` crate defines these for glibc and Android on aarch64 but not for musl, so the
//! values are taken here from the kernel's uapi headers (include/uapi/linux/prctl.h,
//! arch/arm64/include/uapi/asm/mman.h); they are ABI and never change.

use std::io::Error;

const PR_SET_TAGGED_ADDR_CTRL: libc::c_int = 55;
const PR_TAGGED_ADDR_ENABLE: libc::c_ulong = 1;
const PR_MTE_TCF_SYNC: libc::c_ulong = 1 << 1;
const PR_MTE_TCF_ASYNC: libc::c_ulong = 1 << 2;
/// Tags IRG may generate: all but 0 (bit n allows tag n).
const PR_MTE_TAG_SHIFT: libc::c_ulong = 3;
const NONZERO_TAGS: libc::c_ulong = 0xfffe << PR_MTE_TAG_SHIFT;
pub const PROT_MTE: libc::c_int = 0x20;

/// TCF0, as the scenario names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tcf0 {
    None,
    Sync,
    Async,
    /// Asymmetric (FEAT_MTE3). Linux has no prctl bit for it: a task asking for both sync
    /// and async gets the CPU's preferred mode, which is async unless
    /// `/sys/devices/system/cpu/cpuN/mte_tcf_preferred` says `asymm` — so [`set_tcf0`] says so
    /// first (root only, as the initramfs runs).
    Asymm,
}

impl Tcf0 {
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "none" => Tcf0::None,
            "sync" => Tcf0::Sync,
            "async" => Tcf0::Async,
            "asymm" => Tcf0::Asymm,
            _ => return None,
        })
    }
}

/// Sets this thread's tagged-address ABI and tag-check mode (threads created later inherit
/// it).
pub fn set_tcf0(mode: Tcf0) -> Result<(), Error> {
    if mode == Tcf0::Asymm {
        prefer_asymm()?;
    }
    let tcf = match mode {
        Tcf0::None => 0,
        Tcf0::Sync => PR_MTE_TCF_SYNC,
        Tcf0::Async => PR_MTE_TCF_ASYNC,
        Tcf0::Asymm => PR_MTE_TCF_SYNC | PR_MTE_TCF_ASYNC,
    };
    let ctrl = PR_TAGGED_ADDR_ENABLE | tcf | NONZERO_TAGS;
    // SAFETY: prctl with integer arguments only; it changes this thread's tagging mode.
    let r = unsafe { libc::prctl(PR_SET_TAGGED_ADDR_CTRL, ctrl, 0, 0, 0) };
    if r == 0 {
        Ok(())
    } else {
        Err(Error::last_os_error())
    }
}

/// `len` bytes of anonymous memory, tagged (PROT_MTE) if `tagged`, each 16-byte granule
/// given a random non-zero tag; returns the pointer carrying the first granule's tag.
pub fn alloc(len: usize, tagged: bool) -> Result<*mut u8, Error> {
    let prot = libc::PROT_READ | libc::PROT_WRITE | if tagged { PROT_MTE } else { 0 };
    // SAFETY: an anonymous private mapping; no existing memory is affected.
    let p = unsafe {
        libc::mmap(
            core::ptr::null_mut(),
            len,
            prot,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(Error::last_os_error());
    }
    if !tagged {
        return Ok(p.cast());
    }
    // One tag for the whole buffer: IRG picks it, STG writes it on every granule. The
    // program's accesses then go through a pointer with the matching tag.
    let tagged_ptr: u64;
    // SAFETY: IRG only computes a pointer; STG writes allocation tags of the new PROT_MTE
    // mapping, which this function owns, granule by granule inside `len`.
    unsafe {
        core::arch::asm!(
            ".arch_extension memtag",
            "irg {t}, {p}",
            "mov {a}, {t}",
            "2:",
            "stg {a}, [{a}]",
            "add {a}, {a}, #16",
            "subs {n}, {n}, #16",
            "b.hi 2b",
            p = in(reg) p as u64,
            t = out(reg) tagged_ptr,
            a = out(reg) _,
            n = inout(reg) len => _,
            options(nostack),
        );
    }
    Ok(tagged_ptr as *mut u8)
}

/// The same address with another tag (bits 59:56).
pub fn retag(p: *mut u8, tag: u64) -> *mut u8 {
    ((p as u64 & !(0xf << 56)) | ((tag & 0xf) << 56)) as *mut u8
}

/// The tag bits of a pointer.
pub fn tag_of(p: *const u8) -> u64 {
    (p as u64 >> 56) & 0xf
}

/// Makes asymmetric the preferred mode of every CPU (Documentation/arch/arm64/
/// memory-tagging-extension.rst, "Per-CPU preferred tag checking mode"); fails where the CPU
/// has no FEAT_MTE3, rather than letting "asymm" silently mean async.
fn prefer_asymm() -> Result<(), Error> {
    let cpus = std::fs::read_dir("/sys/devices/system/cpu")?;
    let mut set = 0;
    for cpu in cpus.flatten() {
        let file = cpu.path().join("mte_tcf_preferred");
        if file.exists() {
            std::fs::write(&file, "asymm")?;
            set += 1;
        }
    }
    if set == 0 {
        return Err(Error::other(
            "no mte_tcf_preferred in sysfs: cannot choose asymm",
        ));
    }
    Ok(())
}
