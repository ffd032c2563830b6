//! Guest PCs as `function+0xoffset`, from the guest kernel's ELF symbols, so that a trap log
//! reads like a kernel engineer's (the seeds' reviewers read SCTLR_EL1 writes by function).
//! The kernel runs both at its link addresses (early boot, identity map) and through its
//! upper-half linear map (`mtex_abi::program::KERNEL_LINEAR_BASE | address`).

use mtex_abi::program::KERNEL_LINEAR_BASE;
use object::{Object, ObjectSymbol, SymbolKind};

/// The guest's function symbols, sorted by address.
#[derive(Debug, Default)]
pub struct Symbols {
    /// (start, size, name).
    funcs: Vec<(u64, u64, String)>,
}

impl Symbols {
    /// Reads the function symbols of an ELF; an unreadable file gives none.
    pub fn from_elf(elf: &[u8]) -> Self {
        let Ok(file) = object::File::parse(elf) else {
            return Symbols::default();
        };
        let mut funcs: Vec<(u64, u64, String)> = file
            .symbols()
            .filter(|s| s.kind() == SymbolKind::Text && s.size() > 0)
            .filter_map(|s| Some((s.address(), s.size(), s.name().ok()?.to_string())))
            .collect();
        funcs.sort();
        Symbols { funcs }
    }

    /// The function symbols of the ELF at `path`; none if it cannot be read (a log whose
    /// guest was not built here still gets its report, with PCs only).
    pub fn load(path: &std::path::Path) -> Self {
        std::fs::read(path)
            .map(|b| Self::from_elf(&b))
            .unwrap_or_default()
    }

    /// `name+0xoff` for `pc`, at its link address or through the kernel's linear map.
    pub fn lookup(&self, pc: u64) -> Option<String> {
        let link = if pc >= KERNEL_LINEAR_BASE {
            pc - KERNEL_LINEAR_BASE
        } else {
            pc
        };
        let i = self.funcs.partition_point(|f| f.0 <= link).checked_sub(1)?;
        let (start, size, name) = &self.funcs[i];
        (link < start + size).then(|| {
            let short = rustc_demangle::demangle(name).to_string();
            // Drop the crate hash rustc's legacy mangling appends (`::h0123…`).
            let short = match short.rfind("::h") {
                Some(at) if short.len() - at == 19 => short[..at].to_string(),
                _ => short,
            };
            format!("{short}+{:#x}", link - start)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pc_is_found_at_its_link_address_and_through_the_linear_map() {
        let s = Symbols {
            funcs: vec![
                (0x4100_0000, 0x40, "_start".into()),
                (
                    0x4100_7200,
                    0x100,
                    "mtex_guest::kernel::entry::el0_sync".into(),
                ),
            ],
        };
        assert_eq!(s.lookup(0x4100_0004).as_deref(), Some("_start+0x4"));
        assert_eq!(
            s.lookup(KERNEL_LINEAR_BASE | 0x4100_7250).as_deref(),
            Some("mtex_guest::kernel::entry::el0_sync+0x50")
        );
        // Between functions, before the first, past the last: unknown.
        assert_eq!(s.lookup(0x4100_0100), None);
        assert_eq!(s.lookup(0x1000), None);
        assert_eq!(s.lookup(0x4200_0000), None);
    }
}
