//! The injectable filesystem root every reader goes through, so tests run the same code on
//! captured kernel text (`tests/fixtures/<machine>/sys/...`) as production runs on `/`.

use crate::error::{LinuxError, Result};
use std::path::{Path, PathBuf};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FsRoot {
    root: PathBuf,
}

impl Default for FsRoot {
    fn default() -> Self {
        FsRoot::host()
    }
}

impl FsRoot {
    /// The running system.
    pub fn host() -> FsRoot {
        FsRoot { root: PathBuf::from("/") }
    }

    /// A directory standing in for `/` (holds `sys/...`, `proc/...`).
    pub fn at(root: impl Into<PathBuf>) -> FsRoot {
        FsRoot { root: root.into() }
    }

    pub fn base(&self) -> &Path {
        &self.root
    }

    /// Map an absolute kernel path (`/sys/devices/system/node`) under the root.
    pub fn path(&self, abs: &str) -> PathBuf {
        self.root.join(abs.trim_start_matches('/'))
    }

    pub fn read(&self, abs: &str) -> Result<(PathBuf, String)> {
        let p = self.path(abs);
        match read_text_bounded(&p, MAX_KERNEL_FILE_BYTES) {
            Ok(t) => Ok((p, t)),
            Err(e) => Err(LinuxError::io(&p, e)),
        }
    }

    pub fn exists(&self, abs: &str) -> bool {
        self.path(abs).exists()
    }

    /// Names of the entries of a directory, sorted.
    pub fn list(&self, abs: &str) -> Result<Vec<String>> {
        let p = self.path(abs);
        let rd = std::fs::read_dir(&p).map_err(|e| LinuxError::io(&p, e))?;
        let mut names: Vec<String> = rd.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        Ok(names)
    }
}

/// Largest kernel file a reader accepts (a `numa_maps` of a big process stays far below).
pub const MAX_KERNEL_FILE_BYTES: u64 = 256 << 20;

/// Largest user file (machine, workload, class, study, profile JSON) numalab reads.
pub const MAX_USER_FILE_BYTES: u64 = 64 << 20;

/// Read a UTF-8 text file of at most `limit` bytes. A larger file (or an endless one such as
/// `/dev/zero`) is refused after reading `limit + 1` bytes, so memory stays bounded.
pub fn read_text_bounded(path: &Path, limit: u64) -> std::io::Result<String> {
    use std::io::Read;
    let f = std::fs::File::open(path)?;
    let mut buf = Vec::new();
    f.take(limit + 1).read_to_end(&mut buf)?;
    if buf.len() as u64 > limit {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("the file is larger than {} MiB, the most numalab reads", limit >> 20),
        ));
    }
    String::from_utf8(buf).map_err(|e| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("not UTF-8 text (invalid byte at offset {})", e.utf8_error().valid_up_to()),
        )
    })
}
