//! `/proc/vmstat`: the NUMA, migration and tiering counters the profiler tracks.

use crate::error::Result;
use crate::parse::parse_key_values;
use std::collections::BTreeMap;
use std::path::Path;

/// Counters tracked by the profiler (auto-numa §10, perfutil §7.3). Missing ones are reported
/// `unsupported` (no `CONFIG_NUMA_BALANCING`, `CONFIG_MIGRATION` or tiering).
pub const TRACKED: &[&str] = &[
    "numa_hit",
    "numa_miss",
    "numa_foreign",
    "numa_interleave",
    "numa_local",
    "numa_other",
    "numa_pte_updates",
    "numa_huge_pte_updates",
    "numa_hint_faults",
    "numa_hint_faults_local",
    "numa_pages_migrated",
    "pgmigrate_success",
    "pgmigrate_fail",
    "pgpromote_success",
    "pgpromote_candidate",
    "pgdemote_kswapd",
    "pgdemote_direct",
];

/// Allocation counters that stop updating when `vm.numa_stat` is 0.
pub const ALLOCATION: &[&str] = &["numa_hit", "numa_miss", "numa_foreign", "numa_interleave", "numa_local", "numa_other"];

pub fn parse_vmstat(text: &str, path: &Path) -> Result<BTreeMap<String, u64>> {
    parse_key_values(text, path)
}
