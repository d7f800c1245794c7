//! Home-node selection at VM creation (docs/vm.md; docs/vm.md, "Home nodes").
//!
//! The hypervisor packs a VM's vCPUs and memory onto as few, as lightly loaded nodes as it
//! can, reserving one physical CPU per vCPU. Pure: the caller gives each node's CPUs, their
//! reservations and its free memory.

use numalab_core::{CpuId, NodeId};
use std::cmp::Ordering;

/// What the selection knows of one node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeLoad {
    pub node: NodeId,
    /// Physical CPUs of the node, ascending.
    pub cpus: Vec<CpuId>,
    /// Those already reserved by a VM (same order as `cpus`).
    pub reserved: Vec<bool>,
    /// Free memory in bytes (0 for a node without memory).
    pub free_bytes: u64,
    pub has_memory: bool,
}

impl NodeLoad {
    fn pcpus(&self) -> u64 {
        self.cpus.len() as u64
    }
    fn reserved_pcpus(&self) -> u64 {
        self.reserved.iter().filter(|&&r| r).count() as u64
    }
}

/// The result of the selection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HomeChoice {
    /// The VM fits on `nodes` (ascending); vCPU `v` is pinned to `pins[v]`.
    Packed { nodes: Vec<NodeId>, pins: Vec<CpuId> },
    /// No node set holds both the vCPUs and the memory: every node with memory is a home
    /// node, no CPU is reserved and the vCPUs are not pinned.
    Unpacked { nodes: Vec<NodeId> },
}

impl HomeChoice {
    pub fn nodes(&self) -> &[NodeId] {
        match self {
            HomeChoice::Packed { nodes, .. } | HomeChoice::Unpacked { nodes } => nodes,
        }
    }
}

/// Totals of a candidate set.
#[derive(Clone, Copy, Debug)]
struct SetLoad {
    pcpus: u64,
    reserved: u64,
    free_bytes: u64,
}

fn load_of(set: &[usize], nodes: &[NodeLoad]) -> SetLoad {
    set.iter().fold(SetLoad { pcpus: 0, reserved: 0, free_bytes: 0 }, |a, &i| SetLoad {
        pcpus: a.pcpus + nodes[i].pcpus(),
        reserved: a.reserved + nodes[i].reserved_pcpus(),
        free_bytes: a.free_bytes + if nodes[i].has_memory { nodes[i].free_bytes } else { 0 },
    })
}

fn fits(l: SetLoad, vcpus: u64, mem_bytes: u64) -> bool {
    l.pcpus - l.reserved >= vcpus && l.free_bytes >= mem_bytes
}

/// `a/b` against `c/d`, exactly (b, d > 0).
fn cmp_ratio(a: u64, b: u64, c: u64, d: u64) -> Ordering {
    (u128::from(a) * u128::from(d)).cmp(&(u128::from(c) * u128::from(b)))
}

/// The §5.1 order of two candidate sets: lower reserved share first, then more free memory,
/// then the smaller sorted id list [I].
fn better(a: &[usize], la: SetLoad, b: &[usize], lb: SetLoad, nodes: &[NodeLoad]) -> bool {
    let ids = |s: &[usize]| s.iter().map(|&i| nodes[i].node).collect::<Vec<_>>();
    cmp_ratio(la.reserved, la.pcpus, lb.reserved, lb.pcpus).then(lb.free_bytes.cmp(&la.free_bytes)).then_with(|| ids(a).cmp(&ids(b)))
        == Ordering::Less
}

/// Next `k`-combination of `0..n` in lexicographic order; false after the last.
fn next_combination(c: &mut [usize], n: usize) -> bool {
    let k = c.len();
    let Some(i) = (0..k).rev().find(|&i| c[i] < n - k + i) else { return false };
    c[i] += 1;
    for j in i + 1..k {
        c[j] = c[j - 1] + 1;
    }
    true
}

/// The home nodes for a VM of `vcpus` vCPUs and `mem_bytes` of memory, or `None` when no set
/// of nodes has both (§5.1). Exhaustive over every subset when the machine has at most
/// `exhaustive_max_nodes` nodes: the smallest size with a candidate wins, ties broken by
/// [`better`]. Above that, greedy [ours]: nodes sorted by (reserved share ascending, free
/// memory descending, id ascending) are added until both conditions hold; a node without
/// CPUs sorts as fully reserved [ours]. `nodes` must be sorted by node id.
pub fn choose_home_nodes(nodes: &[NodeLoad], vcpus: u32, mem_bytes: u64, exhaustive_max_nodes: u32) -> Option<Vec<NodeId>> {
    let (n, v) = (nodes.len(), u64::from(vcpus));
    let chosen: Vec<usize> = if n <= exhaustive_max_nodes as usize {
        (1..=n).find_map(|k| {
            let mut c: Vec<usize> = (0..k).collect();
            let mut best: Option<(Vec<usize>, SetLoad)> = None;
            loop {
                let l = load_of(&c, nodes);
                if fits(l, v, mem_bytes) && best.as_ref().is_none_or(|(b, lb)| better(&c, l, b, *lb, nodes)) {
                    best = Some((c.clone(), l));
                }
                if !next_combination(&mut c, n) {
                    break;
                }
            }
            best.map(|(b, _)| b)
        })?
    } else {
        let mut order: Vec<usize> = (0..n).collect();
        let share = |i: usize| if nodes[i].pcpus() == 0 { (1, 1) } else { (nodes[i].reserved_pcpus(), nodes[i].pcpus()) };
        order.sort_by(|&a, &b| {
            let ((ra, pa), (rb, pb)) = (share(a), share(b));
            cmp_ratio(ra, pa, rb, pb).then(nodes[b].free_bytes.cmp(&nodes[a].free_bytes)).then(nodes[a].node.cmp(&nodes[b].node))
        });
        let mut set = Vec::new();
        for i in order {
            set.push(i);
            if fits(load_of(&set, nodes), v, mem_bytes) {
                break;
            }
        }
        if !fits(load_of(&set, nodes), v, mem_bytes) {
            return None;
        }
        set.sort_unstable();
        set
    };
    Some(chosen.into_iter().map(|i| nodes[i].node).collect())
}

/// The pCPUs reserved for `vcpus` vCPUs on `home` [I]: vCPU `v` gets the `v`-th free pCPU of
/// the home nodes in ascending (node id, cpu id) order. `None` if they have too few.
pub fn reserve_pcpus(nodes: &[NodeLoad], home: &[NodeId], vcpus: u32) -> Option<Vec<CpuId>> {
    let mut free: Vec<(NodeId, CpuId)> = nodes
        .iter()
        .filter(|l| home.contains(&l.node))
        .flat_map(|l| l.cpus.iter().zip(&l.reserved).filter(|(_, &r)| !r).map(move |(&c, _)| (l.node, c)))
        .collect();
    free.sort_unstable();
    (free.len() >= vcpus as usize).then(|| free.into_iter().take(vcpus as usize).map(|(_, c)| c).collect())
}

/// Selection and reservation together (§5.1).
pub fn select(nodes: &[NodeLoad], vcpus: u32, mem_bytes: u64, exhaustive_max_nodes: u32) -> HomeChoice {
    if let Some(home) = choose_home_nodes(nodes, vcpus, mem_bytes, exhaustive_max_nodes) {
        if let Some(pins) = reserve_pcpus(nodes, &home, vcpus) {
            return HomeChoice::Packed { nodes: home, pins };
        }
    }
    HomeChoice::Unpacked { nodes: nodes.iter().filter(|l| l.has_memory).map(|l| l.node).collect() }
}

#[cfg(test)]
mod tests {
    use super::*;

    const G: u64 = 1 << 30;

    /// A machine of `cpus.len()` nodes, node `i` with CPUs numbered on from the previous node's
    /// and `free_gib[i]` GiB free.
    fn machine(cpus: &[u32], free_gib: &[u64]) -> Vec<NodeLoad> {
        let mut next = 0;
        cpus.iter()
            .zip(free_gib)
            .enumerate()
            .map(|(i, (&c, &f))| {
                let l = NodeLoad {
                    node: i as NodeId,
                    cpus: (next..next + c).collect(),
                    reserved: vec![false; c as usize],
                    free_bytes: f * G,
                    has_memory: f > 0,
                };
                next += c;
                l
            })
            .collect()
    }

    fn reserve(m: &mut [NodeLoad], pins: &[CpuId]) {
        for l in m.iter_mut() {
            for (c, r) in l.cpus.iter().zip(l.reserved.iter_mut()) {
                *r |= pins.contains(c);
            }
        }
    }

    /// 4 nodes of 4 CPUs and 8 GiB: a 4-vCPU 4 GiB VM fits on one node; all are equally loaded
    /// and equally free, so the lowest id wins. vCPUs are pinned to CPUs 0..4 in order.
    #[test]
    fn one_node_when_it_fits_lowest_id_on_ties() {
        let m = machine(&[4, 4, 4, 4], &[8, 8, 8, 8]);
        assert_eq!(select(&m, 4, 4 * G, 16), HomeChoice::Packed { nodes: vec![0], pins: vec![0, 1, 2, 3] });
    }

    /// Several VMs one after another on that machine: each takes the least loaded node, then
    /// a VM too large for one node takes two, preferring the unloaded and freer ones.
    #[test]
    fn successive_vms_spread_over_the_least_loaded_nodes() {
        let mut m = machine(&[4, 4, 4, 4], &[8, 8, 8, 8]);
        let a = select(&m, 4, 4 * G, 16);
        let HomeChoice::Packed { pins, .. } = &a else { panic!() };
        reserve(&mut m, pins);
        m[0].free_bytes -= 4 * G;
        // Node 0 is fully reserved: nodes 1..3 share 0 reserved, node 1 has the lowest id.
        assert_eq!(select(&m, 2, 2 * G, 16), HomeChoice::Packed { nodes: vec![1], pins: vec![4, 5] });
        reserve(&mut m, &[4, 5]);
        m[1].free_bytes -= 2 * G;
        // 6 vCPUs need two nodes: {2, 3} has share 0/8 and 16 GiB, better than any set with 0 or 1.
        assert_eq!(select(&m, 6, 10 * G, 16), HomeChoice::Packed { nodes: vec![2, 3], pins: vec![8, 9, 10, 11, 12, 13] });
        reserve(&mut m, &[8, 9, 10, 11, 12, 13]);
        // 3 vCPUs: free pCPUs are 6, 7 (node 1) and 14, 15 (node 3); no node has 3. Of the
        // pairs only {1, 3} has 3 free pCPUs (the others have 2), share 4/8.
        assert_eq!(select(&m, 3, G, 16), HomeChoice::Packed { nodes: vec![1, 3], pins: vec![6, 7, 14] });
    }

    /// The memory test can force more nodes than the vCPUs need, and a lower reserved share
    /// beats more free memory.
    #[test]
    fn memory_and_load_decide_between_sets() {
        // Node 0: 2 of 4 CPUs reserved, 16 GiB free; node 1: none reserved, 4 GiB; node 2: none, 6 GiB.
        let mut m = machine(&[4, 4, 4], &[16, 4, 6]);
        reserve(&mut m, &[0, 1]);
        // 2 vCPUs and 4 GiB: node 1 (share 0, 4 GiB) and node 2 (share 0, 6 GiB) both fit;
        // node 0 fits too but is half reserved. Node 2 has more free memory.
        assert_eq!(select(&m, 2, 4 * G, 16).nodes(), &[2]);
        // 8 GiB: only node 0 fits alone, and it has 2 free pCPUs: share 2/4 but it is the only one.
        assert_eq!(select(&m, 2, 8 * G, 16), HomeChoice::Packed { nodes: vec![0], pins: vec![2, 3] });
        // 3 vCPUs and 8 GiB: node 0 has only 2 free pCPUs; pairs {0,1} 2/8 20 GiB,
        // {0,2} 2/8 22 GiB, {1,2} 0/8 10 GiB: {1,2} wins on share.
        assert_eq!(select(&m, 3, 8 * G, 16), HomeChoice::Packed { nodes: vec![1, 2], pins: vec![4, 5, 6] });
    }

    /// When no set holds the VM, every node with memory is a home node and nothing is
    /// reserved; a CPU-only node takes part in packing but is no memory home.
    #[test]
    fn unpackable_vms_get_every_memory_node_without_reservation() {
        let m = machine(&[2, 2, 2], &[4, 4, 0]);
        assert_eq!(select(&m, 7, G, 16), HomeChoice::Unpacked { nodes: vec![0, 1] }, "7 vCPUs on 6 pCPUs");
        assert_eq!(select(&m, 1, 9 * G, 16), HomeChoice::Unpacked { nodes: vec![0, 1] }, "9 GiB on 8");
        // 5 vCPUs need node 2's CPUs too.
        assert_eq!(select(&m, 5, 8 * G, 16), HomeChoice::Packed { nodes: vec![0, 1, 2], pins: vec![0, 1, 2, 3, 4] });
    }

    /// Greedy above the exhaustive limit: the same machine gives the greedy order's prefix.
    #[test]
    fn greedy_adds_nodes_in_load_order() {
        let mut m = machine(&[4, 4, 4, 4], &[8, 2, 8, 4]);
        reserve(&mut m, &[0]);
        // Order: share 0 first (nodes 2 (8 GiB), 3 (4), 1 (2)), then node 0 (1/4).
        assert_eq!(choose_home_nodes(&m, 4, 8 * G, 1), Some(vec![2]));
        assert_eq!(choose_home_nodes(&m, 6, 8 * G, 1), Some(vec![2, 3]));
        assert_eq!(choose_home_nodes(&m, 4, 13 * G, 1), Some(vec![1, 2, 3]));
        assert_eq!(choose_home_nodes(&m, 16, G, 1), None, "15 free pCPUs");
        // Exhaustive finds a smaller set where greedy does not: 10 GiB fits on {0, 3}? no:
        // 8 + 4 = 12 on {0,3} (share 1/8) and {2,3} (0/8, 12 GiB): {2,3}; greedy gives {2,3} too.
        assert_eq!(choose_home_nodes(&m, 4, 10 * G, 16), Some(vec![2, 3]));
        assert_eq!(choose_home_nodes(&m, 4, 10 * G, 1), Some(vec![2, 3]));
        // 9 GiB and 8 vCPUs: exhaustive {2, 3}; greedy likewise (8 free pCPUs on 2 and 3).
        assert_eq!(choose_home_nodes(&m, 8, 9 * G, 16), Some(vec![2, 3]));
    }

    /// Greedy can take more nodes than needed: the least loaded node is added first even when
    /// it is small.
    #[test]
    fn greedy_differs_from_exhaustive_when_the_least_loaded_node_is_small() {
        let mut m = machine(&[4, 4], &[2, 16]);
        reserve(&mut m, &[4]);
        assert_eq!(choose_home_nodes(&m, 2, 10 * G, 16), Some(vec![1]));
        assert_eq!(choose_home_nodes(&m, 2, 10 * G, 1), Some(vec![0, 1]));
    }

    #[test]
    fn combinations_are_enumerated_in_order() {
        let mut c = vec![0, 1];
        let mut all = vec![c.clone()];
        while next_combination(&mut c, 4) {
            all.push(c.clone());
        }
        assert_eq!(all, vec![vec![0, 1], vec![0, 2], vec![0, 3], vec![1, 2], vec![1, 3], vec![2, 3]]);
    }
}
