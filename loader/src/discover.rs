//! The machine, from the firmware's configuration tables: ACPI when the firmware publishes
//! an ACPI 2.0 RSDP, else its device tree; RAM always from the UEFI memory map.

use mtex_acpi::PhysMem;
use mtex_dt::DtError;
use mtex_platform::machine::MAX_RAM_REGIONS;
use mtex_platform::{BootPath, Machine, Region};
use uefi::table::cfg::ConfigTableEntry;
use uefi::{Guid, Status, guid, system};

use crate::Failure;
use crate::memory::FirmwareMemory;

/// The device tree's configuration table (UEFI 2.10, "Devicetree Tables": EFI_DTB_TABLE_GUID).
const DTB_GUID: Guid = guid!("b1b621d5-f19c-41a5-830b-d9152c69aae0");

/// Reads the machine and its RAM. The RAM ranges of a device tree's `/memory` nodes are
/// replaced by the UEFI memory map's: under UEFI the map is the authority (Linux's EFI stub
/// deletes the tree's memory nodes for the same reason, drivers/firmware/efi/libstub/fdt.c).
pub fn machine(mem: &FirmwareMemory) -> Result<(BootPath, Machine), Failure> {
    let (rsdp, dtb) = system::with_config_table(|tables| {
        let find = |guid: Guid| {
            tables
                .iter()
                .find(|t| t.guid == guid)
                .map(|t| t.address as u64)
        };
        (find(ConfigTableEntry::ACPI2_GUID), find(DTB_GUID))
    });
    let (path, mut machine) = if let Some(rsdp) = rsdp {
        println!("{PREFIX}machine from acpi (rsdp at {rsdp:#x})");
        let m = mtex_acpi::acpi::machine(rsdp, mem).map_err(|e| {
            fail!(
                Status::UNSUPPORTED,
                "acpi (rsdp at {rsdp:#x}): {}",
                e.describe()
            )
        })?;
        (BootPath::UefiAcpi, m)
    } else if let Some(addr) = dtb {
        println!("{PREFIX}machine from the device tree at {addr:#x}");
        let bad = |why: &str| fail!(Status::UNSUPPORTED, "device tree at {addr:#x}: {why}");
        let size = mem
            .read(addr, 8)
            .and_then(mtex_dt::header_total_size)
            .ok_or_else(|| bad("no flattened device tree header"))?;
        let dtb = mem
            .read(addr, size)
            .ok_or_else(|| bad("extends outside the memory map's RAM"))?;
        let m = mtex_dt::machine::machine(dtb).map_err(|e| {
            bad(match e {
                DtError::Parse => "not a valid flattened device tree",
                DtError::Write => "refused by the device-tree writer",
            })
        })?;
        (BootPath::UefiDtb, m)
    } else {
        return Err(fail!(
            Status::UNSUPPORTED,
            "the firmware publishes neither an ACPI 2.0 RSDP nor a device tree"
        ));
    };
    machine.ram = [Region::default(); MAX_RAM_REGIONS];
    machine.ram_count = 0;
    machine.ram_dropped = 0;
    for r in &mem.ram {
        machine.push_ram(*r);
    }
    Ok((path, machine))
}
