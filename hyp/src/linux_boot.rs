//! Linux mode: a distribution kernel booted as the guest, with the host's GIC, timers and a
//! UART passed through (`mtex_dt::linux_tree`). The hypervisor keeps only what it measures
//! with: the MTE control traps, the PMU counters it reserves, debug and PSCI; it takes no
//! interrupt (HCR_EL2.IMO/FMO clear), so nothing Linux does to the GIC can stop it.
//!
//! The staged guest is a bundle (`mtex_platform::linux_bundle`): the kernel Image goes to
//! the start of guest RAM plus 2 MiB (booting.rst: a 2 MiB-aligned base plus text_offset),
//! the device tree below it, and the initramfs at the top of RAM.

use crate::boot::{Boot, LinuxGuest};
use mtex_platform::{Region, arm64_image, guest_vm};

/// Where the Image's 2 MiB-aligned base is, in guest RAM.
const IMAGE_BASE: u64 = guest_vm::RAM_BASE + (2 << 20);

/// Puts the kernel, its initramfs and its device tree in guest RAM. Returns the entry point
/// and the tree's address (guest addresses). Runs with the EL2 MMU on.
pub fn load(boot: &Boot, linux: &LinuxGuest) -> Result<(u64, u64), &'static str> {
    let ram = boot.guest_ram;
    let h = linux.bundle;
    let staged = boot.guest_image.base;
    // SAFETY: the staged bundle is in memory QEMU filled and EL2 maps as Normal
    // (boot.staging); nothing writes it while these slices live, and the header check
    // (boot.rs) put both parts inside it.
    let (image, initrd) = unsafe {
        (
            core::slice::from_raw_parts(
                (staged + h.image_offset) as *const u8,
                h.image_size as usize,
            ),
            core::slice::from_raw_parts(
                (staged + h.initrd_offset) as *const u8,
                h.initrd_size as usize,
            ),
        )
    };
    let header = arm64_image::parse(image, h.image_size).map_err(|e| e.describe())?;
    let entry = IMAGE_BASE + header.text_offset;
    let image_end = entry + header.image_size;
    // The initramfs at the top of RAM, page aligned, clear of the running kernel (bss
    // included).
    let initrd_at = (ram.ipa.end() - h.initrd_size) & !0xfff;
    if image_end > initrd_at || image_end > ram.ipa.end() {
        return Err("the Linux Image and its initramfs do not fit guest RAM");
    }
    // Linux's command line without the hypervisor's options: the same workload gives Linux
    // the same command line whatever the instrument was asked to record.
    let bootargs = mtex_abi::options::guest_words(&boot.cmdline)
        .collect::<alloc::vec::Vec<_>>()
        .join(" ");
    let tree = mtex_dt::linux_tree::build(&mtex_dt::linux_tree::LinuxTree {
        ram: ram.ipa,
        bootargs: &bootargs,
        initrd: (h.initrd_size != 0).then(|| Region::new(initrd_at, h.initrd_size)),
        uart: linux.uart,
        uart_spi: linux.uart_spi,
        gic: boot.machine.gic,
        timer_ppis: timer_ppis(boot),
        pmu_ppi: Some(PMU_PPI),
        cpus: boot.machine.cpus(),
    })
    .map_err(|_| "cannot write Linux's device tree")?;
    if tree.len() as u64 > IMAGE_BASE - guest_vm::DTB_ADDR {
        return Err("Linux's device tree is larger than its slot");
    }
    let copy = |ipa: u64, bytes: &[u8]| -> Result<(), &'static str> {
        let pa = ram
            .pa_of(ipa, bytes.len() as u64)
            .ok_or("a Linux part outside guest RAM")?;
        // SAFETY: the destination is host memory behind guest RAM (pa_of checked the range),
        // identity-mapped at EL2 and referenced by nothing else: the guest has not run, and
        // the staged bundle never lies inside it (boot.rs placed guest RAM around it).
        unsafe { core::ptr::copy_nonoverlapping(bytes.as_ptr(), pa as *mut u8, bytes.len()) };
        Ok(())
    };
    copy(entry, image)?;
    copy(initrd_at, initrd)?;
    copy(guest_vm::DTB_ADDR, &tree)?;
    // As for the built-in guest (guest_boot.rs): Linux starts with its MMU and caches off.
    crate::mmu::clean_invalidate_to_poc(ram.host());
    crate::mmu::invalidate_icache();
    Ok((entry, guest_vm::DTB_ADDR))
}

/// The PMU's overflow interrupt: the SBSA's PPI 7 (INTID 23), QEMU virt's too. The
/// hypervisor keeps some counters for itself but never enables their interrupt, so the one
/// Linux sees is its own counters' (and the MTE events' the hypervisor raises for it).
const PMU_PPI: u32 = 7;

/// The host's timer PPIs in the binding's order. The virtual and hypervisor timers are the
/// machine's; the two physical timers are the SBSA's fixed PPIs (13, 14), which is what every
/// machine mtex runs on uses.
fn timer_ppis(boot: &Boot) -> [u32; 4] {
    [
        13,
        14,
        boot.machine.vtimer_intid - 16,
        boot.machine.hyp_timer_intid - 16,
    ]
}

/// What Linux mode needs of the GIC: EL1 may use the system-register CPU interface
/// (ICC_SRE_EL2.Enable, else Linux's ICC_SRE_EL1 accesses trap), and the virtual one stays
/// off (ICH_HCR_EL2.En = 0), so Linux's ICC_* accesses reach the physical interface.
pub fn pass_gic_through() {
    arm_gic::gicv3::GicCpuInterface::enable_system_register_el2(true);
    use arm_sysregs::el2::registers::IchHcrEl2;
    // SAFETY: ICH_HCR_EL2 only controls the virtual CPU interface, unused in Linux mode.
    unsafe { arm_sysregs::el2::accessors::write_ich_hcr_el2(IchHcrEl2::empty()) };
    aarch64_cpu::asm::barrier::isb(aarch64_cpu::asm::barrier::SY);
}
