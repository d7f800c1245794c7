//! A fixed memory state for policy tests and the conformance suite.

use crate::policy::MemoryState;
use numalab_core::NodeId;

#[derive(Clone, Debug)]
pub struct FixedMemory {
    pub free: Vec<u64>,
    pub capacity: Vec<u64>,
}

impl FixedMemory {
    pub fn uniform(nodes: usize, pages: u64) -> FixedMemory {
        FixedMemory { free: vec![pages; nodes], capacity: vec![pages; nodes] }
    }
    pub fn fill(&mut self, node: NodeId) {
        self.free[node as usize] = 0;
    }
    pub fn take(&mut self, node: NodeId, pages: u64) {
        self.free[node as usize] -= pages;
    }
}

impl MemoryState for FixedMemory {
    fn free_pages(&self, node: NodeId) -> u64 {
        self.free[node as usize]
    }
    fn capacity_pages(&self, node: NodeId) -> u64 {
        self.capacity[node as usize]
    }
}
