//! Kernel settings recorded with every profile: NUMA balancing mode, `vm.numa_stat`,
//! `perf_event_paranoid`, kernel release, virtualization and CPU model.

use crate::error::{LinuxError, Result};
use crate::root::FsRoot;

fn read_int(root: &FsRoot, abs: &str) -> Result<Option<i64>> {
    match root.read(abs) {
        Ok((p, t)) => t
            .trim()
            .parse::<i64>()
            .map(Some)
            .map_err(|_| LinuxError::parse(&p, 1, abs.rsplit('/').next().unwrap_or(abs), format!("`{}` is not an integer", t.trim()))),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e),
    }
}

/// 0 off, 1 on, 2 memory tiering, 3 both; `None` without NUMA balancing support.
pub fn numa_balancing(root: &FsRoot) -> Result<Option<u32>> {
    Ok(read_int(root, "/proc/sys/kernel/numa_balancing")?.map(|v| v as u32))
}

/// `vm.numa_stat` (≥ 4.16); `None` when absent (the counters always update then).
pub fn numa_stat(root: &FsRoot) -> Result<Option<i64>> {
    read_int(root, "/proc/sys/vm/numa_stat")
}

pub fn perf_event_paranoid(root: &FsRoot) -> Result<Option<i32>> {
    Ok(read_int(root, "/proc/sys/kernel/perf_event_paranoid")?.map(|v| v as i32))
}

pub fn kernel_release(root: &FsRoot) -> Option<String> {
    root.read("/proc/sys/kernel/osrelease").ok().map(|(_, t)| t.trim().to_string())
}

/// Facts from `/proc/cpuinfo` and `/sys/hypervisor`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CpuFacts {
    pub model_name: Option<String>,
    pub virtualized: bool,
}

pub fn parse_cpuinfo(text: &str) -> CpuFacts {
    let mut f = CpuFacts::default();
    for line in text.lines() {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        match k.trim() {
            "model name" if f.model_name.is_none() => f.model_name = Some(v.trim().to_string()),
            "flags" if v.split_whitespace().any(|x| x == "hypervisor") => f.virtualized = true,
            _ => {}
        }
    }
    f
}

pub fn cpu_facts(root: &FsRoot) -> CpuFacts {
    let mut f = root.read("/proc/cpuinfo").map(|(_, t)| parse_cpuinfo(&t)).unwrap_or_default();
    if root.read("/sys/hypervisor/type").map(|(_, t)| !t.trim().is_empty()).unwrap_or(false) {
        f.virtualized = true;
    }
    f
}
