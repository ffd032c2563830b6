//! Linux mode's staged guest: one file holding a distribution's arm64 kernel Image and the
//! initramfs to give it, passed where the built-in guest's Image goes (QEMU's `-initrd`).
//! One file, so the hypervisor has one staged region to find and check on every boot path;
//! and a magic of its own at byte 0, so that the file itself says which mode the run is in
//! (no option can disagree with it).
//!
//! Layout (little-endian): [`Header`], then the Image at `image_offset` and the initramfs
//! at `initrd_offset`, both inside the file and 8-byte aligned. `mtex linux` writes it
//! ([`Header::encode`]); the hypervisor reads it ([`parse`]).

/// "MTEXLNX1" at byte 0.
pub const MAGIC: [u8; 8] = *b"MTEXLNX1";
/// The header's size in bytes.
pub const HEADER_SIZE: usize = 48;

/// Where the parts lie in the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub image_offset: u64,
    pub image_size: u64,
    pub initrd_offset: u64,
    pub initrd_size: u64,
    /// Guest RAM Linux is given, in bytes.
    pub ram_size: u64,
}

/// Why a staged file is not a usable bundle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BundleError {
    TooShort,
    /// A part lies outside the file, overlaps the header or the other part, or is unaligned.
    BadPart,
    /// The kernel part is empty.
    NoImage,
}

impl BundleError {
    pub const fn describe(self) -> &'static str {
        match self {
            BundleError::TooShort => "the Linux bundle is shorter than its header",
            BundleError::BadPart => {
                "the Linux bundle's Image or initramfs lies outside it, overlaps or is unaligned"
            }
            BundleError::NoImage => "the Linux bundle holds no kernel Image",
        }
    }
}

/// True when `bytes` starts like a bundle (and not like a plain arm64 Image).
pub fn is_bundle(bytes: &[u8]) -> bool {
    bytes.len() >= MAGIC.len() && bytes[..MAGIC.len()] == MAGIC
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

/// Reads and checks the header of a bundle of `len` bytes (`bytes` holds at least its
/// header).
pub fn parse(bytes: &[u8], len: u64) -> Result<Header, BundleError> {
    if bytes.len() < HEADER_SIZE || len < HEADER_SIZE as u64 || !is_bundle(bytes) {
        return Err(BundleError::TooShort);
    }
    let h = Header {
        image_offset: u64_at(bytes, 8),
        image_size: u64_at(bytes, 16),
        initrd_offset: u64_at(bytes, 24),
        initrd_size: u64_at(bytes, 32),
        ram_size: u64_at(bytes, 40),
    };
    if h.image_size == 0 {
        return Err(BundleError::NoImage);
    }
    let part = |off: u64, size: u64| -> Option<(u64, u64)> {
        let end = off.checked_add(size)?;
        (off >= HEADER_SIZE as u64 && off.is_multiple_of(8) && end <= len).then_some((off, end))
    };
    let image = part(h.image_offset, h.image_size).ok_or(BundleError::BadPart)?;
    if h.initrd_size != 0 {
        let initrd = part(h.initrd_offset, h.initrd_size).ok_or(BundleError::BadPart)?;
        if initrd.0 < image.1 && image.0 < initrd.1 {
            return Err(BundleError::BadPart);
        }
    }
    Ok(h)
}

impl Header {
    /// The header's bytes.
    pub fn encode(&self) -> [u8; HEADER_SIZE] {
        let mut b = [0u8; HEADER_SIZE];
        b[..8].copy_from_slice(&MAGIC);
        for (i, v) in [
            self.image_offset,
            self.image_size,
            self.initrd_offset,
            self.initrd_size,
            self.ram_size,
        ]
        .into_iter()
        .enumerate()
        {
            b[8 + 8 * i..16 + 8 * i].copy_from_slice(&v.to_le_bytes());
        }
        b
    }

    /// The header for an Image of `image` bytes followed by an initramfs of `initrd` bytes,
    /// each starting 8-byte aligned.
    pub fn for_parts(image: u64, initrd: u64, ram_size: u64) -> Self {
        let image_offset = HEADER_SIZE as u64;
        Header {
            image_offset,
            image_size: image,
            initrd_offset: (image_offset + image).next_multiple_of(8),
            initrd_size: initrd,
            ram_size,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn file(h: &Header) -> Vec<u8> {
        let mut f = h.encode().to_vec();
        let end = (h.image_offset + h.image_size).max(h.initrd_offset + h.initrd_size);
        f.resize(end as usize, 0);
        f
    }

    #[test]
    fn a_written_bundle_reads_back() {
        let h = Header::for_parts(1001, 300, 256 << 20);
        assert_eq!(h.initrd_offset, 1056);
        let f = file(&h);
        assert_eq!(parse(&f, f.len() as u64), Ok(h));
    }

    #[test]
    fn a_plain_image_is_not_a_bundle() {
        let mut image = vec![0u8; 64];
        image[56..60].copy_from_slice(b"ARM\x64");
        assert!(!is_bundle(&image));
        assert_eq!(parse(&image, 64), Err(BundleError::TooShort));
    }

    #[test]
    fn parts_outside_or_overlapping_are_refused() {
        let mut h = Header::for_parts(1000, 300, 1 << 28);
        let f = file(&h);
        h.initrd_size = 301;
        assert_eq!(
            parse(&h.encode(), f.len() as u64),
            Err(BundleError::BadPart)
        );
        h.initrd_size = 300;
        h.initrd_offset = 8;
        assert_eq!(
            parse(&h.encode(), f.len() as u64),
            Err(BundleError::BadPart)
        );
        h.initrd_offset = 512;
        assert_eq!(
            parse(&h.encode(), f.len() as u64),
            Err(BundleError::BadPart)
        );
        h.image_size = 0;
        assert_eq!(
            parse(&h.encode(), f.len() as u64),
            Err(BundleError::NoImage)
        );
    }

    proptest! {
        #[test]
        fn any_header_either_parses_inside_the_file_or_is_refused(
            v in proptest::array::uniform5(any::<u64>()), len in 0u64..1 << 20,
        ) {
            let h = Header {
                image_offset: v[0] % (2 << 20), image_size: v[1] % (2 << 20),
                initrd_offset: v[2], initrd_size: v[3] % 4096, ram_size: v[4],
            };
            if let Ok(p) = parse(&h.encode(), len) {
                prop_assert!(p.image_offset + p.image_size <= len);
                prop_assert!(p.initrd_size == 0 || p.initrd_offset + p.initrd_size <= len);
            }
        }
    }
}
