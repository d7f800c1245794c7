//! Dynamic placement policies: they move pages and threads while the program runs.

pub mod autonuma;

use crate::error::PolicyError;

/// Pages in `mb` MiB (a scan size or a rate limit given in MB, as Linux's sysctls are).
pub(crate) fn pages_of_mb(mb: u64, page_bytes: u64) -> u64 {
    (mb << 20) / page_bytes.max(1)
}

/// The NUMA-balancing scanner's timing tunables as Linux names them, shared by the policies
/// that drive the hinting scanner (`autonuma`, `linux-tiering`): each time between 1 ms and a
/// day, the minimum period not above the maximum, the scan size between 1 MiB and 1 TiB.
/// `extra_ms` holds further millisecond tunables with the same bounds.
pub(crate) fn validate_scan_times(
    policy: &str,
    scan_delay_ms: u64,
    scan_period_min_ms: u64,
    scan_period_max_ms: u64,
    scan_size_mb: u64,
    extra_ms: &[(&str, u64)],
) -> Result<(), PolicyError> {
    let err = |m: String| Err(PolicyError::Config { policy: policy.into(), message: m });
    const DAY_MS: u64 = 86_400_000;
    let times = [("scan_delay_ms", scan_delay_ms), ("scan_period_min_ms", scan_period_min_ms), ("scan_period_max_ms", scan_period_max_ms)];
    for &(k, v) in times.iter().chain(extra_ms) {
        if v == 0 || v > DAY_MS {
            return err(format!("{k} = {v} must be between 1 and {DAY_MS} ms"));
        }
    }
    if scan_period_min_ms > scan_period_max_ms {
        return err(format!("scan_period_min_ms = {scan_period_min_ms} must not exceed scan_period_max_ms = {scan_period_max_ms}"));
    }
    if scan_size_mb == 0 || scan_size_mb > 1 << 20 {
        return err(format!("scan_size_mb = {} must be between 1 and {} MiB", scan_size_mb, 1u64 << 20));
    }
    Ok(())
}
