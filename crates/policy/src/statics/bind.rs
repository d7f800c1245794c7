//! Bind (docs/policies/bind.md): only the given nodes, nearest first; never outside the set.

use super::resolve_nodes;
use crate::decision::{MempolicyIntent, MempolicyMode, PlaceRequest};
use crate::error::{OutOfMemory, PolicyError};
use crate::fallback::{by_distance, first_fit};
use crate::policy::{MemoryState, Policy, PolicyEnv};
use numalab_core::NodeId;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BindConfig {
    /// The node set S (required, non-empty).
    pub nodes: Vec<NodeId>,
    /// Start the distance order here instead of at the accessing CPU's node.
    pub home_node: Option<NodeId>,
}

pub struct Bind {
    config: BindConfig,
    nodes: Vec<NodeId>,
    /// Per accessing node: S by increasing distance.
    order: Vec<Vec<NodeId>>,
}

impl Policy for Bind {
    type Config = BindConfig;
    const NAME: &'static str = "bind";
    const SUMMARY: &'static str = "only the listed nodes, nearest first; out of memory rather than spill (MPOL_BIND)";

    fn new(config: BindConfig, env: &PolicyEnv) -> Result<Self, PolicyError> {
        if config.nodes.is_empty() {
            return Err(PolicyError::Config {
                policy: Self::NAME.into(),
                message: "needs a node set, e.g. --set policy.nodes=[0,1]".into(),
            });
        }
        let nodes = resolve_nodes(Self::NAME, &config.nodes, env)?;
        if let Some(h) = config.home_node {
            if h as usize >= env.machine.node_count() {
                return Err(PolicyError::NoSuchNode { policy: Self::NAME.into(), node: h, nodes: env.machine.node_count() });
            }
        }
        let order = (0..env.machine.node_count() as NodeId)
            .map(|from| by_distance(&env.machine, config.home_node.unwrap_or(from), &nodes))
            .collect();
        Ok(Bind { config, nodes, order })
    }

    fn config(&self) -> &BindConfig {
        &self.config
    }

    fn place(&mut self, req: &PlaceRequest, mem: &dyn MemoryState) -> Result<NodeId, OutOfMemory> {
        let order = &self.order[req.cpu_node as usize];
        first_fit(order.iter().copied(), mem, 1).ok_or(OutOfMemory { wanted: order[0], pages: 1 })
    }

    fn mempolicy(&self) -> Option<MempolicyIntent> {
        Some(MempolicyIntent { mode: MempolicyMode::Bind, nodes: self.nodes.clone(), caveat: None })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::statics::testing::FixedMemory;
    use numalab_core::machine::presets;
    use std::sync::Arc;

    /// docs/policies/bind.md, test vector 7: Bind({0,1}) with both full is out of memory, never node 2.
    #[test]
    fn spec_vector_7() {
        let env = PolicyEnv::new(Arc::new(presets::load("server-a-4n").unwrap()));
        let mut p = Bind::new(BindConfig { nodes: vec![0, 1], home_node: None }, &env).unwrap();
        let mut mem = FixedMemory::uniform(4, 10);
        let r = PlaceRequest { space: 0, thread: 0, cpu: 0, cpu_node: 1, page: 0 };
        assert_eq!(p.place(&r, &mem), Ok(1));
        mem.fill(1);
        assert_eq!(p.place(&r, &mem), Ok(0));
        mem.fill(0);
        assert!(p.place(&r, &mem).is_err());
        let r3 = PlaceRequest { cpu_node: 3, ..r };
        mem.free[0] = 5;
        assert_eq!(p.place(&r3, &mem), Ok(0));
    }

    #[test]
    fn empty_set_is_an_error() {
        let env = PolicyEnv::new(Arc::new(presets::load("server-a-4n").unwrap()));
        let e = Bind::new(BindConfig::default(), &env).err().unwrap().to_string();
        assert!(e.contains("needs a node set"), "{e}");
    }
}
