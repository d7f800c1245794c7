//! The `[policy]` keys of HyDM, their defaults and their validation (docs/policies/hydm.md,
//! "Config").

use crate::error::PolicyError;
use numalab_core::NodeId;
use serde::{Deserialize, Serialize};

/// Most windows the history may keep.
pub const MAX_HISTORY: u32 = 1000;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HydmConfig {
    /// The time-window period `p`, ms: one monitor–select–migrate iteration per window.
    pub period_ms: u64,
    /// Windows kept in the history (`H`), the current one included.
    pub history: u32,
    /// Threshold `t` on the fast tier's used fraction: an application moves only if the fast
    /// tier's used bytes plus its resident bytes stay within `t` × the fast tier's capacity.
    pub threshold: f64,
    /// Bytes per counted memory reference, for the arithmetic intensity.
    pub bytes_per_ref: u64,
    /// Skip candidates whose predicted intensity is at or above the slow tier's ridge point.
    pub require_memory_bound: bool,
    /// An application stays in the fast tier only if its flops grew by more than this share
    /// over the previous window at least once since it moved.
    pub rollback_rel_eps: f64,
    /// Compute peak for the ridge point, GFLOP/s; empty = the machine's `peak_gflops_dp`.
    pub peak_gflops: Option<f64>,
    /// Fast-tier nodes; empty = the allowed nodes of the tier with the highest bandwidth.
    pub fast_nodes: Vec<NodeId>,
    /// Slow-tier nodes; empty = every other allowed node.
    pub slow_nodes: Vec<NodeId>,
    /// Where new pages go (docs/policies/hydm.md, "New pages").
    pub new_pages: NewPages,
}

/// Where HyDM places a page on its first touch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NewPages {
    /// As Linux with no memory policy set: the touching CPU's node, then the other allowed
    /// nodes by distance, whatever their tier.
    #[default]
    Local,
    /// The slow tier first (nearest node first), the fast tier only when the slow one is full:
    /// the earlier reading, kept as a what-if.
    SlowFirst,
}

impl Default for HydmConfig {
    fn default() -> Self {
        HydmConfig {
            period_ms: 100,
            history: 5,
            threshold: 0.9,
            bytes_per_ref: 64,
            require_memory_bound: false,
            rollback_rel_eps: 0.0,
            peak_gflops: None,
            fast_nodes: Vec::new(),
            slow_nodes: Vec::new(),
            new_pages: NewPages::Local,
        }
    }
}

impl HydmConfig {
    pub fn validate(&self, policy: &str) -> Result<(), PolicyError> {
        let err = |message: String| Err(PolicyError::Config { policy: policy.to_string(), message });
        if self.period_ms == 0 {
            return err("period_ms must be at least 1".into());
        }
        if !(1..=MAX_HISTORY).contains(&self.history) {
            return err(format!("history must be in 1..={MAX_HISTORY}, got {}", self.history));
        }
        if !(self.threshold > 0.0 && self.threshold <= 1.0) {
            return err(format!("threshold must be in (0, 1], got {}", self.threshold));
        }
        if self.bytes_per_ref == 0 {
            return err("bytes_per_ref must be at least 1".into());
        }
        if !(self.rollback_rel_eps.is_finite() && self.rollback_rel_eps >= 0.0) {
            return err(format!("rollback_rel_eps must be a finite number >= 0, got {}", self.rollback_rel_eps));
        }
        if let Some(p) = self.peak_gflops {
            if !(p.is_finite() && p > 0.0) {
                return err(format!("peak_gflops must be a finite number > 0, got {p}"));
            }
        }
        if let Some(n) = self.fast_nodes.iter().find(|n| self.slow_nodes.contains(n)) {
            return err(format!("node {n} is in both fast_nodes and slow_nodes"));
        }
        Ok(())
    }
}
