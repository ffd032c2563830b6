//! What a kernel needs to be measured under mtex, checked before it boots: 4 KiB pages (the
//! hypervisor's stage 2 and the trace's page walks assume them), MTE support (else no tag is
//! ever checked and every figure would be a silent zero), initramfs support (the workloads
//! are in it), a PL011 driver with its console (mtex's markers and the kernel's symbols come
//! through it) and /dev/mem (the workloads' doorbell).
//!
//! The answer comes from the best source there is: the kernel's own configuration (beside
//! it, or built into the Image by CONFIG_IKCONFIG), else its symbols (System.map), and the
//! page size always from the Image header's flags.

use flate2::read::GzDecoder;
use std::io::Read;

/// One thing Linux mode needs: the option, and a symbol only a kernel with it has.
pub struct Need {
    pub option: &'static str,
    pub symbol: &'static str,
    pub why: &'static str,
}

/// What every kernel must have.
pub const NEEDS: [Need; 5] = [
    Need {
        option: "CONFIG_ARM64_MTE",
        symbol: "mte_cpu_setup",
        why: "without it the kernel never enables MTE and no access is tag checked",
    },
    Need {
        option: "CONFIG_BLK_DEV_INITRD",
        symbol: "populate_rootfs",
        why: "the workloads and /init come in an initramfs",
    },
    Need {
        option: "CONFIG_SERIAL_AMBA_PL011",
        symbol: "pl011_probe",
        why: "Linux's console is the machine's PL011",
    },
    Need {
        option: "CONFIG_SERIAL_AMBA_PL011_CONSOLE",
        symbol: "pl011_console_setup",
        why: "mtex reads /init's markers on that console",
    },
    Need {
        option: "CONFIG_DEVMEM",
        symbol: "read_mem",
        why: "the workloads open their windows through /dev/mem",
    },
];

/// The page size an arm64 Image header declares (flags bits 1-2), in KiB; None: unspecified.
pub fn page_kib(image: &[u8]) -> Option<u32> {
    let flags = u64::from_le_bytes(image.get(24..32)?.try_into().ok()?);
    match (flags >> 1) & 3 {
        1 => Some(4),
        2 => Some(16),
        3 => Some(64),
        _ => None,
    }
}

/// Whether the Image header says big-endian (flags bit 0).
pub fn big_endian(image: &[u8]) -> bool {
    image.get(24).is_some_and(|f| f & 1 == 1)
}

/// The configuration an Image carries (CONFIG_IKCONFIG: gzip between IKCFG_ST and IKCFG_ED).
pub fn ikconfig(image: &[u8]) -> Option<String> {
    let start = find(image, b"IKCFG_ST")? + 8;
    let len = find(&image[start..], b"IKCFG_ED")?;
    let mut text = String::new();
    GzDecoder::new(&image[start..start + len])
        .take(8 << 20)
        .read_to_string(&mut text)
        .ok()?;
    Some(text)
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The needs a configuration lacks.
pub fn missing_in_config(config: &str) -> Vec<&'static Need> {
    NEEDS
        .iter()
        .filter(|n| crate::kernel_build::config::value_in(config, n.option) != Some("y"))
        .collect()
}

/// The needs a symbol table (System.map or kallsyms: `ADDR TYPE NAME` lines) shows missing.
pub fn missing_in_symbols(map: &str) -> Vec<&'static Need> {
    NEEDS
        .iter()
        .filter(|n| {
            !map.lines()
                .any(|l| l.split_whitespace().nth(2) == Some(n.symbol))
        })
        .collect()
}

/// Why the kernel cannot be measured, from its Image and what is known of its configuration
/// or symbols; None when it can (or nothing tells).
pub fn refusal(image: &[u8], config: Option<&str>, symbols: Option<&str>) -> Option<String> {
    if big_endian(image) {
        return Some("it is a big-endian kernel; mtex runs little-endian guests".into());
    }
    if let Some(k) = page_kib(image).filter(|k| *k != 4) {
        return Some(format!(
            "its Image header says {k} KiB pages; mtex needs CONFIG_ARM64_4K_PAGES (its stage 2 \
             and page walks use 4 KiB granules)"
        ));
    }
    let (missing, from) = if let Some(c) = config {
        (missing_in_config(c), "its configuration shows")
    } else if let Some(s) = symbols.filter(|s| !s.trim().is_empty()) {
        (missing_in_symbols(s), "its symbols show")
    } else {
        return None;
    };
    if missing.is_empty() {
        return None;
    }
    Some(format!(
        "{from} it lacks {}",
        missing
            .iter()
            .map(|n| format!("{} ({})", n.option, n.why))
            .collect::<Vec<_>>()
            .join("; ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(flags: u64) -> Vec<u8> {
        let mut h = vec![0u8; 64];
        h[24..32].copy_from_slice(&flags.to_le_bytes());
        h[0x38..0x3c].copy_from_slice(b"ARMd");
        h
    }

    #[test]
    fn the_page_size_and_endianness_come_from_the_header_flags() {
        assert_eq!(page_kib(&header(0b010)), Some(4));
        assert_eq!(page_kib(&header(0b100)), Some(16));
        assert_eq!(page_kib(&header(0b110)), Some(64));
        assert_eq!(page_kib(&header(0)), None);
        assert!(big_endian(&header(1)));
        let r = refusal(&header(0b110), None, None).unwrap();
        assert!(
            r.contains("64 KiB pages") && r.contains("CONFIG_ARM64_4K_PAGES"),
            "{r}"
        );
        assert!(refusal(&header(0b010), None, None).is_none());
    }

    #[test]
    fn a_configuration_without_mte_is_refused_naming_the_option() {
        let all = NEEDS
            .iter()
            .map(|n| format!("{}=y\n", n.option))
            .collect::<String>();
        assert!(refusal(&header(2), Some(&all), None).is_none());
        let no_mte = all.replace("CONFIG_ARM64_MTE=y", "# CONFIG_ARM64_MTE is not set");
        let r = refusal(&header(2), Some(&no_mte), None).unwrap();
        assert!(
            r.starts_with("its configuration shows it lacks CONFIG_ARM64_MTE ("),
            "{r}"
        );
        assert!(!r.contains("PL011"), "{r}");
    }

    #[test]
    fn without_a_configuration_the_symbols_tell() {
        let map = NEEDS
            .iter()
            .map(|n| format!("ffff800080010000 T {}\n", n.symbol))
            .collect::<String>();
        assert!(refusal(&header(2), None, Some(&map)).is_none());
        let r = refusal(&header(2), None, Some(&map.replace("pl011_probe", "x"))).unwrap();
        assert!(r.contains("CONFIG_SERIAL_AMBA_PL011 ("), "{r}");
        // No symbols at all says nothing (the symbol boot will).
        assert!(refusal(&header(2), None, Some("")).is_none());
    }

    #[test]
    fn an_embedded_configuration_is_read() {
        use flate2::write::GzEncoder;
        use std::io::Write;
        let mut gz = GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(b"CONFIG_ARM64_MTE=y\n").unwrap();
        let mut image = header(2);
        image.extend_from_slice(b"IKCFG_ST");
        image.extend(gz.finish().unwrap());
        image.extend_from_slice(b"IKCFG_ED");
        assert_eq!(ikconfig(&image).unwrap(), "CONFIG_ARM64_MTE=y\n");
    }
}
