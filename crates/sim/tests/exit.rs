//! Program exit (docs/simulator.md, "Program exit"): when the last thread of an address space
//! finishes while other programs still run, its pages are freed. A probe policy places like
//! first-touch, records what it sees at every tick, and once a program has exited asks to
//! move, migrate and scan it, which must be refused by name.

use numalab_core::machine::presets;
use numalab_core::NodeId;
use numalab_policy::{
    Decision, EventRef, MemoryState, OutOfMemory, Outcome, PlaceRequest, Policy, PolicyEnv, PolicyError, Refusal, SpaceId, SystemView, Tick,
};
use numalab_sim::{run_one, run_with_policy, RunMetrics, Scenario, SimConfig};
use numalab_workload::{compile_spec, CompileOptions, WorkloadSpec};
use serde::{Deserialize, Serialize};
use std::sync::{Arc, Mutex};

/// Three programs of different lengths: a short stream, a longer cg, a compute-heavy ep.
const MIX: &str = r#"
mix = { name = "exits", description = "test", placement = "random", seed = 3 }
member = [ { preset = "stream-like", threads = 2 }, { preset = "cg-like", threads = 4 }, { preset = "ep-like", threads = 2 } ]
"#;

/// One tick as the probe saw it.
#[derive(Clone, Debug)]
struct Seen {
    free: Vec<u64>,
    capacity: Vec<u64>,
    /// Per space: its pages on each node at the tick, and whether a thread of it is alive.
    pages: Vec<Vec<u64>>,
    alive: Vec<bool>,
    page_faults: Vec<u64>,
}

#[derive(Default)]
struct Record {
    ticks: Vec<Seen>,
    /// The space the probe targeted after its exit, the decisions and their outcomes.
    after_exit: Option<(SpaceId, Vec<Decision>, Vec<Outcome>)>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct ProbeConfig {}

struct Probe {
    config: ProbeConfig,
    nodes: Vec<NodeId>,
    record: Arc<Mutex<Record>>,
    asked: bool,
}

impl Policy for Probe {
    type Config = ProbeConfig;
    const NAME: &'static str = "exit-probe";
    const SUMMARY: &'static str = "test only";
    fn new(config: ProbeConfig, env: &PolicyEnv) -> Result<Self, PolicyError> {
        Ok(Probe { config, nodes: env.allowed.clone(), record: Arc::default(), asked: false })
    }
    fn config(&self) -> &ProbeConfig {
        &self.config
    }
    fn place(&mut self, req: &PlaceRequest, mem: &dyn MemoryState) -> Result<NodeId, OutOfMemory> {
        let order = std::iter::once(req.cpu_node).chain(self.nodes.iter().copied());
        numalab_policy::fallback::first_fit(order, mem, 1).ok_or(OutOfMemory { wanted: req.cpu_node, pages: 1 })
    }
    fn on_tick(&mut self, tick: &Tick, view: &dyn SystemView, out: &mut Vec<Decision>) {
        let n = tick.access_matrix.len() as NodeId;
        let alive: Vec<bool> = (0..view.spaces()).map(|s| view.space_threads(s).any(|t| view.thread_alive(t))).collect();
        let seen = Seen {
            free: (0..n).map(|j| view.free_pages(j)).collect(),
            capacity: (0..n).map(|j| view.capacity_pages(j)).collect(),
            pages: tick.spaces.iter().map(|w| w.pages_per_node.clone()).collect(),
            alive: alive.clone(),
            page_faults: tick.spaces.iter().map(|w| w.page_faults).collect(),
        };
        self.record.lock().unwrap().ticks.push(seen);
        if self.asked {
            return;
        }
        // The first program gone: every page of it has been freed, so a policy that still
        // names it must be told so.
        if let Some(s) = alive.iter().position(|a| !a) {
            let s = s as SpaceId;
            self.asked = true;
            let t = view.space_threads(s).start;
            out.extend([
                Decision::MoveSpace { space: s, to: 1, from: None },
                Decision::MigratePage { space: s, page: 0, to: 1 },
                Decision::Replicate { space: s, page: 0, to: 1 },
                Decision::Unmap { space: s, page: 0 },
                Decision::ScanStep { space: s, thread: t, pages: 64 },
            ]);
        }
    }
    fn on_outcomes(&mut self, cause: &EventRef, decisions: &[Decision], outcomes: &[Outcome]) {
        if matches!(cause, EventRef::Tick) {
            let Decision::MoveSpace { space, .. } = decisions[0] else { return };
            self.record.lock().unwrap().after_exit = Some((space, decisions.to_vec(), outcomes.to_vec()));
        }
    }
}

fn scenario(policy: &str, fast_engine: bool) -> Scenario {
    let m = Arc::new(presets::load("server-a-4n").unwrap());
    let spec = WorkloadSpec::parse(MIX, "mix").unwrap();
    let program = compile_spec(&spec, "mix", &m, &CompileOptions { threads: None, scale: 0.001 }).unwrap();
    let mut sim = SimConfig { tick_ms: 1.0, metrics_interval_ms: 2.0, ..SimConfig::default() };
    if fast_engine {
        sim.engine = numalab_sim::config::EngineKind::Fast;
    }
    Scenario {
        machine: m,
        program: Arc::new(program),
        policy: numalab_policy::find(policy).unwrap(),
        policy_config: toml::Table::new(),
        sim,
    }
}

fn probe_run(s: &Scenario) -> (RunMetrics, Record) {
    let env = PolicyEnv::new(s.machine.clone());
    let p = Probe::new(ProbeConfig::default(), &env).unwrap();
    let record = p.record.clone();
    let r = run_with_policy(s, Box::new(p), 11, None).unwrap();
    let rec = std::mem::take(&mut *record.lock().unwrap());
    (r, rec)
}

/// The first program to exit: at the first tick after its exit its pages are gone, and the
/// free pages rose by exactly what it held at the tick before, less what the others placed
/// in between; its pages add up to `pages_freed_at_exit` (it is the only one freed by then).
fn exit_returns_its_pages(fast_engine: bool) {
    let s = scenario("first-touch", fast_engine);
    let (r, rec) = probe_run(&s);
    let k = rec.ticks.iter().position(|t| t.alive.iter().any(|a| !a)).expect("a program exits before the run ends");
    assert!(k > 0, "a program exited before the first tick");
    let (before, after) = (&rec.ticks[k - 1], &rec.ticks[k]);
    let gone: Vec<usize> = (0..after.alive.len()).filter(|&s| !after.alive[s]).collect();
    assert_eq!(gone.len(), 1, "one program exits first: {:?}", after.alive);
    let x = gone[0];
    assert!(before.alive[x]);
    assert!(after.pages[x].iter().all(|&p| p == 0), "the exited program holds no page: {:?}", after.pages[x]);
    let held: u64 = before.pages[x].iter().sum::<u64>() + after.page_faults[x];
    assert!(held > 0);
    for j in 0..after.free.len() {
        let others = |t: &Seen| (0..t.pages.len()).filter(|&s| s != x).map(|s| t.pages[s][j]).sum::<u64>();
        let placed_by_others = others(after) as i64 - others(before) as i64;
        let rise = after.free[j] as i64 - before.free[j] as i64;
        // What the exited program held on node j at the earlier tick (the pages it placed
        // after it were placed and freed within the interval).
        assert_eq!(rise, before.pages[x][j] as i64 - placed_by_others, "node {j}");
    }
    // At every tick, the memory in use is exactly the live programs' pages (first-touch
    // makes no replicas): freed pages are really returned, never counted twice.
    for t in &rec.ticks {
        for j in 0..t.free.len() {
            let used: u64 = t.pages.iter().map(|p| p[j]).sum();
            assert_eq!(t.capacity[j] - t.free[j], used);
        }
    }
    assert!(r.pages_freed_at_exit >= held, "{} < {held}", r.pages_freed_at_exit);
    assert_eq!(r.placed_pages + r.unplaced_pages + r.pages_freed_at_exit, s.program.total_pages);
    // Decisions for the freed space are refused by name, none applied.
    let (space, decisions, outcomes) = rec.after_exit.expect("the probe asked after the exit");
    assert_eq!(space as usize, x);
    assert_eq!(outcomes.len(), decisions.len());
    for (d, o) in decisions.iter().zip(&outcomes) {
        assert_eq!(*o, Outcome::Refused(Refusal::SpaceExited), "{d:?}");
    }
    assert!(r.refused_decisions >= decisions.len() as u64);
}

#[test]
fn an_exited_program_returns_exactly_its_pages() {
    exit_returns_its_pages(false);
}

#[test]
fn the_fast_engine_frees_at_exit_too() {
    exit_returns_its_pages(true);
}

/// Conservation over a mix whose programs end at different times, under policies that move
/// pages and spaces: every page is placed, never touched, or freed at exit, and no node is
/// over capacity; the last program is not freed (the run ends with it).
#[test]
fn pages_are_conserved_when_programs_exit_at_different_times() {
    for policy in ["first-touch", "round-4k", "autonuma", "hydm", "carrefour"] {
        for fast in [false, true] {
            let s = scenario(policy, fast);
            let r = run_one(&s, 5).unwrap();
            let what = format!("{policy} fast={fast}");
            assert_eq!(r.placed_pages + r.unplaced_pages + r.pages_freed_at_exit, s.program.total_pages, "{what}");
            assert!(r.pages_freed_at_exit > 0, "{what}: nothing freed");
            assert!(r.placed_pages > 0, "{what}: the last program keeps its pages");
            let resident: u64 = r.pages_per_node.iter().sum();
            assert_eq!(resident, r.placed_pages + r.replica_pages, "{what}");
            for (n, &used) in r.pages_per_node.iter().enumerate() {
                assert!(used <= s.machine.nodes[n].mem_bytes / s.program.page_bytes, "{what}: node {n} over capacity");
            }
            assert_eq!(r.timeline.last().unwrap().pages_per_node, r.pages_per_node, "{what}");
            assert_eq!(r, run_one(&s, 5).unwrap(), "{what}: deterministic");
        }
    }
}

/// A single program is never freed: its exit ends the run, and its pages are reported where
/// they were.
#[test]
fn a_single_program_keeps_its_pages_at_the_end() {
    let m = Arc::new(presets::load("server-a-4n").unwrap());
    let spec = WorkloadSpec::parse(numalab_workload::presets::text("stream-like").unwrap(), "stream-like").unwrap();
    let program = compile_spec(&spec, "stream-like", &m, &CompileOptions { threads: Some(4), scale: 0.001 }).unwrap();
    let s = Scenario {
        machine: m,
        program: Arc::new(program),
        policy: numalab_policy::find("first-touch").unwrap(),
        policy_config: toml::Table::new(),
        sim: SimConfig::default(),
    };
    let r = run_one(&s, 1).unwrap();
    assert_eq!(r.pages_freed_at_exit, 0);
    assert_eq!(r.placed_pages + r.unplaced_pages, s.program.total_pages);
    assert!(r.placed_pages > 0);
}
