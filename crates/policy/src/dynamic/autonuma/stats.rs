//! NUMA fault statistics of tasks and groups (docs/policies/autonuma.md, "Fault statistics"):
//! decayed memory and CPU faults per node and private/shared, buffers since the last placement,
//! the preferred node, weights and active nodes. Linux: `task_numa_placement`, `task_weight`,
//! `group_weight`, `update_numa_active_node_mask`.

use numalab_core::NodeId;

pub const SHARED: usize = 0;
pub const PRIVATE: usize = 1;

/// `[node][SHARED | PRIVATE]` fault counts.
pub type Faults = Vec<[u64; 2]>;

pub fn zeros(nodes: usize) -> Faults {
    vec![[0, 0]; nodes]
}

/// A NUMA group: tasks that share memory, and the sums of their statistics.
#[derive(Clone, Debug, PartialEq)]
pub struct Group {
    pub mem: Faults,
    pub cpu: Faults,
    pub total: u64,
    pub nr_tasks: u64,
    pub active_nodes: Vec<bool>,
}

impl Group {
    pub fn new(nodes: usize) -> Group {
        Group { mem: zeros(nodes), cpu: zeros(nodes), total: 0, nr_tasks: 0, active_nodes: vec![true; nodes] }
    }

    /// A node is active if its CPU faults × 3 exceed the busiest node's.
    pub fn update_active_nodes(&mut self) {
        let node_cpu = |n: usize| self.cpu[n][0] + self.cpu[n][1];
        let max = (0..self.cpu.len()).map(node_cpu).max().unwrap_or(0);
        self.active_nodes = (0..self.cpu.len()).map(|n| node_cpu(n) * 3 > max).collect();
    }

    pub fn active_count(&self) -> usize {
        self.active_nodes.iter().filter(|&&a| a).count()
    }

    pub fn weight(&self, node: NodeId) -> i64 {
        weight(&self.mem, self.total, node)
    }
}

/// Per-mille share of `faults` on `node` (0 when the total is 0).
pub fn weight(faults: &Faults, total: u64, node: NodeId) -> i64 {
    if total == 0 {
        return 0;
    }
    let f = faults[node as usize][0] + faults[node as usize][1];
    (1000 * f / total) as i64
}

/// One step of decay and fold-in (integers, as `task_numa_placement` computes them): memory
/// faults `MEM − ⌊MEM/2⌋ + buf`; CPU faults `CPU − ⌊CPU/2⌋ + ⌊w·buf / (locality + 1)⌋`. Returns
/// the per-entry changes (memory, CPU), which the group receives too, and clears the buffers.
pub fn decay(
    mem: &mut Faults,
    cpu: &mut Faults,
    mem_buf: &mut Faults,
    cpu_buf: &mut Faults,
    w: u64,
    locality_total: u64,
) -> (Vec<[i64; 2]>, Vec<[i64; 2]>) {
    let nodes = mem.len();
    let mut dm = vec![[0i64; 2]; nodes];
    let mut dc = vec![[0i64; 2]; nodes];
    for n in 0..nodes {
        for k in 0..2 {
            let d_mem = mem_buf[n][k] as i64 - (mem[n][k] / 2) as i64;
            let new_cpu = (w as u128 * cpu_buf[n][k] as u128 / (locality_total as u128 + 1)) as i64;
            let d_cpu = new_cpu - (cpu[n][k] / 2) as i64;
            mem[n][k] = (mem[n][k] as i64 + d_mem) as u64;
            cpu[n][k] = (cpu[n][k] as i64 + d_cpu) as u64;
            mem_buf[n][k] = 0;
            cpu_buf[n][k] = 0;
            dm[n][k] = d_mem;
            dc[n][k] = d_cpu;
        }
    }
    (dm, dc)
}

/// The node with the most memory faults, first strict maximum; `None` when all are 0.
pub fn busiest(mem: &Faults) -> Option<NodeId> {
    let mut best: Option<(NodeId, u64)> = None;
    for (n, f) in mem.iter().enumerate() {
        let total = f[0] + f[1];
        if total > 0 && best.is_none_or(|(_, b)| total > b) {
            best = Some((n as NodeId, total));
        }
    }
    best.map(|(n, _)| n)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The decay example of docs/policies/autonuma.md.
    #[test]
    fn decay_fold_in_preferred_and_weights() {
        // (N0 private, N0 shared, N1 private, N1 shared) = (5, 0, 9, 2); buffers (3, 0, 0, 4).
        let mut mem = vec![[0, 5], [2, 9]];
        let mut mem_buf = vec![[0, 3], [4, 0]];
        let mut cpu = zeros(2);
        let mut cpu_buf = zeros(2);
        let (dm, _) = decay(&mut mem, &mut cpu, &mut mem_buf, &mut cpu_buf, 0, 0);
        assert_eq!(mem, vec![[0, 6], [5, 5]]);
        assert_eq!(dm.iter().map(|d| d[0] + d[1]).sum::<i64>(), 0, "total 16 -> 16");
        assert_eq!(busiest(&mem), Some(1));
        assert_eq!((weight(&mem, 16, 0), weight(&mem, 16, 1)), (375, 625));
        // CPU: entry 7, runtime 500 ms of 1000 ms wall, buffer 10, locality 19.
        let w = 65536 * 500_000_000u64 / (1_000_000_000 + 1);
        assert_eq!(w, 32767);
        let mut cpu = vec![[0, 7]];
        let mut cpu_buf = vec![[0, 10]];
        decay(&mut vec![[0, 0]], &mut cpu, &mut vec![[0, 0]], &mut cpu_buf, w, 19);
        assert_eq!(cpu[0][PRIVATE], 16387);
        // Ties go to the lowest id; all zero: no preferred node.
        assert_eq!(busiest(&vec![[0, 4], [4, 0]]), Some(0));
        assert_eq!(busiest(&zeros(3)), None);
    }

    #[test]
    fn active_nodes_are_within_a_third_of_the_busiest() {
        let mut g = Group::new(4);
        g.cpu = vec![[0, 900], [0, 400], [250, 0], [0, 0]];
        g.update_active_nodes();
        assert_eq!(g.active_nodes, vec![true, true, false, false]);
        assert_eq!(g.active_count(), 2);
    }
}
