//! Carrefour's page engine: the per-interval table of access samples and the three per-page
//! rules (docs/policies/carrefour.md, "Sampling" and "Per-page decisions").

use super::metrics::Flags;
use crate::decision::SpaceId;
use numalab_core::{NodeId, PageIdx};
use std::collections::BTreeMap;

/// What the samples of one interval say about one page.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PageSamples {
    /// Samples on the page.
    pub samples: u32,
    /// Store samples among them.
    pub writes: u32,
    /// Nodes whose CPUs produced at least one sample, as a bit mask.
    pub nodes: u64,
}

impl PageSamples {
    /// `k`: how many nodes sampled the page.
    pub fn node_count(&self) -> u32 {
        self.nodes.count_ones()
    }
    /// The sampling node when there is exactly one.
    pub fn single_node(&self) -> Option<NodeId> {
        (self.node_count() == 1).then(|| self.nodes.trailing_zeros() as NodeId)
    }
}

/// The samples of the current interval, keyed by (address space, page), at most `capacity`
/// distinct pages.
#[derive(Clone, Debug, Default)]
pub struct SampleTable {
    pages: BTreeMap<(SpaceId, PageIdx), PageSamples>,
    capacity: usize,
    /// Samples dropped because the table was full.
    pub missed: u64,
    /// Samples recorded.
    pub recorded: u64,
}

impl SampleTable {
    pub fn new(capacity: usize) -> SampleTable {
        SampleTable { pages: BTreeMap::new(), capacity, missed: 0, recorded: 0 }
    }

    /// Record one sample; a sample of a page not yet tracked is missed once the table is full.
    pub fn record(&mut self, space: SpaceId, page: PageIdx, node: NodeId, write: bool) {
        let full = self.pages.len() >= self.capacity;
        let entry = match self.pages.get_mut(&(space, page)) {
            Some(e) => e,
            None if full => {
                self.missed += 1;
                return;
            }
            None => self.pages.entry((space, page)).or_default(),
        };
        entry.samples += 1;
        entry.writes += u32::from(write);
        if (node as u32) < u64::BITS {
            entry.nodes |= 1 << node;
        }
        self.recorded += 1;
    }

    pub fn len(&self) -> usize {
        self.pages.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pages.is_empty()
    }

    /// The tracked pages in (space, page) order.
    pub fn iter(&self) -> impl Iterator<Item = (&(SpaceId, PageIdx), &PageSamples)> {
        self.pages.iter()
    }
}

/// What the rules decide for one page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PageAction {
    /// Rule 1: onto the replication list.
    Replicate,
    /// Rule 2, selected, destination drawn: move to `to` (never the current node).
    Interleave {
        to: NodeId,
    },
    /// Rule 3: move to the only node that sampled it.
    Migrate {
        to: NodeId,
    },
    Nothing,
}

/// The per-page rules, first match wins. `home` is the page's current node, `share[j]` the
/// node shares of the interval (%), `candidates` the interleave destinations, `draw()` a
/// uniform number in [0, 1) (called once for the selection and once for the destination).
pub fn decide_page(
    p: &PageSamples,
    home: NodeId,
    flags: Flags,
    share: &[u32],
    candidates: &[NodeId],
    min_samples_migration: u32,
    draw: &mut dyn FnMut() -> f64,
) -> PageAction {
    let k = p.node_count();
    if flags.r && k >= 2 && p.writes == 0 {
        return PageAction::Replicate;
    }
    if flags.i && k >= 2 {
        let share_of = |n: NodeId| share.get(n as usize).copied().unwrap_or(0).min(100);
        // Selected with probability share_home / 100: pages on loaded nodes tend to leave.
        if draw() >= f64::from(share_of(home)) / 100.0 {
            return PageAction::Nothing;
        }
        // Destination weighted by 100 − share: loaded nodes rarely receive pages.
        let weights: Vec<u32> = candidates.iter().map(|&c| 100 - share_of(c)).collect();
        let total: u32 = weights.iter().sum();
        if total == 0 {
            return PageAction::Nothing;
        }
        let mut x = draw() * f64::from(total);
        for (&c, &w) in candidates.iter().zip(&weights) {
            if x < f64::from(w) {
                return if c == home { PageAction::Nothing } else { PageAction::Interleave { to: c } };
            }
            x -= f64::from(w);
        }
        // Rounding left x at the very top: the last candidate with weight.
        let last = candidates.iter().zip(&weights).rev().find(|(_, &w)| w > 0).map(|(&c, _)| c);
        return match last {
            Some(c) if c != home => PageAction::Interleave { to: c },
            _ => PageAction::Nothing,
        };
    }
    if let Some(d1) = p.single_node() {
        if d1 != home && ((flags.m && p.samples >= min_samples_migration) || flags.i) {
            return PageAction::Migrate { to: d1 };
        }
    }
    PageAction::Nothing
}
