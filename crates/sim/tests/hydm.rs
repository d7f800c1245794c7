//! HyDM in the engine (docs/policies/hydm.md) on knl-7250-flat with a shrunken MCDRAM: what
//! it decides follows from the windows it was handed, capacity holds, runs are deterministic.
//! `trace_hydm_npb_mix` (ignored; run with `--ignored --nocapture`) prints the window-by-window
//! trace used in docs/results/hydm.md.

use numalab_core::machine::presets;
use numalab_core::NodeId;
use numalab_policy::hydm::{Hydm, HydmConfig, LoopState};
use numalab_policy::{
    Decision, EventRef, MemoryState, OutOfMemory, Outcome, PlaceRequest, Policy, PolicyEnv, PolicyError, SpaceWindow, SystemView, Tick,
};
use numalab_sim::{run_with_policy, RunMetrics, Scenario, SimConfig};
use numalab_workload::{compile_spec, presets as wp, CompileOptions, WorkloadSpec};
use std::sync::{Arc, Mutex};

/// One tick as HyDM saw it: the windows in, its state after, its decisions out.
#[derive(Clone, Debug)]
struct Seen {
    time_ns: u64,
    spaces: Vec<SpaceWindow>,
    before: LoopState,
    after: LoopState,
    out: Vec<Decision>,
}

type Trace = Arc<Mutex<Vec<Seen>>>;

/// HyDM with every tick recorded.
struct Traced {
    inner: Hydm,
    trace: Trace,
}

impl Policy for Traced {
    type Config = HydmConfig;
    const NAME: &'static str = "hydm-traced";
    const SUMMARY: &'static str = "test only";
    fn new(config: HydmConfig, env: &PolicyEnv) -> Result<Self, PolicyError> {
        Ok(Traced { inner: Hydm::new(config, env)?, trace: Trace::default() })
    }
    fn config(&self) -> &HydmConfig {
        self.inner.config()
    }
    fn place(&mut self, req: &PlaceRequest, mem: &dyn MemoryState) -> Result<NodeId, OutOfMemory> {
        self.inner.place(req, mem)
    }
    fn on_tick(&mut self, tick: &Tick, view: &dyn SystemView, out: &mut Vec<Decision>) {
        let before = self.inner.state().clone();
        let n = out.len();
        self.inner.on_tick(tick, view, out);
        let seen =
            Seen { time_ns: tick.time_ns, spaces: tick.spaces.clone(), before, after: self.inner.state().clone(), out: out[n..].to_vec() };
        self.trace.lock().unwrap().push(seen);
    }
    fn on_outcomes(&mut self, cause: &EventRef, decisions: &[Decision], outcomes: &[Outcome]) {
        self.inner.on_outcomes(cause, decisions, outcomes);
    }
    fn counters(&self) -> Vec<(&'static str, u64)> {
        self.inner.counters()
    }
    fn app_moves(&self) -> Vec<numalab_policy::AppMove> {
        self.inner.app_moves()
    }
}

const FAST_PAGES_PER_SCALE: f64 = 16.0 * 1024.0 * 1024.0 * 1024.0 / 4096.0;

/// knl-7250-flat with the MCDRAM shrunk by `scale` like the workload, and the mix.
fn scenario(mix: &str, scale: f64) -> Scenario {
    let mut m = presets::load("knl-7250-flat").unwrap();
    m.nodes[1].mem_bytes = (FAST_PAGES_PER_SCALE * scale).floor() as u64 * 4096;
    let m = Arc::new(m);
    let spec = WorkloadSpec::parse(mix, "mix").unwrap();
    let opts = CompileOptions { threads: None, scale };
    let program = compile_spec(&spec, "mix", &m, &opts).unwrap();
    let sim = SimConfig { tick_ms: 100.0, ..SimConfig::default() };
    Scenario {
        machine: m,
        program: Arc::new(program),
        policy: numalab_policy::find("hydm").unwrap(),
        policy_config: toml::Table::new(),
        sim,
    }
}

fn run(s: &Scenario, seed: u64) -> (RunMetrics, Vec<Seen>) {
    let env = PolicyEnv::new(s.machine.clone()).with_seed(seed);
    let p = Traced::new(HydmConfig::default(), &env).unwrap();
    let trace = p.trace.clone();
    let r = run_with_policy(s, Box::new(p), seed, None).unwrap();
    let t = trace.lock().unwrap().clone();
    (r, t)
}

/// Four programs: two bandwidth-hungry cg-like, two compute-bound ep-like.
const SMALL_MIX: &str = r#"
mix = { name = "small", description = "test", placement = "random", seed = 1 }
member = [ { preset = "cg-like", copies = 2, threads = 2 }, { preset = "ep-like", copies = 2, threads = 2 } ]
"#;

#[test]
fn decisions_follow_the_windows_and_capacity_holds() {
    let s = scenario(SMALL_MIX, 0.002);
    let (r, trace) = run(&s, 5);
    let fast_cap = s.machine.nodes[1].mem_bytes / s.program.page_bytes;
    assert!(r.pages_per_node[1] <= fast_cap);
    let mut moves = 0;
    for t in &trace {
        for d in &t.out {
            let Decision::MoveSpace { space, to, .. } = *d else { panic!("hydm only moves spaces: {d:?}") };
            if to == 1 {
                moves += 1;
                // The mover was not in F before, is in F now, and had no more faults than the
                // mean of the running spaces in this window.
                assert!(!t.before.fast.contains_key(&space) && t.after.fast.contains_key(&space));
                let w0 = &t.after.windows[0].apps;
                let mean = w0.values().map(|r| r.pf as f64).sum::<f64>() / w0.len() as f64;
                assert!(w0[&space].pf as f64 <= mean);
                // No eligible space had a lower predicted intensity.
                let mine = t.after.predicted_intensity(space, 64).unwrap();
                for (&a, rec) in w0 {
                    if a != space && !t.before.fast.contains_key(&a) && !t.after.mispredicted.contains(&a) && rec.pf as f64 <= mean {
                        let theirs = t.after.predicted_intensity(a, 64).unwrap_or(f64::INFINITY);
                        assert!(theirs > mine || (theirs == mine && a > space), "space {a} ({theirs}) before {space} ({mine})");
                    }
                }
            } else {
                assert_eq!(to, 0, "a rollback goes to the DDR4");
                assert!(t.after.mispredicted.contains(&space));
            }
        }
    }
    assert!(moves > 0, "hydm moved nothing");
    // Same seed, same run.
    let (r2, trace2) = run(&s, 5);
    assert_eq!(r, r2);
    assert_eq!(trace.iter().map(|t| t.out.clone()).collect::<Vec<_>>(), trace2.iter().map(|t| t.out.clone()).collect::<Vec<_>>());
}

/// The run's `app_moves` and `apps` (docs/metrics.md, "Application moves", "Per
/// application"): one record per move the policy handed the engine, in order, named by mix
/// member, with the intensity HyDM predicted from the windows it saw; each program's finish
/// time is when it left the windows, the last one's the run's end.
#[test]
fn the_run_reports_the_moves_and_finish_times() {
    let s = scenario(SMALL_MIX, 0.002);
    let (r, trace) = run(&s, 5);
    let names: Vec<&str> = s.program.members.iter().map(|m| m.name.as_str()).collect();
    let decided: Vec<(u64, u32, NodeId, f64)> = trace
        .iter()
        .flat_map(|t| {
            t.out.iter().map(move |d| {
                let Decision::MoveSpace { space, to, .. } = *d else { panic!("{d:?}") };
                (t.time_ns, space, to, t.after.predicted_intensity(space, 64).unwrap())
            })
        })
        .collect();
    assert!(!decided.is_empty());
    assert_eq!(r.app_moves.len(), decided.len());
    for (k, (m, &(time_ns, space, to, ai))) in r.app_moves.iter().zip(&decided).enumerate() {
        assert_eq!(m.order as usize, k + 1);
        assert_eq!(m.t_s, time_ns as f64 / 1e9);
        assert_eq!(m.app, names[space as usize]);
        assert_eq!(m.to_node, to);
        assert_eq!(m.kind, if to == 1 { "promote" } else { "rollback" });
        assert_eq!(m.to_tier.as_deref(), Some(if to == 1 { "mcdram" } else { "dram" }));
        assert_eq!(m.intensity_flop_per_byte, Some(ai));
        assert!(m.outcome.is_some(), "every move's outcome came back: {m:?}");
    }
    assert_eq!(r.policy_counters["hydm_promotions"] + r.policy_counters["hydm_rollbacks"], decided.len() as u64);
    // Finish times: one per member; the last is the run's end; a program is in no window
    // that ends after its finish plus one tick, and in every window that ends before it.
    assert_eq!(r.apps.iter().map(|a| a.app.as_str()).collect::<Vec<_>>(), names);
    let last = r.apps.iter().map(|a| a.finish_s).fold(0.0, f64::max);
    assert_eq!(last, r.exec_time_s);
    for (i, a) in r.apps.iter().enumerate() {
        assert!(a.finish_s > 0.0);
        for t in &trace {
            let Some(w) = t.after.windows.front().filter(|w| w.index == t.after.g && t.before.g < t.after.g) else { continue };
            let end_s = t.time_ns as f64 / 1e9;
            if end_s < a.finish_s {
                assert!(w.apps.contains_key(&(i as u32)), "{} missing at {end_s} s, finished {}", a.app, a.finish_s);
            } else {
                assert!(!w.apps.contains_key(&(i as u32)), "{} still monitored at {end_s} s, finished {}", a.app, a.finish_s);
            }
        }
    }
}

/// A policy that moves no whole application reports none; a single program reports no `apps`.
#[test]
fn no_app_moves_without_whole_application_moves() {
    let mut s = scenario(SMALL_MIX, 0.002);
    s.policy = numalab_policy::find("tier-static").unwrap();
    let r = numalab_sim::run_one(&s, 1).unwrap();
    assert!(r.app_moves.is_empty());
    assert_eq!(r.apps.len(), 4);
    let json = serde_json::to_value(&r).unwrap();
    assert!(json.get("app_moves").is_none() && json.get("apps").is_some());
    let m = Arc::new(presets::load("knl-7250-flat").unwrap());
    let program = compile_spec(
        &WorkloadSpec::parse(wp::text("stream-like").unwrap(), "stream-like").unwrap(),
        "stream-like",
        &m,
        &CompileOptions { threads: Some(2), scale: 0.001 },
    )
    .unwrap();
    let single = Scenario { machine: m, program: Arc::new(program), ..s };
    let r = numalab_sim::run_one(&single, 1).unwrap();
    let json = serde_json::to_value(&r).unwrap();
    assert!(json.get("apps").is_none() && json.get("app_moves").is_none());
}

/// The trace of docs/results/hydm.md: hydm-npb-mix at --scale 0.002, MCDRAM shrunk alike.
/// `cargo test -j 1 -p numalab-sim --test hydm -- --ignored --nocapture`
#[test]
#[ignore]
fn trace_hydm_npb_mix() {
    let s = scenario(wp::text("hydm-npb-mix").unwrap(), 0.002);
    let names: Vec<String> = s.program.members.iter().map(|m| m.name.clone()).collect();
    for seed in [1u64] {
        let (r, trace) = run(&s, numalab_core::rng::run_seed(seed, 0));
        println!("exec_time_s {:.4}, page_migrations {}, pages_per_node {:?}", r.exec_time_s, r.page_migrations, r.pages_per_node);
        for t in &trace {
            let Some(w0) = t.after.windows.front() else { continue };
            let mean = t.after.pf_avg();
            print!(
                "t={}ms g={} pf_mean={:.1} fast_used={} |",
                t.time_ns / 1_000_000,
                t.after.g,
                mean,
                t.spaces.iter().map(|s| s.pages_per_node[1]).sum::<u64>()
            );
            for (a, rec) in &w0.apps {
                let ai = t.after.predicted_intensity(*a, 64).unwrap_or(f64::NAN);
                let flag = if t.after.fast.contains_key(a) {
                    "F"
                } else if t.after.mispredicted.contains(a) {
                    "V"
                } else {
                    ""
                };
                print!(" {}:{:.3}/pf{}/{}p{}", names[*a as usize], ai, rec.pf, rec.rss_bytes / 4096, flag);
            }
            println!();
            for d in &t.out {
                println!("  -> {d:?}");
            }
        }
    }
}
