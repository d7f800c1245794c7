//! The system calls the agent makes, as data: the recording fake stores them, tests compare
//! them, and [`SysCall::invoke`] makes them. `invoke` allocates nothing and takes no lock, so
//! it may run in a forked child before `exec` (`pre_exec`), where only async-signal-safe work
//! is allowed.

use serde::Serialize;

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "call", rename_all = "snake_case")]
pub enum SysCall {
    /// `set_mempolicy(mode, nodemask, maxnode)` for the calling thread; an empty mask is NULL.
    SetMempolicy { mode: i32, nodemask: Vec<u64>, maxnode: u64 },
    /// `sched_setaffinity(tid, sizeof mask, mask)`; `tid` 0 is the calling thread.
    SchedSetaffinity { tid: i32, mask: Vec<u64> },
}

impl SysCall {
    pub fn name(&self) -> &'static str {
        match self {
            SysCall::SetMempolicy { .. } => "set_mempolicy",
            SysCall::SchedSetaffinity { .. } => "sched_setaffinity",
        }
    }

    /// Make the call; `Err(errno)` if the kernel refused it.
    pub fn invoke(&self) -> Result<(), i32> {
        // SAFETY (both arms): raw system calls whose pointer arguments point into vectors that
        // outlive the call, with lengths derived from those vectors.
        let r = match self {
            SysCall::SetMempolicy { mode, nodemask, maxnode } => {
                let ptr = if nodemask.is_empty() { std::ptr::null() } else { nodemask.as_ptr() };
                unsafe { libc::syscall(libc::SYS_set_mempolicy, *mode as libc::c_long, ptr, *maxnode as libc::c_ulong) }
            }
            SysCall::SchedSetaffinity { tid, mask } => unsafe {
                libc::syscall(libc::SYS_sched_setaffinity, *tid as libc::c_long, std::mem::size_of_val(mask.as_slice()), mask.as_ptr())
            },
        };
        if r == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
        }
    }
}

/// A CPU set as `sched_setaffinity` mask words.
pub fn cpu_mask(cpus: &[u32]) -> Vec<u64> {
    let words = cpus.iter().max().map_or(1, |&c| c as usize / 64 + 1);
    let mut mask = vec![0u64; words];
    for &c in cpus {
        mask[c as usize / 64] |= 1 << (c % 64);
    }
    mask
}

/// `strerror` text of an errno, without the "(os error N)" suffix std adds.
pub fn errno_text(errno: i32) -> String {
    let s = std::io::Error::from_raw_os_error(errno).to_string();
    match s.find(" (os error") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_masks_span_as_many_words_as_the_highest_cpu_needs() {
        assert_eq!(cpu_mask(&[2, 3]), vec![0b1100]);
        assert_eq!(cpu_mask(&[0, 64, 65]), vec![1, 0b11]);
        assert_eq!(cpu_mask(&[]), vec![0]);
    }

    #[test]
    fn the_calling_threads_own_affinity_can_be_set_to_what_it_has() {
        // A call that must succeed on any Linux host: the affinity the thread already has.
        // Runs in a throwaway thread so the test process is never changed.
        std::thread::spawn(|| {
            let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
            // SAFETY: set is a valid cpu_set_t of the size passed.
            assert_eq!(unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) }, 0);
            let cpus: Vec<u32> = (0..libc::CPU_SETSIZE as u32).filter(|&c| unsafe { libc::CPU_ISSET(c as usize, &set) }).collect();
            assert_eq!(SysCall::SchedSetaffinity { tid: 0, mask: cpu_mask(&cpus) }.invoke(), Ok(()));
            // The kernel refuses an empty set with EINVAL.
            assert_eq!(SysCall::SchedSetaffinity { tid: 0, mask: vec![0] }.invoke(), Err(libc::EINVAL));
            // MPOL_LOCAL with a NULL mask is valid on every NUMA-enabled kernel; mode 99 is not.
            assert_eq!(SysCall::SetMempolicy { mode: 4, nodemask: vec![], maxnode: 0 }.invoke(), Ok(()));
            assert_eq!(SysCall::SetMempolicy { mode: 99, nodemask: vec![], maxnode: 0 }.invoke(), Err(libc::EINVAL));
        })
        .join()
        .unwrap();
    }

    #[test]
    fn errno_text_drops_the_os_error_suffix() {
        assert_eq!(errno_text(libc::EINVAL), "Invalid argument");
    }
}
