//! Per-space windows in `Tick::spaces` and the cost of whole-space moves (docs/simulator.md,
//! "Per-space windows" and "Whole-space moves"), on a two-instance run on knl-7250-flat.

use numalab_core::machine::presets;
use numalab_core::NodeId;
use numalab_policy::{
    Decision, EventRef, MemoryState, NodeMask, OutOfMemory, Outcome, PlaceRequest, Policy, PolicyEnv, PolicyError, Refusal, SpaceWindow,
    SystemView, Tick,
};
use numalab_sim::{run_with_policy, RunMetrics, Scenario, SimConfig};
use numalab_workload::{compile_spec, presets as wp, CompileOptions, WorkloadSpec};
use serde::{Deserialize, Serialize};
use std::sync::{Arc, Mutex};

type Seen = Arc<Mutex<Vec<Vec<SpaceWindow>>>>;

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct RecorderConfig {}

/// Places on DDR (node 0), records every tick's windows, and optionally moves space 0 to the
/// MCDRAM (node 1) at the first tick.
struct Recorder {
    config: RecorderConfig,
    seen: Seen,
    move_first: bool,
}

impl Policy for Recorder {
    type Config = RecorderConfig;
    const NAME: &'static str = "recorder";
    const SUMMARY: &'static str = "test only";

    fn new(config: RecorderConfig, _env: &PolicyEnv) -> Result<Self, PolicyError> {
        Ok(Recorder { config, seen: Seen::default(), move_first: false })
    }
    fn config(&self) -> &RecorderConfig {
        &self.config
    }
    fn place(&mut self, _req: &PlaceRequest, mem: &dyn MemoryState) -> Result<NodeId, OutOfMemory> {
        [0, 1].into_iter().find(|&n| !mem.is_full(n, 1)).ok_or(OutOfMemory { wanted: 0, pages: 1 })
    }
    fn on_tick(&mut self, tick: &Tick, _view: &dyn SystemView, out: &mut Vec<Decision>) {
        let mut seen = self.seen.lock().unwrap();
        if self.move_first && seen.is_empty() {
            out.push(Decision::MoveSpace { space: 0, to: 1, from: None });
        }
        seen.push(tick.spaces.clone());
    }
}

fn scenario(copy_gbps: f64) -> Scenario {
    let mut m = presets::load("knl-7250-flat").unwrap();
    m.os_costs.move_space_copy_gbps = copy_gbps;
    let m = Arc::new(m);
    let mut file = wp::load("cg-like").unwrap();
    file.workload.copies = 2;
    let opts = CompileOptions { threads: Some(4), scale: 0.0005 };
    let program = compile_spec(&WorkloadSpec::Single(file), "cg-like", &m, &opts).unwrap();
    let sim = SimConfig { tick_ms: 1.0, ..SimConfig::default() };
    Scenario {
        machine: m,
        program: Arc::new(program),
        policy: numalab_policy::find("first-touch").unwrap(),
        policy_config: toml::Table::new(),
        sim,
    }
}

fn run(s: &Scenario, move_first: bool) -> (RunMetrics, Vec<Vec<SpaceWindow>>) {
    let seen = Seen::default();
    let p = Recorder { config: RecorderConfig {}, seen: seen.clone(), move_first };
    let r = run_with_policy(s, Box::new(p), 3, None).unwrap();
    let w = seen.lock().unwrap().clone();
    (r, w)
}

#[test]
fn windows_count_each_space_and_add_up() {
    let s = scenario(5.0);
    let (r, windows) = run(&s, false);
    assert!(windows.len() >= 3, "{} ticks", windows.len());
    let mut faults = [0u64; 2];
    let mut refs = 0u64;
    let mut full_rate = false;
    for w in &windows {
        assert_eq!(w.iter().map(|x| x.space).collect::<Vec<_>>(), vec![0, 1]);
        for x in w {
            faults[x.space as usize] += x.page_faults;
            // No page is pre-placed, and the first copy exits (freeing its pages) only in the
            // last, undelivered window: every resident page was a first-touch fault.
            assert_eq!(x.resident_pages(), faults[x.space as usize], "space {}", x.space);
            assert_eq!(x.pages_per_node[1], 0, "the recorder places on DDR while it has room");
            assert!(x.flops <= 8.2 * x.mem_refs as f64 * (1.0 + 1e-12), "cg-like's 8.2 flops per access at most");
            full_rate |= x.mem_refs > 0 && x.flops == 8.2 * x.mem_refs as f64;
            refs += x.mem_refs;
        }
    }
    assert!(full_rate, "some window is all main-phase references");
    // The last partial window is never delivered.
    assert!(refs > 0 && refs <= r.accesses, "{refs} of {}", r.accesses);
    // The copy that finished first had its pages freed at its exit (docs/simulator.md,
    // "Program exit").
    assert!(faults.iter().sum::<u64>() <= r.placed_pages + r.pages_freed_at_exit);
}

#[test]
fn move_space_moves_one_space_and_stalls_it_at_the_copy_rate() {
    let s = scenario(5.0);
    let (r, windows) = run(&s, true);
    let before = &windows[0];
    let moved = before[0].pages_per_node[0];
    assert!(moved > 0);
    assert_eq!(r.page_migrations, moved, "every page of space 0, nothing else");
    let after = &windows[1];
    assert!(after[0].pages_per_node[1] >= moved, "space 0 is on the MCDRAM: {:?}", after[0].pages_per_node);
    assert_eq!(after[1].pages_per_node[1], 0, "space 1 stays on DDR");

    // At a hundredth of the copy rate the move stalls space 0 about 100x longer: the run ends
    // later by about the difference (space 0 then finishes last).
    let slow = scenario(0.05);
    let (r_slow, _) = run(&slow, true);
    let per_page_ns = |gbps: f64| s.machine.os_costs.migrate_fixed_ns / 64.0 + s.program.page_bytes as f64 / gbps;
    let extra_s = moved as f64 * (per_page_ns(0.05) - per_page_ns(5.0)) / 1e9;
    let got = r_slow.exec_time_s - r.exec_time_s;
    assert!(got > 0.5 * extra_s && got < 1.1 * extra_s, "run longer by {got} s, stall difference {extra_s} s");
}

/// The timeline's per-application points (docs/metrics.md, "Per application"): one per space
/// and interval, their references add up to the interval's accesses and their pages to the
/// homes on each node; a single program's points carry none.
#[test]
fn timeline_points_carry_each_application() {
    let mut s = scenario(5.0);
    s.sim.metrics_interval_ms = 2.0;
    let (r, _) = run(&s, false);
    assert!(r.timeline.len() >= 3, "{} points", r.timeline.len());
    let page_bytes = s.program.page_bytes as f64;
    let mut flops = 0.0;
    for p in &r.timeline {
        let names: Vec<&str> = p.apps.iter().map(|a| a.app.as_str()).collect();
        assert_eq!(names, ["cg-like.0", "cg-like.1"]);
        assert_eq!(p.apps.iter().map(|a| a.mem_refs).sum::<u64>(), p.accesses);
        for j in 0..2 {
            // No replicas here: the homes are every resident page.
            assert_eq!(p.apps.iter().map(|a| a.pages_per_node[j]).sum::<u64>(), p.pages_per_node[j]);
        }
        for a in &p.apps {
            assert_eq!(a.pages_per_tier["dram"], a.pages_per_node[0]);
            assert_eq!(a.pages_per_tier["mcdram"], a.pages_per_node[1]);
            assert_eq!(a.bytes, a.mem_refs as f64 * s.program.access_bytes as f64);
            match a.ai_flop_per_byte {
                Some(ai) => assert!((ai - a.flops / a.bytes).abs() <= 1e-12 * ai && ai <= 8.2 / s.program.access_bytes as f64 + 1e-12),
                None => assert_eq!(a.mem_refs, 0),
            }
            assert!((a.gflops - a.flops / p.interval_s / 1e9).abs() <= 1e-9 * a.gflops.max(1.0));
            assert!(a.pages_per_node.iter().sum::<u64>() as f64 * page_bytes <= s.program.footprint_bytes() as f64);
            flops += a.flops;
        }
    }
    assert!(flops > 0.0);

    // One program: no per-application points, so its JSON is what it was.
    let m = s.machine.clone();
    let single = compile_spec(
        &WorkloadSpec::Single(wp::load("cg-like").unwrap()),
        "cg-like",
        &m,
        &CompileOptions { threads: Some(4), scale: 0.0005 },
    )
    .unwrap();
    let one = Scenario { program: Arc::new(single), ..s };
    let (r1, _) = run(&one, false);
    assert!(r1.timeline.len() >= 2 && r1.timeline.iter().all(|p| p.apps.is_empty()));
    assert!(!serde_json::to_string(&r1).unwrap().contains("\"apps\""));
}

type Outcomes = Arc<Mutex<Vec<(Decision, Outcome)>>>;

/// Places the pages of every space round-robin over nodes 0, 1 and 2 of cxl-expander, and at
/// the first tick moves space 0 with the decisions it is given; records their outcomes and
/// the windows of the tick after them.
struct SourceMover {
    config: RecorderConfig,
    next: NodeId,
    moves: Vec<Decision>,
    outcomes: Outcomes,
    seen: Seen,
}

impl Policy for SourceMover {
    type Config = RecorderConfig;
    const NAME: &'static str = "source-mover";
    const SUMMARY: &'static str = "test only";

    fn new(config: RecorderConfig, _env: &PolicyEnv) -> Result<Self, PolicyError> {
        Ok(SourceMover { config, next: 0, moves: Vec::new(), outcomes: Outcomes::default(), seen: Seen::default() })
    }
    fn config(&self) -> &RecorderConfig {
        &self.config
    }
    fn place(&mut self, _req: &PlaceRequest, _mem: &dyn MemoryState) -> Result<NodeId, OutOfMemory> {
        self.next = (self.next + 1) % 3;
        Ok(self.next)
    }
    fn on_tick(&mut self, tick: &Tick, _view: &dyn SystemView, out: &mut Vec<Decision>) {
        out.append(&mut self.moves);
        self.seen.lock().unwrap().push(tick.spaces.clone());
    }
    fn on_outcomes(&mut self, _cause: &EventRef, decisions: &[Decision], outcomes: &[Outcome]) {
        self.outcomes.lock().unwrap().extend(decisions.iter().copied().zip(outcomes.iter().copied()));
    }
}

/// A whole-space move with source nodes (`from`, as `migrate_pages(2)`'s `old_nodes`) moves
/// only the pages on those nodes: HyDM's promotion on a machine with a fast node per socket
/// leaves the pages already on either fast node where they are (docs/simulator.md,
/// "Whole-space moves"). Sources that hold none of the space's pages: `already_there`.
#[test]
fn move_space_from_moves_only_the_pages_on_its_source_nodes() {
    let m = Arc::new(presets::load("cxl-expander").unwrap());
    let mut file = wp::load("cg-like").unwrap();
    file.workload.copies = 2;
    let program = compile_spec(&WorkloadSpec::Single(file), "cg-like", &m, &CompileOptions { threads: Some(4), scale: 0.0005 }).unwrap();
    let s = Scenario {
        machine: m,
        program: Arc::new(program),
        policy: numalab_policy::find("first-touch").unwrap(),
        policy_config: toml::Table::new(),
        sim: SimConfig { tick_ms: 1.0, ..SimConfig::default() },
    };
    let (from_cxl, from_node_3) = (NodeMask::of(&[2, 3]), NodeMask::of(&[3]));
    let outcomes = Outcomes::default();
    let seen = Seen::default();
    let p = SourceMover {
        config: RecorderConfig {},
        next: 0,
        moves: vec![Decision::MoveSpace { space: 0, to: 1, from: from_cxl }, Decision::MoveSpace { space: 0, to: 1, from: from_node_3 }],
        outcomes: outcomes.clone(),
        seen: seen.clone(),
    };
    let r = run_with_policy(&s, Box::new(p), 3, None).unwrap();
    let windows = seen.lock().unwrap().clone();
    let (before, after) = (&windows[0][0].pages_per_node, &windows[1][0].pages_per_node);
    assert!(before[0] > 0 && before[2] > 0, "space 0 on nodes 0 and 2: {before:?}");
    assert_eq!(after[2], 0, "its CXL pages moved: {after:?}");
    assert!(after[0] >= before[0], "its pages on the other DRAM node stayed: {after:?}");
    assert!(after[1] >= before[1] + before[2], "{before:?} -> {after:?}");
    assert_eq!(r.page_migrations, before[2], "the pages of node 2 and nothing else");
    let got = outcomes.lock().unwrap().clone();
    let of = |from: Option<NodeMask>| got.iter().find(|(d, _)| matches!(d, Decision::MoveSpace { from: f, .. } if *f == from)).map(|x| x.1);
    assert_eq!(of(from_cxl), Some(Outcome::Applied));
    assert_eq!(of(from_node_3), Some(Outcome::Refused(Refusal::AlreadyThere)), "no page of space 0 on node 3");
}
