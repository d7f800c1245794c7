//! kMAF's affinity table: which threads fault on which pages (a few counted sharers per page)
//! and on which nodes each thread's faulted pages live, and the two pure rules that read it:
//! where a page should live, and where a thread should run (docs/policies/kmaf.md).

use numalab_core::{NodeId, ThreadId};

const EMPTY: (ThreadId, u32) = (ThreadId::MAX, 0);

/// Per page of one address space: up to `sharers` (thread, fault count) entries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PageTable {
    sharers: usize,
    entries: Vec<(ThreadId, u32)>,
}

impl PageTable {
    pub fn new(sharers: usize) -> PageTable {
        PageTable { sharers, entries: Vec::new() }
    }

    fn slots(&mut self, page: u64) -> &mut [(ThreadId, u32)] {
        let start = page as usize * self.sharers;
        if self.entries.len() < start + self.sharers {
            self.entries.resize(start + self.sharers, EMPTY);
        }
        &mut self.entries[start..start + self.sharers]
    }

    /// One fault by `thread`: its count goes up by one; a new thread takes an empty slot, or
    /// replaces the entry with the fewest faults (the first one on ties) with count 1.
    pub fn record(&mut self, page: u64, thread: ThreadId) {
        let slots = self.slots(page);
        if let Some(s) = slots.iter_mut().find(|s| s.0 == thread) {
            s.1 = s.1.saturating_add(1);
            return;
        }
        let i = slots.iter().position(|s| s.0 == ThreadId::MAX).unwrap_or_else(|| {
            let min = slots.iter().map(|s| s.1).min().unwrap_or(0);
            slots.iter().position(|s| s.1 == min).unwrap_or(0)
        });
        slots[i] = (thread, 1);
    }

    /// The page's recorded sharers (thread, faults), in slot order.
    pub fn sharers(&self, page: u64) -> Vec<(ThreadId, u32)> {
        let start = page as usize * self.sharers;
        self.entries
            .get(start..start + self.sharers)
            .map_or_else(Vec::new, |s| s.iter().copied().filter(|e| e.0 != ThreadId::MAX).collect())
    }

    /// Halve every count, rounding up (older faults weigh less, but a thread seen once per
    /// pass keeps its entry: plain halving would erase a count of 1 at every pass, and a page
    /// faulted once per pass would never reach two recorded faults).
    pub fn age(&mut self) {
        for e in &mut self.entries {
            e.1 = e.1.div_ceil(2);
        }
    }

    /// Forget a page (it was placed afresh).
    pub fn reset(&mut self, page: u64) {
        for s in self.slots(page) {
            *s = EMPTY;
        }
    }

    /// Bytes per page of the table.
    pub fn bytes_per_page(&self) -> usize {
        self.sharers * std::mem::size_of::<(ThreadId, u32)>()
    }
}

/// Where a page should live: the memory node whose threads (by the node they run on now)
/// hold the most of the page's recorded faults, lowest id on ties; only if that is not its
/// home, the page has at least `min_faults` recorded faults, and the node holds more than
/// `majority` of them.
pub fn page_target(
    sharers: &[(ThreadId, u32)],
    node_of: impl Fn(ThreadId) -> NodeId,
    nodes: &[NodeId],
    home: NodeId,
    min_faults: u32,
    majority: f64,
) -> Option<NodeId> {
    let total: u64 = sharers.iter().map(|s| s.1 as u64).sum();
    if total < min_faults as u64 {
        return None;
    }
    let weight = |n: NodeId| sharers.iter().filter(|s| node_of(s.0) == n).map(|s| s.1 as u64).sum::<u64>();
    let (best, w) = nodes.iter().map(|&n| (n, weight(n))).max_by_key(|&(n, w)| (w, std::cmp::Reverse(n)))?;
    (best != home && w as f64 > majority * total as f64).then_some(best)
}

/// Where a thread should run: the CPU node holding the most of the pages it faulted on this
/// period (`counts[node]`), lowest id on ties; only if that is not `current`, the thread
/// faulted at least `min_faults` times, and that node holds more than `majority` of them.
pub fn thread_target(counts: &[u64], cpu_nodes: &[NodeId], current: NodeId, min_faults: u64, majority: f64) -> Option<NodeId> {
    let total: u64 = counts.iter().sum();
    if total < min_faults || total == 0 {
        return None;
    }
    let (best, w) = cpu_nodes.iter().map(|&n| (n, counts[n as usize])).max_by_key(|&(n, w)| (w, std::cmp::Reverse(n)))?;
    (best != current && w as f64 > majority * total as f64).then_some(best)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sharers_are_counted_and_replaced_by_fewest_faults() {
        let mut t = PageTable::new(2);
        t.record(3, 7);
        t.record(3, 7);
        t.record(3, 8);
        assert_eq!(t.sharers(3), vec![(7, 2), (8, 1)]);
        t.record(3, 9); // full: replaces 8 (1 fault)
        assert_eq!(t.sharers(3), vec![(7, 2), (9, 1)]);
        t.record(3, 7);
        t.record(3, 7);
        t.age();
        assert_eq!(t.sharers(3), vec![(7, 2), (9, 1)], "4 halves to 2; 1 stays 1 (rounded up)");
        assert_eq!(t.sharers(0), vec![]);
        assert_eq!(t.sharers(100), vec![], "never-seen page");
        t.reset(3);
        assert_eq!(t.sharers(3), vec![]);
        assert_eq!(t.bytes_per_page(), 16);
    }

    #[test]
    fn page_goes_to_the_majority_node() {
        let node = |t: ThreadId| (t % 2) as NodeId; // even threads on N0, odd on N1
        let nodes = [0, 1];
        assert_eq!(page_target(&[(1, 2)], node, &nodes, 0, 2, 0.5), Some(1), "a private page follows its thread");
        assert_eq!(page_target(&[(1, 1)], node, &nodes, 0, 2, 0.5), None, "one fault is not enough");
        assert_eq!(page_target(&[(1, 2)], node, &nodes, 1, 2, 0.5), None, "already home");
        assert_eq!(page_target(&[(0, 2), (1, 2)], node, &nodes, 1, 2, 0.5), None, "2 of 4 is not a majority");
        assert_eq!(page_target(&[(0, 3), (1, 2)], node, &nodes, 1, 2, 0.5), Some(0));
        assert_eq!(page_target(&[(0, 2), (1, 2)], node, &nodes, 1, 2, 0.4), Some(0), "tie to the lower node");
        assert_eq!(page_target(&[(1, 5)], node, &[0], 0, 2, 0.5), None, "only memory nodes are targets");
    }

    #[test]
    fn thread_goes_where_its_pages_are() {
        assert_eq!(thread_target(&[4, 12], &[0, 1], 0, 16, 0.5), Some(1));
        assert_eq!(thread_target(&[4, 11], &[0, 1], 0, 16, 0.5), None, "15 faults < 16");
        assert_eq!(thread_target(&[8, 8], &[0, 1], 0, 16, 0.5), None, "no majority");
        assert_eq!(thread_target(&[0, 16], &[0, 1], 1, 16, 0.5), None, "already there");
        assert_eq!(thread_target(&[0, 0, 20], &[0, 1], 0, 16, 0.5), None, "a node without CPUs is no target");
        assert_eq!(thread_target(&[0, 0], &[0, 1], 0, 0, 0.0), None);
    }
}
