//! Per-node mappings and page-scanner daemons (docs/simulator.md, "Page mappings and scanner
//! daemons"), seen from a probe policy, and the `dunx` policy end to end on the DUnX synth
//! workload of the gp1000 machine.

use numalab_core::machine::presets;
use numalab_core::NodeId;
use numalab_policy::{
    Decision, EventRef, HintFault, MemoryState, OutOfMemory, Outcome, PageScan, PlaceRequest, Policy, PolicyEnv, PolicyError, Refusal,
    SystemView, Tick,
};
use numalab_sim::{run_one, run_with_policy, RunMetrics, Scenario, SimConfig};
use numalab_workload::{compile, presets as wp, CompileOptions};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

fn scenario(policy: &str, config: &str, scale: f64) -> Scenario {
    let m = Arc::new(presets::load("gp1000").unwrap());
    let file = wp::load("dunx-synth").unwrap();
    let program = compile(&file, "dunx-synth", &m, &CompileOptions { threads: None, scale }).unwrap();
    Scenario {
        machine: m,
        program: Arc::new(program),
        policy: numalab_policy::find(policy).unwrap(),
        policy_config: toml::from_str(config).unwrap(),
        sim: SimConfig::default(),
    }
}

#[derive(Default)]
struct Seen {
    /// (node, page) of every fault, in order; whether it was a write.
    faults: Vec<(NodeId, u64, bool)>,
    /// First toucher of every page.
    first: BTreeMap<u64, NodeId>,
    /// Per scan: (node, pages homed there, pages seen dirty, pages seen referenced).
    scans: Vec<(NodeId, usize, usize, usize)>,
    /// Outcomes of the decisions taken at ticks.
    tick_outcomes: Vec<Outcome>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct ProbeConfig {}

/// Places by first touch, asks for scanners every 20 ms, decides nothing unless `drop_all`,
/// when every scan drops every mapping of every page it reports.
struct Probe {
    config: ProbeConfig,
    seen: Arc<Mutex<Seen>>,
    drop_all: bool,
    /// Ask for no scanners (and so no mappings); drop page 0's mappings at every tick.
    no_scanner: bool,
}

impl Policy for Probe {
    type Config = ProbeConfig;
    const NAME: &'static str = "mapping-probe";
    const SUMMARY: &'static str = "test only";
    fn new(config: ProbeConfig, _env: &PolicyEnv) -> Result<Self, PolicyError> {
        Ok(Probe { config, seen: Arc::default(), drop_all: false, no_scanner: false })
    }
    fn config(&self) -> &ProbeConfig {
        &self.config
    }
    fn place(&mut self, req: &PlaceRequest, _mem: &dyn MemoryState) -> Result<NodeId, OutOfMemory> {
        self.seen.lock().unwrap().first.insert(req.page, req.cpu_node);
        Ok(req.cpu_node)
    }
    fn page_scanner_period_ns(&self) -> Option<u64> {
        (!self.no_scanner).then_some(20_000_000)
    }
    fn on_tick(&mut self, _tick: &Tick, _view: &dyn SystemView, out: &mut Vec<Decision>) {
        if self.no_scanner {
            out.push(Decision::DropMappings { space: 0, page: 0, keep: None });
        }
    }
    fn on_outcomes(&mut self, cause: &EventRef, _decisions: &[Decision], outcomes: &[Outcome]) {
        if matches!(cause, EventRef::Tick) {
            self.seen.lock().unwrap().tick_outcomes.extend_from_slice(outcomes);
        }
    }
    fn on_hint_fault(&mut self, f: &HintFault, view: &dyn SystemView, _out: &mut Vec<Decision>) {
        assert_eq!(view.page_node(f.space, f.page), Some(f.page_node));
        self.seen.lock().unwrap().faults.push((f.cpu_node, f.page, f.write));
    }
    fn on_page_scan(&mut self, scan: &PageScan, view: &dyn SystemView, out: &mut Vec<Decision>) {
        for p in &scan.pages {
            assert_eq!(view.page_node(p.space, p.page), Some(scan.node), "a scanner reports the pages homed on its node");
            if self.drop_all {
                out.push(Decision::DropMappings { space: p.space, page: p.page, keep: None });
            }
        }
        let dirty = scan.pages.iter().filter(|p| p.dirty).count();
        let referenced = scan.pages.iter().filter(|p| p.local_ref || p.remote_ref).count();
        self.seen.lock().unwrap().scans.push((scan.node, scan.pages.len(), dirty, referenced));
    }
}

fn probe(s: &Scenario, drop_all: bool) -> (RunMetrics, Arc<Mutex<Seen>>) {
    probe_with(s, drop_all, false)
}

fn probe_with(s: &Scenario, drop_all: bool, no_scanner: bool) -> (RunMetrics, Arc<Mutex<Seen>>) {
    let mut p = Probe::new(ProbeConfig {}, &PolicyEnv::new(s.machine.clone())).unwrap();
    p.drop_all = drop_all;
    p.no_scanner = no_scanner;
    let seen = p.seen.clone();
    let r = run_with_policy(s, Box::new(p), 1, None).unwrap();
    (r, seen)
}

#[test]
fn without_decisions_each_node_faults_once_per_page_and_never_where_it_first_touched() {
    let s = scenario("first-touch", "", 0.05);
    let (r, seen) = probe(&s, false);
    let seen = seen.lock().unwrap();
    let pairs: BTreeSet<(NodeId, u64)> = seen.faults.iter().map(|&(n, p, _)| (n, p)).collect();
    assert_eq!(pairs.len(), seen.faults.len(), "a mapping, once made, stays: one fault per node and page");
    assert!(seen.faults.iter().all(|&(n, p, _)| seen.first[&p] != n), "the first touch maps the toucher");
    assert!(!seen.faults.is_empty(), "shared pages are reached by other nodes");
    // Single copies are mapped writably: nobody faults twice, not even to write.
    assert_eq!(r.page_migrations + r.replications, 0);
    // Every scan round reports every placed page once, on its home's scanner.
    let nodes = s.machine.node_count();
    assert!(seen.scans.len() >= nodes && seen.scans.len() % nodes == 0, "whole rounds, {} passes", seen.scans.len());
    for round in seen.scans.chunks(nodes) {
        assert_eq!(round.iter().map(|x| x.0).collect::<Vec<_>>(), (0..nodes as NodeId).collect::<Vec<_>>(), "in node order");
    }
    let first_round: usize = seen.scans[..nodes].iter().map(|x| x.1).sum();
    assert!(first_round > 0);
    assert!(seen.scans.iter().any(|x| x.2 > 0), "written pages are seen dirty");
    assert!(seen.scans.iter().all(|x| x.3 <= x.1 && x.2 <= x.1));
}

#[test]
fn dropped_mappings_fault_again() {
    let s = scenario("first-touch", "", 0.05);
    let (_, kept) = probe(&s, false);
    let (r, dropped) = probe(&s, true);
    let (kept, dropped) = (kept.lock().unwrap(), dropped.lock().unwrap());
    assert!(dropped.faults.len() > kept.faults.len(), "{} vs {}", dropped.faults.len(), kept.faults.len());
    let pairs: BTreeSet<(NodeId, u64)> = dropped.faults.iter().map(|&(n, p, _)| (n, p)).collect();
    assert!(pairs.len() < dropped.faults.len(), "the same node faults on the same page again");
    assert_eq!(r.refused_decisions, 0, "dropping mappings is never refused");
}

#[test]
fn without_scanners_there_are_no_mappings_to_drop() {
    let mut s = scenario("first-touch", "", 0.05);
    s.sim.tick_ms = 20.0;
    let (r, seen) = probe_with(&s, false, true);
    let seen = seen.lock().unwrap();
    assert!(seen.faults.is_empty() && seen.scans.is_empty(), "no mapping faults, no scanners");
    assert!(!seen.tick_outcomes.is_empty());
    assert!(seen.tick_outcomes.iter().all(|o| *o == Outcome::Refused(Refusal::Unsupported)), "{:?}", seen.tick_outcomes);
    assert_eq!(r.refused_decisions, seen.tick_outcomes.len() as u64);
    assert_eq!(r.page_migrations + r.replications, 0);
}

fn counter(r: &RunMetrics, name: &str) -> u64 {
    *r.policy_counters.get(name).unwrap_or_else(|| panic!("no counter {name}: {:?}", r.policy_counters))
}

#[test]
fn dunx_on_the_synth_workload_moves_copies_freezes_and_repeats_exactly() {
    let s = scenario("dunx", "scan_delay_ms = 50\nfreeze_window_ms = 200", 0.05);
    let r = run_one(&s, 7).unwrap();
    assert_eq!(r, run_one(&s, 7).unwrap(), "same seed, same run");
    assert_eq!(r.refused_decisions, 0);
    assert_eq!(counter(&r, "refused"), 0);
    assert!(counter(&r, "faults_replication") > 0, "read-shared pages are replicated");
    assert_eq!(r.replications, counter(&r, "faults_replication"), "every replication order was carried out");
    assert_eq!(r.page_migrations, counter(&r, "faults_migration") + counter(&r, "faults_coherency_with_copy"));
    assert!(counter(&r, "freezes") > 0, "finely shared pages freeze");
    assert!(counter(&r, "scanner_passes") > 0);
    // recent_mod = 0: never a replica of a data page.
    let s0 = scenario("dunx", "scan_delay_ms = 50\nrecent_mod = 0", 0.05);
    let r0 = run_one(&s0, 7).unwrap();
    assert_eq!((r0.replications, counter(&r0, "faults_replication")), (0, 0));
    // freeze_window = inf: at most one invalidation per page.
    let si = scenario("dunx", "scan_delay_ms = 50\nfreeze_window_ms = inf", 0.05);
    assert!(counter(&run_one(&si, 7).unwrap(), "max_invalidations_per_page") <= 1);
    // freeze_window = 0: no freezes.
    let sz = scenario("dunx", "scan_delay_ms = 50\nfreeze_window_ms = 0", 0.05);
    assert_eq!(counter(&run_one(&sz, 7).unwrap(), "freezes"), 0);
}
