//! Static placement policies (docs/policies/README.md): they choose a node once, when a page is
//! placed, and never move it.

mod bind;
mod first_touch;
mod linux;
mod preferred;
mod round_1g;
mod round_4k;
pub mod testing;
mod tier_static;
mod weighted_interleave;

pub use bind::{Bind, BindConfig};
pub use first_touch::{FirstTouch, FirstTouchConfig, FtFallback};
pub use linux::{Linux, LinuxConfig};
pub use preferred::{Preferred, PreferredConfig};
pub use round_1g::{range_node, Hole, Round1G, Round1GConfig};
pub use round_4k::{Indexing, Round4K, Round4KConfig};
pub use tier_static::{tier_rank, TierStatic, TierStaticConfig};
pub use weighted_interleave::{WeightedInterleave, WeightedInterleaveConfig};

use crate::error::PolicyError;
use crate::policy::PolicyEnv;
use numalab_core::NodeId;

/// Check a configured node list against the machine; empty means "all allowed nodes".
pub(crate) fn resolve_nodes(policy: &str, nodes: &[NodeId], env: &PolicyEnv) -> Result<Vec<NodeId>, PolicyError> {
    if nodes.is_empty() {
        return Ok(env.allowed.clone());
    }
    let mut out = Vec::with_capacity(nodes.len());
    for &n in nodes {
        check_node(policy, n, env)?;
        if !out.contains(&n) {
            out.push(n);
        }
    }
    out.sort_unstable();
    Ok(out)
}

pub(crate) fn check_node(policy: &str, n: NodeId, env: &PolicyEnv) -> Result<(), PolicyError> {
    let count = env.machine.node_count();
    if n as usize >= count {
        return Err(PolicyError::NoSuchNode { policy: policy.to_string(), node: n, nodes: count });
    }
    if !env.allowed.contains(&n) {
        return Err(PolicyError::MemorylessNode { policy: policy.to_string(), node: n });
    }
    Ok(())
}
