//! `/proc/PID/sched` and `/proc/PID/task/TID/sched`: the NUMA balancing lines (auto-numa §10).
//! Present only with `CONFIG_NUMA_BALANCING`; other lines are ignored.

use crate::error::{LinuxError, Result};
use numalab_core::profile::{NodeFaults, SchedNuma};
use std::path::Path;

fn int(path: &Path, line: usize, field: &str, v: &str) -> Result<i64> {
    v.trim().parse::<i64>().map_err(|_| LinuxError::parse(path, line, field, format!("`{}` is not an integer", v.trim())))
}

/// Parse the NUMA statistics; `Ok(None)` when the text has none (no NUMA balancing support).
pub fn parse_sched_numa(text: &str, path: &Path) -> Result<Option<SchedNuma>> {
    let mut s = SchedNuma::default();
    let mut any = false;
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        if let Some(rest) = line.strip_prefix("numa_faults ") {
            let mut f = NodeFaults::default();
            for kv in rest.split_whitespace() {
                let Some((k, v)) = kv.split_once('=') else {
                    return Err(LinuxError::parse(path, n, kv, "expected key=value"));
                };
                match k {
                    "node" => f.node = int(path, n, k, v)?.try_into().map_err(|_| LinuxError::parse(path, n, k, "negative node"))?,
                    "task_private" => f.task_private = int(path, n, k, v)?,
                    "task_shared" => f.task_shared = int(path, n, k, v)?,
                    "group_private" => f.group_private = int(path, n, k, v)?,
                    "group_shared" => f.group_shared = int(path, n, k, v)?,
                    _ => {}
                }
            }
            s.faults.push(f);
            any = true;
            continue;
        }
        if line.starts_with("current_node=") {
            for kv in line.split(',') {
                let Some((k, v)) = kv.trim().split_once('=') else {
                    continue;
                };
                match k {
                    "current_node" => s.current_node = Some(int(path, n, k, v)?),
                    "numa_group_id" => s.numa_group_id = Some(int(path, n, k, v)?),
                    _ => {}
                }
            }
            any = true;
            continue;
        }
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let key = k.trim();
        let slot = match key {
            "mm->numa_scan_seq" => &mut s.numa_scan_seq,
            "numa_pages_migrated" => &mut s.numa_pages_migrated,
            "numa_preferred_nid" => &mut s.numa_preferred_nid,
            "total_numa_faults" => &mut s.total_numa_faults,
            "se.nr_migrations" => {
                s.nr_migrations = Some(int(path, n, key, v)?);
                continue;
            }
            _ => continue,
        };
        *slot = Some(int(path, n, key, v)?);
        any = true;
    }
    Ok(any.then_some(s))
}
