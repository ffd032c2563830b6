//! The arm64 Image header (Linux Documentation/arch/arm64/booting.rst, "Call the kernel
//! image"), which both of mtex's images carry: the loader checks the hypervisor's and the
//! guest's, the hypervisor the guest's.

/// "ARM\x64" at byte 56.
pub const MAGIC: [u8; 4] = *b"ARM\x64";
/// The header's size in bytes.
pub const HEADER_SIZE: usize = 64;
/// The image's base (the address `text_offset` counts from) is 2 MiB aligned.
pub const BASE_ALIGN: u64 = 2 << 20;
const PAGE: u64 = 4096;
/// Largest `text_offset + image_size` accepted.
const MAX_END: u64 = 1 << 40;

/// The header fields the loader uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Offset of the image from its 2 MiB-aligned base.
    pub text_offset: u64,
    /// Bytes the image occupies once running, bss included.
    pub image_size: u64,
    pub flags: u64,
}

/// Why a file is not a bootable arm64 Image.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImageError {
    /// Shorter than the 64-byte header.
    TooShort,
    /// No "ARM\x64" at byte 56.
    NoMagic,
    /// Flags bit 0 set: a big-endian image.
    BigEndian,
    /// image_size 0 (a pre-3.17 Linux header): how much memory the image needs is unknown.
    NoImageSize,
    /// image_size smaller than the file: the header does not describe this image.
    SizeBelowFile,
    /// text_offset + image_size beyond 1 TiB: no machine mtex runs on has that much RAM.
    TooLarge,
}

impl ImageError {
    pub const fn describe(self) -> &'static str {
        match self {
            ImageError::TooShort => "shorter than an arm64 Image header (64 bytes)",
            ImageError::NoMagic => "not an arm64 Image (no \"ARM\\x64\" magic at byte 56)",
            ImageError::BigEndian => "a big-endian arm64 Image (header flags bit 0)",
            ImageError::NoImageSize => "arm64 Image header without image_size (0)",
            ImageError::SizeBelowFile => "arm64 Image header: image_size is smaller than the file",
            ImageError::TooLarge => "arm64 Image header: text_offset + image_size beyond 1 TiB",
        }
    }
}

fn le64(bytes: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(b)
}

/// Reads and checks the header at the start of an image file of `file_len` bytes.
pub fn parse(header: &[u8], file_len: u64) -> Result<Header, ImageError> {
    if header.len() < HEADER_SIZE || file_len < HEADER_SIZE as u64 {
        return Err(ImageError::TooShort);
    }
    if header[56..60] != MAGIC {
        return Err(ImageError::NoMagic);
    }
    let h = Header {
        text_offset: le64(header, 8),
        image_size: le64(header, 16),
        flags: le64(header, 24),
    };
    if h.flags & 1 != 0 {
        return Err(ImageError::BigEndian);
    }
    if h.image_size == 0 {
        return Err(ImageError::NoImageSize);
    }
    if h.image_size < file_len {
        return Err(ImageError::SizeBelowFile);
    }
    if h.text_offset
        .checked_add(h.image_size)
        .is_none_or(|end| end > MAX_END)
    {
        return Err(ImageError::TooLarge);
    }
    Ok(h)
}

impl Header {
    /// Bytes to reserve from the 2 MiB-aligned base: `text_offset + image_size`, rounded up
    /// to a page. The image is copied to `base + text_offset` and entered at its first byte.
    pub fn reservation(&self) -> u64 {
        (self.text_offset + self.image_size).next_multiple_of(PAGE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(text_offset: u64, image_size: u64, flags: u64, len: usize) -> Vec<u8> {
        let mut v = vec![0u8; len];
        v[8..16].copy_from_slice(&text_offset.to_le_bytes());
        v[16..24].copy_from_slice(&image_size.to_le_bytes());
        v[24..32].copy_from_slice(&flags.to_le_bytes());
        v[56..60].copy_from_slice(&MAGIC);
        v
    }

    #[test]
    fn a_good_header_and_its_reservation() {
        let file = header(0, 0x12_3456, 0b1010, 0x1000);
        let h = parse(&file, file.len() as u64).unwrap();
        assert_eq!(h.image_size, 0x12_3456);
        assert_eq!(h.reservation(), 0x12_4000);
        let h = parse(&header(0x8_0000, 0x10_0000, 0, 64), 64).unwrap();
        assert_eq!(h.reservation(), 0x18_0000);
        // The hypervisor's own header: text_offset 2 MiB, image_size 4 MiB.
        let h = parse(&header(0x20_0000, 0x40_0000, 0xa, 0x2_4470), 0x2_4470).unwrap();
        assert_eq!(h.reservation(), 0x60_0000);
    }

    #[test]
    fn bad_headers_are_named() {
        assert_eq!(parse(&[0u8; 63], 63), Err(ImageError::TooShort));
        let mut no_magic = header(0, 0x1000, 0, 64);
        no_magic[56] = b'X';
        assert_eq!(parse(&no_magic, 64), Err(ImageError::NoMagic));
        assert_eq!(
            parse(&header(0, 0x1000, 1, 64), 64),
            Err(ImageError::BigEndian)
        );
        assert_eq!(
            parse(&header(0, 0, 0, 64), 64),
            Err(ImageError::NoImageSize)
        );
        assert_eq!(
            parse(&header(0, 0x1000, 0, 64), 0x2000),
            Err(ImageError::SizeBelowFile)
        );
        assert_eq!(
            parse(&header(u64::MAX, 0x1000, 0, 64), 64),
            Err(ImageError::TooLarge)
        );
        assert_eq!(
            parse(&header(0, 1 << 41, 0, 64), 64),
            Err(ImageError::TooLarge)
        );
    }
}
