//! Per-space counters over a tick interval, handed to policies in [`Tick::spaces`]
//! (docs/simulator.md, "Per-space windows"): flops, memory references and first-touch faults
//! of each address space since the last tick, and where its pages are now.
//!
//! References and flops are folded in at every epoch's end from the counters the engine
//! already keeps per thread; faults and residency are read from the page table at the tick.
//!
//! [`Tick::spaces`]: numalab_policy::Tick

use crate::engine::Space;
use crate::memory::{Memory, NODE_MASK, UNPLACED};
use numalab_policy::{SpaceId, SpaceWindow};

/// Running deltas per space since the last tick.
#[derive(Clone, Debug, Default)]
pub(crate) struct SpaceCounters {
    flops: Vec<f64>,
    refs: Vec<u64>,
    /// Placed pages per space at the last tick (the fault count is the growth since).
    placed: Vec<u64>,
}

/// Pages of `sp` per node (home copies), and their sum.
fn residency(sp: &Space, mem: &Memory, nodes: usize) -> (Vec<u64>, u64) {
    let mut per_node = vec![0u64; nodes];
    let home = &mem.home()[sp.first_page as usize..(sp.first_page + sp.pages) as usize];
    for &h in home {
        let node = h & NODE_MASK;
        if node != UNPLACED {
            per_node[node as usize] += 1;
        }
    }
    let placed = per_node.iter().sum();
    (per_node, placed)
}

impl SpaceCounters {
    /// Counters for `spaces`, with the pages already placed (home rules, eager layouts) as
    /// the baseline: they are not counted as faults of the first window.
    pub(crate) fn new(spaces: &[Space], mem: &Memory, nodes: usize) -> SpaceCounters {
        SpaceCounters {
            flops: vec![0.0; spaces.len()],
            refs: vec![0; spaces.len()],
            placed: spaces.iter().map(|sp| residency(sp, mem, nodes).1).collect(),
        }
    }

    /// One thread's references of an epoch, with its step's flops per reference.
    pub(crate) fn record(&mut self, space: usize, refs: u64, flops_per_ref: f64) {
        self.refs[space] += refs;
        self.flops[space] += refs as f64 * flops_per_ref;
    }

    /// Close the window: every space's counters since the last call, then start anew.
    pub(crate) fn take(&mut self, spaces: &[Space], mem: &Memory, nodes: usize) -> Vec<SpaceWindow> {
        spaces
            .iter()
            .enumerate()
            .map(|(s, sp)| {
                let (pages_per_node, placed) = residency(sp, mem, nodes);
                let w = SpaceWindow {
                    space: s as SpaceId,
                    flops: self.flops[s],
                    mem_refs: self.refs[s],
                    page_faults: placed.saturating_sub(self.placed[s]),
                    pages_per_node,
                };
                self.flops[s] = 0.0;
                self.refs[s] = 0;
                self.placed[s] = placed;
                w
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two_spaces() -> (Vec<Space>, Memory) {
        let spaces = vec![Space { first_page: 0, pages: 4, threads: 0..1 }, Space { first_page: 4, pages: 2, threads: 1..2 }];
        (spaces, Memory::new(6, vec![10, 10]))
    }

    #[test]
    fn windows_are_deltas_and_preplaced_pages_are_not_faults() {
        let (spaces, mut mem) = two_spaces();
        mem.place(0, 1);
        let mut c = SpaceCounters::new(&spaces, &mem, 2);
        c.record(0, 100, 2.5);
        c.record(1, 10, 0.0);
        c.record(0, 50, 1.0);
        mem.place(1, 0);
        mem.place(4, 1);
        let w = c.take(&spaces, &mem, 2);
        assert_eq!(w.len(), 2);
        assert_eq!((w[0].space, w[0].flops, w[0].mem_refs, w[0].page_faults), (0, 300.0, 150, 1));
        assert_eq!(w[0].pages_per_node, vec![1, 1]);
        assert_eq!((w[1].flops, w[1].mem_refs, w[1].page_faults), (0.0, 10, 1));
        assert_eq!(w[1].pages_per_node, vec![0, 1]);
        // Nothing happened since: every delta is zero, residency is unchanged.
        let w = c.take(&spaces, &mem, 2);
        assert_eq!((w[0].flops, w[0].mem_refs, w[0].page_faults), (0.0, 0, 0));
        assert_eq!(w[0].pages_per_node, vec![1, 1]);
        // A migration moves residency but is no fault.
        assert!(mem.migrate(0, 0));
        let w = c.take(&spaces, &mem, 2);
        assert_eq!((w[0].page_faults, w[0].resident_pages()), (0, 2));
        assert_eq!(w[0].pages_per_node, vec![2, 0]);
    }
}
