//! Dynamic placement policies: they move pages and threads while the program runs.

pub mod autonuma;

use crate::error::PolicyError;
use numalab_core::rng::StreamRng;
use rand::Rng;

/// A task's clock of `task_tick_numa` (docs/policies/autonuma.md, "Scanning"), shared by the
/// policies that drive the hinting scanner as Linux does (`autonuma`, `linux-tiering`).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ScanClock {
    /// The task's scan period (`numa_scan_period`).
    pub period_ms: u64,
    /// Runtime at which the current period started (`node_stamp`).
    pub node_stamp_ns: u64,
    /// Random start offset of the runtime clock, drawn at the task's first tick.
    pub stagger_ns: u64,
    pub seen: bool,
}

impl ScanClock {
    /// `task_tick_numa`'s runtime test: once the task's CPU time (plus its stagger) passed
    /// a period since `node_stamp`, the period is consumed and `Some(first)` says whether it
    /// was the task's first one (whose period the caller then sets to `task_scan_start`).
    pub fn runtime_due(&mut self, runtime_ns: u64, rng: &mut StreamRng) -> Option<bool> {
        if !self.seen {
            self.stagger_ns = rng.random_range(0..(self.period_ms * 1_000_000).max(1));
            self.seen = true;
        }
        let period_ns = self.period_ms * 1_000_000;
        if runtime_ns + self.stagger_ns <= self.node_stamp_ns + period_ns {
            return None;
        }
        let first = self.node_stamp_ns == 0;
        self.node_stamp_ns += period_ns;
        Some(first)
    }

    /// `task_numa_work`'s claim of the address space's next scan: false before `mm_next_ns`;
    /// otherwise the next scan is set a period later, the task's stamp moves by two ticks
    /// (the work's own time, as Linux charges it) and the task scans now.
    pub fn claim_scan(&mut self, now_ns: u64, mm_next_ns: &mut Option<u64>, tick_ns: u64) -> bool {
        if mm_next_ns.is_some_and(|next| now_ns < next) {
            return false;
        }
        *mm_next_ns = Some(now_ns + self.period_ms * 1_000_000);
        self.node_stamp_ns += 2 * tick_ns;
        true
    }
}

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
