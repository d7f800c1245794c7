//! Scan-period arithmetic (docs/policies/autonuma.md, "Scan period"): Linux's
//! `task_scan_min`, `task_scan_max`, `task_scan_start` and `update_task_scan_period`, in
//! integer milliseconds with every division flooring and products formed first.

/// Slots a period is cut into, and the share (of 10) that counts as "mostly".
const PERIOD_SLOTS: u64 = 10;
const PERIOD_THRESHOLD: u64 = 7;
/// Highest scan rate, MB/s.
const MAX_SCAN_RATE_MB_S: u64 = 2560;

/// A task's group as the period formulas see it: tasks, and decayed shared and private
/// memory faults summed over nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupShape {
    pub nr_tasks: u64,
    pub shared: u64,
    pub private: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounds {
    pub scan_min: u64,
    pub scan_max: u64,
    pub scan_start: u64,
}

/// Windows of `scan_size` in the resident set, at least one.
fn windows(rss_pages: u64, scan_size_pages: u64) -> u64 {
    rss_pages.div_ceil(scan_size_pages.max(1)).max(1)
}

pub fn bounds(rss_pages: u64, scan_size_pages: u64, scan_size_mb: u64, min_ms: u64, max_ms: u64, group: Option<GroupShape>) -> Bounds {
    let w = windows(rss_pages, scan_size_pages);
    let floor = 1000 / (MAX_SCAN_RATE_MB_S / scan_size_mb.max(1)).max(1);
    let scan_min = floor.max(min_ms / w);
    let smax = max_ms / w;
    let (scan_max, scan_start) = match group {
        Some(g) => {
            let grow = |base: u64| base * g.nr_tasks * (g.shared + 1) / (g.private + g.shared + 1);
            (scan_min.max(smax).max(grow(smax)), scan_min.max(grow(scan_min)))
        }
        None => (scan_min.max(smax), scan_min),
    };
    Bounds { scan_min, scan_max, scan_start }
}

/// Counts behind one period update: hint faults since the last one, by locality, and the
/// buffered memory faults by private/shared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Locality {
    pub local: u64,
    pub remote: u64,
    pub failed: u64,
}

/// `update_task_scan_period`: the new period, and whether the locality counts reset.
pub fn update(period: u64, b: &Bounds, loc: &Locality, private: u64, shared: u64) -> (u64, bool) {
    if loc.local + shared == 0 || loc.failed > 0 {
        return ((2 * period).min(b.scan_max), false);
    }
    let slot = period.div_ceil(PERIOD_SLOTS);
    let lr = PERIOD_SLOTS * loc.local / (loc.local + loc.remote).max(1);
    let ps = PERIOD_SLOTS * private / (private + shared).max(1);
    let p = period as i64;
    let new = if ps >= PERIOD_THRESHOLD {
        p + ((ps - PERIOD_THRESHOLD).max(1) * slot) as i64
    } else if lr >= PERIOD_THRESHOLD {
        p + ((lr - PERIOD_THRESHOLD).max(1) * slot) as i64
    } else {
        p - ((PERIOD_THRESHOLD - lr.max(ps)) * slot) as i64
    };
    ((new.max(0) as u64).clamp(b.scan_min, b.scan_max), true)
}

/// Retry interval of task placement: `min(1 s, period / 16)`.
pub fn retry_ms(period: u64) -> u64 {
    (period / 16).min(1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MB: u64 = 256; // 4 KiB pages per MiB
    fn b(rss_mb: u64, g: Option<GroupShape>) -> Bounds {
        bounds(rss_mb * MB, 256 * MB, 256, 1000, 60000, g)
    }

    /// The scan-period bounds table of docs/policies/autonuma.md.
    #[test]
    fn scan_period_bounds() {
        let g = |n, s, p| Some(GroupShape { nr_tasks: n, shared: s, private: p });
        assert_eq!(b(100, None), Bounds { scan_min: 1000, scan_max: 60000, scan_start: 1000 });
        assert_eq!(b(1024, None), Bounds { scan_min: 250, scan_max: 15000, scan_start: 250 });
        assert_eq!(b(1024, g(4, 300, 100)), Bounds { scan_min: 250, scan_max: 45037, scan_start: 750 });
        assert_eq!(b(4096, g(8, 900, 100)), Bounds { scan_min: 100, scan_max: 27002, scan_start: 720 });
        assert_eq!(b(32768, None), Bounds { scan_min: 100, scan_max: 468, scan_start: 100 });
        // The rate floor: 1000 ms once the scan size reaches 2560 MB.
        assert_eq!(bounds(1 << 30, 2560 * MB, 2560, 1000, 60000, None).scan_min, 1000);
    }

    /// The per-sequence update table of docs/policies/autonuma.md.
    #[test]
    fn per_sequence_update() {
        let bd = Bounds { scan_min: 250, scan_max: 15000, scan_start: 250 };
        let u = |period, local, remote, private, shared, failed| update(period, &bd, &Locality { local, remote, failed }, private, shared);
        assert_eq!(u(1000, 80, 20, 90, 10, 0), (1200, true));
        assert_eq!(u(1000, 75, 25, 70, 30, 0), (1100, true));
        assert_eq!(u(1000, 75, 25, 40, 60, 0), (1100, true));
        assert_eq!(u(1000, 55, 45, 62, 38, 0), (900, true));
        assert_eq!(u(1000, 30, 70, 50, 50, 0), (800, true));
        assert_eq!(u(1000, 0, 100, 100, 0, 0), (2000, false));
        assert_eq!(u(1000, 90, 10, 50, 50, 1), (2000, false));
        assert_eq!(u(260, 0, 100, 40, 60, 0), (250, true));
        assert_eq!(u(14000, 90, 10, 100, 0, 0), (15000, true));
    }

    #[test]
    fn the_seventy_percent_boundary() {
        let bd = Bounds { scan_min: 100, scan_max: 60000, scan_start: 100 };
        // ps exactly 7: one slot up; just below (69 %) with lr 6: one slot down.
        assert_eq!(update(1000, &bd, &Locality { local: 60, remote: 40, failed: 0 }, 70, 30).0, 1100);
        assert_eq!(update(1000, &bd, &Locality { local: 60, remote: 40, failed: 0 }, 69, 31).0, 900);
    }

    #[test]
    fn retry_interval() {
        assert_eq!(retry_ms(1000), 62);
        assert_eq!(retry_ms(60000), 1000);
    }
}
