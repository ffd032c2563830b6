//! The loader's files: the directory its own `.efi` was loaded from (the LoadedImage
//! protocol's file path, on the volume it came from), and files read from there.

use alloc::string::String;
use alloc::vec::Vec;
use mtex_loader::config;
use mtex_platform::Region;
use uefi::boot::{self, ScopedProtocol};
use uefi::proto::device_path::{DevicePath, DevicePathNodeEnum};
use uefi::proto::loaded_image::LoadedImage;
use uefi::proto::media::file::{
    Directory, File as _, FileAttribute, FileInfo, FileMode, RegularFile,
};
use uefi::proto::media::fs::SimpleFileSystem;
use uefi::{CString16, Status};

use crate::Failure;

/// The volume the loader was loaded from, opened at its root, and the loader's directory.
pub struct Volume {
    /// Kept open for as long as files of the volume are.
    _fs: ScopedProtocol<SimpleFileSystem>,
    root: Directory,
    /// `\EFI\BOOT` when the loader runs as the removable-media `\EFI\BOOT\BOOTAA64.EFI`.
    pub dir: String,
    /// Where the firmware loaded the loader's own image.
    pub loader_image: Region,
}

/// A regular file opened for reading.
pub struct File {
    handle: RegularFile,
    /// Full path on the volume, as messages name it.
    pub path: String,
    pub size: u64,
}

impl Volume {
    pub fn open() -> Result<Self, Failure> {
        let (dir, loader_image) = {
            let image = boot::open_protocol_exclusive::<LoadedImage>(boot::image_handle())
                .map_err(|e| {
                    fail!(
                        e.status(),
                        "cannot open the loader's LoadedImage: {}",
                        e.status()
                    )
                })?;
            let file = image.file_path().and_then(file_path_text).ok_or_else(|| {
                fail!(
                    Status::NOT_FOUND,
                    "the firmware gives no file path for the loader: cannot find mtex.cfg and the images"
                )
            })?;
            let (base, size) = image.info();
            (config::directory_of(&file), Region::new(base as u64, size))
        };
        let mut fs = boot::get_image_file_system(boot::image_handle()).map_err(|e| {
            fail!(
                e.status(),
                "cannot open the loader's volume: {}",
                e.status()
            )
        })?;
        let root = fs.open_volume().map_err(|e| {
            fail!(
                e.status(),
                "cannot open the loader's volume: {}",
                e.status()
            )
        })?;
        Ok(Volume {
            _fs: fs,
            root,
            dir,
            loader_image,
        })
    }

    /// The full path of `rel` (a configured path, relative to the loader's directory).
    pub fn path(&self, rel: &str) -> String {
        config::join(&self.dir, rel)
    }

    /// Opens a file that must exist.
    pub fn open_file(&mut self, rel: &str) -> Result<File, Failure> {
        let path = self.path(rel);
        self.open_optional(rel)?
            .ok_or_else(|| fail!(Status::NOT_FOUND, "cannot read {path}: NOT_FOUND"))
    }

    /// Opens a file, `Ok(None)` when it does not exist.
    pub fn open_optional(&mut self, rel: &str) -> Result<Option<File>, Failure> {
        let path = self.path(rel);
        let cannot = |status: Status| fail!(status, "cannot read {path}: {status}");
        let name =
            CString16::try_from(path.as_str()).map_err(|_| cannot(Status::INVALID_PARAMETER))?;
        let handle = match self
            .root
            .open(&name, FileMode::Read, FileAttribute::empty())
        {
            Ok(h) => h,
            Err(e) if e.status() == Status::NOT_FOUND => return Ok(None),
            Err(e) => return Err(cannot(e.status())),
        };
        let mut handle = handle
            .into_regular_file()
            .ok_or_else(|| fail!(Status::INVALID_PARAMETER, "cannot read {path}: a directory"))?;
        let size = handle
            .get_boxed_info::<FileInfo>()
            .map_err(|e| cannot(e.status()))?
            .file_size();
        Ok(Some(File { handle, path, size }))
    }
}

impl File {
    /// Fills `buf` from byte `pos` of the file.
    pub fn read_at(&mut self, pos: u64, buf: &mut [u8]) -> Result<(), Failure> {
        let path = &self.path;
        let cannot = |status: Status| fail!(status, "cannot read {path}: {status}");
        self.handle
            .set_position(pos)
            .map_err(|e| cannot(e.status()))?;
        let mut done = 0;
        while done < buf.len() {
            match self.handle.read(&mut buf[done..]) {
                Ok(0) => return Err(cannot(Status::END_OF_FILE)),
                Ok(n) => done += n,
                Err(e) => return Err(cannot(e.status())),
            }
        }
        Ok(())
    }

    /// The whole file, in pool memory (for the small text files).
    pub fn read_all(&mut self) -> Result<Vec<u8>, Failure> {
        let mut buf = alloc::vec![0u8; self.size as usize];
        self.read_at(0, &mut buf)?;
        Ok(buf)
    }
}

/// The text of the file-path nodes of a device path (`\EFI\BOOT\BOOTAA64.EFI`), or None when
/// it has none. Firmware may split a path over several nodes; they are joined with `\`.
fn file_path_text(path: &DevicePath) -> Option<String> {
    let mut text = String::new();
    for node in path.node_iter() {
        if let Ok(DevicePathNodeEnum::MediaFilePath(f)) = node.as_enum() {
            let units: Vec<u16> = f.path_name().to_vec();
            let units = units.split(|&u| u == 0).next().unwrap_or(&[]);
            if !text.is_empty() && !text.ends_with('\\') && units.first() != Some(&u16::from(b'\\'))
            {
                text.push('\\');
            }
            text.extend(char::decode_utf16(units.iter().copied()).map(|c| c.unwrap_or('?')));
        }
    }
    (!text.is_empty()).then_some(text)
}
