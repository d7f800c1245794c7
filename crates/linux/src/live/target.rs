//! What the live engine reads of its target process each period: its threads (CPU and CPU
//! time) and its private anonymous mappings (docs/live.md, "The live engine").

use crate::error::{LinuxError, Result};
use crate::procfs::maps::parse_maps;
use crate::root::FsRoot;
use std::path::Path;

/// One thread of the target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TaskInfo {
    pub tid: i32,
    /// CPU it last ran on (`/proc/PID/task/TID/stat` field 39, `processor`).
    pub cpu: u32,
    /// CPU time it has run, nanoseconds (`/proc/PID/task/TID/schedstat` first field, the
    /// scheduler's `se.sum_exec_runtime`).
    pub runtime_ns: u64,
}

/// The process the engine manages. `Ok(None)`: the process is gone.
pub trait Target {
    fn pid(&self) -> i32;
    fn tasks(&mut self) -> Result<Option<Vec<TaskInfo>>>;
    /// `[start, end)` of every private anonymous mapping, in address order.
    fn anon_ranges(&mut self) -> Result<Option<Vec<(u64, u64)>>>;
}

/// A live process read through procfs, bound to its start time (a pid reused by a later
/// process reads as gone).
#[derive(Clone, Debug)]
pub struct ProcTarget {
    pub root: FsRoot,
    pub pid: u32,
    pub start_time: u64,
}

impl ProcTarget {
    pub fn new(root: FsRoot, pid: u32) -> Result<ProcTarget> {
        let start_time = crate::procfs::stat::start_time(&root, pid)?;
        Ok(ProcTarget { root, pid, start_time })
    }

    fn gone(&self) -> bool {
        crate::procfs::stat::process_gone(&self.root, self.pid, self.start_time)
    }
}

/// Field 39 (`processor`) of a task's stat line: fields are counted after the command name's
/// last `)` (the name may hold spaces and parentheses).
pub fn parse_processor(path: &Path, text: &str) -> Result<u32> {
    let after =
        text.rfind(')').map(|i| &text[i + 1..]).ok_or_else(|| LinuxError::parse(path, 1, "processor", "no `)` after the command name"))?;
    let f = after.split_whitespace().nth(39 - 3).ok_or_else(|| LinuxError::parse(path, 1, "processor", "fewer than 39 fields"))?;
    f.parse().map_err(|_| LinuxError::parse(path, 1, "processor", format!("{f:?} is not a number")))
}

/// The first field of `/proc/PID/task/TID/schedstat`: time on the CPU, nanoseconds.
pub fn parse_schedstat_runtime(path: &Path, text: &str) -> Result<u64> {
    let f = text.split_whitespace().next().ok_or_else(|| LinuxError::parse(path, 1, "run_time", "empty"))?;
    f.parse().map_err(|_| LinuxError::parse(path, 1, "run_time", format!("{f:?} is not a number")))
}

impl Target for ProcTarget {
    fn pid(&self) -> i32 {
        self.pid as i32
    }

    fn tasks(&mut self) -> Result<Option<Vec<TaskInfo>>> {
        if self.gone() {
            return Ok(None);
        }
        let mut out = Vec::new();
        for tid in crate::sampler::threads(&self.root, self.pid) {
            // A thread that exits between the listing and the reads is skipped.
            let Ok((p, stat)) = self.root.read(&format!("/proc/{}/task/{tid}/stat", self.pid)) else { continue };
            let cpu = parse_processor(&p, &stat)?;
            let Ok((p, ss)) = self.root.read(&format!("/proc/{}/task/{tid}/schedstat", self.pid)) else { continue };
            out.push(TaskInfo { tid, cpu, runtime_ns: parse_schedstat_runtime(&p, &ss)? });
        }
        out.sort_by_key(|t| t.tid);
        Ok(if out.is_empty() && self.gone() { None } else { Some(out) })
    }

    fn anon_ranges(&mut self) -> Result<Option<Vec<(u64, u64)>>> {
        match self.root.read(&format!("/proc/{}/maps", self.pid)) {
            Ok((p, text)) => {
                if self.gone() {
                    return Ok(None);
                }
                let maps = parse_maps(&p, &text)?;
                Ok(Some(maps.iter().filter(|m| m.is_private_anon()).map(|m| (m.start, m.end)).collect()))
            }
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// A scripted target: `tasks` per round (the last repeats), fixed ranges; `gone_after` rounds
/// of `tasks` it answers `None`.
#[derive(Clone, Debug, Default)]
pub struct FakeTarget {
    pub pid: i32,
    pub rounds: Vec<Vec<TaskInfo>>,
    pub ranges: Vec<(u64, u64)>,
    pub gone_after: Option<usize>,
    pub polls: usize,
}

impl Target for FakeTarget {
    fn pid(&self) -> i32 {
        self.pid
    }
    fn tasks(&mut self) -> Result<Option<Vec<TaskInfo>>> {
        self.polls += 1;
        if self.gone_after.is_some_and(|n| self.polls > n) {
            return Ok(None);
        }
        Ok(self.rounds.get(self.polls - 1).or(self.rounds.last()).cloned())
    }
    fn anon_ranges(&mut self) -> Result<Option<Vec<(u64, u64)>>> {
        if self.gone_after.is_some_and(|n| self.polls > n) {
            return Ok(None);
        }
        Ok(Some(self.ranges.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn processor_and_runtime_parse_as_procfs_lays_them_out() {
        // A stat line of Linux 6.1 whose command name holds ") (" (fields after it counted).
        let stat = "4242 (a) (b) S 1 4242 4242 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 2 0 12345 1000 100 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0 0 0 0 0 0 0 0 0";
        assert_eq!(parse_processor(Path::new("stat"), stat).unwrap(), 3);
        assert!(parse_processor(Path::new("stat"), "1 (x) S 1 2").unwrap_err().to_string().contains("fewer than 39 fields"));
        assert_eq!(parse_schedstat_runtime(Path::new("schedstat"), "123456789 2000 17\n").unwrap(), 123456789);
        assert!(parse_schedstat_runtime(Path::new("schedstat"), "x 1 2").is_err());
    }

    /// This test process read as a target: its threads (this one among them) and its heap.
    #[test]
    fn this_process_reads_as_a_target() {
        let mut t = ProcTarget::new(FsRoot::host(), std::process::id()).unwrap();
        let tasks = t.tasks().unwrap().unwrap();
        // SAFETY: gettid has no preconditions.
        let me = unsafe { libc::gettid() };
        let mine = tasks.iter().find(|x| x.tid == me).expect("this thread is listed");
        assert!(mine.runtime_ns > 0);
        let buf = vec![7u8; 1 << 20];
        let ranges = t.anon_ranges().unwrap().unwrap();
        let a = buf.as_ptr() as u64;
        assert!(ranges.iter().any(|&(s, e)| s <= a && a < e), "the heap buffer is in a private anonymous mapping");
        std::hint::black_box(&buf);
        // A start time of another process: gone.
        let mut stale = ProcTarget { start_time: u64::MAX, ..t };
        assert_eq!(stale.tasks().unwrap(), None);
        assert_eq!(stale.anon_ranges().unwrap(), None);
    }
}
