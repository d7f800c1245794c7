//! `linux-tiering`'s tunables (docs/policies/linux-tiering.md, "Tunables"), under Linux's names.

use crate::error::PolicyError;
use serde::{Deserialize, Serialize};

/// Which nodes count as the top tier (docs/policies/linux-tiering.md, "Top tier").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TopTier {
    /// Only the nodes of the fastest tier present (HBM/MCDRAM, else DRAM, else CXL) [ours], a
    /// what-if Linux has no setting for:
    /// slower nodes are scanned and their hot pages promoted, also on machines whose fast
    /// tier has no CPUs. Promotions go to the top-tier node nearest the faulting CPU.
    Fastest,
    /// Linux's rule, the default (`mm/memory-tiers.c`, `establish_demotion_targets`): every tier up to and
    /// including the slowest one that holds a node with CPUs is top tier. Promotions go to the
    /// faulting CPU's node, as `mpol_misplaced` targets it.
    CpuTiers,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LinuxTieringConfig {
    /// Wait before an address space is first scanned (`numa_balancing_scan_delay_ms`).
    pub scan_delay_ms: u64,
    /// Shortest time for a full pass (`numa_balancing_scan_period_min_ms`).
    pub scan_period_min_ms: u64,
    /// Longest time for a full pass (`numa_balancing_scan_period_max_ms`); also the period of
    /// the hot-threshold adjustment.
    pub scan_period_max_ms: u64,
    /// Memory made inaccessible per scan step (`numa_balancing_scan_size_mb`).
    pub scan_size_mb: u64,
    /// Hint-fault latency under which a slow-tier page is hot (`hot_threshold_ms`, 1000).
    pub hot_threshold_ms: u64,
    /// Promotion candidates per second and target node, in MB
    /// (`numa_balancing_promote_rate_limit_MBps`, 65536).
    pub promote_rate_limit_mbps: u64,
    /// Demote cold pages to the next lower tier on reclaim (`/sys/kernel/mm/numa/demotion_enabled`).
    pub demotion_enabled: bool,
    /// `vm.min_free_kbytes`; `None` computes it as Linux does at boot (`calculate_min_free_kbytes`).
    pub min_free_kbytes: Option<u64>,
    /// `vm.watermark_scale_factor` (10 = 0.1% of a node between watermarks).
    pub watermark_scale_factor: u64,
    /// Period of the access samples that stand in for the LRU's referenced bits, microseconds
    /// of a thread's CPU time [A]; 0 = no sampling (pages age by placement order alone).
    pub lru_sample_period_us: u64,
    pub top_tier: TopTier,
}

impl Default for LinuxTieringConfig {
    fn default() -> Self {
        LinuxTieringConfig {
            scan_delay_ms: 1000,
            scan_period_min_ms: 1000,
            scan_period_max_ms: 60000,
            scan_size_mb: 256,
            hot_threshold_ms: 1000,
            promote_rate_limit_mbps: 65536,
            demotion_enabled: true,
            min_free_kbytes: None,
            watermark_scale_factor: 10,
            lru_sample_period_us: 500,
            top_tier: TopTier::CpuTiers,
        }
    }
}

impl LinuxTieringConfig {
    pub fn validate(&self) -> Result<(), PolicyError> {
        let err = |m: String| Err(PolicyError::Config { policy: "linux-tiering".into(), message: m });
        crate::dynamic::validate_scan_times(
            "linux-tiering",
            self.scan_delay_ms,
            self.scan_period_min_ms,
            self.scan_period_max_ms,
            self.scan_size_mb,
            &[("hot_threshold_ms", self.hot_threshold_ms)],
        )?;
        if self.promote_rate_limit_mbps > 1 << 30 {
            return err(format!("promote_rate_limit_mbps = {} must be at most {}", self.promote_rate_limit_mbps, 1u64 << 30));
        }
        // Linux bounds watermark_scale_factor to 1..=3000 (sysctl extra1/extra2).
        if !(1..=3000).contains(&self.watermark_scale_factor) {
            return err(format!("watermark_scale_factor = {} must be between 1 and 3000", self.watermark_scale_factor));
        }
        if self.lru_sample_period_us > 1_000_000 {
            return err(format!("lru_sample_period_us = {} must be at most 1000000", self.lru_sample_period_us));
        }
        Ok(())
    }
}
