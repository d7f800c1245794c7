//! Carrefour's rules at their boundaries and the worked example of docs/policies/carrefour.md
//! ("Worked example"), driven through the policy hooks with a `FakeSystem`.

use super::metrics::{gate, global_metrics, Flags, GateOutcome, IntervalCounters};
use super::pages::{decide_page, PageAction, PageSamples, SampleTable};
use super::*;
use crate::decision::{AccessSample, CacheRefills, Refusal, Tick};
use crate::testing::FakeSystem;
use numalab_core::machine::presets;
use numalab_core::stats::RsdEstimator;
use std::sync::Arc;

pub(super) fn env() -> PolicyEnv {
    PolicyEnv::new(Arc::new(presets::load("server-a-2n").unwrap()))
}

fn policy(config: CarrefourConfig) -> Carrefour {
    Carrefour::new(config, &env()).unwrap()
}

/// The worked example's two-node interval (docs/policies/carrefour.md): Δ = 1 s,
/// D = [[60e6, 20e6], [10e6, 10e6]].
fn spec_counters() -> IntervalCounters {
    let mut c = IntervalCounters::default();
    c.add(&[vec![60_000_000, 20_000_000], vec![10_000_000, 10_000_000]], &[vec![0, 0], vec![0, 0]], None, None, 1_000_000_000);
    c
}

fn metrics_with(f: impl FnOnce(&mut GlobalMetrics)) -> GlobalMetrics {
    let mut m = global_metrics(&spec_counters(), &[0, 1], 100, 100, RsdEstimator::Sample).unwrap();
    f(&mut m);
    m
}

#[test]
fn global_metrics_of_the_spec_vector() {
    let m = global_metrics(&spec_counters(), &[0, 1], 1000, 900, RsdEstimator::Sample).unwrap();
    assert_eq!(m.maptu, 100.0);
    assert_eq!(m.lar, 70.0);
    assert!((m.imb - 56.568_542).abs() < 1e-5, "IMB = 100·sd([70e6, 30e6])/50e6, got {}", m.imb);
    assert_eq!(m.share, vec![70, 30]);
    assert_eq!(m.mrr, Some(100.0), "no writes: every access a read");
    assert_eq!(m.dcmr, None, "no refill counts: unsupported, not 0");
    assert!((m.mu - 10.0).abs() < 1e-12);
    let pop = global_metrics(&spec_counters(), &[0, 1], 1000, 900, RsdEstimator::Population).unwrap();
    assert!((pop.imb - 40.0).abs() < 1e-9, "population sd of [70e6, 30e6] is 20e6");
}

#[test]
fn an_interval_without_traffic_or_time_has_no_metrics() {
    let mut c = IntervalCounters::default();
    c.add(&[vec![0, 0], vec![0, 0]], &[], None, None, 1_000_000_000);
    assert_eq!(global_metrics(&c, &[0, 1], 10, 10, RsdEstimator::Sample), None);
    let mut c = IntervalCounters::default();
    c.add(&[vec![5, 0], vec![0, 5]], &[], None, None, 0);
    assert_eq!(global_metrics(&c, &[0, 1], 10, 10, RsdEstimator::Sample), None);
}

#[test]
fn counters_sum_over_ticks_and_lose_support_once_a_tick_lacks_it() {
    let mut c = IntervalCounters::default();
    let r = Some(CacheRefills { all: 10, modified: 1 });
    c.add(&[vec![1, 2], vec![3, 4]], &[vec![1, 0], vec![0, 1]], r, Some(1.0), 500);
    c.add(&[vec![1, 2], vec![3, 4]], &[vec![1, 0], vec![0, 1]], r, Some(2.0), 1500);
    assert_eq!(c.d, vec![vec![2, 4], vec![6, 8]]);
    assert_eq!(c.refills, Some(CacheRefills { all: 20, modified: 2 }));
    assert_eq!(c.ipc, Some(1.75), "time-weighted");
    c.add(&[vec![0, 0], vec![0, 0]], &[], None, None, 1000);
    assert_eq!(c.refills, None);
    assert_eq!(c.ipc, None);
    assert!(c.writes.is_empty(), "reads and writes no longer told apart");
}

#[test]
fn gate_edges_of_the_spec() {
    let cfg = CarrefourConfig::default();
    // MAPTU 49.9: closed, flags unchanged (not re-evaluated).
    let mut flags = Flags { r: false, i: true, m: false };
    assert_eq!(gate(&mut flags, &metrics_with(|m| m.maptu = 49.9), &cfg, true), GateOutcome::Closed);
    assert_eq!(flags, Flags { r: false, i: true, m: false });
    // MAPTU 50: evaluated.
    let mut flags = Flags::default();
    assert_eq!(gate(&mut flags, &metrics_with(|m| m.maptu = 50.0), &cfg, true), GateOutcome::Evaluated { active: true });
    assert!(flags.i && flags.m, "LAR 70, IMB 56.6");
    assert!(!flags.r, "DCMR unsupported: replication stays off");
    let eval = |m: GlobalMetrics, cfg: &CarrefourConfig| {
        let mut f = Flags::default();
        gate(&mut f, &m, cfg, true);
        f
    };
    assert!(!eval(metrics_with(|m| m.lar = 80.0), &cfg).m);
    assert!(eval(metrics_with(|m| m.lar = 79.9), &cfg).m);
    assert!(!eval(metrics_with(|m| m.imb = 35.0), &cfg).i);
    assert!(eval(metrics_with(|m| m.imb = 35.1), &cfg).i);
    assert!(!eval(metrics_with(|m| m.lar = 100.0), &cfg).i, "all local: nothing to interleave");
    // Replication: MU 25 and DCMR 5 pass, DCMR 5.1 or MU 25.1 fail.
    assert!(eval(metrics_with(|m| (m.mu, m.dcmr) = (25.0, Some(5.0))), &cfg).r);
    assert!(!eval(metrics_with(|m| (m.mu, m.dcmr) = (25.0, Some(5.1))), &cfg).r);
    assert!(!eval(metrics_with(|m| (m.mu, m.dcmr) = (25.1, Some(0.0))), &cfg).r);
    let mrr = CarrefourConfig { read_ratio_metric: ReadRatioMetric::Mrr, ..CarrefourConfig::default() };
    assert!(eval(metrics_with(|m| (m.mu, m.mrr) = (0.0, Some(90.0))), &mrr).r);
    assert!(!eval(metrics_with(|m| (m.mu, m.mrr) = (0.0, Some(89.9))), &mrr).r);
    assert!(!eval(metrics_with(|m| (m.mu, m.mrr) = (0.0, None)), &mrr).r);
    // A driver that cannot replicate forces R off.
    let mut f = Flags::default();
    gate(&mut f, &metrics_with(|m| (m.mu, m.mrr) = (0.0, Some(100.0))), &mrr, false);
    assert!(!f.r);
    // Hard switches pin flags off; all off = inactive.
    let off =
        CarrefourConfig { enable_interleave: false, enable_migration: false, enable_replication: false, ..CarrefourConfig::default() };
    let mut f = Flags::default();
    assert_eq!(gate(&mut f, &metrics_with(|_| {}), &off, true), GateOutcome::Evaluated { active: false });
    assert_eq!(f, Flags { r: false, i: false, m: false });
}

#[test]
fn the_ipc_gate_needs_an_ipc_count() {
    let cfg = CarrefourConfig { ipc_gate: true, ..CarrefourConfig::default() };
    let mut f = Flags { r: false, i: false, m: false };
    assert_eq!(gate(&mut f, &metrics_with(|m| m.ipc = None), &cfg, true), GateOutcome::NoMetrics, "unsupported, not 0");
    assert_eq!(gate(&mut f, &metrics_with(|m| m.ipc = Some(0.91)), &cfg, true), GateOutcome::Closed);
    assert_eq!(f, Flags { r: false, i: false, m: false }, "a closed gate leaves the flags");
    assert_eq!(gate(&mut f, &metrics_with(|m| m.ipc = Some(0.9)), &cfg, true), GateOutcome::Evaluated { active: true });
}

fn page(samples: u32, writes: u32, nodes: &[NodeId]) -> PageSamples {
    PageSamples { samples, writes, nodes: nodes.iter().fold(0, |m, &n| m | 1 << n) }
}

/// Draws replayed in order.
fn draws(v: &[f64]) -> impl FnMut() -> f64 + '_ {
    let mut i = 0;
    move || {
        i += 1;
        v[i - 1]
    }
}

#[test]
fn page_rules_of_the_spec_vector() {
    let share = [70, 30];
    let cands = [0, 1];
    let on = Flags { r: false, i: true, m: true };
    // Two sampling nodes, one store: rule 2. Selected when the draw is below 0.70; the
    // destination draw splits [0, 100) into node 0's 30 and node 1's 70.
    let p = page(3, 1, &[0, 1]);
    assert_eq!(decide_page(&p, 0, on, &share, &cands, 2, &mut draws(&[0.69, 0.30])), PageAction::Interleave { to: 1 });
    assert_eq!(decide_page(&p, 0, on, &share, &cands, 2, &mut draws(&[0.69, 0.2999])), PageAction::Nothing, "node 0 drawn: stays");
    assert_eq!(decide_page(&p, 0, on, &share, &cands, 2, &mut draws(&[0.70])), PageAction::Nothing, "not selected");
    // No stores and R on: rule 1, whatever I says.
    let ro = page(3, 0, &[0, 1]);
    assert_eq!(decide_page(&ro, 0, Flags { r: true, ..on }, &share, &cands, 2, &mut draws(&[])), PageAction::Replicate);
    // One sample from node 1 of a page on node 0: migrates because I is on; with I off and M
    // on it needs two samples.
    let single = page(1, 0, &[1]);
    assert_eq!(decide_page(&single, 0, on, &share, &cands, 2, &mut draws(&[])), PageAction::Migrate { to: 1 });
    let m_only = Flags { r: false, i: false, m: true };
    assert_eq!(decide_page(&single, 0, m_only, &share, &cands, 2, &mut draws(&[])), PageAction::Nothing);
    assert_eq!(decide_page(&page(2, 0, &[1]), 0, m_only, &share, &cands, 2, &mut draws(&[])), PageAction::Migrate { to: 1 });
    assert_eq!(decide_page(&page(9, 9, &[0]), 0, on, &share, &cands, 2, &mut draws(&[])), PageAction::Nothing, "already local");
    // k = 2 but I off: no rule applies (rule 3 needs a single node).
    assert_eq!(decide_page(&p, 0, m_only, &share, &cands, 2, &mut draws(&[])), PageAction::Nothing);
}

#[test]
fn interleave_moves_a_shared_page_off_the_loaded_node_with_probability_0_49() {
    let p = page(3, 1, &[0, 1]);
    let on = Flags { r: false, i: true, m: true };
    let mut rng = stream(1, "test", 0);
    let trials = 100_000;
    let moved = (0..trials)
        .filter(|_| {
            let mut draw = || rng.random::<f64>();
            decide_page(&p, 0, on, &[70, 30], &[0, 1], 2, &mut draw) == PageAction::Interleave { to: 1 }
        })
        .count();
    let rate = moved as f64 / trials as f64;
    // Binomial sd at p = 0.49: 0.0016; 5 sd.
    assert!((rate - 0.49).abs() < 0.008, "moved in {rate} of trials");
}

#[test]
fn the_sample_table_tracks_at_most_max_pages() {
    let mut t = SampleTable::new(2);
    t.record(0, 1, 0, false);
    t.record(0, 2, 1, true);
    t.record(0, 1, 1, false);
    t.record(0, 3, 0, false);
    assert_eq!(t.len(), 2);
    assert_eq!((t.recorded, t.missed), (3, 1));
    let v: Vec<_> = t.iter().map(|(k, p)| (*k, *p)).collect();
    assert_eq!(v, vec![((0, 1), page(2, 0, &[0, 1])), ((0, 2), page(1, 1, &[1]))]);
}

pub(super) fn tick_ms(ms: u64, d: Vec<Vec<u64>>) -> Tick {
    let n = d.len();
    Tick {
        time_ns: 0,
        interval_ns: ms * 1_000_000,
        access_matrix: d,
        write_matrix: vec![vec![0; n]; n],
        cache_refills: None,
        ipc: None,
        spaces: vec![],
    }
}

pub(super) fn sample(space: SpaceId, page: PageIdx, cpu_node: NodeId, write: bool) -> AccessSample {
    AccessSample { space, thread: 0, cpu: 0, cpu_node, page, served_node: 0, page_node: 0, write, time_ns: 0 }
}

/// The spec's busy interval (MAPTU 100, LAR 70, IMB 56.6), scaled to `ms`.
pub(super) fn busy(ms: u64) -> Tick {
    let k = ms * 1000;
    tick_ms(ms, vec![vec![60 * k, 20 * k], vec![10 * k, 10 * k]])
}

#[test]
fn decisions_come_once_per_interval_over_the_samples_of_that_interval() {
    let mut s = FakeSystem::new(2, 2, 4, 64, 1000);
    s.pages.insert((0, 5), 0);
    s.pages.insert((0, 6), 0);
    let mut p = policy(CarrefourConfig::default());
    p.on_sample(&sample(0, 5, 1, false));
    p.on_sample(&sample(0, 6, 0, false));
    let mut out = Vec::new();
    p.on_tick(&busy(500), &s, &mut out);
    assert!(out.is_empty(), "half an interval: nothing yet");
    p.on_tick(&busy(500), &s, &mut out);
    assert_eq!(out, vec![Decision::MigratePage { space: 0, page: 5, to: 1 }], "I is on: one sample suffices");
    assert_eq!(p.tracked_pages(), 0, "a new interval starts with an empty table");
    assert_eq!(p.stats().active_intervals, 1);
}

#[test]
fn an_inactive_interval_discards_its_samples_and_samples_cheaply() {
    let s = {
        let mut s = FakeSystem::new(2, 2, 4, 64, 1000);
        s.pages.insert((0, 5), 0);
        s
    };
    let mut p = policy(CarrefourConfig::default());
    let cheap = p.sample_period_ns().unwrap();
    assert!((cheap - 262_112.0 / env().machine.clock_ghz).abs() < 1e-9);
    p.on_sample(&sample(0, 5, 1, false));
    let mut out = Vec::new();
    // 49.9 accesses per µs: closed.
    p.on_tick(&tick_ms(1000, vec![vec![49_900_000, 0], vec![0, 0]]), &s, &mut out);
    assert!(out.is_empty());
    assert_eq!(p.tracked_pages(), 0);
    assert_eq!(p.stats().closed_intervals, 1);
    assert_eq!(p.rate(), Rate::Cheap);
}

#[test]
fn the_rate_becomes_accurate_after_ten_executed_orders() {
    let mut s = FakeSystem::new(2, 2, 4, 64, 1000);
    let mut p = policy(CarrefourConfig::default());
    for pg in 0..12 {
        s.pages.insert((0, pg), 0);
        p.on_sample(&sample(0, pg, 1, false));
    }
    let mut out = Vec::new();
    p.on_tick(&busy(1000), &s, &mut out);
    assert_eq!(out.len(), 12);
    // The driver carried out 10 and refused 2: ten executed orders.
    let mut outcomes = vec![Outcome::Applied; 10];
    outcomes.extend([Outcome::Refused(Refusal::NodeFull); 2]);
    p.on_outcomes(&EventRef::Tick, &out, &outcomes);
    assert_eq!(p.rate(), Rate::Accurate);
    assert!((p.sample_period_ns().unwrap() - 65_528.0 / env().machine.clock_ghz).abs() < 1e-9);
    // Next round: 9 executed → cheap again.
    out.clear();
    for pg in 0..9 {
        p.on_sample(&sample(0, pg, 1, false));
    }
    p.on_tick(&busy(1000), &s, &mut out);
    p.on_outcomes(&EventRef::Tick, &out, &vec![Outcome::Applied; out.len()]);
    assert_eq!(p.rate(), Rate::Cheap);
    assert_eq!(p.stats().executed_orders, 19);
}

#[test]
fn replication_waits_for_500_orders_the_first_time_then_takes_one() {
    let mut s = FakeSystem::new(2, 2, 4, 1000, 100_000);
    let cfg = CarrefourConfig { read_ratio_metric: ReadRatioMetric::Mrr, ..CarrefourConfig::default() };
    let mut p = policy(cfg);
    let shared = |p: &mut Carrefour, pages: std::ops::Range<u64>| {
        for pg in pages {
            p.on_sample(&sample(0, pg, 0, false));
            p.on_sample(&sample(0, pg, 1, false));
        }
    };
    for pg in 0..600 {
        s.pages.insert((0, pg), 0);
    }
    // 499 read-only shared pages: R is on (MU ~0 %, MRR 100 %) but the list is too short.
    shared(&mut p, 0..499);
    let mut out = Vec::new();
    p.on_tick(&busy(1000), &s, &mut out);
    assert!(out.iter().all(|d| !matches!(d, Decision::Replicate { .. })));
    assert!(p.flags().r);
    assert!(out.is_empty(), "pages left unreplicated get no other action that round");
    // 500: executed, one copy on node 1 each.
    shared(&mut p, 0..500);
    p.on_tick(&busy(1000), &s, &mut out);
    assert_eq!(out.len(), 500);
    assert_eq!(out[0], Decision::Replicate { space: 0, page: 0, to: 1 });
    // From now on one page is enough.
    out.clear();
    shared(&mut p, 599..600);
    p.on_tick(&busy(1000), &s, &mut out);
    assert_eq!(out, vec![Decision::Replicate { space: 0, page: 599, to: 1 }]);
}

#[test]
fn samples_outside_the_address_window_are_ignored() {
    let page_bytes = env().page_bytes;
    let mut p =
        policy(CarrefourConfig { min_vaddr: Some(10 * page_bytes), max_vaddr: Some(20 * page_bytes), ..CarrefourConfig::default() });
    for pg in [9, 10, 20, 21] {
        p.on_sample(&sample(0, pg, 1, false));
    }
    assert_eq!(p.tracked_pages(), 2);
}

#[test]
fn named_variants_fix_their_base_and_refuse_another() {
    let p = FirstTouchCarrefour::new(CarrefourConfig::default(), &env()).unwrap();
    assert_eq!(p.config().base, Some(BaseKind::FirstTouch));
    let r = Round4kCarrefour::new(CarrefourConfig::default(), &env()).unwrap();
    assert_eq!(r.config().base, Some(BaseKind::Round4k));
    let e =
        Round4kCarrefour::new(CarrefourConfig { base: Some(BaseKind::FirstTouch), ..CarrefourConfig::default() }, &env()).err().unwrap();
    assert!(e.to_string().contains("this policy's base is round-4k"), "{e}");
    let plain = policy(CarrefourConfig { base: Some(BaseKind::Round1g), ..CarrefourConfig::default() });
    assert_eq!(plain.config().base, Some(BaseKind::Round1g));
    let bad = Carrefour::<Plain>::new(CarrefourConfig { migration_lar_max: 101.0, ..CarrefourConfig::default() }, &env()).err().unwrap();
    assert!(bad.to_string().contains("migration_lar_max is a percentage"), "{bad}");
}
