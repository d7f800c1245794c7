//! Typed errors of the readers: every parse error names the file, the line and the field.

use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum LinuxError {
    #[error("cannot read {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}:{line}: field `{field}`: {message}", path.display())]
    Parse { path: PathBuf, line: usize, field: String, message: String },
    #[error("{}: {message}", path.display())]
    Invalid { path: PathBuf, message: String },
}

impl LinuxError {
    pub fn io(path: &Path, source: std::io::Error) -> LinuxError {
        LinuxError::Io { path: path.to_path_buf(), source }
    }

    pub fn parse(path: &Path, line: usize, field: &str, message: impl Into<String>) -> LinuxError {
        LinuxError::Parse { path: path.to_path_buf(), line, field: field.to_string(), message: message.into() }
    }

    /// The file (or a directory on its path) does not exist: on Linux this means the kernel
    /// lacks the feature, so callers report `unsupported` rather than failing.
    pub fn is_not_found(&self) -> bool {
        matches!(self, LinuxError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
    }
}

pub type Result<T> = std::result::Result<T, LinuxError>;
