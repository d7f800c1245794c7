//! The fixed-rate hinting scanner of Stable-NUMA: how much one scan step covers and how far
//! apart steps are (docs/policies/stable-numa.md, "Scanning").

/// Linux's cap on scan windows per period (`MAX_SCAN_WINDOW`), which sets the step floor.
pub const MAX_SCAN_WINDOW_MB: u64 = 2560;

const MIB: u64 = 1 << 20;

/// Step size and spacing for an address space of `rss_bytes`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cadence {
    /// Scan steps per sequence (`ceil(RSS / chunk)`, at least 1).
    pub windows: u64,
    /// Milliseconds between two steps.
    pub step_ms: u64,
    /// Pages one step may make inaccessible.
    pub step_pages: u64,
}

/// `chunk_mb = 0` scans the whole space in one step every `interval_ms`; otherwise
/// `windows = ceil(rss / chunk)` and steps are `max(floor, interval / windows)` ms apart, with
/// `floor = 1000 / floor(2560 / chunk_mb)` (integer milliseconds throughout).
pub fn cadence(rss_bytes: u64, page_bytes: u64, interval_ms: u64, chunk_mb: u64) -> Cadence {
    let rss_pages = rss_bytes.div_ceil(page_bytes.max(1)).max(1);
    if chunk_mb == 0 {
        return Cadence { windows: 1, step_ms: interval_ms, step_pages: rss_pages };
    }
    let chunk_bytes = chunk_mb * MIB;
    let windows = rss_bytes.div_ceil(chunk_bytes).max(1);
    let floor_ms = 1000 / (MAX_SCAN_WINDOW_MB / chunk_mb).max(1);
    let step_ms = floor_ms.max(interval_ms / windows);
    Cadence { windows, step_ms, step_pages: (chunk_bytes / page_bytes.max(1)).max(1) }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    /// Test vector 9.3 (docs/policies/stable-numa.md, "Test vectors") (cadence part).
    #[test]
    fn vector_9_3_scan_cadence() {
        let c = cadence(GIB, 4096, 1000, 256);
        assert_eq!((c.windows, c.step_ms), (4, 250), "1 GiB: 4 steps of 250 ms, a sequence per second");
        assert_eq!(c.step_pages, 65536);
        let c = cadence(32 * GIB, 4096, 1000, 256);
        assert_eq!((c.windows, c.step_ms), (128, 100), "32 GiB: the 100 ms floor binds, a sequence every 12.8 s");
        assert_eq!(c.windows * c.step_ms, 12_800);
        let c = cadence(GIB, 4096, 1000, 0);
        assert_eq!((c.windows, c.step_ms, c.step_pages), (1, 1000, GIB / 4096), "chunk 0: the whole space every second");
    }

    #[test]
    fn boundaries() {
        // Exactly 2.5 GiB at 256 MB: 10 windows of 100 ms, the floor and the quotient agree.
        assert_eq!(cadence(2560 * MIB, 4096, 1000, 256).step_ms, 100);
        // One byte more: 11 windows, 1000/11 = 90 < 100, so the floor binds.
        assert_eq!(cadence(2560 * MIB + 1, 4096, 1000, 256), Cadence { windows: 11, step_ms: 100, step_pages: 65536 });
        // A tiny space is one window.
        assert_eq!(cadence(4096, 4096, 1000, 256).windows, 1);
        // The largest chunk: floor = 1000 / 1.
        assert_eq!(cadence(GIB, 4096, 1000, 2560).step_ms, 1000);
    }
}
