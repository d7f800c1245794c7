//! Worked examples for `linux-tiering` (docs/policies/linux-tiering.md): events scripted in,
//! exact decisions asserted out.

use super::*;
use crate::testing::FakeSystem;
use numalab_core::machine::presets;
use std::sync::Arc;

const MS: u64 = 1_000_000;

/// KNL flat with node 0 (68 cores, DDR) cut to 4096 pages and node 1 (MCDRAM, no CPUs) to
/// 1024 pages; `min_free_kbytes = 160` gives node 1 min/low/high/promo = 8/10/12/14 pages and
/// node 0 32/40/48/56. Threads 0..4 run on node 0; one space of 64 pages.
/// The worked examples run on a machine whose fast tier has no CPUs, with `top_tier =
/// "fastest"` so that its DDR node is the slow tier (the default, Linux's rule, makes both
/// top tier: `a_fast_tier_page_is_never_scanned`).
fn fastest() -> LinuxTieringConfig {
    LinuxTieringConfig { top_tier: TopTier::Fastest, ..LinuxTieringConfig::default() }
}

fn setup(cfg: LinuxTieringConfig) -> (LinuxTiering, FakeSystem) {
    let mut m = presets::load("knl-7250-flat").unwrap();
    m.nodes[0].mem_bytes = 4096 * 4096;
    m.nodes[1].mem_bytes = 1024 * 4096;
    let env = PolicyEnv::new(Arc::new(m)).with_seed(5);
    let cfg = LinuxTieringConfig { min_free_kbytes: Some(160), ..cfg };
    let p = LinuxTiering::new(cfg, &env).unwrap();
    let mut sys = FakeSystem::new(2, 4, 4, 64, 0);
    sys.mem.capacity = vec![4096, 1024];
    sys.mem.free = vec![4000, 900];
    (p, sys)
}

/// Page `page` of space 0 is on `node`.
fn put(sys: &mut FakeSystem, page: u64, node: NodeId) {
    sys.pages.insert((0, page), node);
}

/// A scan at `at_ms` unmaps `page` (if the policy agrees); returns the policy's answer.
fn scan(p: &mut LinuxTiering, sys: &FakeSystem, page: u64, at_ms: u64) -> bool {
    p.scan_now_ns = at_ms * MS;
    p.should_unmap(0, page, sys.pages[&(0, page)])
}

fn fault_at(p: &mut LinuxTiering, sys: &mut FakeSystem, page: u64, at_ms: u64) -> Vec<Decision> {
    sys.now_ns = at_ms * MS;
    sys.hit(p, 0, page)
}

#[test]
fn watermarks_follow_the_kernel_formulas() {
    // calculate_min_free_kbytes' own table: 16 MB -> 512k, 1 GB -> 4096k, 16 GB -> 16384k,
    // and the 256 MiB ceiling from 4 TiB on.
    assert_eq!(default_min_free_kbytes(16 << 20), 512);
    assert_eq!(default_min_free_kbytes(1 << 30), 4096);
    assert_eq!(default_min_free_kbytes(16 << 30), 16384);
    assert_eq!(default_min_free_kbytes(4 << 40), 262_144);
    assert_eq!(default_min_free_kbytes(64 << 40), 262_144);
    assert_eq!(default_min_free_kbytes(1 << 20), 128, "floor");
    // 160 KiB = 40 pages, node 1 holds 1024 of 5120 pages: min 8, gap max(8/4, 1024 * 10 / 10000) = 2.
    assert_eq!(watermarks(1024, 5120, 160, 4096, 10), Watermarks { min: 8, low: 10, high: 12, promo: 14 });
    // A larger scale factor widens the gap: 1024 * 1000 / 10000 = 102.
    assert_eq!(watermarks(1024, 5120, 160, 4096, 1000), Watermarks { min: 8, low: 110, high: 212, promo: 314 });
    let (p, _) = setup(fastest());
    assert_eq!(p.watermarks_of(1), Watermarks { min: 8, low: 10, high: 12, promo: 14 });
    assert_eq!(p.watermarks_of(0), Watermarks { min: 32, low: 40, high: 48, promo: 56 });
}

#[test]
fn a_fast_tier_page_is_never_scanned() {
    let (mut p, mut sys) = setup(fastest());
    put(&mut sys, 1, 1);
    put(&mut sys, 2, 0);
    assert!(!scan(&mut p, &sys, 1, 5000), "MCDRAM is the top tier");
    assert!(scan(&mut p, &sys, 2, 5000), "DDR is the slow tier");
    assert_eq!(p.mms[0].scan_ns[2], 5000 * MS, "the scan stamps the page");
    assert_eq!(p.mms[0].scan_ns[1], NONE);
    // Linux's rule, the default: DDR holds the CPUs, so both tiers are top tier and nothing
    // is scanned.
    assert_eq!(LinuxTieringConfig::default().top_tier, TopTier::CpuTiers);
    let (mut p, mut sys) = setup(LinuxTieringConfig::default());
    put(&mut sys, 1, 1);
    put(&mut sys, 2, 0);
    assert!(!scan(&mut p, &sys, 1, 5000));
    assert!(!scan(&mut p, &sys, 2, 5000));
    assert!(p.is_top_tier(0) && p.is_top_tier(1));
}

#[test]
fn a_fault_under_the_hot_threshold_promotes_and_one_at_it_does_not() {
    let (mut p, mut sys) = setup(fastest());
    for page in [5, 6] {
        put(&mut sys, page, 0);
        assert!(scan(&mut p, &sys, page, 10_000));
    }
    // Latency 999 ms < 1000 ms: hot, promoted to MCDRAM (the top-tier node nearest the CPU).
    assert_eq!(fault_at(&mut p, &mut sys, 5, 10_999), vec![Decision::MigratePage { space: 0, page: 5, to: 1 }]);
    // Latency 1000 ms: not under the threshold.
    assert_eq!(fault_at(&mut p, &mut sys, 6, 11_000), vec![]);
    assert_eq!(p.counters().promote_cold, 1);
    assert_eq!(p.counters().pgpromote_candidate, 1, "only the hot page was a candidate");
    // The fault re-stamped page 6: a second fault 10 ms later (no scan between) is hot.
    assert_eq!(fault_at(&mut p, &mut sys, 6, 11_010), vec![Decision::MigratePage { space: 0, page: 6, to: 1 }]);
    // The outcome feeds pgpromote_success.
    let d = [Decision::MigratePage { space: 0, page: 5, to: 1 }];
    p.on_outcomes(&EventRef::Tick, &d, &[Outcome::Applied]);
    assert_eq!(p.counters().pgpromote_success, 1);
    // A fault on a top-tier page (never scanned in tiering mode, but armed before a move)
    // does nothing.
    put(&mut sys, 7, 1);
    assert_eq!(fault_at(&mut p, &mut sys, 7, 11_020), vec![]);
}

#[test]
fn a_promotion_needs_room_above_the_high_watermark_and_wakes_kswapd_otherwise() {
    let (mut p, mut sys) = setup(fastest());
    put(&mut sys, 5, 0);
    scan(&mut p, &sys, 5, 10_000);
    // high = 12: the move must leave more than 12 pages free, so 13 free is not enough.
    sys.mem.free[1] = 13;
    assert_eq!(fault_at(&mut p, &mut sys, 5, 10_100), vec![]);
    assert_eq!(p.counters().promote_fail_wmark, 1);
    assert!(p.kswapd_wake[1]);
    // 14 free is.
    scan(&mut p, &sys, 5, 10_200);
    sys.mem.free[1] = 14;
    assert_eq!(fault_at(&mut p, &mut sys, 5, 10_300), vec![Decision::MigratePage { space: 0, page: 5, to: 1 }]);
}

#[test]
fn plenty_of_room_promotes_whatever_the_latency_and_resets_the_threshold() {
    let (mut p, _) = setup(fastest());
    p.pgdat[1].threshold_ms = 500;
    // enough = max(1 GiB, node / 16) = 262144 pages above promo (14).
    assert_eq!(p.should_promote(1, 262_158, 90_000, 5_000), Verdict::Cold);
    p.pgdat[1].threshold_ms = 500;
    assert_eq!(p.should_promote(1, 262_159, 90_000, 5_000), Verdict::FreeSpaceEnough);
    assert_eq!(p.promo_state(1).threshold_ms, 0);
    assert_eq!(p.counters().pgpromote_candidate_nrl, 1);
}

#[test]
fn the_rate_limit_refuses_the_candidate_that_reaches_it() {
    // 1 MB/s = 256 pages of 4 KiB per one-second window.
    let (mut p, _) = setup(LinuxTieringConfig { promote_rate_limit_mbps: 1, ..fastest() });
    let free = 500;
    // The first candidate opens the window (its count is the window's base): 256 pass.
    for k in 0..256 {
        assert_eq!(p.should_promote(1, free, 5_000, 0), Verdict::Hot, "candidate {k}");
    }
    assert_eq!(p.should_promote(1, free, 5_999, 0), Verdict::RateLimited);
    assert_eq!(p.promo_state(1).candidates, 257, "a limited candidate is still a candidate");
    // Exactly one second later the window is not over yet (Linux: now - start > 1000).
    assert_eq!(p.should_promote(1, free, 6_000, 0), Verdict::RateLimited);
    // Past it, a new window opens.
    assert_eq!(p.should_promote(1, free, 6_001, 0), Verdict::Hot);
    assert_eq!(p.counters().promote_rate_limited, 2);
    assert_eq!(p.counters().pgpromote_candidate, 259);
    // The window is per target node.
    assert_eq!(p.should_promote(0, 4000, 6_001, 0), Verdict::Hot);
}

#[test]
fn the_threshold_adjustment_moves_both_ways() {
    // Rate limit 1 MB/s = 256 pages/s, period 10 s: the reference is 2560 candidates a period,
    // with a dead band from 2304 to 2816; one step is 2 x 1000 / 16 = 125 ms.
    let cfg = LinuxTieringConfig { promote_rate_limit_mbps: 1, scan_period_max_ms: 10_000, ..fastest() };
    let (mut p, _) = setup(cfg);
    // Too many candidates in the first period: the threshold drops to 875 ms.
    p.pgdat[1].candidates = 2817;
    p.should_promote(1, 500, 10_001, 5_000);
    assert_eq!(p.promo_state(1).threshold_ms, 875);
    assert_eq!(p.promo_state(1).th_nr_cand, 2817);
    // A latency of 900 ms is now cold.
    assert_eq!(p.should_promote(1, 500, 10_002, 900), Verdict::Cold);
    // Not before the next period ends (now - start must exceed 10 s).
    p.pgdat[1].candidates += 100;
    p.should_promote(1, 500, 20_001, 5_000);
    assert_eq!(p.promo_state(1).threshold_ms, 875);
    // Too few (100 < 2304): back up one step.
    p.should_promote(1, 500, 20_002, 5_000);
    assert_eq!(p.promo_state(1).threshold_ms, 1000);
    assert_eq!((p.counters().threshold_down, p.counters().threshold_up), (1, 1));
    // Inside the dead band: unchanged.
    p.pgdat[1].candidates += 2560;
    p.should_promote(1, 500, 30_003, 5_000);
    assert_eq!(p.promo_state(1).threshold_ms, 1000);
    // The bounds: never above 2 x 1000, never under one step.
    for k in 0..20 {
        p.should_promote(1, 500, 40_004 + k * 10_001, 5_000);
    }
    assert_eq!(p.promo_state(1).threshold_ms, 2000);
    for k in 0..20 {
        p.pgdat[1].candidates += 10_000;
        p.should_promote(1, 500, 300_000 + k * 10_001, 5_000);
    }
    assert_eq!(p.promo_state(1).threshold_ms, 125);
}

fn tick(p: &mut LinuxTiering, sys: &FakeSystem) -> Vec<Decision> {
    let mut out = Vec::new();
    let t = TaskTick { space: 0, thread: 0, cpu: 0, runtime_ns: 0, time_ns: sys.now_ns };
    p.on_task_tick(&t, sys, &mut out);
    out
}

#[test]
fn demotion_starts_at_the_low_watermark_and_takes_the_coldest_pages() {
    let (mut p, mut sys) = setup(fastest());
    // Eight MCDRAM pages with known last accesses (page 3 the coldest, then 7, 0, 5, 1, ...).
    let last = [30, 50, 90, 10, 80, 40, 70, 20];
    p.mm(0).grow(64);
    for (page, t) in last.iter().enumerate() {
        put(&mut sys, page as u64, 1);
        p.mms[0].last_ns[page] = t * MS;
    }
    put(&mut sys, 20, 0);
    // low = 10: at 11 free pages kswapd sleeps.
    sys.mem.free[1] = 11;
    assert_eq!(tick(&mut p, &sys), vec![]);
    // At 10 it runs and demotes to DDR until more than promo = 14 pages are free: 5 pages.
    sys.mem.free[1] = 10;
    let demote = |page| Decision::MigratePage { space: 0, page, to: 0 };
    assert_eq!(tick(&mut p, &sys), vec![demote(3), demote(7), demote(0), demote(5), demote(1)]);
    assert_eq!(p.counters().kswapd_runs, 1);
    p.on_outcomes(&EventRef::Tick, &[demote(3), demote(7)], &[Outcome::Applied, Outcome::Refused(crate::Refusal::NodeFull)]);
    assert_eq!((p.counters().pgdemote_kswapd, p.counters().demote_fail), (1, 1));
    // A promotion that failed for want of room wakes kswapd above the low watermark: at 12
    // free it demotes 3 pages (to 15 free).
    let (mut p, mut sys) = setup(fastest());
    p.mm(0).grow(64);
    for (page, t) in last.iter().enumerate() {
        put(&mut sys, page as u64, 1);
        p.mms[0].last_ns[page] = t * MS;
    }
    put(&mut sys, 20, 0);
    scan(&mut p, &sys, 20, 1_000);
    sys.mem.free[1] = 12;
    assert_eq!(fault_at(&mut p, &mut sys, 20, 1_100), vec![]);
    assert_eq!(tick(&mut p, &sys), vec![demote(3), demote(7), demote(0)]);
    assert!(!p.kswapd_wake[1]);
    // With demotion disabled nothing moves.
    let (mut p, mut sys) = setup(LinuxTieringConfig { demotion_enabled: false, ..fastest() });
    put(&mut sys, 0, 1);
    sys.mem.free[1] = 5;
    assert_eq!(tick(&mut p, &sys), vec![]);
}

/// The demotion example above with DAMON's view added (docs/policies/linux-tiering.md,
/// "Region heat"): a region over pages 2-3 found accessed 5 times of 20 at 100 ms makes them
/// the youngest, so kswapd takes 7, 0, 5, 1, 6 where it took 3, 7, 0, 5, 1; a region found
/// accessed 0 times (pages 6-7) and one that is empty change nothing.
#[test]
fn region_heat_makes_its_pages_young_for_kswapd() {
    let (mut p, mut sys) = setup(fastest());
    let last = [30, 50, 90, 10, 80, 40, 70, 20];
    p.mm(0).grow(64);
    for (page, t) in last.iter().enumerate() {
        put(&mut sys, page as u64, 1);
        p.mms[0].last_ns[page] = t * MS;
    }
    put(&mut sys, 20, 0);
    let heat = |first_page, pages, nr_accesses| RegionHeat {
        space: 0,
        first_page,
        pages,
        nr_accesses,
        max_accesses: 20,
        age: 3,
        time_ns: 100 * MS,
    };
    p.on_region_heat(&heat(2, 2, 5));
    p.on_region_heat(&heat(6, 2, 0));
    p.on_region_heat(&heat(9, 0, 20));
    assert_eq!(p.mms[0].last_ns[..8], [30, 50, 100, 100, 80, 40, 70, 20].map(|t| t * MS));
    // An older report never makes a page look older than it is.
    p.on_region_heat(&RegionHeat { time_ns: 60 * MS, ..heat(1, 3, 20) });
    assert_eq!(p.mms[0].last_ns[..4], [30, 60, 100, 100].map(|t| t * MS));
    sys.mem.free[1] = 10;
    let demote = |page| Decision::MigratePage { space: 0, page, to: 0 };
    assert_eq!(tick(&mut p, &sys), vec![demote(7), demote(0), demote(5), demote(1), demote(6)]);
    // Heat beyond the pages seen so far grows the space's books.
    p.on_region_heat(&heat(70, 2, 1));
    assert_eq!(p.mms[0].last_ns.len(), 72);
}

#[test]
fn sampled_accesses_and_placements_age_pages() {
    let (mut p, mut sys) = setup(fastest());
    sys.now_ns = 7 * MS;
    tick(&mut p, &sys);
    let req = PlaceRequest { space: 0, thread: 0, cpu: 0, cpu_node: 0, page: 9 };
    assert_eq!(p.place(&req, &sys.mem), Ok(0), "the local node first");
    assert_eq!(p.mms[0].last_ns[9], 7 * MS);
    let s = AccessSample { space: 0, thread: 0, cpu: 0, cpu_node: 0, page: 9, served_node: 0, page_node: 0, write: false, time_ns: 9 * MS };
    p.on_sample(&s);
    assert_eq!(p.mms[0].last_ns[9], 9 * MS);
    assert_eq!(p.sample_period_ns(), Some(500_000.0));
    // The local node at its min watermark (32): the allocator falls back to MCDRAM, and
    // reaching MCDRAM's low watermark wakes its kswapd.
    sys.mem.free = vec![32, 11];
    assert_eq!(p.place(&req, &sys.mem), Ok(1));
    assert!(p.kswapd_wake[1]);
    // Both at min: any free page.
    sys.mem.free = vec![3, 8];
    assert_eq!(p.place(&req, &sys.mem), Ok(0));
    sys.mem.free = vec![0, 0];
    assert!(p.place(&req, &sys.mem).is_err());
}

#[test]
fn scan_steps_wait_for_the_delay_and_run_once_per_scan_start() {
    let (mut p, mut sys) = setup(LinuxTieringConfig { scan_delay_ms: 10, scan_period_min_ms: 10, ..fastest() });
    let mut steps = Vec::new();
    for ms in 0..300u64 {
        sys.now_ns = ms * MS;
        let mut out = Vec::new();
        let t = TaskTick { space: 0, thread: 0, cpu: 0, runtime_ns: ms * MS, time_ns: sys.now_ns };
        p.on_task_tick(&t, &sys, &mut out);
        if let Some(Decision::ScanStep { pages, .. }) = out.first() {
            assert_eq!(*pages, 65536);
            steps.push(ms);
        }
    }
    assert!(!steps.is_empty() && steps[0] >= 10, "{steps:?}");
    // scan_start for a 64-page space: max(1000 / (2560 / 256), 10 / 1) = 100 ms.
    assert!(steps.windows(2).all(|w| w[1] - w[0] >= 100), "{steps:?}");
}

#[test]
fn bad_settings_are_refused_by_name() {
    let env = PolicyEnv::new(Arc::new(presets::load("knl-7250-flat").unwrap()));
    let e = LinuxTiering::new(LinuxTieringConfig { scan_size_mb: 0, ..fastest() }, &env).err().unwrap();
    assert!(e.to_string().starts_with("policy 'linux-tiering': scan_size_mb = 0 must be between 1"), "{e}");
    let e = LinuxTiering::new(LinuxTieringConfig { watermark_scale_factor: 0, ..fastest() }, &env).err().unwrap();
    assert_eq!(e.to_string(), "policy 'linux-tiering': watermark_scale_factor = 0 must be between 1 and 3000");
    let e = LinuxTiering::new(LinuxTieringConfig { hot_threshold_ms: 0, ..fastest() }, &env).err().unwrap();
    assert!(e.to_string().contains("hot_threshold_ms = 0"), "{e}");
    let bad: toml::Table = toml::from_str("top_tier = \"slowest\"").unwrap();
    assert!(crate::build("linux-tiering", bad, &env).is_err());
}
