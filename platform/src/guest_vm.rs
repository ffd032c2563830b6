//! The machine mtex shows its guest: the same intermediate-physical layout on every host,
//! whatever addresses firmware gave the memory behind it. Stage 2 maps this window onto the
//! RAM the hypervisor was given (anywhere), so the guest's addresses — and therefore its
//! page tables, its code and every count — are the same on QEMU `-kernel`, on QEMU through
//! UEFI and on a server.
//!
//! The guest sees only RAM. Its console is the CONSOLE_WRITE hypercall, its timer the
//! virtual timer the hypervisor forwards, its exit PSCI SYSTEM_OFF; every other address
//! faults to EL2 and ends the run with a record.

/// Guest RAM in the guest's physical address space (the Linux arm64 convention of QEMU virt,
/// so that a Linux-shaped guest needs no special layout).
pub const RAM_BASE: u64 = 0x4000_0000;
/// Guest RAM size. The guest kernel needs 224 MiB (its page pool ends there).
pub const RAM_SIZE: u64 = 256 << 20;
/// Where the guest's device tree is written (start of its RAM).
pub const DTB_ADDR: u64 = RAM_BASE;
/// Room for the device tree.
pub const DTB_MAX: u64 = 2 << 20;
/// Where the guest Image is placed: the guest's link address (guest/link.ld).
pub const IMAGE_ADDR: u64 = RAM_BASE + (16 << 20);
/// The guest's timer interrupts as PPI numbers (INTID - 16), in the arm,armv8-timer order:
/// secure physical, non-secure physical, virtual, hypervisor. The guest uses only the
/// virtual timer, whose interrupt the hypervisor injects as [`VTIMER_INTID`] whatever the
/// host's physical INTID is.
pub const TIMER_PPIS: [u32; 4] = [13, 14, 11, 10];
/// The INTID the guest's virtual timer interrupt arrives as.
pub const VTIMER_INTID: u32 = 16 + TIMER_PPIS[2];

/// Alignment of the host memory behind guest RAM: 2 MiB, so stage 2 can use block mappings.
pub const RAM_ALIGN: u64 = 2 << 20;

/// The guest's RAM window.
pub const fn ram() -> crate::Region {
    crate::Region::new(RAM_BASE, RAM_SIZE)
}

const _: () = assert!(IMAGE_ADDR >= DTB_ADDR + DTB_MAX);
const _: () = assert!(RAM_SIZE.is_multiple_of(RAM_ALIGN) && RAM_BASE.is_multiple_of(RAM_ALIGN));

/// Guest RAM and the host memory behind it (what stage 2 maps).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GuestRam {
    /// The window the guest sees.
    pub ipa: crate::Region,
    /// Host physical address of its first byte.
    pub pa: u64,
    /// Host memory inside the window that is not the guest's (install mode: the
    /// hypervisor itself, which stage 2 leaves out); empty otherwise.
    pub hole: crate::Region,
}

impl GuestRam {
    /// The standard window backed by host memory at `pa`.
    pub const fn at(pa: u64) -> Self {
        GuestRam {
            ipa: ram(),
            pa,
            hole: crate::Region::new(0, 0),
        }
    }

    /// A window of `size` bytes at [`RAM_BASE`] backed by host memory at `pa` (Linux mode,
    /// whose kernel needs more than the built-in guest).
    pub const fn sized(pa: u64, size: u64) -> Self {
        GuestRam {
            ipa: crate::Region::new(RAM_BASE, size),
            pa,
            hole: crate::Region::new(0, 0),
        }
    }

    /// Install mode: the firmware's own memory, `span` at its own addresses (stage 2 maps
    /// it one to one), except `hole`.
    pub const fn identity(span: crate::Region, hole: crate::Region) -> Self {
        GuestRam {
            ipa: span,
            pa: span.base,
            hole,
        }
    }

    /// The host address of guest address `ipa`, if `[ipa, ipa + len)` is guest RAM.
    pub fn pa_of(&self, ipa: u64, len: u64) -> Option<u64> {
        let end = ipa.checked_add(len)?;
        if ipa < self.ipa.base || end > self.ipa.end() {
            return None;
        }
        let pa = ipa - self.ipa.base + self.pa;
        let in_hole =
            self.hole.size != 0 && crate::Region::new(pa, len.max(1)).overlaps(&self.hole);
        (!in_hole).then_some(pa)
    }

    /// The host memory behind guest RAM.
    pub const fn host(&self) -> crate::Region {
        crate::Region::new(self.pa, self.ipa.size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guest_addresses_translate_only_inside_the_window() {
        let g = GuestRam::at(0x8_8000_0000);
        assert_eq!(g.pa_of(RAM_BASE, 4), Some(0x8_8000_0000));
        assert_eq!(g.pa_of(IMAGE_ADDR + 0x10, 4), Some(0x8_8100_0010));
        assert_eq!(
            g.pa_of(RAM_BASE + RAM_SIZE - 0x1000, 0x1000),
            Some(0x8_8000_0000 + RAM_SIZE - 0x1000)
        );
        assert_eq!(g.pa_of(RAM_BASE + RAM_SIZE - 0x800, 0x1000), None);
        assert_eq!(g.pa_of(RAM_BASE - 4, 4), None);
        assert_eq!(g.pa_of(u64::MAX - 2, 4), None);
    }

    #[test]
    fn install_mode_is_one_to_one_except_the_hypervisor() {
        let hyp = crate::Region::new(0x7000_0000, 0x100_0000);
        let g = GuestRam::identity(crate::Region::new(0x4000_0000, 1 << 30), hyp);
        assert_eq!(g.pa_of(0x4000_0000, 8), Some(0x4000_0000));
        assert_eq!(g.pa_of(0x6fff_fff8, 8), Some(0x6fff_fff8));
        assert_eq!(g.pa_of(0x6fff_fffc, 8), None, "straddles the hypervisor");
        assert_eq!(g.pa_of(0x7000_0000, 4), None);
        assert_eq!(g.pa_of(0x70ff_fffc, 4), None);
        assert_eq!(g.pa_of(0x7100_0000, 4), Some(0x7100_0000));
        assert_eq!(g.pa_of(0x3fff_fffc, 4), None);
        assert_eq!(g.pa_of(0x8000_0000, 4), None);
    }
}
