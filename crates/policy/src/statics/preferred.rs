//! Preferred / PreferredMany (docs/policies/preferred.md): try the preferred node(s), then spill.

use super::resolve_nodes;
use crate::decision::{MempolicyIntent, MempolicyMode, PlaceRequest};
use crate::error::{OutOfMemory, PolicyError};
use crate::fallback::{by_distance, first_fit};
use crate::policy::{MemoryState, Policy, PolicyEnv};
use numalab_core::NodeId;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PreferredConfig {
    /// One node (MPOL_PREFERRED) or several (MPOL_PREFERRED_MANY). Required.
    pub nodes: Vec<NodeId>,
}

pub struct Preferred {
    config: PreferredConfig,
    nodes: Vec<NodeId>,
    order: Vec<Vec<NodeId>>,
}

impl Policy for Preferred {
    type Config = PreferredConfig;
    const NAME: &'static str = "preferred";
    const SUMMARY: &'static str = "the listed node(s) first, then any node by distance (MPOL_PREFERRED[_MANY])";

    fn new(config: PreferredConfig, env: &PolicyEnv) -> Result<Self, PolicyError> {
        if config.nodes.is_empty() {
            return Err(PolicyError::Config {
                policy: Self::NAME.into(),
                message: "needs preferred node(s), e.g. --set policy.nodes=[1]".into(),
            });
        }
        let nodes = resolve_nodes(Self::NAME, &config.nodes, env)?;
        let m = &env.machine;
        let order = (0..m.node_count() as NodeId)
            .map(|from| {
                // One node: the rest by distance from it. Many: S, then the rest, by distance
                // from the accessing node.
                let origin = if nodes.len() == 1 { nodes[0] } else { from };
                let mut o = by_distance(m, origin, &nodes);
                let rest: Vec<NodeId> = env.allowed.iter().copied().filter(|n| !nodes.contains(n)).collect();
                o.extend(by_distance(m, origin, &rest));
                o
            })
            .collect();
        Ok(Preferred { config, nodes, order })
    }

    fn config(&self) -> &PreferredConfig {
        &self.config
    }

    fn place(&mut self, req: &PlaceRequest, mem: &dyn MemoryState) -> Result<NodeId, OutOfMemory> {
        let order = &self.order[req.cpu_node as usize];
        first_fit(order.iter().copied(), mem, 1).ok_or(OutOfMemory { wanted: order[0], pages: 1 })
    }

    fn mempolicy(&self) -> Option<MempolicyIntent> {
        let mode = if self.nodes.len() == 1 { MempolicyMode::Preferred } else { MempolicyMode::PreferredMany };
        let caveat = (self.nodes.len() > 1).then(|| "MPOL_PREFERRED_MANY needs Linux >= 5.15".to_string());
        Some(MempolicyIntent { mode, nodes: self.nodes.clone(), caveat })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::statics::testing::FixedMemory;
    use numalab_core::machine::presets;
    use std::sync::Arc;

    #[test]
    fn spills_by_distance_from_the_preferred_node() {
        let env = PolicyEnv::new(Arc::new(presets::load("server-a-4n").unwrap()));
        let mut p = Preferred::new(PreferredConfig { nodes: vec![2] }, &env).unwrap();
        let mut mem = FixedMemory::uniform(4, 10);
        let r = PlaceRequest { space: 0, thread: 0, cpu: 0, cpu_node: 0, page: 0 };
        assert_eq!(p.place(&r, &mem), Ok(2));
        mem.fill(2);
        assert_eq!(p.place(&r, &mem), Ok(3), "node 3 is nearest to node 2 (SLIT 11)");
        let mut many = Preferred::new(PreferredConfig { nodes: vec![2, 3] }, &env).unwrap();
        let r1 = PlaceRequest { cpu_node: 1, ..r };
        mem.fill(3);
        assert_eq!(many.place(&r1, &mem), Ok(1), "S full: nearest other node to the accessing node");
    }
}
