//! The page-migration filter (docs/policies/autonuma.md, "Page filter"): Linux's
//! `should_numa_migrate_memory`, after the caller has recorded the fault in `last_cpupid`.

use super::stats::Group;
use numalab_core::NodeId;

/// The previous fault on a page: the node of its CPU and the faulting task's pid bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Last {
    pub node: NodeId,
    pub pid: u32,
}

/// What the filter reads of the faulting task.
#[derive(Clone, Copy, Debug)]
pub struct Faulter<'g> {
    pub pid: u32,
    pub has_preferred: bool,
    /// Completed scan sequences the task has seen (`p->numa_scan_seq`).
    pub scan_seq: u64,
    pub group: Option<&'g Group>,
}

/// May a page on `src` move to `dst`, the faulting CPU's node? `last` is the page's previous
/// fault (read before this one was recorded).
pub fn allow(p: &Faulter, last: Option<Last>, src: NodeId, dst: NodeId) -> bool {
    let mine = last.is_none_or(|l| l.pid == p.pid);
    // Early window: a new task, or one without a preferred node, follows its own pages at once.
    if (!p.has_preferred || p.scan_seq <= 4) && mine {
        return true;
    }
    // Two-stage filter: the previous fault must have come from the same node.
    if let Some(l) = last {
        if l.node != dst {
            return false;
        }
    }
    if last.is_some_and(|l| l.pid == p.pid) {
        return true;
    }
    let Some(g) = p.group else { return true };
    let node_cpu = |n: NodeId| g.cpu[n as usize][0] + g.cpu[n as usize][1];
    let node_mem = |n: NodeId| g.mem[n as usize][0] + g.mem[n as usize][1];
    if node_cpu(dst) > 3 * node_cpu(src) {
        return true;
    }
    // 3/4 hysteresis on the CPU/memory ratios.
    node_cpu(dst) as u128 * node_mem(src) as u128 * 3 > node_cpu(src) as u128 * node_mem(dst) as u128 * 4
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: NodeId = 0;
    const DST: NodeId = 1;

    fn group(cpu: [u64; 2], mem: [u64; 2]) -> Group {
        let mut g = Group::new(2);
        g.cpu = vec![[0, cpu[0]], [0, cpu[1]]];
        g.mem = vec![[0, mem[0]], [0, mem[1]]];
        g
    }

    /// The page-filter table of docs/policies/autonuma.md (p's pid is 7, q's 9).
    #[test]
    fn page_filter_table() {
        let p = Faulter { pid: 7, has_preferred: true, scan_seq: 10, group: None };
        let young = Faulter { scan_seq: 2, ..p };
        assert!(allow(&young, None, SRC, DST), "early window");
        assert!(!allow(&p, Some(Last { node: SRC, pid: 7 }), SRC, DST), "two-stage");
        assert!(allow(&p, Some(Last { node: DST, pid: 7 }), SRC, DST), "private");
        assert!(allow(&p, Some(Last { node: DST, pid: 9 }), SRC, DST), "ungrouped");
        let g = group([100, 400], [0, 0]);
        assert!(allow(&Faulter { group: Some(&g), ..p }, Some(Last { node: DST, pid: 9 }), SRC, DST), "400 > 300");
        let g = group([100, 200], [300, 100]);
        assert!(allow(&Faulter { group: Some(&g), ..p }, Some(Last { node: DST, pid: 9 }), SRC, DST), "180000 > 40000");
        let g = group([100, 120], [100, 100]);
        assert!(!allow(&Faulter { group: Some(&g), ..p }, Some(Last { node: DST, pid: 9 }), SRC, DST), "36000 > 40000 is false");
        let g = group([1, 1000], [1, 1]);
        assert!(!allow(&Faulter { group: Some(&g), ..p }, Some(Last { node: SRC, pid: 9 }), SRC, DST), "two-stage first");
    }

    #[test]
    fn the_early_window_ends_after_four_sequences_or_with_a_preferred_node() {
        let p = Faulter { pid: 7, has_preferred: true, scan_seq: 4, group: None };
        assert!(allow(&p, Some(Last { node: SRC, pid: 7 }), SRC, DST), "seq 4: still early");
        assert!(!allow(&Faulter { scan_seq: 5, ..p }, Some(Last { node: SRC, pid: 7 }), SRC, DST));
        assert!(allow(&Faulter { scan_seq: 9, has_preferred: false, ..p }, Some(Last { node: SRC, pid: 7 }), SRC, DST));
        assert!(!allow(&Faulter { scan_seq: 2, ..p }, Some(Last { node: SRC, pid: 9 }), SRC, DST), "not mine: two-stage");
    }
}
