//! Group-3 ID register reads (HCR_EL2.TID3), emulated: the real value, less the features the
//! hypervisor hides (`mtex_arch::id_regs`).

/// Reads ID register (3, 0, 0, `crm`, `op2`) at EL2. MRS needs the encoding in the
/// instruction, hence one arm per register; every encoding in this space is an ID register
/// or reserved (RAZ), so none of them is UNDEFINED.
pub fn read(crm: u8, op2: u8) -> u64 {
    macro_rules! mrs {
        ($crm:literal, $op2:literal) => {{
            let v: u64;
            // SAFETY: reading an ID register has no side effects.
            unsafe {
                core::arch::asm!(concat!("mrs {}, s3_0_c0_c", $crm, "_", $op2), out(reg) v)
            };
            v
        }};
    }
    macro_rules! row {
        ($crm:literal) => {
            match op2 {
                0 => mrs!($crm, "0"),
                1 => mrs!($crm, "1"),
                2 => mrs!($crm, "2"),
                3 => mrs!($crm, "3"),
                4 => mrs!($crm, "4"),
                5 => mrs!($crm, "5"),
                6 => mrs!($crm, "6"),
                _ => mrs!($crm, "7"),
            }
        };
    }
    match crm {
        1 => row!("1"),
        2 => row!("2"),
        3 => row!("3"),
        4 => row!("4"),
        5 => row!("5"),
        6 => row!("6"),
        7 => row!("7"),
        _ => 0,
    }
}

/// What the guest reads for ID register (3, 0, 0, `crm`, `op2`).
pub fn guest_read(crm: u8, op2: u8) -> u64 {
    mtex_arch::id_regs::guest_view(crm, op2, read(crm, op2))
}
