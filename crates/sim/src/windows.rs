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
use crate::metrics::AppPoint;
use numalab_core::Machine;
use numalab_policy::{SpaceId, SpaceWindow};
use numalab_workload::Program;
use std::collections::BTreeMap;

/// Running deltas per space since the last tick.
#[derive(Clone, Debug, Default)]
pub(crate) struct SpaceCounters {
    flops: Vec<f64>,
    refs: Vec<u64>,
    /// Placed pages per space at the last tick (the fault count is the growth since).
    placed: Vec<u64>,
    /// The same flops and references since the last timeline point; kept only for a workload
    /// of several programs (the timeline's per-application points, docs/metrics.md), so a
    /// single program pays nothing.
    timeline: Option<(Vec<f64>, Vec<u64>)>,
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
            timeline: (spaces.len() > 1).then(|| (vec![0.0; spaces.len()], vec![0; spaces.len()])),
        }
    }

    /// One thread's references of an epoch, with its step's flops per reference.
    pub(crate) fn record(&mut self, space: usize, refs: u64, flops_per_ref: f64) {
        let flops = refs as f64 * flops_per_ref;
        self.refs[space] += refs;
        self.flops[space] += flops;
        if let Some((f, r)) = &mut self.timeline {
            f[space] += flops;
            r[space] += refs;
        }
    }

    /// Close a timeline interval of `interval_s` seconds: per space of a multi-program
    /// workload its flops and references since the previous point and where its pages are now
    /// (docs/metrics.md, "Per application"); empty for a single program.
    pub(crate) fn take_timeline(&mut self, spaces: &[Space], mem: &Memory, p: &Program, m: &Machine, interval_s: f64) -> Vec<AppPoint> {
        let Some((flops, refs)) = &mut self.timeline else { return Vec::new() };
        let nodes = m.nodes.len();
        let out = spaces
            .iter()
            .enumerate()
            .map(|(s, sp)| {
                let (pages_per_node, _) = residency(sp, mem, nodes);
                let mut pages_per_tier = BTreeMap::new();
                for (node, &k) in m.nodes.iter().zip(&pages_per_node) {
                    if node.mem_bytes > 0 {
                        *pages_per_tier.entry(node.tier.as_str().to_string()).or_insert(0) += k;
                    }
                }
                let bytes = refs[s] as f64 * p.access_bytes as f64;
                AppPoint {
                    app: p.members.get(s).map_or_else(|| format!("space {s}"), |mb| mb.name.clone()),
                    flops: flops[s],
                    mem_refs: refs[s],
                    bytes,
                    ai_flop_per_byte: (bytes > 0.0).then(|| flops[s] / bytes),
                    gflops: if interval_s > 0.0 { flops[s] / interval_s / 1e9 } else { 0.0 },
                    pages_per_node,
                    pages_per_tier,
                }
            })
            .collect();
        flops.iter_mut().for_each(|x| *x = 0.0);
        refs.iter_mut().for_each(|x| *x = 0);
        out
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
        let spaces = vec![
            Space { first_page: 0, pages: 4, threads: 0..1, exited: false },
            Space { first_page: 4, pages: 2, threads: 1..2, exited: false },
        ];
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
