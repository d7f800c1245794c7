//! The `[policy]` keys of Carrefour, their defaults (those of the public Carrefour daemon and
//! kernel module) and their validation (docs/policies/carrefour.md, "Config").

use crate::error::PolicyError;
use numalab_core::stats::RsdEstimator;
use serde::{Deserialize, Serialize};

/// The static policy that places pages before Carrefour moves any.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BaseKind {
    FirstTouch,
    #[serde(rename = "round-4k")]
    Round4k,
    #[serde(rename = "round-1g")]
    Round1g,
}

impl BaseKind {
    pub fn as_str(self) -> &'static str {
        match self {
            BaseKind::FirstTouch => "first-touch",
            BaseKind::Round4k => "round-4k",
            BaseKind::Round1g => "round-1g",
        }
    }
}

/// Which counter tells whether the traffic is mostly reads (the replication gate).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReadRatioMetric {
    /// Data-cache refills arriving in Modified state, as a share of all refills (AMD).
    Dcmr,
    /// Memory reads as a share of memory reads and writes.
    Mrr,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CarrefourConfig {
    /// Static placement underneath; unset = the one the policy's name gives
    /// (`first-touch+carrefour`, `round-4k+carrefour`), first-touch for `carrefour`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base: Option<BaseKind>,
    /// Decision period, ms (rounded up to the driver's ticks).
    pub interval_ms: u64,
    /// Memory accesses per µs below which Carrefour stays inactive (gate: `>=` passes).
    pub maptu_min: f64,
    /// Replication only while memory use is at most this, %.
    pub replication_mem_use_max: f64,
    pub read_ratio_metric: ReadRatioMetric,
    /// Replication only while the modified-refill ratio is at most this, % (`dcmr`).
    pub dcmr_max: f64,
    /// Replication only while the memory read ratio is at least this, % (`mrr`).
    pub mrr_min: f64,
    /// Interleaving on when the imbalance is above this, % (strict).
    pub interleave_imbalance_min: f64,
    /// Interleaving on when the local access ratio is below this, % (strict).
    pub interleave_lar_max: f64,
    /// Migration on when the local access ratio is below this, % (strict).
    pub migration_lar_max: f64,
    /// Samples a single-accessor page needs to migrate when interleaving is off.
    pub min_samples_migration: u32,
    /// Replication orders a round needs before replication is executed for the first time.
    pub replication_min_orders: u32,
    pub enable_replication: bool,
    pub enable_interleave: bool,
    pub enable_migration: bool,
    /// Also stay inactive while instructions per cycle exceed `ipc_max`.
    pub ipc_gate: bool,
    pub ipc_max: f64,
    /// Sampling period (CPU cycles between two samples of a thread) at the cheap rate.
    pub sampling_period_cheap_cycles: u64,
    /// Sampling period at the accurate rate.
    pub sampling_period_accurate_cycles: u64,
    /// Switch to the accurate rate after a round with at least `adaptive_min_orders`
    /// executed orders; `false` samples at the cheap rate throughout.
    pub adaptive_sampling: bool,
    pub adaptive_min_orders: u32,
    /// Distinct pages tracked per interval at each rate; samples of further pages are missed.
    pub max_pages_cheap: u32,
    pub max_pages_accurate: u32,
    /// Standard deviation estimator of the imbalance.
    pub rsd_estimator: RsdEstimator,
    /// Interleave destinations: the address space's allowed nodes (`true`) or every node
    /// with memory.
    pub restrict_to_allowed_nodes: bool,
    /// Only samples at virtual addresses in `[min_vaddr, max_vaddr]` count (bytes from the
    /// start of the address space); unset = no bound.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_vaddr: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_vaddr: Option<u64>,
}

impl Default for CarrefourConfig {
    fn default() -> Self {
        CarrefourConfig {
            base: None,
            interval_ms: 1000,
            maptu_min: 50.0,
            replication_mem_use_max: 25.0,
            read_ratio_metric: ReadRatioMetric::Dcmr,
            dcmr_max: 5.0,
            mrr_min: 90.0,
            interleave_imbalance_min: 35.0,
            interleave_lar_max: 100.0,
            migration_lar_max: 80.0,
            min_samples_migration: 2,
            replication_min_orders: 500,
            enable_replication: true,
            enable_interleave: true,
            enable_migration: true,
            ipc_gate: false,
            ipc_max: 0.9,
            sampling_period_cheap_cycles: 262_112,
            sampling_period_accurate_cycles: 65_528,
            adaptive_sampling: true,
            adaptive_min_orders: 10,
            max_pages_cheap: 10_000,
            max_pages_accurate: 30_000,
            rsd_estimator: RsdEstimator::Sample,
            restrict_to_allowed_nodes: true,
            min_vaddr: None,
            max_vaddr: None,
        }
    }
}

impl CarrefourConfig {
    pub fn validate(&self, policy: &str) -> Result<(), PolicyError> {
        let err = |message: String| Err(PolicyError::Config { policy: policy.to_string(), message });
        if self.interval_ms == 0 {
            return err("interval_ms must be at least 1".into());
        }
        for (key, v) in [
            ("replication_mem_use_max", self.replication_mem_use_max),
            ("dcmr_max", self.dcmr_max),
            ("mrr_min", self.mrr_min),
            ("interleave_imbalance_min", self.interleave_imbalance_min),
            ("interleave_lar_max", self.interleave_lar_max),
            ("migration_lar_max", self.migration_lar_max),
        ] {
            if !(0.0..=100.0).contains(&v) {
                return err(format!("{key} is a percentage in [0, 100], got {v}"));
            }
        }
        if !(self.maptu_min.is_finite() && self.maptu_min >= 0.0) {
            return err(format!("maptu_min must be a non-negative number of accesses per µs, got {}", self.maptu_min));
        }
        if !(self.ipc_max.is_finite() && self.ipc_max > 0.0) {
            return err(format!("ipc_max must be positive, got {}", self.ipc_max));
        }
        for (key, v) in [
            ("sampling_period_cheap_cycles", self.sampling_period_cheap_cycles),
            ("sampling_period_accurate_cycles", self.sampling_period_accurate_cycles),
        ] {
            if v == 0 {
                return err(format!("{key} must be at least 1 cycle"));
            }
        }
        for (key, v) in [("max_pages_cheap", self.max_pages_cheap), ("max_pages_accurate", self.max_pages_accurate)] {
            if v == 0 {
                return err(format!("{key} must be at least 1 page"));
            }
        }
        if let (Some(lo), Some(hi)) = (self.min_vaddr, self.max_vaddr) {
            if lo > hi {
                return err(format!("min_vaddr ({lo}) is above max_vaddr ({hi})"));
            }
        }
        Ok(())
    }
}
