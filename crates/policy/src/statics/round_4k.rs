//! Round-4K (docs/policies/round-4k.md): page-granular interleave over a node set.

use super::resolve_nodes;
use crate::decision::{MempolicyIntent, MempolicyMode, PlaceRequest};
use crate::error::{OutOfMemory, PolicyError};
use crate::policy::{MemoryState, Policy, PolicyEnv};
use numalab_core::NodeId;
use serde::{Deserialize, Serialize};

/// How the interleave index of a page is chosen.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Indexing {
    /// From the page's index in the address space (deterministic; Linux for user memory).
    #[default]
    AddressIndexed,
    /// One cursor per address space, advanced once per placed page.
    AllocationOrder,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Round4KConfig {
    /// Interleave set; empty = every node with memory.
    pub nodes: Vec<NodeId>,
    pub indexing: Indexing,
}

pub struct Round4K {
    config: Round4KConfig,
    nodes: Vec<NodeId>,
    cursor: usize,
}

/// Place at slot `start` of a cycle, or the next non-full node in cycle order.
pub(crate) fn cyclic_fit(nodes: &[NodeId], start: usize, mem: &dyn MemoryState, pages: u64) -> Result<NodeId, OutOfMemory> {
    (0..nodes.len())
        .map(|k| nodes[(start + k) % nodes.len()])
        .find(|&n| !mem.is_full(n, pages))
        .ok_or(OutOfMemory { wanted: nodes[start % nodes.len()], pages })
}

impl Policy for Round4K {
    type Config = Round4KConfig;
    const NAME: &'static str = "round-4k";
    const SUMMARY: &'static str = "interleave every 4 KiB page over the nodes, whoever touches it (numactl --interleave)";

    fn new(config: Round4KConfig, env: &PolicyEnv) -> Result<Self, PolicyError> {
        let nodes = resolve_nodes(Self::NAME, &config.nodes, env)?;
        Ok(Round4K { config, nodes, cursor: 0 })
    }

    fn config(&self) -> &Round4KConfig {
        &self.config
    }

    fn place(&mut self, req: &PlaceRequest, mem: &dyn MemoryState) -> Result<NodeId, OutOfMemory> {
        let slot = match self.config.indexing {
            Indexing::AddressIndexed => (req.page % self.nodes.len() as u64) as usize,
            Indexing::AllocationOrder => {
                // A fallback does not move the cursor: it advances by one per placed page.
                let s = self.cursor;
                self.cursor = (self.cursor + 1) % self.nodes.len();
                s
            }
        };
        cyclic_fit(&self.nodes, slot, mem, 1)
    }

    fn mempolicy(&self) -> Option<MempolicyIntent> {
        Some(MempolicyIntent {
            mode: MempolicyMode::Interleave,
            nodes: self.nodes.clone(),
            caveat: Some("the kernel indexes by virtual page number and falls back by distance".to_string()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::statics::testing::FixedMemory;
    use numalab_core::machine::presets;
    use std::sync::Arc;

    fn env() -> PolicyEnv {
        PolicyEnv::new(Arc::new(presets::load("server-a-4n").unwrap()))
    }
    fn req(page: u64, cpu_node: NodeId) -> PlaceRequest {
        PlaceRequest { space: 0, thread: 0, cpu: 0, cpu_node, page }
    }

    /// docs/policies/round-4k.md, test vector 2: A = {1, 3}, pages 0..4 -> 1, 3, 1, 3 whoever touches.
    #[test]
    fn spec_vector_2() {
        let mut p = Round4K::new(Round4KConfig { nodes: vec![3, 1], ..Default::default() }, &env()).unwrap();
        let mem = FixedMemory::uniform(4, 10);
        let got: Vec<_> = (0..4).map(|pg| p.place(&req(pg, (pg % 4) as NodeId), &mem).unwrap()).collect();
        assert_eq!(got, vec![1, 3, 1, 3]);
    }

    #[test]
    fn full_target_falls_to_next_in_cycle_and_cursor_moves_by_one() {
        let mut p = Round4K::new(Round4KConfig { nodes: vec![], indexing: Indexing::AllocationOrder }, &env()).unwrap();
        let mut mem = FixedMemory::uniform(4, 10);
        mem.fill(1);
        let got: Vec<_> = (0..5).map(|pg| p.place(&req(100 + pg, 0), &mem).unwrap()).collect();
        assert_eq!(got, vec![0, 2, 2, 3, 0]);
        for n in 0..4 {
            mem.fill(n);
        }
        assert!(p.place(&req(0, 0), &mem).is_err());
    }

    #[test]
    fn unknown_nodes_are_rejected() {
        let e = Round4K::new(Round4KConfig { nodes: vec![9], ..Default::default() }, &env()).err().unwrap();
        assert_eq!(e.to_string(), "policy 'round-4k' names node 9, but the machine has 4 nodes");
    }
}
