//! Hostile to a sampled window: a guest that stops the hypervisor's sampling timer from
//! reaching it, through the GIC that Linux owns and maps (/dev/mem, as root).
//!
//! - `gic-mask CPU N`: on CPU `CPU`, disables the EL2 timer's PPI in that CPU's own
//!   redistributor (GICR_ICENABLER0), then spins N times; another thread spins on CPU 0.
//!
//! Where the GIC's frames and the EL2 timer's interrupt are: Linux's device tree (the
//! interrupt controller's `reg`, the timer's fourth interrupt). Debian's kernels keep the GIC's
//! frames from /dev/mem (STRICT_DEVMEM); a kernel built by `mtex kernel build` does not.

use std::io::Error;

/// GICR_ICENABLER0, in a redistributor's SGI frame (the second 64 KiB frame).
const SGI_FRAME: u64 = 0x1_0000;
const ICENABLER0: u64 = 0x180;
/// A GICv3 redistributor's two frames.
const REDIST_STRIDE: u64 = 0x2_0000;
/// GICR_TYPER's Processor_Number, bits [23:8]: the CPU this redistributor serves.
const TYPER: u64 = 0x8;

fn dt_words(path: &str) -> Result<Vec<u32>, Error> {
    let bytes = std::fs::read(path)?;
    Ok(bytes
        .chunks_exact(4)
        .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

/// The interrupt controller's node under /proc/device-tree (`intc@...`).
fn intc_node() -> Result<String, Error> {
    std::fs::read_dir("/proc/device-tree")?
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .find(|n| n.starts_with("intc@"))
        .map(|n| format!("/proc/device-tree/{n}"))
        .ok_or_else(|| Error::other("no intc@ node in /proc/device-tree"))
}

/// The redistributors' base from the controller's `reg` (two cells of address, two of size).
fn redistributors() -> Result<u64, Error> {
    let reg = dt_words(&format!("{}/reg", intc_node()?))?;
    let at = |i: usize| -> Result<u64, Error> {
        match (reg.get(4 * i), reg.get(4 * i + 1)) {
            (Some(&hi), Some(&lo)) => Ok(((hi as u64) << 32) | lo as u64),
            _ => Err(Error::other("the interrupt controller's reg is short")),
        }
    };
    // The distributor's frame comes first, then the redistributors'.
    at(1)
}

/// The EL2 timer's INTID: the timer node's fourth interrupt, a PPI (16 + its number).
fn hyp_timer_intid() -> Result<u32, Error> {
    let ints = dt_words("/proc/device-tree/timer/interrupts")?;
    ints.get(3 * 3 + 1)
        .map(|ppi| 16 + ppi)
        .ok_or_else(|| Error::other("the timer node has no fourth interrupt"))
}

/// A page of device memory mapped from /dev/mem.
struct Mmio(*mut u8);

impl Mmio {
    fn map(at: u64, len: usize) -> Result<Self, Error> {
        crate::doorbell::map_devmem(at, len).map(Self)
    }

    fn read(&self, off: u64) -> u32 {
        // SAFETY: `off` is inside the mapping and 4-aligned (the callers' constants).
        unsafe { core::ptr::read_volatile(self.0.add(off as usize).cast::<u32>()) }
    }

    fn write(&self, off: u64, v: u32) {
        // SAFETY: as `read`.
        unsafe { core::ptr::write_volatile(self.0.add(off as usize).cast::<u32>(), v) }
    }
}

fn spin_on(cpu: usize, n: u64) -> std::thread::JoinHandle<Result<(), Error>> {
    std::thread::spawn(move || {
        crate::move_to(cpu)?;
        crate::work::busy(n);
        Ok(())
    })
}

/// `gic-mask CPU N`.
pub fn mask(cpu: u64, n: u64) -> Result<String, Error> {
    let gicr = redistributors()?;
    let intid = hyp_timer_intid()?;
    let other = spin_on(0, n);
    crate::move_to(cpu as usize)?;
    let at = gicr + cpu * REDIST_STRIDE;
    let rd = Mmio::map(at, REDIST_STRIDE as usize)?;
    // The frame must be this CPU's: QEMU's redistributors are in CPU order.
    let number = (rd.read(TYPER) >> 8) & 0xffff;
    if u64::from(number) != cpu {
        return Err(Error::other(format!(
            "the redistributor at {at:#x} serves CPU {number}, not {cpu}"
        )));
    }
    rd.write(SGI_FRAME + ICENABLER0, 1 << intid);
    crate::work::busy(n);
    other
        .join()
        .map_err(|_| Error::other("the other thread panicked"))??;
    Ok(format!(
        "INTID {intid} disabled in CPU {cpu}'s redistributor, then {n} turns on CPUs 0 and {cpu}"
    ))
}
