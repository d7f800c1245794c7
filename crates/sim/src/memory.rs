//! Physical memory: one byte per base page (its home node, or a marker), free pages per node,
//! and a side table for the rare replicated pages. One byte per page keeps a 100 GiB
//! footprint at 25 MiB of page state.

use numalab_core::NodeId;
use numalab_policy::MemoryState;
use std::collections::BTreeMap;

/// Largest node count the page byte can name (ids 0..=62).
pub const MAX_NODES: usize = 63;
/// A page no one has touched yet.
pub const UNPLACED: u8 = 0x3F;
/// The page has read-only copies on other nodes (see `replicas`).
pub const REPLICATED: u8 = 0x40;
/// The scanner unmapped the page: its next access is a hinting fault.
pub const ARMED: u8 = 0x80;
/// Any page byte at or above this value needs the slow path.
pub const SLOW: u8 = UNPLACED;
pub const NODE_MASK: u8 = 0x3F;

pub struct Memory {
    /// Private so that every change goes through a method that bumps `generation`.
    home: Vec<u8>,
    /// Bumped by every change to a page byte: the fast engine's cached per-segment node
    /// shares are valid while it is unchanged (docs/simulator.md, "The fast engine").
    generation: u64,
    pub free: Vec<u64>,
    pub capacity: Vec<u64>,
    /// Extra copies per replicated page, as a node bit mask (the home copy excluded).
    pub replicas: BTreeMap<u64, u64>,
}

impl Memory {
    pub fn new(pages: u64, capacity: Vec<u64>) -> Memory {
        Memory { home: vec![UNPLACED; pages as usize], generation: 0, free: capacity.clone(), capacity, replicas: BTreeMap::new() }
    }

    /// Every page's byte: its home node, or `UNPLACED`, with the `ARMED` / `REPLICATED` bits.
    #[inline]
    pub fn home(&self) -> &[u8] {
        &self.home
    }

    /// Changes to page bytes so far.
    #[inline]
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Unmap a placed page for a hinting fault (its next access takes the slow path).
    pub fn arm(&mut self, page: u64) {
        self.home[page as usize] |= ARMED;
        self.generation += 1;
    }

    /// The hinting fault of an armed page was taken.
    pub fn disarm(&mut self, page: u64) {
        self.home[page as usize] &= !ARMED;
        self.generation += 1;
    }

    #[inline]
    pub fn node_of(&self, page: u64) -> Option<NodeId> {
        let h = self.home[page as usize];
        (h & NODE_MASK != UNPLACED).then_some((h & NODE_MASK) as NodeId)
    }

    pub fn place(&mut self, page: u64, node: NodeId) {
        debug_assert_eq!(self.home[page as usize], UNPLACED);
        self.home[page as usize] = node as u8;
        self.free[node as usize] -= 1;
        self.generation += 1;
    }

    /// Move the (only) copy of a placed page; keeps the hint marker off.
    pub fn migrate(&mut self, page: u64, to: NodeId) -> bool {
        let Some(from) = self.node_of(page) else { return false };
        if from == to || self.free[to as usize] == 0 || self.home[page as usize] & REPLICATED != 0 {
            return false;
        }
        self.free[from as usize] += 1;
        self.free[to as usize] -= 1;
        self.home[page as usize] = to as u8;
        self.generation += 1;
        true
    }

    pub fn replicate(&mut self, page: u64, to: NodeId) -> bool {
        let Some(home) = self.node_of(page) else { return false };
        let mask = self.replicas.get(&page).copied().unwrap_or(0);
        if home == to || mask & (1 << to) != 0 || self.free[to as usize] == 0 {
            return false;
        }
        self.free[to as usize] -= 1;
        self.replicas.insert(page, mask | (1 << to));
        self.home[page as usize] |= REPLICATED;
        self.generation += 1;
        true
    }

    /// Drop every copy except the one on `keep` (which must hold a copy). Returns copies freed.
    pub fn collapse(&mut self, page: u64, keep: NodeId) -> u32 {
        let Some(home) = self.node_of(page) else { return 0 };
        let Some(mask) = self.replicas.remove(&page) else { return 0 };
        let all = mask | (1 << home);
        let keep = if all & (1 << keep) != 0 { keep } else { home };
        let mut freed = 0;
        for n in 0..MAX_NODES as NodeId {
            if all & (1 << n) != 0 && n != keep {
                self.free[n as usize] += 1;
                freed += 1;
            }
        }
        self.home[page as usize] = (self.home[page as usize] & ARMED) | keep as u8;
        self.generation += 1;
        freed
    }

    /// The copy a CPU on `cpu_node` reads: its own node's replica if there is one.
    pub fn read_copy(&self, page: u64, cpu_node: NodeId) -> NodeId {
        let home = (self.home[page as usize] & NODE_MASK) as NodeId;
        match self.replicas.get(&page) {
            Some(mask) if mask & (1 << cpu_node) != 0 => cpu_node,
            _ => home,
        }
    }

    pub fn copies(&self) -> u64 {
        self.home.iter().filter(|&&h| h & NODE_MASK != UNPLACED).count() as u64
            + self.replicas.values().map(|m| m.count_ones() as u64).sum::<u64>()
    }
}

impl MemoryState for Memory {
    fn free_pages(&self, node: NodeId) -> u64 {
        self.free[node as usize]
    }
    fn capacity_pages(&self, node: NodeId) -> u64 {
        self.capacity[node as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_are_conserved_through_every_operation() {
        let mut m = Memory::new(4, vec![3, 3, 3]);
        m.place(0, 0);
        m.place(1, 1);
        assert!(m.migrate(0, 2));
        assert!(!m.migrate(3, 1), "an unplaced page cannot migrate");
        assert!(m.replicate(1, 0));
        assert!(m.replicate(1, 2));
        assert!(!m.replicate(1, 2), "one copy per node");
        assert_eq!(m.read_copy(1, 2), 2);
        assert_eq!(m.copies(), 4);
        assert_eq!(m.free.iter().sum::<u64>(), 9 - 4);
        assert!(!m.migrate(1, 0), "replicated pages collapse before they move");
        assert_eq!(m.collapse(1, 2), 2);
        assert_eq!(m.node_of(1), Some(2));
        assert_eq!(m.free.iter().sum::<u64>(), 9 - 2);
    }

    #[test]
    fn a_full_node_refuses() {
        let mut m = Memory::new(2, vec![1, 1]);
        m.place(0, 0);
        m.place(1, 1);
        assert!(!m.migrate(0, 1));
        assert!(!m.replicate(0, 1));
    }
}
