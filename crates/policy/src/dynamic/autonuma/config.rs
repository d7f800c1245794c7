//! AutoNUMA's tunables (docs/policies/autonuma.md, "Tunables"), under Linux's names.

use crate::error::PolicyError;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AutoNumaConfig {
    /// Wait before an address space is first scanned (`numa_balancing_scan_delay_ms`).
    pub scan_delay_ms: u64,
    /// Target shortest time for a full pass (`numa_balancing_scan_period_min_ms`).
    pub scan_period_min_ms: u64,
    /// Target longest time for a full pass (`numa_balancing_scan_period_max_ms`).
    pub scan_period_max_ms: u64,
    /// Memory made inaccessible per scan step (`numa_balancing_scan_size_mb`).
    pub scan_size_mb: u64,
    /// The NUMA scheduling domain's `imbalance_pct` (117 since Linux 5.10).
    pub sd_imbalance_pct: u32,
    /// Pid bits kept in a page's `last_cpupid` (8 in Linux); 32 compares whole thread ids.
    pub pid_bits: u32,
}

impl Default for AutoNumaConfig {
    fn default() -> Self {
        AutoNumaConfig {
            scan_delay_ms: 1000,
            scan_period_min_ms: 1000,
            scan_period_max_ms: 60000,
            scan_size_mb: 256,
            sd_imbalance_pct: 117,
            pid_bits: 8,
        }
    }
}

impl AutoNumaConfig {
    pub fn validate(&self) -> Result<(), PolicyError> {
        let err = |m: String| Err(PolicyError::Config { policy: "autonuma".into(), message: m });
        crate::dynamic::validate_scan_times(
            "autonuma",
            self.scan_delay_ms,
            self.scan_period_min_ms,
            self.scan_period_max_ms,
            self.scan_size_mb,
            &[],
        )?;
        if !(100..=1000).contains(&self.sd_imbalance_pct) {
            return err(format!("sd_imbalance_pct = {} must be between 100 and 1000", self.sd_imbalance_pct));
        }
        if !(1..=32).contains(&self.pid_bits) {
            return err(format!("pid_bits = {} must be between 1 and 32", self.pid_bits));
        }
        Ok(())
    }
}
