//! The host's NUMA topology assembled from sysfs: node masks, per-node CPUs, memory,
//! distances and numastat, memory tiers and CPU facts. Shared by `numalab topo`,
//! `topo --export` and `machine import`.

use crate::error::{LinuxError, Result};
use crate::root::FsRoot;
use crate::sysfs::cpu::{read_cpu, CpuInfo};
use crate::sysfs::node::{read_node, read_node_lists, NodeInfo, NodeLists, NODE_DIR};
use crate::sysfs::tiers::{read_tiers, MemoryTier};

#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Topology {
    pub lists: NodeLists,
    /// Online nodes, ascending id (the order of every `distances` row).
    pub nodes: Vec<NodeInfo>,
    /// `None`: the kernel exposes no memory tiering.
    pub tiers: Option<Vec<MemoryTier>>,
    /// Every CPU of every node, ascending.
    pub cpus: Vec<CpuInfo>,
    /// Huge page sizes the kernel offers (`/sys/kernel/mm/hugepages`), bytes.
    pub huge_page_bytes: Vec<u64>,
}

impl Topology {
    pub fn read(root: &FsRoot) -> Result<Topology> {
        let lists = read_node_lists(root)?;
        if lists.online.is_empty() {
            return Err(LinuxError::Invalid { path: root.path(NODE_DIR), message: "no online NUMA node".into() });
        }
        let mut nodes = Vec::with_capacity(lists.online.len());
        for &id in &lists.online {
            let n = read_node(root, id)?;
            if n.distances.len() != lists.online.len() {
                return Err(LinuxError::Invalid {
                    path: root.path(&format!("{NODE_DIR}/node{id}/distance")),
                    message: format!("{} distances for {} online nodes", n.distances.len(), lists.online.len()),
                });
            }
            nodes.push(n);
        }
        let mut cpu_ids: Vec<u32> = nodes.iter().flat_map(|n| n.cpus.iter().copied()).collect();
        cpu_ids.sort_unstable();
        if let Some(w) = cpu_ids.windows(2).find(|w| w[0] == w[1]) {
            let owners: Vec<String> = nodes.iter().filter(|n| n.cpus.contains(&w[0])).map(|n| format!("node{}", n.id)).collect();
            return Err(LinuxError::Invalid {
                path: root.path(NODE_DIR),
                message: format!("CPU {} is listed by more than one node's cpulist ({})", w[0], owners.join(", ")),
            });
        }
        let cpus = cpu_ids.iter().map(|&c| read_cpu(root, c)).collect::<Result<Vec<_>>>()?;
        let huge_page_bytes = match root.list("/sys/kernel/mm/hugepages") {
            Ok(names) => {
                let mut v: Vec<u64> = names
                    .iter()
                    .filter_map(|n| n.strip_prefix("hugepages-")?.strip_suffix("kB")?.parse::<u64>().ok())
                    .map(|kb| kb * 1024)
                    .collect();
                v.sort_unstable();
                v
            }
            Err(e) if e.is_not_found() => Vec::new(),
            Err(e) => return Err(e),
        };
        Ok(Topology { lists, nodes, tiers: read_tiers(root)?, cpus, huge_page_bytes })
    }

    /// Memory tier id of a node (`memory_tierN`), if the kernel has tiering.
    pub fn tier_of(&self, node: u32) -> Option<u32> {
        self.tiers.as_ref()?.iter().find(|t| t.nodes.contains(&node)).map(|t| t.id)
    }

    pub fn cpu_less_nodes(&self) -> Vec<u32> {
        self.nodes.iter().filter(|n| n.cpus.is_empty()).map(|n| n.id).collect()
    }

    pub fn cpu(&self, id: u32) -> Option<&CpuInfo> {
        self.cpus.iter().find(|c| c.cpu == id)
    }

    /// Node of a CPU.
    pub fn node_of_cpu(&self, cpu: u32) -> Option<u32> {
        self.nodes.iter().find(|n| n.cpus.contains(&cpu)).map(|n| n.id)
    }
}
