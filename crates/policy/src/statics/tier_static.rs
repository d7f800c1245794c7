//! Tier-static (docs/policies/tier-static.md): the fastest memory tier first, then slower ones,
//! each by distance from the accessing CPU's node — how most users run a tiered machine today
//! (fast-tier nodes preferred, the kernel's fallback for the rest), and the baseline of the
//! tiering comparisons.
//!
//! Tier order [ours]: on-package memory (HBM, MCDRAM) before DRAM before CXL-attached memory:
//! the order of their sustained bandwidth in every preset (docs/machines.md). A machine with
//! one tier places exactly as first-touch with distance fallback.

use crate::decision::{MempolicyIntent, MempolicyMode, PlaceRequest};
use crate::error::{OutOfMemory, PolicyError};
use crate::fallback::first_fit;
use crate::policy::{MemoryState, Policy, PolicyEnv};
use numalab_core::machine::Tier;
use numalab_core::NodeId;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TierStaticConfig {}

pub struct TierStatic {
    config: TierStaticConfig,
    /// Per accessing node: allowed nodes by (tier rank, distance, id).
    order: Vec<Vec<NodeId>>,
    /// Allowed nodes of the fastest tier present.
    fast: Vec<NodeId>,
    tiers_present: usize,
}

/// Rank of a tier, fastest first.
pub fn tier_rank(t: Tier) -> u8 {
    match t {
        Tier::Hbm | Tier::Mcdram => 0,
        Tier::Dram => 1,
        Tier::Cxl => 2,
    }
}

impl Policy for TierStatic {
    type Config = TierStaticConfig;
    const NAME: &'static str = "tier-static";
    const SUMMARY: &'static str = "fastest memory tier first (HBM/MCDRAM, then DRAM, then CXL), each by distance; never moves a page";

    fn new(config: TierStaticConfig, env: &PolicyEnv) -> Result<Self, PolicyError> {
        let m = &env.machine;
        let rank = |n: NodeId| tier_rank(m.nodes[n as usize].tier);
        let order: Vec<Vec<NodeId>> = (0..m.node_count() as NodeId)
            .map(|from| {
                let mut o = env.allowed.clone();
                o.sort_by_key(|&n| (rank(n), m.distance(from, n), n));
                o
            })
            .collect();
        let best = env.allowed.iter().map(|&n| rank(n)).min().unwrap_or(1);
        let fast: Vec<NodeId> = env.allowed.iter().copied().filter(|&n| rank(n) == best).collect();
        let mut ranks: Vec<u8> = env.allowed.iter().map(|&n| rank(n)).collect();
        ranks.sort_unstable();
        ranks.dedup();
        Ok(TierStatic { config, order, fast, tiers_present: ranks.len() })
    }

    fn config(&self) -> &TierStaticConfig {
        &self.config
    }

    fn place(&mut self, req: &PlaceRequest, mem: &dyn MemoryState) -> Result<NodeId, OutOfMemory> {
        let order = &self.order[req.cpu_node as usize];
        first_fit(order.iter().copied(), mem, 1).ok_or(OutOfMemory { wanted: order[0], pages: 1 })
    }

    fn mempolicy(&self) -> Option<MempolicyIntent> {
        if self.tiers_present == 1 {
            return Some(MempolicyIntent { mode: MempolicyMode::Local, nodes: vec![], caveat: None });
        }
        Some(MempolicyIntent {
            mode: if self.fast.len() == 1 { MempolicyMode::Preferred } else { MempolicyMode::PreferredMany },
            nodes: self.fast.clone(),
            caveat: Some(
                "the fast-tier nodes are preferred; when they are full the kernel falls back by distance, not by tier (MPOL_PREFERRED_MANY needs Linux >= 5.15)"
                    .into(),
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::statics::testing::FixedMemory;
    use numalab_core::machine::presets;
    use std::sync::Arc;

    fn policy(machine: &str) -> TierStatic {
        let env = PolicyEnv::new(Arc::new(presets::load(machine).unwrap()));
        TierStatic::new(TierStaticConfig::default(), &env).unwrap()
    }

    fn req(cpu_node: NodeId) -> PlaceRequest {
        PlaceRequest { space: 0, thread: 0, cpu: 0, cpu_node, page: 0 }
    }

    /// knl-7250-flat: node 0 = cores + DDR4, node 1 = CPU-less MCDRAM. MCDRAM until it is
    /// full, then DDR4.
    #[test]
    fn knl_flat_fills_mcdram_then_ddr() {
        let mut p = policy("knl-7250-flat");
        let mut mem = FixedMemory::uniform(2, 10);
        assert_eq!(p.place(&req(0), &mem), Ok(1));
        mem.fill(1);
        assert_eq!(p.place(&req(0), &mem), Ok(0));
        mem.fill(0);
        assert!(p.place(&req(0), &mem).is_err());
        assert_eq!(p.mempolicy().unwrap().mode, MempolicyMode::Preferred);
        assert_eq!(p.mempolicy().unwrap().nodes, vec![1]);
    }

    /// xeon-max-hbm-flat: nodes 0-1 DDR5 with cores, 2-3 CPU-less HBM (2 on socket 0). From
    /// node 0: the local HBM, the remote HBM, then DDR local, remote.
    #[test]
    fn hbm_nodes_first_by_distance_then_dram() {
        let p = policy("xeon-max-hbm-flat");
        assert_eq!(p.order[0], vec![2, 3, 0, 1]);
        assert_eq!(p.order[1], vec![3, 2, 1, 0]);
        assert_eq!(p.mempolicy().unwrap().mode, MempolicyMode::PreferredMany);
    }

    /// cxl-expander: DRAM of both sockets before either CXL node.
    #[test]
    fn cxl_comes_after_all_dram() {
        let p = policy("cxl-expander");
        assert_eq!(p.order[0], vec![0, 1, 2, 3]);
        assert_eq!(p.order[1], vec![1, 0, 3, 2]);
    }

    /// One tier: the same order as first-touch with distance fallback, and MPOL_LOCAL live.
    #[test]
    fn a_single_tier_machine_is_first_touch_by_distance() {
        let p = policy("amd48");
        let m = presets::load("amd48").unwrap();
        for from in 0..m.node_count() as NodeId {
            assert_eq!(p.order[from as usize][0], from);
            assert_eq!(p.order[from as usize], crate::fallback::by_distance(&m, from, &m.memory_nodes()));
        }
        assert_eq!(p.mempolicy().unwrap().mode, MempolicyMode::Local);
    }

    #[test]
    fn unknown_settings_are_refused() {
        let env = PolicyEnv::new(Arc::new(presets::load("amd48").unwrap()));
        let e = crate::registry::build("tier-static", "fast = 1".parse().unwrap(), &env).err().unwrap().to_string();
        assert!(e.contains("unknown field"), "{e}");
    }
}
