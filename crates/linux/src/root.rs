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
        match std::fs::read_to_string(&p) {
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
