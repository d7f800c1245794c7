//! The `[policy]` keys of kMAF, their defaults and their validation (docs/policies/kmaf.md,
//! "Config").

use crate::error::PolicyError;
use crate::statics::FtFallback;
use serde::{Deserialize, Serialize};

/// Most sharers a page's affinity entry may track.
pub const MAX_SHARERS: u32 = 16;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct KmafConfig {
    /// Delay before the first pass of induced faults of a new address space, ms.
    pub scan_delay_ms: u64,
    /// One pass of induced faults over the whole address space every this many ms.
    pub fault_period_ms: u64,
    /// Threads remembered per page (the affinity entry's width).
    pub sharers: u32,
    /// A page migrates only once its entry holds at least this many faults.
    pub page_min_faults: u32,
    /// A page migrates to a node whose threads hold more than this share of its faults.
    pub page_majority: f64,
    /// Thread placement runs every this many ms.
    pub thread_period_ms: u64,
    /// A thread moves only after at least this many faults in the period.
    pub thread_min_faults: u64,
    /// A thread moves to a node holding more than this share of the pages it faulted on.
    pub thread_majority: f64,
    /// When the target node has no idle CPU, exchange with a thread that wants the other way.
    pub thread_swap: bool,
    /// Where first-touch placement falls back when the toucher's node is full.
    pub fallback: FtFallback,
}

impl Default for KmafConfig {
    fn default() -> Self {
        KmafConfig {
            scan_delay_ms: 1000,
            fault_period_ms: 1000,
            sharers: 4,
            page_min_faults: 2,
            page_majority: 0.5,
            thread_period_ms: 1000,
            thread_min_faults: 16,
            thread_majority: 0.5,
            thread_swap: true,
            fallback: FtFallback::Distance,
        }
    }
}

impl KmafConfig {
    pub fn validate(&self, policy: &str) -> Result<(), PolicyError> {
        let err = |message: String| Err(PolicyError::Config { policy: policy.to_string(), message });
        if self.fault_period_ms == 0 {
            return err("fault_period_ms must be at least 1".into());
        }
        if self.thread_period_ms == 0 {
            return err("thread_period_ms must be at least 1".into());
        }
        if !(1..=MAX_SHARERS).contains(&self.sharers) {
            return err(format!("sharers must be in 1..={MAX_SHARERS}, got {}", self.sharers));
        }
        if self.page_min_faults == 0 {
            return err("page_min_faults must be at least 1".into());
        }
        for (key, v) in [("page_majority", self.page_majority), ("thread_majority", self.thread_majority)] {
            if !(0.0..1.0).contains(&v) {
                return err(format!("{key} must be in [0, 1), got {v}"));
            }
        }
        Ok(())
    }
}
