//! A fixed-capacity string, so records stay `Copy` and need no allocator at EL2.

use core::fmt;
use serde::{Deserialize, Deserializer, Serialize, Serializer, de};

/// Up to `N` bytes of UTF-8 text. Serialized as a plain string.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct ShortStr<const N: usize> {
    len: u8,
    bytes: [u8; N],
}

impl<const N: usize> ShortStr<N> {
    const CAPACITY_FITS_U8: () = assert!(N <= 255);

    /// An empty string.
    pub const fn new() -> Self {
        let () = Self::CAPACITY_FITS_U8;
        Self {
            len: 0,
            bytes: [0; N],
        }
    }

    /// Copies `s`, cutting it at the last character boundary that fits.
    pub fn truncated(s: &str) -> Self {
        let mut out = Self::new();
        out.push_str_truncating(s);
        out
    }

    /// Builds from raw bytes (e.g. a guest's hypercall registers), replacing invalid UTF-8 by
    /// '?', stopping at the first NUL.
    pub fn from_bytes_lossy(bytes: &[u8]) -> Self {
        let mut out = Self::new();
        for chunk in bytes.split(|&b| b == 0).next().unwrap_or(&[]).utf8_chunks() {
            out.push_str_truncating(chunk.valid());
            if !chunk.invalid().is_empty() {
                out.push_str_truncating("?");
            }
        }
        out
    }

    /// Appends as much of `s` as fits; returns the number of bytes taken.
    pub fn push_str_truncating(&mut self, s: &str) -> usize {
        let room = N - self.len as usize;
        let mut take = s.len().min(room);
        while !s.is_char_boundary(take) {
            take -= 1;
        }
        self.bytes[self.len as usize..self.len as usize + take]
            .copy_from_slice(&s.as_bytes()[..take]);
        self.len += take as u8;
        take
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        // Only whole UTF-8 characters are ever copied in (see push_str_truncating).
        core::str::from_utf8(&self.bytes[..self.len as usize]).unwrap_or("")
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// True when no more bytes fit.
    pub fn is_full(&self) -> bool {
        self.len as usize == N
    }
}

impl<const N: usize> Default for ShortStr<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> fmt::Debug for ShortStr<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl<const N: usize> fmt::Display for ShortStr<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl<const N: usize> Serialize for ShortStr<N> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de, const N: usize> Deserialize<'de> for ShortStr<N> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<const N: usize>;
        impl<const N: usize> de::Visitor<'_> for V<N> {
            type Value = ShortStr<N>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "a string of at most {N} bytes")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                if v.len() > N {
                    return Err(E::invalid_length(v.len(), &self));
                }
                Ok(ShortStr::truncated(v))
            }
        }
        d.deserialize_str(V::<N>)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncates_on_char_boundary() {
        let s = ShortStr::<4>::truncated("abcé"); // 'é' is 2 bytes and does not fit
        assert_eq!(s.as_str(), "abc");
        assert_eq!(
            ShortStr::<8>::from_bytes_lossy(b"ph\xffa\0junk").as_str(),
            "ph?a"
        );
    }
}
