//! NUMA state of a target and of the system, sampled from procfs/sysfs: pages per node
//! (numa_maps), per-task NUMA balancing state (sched), vmstat and per-node numastat deltas.

use crate::error::Result;
use crate::parse::parse_key_values;
use crate::procfs::numa_maps::{pages_per_node, parse_numa_maps};
use crate::procfs::sched::parse_sched_numa;
use crate::procfs::settings::numa_stat;
use crate::procfs::vmstat::{parse_vmstat, ALLOCATION, TRACKED};
use crate::root::FsRoot;
use crate::sysfs::node::{read_node_lists, NODE_DIR};
use numalab_core::profile::{Counter, NodePages, SchedNuma};
use std::collections::BTreeMap;

/// Pages per node of a process; `Ok(None)` once the process (or its address space) is gone.
pub fn target_pages(root: &FsRoot, pid: u32) -> Result<Option<Vec<NodePages>>> {
    match root.read(&format!("/proc/{pid}/numa_maps")) {
        Ok((p, t)) => {
            // A zombie has an empty numa_maps: its memory is already released.
            if t.trim().is_empty() {
                return Ok(None);
            }
            Ok(Some(pages_per_node(&parse_numa_maps(&t, &p)?)))
        }
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e),
    }
}

/// NUMA balancing state of a task; `Ok(None)` without NUMA balancing or once it is gone.
pub fn target_sched(root: &FsRoot, pid: u32) -> Result<Option<SchedNuma>> {
    match root.read(&format!("/proc/{pid}/sched")) {
        Ok((p, t)) => parse_sched_numa(&t, &p),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e),
    }
}

/// Thread ids of a process (`/proc/PID/task`); empty once it is gone.
pub fn threads(root: &FsRoot, pid: u32) -> Vec<i32> {
    root.list(&format!("/proc/{pid}/task")).map(|names| names.iter().filter_map(|n| n.parse().ok()).collect()).unwrap_or_default()
}

fn read_vmstat(root: &FsRoot) -> Result<BTreeMap<String, u64>> {
    let (p, t) = root.read("/proc/vmstat")?;
    parse_vmstat(&t, &p)
}

fn read_all_numastat(root: &FsRoot) -> Result<BTreeMap<u32, BTreeMap<String, u64>>> {
    let mut out = BTreeMap::new();
    for node in read_node_lists(root)?.online {
        match root.read(&format!("{NODE_DIR}/node{node}/numastat")) {
            Ok((p, t)) => {
                out.insert(node, parse_key_values(&t, &p)?);
            }
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

/// Per node, per numastat key.
pub type NodeCounters = BTreeMap<u32, BTreeMap<String, Counter>>;

/// System counters at the start of the window, for deltas.
#[derive(Clone, Debug)]
pub struct SystemBaseline {
    vmstat: BTreeMap<String, u64>,
    prev_vmstat: BTreeMap<String, u64>,
    numastat: BTreeMap<u32, BTreeMap<String, u64>>,
    /// `vm.numa_stat = 0`: allocation counters are frozen.
    numa_stat_off: bool,
}

fn delta(now: u64, then: u64) -> i64 {
    now as i64 - then as i64
}

impl SystemBaseline {
    pub fn take(root: &FsRoot) -> Result<SystemBaseline> {
        let vmstat = read_vmstat(root)?;
        Ok(SystemBaseline {
            prev_vmstat: vmstat.clone(),
            vmstat,
            numastat: read_all_numastat(root)?,
            numa_stat_off: numa_stat(root)? == Some(0),
        })
    }

    /// Deltas of the tracked vmstat counters since the previous call (for the timeline).
    pub fn interval_vmstat(&mut self, root: &FsRoot) -> Result<BTreeMap<String, i64>> {
        let now = read_vmstat(root)?;
        let out = TRACKED.iter().filter_map(|k| Some((k.to_string(), delta(*now.get(*k)?, *self.prev_vmstat.get(*k)?)))).collect();
        self.prev_vmstat = now;
        Ok(out)
    }

    fn counter(&self, key: &str, now: Option<u64>, then: Option<u64>, source: &str, allocation: bool) -> Counter {
        if self.numa_stat_off && allocation {
            return Counter::unsupported("vm.numa_stat = 0: the kernel does not update allocation counters");
        }
        match (now, then) {
            (Some(n), Some(t)) => Counter::ok(delta(n, t)),
            _ => Counter::unsupported(format!("{key} is not in {source} on this kernel")),
        }
    }

    /// Deltas over the whole window: tracked vmstat counters and per-node numastat.
    pub fn finish(&self, root: &FsRoot) -> Result<(BTreeMap<String, Counter>, NodeCounters)> {
        let now = read_vmstat(root)?;
        let vm = TRACKED
            .iter()
            .map(|k| {
                (k.to_string(), self.counter(k, now.get(*k).copied(), self.vmstat.get(*k).copied(), "/proc/vmstat", ALLOCATION.contains(k)))
            })
            .collect();
        let now_ns = read_all_numastat(root)?;
        let mut ns = BTreeMap::new();
        for (node, then) in &self.numastat {
            let Some(cur) = now_ns.get(node) else {
                continue;
            };
            let per: BTreeMap<String, Counter> =
                then.keys().map(|k| (k.clone(), self.counter(k, cur.get(k).copied(), then.get(k).copied(), "numastat", true))).collect();
            ns.insert(*node, per);
        }
        Ok((vm, ns))
    }
}
