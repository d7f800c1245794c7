//! DUnX's rules case by case, the scanner vectors and the limiting cases of
//! docs/policies/dunx.md, driven through the policy's fault and scan entry points. The
//! property tests run scripted references through `Mini`, a small model of the simulator's
//! mappings (docs/simulator.md, "Page mappings and scanner daemons").

use super::*;
use crate::decision::ScannedPage;
use crate::statics::testing::FixedMemory;
use numalab_core::machine::presets;
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::sync::Arc;

const MS: u64 = 1_000_000;

fn env() -> PolicyEnv {
    PolicyEnv::new(Arc::new(presets::load("gp1000").unwrap()))
}

fn dunx(config: DunxConfig) -> Dunx {
    Dunx::new(config, &env()).unwrap()
}

fn fault(node: NodeId, home: NodeId, write: bool, now_ns: u64) -> HintFault {
    HintFault {
        space: 0,
        thread: u32::from(node),
        cpu: u32::from(node),
        cpu_node: node,
        page: 7,
        page_node: home,
        write,
        pte_writable: false,
        shared_mapping: false,
        time_ns: now_ns,
    }
}

fn run(p: &mut Dunx, f: HintFault, copies: u64, mem: &FixedMemory) -> (FaultKind, Vec<Decision>) {
    let mut out = Vec::new();
    let kind = p.decide(&f, copies, mem, &mut out);
    (kind, out)
}

fn mem() -> FixedMemory {
    FixedMemory::uniform(8, 100)
}

fn scan_of(node: NodeId, local_ref: bool, remote_ref: bool, dirty: bool) -> PageScan {
    PageScan { node, pass: 1, time_ns: 0, pages: vec![ScannedPage { space: 0, page: 7, local_ref, remote_ref, dirty }] }
}

// ---- configuration ----

#[test]
fn defaults_are_the_spec_defaults() {
    let c = DunxConfig::default();
    assert_eq!((c.freeze_window_ms, c.recent_mod, c.scan_delay_ms, c.sample_passes, c.defrost_trigger), (1000.0, 31.0, 1000, 2, 1));
    assert_eq!(c.trigger_method, TriggerMethod::ByModHistory);
    assert_eq!(dunx(c).page_scanner_period_ns(), Some(1000 * MS));
}

#[test]
fn out_of_range_keys_are_refused_with_the_key() {
    type Case = (fn(&mut DunxConfig), &'static str);
    let cases: [Case; 7] = [
        (|c| c.freeze_window_ms = -1.0, "freeze_window_ms"),
        (|c| c.freeze_window_ms = f64::NAN, "freeze_window_ms"),
        (|c| c.recent_mod = 256.0, "recent_mod"),
        (|c| c.recent_mod = 2.5, "recent_mod"),
        (|c| c.recent_mod = -1.0, "recent_mod"),
        (|c| c.scan_delay_ms = 0, "scan_delay_ms"),
        (|c| c.sample_passes = 0, "sample_passes"),
    ];
    for (set, key) in cases {
        let mut c = DunxConfig::default();
        set(&mut c);
        match Dunx::new(c, &env()) {
            Err(PolicyError::Config { policy, message }) => {
                assert_eq!(policy, "dunx");
                assert!(message.starts_with(key), "{message}");
            }
            other => panic!("{key}: expected a config error, got {:?}", other.map(|_| ())),
        }
    }
    let ok = DunxConfig { freeze_window_ms: f64::INFINITY, recent_mod: f64::INFINITY, defrost_trigger: -3, ..DunxConfig::default() };
    assert!(Dunx::new(ok, &env()).is_ok(), "inf windows and thresholds, a negative trigger are allowed");
}

#[test]
fn the_keys_parse_from_toml_and_unknown_keys_are_refused() {
    let t: toml::Table = toml::from_str("freeze_window_ms = inf\nrecent_mod = 0\ntrigger_method = \"invalidate-remote\"").unwrap();
    let p = crate::registry::build("dunx", t, &env()).unwrap();
    let cfg = p.config_toml();
    assert_eq!(cfg["freeze_window_ms"].as_float(), Some(f64::INFINITY));
    assert_eq!(cfg["trigger_method"].as_str(), Some("invalidate-remote"));
    let t: toml::Table = toml::from_str("freeze_window = 3").unwrap();
    let err = crate::registry::build("dunx", t, &env()).err().unwrap().to_string();
    assert!(err.contains("unknown field `freeze_window`"), "{err}");
}

// ---- §3 first touch ----

#[test]
fn first_touch_places_locally_and_a_full_node_spills_to_the_lowest_free_node() {
    let mut p = dunx(DunxConfig::default());
    let mut m = mem();
    let req = PlaceRequest { space: 0, thread: 5, cpu: 5, cpu_node: 5, page: 7 };
    assert_eq!(p.place(&req, &m).unwrap(), 5);
    m.fill(5);
    m.fill(0);
    assert_eq!(p.place(&req, &m).unwrap(), 1, "lowest-numbered node with a free frame");
    for n in 0..8 {
        m.fill(n);
    }
    assert_eq!(p.place(&req, &m), Err(OutOfMemory { wanted: 5, pages: 1 }));
}

// ---- §4 faults, case by case ----

#[test]
fn a_local_single_copy_only_maps() {
    let mut p = dunx(DunxConfig::default());
    for write in [false, true] {
        assert_eq!(run(&mut p, fault(2, 2, write, 0), 1 << 2, &mem()), (FaultKind::MapOnly, vec![]));
    }
    assert!(p.page(0, 7).is_none(), "no state touched");
}

#[test]
fn a_local_replica_read_maps_and_a_write_is_a_coherency_fault() {
    let mut p = dunx(DunxConfig::default());
    let copies = (1 << 0) | (1 << 3);
    assert_eq!(run(&mut p, fault(3, 0, false, 5 * MS), copies, &mem()), (FaultKind::MapOnly, vec![]));
    let (kind, out) = run(&mut p, fault(3, 0, true, 5 * MS), copies, &mem());
    assert_eq!(kind, FaultKind::Coherency);
    assert_eq!(
        out,
        vec![Decision::CollapseReplicas { space: 0, page: 7, keep: 3 }, Decision::DropMappings { space: 0, page: 7, keep: Some(3) }]
    );
    assert_eq!(p.page(0, 7).unwrap().last_inval_ns, Some(5 * MS), "an invalidation, stamped with the fault's time");
}

#[test]
fn a_remote_single_copy_migrates_on_a_write_and_replicates_on_a_read() {
    let mut p = dunx(DunxConfig::default());
    assert_eq!(
        run(&mut p, fault(1, 0, false, 0), 1, &mem()),
        (FaultKind::Replication, vec![Decision::Replicate { space: 0, page: 7, to: 1 }])
    );
    assert_eq!(p.page(0, 7).unwrap().last_inval_ns, None, "replication is not an invalidation");
    let mut p = dunx(DunxConfig::default());
    assert_eq!(
        run(&mut p, fault(1, 0, true, 0), 1, &mem()),
        (FaultKind::Migration, vec![Decision::MigratePage { space: 0, page: 7, to: 1 }])
    );
    let st = p.page(0, 7).unwrap();
    assert_eq!((st.last_inval_ns, st.invalidations, st.migrations, st.left_node), (Some(0), 1, 1, Some(0)));
}

#[test]
fn a_recently_modified_page_migrates_on_a_read() {
    let mut p = dunx(DunxConfig::default());
    p.set_page(0, 7, PageState { mod_hist: 32, ..PageState::default() });
    assert_eq!(run(&mut p, fault(1, 0, false, 0), 1, &mem()).0, FaultKind::Migration, "32 > 31");
    let mut p = dunx(DunxConfig::default());
    p.set_page(0, 7, PageState { mod_hist: 31, ..PageState::default() });
    assert_eq!(run(&mut p, fault(1, 0, false, 0), 1, &mem()).0, FaultKind::Replication, "31 does not exceed 31");
}

#[test]
fn the_freeze_window_boundary_is_strict_and_frozen_pages_map_remotely() {
    let cfg = DunxConfig { freeze_window_ms: 10.0, ..DunxConfig::default() };
    let mut p = dunx(cfg.clone());
    p.set_page(0, 7, PageState { last_inval_ns: Some(100 * MS), ..PageState::default() });
    // 9.999999 ms after the invalidation: frozen, mapped remotely, no decision.
    assert_eq!(run(&mut p, fault(1, 0, true, 110 * MS - 1), 1, &mem()), (FaultKind::MapOnly, vec![]));
    assert!(p.page(0, 7).unwrap().frozen);
    assert_eq!(p.stats().freezes, 1);
    // Frozen is sticky: long after the window the page still maps remotely.
    assert_eq!(run(&mut p, fault(2, 0, true, 900 * MS), 1, &mem()), (FaultKind::MapOnly, vec![]));
    assert_eq!(p.stats().freezes, 1, "one freeze, counted once");
    // Exactly the window after: not recent any more.
    let mut p = dunx(cfg);
    p.set_page(0, 7, PageState { last_inval_ns: Some(100 * MS), ..PageState::default() });
    assert_eq!(run(&mut p, fault(1, 0, true, 110 * MS), 1, &mem()).0, FaultKind::Migration);
}

#[test]
fn a_replicated_page_without_a_local_copy_replicates_on_a_read_and_moves_on_a_write() {
    let mut p = dunx(DunxConfig::default());
    let copies = (1 << 0) | (1 << 3);
    // No freeze check on replicated pages, even with a recent invalidation.
    p.set_page(0, 7, PageState { last_inval_ns: Some(0), local_cnt: 3, remote_cnt: 2, passes: 1, ..PageState::default() });
    assert_eq!(
        run(&mut p, fault(5, 0, false, 1), copies, &mem()),
        (FaultKind::Replication, vec![Decision::Replicate { space: 0, page: 7, to: 5 }])
    );
    let (kind, out) = run(&mut p, fault(5, 0, true, 2), copies, &mem());
    assert_eq!(kind, FaultKind::CoherencyWithCopy);
    assert_eq!(out, vec![Decision::CollapseReplicas { space: 0, page: 7, keep: 0 }, Decision::MigratePage { space: 0, page: 7, to: 5 }]);
    let st = p.page(0, 7).unwrap();
    assert_eq!((st.last_inval_ns, st.local_cnt, st.remote_cnt, st.passes), (Some(2), 0, 0, 0), "counters reset as for a migration");
}

#[test]
fn no_free_frame_maps_remotely_without_freezing() {
    let mut p = dunx(DunxConfig::default());
    let mut m = mem();
    m.fill(1);
    // §4.1: remote mapping, not frozen.
    assert_eq!(run(&mut p, fault(1, 0, true, 0), 1, &m), (FaultKind::MapOnly, vec![]));
    assert!(!p.page(0, 7).unwrap().frozen);
    // §4.2 read: map the primary, no replica.
    let copies = (1 << 0) | (1 << 3);
    assert_eq!(run(&mut p, fault(1, 0, false, 0), copies, &m), (FaultKind::MapOnly, vec![]));
    // §4.2 write: coherency fault that keeps the primary.
    let (kind, out) = run(&mut p, fault(1, 0, true, 4), copies, &m);
    assert_eq!(kind, FaultKind::Coherency);
    assert_eq!(
        out,
        vec![Decision::CollapseReplicas { space: 0, page: 7, keep: 0 }, Decision::DropMappings { space: 0, page: 7, keep: Some(1) }]
    );
    assert_eq!(p.page(0, 7).unwrap().last_inval_ns, Some(4));
    assert_eq!(p.stats().no_free_frame, 3);
}

#[test]
fn migrating_back_to_the_node_left_is_a_ping_pong() {
    let cfg = DunxConfig { freeze_window_ms: 0.0, ..DunxConfig::default() };
    let mut p = dunx(cfg);
    run(&mut p, fault(1, 0, true, 0), 1, &mem());
    run(&mut p, fault(2, 1, true, 1), 1 << 1, &mem());
    assert_eq!(p.stats().pingpong_migrations, 0, "0 -> 1 -> 2");
    run(&mut p, fault(1, 2, true, 2), 1 << 2, &mem());
    assert_eq!(p.stats().pingpong_migrations, 1, "2 -> 1, the node it left last time");
    assert_eq!(p.page(0, 7).unwrap().migrations, 3);
}

// ---- §5 scanner ----

#[test]
fn the_modification_history_vector() {
    let mut p = dunx(DunxConfig { sample_passes: 100, ..DunxConfig::default() });
    let mut out = Vec::new();
    let mut hist = Vec::new();
    for dirty in [true, false, false, true, false, false] {
        p.scan(&scan_of(0, false, false, dirty), &mut out);
        hist.push(p.page(0, 7).unwrap().mod_hist);
    }
    assert_eq!(hist, vec![128, 64, 32, 144, 72, 36]);
    assert_eq!(run(&mut p.clone_for_test(), fault(1, 0, false, 0), 1, &mem()).0, FaultKind::Migration, "36 > 31");
    p.scan(&scan_of(0, false, false, false), &mut out);
    assert_eq!(p.page(0, 7).unwrap().mod_hist, 18);
    assert_eq!(run(&mut p, fault(1, 0, false, 0), 1, &mem()).0, FaultKind::Replication, "18 replicates");
    assert!(out.is_empty(), "no decision point reached");
}

#[test]
fn defrost_fires_exactly_at_the_trigger_and_counts_halve_at_each_decision_point() {
    for (trigger, defrosts) in [(1, true), (2, false), (0, true), (-1, true)] {
        let mut p = dunx(DunxConfig { defrost_trigger: trigger, trigger_method: TriggerMethod::InvalidateAll, ..DunxConfig::default() });
        p.set_page(0, 7, PageState { frozen: true, ..PageState::default() });
        let mut out = Vec::new();
        // Two passes: local 0 + 0, remote 1 + 0: remote − local = 1 at the decision point.
        p.scan(&scan_of(0, false, true, false), &mut out);
        assert!(out.is_empty(), "no decision before sample_passes passes");
        p.scan(&scan_of(0, false, false, false), &mut out);
        assert_eq!(!out.is_empty(), defrosts, "trigger {trigger}");
        assert_eq!(p.page(0, 7).unwrap().frozen, !defrosts);
    }
    let mut p = dunx(DunxConfig { sample_passes: 1, defrost_trigger: i64::MAX, ..DunxConfig::default() });
    let mut out = Vec::new();
    for (l, r) in [(true, true), (true, true), (false, true)] {
        p.scan(&scan_of(0, l, r, false), &mut out);
    }
    // Every pass is a decision point: each count is 0 or 1 before it halves to 0.
    let st = p.page(0, 7).unwrap();
    assert_eq!((st.local_cnt, st.remote_cnt, st.passes), (0, 0, 0));
    let mut p = dunx(DunxConfig { sample_passes: 2, ..DunxConfig::default() });
    for (l, r) in [(true, true), (true, false), (true, true), (false, true)] {
        p.scan(&scan_of(0, l, r, false), &mut out);
    }
    // First point: local 2, remote 1 -> 1, 0; second: local 1+1 = 2, remote 0+2 = 2 -> 1, 1.
    let st = p.page(0, 7).unwrap();
    assert_eq!((st.local_cnt, st.remote_cnt), (1, 1));
}

#[test]
fn trigger_methods_drop_the_right_mappings_and_leave_last_inval() {
    let cases = [
        (TriggerMethod::InvalidateAll, 0, None),
        (TriggerMethod::InvalidateRemote, 0, Some(4)),
        (TriggerMethod::ByModHistory, 0b1000_0000, None),
        (TriggerMethod::ByModHistory, 0b0001_0000, Some(4)),
    ];
    for (method, hist_before, keep) in cases {
        let mut p = dunx(DunxConfig { sample_passes: 1, trigger_method: method, ..DunxConfig::default() });
        p.set_page(0, 7, PageState { frozen: true, last_inval_ns: Some(33), mod_hist: hist_before << 1, ..PageState::default() });
        let mut out = Vec::new();
        // A clean pass shifts the history right by one: `hist_before` is what the rule sees.
        p.scan(&scan_of(4, false, true, false), &mut out);
        assert_eq!(out, vec![Decision::DropMappings { space: 0, page: 7, keep }], "{method:?}, history {hist_before}");
        assert_eq!(p.page(0, 7).unwrap().last_inval_ns, Some(33), "a trigger is not an invalidation");
    }
}

impl Dunx {
    fn clone_for_test(&self) -> Dunx {
        Dunx { config: self.config.clone(), allowed: self.allowed.clone(), pages: self.pages.clone(), stats: self.stats.clone() }
    }
}

// ---- §7 limiting cases, as properties over scripted reference streams ----

/// The simulator's mapping rules in small (docs/simulator.md, "Page mappings and scanner
/// daemons"): per page a home, replicas, and per node a mapping (writable or not) with
/// referenced and modified bits.
struct Mini {
    n: usize,
    mem: FixedMemory,
    home: Vec<Option<NodeId>>,
    replicas: Vec<u64>,
    /// Per page and node: `None`, or `Some(writable)`.
    map: Vec<Vec<Option<bool>>>,
    refd: Vec<Vec<bool>>,
    modified: Vec<Vec<bool>>,
    now_ns: u64,
    /// Per page: faults whose decisions migrated or collapsed it (one invalidation each).
    invalidations: Vec<u64>,
    replicate_orders: u64,
    /// Per fault: (kind, write, remote single copy with a free frame, not frozen before).
    faults: Vec<(FaultKind, bool, bool)>,
}

impl Mini {
    fn new(n: usize, pages: usize, frames: u64) -> Mini {
        Mini {
            n,
            mem: FixedMemory::uniform(n, frames),
            home: vec![None; pages],
            replicas: vec![0; pages],
            map: vec![vec![None; n]; pages],
            refd: vec![vec![false; n]; pages],
            modified: vec![vec![false; n]; pages],
            now_ns: 0,
            invalidations: vec![0; pages],
            replicate_orders: 0,
            faults: Vec::new(),
        }
    }

    fn copies(&self, g: usize) -> u64 {
        self.home[g].map_or(0, |h| self.replicas[g] | (1 << h))
    }

    fn drop_maps(&mut self, g: usize, keep: Option<usize>) {
        for j in 0..self.n {
            if Some(j) != keep {
                self.map[g][j] = None;
                self.refd[g][j] = false;
                self.modified[g][j] = false;
            }
        }
    }

    fn collapse(&mut self, g: usize, keep: NodeId) {
        let Some(home) = self.home[g] else { return };
        if self.replicas[g] == 0 {
            return;
        }
        let all = self.copies(g);
        let kept = if all & (1 << keep) != 0 { keep } else { home };
        for n in 0..self.n {
            if all & (1 << n) != 0 && n as NodeId != kept {
                self.mem.free[n] += 1;
            }
        }
        for j in 0..self.n {
            let target = if all & (1 << j) != 0 { j as NodeId } else { home };
            if target != kept {
                self.map[g][j] = None;
            }
        }
        self.replicas[g] = 0;
        self.home[g] = Some(kept);
    }

    fn apply(&mut self, out: &[Decision]) {
        if let Some(Decision::MigratePage { page, .. } | Decision::CollapseReplicas { page, .. }) =
            out.iter().find(|d| matches!(d, Decision::MigratePage { .. } | Decision::CollapseReplicas { .. }))
        {
            self.invalidations[*page as usize] += 1;
        }
        for d in out {
            match *d {
                Decision::MigratePage { page, to, .. } => {
                    let g = page as usize;
                    let from = self.home[g].unwrap();
                    assert_eq!(self.replicas[g], 0, "only single copies migrate");
                    assert!(self.mem.free[to as usize] > 0, "the policy checked for a free frame");
                    self.mem.free[from as usize] += 1;
                    self.mem.free[to as usize] -= 1;
                    self.home[g] = Some(to);
                    self.drop_maps(g, None);
                }
                Decision::Replicate { page, to, .. } => {
                    let g = page as usize;
                    assert!(self.mem.free[to as usize] > 0 && self.copies(g) & (1 << to) == 0);
                    self.mem.free[to as usize] -= 1;
                    self.replicas[g] |= 1 << to;
                    self.map[g].iter_mut().flatten().for_each(|w| *w = false);
                    self.replicate_orders += 1;
                }
                Decision::CollapseReplicas { page, keep, .. } => self.collapse(page as usize, keep),
                Decision::DropMappings { page, keep, .. } => self.drop_maps(page as usize, keep.map(|k| k as usize)),
                ref other => panic!("dunx made an unexpected decision {other:?}"),
            }
        }
    }

    fn access(&mut self, p: &mut Dunx, node: usize, g: usize, write: bool) {
        if self.home[g].is_none() {
            let req = PlaceRequest { space: 0, thread: node as u32, cpu: node as u32, cpu_node: node as NodeId, page: g as u64 };
            let Ok(at) = p.place(&req, &self.mem) else { return };
            self.mem.free[at as usize] -= 1;
            self.home[g] = Some(at);
            self.map[g][node] = Some(true);
        }
        let ok = matches!(self.map[g][node], Some(w) if w || !write);
        if !ok {
            let home = self.home[g].unwrap();
            let copies = self.copies(g);
            let f = HintFault {
                space: 0,
                thread: node as u32,
                cpu: node as u32,
                cpu_node: node as NodeId,
                page: g as u64,
                page_node: home,
                write,
                pte_writable: false,
                shared_mapping: false,
                time_ns: self.now_ns,
            };
            let movable = copies.count_ones() == 1 && copies & (1 << node) == 0 && self.mem.free[node] > 0;
            let mut out = Vec::new();
            let kind = p.decide(&f, copies, &self.mem, &mut out);
            self.apply(&out);
            if write && self.replicas[g] != 0 {
                self.collapse(g, node as NodeId);
            }
            self.faults.push((kind, write, movable));
            let all = self.copies(g);
            let single = all.count_ones() == 1;
            self.map[g][node] = Some(single);
        }
        self.refd[g][node] = true;
        self.modified[g][node] |= write;
        // Invariants: no writable copy of a replicated page; mappings target a copy.
        if self.replicas[g] != 0 {
            assert!(self.map[g].iter().all(|m| *m != Some(true)), "a replicated page has a writable mapping");
        }
    }

    fn scan_all(&mut self, p: &mut Dunx) {
        for k in 0..self.n {
            let mut pages = Vec::new();
            for g in 0..self.home.len() {
                if self.home[g] != Some(k as NodeId) {
                    continue;
                }
                let all = self.copies(g);
                let targeting = |j: usize| j == k || all & (1 << j) == 0;
                let mut s = ScannedPage { space: 0, page: g as u64, local_ref: false, remote_ref: false, dirty: false };
                for j in (0..self.n).filter(|&j| targeting(j) && self.map[g][j].is_some()) {
                    if self.refd[g][j] {
                        if j == k {
                            s.local_ref = true;
                        } else {
                            s.remote_ref = true;
                        }
                    }
                    s.dirty |= self.modified[g][j];
                    self.refd[g][j] = false;
                    self.modified[g][j] = false;
                }
                pages.push(s);
            }
            let mut out = Vec::new();
            p.scan(&PageScan { node: k as NodeId, pass: 0, time_ns: self.now_ns, pages }, &mut out);
            for d in &out {
                assert!(matches!(d, Decision::DropMappings { .. }), "scanners only trigger");
            }
            self.apply(&out);
        }
    }
}

#[derive(Clone, Debug)]
enum Ev {
    Access { node: usize, page: usize, write: bool, after_ms: u64 },
    Scan,
}

fn script() -> impl Strategy<Value = Vec<Ev>> {
    let ev = prop_oneof![
        6 => (0usize..4, 0usize..3, any::<bool>(), 0u64..400).prop_map(|(node, page, write, after_ms)| Ev::Access { node, page, write, after_ms }),
        1 => Just(Ev::Scan),
    ];
    proptest::collection::vec(ev, 1..120)
}

fn play(config: DunxConfig, frames: u64, evs: &[Ev]) -> (Dunx, Mini) {
    let mut p = dunx(config);
    let mut w = Mini::new(8, 3, frames);
    for e in evs {
        match *e {
            Ev::Access { node, page, write, after_ms } => {
                w.now_ns += after_ms * MS;
                w.access(&mut p, node, page, write);
            }
            Ev::Scan => w.scan_all(&mut p),
        }
    }
    (p, w)
}

fn small() -> DunxConfig {
    DunxConfig { sample_passes: 1, defrost_trigger: 0, ..DunxConfig::default() }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// freeze_window = 0: nothing ever freezes; every remote fault on a single copy with a
    /// free frame migrates or replicates.
    #[test]
    fn a_zero_freeze_window_never_freezes(evs in script(), frames in 1u64..4) {
        let (p, w) = play(DunxConfig { freeze_window_ms: 0.0, ..small() }, frames, &evs);
        prop_assert_eq!(p.stats().freezes, 0);
        for &(kind, _, movable) in &w.faults {
            if movable {
                prop_assert!(matches!(kind, FaultKind::Migration | FaultKind::Replication), "{:?}", kind);
            }
        }
    }

    /// freeze_window = inf: at most one invalidation per page in a run.
    #[test]
    fn an_infinite_freeze_window_invalidates_each_page_at_most_once(evs in script(), frames in 1u64..4) {
        let (p, w) = play(DunxConfig { freeze_window_ms: f64::INFINITY, ..small() }, frames, &evs);
        for g in 0..3u64 {
            prop_assert!(w.invalidations[g as usize] <= 1, "page {} invalidated {} times", g, w.invalidations[g as usize]);
            prop_assert!(p.page(0, g).map_or(0, |s| s.invalidations) <= 1);
        }
    }

    /// recent_mod = 0: data pages are never replicated; remote faults that pass the freeze
    /// check migrate.
    #[test]
    fn recent_mod_zero_never_replicates(evs in script(), frames in 1u64..4) {
        let (p, w) = play(DunxConfig { recent_mod: 0.0, ..small() }, frames, &evs);
        prop_assert_eq!(w.replicate_orders, 0);
        prop_assert_eq!(p.stats().faults_replication, 0);
    }

    /// recent_mod = inf: migrations only on write faults, and a read fault that passes the
    /// freeze check on a single remote copy with a free frame replicates.
    #[test]
    fn recent_mod_infinite_migrates_only_on_writes(evs in script(), frames in 1u64..4) {
        let (_, w) = play(DunxConfig { recent_mod: f64::INFINITY, freeze_window_ms: 0.0, ..small() }, frames, &evs);
        for &(kind, write, movable) in &w.faults {
            if kind == FaultKind::Migration {
                prop_assert!(write);
            }
            if movable && !write {
                prop_assert_eq!(kind, FaultKind::Replication);
            }
        }
    }

    /// A very large defrost trigger: frozen pages never defrost.
    #[test]
    fn a_huge_defrost_trigger_never_defrosts(evs in script(), frames in 1u64..4) {
        let (p, _) = play(DunxConfig { defrost_trigger: i64::MAX, ..small() }, frames, &evs);
        prop_assert_eq!(p.stats().defrosts, 0);
        prop_assert_eq!(p.stats().freezes, p.pages.values().filter(|s| s.frozen).count() as u64, "every freeze sticks");
    }
}

// ---- cache and mor ----

fn preset_fault(p: &mut dyn crate::policy::DynPolicy, write: bool, now_ns: u64) -> Vec<Decision> {
    let mut sys = crate::testing::FakeSystem::new(8, 1, 8, 16, 100);
    sys.pages.insert((0, 7), 0);
    sys.now_ns = now_ns;
    let mut f = sys.fault(1, 7);
    f.write = write;
    let mut out = Vec::new();
    p.on_hint_fault(&f, &sys, &mut out);
    out
}

#[test]
fn mor_migrates_on_every_remote_fault_and_never_freezes() {
    let mut p = crate::registry::build("mor", toml::Table::new(), &env()).unwrap();
    assert_eq!(p.page_scanner_period_ns(), Some(1000 * MS), "mappings, so that remote references fault");
    for (write, now) in [(false, 0), (true, 1), (false, 2)] {
        // Page 7 is on node 0 in every call (the fake does not move it): each fault migrates,
        // however recent the last invalidation.
        assert_eq!(preset_fault(p.as_mut(), write, now), vec![Decision::MigratePage { space: 0, page: 7, to: 1 }]);
    }
    let counters: BTreeMap<_, _> = p.counters().into_iter().collect();
    assert_eq!((counters["faults_migration"], counters["freezes"], counters["faults_replication"]), (3, 0, 0));
    let err = crate::registry::build("mor", toml::from_str("recent_mod = 3").unwrap(), &env()).err().unwrap().to_string();
    assert!(err.contains("unknown field `recent_mod`"), "{err}");
}

#[test]
fn cache_replicates_clean_pages_migrates_written_ones_and_never_freezes() {
    let mut p = crate::registry::build("cache", toml::Table::new(), &env()).unwrap();
    assert_eq!(preset_fault(p.as_mut(), false, 0), vec![Decision::Replicate { space: 0, page: 7, to: 1 }]);
    assert_eq!(preset_fault(p.as_mut(), true, 1), vec![Decision::MigratePage { space: 0, page: 7, to: 1 }]);
    // Right after that invalidation, a remote write migrates again instead of freezing.
    assert_eq!(preset_fault(p.as_mut(), true, 2), vec![Decision::MigratePage { space: 0, page: 7, to: 1 }]);
    let counters: BTreeMap<_, _> = p.counters().into_iter().collect();
    assert_eq!(counters["freezes"], 0);
    let cfg = p.config_toml();
    assert_eq!((cfg["recent_mod"].as_float(), cfg["scan_delay_ms"].as_integer()), (Some(31.0), Some(1000)));
    for (bad, key) in [("freeze_window_ms = 5", "unknown field `freeze_window_ms`"), ("recent_mod = 300", "recent_mod = 300")] {
        let err = crate::registry::build("cache", toml::from_str(bad).unwrap(), &env()).err().unwrap().to_string();
        assert!(err.contains(key), "{err}");
    }
}
