//! The `[policy]` keys of Stable-NUMA, their defaults and their validation
//! (docs/policies/stable-numa.md, "Config").

use super::page_state::E_BITS_MAX;
use super::scan::MAX_SCAN_WINDOW_MB;
use crate::error::PolicyError;
use crate::statics::FtFallback;
use serde::{Deserialize, Serialize};

/// Which pages the system-shared counts cover.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SsCountScope {
    /// One count per node over every address space.
    #[default]
    Global,
    /// One count per node per address space (root group).
    Space,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StableNumaConfig {
    /// Target duration of one full scan sequence, ms.
    pub scan_interval_ms: u64,
    /// Address space covered by one scan step, MiB; 0 = the whole space in each step.
    pub scan_chunk_mb: u64,
    /// Delay before the first scan step of a new address space, ms.
    pub scan_delay_ms: u64,
    /// In-transition states remember the last stable state (false: strict 6-bit mode).
    pub it_memory: bool,
    /// Saturation of the bypass exponent (at most 7, the 3-bit field).
    pub e_max: u8,
    /// SS balancing migrates when `min < ratio · max`.
    pub ss_balance_ratio: f64,
    pub ss_count_scope: SsCountScope,
    /// Weight of the new window in the smoothing `S := α·W + (1 − α)·S`.
    pub ema_alpha: f64,
    /// A candidate move needs a gain strictly above this.
    pub min_gain: f64,
    /// Thread moves or swaps per root group per sequence end (0 turns clustering off).
    pub decisions_per_sequence: u32,
    /// Linux's NUMA-level `imbalance_pct`, for the move conditions C1 and C2.
    pub numa_imbalance_pct: u32,
    /// Swap when `share(t*) ≥ swap_threshold · share(victim)`.
    pub swap_threshold: f64,
    /// A clustering move migrates the moved thread's private pages at once.
    pub eager_private_follow: bool,
    /// Thread-id bits kept per page (32 = all; 8 emulates Linux's `last_cpupid`).
    pub pid_bits: u32,
    /// Where first-touch placement falls back when the toucher's node is full.
    pub fallback: FtFallback,
}

impl Default for StableNumaConfig {
    fn default() -> Self {
        StableNumaConfig {
            scan_interval_ms: 1000,
            scan_chunk_mb: 256,
            scan_delay_ms: 1000,
            it_memory: true,
            e_max: E_BITS_MAX,
            ss_balance_ratio: 0.75,
            ss_count_scope: SsCountScope::Global,
            ema_alpha: 0.5,
            min_gain: 0.0,
            decisions_per_sequence: 1,
            numa_imbalance_pct: 125,
            swap_threshold: 1.5,
            eager_private_follow: false,
            pid_bits: 32,
            fallback: FtFallback::Distance,
        }
    }
}

impl StableNumaConfig {
    pub fn validate(&self, policy: &str) -> Result<(), PolicyError> {
        let err = |message: String| Err(PolicyError::Config { policy: policy.to_string(), message });
        if self.scan_interval_ms == 0 {
            return err("scan_interval_ms must be at least 1".into());
        }
        if self.scan_chunk_mb > MAX_SCAN_WINDOW_MB {
            return err(format!("scan_chunk_mb must be at most {MAX_SCAN_WINDOW_MB} (0 = whole space), got {}", self.scan_chunk_mb));
        }
        if self.e_max > E_BITS_MAX {
            return err(format!("e_max must be at most {E_BITS_MAX} (a 3-bit exponent), got {}", self.e_max));
        }
        if !(self.ss_balance_ratio > 0.0 && self.ss_balance_ratio <= 1.0) {
            return err(format!("ss_balance_ratio must be in (0, 1], got {}", self.ss_balance_ratio));
        }
        if !(self.ema_alpha > 0.0 && self.ema_alpha <= 1.0) {
            return err(format!("ema_alpha must be in (0, 1], got {}", self.ema_alpha));
        }
        if !(self.min_gain.is_finite() && self.min_gain >= 0.0) {
            return err(format!("min_gain must be a finite number >= 0, got {}", self.min_gain));
        }
        if self.numa_imbalance_pct < 100 {
            return err(format!("numa_imbalance_pct must be at least 100, got {}", self.numa_imbalance_pct));
        }
        if !(self.swap_threshold.is_finite() && self.swap_threshold >= 0.0) {
            return err(format!("swap_threshold must be a finite number >= 0, got {}", self.swap_threshold));
        }
        if !(1..=32).contains(&self.pid_bits) {
            return err(format!("pid_bits must be in 1..=32 (32 = full thread ids), got {}", self.pid_bits));
        }
        Ok(())
    }
}
