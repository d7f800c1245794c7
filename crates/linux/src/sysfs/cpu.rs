//! `/sys/devices/system/cpu`: packages, SMT siblings, LLC size and maximum frequency — the
//! parts of a machine file sysfs can tell. Every field is optional: containers and some
//! virtual machines hide them.

use crate::error::{LinuxError, Result};
use crate::parse::parse_list;
use crate::root::FsRoot;
use std::path::Path;

pub const CPU_DIR: &str = "/sys/devices/system/cpu";

#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct CpuInfo {
    pub cpu: u32,
    pub package: Option<u32>,
    /// Hardware threads sharing this CPU's core (including itself).
    pub siblings: Option<Vec<u32>>,
    pub llc_bytes: Option<u64>,
    pub max_freq_khz: Option<u64>,
}

/// Cache `size` text such as `16384K` or `32M`.
pub fn parse_cache_size(text: &str, path: &Path) -> Result<u64> {
    let t = text.trim();
    let (num, mult) = match t.chars().last() {
        Some('K') => (&t[..t.len() - 1], 1024),
        Some('M') => (&t[..t.len() - 1], 1024 * 1024),
        Some('G') => (&t[..t.len() - 1], 1024 * 1024 * 1024),
        _ => (t, 1),
    };
    num.parse::<u64>().map(|n| n * mult).map_err(|_| LinuxError::parse(path, 1, "size", format!("`{t}` is not a cache size")))
}

fn optional<T>(r: Result<T>) -> Result<Option<T>> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e),
    }
}

fn read_u64(root: &FsRoot, abs: &str) -> Result<u64> {
    let (p, t) = root.read(abs)?;
    t.trim().parse().map_err(|_| LinuxError::parse(&p, 1, abs.rsplit('/').next().unwrap_or(abs), format!("`{}` is not a number", t.trim())))
}

pub fn read_cpu(root: &FsRoot, cpu: u32) -> Result<CpuInfo> {
    let d = format!("{CPU_DIR}/cpu{cpu}");
    let package = optional(read_u64(root, &format!("{d}/topology/physical_package_id")))?.map(|v| v as u32);
    let siblings =
        optional(root.read(&format!("{d}/topology/thread_siblings_list")).and_then(|(p, t)| parse_list(&t, &p, "thread_siblings_list")))?;
    let llc_bytes = optional(root.read(&format!("{d}/cache/index3/size")).and_then(|(p, t)| parse_cache_size(&t, &p)))?;
    let max_freq_khz = optional(read_u64(root, &format!("{d}/cpufreq/cpuinfo_max_freq")))?;
    Ok(CpuInfo { cpu, package, siblings, llc_bytes, max_freq_khz })
}
