//! `/sys/devices/system/node`: node lists, and per node `cpulist`, `meminfo`, `distance`,
//! `numastat`.

use crate::error::{LinuxError, Result};
use crate::parse::{parse_key_values, parse_list};
use crate::root::FsRoot;
use std::collections::BTreeMap;
use std::path::Path;

pub const NODE_DIR: &str = "/sys/devices/system/node";

/// Per-node `meminfo` (`Node 0 MemTotal:  6777036 kB`): values with a `kB` unit are converted
/// to bytes, unit-less ones (`HugePages_Total`) are counts. Keys lose the `Node N ` prefix.
pub fn parse_node_meminfo(text: &str, path: &Path) -> Result<BTreeMap<String, u64>> {
    let mut out = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let (head, rest) =
            line.split_once(':').ok_or_else(|| LinuxError::parse(path, i + 1, line.trim(), "expected `Node N Key: value`"))?;
        let key = head.split_whitespace().last().unwrap_or("").to_string();
        if key.is_empty() {
            return Err(LinuxError::parse(path, i + 1, head, "empty key"));
        }
        let mut it = rest.split_whitespace();
        let val = it.next().ok_or_else(|| LinuxError::parse(path, i + 1, &key, "missing value"))?;
        let n: u64 = val.parse().map_err(|_| LinuxError::parse(path, i + 1, &key, format!("`{val}` is not an unsigned integer")))?;
        let bytes = match it.next() {
            None => n,
            Some("kB") => n.checked_mul(1024).ok_or_else(|| LinuxError::parse(path, i + 1, &key, "value overflows bytes"))?,
            Some(u) => return Err(LinuxError::parse(path, i + 1, &key, format!("unknown unit `{u}`"))),
        };
        out.insert(key, bytes);
    }
    Ok(out)
}

/// A `distance` line: distances to every online node, in online-node order.
pub fn parse_distance(text: &str, path: &Path) -> Result<Vec<u32>> {
    text.split_whitespace()
        .map(|t| t.parse::<u32>().map_err(|_| LinuxError::parse(path, 1, "distance", format!("`{t}` is not a number"))))
        .collect()
}

/// Everything sysfs says about one node.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct NodeInfo {
    pub id: u32,
    pub cpus: Vec<u32>,
    pub mem_total_bytes: u64,
    pub mem_free_bytes: u64,
    /// Distances to every online node, in the order of [`NodeLists::online`].
    pub distances: Vec<u32>,
    /// Allocation outcomes in pages (`numa_hit`, …); empty when the file is absent.
    pub numastat: BTreeMap<String, u64>,
    pub meminfo: BTreeMap<String, u64>,
}

/// The node masks of `/sys/devices/system/node`.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct NodeLists {
    pub online: Vec<u32>,
    pub possible: Vec<u32>,
    pub has_cpu: Vec<u32>,
    pub has_memory: Vec<u32>,
}

fn read_list(root: &FsRoot, name: &str) -> Result<Option<Vec<u32>>> {
    match root.read(&format!("{NODE_DIR}/{name}")) {
        Ok((p, t)) => parse_list(&t, &p, name).map(Some),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e),
    }
}

/// Read the node masks. `online` falls back to the `nodeN` directories present.
pub fn read_node_lists(root: &FsRoot) -> Result<NodeLists> {
    let online = match read_list(root, "online")? {
        Some(l) => l,
        None => {
            let mut ids: Vec<u32> = root.list(NODE_DIR)?.iter().filter_map(|n| n.strip_prefix("node")?.parse().ok()).collect();
            ids.sort_unstable();
            ids
        }
    };
    Ok(NodeLists {
        possible: read_list(root, "possible")?.unwrap_or_else(|| online.clone()),
        has_cpu: read_list(root, "has_cpu")?.unwrap_or_default(),
        has_memory: read_list(root, "has_memory")?.unwrap_or_default(),
        online,
    })
}

pub fn read_numastat(root: &FsRoot, node: u32) -> Result<BTreeMap<String, u64>> {
    let (p, t) = root.read(&format!("{NODE_DIR}/node{node}/numastat"))?;
    parse_key_values(&t, &p)
}

pub fn read_node(root: &FsRoot, id: u32) -> Result<NodeInfo> {
    let dir = format!("{NODE_DIR}/node{id}");
    let (p, t) = root.read(&format!("{dir}/cpulist"))?;
    let cpus = parse_list(&t, &p, "cpulist")?;
    let (p, t) = root.read(&format!("{dir}/meminfo"))?;
    let meminfo = parse_node_meminfo(&t, &p)?;
    let need = |k: &str| meminfo.get(k).copied().ok_or_else(|| LinuxError::parse(&p, 0, k, "missing"));
    let (mem_total_bytes, mem_free_bytes) = (need("MemTotal")?, need("MemFree")?);
    let (p, t) = root.read(&format!("{dir}/distance"))?;
    let distances = parse_distance(&t, &p)?;
    let numastat = match read_numastat(root, id) {
        Ok(m) => m,
        Err(e) if e.is_not_found() => BTreeMap::new(),
        Err(e) => return Err(e),
    };
    Ok(NodeInfo { id, cpus, mem_total_bytes, mem_free_bytes, distances, numastat, meminfo })
}
