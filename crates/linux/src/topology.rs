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

    /// The topology of some of the online nodes only (`machine measure --nodes`): their
    /// distances among themselves, their CPUs, their tiers. `None` if an id is not online.
    pub fn restrict(&self, ids: &[u32]) -> Option<Topology> {
        let keep: Vec<usize> = ids.iter().map(|id| self.nodes.iter().position(|n| n.id == *id)).collect::<Option<_>>()?;
        let mut keep_sorted = keep.clone();
        keep_sorted.sort_unstable();
        keep_sorted.dedup();
        let nodes: Vec<NodeInfo> = keep_sorted
            .iter()
            .map(|&k| {
                let mut n = self.nodes[k].clone();
                n.distances = keep_sorted.iter().map(|&j| self.nodes[k].distances[j]).collect();
                n
            })
            .collect();
        let ids: Vec<u32> = nodes.iter().map(|n| n.id).collect();
        let cpus = self.cpus.iter().filter(|c| nodes.iter().any(|n| n.cpus.contains(&c.cpu))).cloned().collect();
        let retain = |v: &Vec<u32>| v.iter().copied().filter(|x| ids.contains(x)).collect::<Vec<u32>>();
        let lists = NodeLists {
            online: ids.clone(),
            possible: retain(&self.lists.possible),
            has_cpu: retain(&self.lists.has_cpu),
            has_memory: retain(&self.lists.has_memory),
        };
        Some(Topology { lists, nodes, tiers: self.tiers.clone(), cpus, huge_page_bytes: self.huge_page_bytes.clone() })
    }

    /// Node of a CPU.
    pub fn node_of_cpu(&self, cpu: u32) -> Option<u32> {
        self.nodes.iter().find(|n| n.cpus.contains(&cpu)).map(|n| n.id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_restricted_topology_keeps_the_chosen_nodes_and_their_distances() {
        let root = FsRoot::at(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/guest-4n"));
        let t = Topology::read(&root).unwrap();
        let r = t.restrict(&[2, 0]).unwrap();
        assert_eq!(r.nodes.iter().map(|n| n.id).collect::<Vec<_>>(), vec![0, 2]);
        assert_eq!(r.nodes[0].distances, vec![10, 20]);
        assert_eq!(r.nodes[1].distances, vec![20, 10]);
        assert_eq!(r.cpus.iter().map(|c| c.cpu).collect::<Vec<_>>(), vec![0, 1, 3]);
        assert_eq!(r.lists.online, vec![0, 2]);
        assert!(crate::export::to_machine(&r, &Default::default()).is_ok());
        assert!(t.restrict(&[7]).is_none(), "node 7 is not online");
    }
}
