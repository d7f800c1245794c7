//! Handing a preload library to a program numalab launches (docs/live.md, "round-1g for
//! launched programs" and "The hinting-fault sampler"): the library's bytes are written to one
//! memfd, a second memfd of `shared_bytes` is sized and mapped shared (the program maps the
//! same memory through the inherited fd), and `LD_PRELOAD` names `/proc/self/fd/N` ahead of
//! any value numalab itself was started with. Neither fd has close-on-exec: the program
//! inherits both. On any failure every fd opened so far is closed and nothing stays mapped.

use std::ffi::{CStr, OsStr, OsString};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

#[derive(Debug, thiserror::Error)]
pub enum HandoverError {
    #[error("memfd_create: {0}")]
    Memfd(std::io::Error),
    #[error("{0}")]
    Setup(std::io::Error),
}

impl HandoverError {
    pub fn io(&self) -> &std::io::Error {
        match self {
            HandoverError::Memfd(e) | HandoverError::Setup(e) => e,
        }
    }

    pub fn into_io(self) -> std::io::Error {
        match self {
            HandoverError::Memfd(e) | HandoverError::Setup(e) => e,
        }
    }
}

/// The agent's side of a hand-over: the shared mapping and both fds.
pub struct Handover {
    base: *mut u8,
    shared_bytes: usize,
    /// The library's memfd and the shared memfd; `None` once closed.
    library_fd: Option<OwnedFd>,
    shared_fd: Option<OwnedFd>,
    library_fd_number: i32,
    shared_fd_number: i32,
}

// SAFETY: the mapping is owned by this value; callers synchronise access to its contents.
unsafe impl Send for Handover {}

/// A memfd without close-on-exec (the program inherits it).
fn memfd(name: &CStr) -> Result<OwnedFd, HandoverError> {
    // SAFETY: memfd_create with a NUL-terminated name.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), 0) };
    if fd < 0 {
        return Err(HandoverError::Memfd(std::io::Error::last_os_error()));
    }
    // SAFETY: a fresh fd this function owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `LD_PRELOAD` for the program: `library` first, then `existing` (numalab's own value) when
/// it is set and not empty.
pub fn preload_value(library: &str, existing: Option<&OsStr>) -> OsString {
    let mut preload = OsString::from(library);
    if let Some(old) = existing.filter(|o| !o.is_empty()) {
        preload.push(":");
        preload.push(old);
    }
    preload
}

/// Create both memfds (`shared_name` first, then `library_name`), write `library` into one,
/// size the other to `shared_bytes` and map it shared, read-write.
pub fn handover(library: &[u8], library_name: &CStr, shared_name: &CStr, shared_bytes: usize) -> Result<Handover, HandoverError> {
    let shared = memfd(shared_name)?;
    let so = memfd(library_name)?;
    // SAFETY: fds we own; `library` is a valid slice; the mapping is checked against MAP_FAILED.
    let base = unsafe {
        let ok = libc::ftruncate(shared.as_raw_fd(), shared_bytes as libc::off_t) == 0
            && libc::write(so.as_raw_fd(), library.as_ptr() as *const libc::c_void, library.len()) == library.len() as isize;
        let p = if ok {
            libc::mmap(std::ptr::null_mut(), shared_bytes, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, shared.as_raw_fd(), 0)
        } else {
            libc::MAP_FAILED
        };
        if p == libc::MAP_FAILED {
            // Both OwnedFds close as they drop.
            return Err(HandoverError::Setup(std::io::Error::last_os_error()));
        }
        p as *mut u8
    };
    Ok(Handover {
        base,
        shared_bytes,
        library_fd_number: so.as_raw_fd(),
        shared_fd_number: shared.as_raw_fd(),
        library_fd: Some(so),
        shared_fd: Some(shared),
    })
}

impl Handover {
    /// The start of the shared mapping (`shared_bytes` long, page-aligned).
    pub fn base(&self) -> *mut u8 {
        self.base
    }

    /// The shared memfd's number, as the program inherits it.
    pub fn shared_fd(&self) -> i32 {
        self.shared_fd_number
    }

    /// `LD_PRELOAD` naming the library's memfd, ahead of numalab's own `LD_PRELOAD`.
    pub fn preload(&self) -> OsString {
        preload_value(&format!("/proc/self/fd/{}", self.library_fd_number), std::env::var_os("LD_PRELOAD").as_deref())
    }

    /// After the program started: the agent's copies of the inherited fds are closed (the
    /// mapping stays).
    pub fn close_child_fds(&mut self) {
        self.library_fd = None;
        self.shared_fd = None;
    }
}

impl Drop for Handover {
    fn drop(&mut self) {
        // SAFETY: unmapping the mapping this value owns; the fds close as they drop.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.shared_bytes) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_library_goes_first_in_ld_preload() {
        assert_eq!(preload_value("/proc/self/fd/7", None), OsString::from("/proc/self/fd/7"));
        assert_eq!(preload_value("/proc/self/fd/7", Some(OsStr::new(""))), OsString::from("/proc/self/fd/7"));
        assert_eq!(preload_value("/proc/self/fd/7", Some(OsStr::new("libx.so"))), OsString::from("/proc/self/fd/7:libx.so"));
        assert_eq!(preload_value("/proc/self/fd/7", Some(OsStr::new("a.so b.so"))), OsString::from("/proc/self/fd/7:a.so b.so"));
    }

    /// The memfds of this test's names among this process's open fds.
    fn open_memfds(name: &str) -> usize {
        std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
            .filter(|target| target.to_string_lossy().contains(name))
            .count()
    }

    #[test]
    fn the_shared_memory_is_written_through_and_the_library_readable_by_its_path() {
        let mut h = handover(b"library bytes", c"numalab-test-preload-ok.so", c"numalab-test-preload-ok-shared", 8192).unwrap();
        assert_eq!(open_memfds("numalab-test-preload-ok"), 2);
        // SAFETY: the first byte of the 8192-byte mapping.
        unsafe { *h.base() = 42 };
        let shared = std::fs::read(format!("/proc/self/fd/{}", h.shared_fd())).unwrap();
        assert_eq!((shared.len(), shared[0]), (8192, 42));
        let preload = h.preload().into_string().unwrap();
        let library = preload.split(':').next().unwrap();
        assert_eq!(std::fs::read(library).unwrap(), b"library bytes");
        h.close_child_fds();
        assert_eq!(open_memfds("numalab-test-preload-ok"), 0);
        // SAFETY: the mapping outlives the fds.
        assert_eq!(unsafe { *h.base() }, 42);
    }

    /// A mapping of zero bytes is refused by mmap (EINVAL): both memfds are closed again.
    #[test]
    fn a_failed_set_up_closes_both_memfds() {
        let e = handover(b"x", c"numalab-test-preload-fail.so", c"numalab-test-preload-fail-shared", 0).err().unwrap();
        assert_eq!(e.io().raw_os_error(), Some(libc::EINVAL), "{e}");
        assert!(matches!(e, HandoverError::Setup(_)));
        assert_eq!(open_memfds("numalab-test-preload-fail"), 0);
    }

    #[test]
    fn dropping_a_hand_over_closes_its_fds() {
        let h = handover(b"x", c"numalab-test-preload-drop.so", c"numalab-test-preload-drop-shared", 4096).unwrap();
        assert_eq!(open_memfds("numalab-test-preload-drop"), 2);
        drop(h);
        assert_eq!(open_memfds("numalab-test-preload-drop"), 0);
    }
}
