//! Weighted interleave (docs/policies/weighted-interleave.md): node n receives w[n] pages of every W.

use super::check_node;
use super::round_4k::{cyclic_fit, Indexing};
use crate::decision::{MempolicyIntent, MempolicyMode, PlaceRequest};
use crate::error::{OutOfMemory, PolicyError};
use crate::policy::{MemoryState, Policy, PolicyEnv};
use numalab_core::NodeId;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WeightedInterleaveConfig {
    /// Weight of each node by node id, 0..=255; 0 = the node does not take part.
    /// Empty = weight 1 on every memory node (plain interleave).
    pub weights: Vec<u32>,
    pub indexing: Indexing,
}

pub struct WeightedInterleave {
    config: WeightedInterleaveConfig,
    /// Participating nodes ascending, and the cumulative weight after each.
    nodes: Vec<NodeId>,
    cumulative: Vec<u64>,
    cursor: u64,
}

impl WeightedInterleave {
    fn slot_of(&self, r: u64) -> usize {
        self.cumulative.iter().position(|&c| c > r).expect("r < W")
    }
}

impl Policy for WeightedInterleave {
    type Config = WeightedInterleaveConfig;
    const NAME: &'static str = "weighted-interleave";
    const SUMMARY: &'static str = "interleave pages in proportion to per-node weights (MPOL_WEIGHTED_INTERLEAVE)";

    fn new(config: WeightedInterleaveConfig, env: &PolicyEnv) -> Result<Self, PolicyError> {
        let weights: Vec<(NodeId, u32)> = if config.weights.is_empty() {
            env.allowed.iter().map(|&n| (n, 1)).collect()
        } else {
            let mut v = Vec::new();
            for (n, &w) in config.weights.iter().enumerate() {
                if w > 255 {
                    return Err(PolicyError::Config {
                        policy: Self::NAME.into(),
                        message: format!("weights[{n}] = {w}: a weight lies in 0..=255"),
                    });
                }
                if w > 0 {
                    check_node(Self::NAME, n as NodeId, env)?;
                    v.push((n as NodeId, w));
                }
            }
            v
        };
        if weights.is_empty() {
            return Err(PolicyError::Config { policy: Self::NAME.into(), message: "every weight is 0: no node takes part".into() });
        }
        let mut total = 0u64;
        let cumulative = weights.iter().map(|&(_, w)| {
            total += w as u64;
            total
        });
        let cumulative: Vec<u64> = cumulative.collect();
        Ok(WeightedInterleave { config, nodes: weights.iter().map(|&(n, _)| n).collect(), cumulative, cursor: 0 })
    }

    fn config(&self) -> &WeightedInterleaveConfig {
        &self.config
    }

    fn place(&mut self, req: &PlaceRequest, mem: &dyn MemoryState) -> Result<NodeId, OutOfMemory> {
        let total = *self.cumulative.last().expect("non-empty");
        let r = match self.config.indexing {
            Indexing::AddressIndexed => req.page % total,
            Indexing::AllocationOrder => {
                let r = self.cursor;
                self.cursor = (self.cursor + 1) % total;
                r
            }
        };
        cyclic_fit(&self.nodes, self.slot_of(r), mem, 1)
    }

    fn mempolicy(&self) -> Option<MempolicyIntent> {
        Some(MempolicyIntent {
            mode: MempolicyMode::WeightedInterleave,
            nodes: self.nodes.clone(),
            caveat: Some("Linux >= 6.9; weights are system-wide in /sys/kernel/mm/mempolicy/weighted_interleave".into()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::statics::testing::FixedMemory;
    use numalab_core::machine::presets;
    use std::sync::Arc;

    fn place_pages(cfg: WeightedInterleaveConfig, pages: std::ops::Range<u64>) -> Vec<NodeId> {
        let env = PolicyEnv::new(Arc::new(presets::load("server-a-2n").unwrap()));
        let mut p = WeightedInterleave::new(cfg, &env).unwrap();
        let mem = FixedMemory::uniform(2, 100);
        pages.map(|page| p.place(&PlaceRequest { space: 0, thread: 0, cpu: 0, cpu_node: 0, page }, &mem).unwrap()).collect()
    }

    /// docs/policies/weighted-interleave.md, test vector 3 and its weighted example.
    #[test]
    fn spec_vectors() {
        let got = place_pages(WeightedInterleaveConfig { weights: vec![3, 1], ..Default::default() }, 0..8);
        assert_eq!(got[5], 0);
        assert_eq!(got[7], 1);
        let got = place_pages(WeightedInterleaveConfig { weights: vec![5, 2], indexing: Indexing::AllocationOrder }, 0..14);
        assert_eq!(got, vec![0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 1, 1]);
        let ones = place_pages(WeightedInterleaveConfig { weights: vec![1, 1], ..Default::default() }, 0..6);
        assert_eq!(ones, vec![0, 1, 0, 1, 0, 1], "all weights 1 is plain interleave");
    }

    #[test]
    fn bad_weights_are_rejected() {
        let env = PolicyEnv::new(Arc::new(presets::load("server-a-2n").unwrap()));
        let e = WeightedInterleave::new(WeightedInterleaveConfig { weights: vec![0, 0], ..Default::default() }, &env).err().unwrap();
        assert!(e.to_string().contains("every weight is 0"));
        let e = WeightedInterleave::new(WeightedInterleaveConfig { weights: vec![1, 256], ..Default::default() }, &env).err().unwrap();
        assert!(e.to_string().contains("weights[1] = 256"));
    }
}
