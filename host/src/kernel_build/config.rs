//! The kernel configuration `mtex kernel build` asks for: fragments of `CONFIG_X=value`
//! lines (mtex's own for its machine, KASAN's, the user's), given to Kbuild as
//! `KCONFIG_ALLCONFIG` over `allnoconfig`, or added to Debian's own configuration of the
//! kernel, then checked line by line in the `.config` Kbuild wrote: an option Kconfig
//! dropped (a dependency missing in this kernel version) is an error naming it, never a
//! kernel built without it.

use anyhow::{Result, bail};

/// mtex's machine: what boots to /init under the hypervisor and runs the workloads.
pub const MTEX: &str = include_str!("mtex.config");
/// KASAN in its hardware tag-based mode.
pub const KASAN: &str = include_str!("kasan.config");
/// What a build from Debian's own configuration changes in it.
pub const DEBIAN: &str = include_str!("debian.config");

/// One requested option: `CONFIG_NAME=value`, or `# CONFIG_NAME is not set` (value `None`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Setting {
    pub name: String,
    pub value: Option<String>,
}

impl Setting {
    /// The line as Kconfig writes it.
    pub fn line(&self) -> String {
        match &self.value {
            Some(v) => format!("{}={v}", self.name),
            None => format!("# {} is not set", self.name),
        }
    }
}

/// A fragment's settings; `what` names the fragment in errors (a file, or "mtex's").
pub fn parse(text: &str, what: &str) -> Result<Vec<Setting>> {
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let l = raw.trim();
        if l.is_empty() {
            continue;
        }
        if let Some(rest) = l.strip_prefix("# ") {
            if let Some(name) = rest.strip_suffix(" is not set")
                && valid_name(name)
            {
                out.push(Setting {
                    name: name.into(),
                    value: None,
                });
            }
            continue;
        }
        if l.starts_with('#') {
            continue;
        }
        match l.split_once('=') {
            Some((name, value)) if valid_name(name) && !value.is_empty() => out.push(Setting {
                name: name.into(),
                value: Some(value.into()),
            }),
            _ => bail!(
                "{what}:{}: {raw:?} is not a Kconfig line (CONFIG_NAME=value or \
                 \"# CONFIG_NAME is not set\")",
                i + 1
            ),
        }
    }
    Ok(out)
}

fn valid_name(name: &str) -> bool {
    name.strip_prefix("CONFIG_")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'))
}

/// The fragments merged in order, a later setting of a name replacing an earlier one.
pub fn merge(parts: &[Vec<Setting>]) -> Vec<Setting> {
    let mut out: Vec<Setting> = Vec::new();
    for s in parts.iter().flatten() {
        match out.iter_mut().find(|o| o.name == s.name) {
            Some(o) => o.value = s.value.clone(),
            None => out.push(s.clone()),
        }
    }
    out
}

/// The value of `name` in a `.config` text (None: not set or absent).
pub fn value_in<'a>(config: &'a str, name: &str) -> Option<&'a str> {
    config.lines().find_map(|l| {
        l.strip_prefix(name)
            .and_then(|r| r.strip_prefix('='))
            .filter(|v| *v != "n")
    })
}

/// The requested settings the final `.config` does not have, each as its line.
pub fn dropped(requested: &[Setting], config: &str) -> Vec<String> {
    dropped_settings(requested, config)
        .into_iter()
        .map(Setting::line)
        .collect()
}

/// The requested settings the final `.config` does not have.
pub fn dropped_settings<'a>(requested: &'a [Setting], config: &str) -> Vec<&'a Setting> {
    requested
        .iter()
        .filter(|s| value_in(config, &s.name) != s.value.as_deref())
        .collect()
}

/// What became of a base configuration's options in the final `.config`.
#[derive(Debug, PartialEq, Eq)]
pub struct Kept {
    /// Options the base builds in (`=y`).
    pub built_in: usize,
    /// Those the final configuration does not build in, each as the final has it.
    pub lost: Vec<String>,
    /// Options the base builds as modules (none is built).
    pub modules: usize,
}

/// Compares a base configuration (Debian's) with the final one Kbuild wrote from it.
pub fn kept(base: &str, final_config: &str) -> Kept {
    let mut built_in = 0;
    let mut modules = 0;
    let mut lost = Vec::new();
    for l in base.lines() {
        let Some((name, value)) = l.split_once('=') else {
            continue;
        };
        if !valid_name(name) {
            continue;
        }
        match value {
            "y" => {
                built_in += 1;
                let now = value_in(final_config, name);
                if now != Some("y") {
                    lost.push(match now {
                        Some(v) => format!("{name}={v}"),
                        None => format!("# {name} is not set"),
                    });
                }
            }
            "m" => modules += 1,
            _ => {}
        }
    }
    Kept {
        built_in,
        lost,
        modules,
    }
}

/// Whether a Kconfig text defines the option `name` (`CONFIG_X`: a `config X` or
/// `menuconfig X` entry).
pub fn defines(kconfig: &str, name: &str) -> bool {
    let bare = name.strip_prefix("CONFIG_").unwrap_or(name);
    kconfig.lines().any(|l| {
        let mut w = l.split_whitespace();
        matches!(w.next(), Some("config" | "menuconfig")) && w.next() == Some(bare)
    })
}

/// Every Kconfig file of a source tree, concatenated (to ask which options this version has).
pub fn kconfig_of(tree: &std::path::Path) -> String {
    let mut text = String::new();
    let mut dirs = vec![tree.to_path_buf()];
    while let Some(d) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            let name = e.file_name();
            let name = name.to_string_lossy();
            match e.file_type() {
                Ok(t) if t.is_dir() && !name.starts_with('.') && name != "Documentation" => {
                    dirs.push(p)
                }
                Ok(t) if t.is_file() && name.starts_with("Kconfig") => {
                    text += &std::fs::read_to_string(&p).unwrap_or_default();
                    text.push('\n');
                }
                _ => {}
            }
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_fragments_parse_and_ask_for_what_linux_mode_needs() {
        let mtex = parse(MTEX, "mtex.config").unwrap();
        for need in [
            "CONFIG_ARM64_MTE",
            "CONFIG_ARM64_4K_PAGES",
            "CONFIG_BLK_DEV_INITRD",
            "CONFIG_SERIAL_AMBA_PL011_CONSOLE",
            "CONFIG_DEVMEM",
        ] {
            assert!(mtex.iter().any(|s| s.name == need), "{need}");
        }
        let kasan = parse(KASAN, "kasan.config").unwrap();
        assert!(kasan.iter().any(|s| s.name == "CONFIG_KASAN_HW_TAGS"));
    }

    #[test]
    fn later_fragments_win_and_bad_lines_are_named() {
        let a = parse("CONFIG_A=y\n# a comment\nCONFIG_B=\"x\"\n", "a").unwrap();
        let b = parse("# CONFIG_A is not set\n", "b").unwrap();
        let m = merge(&[a, b]);
        assert_eq!(m[0].line(), "# CONFIG_A is not set");
        assert_eq!(m[1].line(), "CONFIG_B=\"x\"");
        let e = parse("CONFIG_A=y\nrm -rf /\n", "frag.config")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("frag.config:2: "), "{e}");
        assert!(parse("A=y", "f").is_err());
        assert!(parse("CONFIG_A=", "f").is_err());
    }

    #[test]
    fn an_option_kconfig_dropped_is_reported_and_kept_ones_are_not() {
        let want = parse(
            "CONFIG_A=y\nCONFIG_B=y\n# CONFIG_C is not set\nCONFIG_D=8\n",
            "f",
        )
        .unwrap();
        let config = "CONFIG_A=y\n# CONFIG_B is not set\nCONFIG_C=y\nCONFIG_D=8\n";
        assert_eq!(
            dropped(&want, config),
            ["CONFIG_B=y", "# CONFIG_C is not set"]
        );
        assert!(dropped(&want[..1], config).is_empty());
        // A prefix of another name is not that name.
        assert_eq!(value_in("CONFIG_AB=y\n", "CONFIG_A"), None);
    }

    #[test]
    fn what_a_base_configuration_lost_is_counted_and_named() {
        let base = "CONFIG_A=y\nCONFIG_B=y\nCONFIG_C=m\nCONFIG_D=m\nCONFIG_E=y\n\
                    CONFIG_S=\"x\"\n# CONFIG_F is not set\n";
        let now = "CONFIG_A=y\n# CONFIG_B is not set\nCONFIG_E=m\nCONFIG_S=\"x\"\n";
        let k = kept(base, now);
        assert_eq!(k.built_in, 3);
        assert_eq!(k.modules, 2);
        assert_eq!(k.lost, ["# CONFIG_B is not set", "CONFIG_E=m"]);
        let d = parse(DEBIAN, "debian.config").unwrap();
        assert!(d.iter().any(|s| s.name == "CONFIG_DEBUG_INFO_NONE"));
    }

    #[test]
    fn an_option_is_defined_by_its_config_entry_only() {
        let k = "config ARM64_MTE\n\tbool \"MTE\"\nmenuconfig KASAN\n\tdepends on ARM64_PAN\n";
        assert!(defines(k, "CONFIG_ARM64_MTE"));
        assert!(defines(k, "CONFIG_KASAN"));
        assert!(!defines(k, "CONFIG_ARM64_PAN"));
        assert!(!defines(k, "CONFIG_ARM64"));
    }
}
