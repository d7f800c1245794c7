//! The fast engine against the exact one (docs/simulator.md, "The fast engine"): same
//! accesses in total, every write inside an access, and results within the tolerances the
//! fast engine promises, on workloads that exercise each of its charging forms (random and
//! gather entries, owner escapes, strided sweeps, multi-entry walks) under static and dynamic
//! policies. Short runs; the published comparison is docs/results/fast-vs-exact.md.

use numalab_core::machine::presets;
use numalab_sim::config::EngineKind;
use numalab_sim::{run_one, RunMetrics, Scenario, SimConfig};
use numalab_workload::{compile, presets as wp, CompileOptions};
use std::sync::Arc;

fn scenario(machine: &str, workload: &str, threads: u32, scale: f64, policy: &str, engine: EngineKind) -> Scenario {
    scenario_with(machine, workload, threads, scale, policy, &[], engine)
}

fn scenario_with(
    machine: &str,
    workload: &str,
    threads: u32,
    scale: f64,
    policy: &str,
    policy_config: &[(&str, i64)],
    engine: EngineKind,
) -> Scenario {
    let m = Arc::new(presets::load(machine).unwrap());
    let file = wp::load(workload).unwrap();
    let program = compile(&file, workload, &m, &CompileOptions { threads: Some(threads), scale }).unwrap();
    let mut sim = SimConfig { engine, ..SimConfig::default() };
    sim.sched.noise_rate_per_cpu_hz = 0.0;
    Scenario {
        machine: m,
        program: Arc::new(program),
        policy: numalab_policy::find(policy).unwrap(),
        policy_config: policy_config.iter().map(|(k, v)| (k.to_string(), toml::Value::Integer(*v))).collect(),
        sim,
    }
}

fn within(what: &str, exact: f64, fast: f64, rel: f64, abs: f64) {
    let diff = (exact - fast).abs();
    assert!(diff <= rel * exact.abs() || diff <= abs, "{what}: exact {exact}, fast {fast} (allowed {rel} relative or {abs} absolute)");
}

fn mean(xs: &[f64]) -> f64 {
    xs.iter().sum::<f64>() / xs.len() as f64
}

/// Mean and standard error of the mean.
fn mean_se(xs: &[f64]) -> (f64, f64) {
    let m = mean(xs);
    let var = xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (xs.len() as f64 - 1.0).max(1.0);
    (m, (var / xs.len() as f64).sqrt())
}

/// Run both engines at `seeds` and compare. The engines draw different random streams (the
/// fast one draws no line for a reference it charges by expectation), so a seed's run under
/// one is not its run under the other. Under a static policy nothing discrete hinges on
/// single draws (no noise here), so run time and local ratio must agree seed by seed; under
/// a dynamic one, which thread faults on which page first is such a draw, so run time, local
/// ratio and the counts of hint faults and page migrations are compared in the mean: within
/// 2 %, 0.01, 5 % and 5 % respectively, or three standard errors of the exact engine's mean.
fn check(machine: &str, workload: &str, threads: u32, scale: f64, policy: &str, seeds: &[u64]) -> Vec<RunMetrics> {
    check_with(machine, workload, threads, scale, policy, &[], seeds)
}

/// `check` with policy settings; returns the exact engine's runs.
fn check_with(
    machine: &str,
    workload: &str,
    threads: u32,
    scale: f64,
    policy: &str,
    policy_config: &[(&str, i64)],
    seeds: &[u64],
) -> Vec<RunMetrics> {
    let what = |m: &str| format!("{workload} on {machine} under {policy}: {m}");
    let exact_s = scenario_with(machine, workload, threads, scale, policy, policy_config, EngineKind::Exact);
    let fast_s = scenario_with(machine, workload, threads, scale, policy, policy_config, EngineKind::Fast);
    let (mut exact, mut fast) = (Vec::new(), Vec::new());
    for &seed in seeds {
        let (e, f) = (run_one(&exact_s, seed).unwrap(), run_one(&fast_s, seed).unwrap());
        assert_eq!(e.accesses, f.accesses, "{}", what("every reference is charged once"));
        // Which references write follows from their index (the floor rule), in both engines.
        let writes = |r: &RunMetrics| r.write_matrix.iter().flatten().sum::<u64>();
        assert_eq!(writes(&e), writes(&f), "{}", what("every write is counted once"));
        for (row_a, row_w) in f.access_matrix.iter().zip(&f.write_matrix) {
            for (a, w) in row_a.iter().zip(row_w) {
                assert!(w <= a, "{}", what("a write is an access"));
            }
        }
        if seeds.len() == 1 {
            within(&what("run time"), e.exec_time_s, f.exec_time_s, 0.02, 0.0);
            within(&what("local ratio"), e.local_access_ratio.unwrap(), f.local_access_ratio.unwrap(), 0.0, 0.01);
        }
        assert_eq!(f.pages_per_node.iter().sum::<u64>(), f.placed_pages, "{}", what("pages conserved"));
        exact.push(e);
        fast.push(f);
    }
    type Metric = fn(&RunMetrics) -> f64;
    let metrics: [(&str, Metric, f64, f64); 4] = [
        ("mean run time", |r| r.exec_time_s, 0.02, 0.0),
        ("mean local ratio", |r| r.local_access_ratio.unwrap(), 0.0, 0.01),
        ("mean hint faults", |r| r.hint_faults as f64, 0.05, 0.0),
        ("mean page migrations", |r| r.page_migrations as f64, 0.05, 0.0),
    ];
    for (name, metric, rel, abs) in metrics {
        let e: Vec<f64> = exact.iter().map(metric).collect();
        let f: Vec<f64> = fast.iter().map(metric).collect();
        let (m, se) = mean_se(&e);
        within(&what(name), m, mean(&f), rel, abs.max(3.0 * se));
    }
    exact
}

#[test]
fn random_and_gather_entries_match_the_exact_engine() {
    check("server-a-4n", "is-like", 16, 0.01, "first-touch", &[7]);
    check("server-a-4n", "ua-like", 16, 0.02, "first-touch", &[7]);
}

#[test]
fn owner_escapes_and_strided_sweeps_match_the_exact_engine() {
    check("server-a-4n", "cg-like", 16, 0.01, "first-touch", &[7]);
    check("amd48", "bt-like", 16, 0.01, "first-touch", &[7]);
    check("server-b-8n", "ft-like", 16, 0.01, "round-4k", &[7]);
    // Strided sweeps over pages interleaved page by page: a run of one node per page.
    check("server-b-8n", "sp-like", 16, 0.01, "round-4k", &[7]);
}

/// Reusing a contention solve while demands stay within `demand_tolerance` (docs/
/// simulator.md, "The fast engine") moves a run by about the solver's own precision, far less
/// than the 2 % the fast engine promises against the exact one.
#[test]
fn reused_solves_move_a_run_by_the_solvers_precision() {
    for (machine, workload, policy) in [("server-a-4n", "mg-like", "first-touch"), ("amd48", "bt-like", "round-4k")] {
        let mut never = scenario(machine, workload, 16, 0.01, policy, EngineKind::Fast);
        never.sim.memory.demand_tolerance = 0.0;
        let reuse = scenario(machine, workload, 16, 0.01, policy, EngineKind::Fast);
        assert_eq!(reuse.sim.memory.demand_tolerance, 1e-3, "the documented default");
        let (a, b) = (run_one(&never, 7).unwrap(), run_one(&reuse, 7).unwrap());
        within(&format!("{workload} on {machine}: run time"), a.exec_time_s, b.exec_time_s, 0.002, 0.0);
        assert_eq!(a.accesses, b.accesses);
    }
}

#[test]
fn walk_only_steps_match_the_exact_engine() {
    // A triad, stencils with neighbours, and lu-like's pipelined (p2p) stages, whose stage
    // boundaries cap a block.
    check("server-a-4n", "stream-like", 16, 0.01, "first-touch", &[7]);
    check("server-a-4n", "mg-like", 16, 0.01, "first-touch", &[7]);
    check("server-b-8n", "lu-like", 16, 0.01, "first-touch", &[7]);
}

#[test]
fn dynamic_policies_match_the_exact_engine() {
    check("server-a-4n", "cg-like", 16, 0.01, "autonuma", &[7, 8, 9]);
}

/// Random references over segments with pages armed for hinting faults: the fast engine
/// draws which reference faults (docs/simulator.md, "The fast engine"). The scanner's delays
/// are cut so that the short run arms pages again and again.
#[test]
fn random_references_to_armed_pages_match_the_exact_engine() {
    let scan = [("scan_delay_ms", 2), ("scan_period_min_ms", 2), ("scan_period_max_ms", 20)];
    let exact = check_with("server-a-4n", "is-like", 16, 0.1, "autonuma", &scan, &[7, 8, 9]);
    assert!(
        exact.iter().all(|r| r.hint_faults > 1000),
        "the scanner armed pages: {:?}",
        exact.iter().map(|r| r.hint_faults).collect::<Vec<_>>()
    );
}

#[test]
fn the_fast_engine_is_deterministic() {
    let s = scenario("server-a-4n", "is-like", 8, 0.005, "first-touch", EngineKind::Fast);
    assert_eq!(run_one(&s, 3).unwrap(), run_one(&s, 3).unwrap());
}
