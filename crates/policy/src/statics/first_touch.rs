//! First-touch (docs/policies/first-touch.md): a page goes to the node of the CPU that first touches it.

use crate::decision::{MempolicyIntent, MempolicyMode, PlaceRequest};
use crate::error::{OutOfMemory, PolicyError};
use crate::fallback::{by_distance, first_fit, next_round_robin};
use crate::policy::{MemoryState, Policy, PolicyEnv};
use numalab_core::NodeId;
use serde::{Deserialize, Serialize};

/// Where a page goes when the toucher's node is full.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FtFallback {
    /// Allowed nodes as a cycle starting after the wanted node (the source's round-robin).
    #[default]
    NextRoundRobin,
    /// Allowed nodes by increasing distance (what the Linux kernel does).
    Distance,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FirstTouchConfig {
    pub fallback: FtFallback,
}

pub struct FirstTouch {
    config: FirstTouchConfig,
    env: PolicyEnv,
    /// Per wanted node: fallback order (wanted node first when allowed), computed once.
    order: Vec<Vec<NodeId>>,
}

impl Policy for FirstTouch {
    type Config = FirstTouchConfig;
    const NAME: &'static str = "first-touch";
    const SUMMARY: &'static str = "Linux default: a page lives on the node of the CPU that first touches it";

    fn new(config: FirstTouchConfig, env: &PolicyEnv) -> Result<Self, PolicyError> {
        let a = &env.allowed;
        let order = (0..env.machine.node_count() as NodeId)
            .map(|n0| {
                let mut o: Vec<NodeId> = Vec::with_capacity(a.len());
                if a.contains(&n0) {
                    o.push(n0);
                }
                let rest: Vec<NodeId> = match config.fallback {
                    FtFallback::NextRoundRobin => next_round_robin(a, n0).filter(|&n| n != n0).collect(),
                    FtFallback::Distance => by_distance(&env.machine, n0, a).into_iter().filter(|&n| n != n0).collect(),
                };
                o.extend(rest);
                o
            })
            .collect();
        Ok(FirstTouch { config, env: env.clone(), order })
    }

    fn config(&self) -> &FirstTouchConfig {
        &self.config
    }

    fn place(&mut self, req: &PlaceRequest, mem: &dyn MemoryState) -> Result<NodeId, OutOfMemory> {
        first_fit(self.order[req.cpu_node as usize].iter().copied(), mem, 1).ok_or(OutOfMemory { wanted: req.cpu_node, pages: 1 })
    }

    fn mempolicy(&self) -> Option<MempolicyIntent> {
        let caveat = match self.config.fallback {
            FtFallback::Distance => None,
            FtFallback::NextRoundRobin => Some("the kernel falls back by distance, not round-robin".to_string()),
        };
        let _ = &self.env;
        Some(MempolicyIntent { mode: MempolicyMode::Local, nodes: vec![], caveat })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::statics::testing::FixedMemory;
    use numalab_core::machine::presets;
    use std::sync::Arc;

    fn req(cpu_node: NodeId) -> PlaceRequest {
        PlaceRequest { space: 0, thread: 0, cpu: 0, cpu_node, page: 0 }
    }

    /// docs/policies/first-touch.md, test vector 1 (4 nodes; distances from node 2: 1 -> 16, 3 -> 21, 0 -> 21).
    #[test]
    fn spec_vector_1() {
        let text = presets::text("server-a-4n").unwrap();
        // Make node 2's distances 0:21, 1:16, 3:21 as in the vector (symmetric).
        let text = text.replace(
            "[10, 11, 21, 21],\n    [11, 10, 21, 21],\n    [21, 21, 10, 11],\n    [21, 21, 11, 10]",
            "[10, 11, 21, 21],\n    [11, 10, 16, 21],\n    [21, 16, 10, 21],\n    [21, 21, 21, 10]",
        );
        let m = numalab_core::Machine::from_toml_str(&text, "t").unwrap();
        let env = PolicyEnv::new(Arc::new(m));
        let mut mem = FixedMemory::uniform(4, 10);
        let mut rr = FirstTouch::new(FirstTouchConfig::default(), &env).unwrap();
        mem.fill(2);
        assert_eq!(rr.place(&req(2), &mem), Ok(3));
        mem.fill(3);
        assert_eq!(rr.place(&req(2), &mem), Ok(0));

        let mut d = FirstTouch::new(FirstTouchConfig { fallback: FtFallback::Distance }, &env).unwrap();
        let mut mem = FixedMemory::uniform(4, 10);
        mem.fill(2);
        assert_eq!(d.place(&req(2), &mem), Ok(1));
        mem.fill(1);
        assert_eq!(d.place(&req(2), &mem), Ok(0), "tie 0/3 at 21 goes to the lower id");
        for n in [0, 3] {
            mem.fill(n);
        }
        assert_eq!(d.place(&req(2), &mem), Err(OutOfMemory { wanted: 2, pages: 1 }));
    }

    #[test]
    fn cpu_node_without_memory_starts_at_the_next_allowed_node() {
        let mut m = presets::load("server-a-4n").unwrap();
        m.nodes[1].mem_bytes = 0;
        let env = PolicyEnv::new(Arc::new(m));
        let mut p = FirstTouch::new(FirstTouchConfig::default(), &env).unwrap();
        assert_eq!(p.place(&req(1), &FixedMemory::uniform(4, 1)), Ok(2));
    }
}
