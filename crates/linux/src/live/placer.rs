//! Moving a program's threads between nodes: `sched_setaffinity(2)` per thread, behind a
//! trait with a recording fake (docs/live.md, "Thread moves").

use crate::act::syscall::{cpu_mask, SysCall};
use crate::root::FsRoot;
use std::collections::BTreeMap;

/// Reads and sets one thread's CPU affinity. `Err(errno)`: `ESRCH` when the thread is gone.
pub trait ThreadPlacer {
    fn get_affinity(&mut self, tid: i32) -> Result<Vec<u32>, i32>;
    fn set_affinity(&mut self, tid: i32, cpus: &[u32]) -> Result<(), i32>;
}

/// The kernel's calls, only on threads of `pid`: before each call the thread must still be
/// listed under `/proc/PID/task/`, so a thread id reused by another process is never touched.
#[derive(Clone, Debug)]
pub struct SystemThreadPlacer {
    pub pid: i32,
}

impl SystemThreadPlacer {
    fn check(&self, tid: i32) -> Result<(), i32> {
        if FsRoot::host().read(&format!("/proc/{}/task/{tid}/stat", self.pid)).is_ok() {
            Ok(())
        } else {
            Err(libc::ESRCH)
        }
    }
}

/// Bits of the affinity buffer: hosts with up to this many CPUs.
const MAX_CPUS: usize = 8192;

impl ThreadPlacer for SystemThreadPlacer {
    fn get_affinity(&mut self, tid: i32) -> Result<Vec<u32>, i32> {
        self.check(tid)?;
        let mut mask = vec![0u64; MAX_CPUS / 64];
        // SAFETY: the buffer is valid for its byte length, which is passed.
        let r = unsafe { libc::syscall(libc::SYS_sched_getaffinity, tid as libc::c_long, MAX_CPUS / 8, mask.as_mut_ptr()) };
        if r < 0 {
            return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO));
        }
        Ok((0..MAX_CPUS as u32).filter(|&c| mask[c as usize / 64] & (1 << (c % 64)) != 0).collect())
    }

    fn set_affinity(&mut self, tid: i32, cpus: &[u32]) -> Result<(), i32> {
        self.check(tid)?;
        SysCall::SchedSetaffinity { tid, mask: cpu_mask(cpus) }.invoke()
    }
}

/// One call the fake heard.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AffinityCall {
    Get { tid: i32 },
    Set { tid: i32, cpus: Vec<u32> },
}

/// Records every call and plays threads whose affinity is in `affinity`; threads in `gone`
/// answer `ESRCH`.
#[derive(Clone, Debug, Default)]
pub struct FakeThreadPlacer {
    pub calls: Vec<AffinityCall>,
    pub affinity: BTreeMap<i32, Vec<u32>>,
    pub gone: Vec<i32>,
}

impl ThreadPlacer for FakeThreadPlacer {
    fn get_affinity(&mut self, tid: i32) -> Result<Vec<u32>, i32> {
        self.calls.push(AffinityCall::Get { tid });
        if self.gone.contains(&tid) {
            return Err(libc::ESRCH);
        }
        self.affinity.get(&tid).cloned().ok_or(libc::ESRCH)
    }

    fn set_affinity(&mut self, tid: i32, cpus: &[u32]) -> Result<(), i32> {
        self.calls.push(AffinityCall::Set { tid, cpus: cpus.to_vec() });
        if self.gone.contains(&tid) || !self.affinity.contains_key(&tid) {
            return Err(libc::ESRCH);
        }
        self.affinity.insert(tid, cpus.to_vec());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The real calls on a thread of this test process: read its affinity, set it to what it
    /// is, and a thread id that is not this process's is refused without a system call.
    #[test]
    fn the_system_placer_reads_and_sets_this_processes_thread() {
        let pid = std::process::id() as i32;
        std::thread::spawn(move || {
            // SAFETY: gettid has no preconditions.
            let tid = unsafe { libc::gettid() };
            let mut p = SystemThreadPlacer { pid };
            let cpus = p.get_affinity(tid).unwrap();
            assert!(!cpus.is_empty());
            assert_eq!(p.set_affinity(tid, &cpus), Ok(()));
            assert_eq!(p.get_affinity(tid).unwrap(), cpus);
            assert_eq!(p.set_affinity(i32::MAX, &cpus), Err(libc::ESRCH));
        })
        .join()
        .unwrap();
    }
}
