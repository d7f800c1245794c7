//! `linux`: the Linux default as HPC sites run it (docs/policies/linux.md): pages on the node
//! of the CPU that first touches them, falling back by distance when that node is full
//! (`MPOL_DEFAULT` / local allocation), and no NUMA balancing (`kernel.numa_balancing = 0`).
//! Threads are placed by the scheduler model alone.

use super::{FirstTouch, FirstTouchConfig, FtFallback};
use crate::decision::{MempolicyIntent, MempolicyMode, PlaceRequest};
use crate::error::{OutOfMemory, PolicyError};
use crate::policy::{MemoryState, Policy, PolicyEnv};
use numalab_core::NodeId;
use serde::{Deserialize, Serialize};

/// No settings: the baseline is the kernel's defaults.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinuxConfig {}

pub struct Linux {
    config: LinuxConfig,
    local: FirstTouch,
}

impl Policy for Linux {
    type Config = LinuxConfig;
    const NAME: &'static str = "linux";
    const SUMMARY: &'static str =
        "Linux default without NUMA balancing: local allocation with distance fallback, the scheduler places threads";

    fn new(config: LinuxConfig, env: &PolicyEnv) -> Result<Self, PolicyError> {
        Ok(Linux { config, local: FirstTouch::new(FirstTouchConfig { fallback: FtFallback::Distance }, env)? })
    }

    fn config(&self) -> &LinuxConfig {
        &self.config
    }

    fn place(&mut self, req: &PlaceRequest, mem: &dyn MemoryState) -> Result<NodeId, OutOfMemory> {
        self.local.place(req, mem)
    }

    fn mempolicy(&self) -> Option<MempolicyIntent> {
        Some(MempolicyIntent {
            mode: MempolicyMode::Default,
            nodes: vec![],
            caveat: Some("needs kernel.numa_balancing = 0 on the host; the agent records it and warns when it is on".into()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::statics::testing::FixedMemory;
    use numalab_core::machine::presets;
    use std::sync::Arc;

    #[test]
    fn local_first_then_the_nearest_node_with_room() {
        let env = PolicyEnv::new(Arc::new(presets::load("server-a-4n").unwrap()));
        let mut p = Linux::new(LinuxConfig::default(), &env).unwrap();
        let req = PlaceRequest { space: 0, thread: 0, cpu: 0, cpu_node: 2, page: 0 };
        let mut mem = FixedMemory::uniform(4, 10);
        assert_eq!(p.place(&req, &mem), Ok(2));
        mem.fill(2);
        assert_eq!(p.place(&req, &mem), Ok(3), "node 3 is node 2's socket sibling (distance 11)");
        let err = crate::registry::find("linux").unwrap().build(toml::toml! { fallback = "distance" }, &env).err().unwrap();
        assert!(err.to_string().contains("unknown field `fallback`"), "{err}");
    }
}
