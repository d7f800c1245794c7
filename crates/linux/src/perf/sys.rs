//! The raw interface: `struct perf_event_attr` (layout of `PERF_ATTR_SIZE_VER7`, 128 bytes,
//! Linux ≥ 5.13; older kernels accept it only with the newer fields zero, which they are),
//! the syscall and the control ioctls. Written out here rather than bound with bindgen: only
//! the counting subset is needed and its layout is ABI-stable.

use std::os::fd::{FromRawFd, OwnedFd};

pub const PERF_TYPE_HARDWARE: u32 = 0;
pub const PERF_TYPE_SOFTWARE: u32 = 1;
pub const PERF_TYPE_HW_CACHE: u32 = 3;
pub const PERF_TYPE_RAW: u32 = 4;

pub const PERF_FORMAT_TOTAL_TIME_ENABLED: u64 = 1 << 0;
pub const PERF_FORMAT_TOTAL_TIME_RUNNING: u64 = 1 << 1;
pub const PERF_FORMAT_ID: u64 = 1 << 2;
pub const PERF_FORMAT_GROUP: u64 = 1 << 3;

pub const FLAG_DISABLED: u64 = 1 << 0;
pub const FLAG_INHERIT: u64 = 1 << 1;
pub const FLAG_PINNED: u64 = 1 << 2;
pub const FLAG_EXCLUDE_KERNEL: u64 = 1 << 5;
pub const FLAG_EXCLUDE_HV: u64 = 1 << 6;
pub const FLAG_ENABLE_ON_EXEC: u64 = 1 << 12;

const PERF_EVENT_IOC_ENABLE: libc::c_ulong = 0x2400;
const PERF_EVENT_IOC_DISABLE: libc::c_ulong = 0x2401;
const PERF_EVENT_IOC_RESET: libc::c_ulong = 0x2403;
const PERF_EVENT_IOC_ID: libc::c_ulong = 0x8008_2407;
const PERF_IOC_FLAG_GROUP: libc::c_ulong = 1;
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;

/// `struct perf_event_attr`, version 7 layout.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PerfEventAttr {
    pub type_: u32,
    pub size: u32,
    pub config: u64,
    pub sample_period: u64,
    pub sample_type: u64,
    pub read_format: u64,
    /// The bitfield word: `disabled`, `inherit`, `pinned`, … (FLAG_* constants).
    pub flags: u64,
    pub wakeup_events: u32,
    pub bp_type: u32,
    pub config1: u64,
    pub config2: u64,
    pub branch_sample_type: u64,
    pub sample_regs_user: u64,
    pub sample_stack_user: u32,
    pub clockid: i32,
    pub sample_regs_intr: u64,
    pub aux_watermark: u32,
    pub sample_max_stack: u16,
    pub reserved_2: u16,
    pub aux_sample_size: u32,
    pub reserved_3: u32,
    pub sig_data: u64,
}

pub const ATTR_SIZE: u32 = std::mem::size_of::<PerfEventAttr>() as u32;

impl PerfEventAttr {
    pub fn counting(type_: u32, config: u64, read_format: u64, flags: u64) -> PerfEventAttr {
        PerfEventAttr { type_, size: ATTR_SIZE, config, read_format, flags, ..Default::default() }
    }
}

/// `perf_event_open(attr, pid, cpu, group_fd, FD_CLOEXEC)`; `Err(errno)` on failure.
pub fn perf_event_open(attr: &PerfEventAttr, pid: i32, cpu: i32, group_fd: i32) -> Result<OwnedFd, i32> {
    // SAFETY: attr points to a live, fully initialised struct whose `size` matches its layout;
    // the other arguments are plain integers.
    let fd = unsafe { libc::syscall(libc::SYS_perf_event_open, attr as *const PerfEventAttr, pid, cpu, group_fd, PERF_FLAG_FD_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO));
    }
    // SAFETY: the kernel returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

fn ioctl(fd: i32, request: libc::c_ulong, arg: libc::c_ulong) -> Result<(), i32> {
    // SAFETY: perf ioctls with an integer argument; an invalid fd yields EBADF, not UB.
    let r = unsafe { libc::ioctl(fd, request as _, arg) };
    if r < 0 {
        return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO));
    }
    Ok(())
}

pub fn enable_group(leader: i32) -> Result<(), i32> {
    ioctl(leader, PERF_EVENT_IOC_ENABLE, PERF_IOC_FLAG_GROUP)
}

pub fn disable_group(leader: i32) -> Result<(), i32> {
    ioctl(leader, PERF_EVENT_IOC_DISABLE, PERF_IOC_FLAG_GROUP)
}

pub fn reset_group(leader: i32) -> Result<(), i32> {
    ioctl(leader, PERF_EVENT_IOC_RESET, PERF_IOC_FLAG_GROUP)
}

/// The kernel's id of an event, used to map group-read entries back to events.
pub fn event_id(fd: i32) -> Result<u64, i32> {
    let mut id: u64 = 0;
    // SAFETY: PERF_EVENT_IOC_ID writes one u64 through the pointer, which is valid.
    let r = unsafe { libc::ioctl(fd, PERF_EVENT_IOC_ID as _, &mut id as *mut u64) };
    if r < 0 {
        return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO));
    }
    Ok(id)
}

/// `read(2)` into `buf`; returns the byte count (0 = the group is in error state).
pub fn read_fd(fd: i32, buf: &mut [u8]) -> Result<usize, i32> {
    // SAFETY: buf is a valid writable buffer of the given length.
    let n = unsafe { libc::read(fd, buf.as_mut_ptr() as *mut libc::c_void, buf.len()) };
    if n < 0 {
        return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO));
    }
    Ok(n as usize)
}

pub fn errno_name(errno: i32) -> &'static str {
    match errno {
        libc::ENOENT => "ENOENT",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::ENODEV => "ENODEV",
        libc::EINVAL => "EINVAL",
        libc::EACCES => "EACCES",
        libc::EPERM => "EPERM",
        libc::EBUSY => "EBUSY",
        libc::ESRCH => "ESRCH",
        libc::EMFILE => "EMFILE",
        libc::ENFILE => "ENFILE",
        libc::E2BIG => "E2BIG",
        libc::ECHILD => "ECHILD",
        libc::ENOSYS => "ENOSYS",
        _ => "errno",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attr_has_the_version_7_size() {
        assert_eq!(ATTR_SIZE, 128);
    }
}
