//! Guest PCs as `function+0xoffset`, from the guest kernel's ELF symbols, so that a trap log
//! reads like a kernel engineer's (MTE patch reviewers read SCTLR_EL1 writes by function).
//! The kernel runs both at its link addresses (early boot, identity map) and through its
//! upper-half linear map (`mtex_abi::program::KERNEL_LINEAR_BASE | address`).

use mtex_abi::program::{KERNEL_LINEAR_BASE, USER_CODE_VA};
use object::{Object, ObjectSection, ObjectSymbol, SymbolKind};

/// The guest's function symbols, sorted by address.
#[derive(Debug, Default)]
pub struct Symbols {
    /// (start, size, name).
    funcs: Vec<(u64, u64, String)>,
    /// The built-in guest's second mapping of its image (its linear map), looked up at the
    /// link address; false for a Linux kernel's symbols, which are virtual addresses already.
    linear_alias: bool,
    /// Linux mode: the program that opened the windows (`mtex-work`), which names the EL0
    /// PCs that ran in its address space; None: EL0 PCs are looked up here (the built-in
    /// guest, whose user programs are in its own ELF).
    program: Option<Box<Symbols>>,
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
        funcs.extend(user_programs(&file));
        funcs.sort();
        Symbols {
            funcs,
            linear_alias: true,
            program: None,
        }
    }

    /// A Linux kernel's text symbols from `/proc/kallsyms` lines (`address type name`, types
    /// t and T). kallsyms gives no sizes: each runs to the next symbol.
    pub fn from_kallsyms(text: &str) -> Self {
        let mut starts: Vec<(u64, String)> = text
            .lines()
            .filter_map(|l| {
                let mut f = l.split_whitespace();
                let addr = u64::from_str_radix(f.next()?, 16).ok()?;
                let kind = f.next()?;
                let name = f.next()?;
                (matches!(kind, "t" | "T") && addr != 0).then(|| (addr, name.to_string()))
            })
            .collect();
        // Several names at one address: a function's own name before a section marker
        // (`__sched_text_start` is also `__switch_to`).
        let marker =
            |n: &str| n.ends_with("_start") || n.ends_with("_end") || n == "_text" || n == "_stext";
        starts.sort_by(|a, b| (a.0, marker(&a.1), &a.1).cmp(&(b.0, marker(&b.1), &b.1)));
        starts.dedup_by_key(|s| s.0);
        let funcs = starts
            .iter()
            .enumerate()
            .map(|(i, (a, n))| {
                let next = starts.get(i + 1).map_or(a + 0x1000, |s| s.0);
                (*a, next - a, n.clone())
            })
            .collect();
        Symbols {
            funcs,
            linear_alias: false,
            program: None,
        }
    }

    /// A kernel's symbol file (`/proc/kallsyms` or `System.map`: `address type name` lines),
    /// refused by name when it holds no text symbol (a kallsyms read without root shows every
    /// address as zero).
    pub fn from_symbol_file(path: &std::path::Path) -> Result<Self, crate::input::InputError> {
        let bytes = crate::input::read(path, "symbol file", crate::input::DOCUMENT_LIMIT)?;
        let s = Self::from_kallsyms(&String::from_utf8_lossy(&bytes));
        if s.is_empty() {
            return Err(crate::input::InputError(format!(
                "{}: no text symbols: expected `address type name` lines, as /proc/kallsyms \
                 (read as root, or every address is 0) or System.map",
                path.display()
            )));
        }
        Ok(s)
    }

    /// These, with `program`'s for the EL0 PCs of the address space that opened the phase
    /// (a static program at fixed addresses: its ELF's symbols are where it runs).
    pub fn with_program(self, program: Symbols) -> Self {
        Symbols {
            program: Some(Box::new(program)),
            ..self
        }
    }

    /// The symbols of the program that opened the phase, when they are known apart.
    pub fn program(&self) -> Option<&Symbols> {
        self.program.as_deref()
    }

    /// How many function symbols there are.
    pub fn len(&self) -> usize {
        self.funcs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.funcs.is_empty()
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
        let (name, start, link) = self.find(pc)?;
        Some(format!("{name}+{:#x}", link - start))
    }

    /// The function `pc` is in: its demangled name without rustc's hash, and its start
    /// (link address), so that every PC of one function gathers under one name.
    pub fn function(&self, pc: u64) -> Option<(String, u64)> {
        self.find(pc).map(|(name, start, _)| (name, start))
    }

    /// (short name, start, pc at its link address) of the function holding `pc`.
    fn find(&self, pc: u64) -> Option<(String, u64, u64)> {
        let link = if self.linear_alias && pc >= KERNEL_LINEAR_BASE {
            pc - KERNEL_LINEAR_BASE
        } else {
            pc
        };
        let i = self.funcs.partition_point(|f| f.0 <= link).checked_sub(1)?;
        let (start, size, name) = &self.funcs[i];
        (link < start + size).then(|| (short_name(name), *start, link))
    }

    /// Symbols from (start, size, name) triples, as an ELF would give them (tests of what
    /// reads symbols).
    #[cfg(test)]
    pub fn from_funcs(mut funcs: Vec<(u64, u64, String)>) -> Self {
        funcs.sort();
        Symbols {
            funcs,
            linear_alias: false,
            program: None,
        }
    }
}

/// A symbol demangled, without the crate hash rustc's legacy mangling appends (`::h0123…`).
fn short_name(name: &str) -> String {
    // The alternate form leaves out the legacy scheme's hash and the v0 scheme's crate
    // disambiguators (`std[28e6e900d732d5c0]::`), which the Rust standard library's symbols
    // carry.
    format!("{:#}", rustc_demangle::demangle(name))
}

/// The built-in guest kernel's user programs: the labels of its `.usertext` section (assembly,
/// so without sizes: each runs to the next), at their link addresses and where the kernel maps
/// that page in every process ([`USER_CODE_VA`]). None for an ELF without the section.
fn user_programs(file: &object::File) -> Vec<(u64, u64, String)> {
    let Some(section) = file.section_by_name(".usertext") else {
        return Vec::new();
    };
    let (start, end) = (section.address(), section.address() + section.size());
    let mut labels: Vec<(u64, String)> = file
        .symbols()
        .filter(|s| s.section_index() == Some(section.index()))
        .filter_map(|s| Some((s.address(), s.name().ok()?.to_string())))
        // Mapping symbols ($x, $d) and assembler locals name no program.
        .filter(|(_, n)| !n.is_empty() && !n.starts_with('$') && !n.starts_with(".L"))
        .filter(|(_, n)| !n.starts_with("__user_text"))
        .collect();
    labels.sort();
    labels.dedup_by_key(|l| l.0);
    let mut out = Vec::new();
    for (i, (addr, name)) in labels.iter().enumerate() {
        let next = labels.get(i + 1).map_or(end, |l| l.0);
        out.push((*addr, next - addr, name.clone()));
        out.push((USER_CODE_VA + (addr - start), next - addr, name.clone()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pc_is_found_at_its_link_address_and_through_the_linear_map() {
        let s = Symbols {
            linear_alias: true,
            funcs: vec![
                (0x4100_0000, 0x40, "_start".into()),
                (
                    0x4100_7200,
                    0x100,
                    "mtex_guest::kernel::entry::el0_sync".into(),
                ),
            ],
            program: None,
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

    #[test]
    fn a_function_is_named_once_for_all_its_pcs_without_its_hash() {
        let s = Symbols {
            linear_alias: true,
            funcs: vec![(
                0x4100_7200,
                0x100,
                "_ZN10mtex_guest6kernel5entry8el0_sync17h0123456789abcdefE".into(),
            )],
            program: None,
        };
        let f = Some((
            "mtex_guest::kernel::entry::el0_sync".to_string(),
            0x4100_7200,
        ));
        assert_eq!(s.function(0x4100_7200), f);
        assert_eq!(s.function(KERNEL_LINEAR_BASE | 0x4100_72fc), f);
        assert_eq!(
            s.lookup(0x4100_7204).as_deref(),
            Some("mtex_guest::kernel::entry::el0_sync+0x4")
        );
        assert_eq!(s.function(0x4100_7300), None);
    }

    #[test]
    fn names_leave_out_the_v0_schemes_crate_disambiguators() {
        assert_eq!(
            short_name("_RNvNtCs1234_7mycrate3foo3bar"),
            "mycrate::foo::bar"
        );
        assert_eq!(short_name("futex_wait"), "futex_wait");
    }

    #[test]
    fn kallsyms_lines_give_text_symbols_running_to_the_next() {
        let s = Symbols::from_kallsyms(
            "ffff800080010000 T _text\nffff800080010040 t __cpu_setup\n\
             ffff800080010100 D some_data\nffff800080010200 T __sched_text_start\n\
             ffff800080010200 T __switch_to\n",
        );
        assert_eq!(s.len(), 3);
        assert_eq!(
            s.lookup(0xffff_8000_8001_0204).as_deref(),
            Some("__switch_to+0x4")
        );
        assert_eq!(
            s.lookup(0xffff_8000_8001_0048).as_deref(),
            Some("__cpu_setup+0x8")
        );
        // Data symbols are not functions: the text before them runs on.
        assert_eq!(
            s.lookup(0xffff_8000_8001_0104).as_deref(),
            Some("__cpu_setup+0xc4")
        );
        assert_eq!(s.lookup(0xffff_8000_8000_0000), None);
    }
}
