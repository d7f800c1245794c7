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
    let m = Arc::new(presets::load(machine).unwrap());
    let file = wp::load(workload).unwrap();
    let program = compile(&file, workload, &m, &CompileOptions { threads: Some(threads), scale }).unwrap();
    let mut sim = SimConfig { engine, ..SimConfig::default() };
    sim.sched.noise_rate_per_cpu_hz = 0.0;
    Scenario {
        machine: m,
        program: Arc::new(program),
        policy: numalab_policy::find(policy).unwrap(),
        policy_config: Default::default(),
        sim,
    }
}

/// The exact engine at two seeds and the fast one at the first: the two engines draw
/// different random streams, so a count may differ between them by what it differs between
/// two seeds of the exact engine.
fn runs(machine: &str, workload: &str, threads: u32, scale: f64, policy: &str) -> (RunMetrics, RunMetrics, RunMetrics) {
    let exact = scenario(machine, workload, threads, scale, policy, EngineKind::Exact);
    let fast = run_one(&scenario(machine, workload, threads, scale, policy, EngineKind::Fast), 7).unwrap();
    (run_one(&exact, 7).unwrap(), run_one(&exact, 8).unwrap(), fast)
}

fn within(what: &str, exact: f64, fast: f64, rel: f64, abs: f64) {
    let diff = (exact - fast).abs();
    assert!(diff <= rel * exact.abs() || diff <= abs, "{what}: exact {exact}, fast {fast} (allowed {rel} relative or {abs} absolute)");
}

fn check(machine: &str, workload: &str, threads: u32, scale: f64, policy: &str) {
    let (e, e2, f) = runs(machine, workload, threads, scale, policy);
    let spread = |a: u64, b: u64| 2.0 * (a as f64 - b as f64).abs() + 20.0;
    let what = |m: &str| format!("{workload} on {machine} under {policy}: {m}");
    assert_eq!(e.accesses, f.accesses, "{}", what("every reference is charged once"));
    for (row_a, row_w) in f.access_matrix.iter().zip(&f.write_matrix) {
        for (a, w) in row_a.iter().zip(row_w) {
            assert!(w <= a, "{}", what("a write is an access"));
        }
    }
    within(&what("run time"), e.exec_time_s, f.exec_time_s, 0.02, 0.0);
    within(&what("local ratio"), e.local_access_ratio.unwrap(), f.local_access_ratio.unwrap(), 0.0, 0.01);
    within(&what("hint faults"), e.hint_faults as f64, f.hint_faults as f64, 0.05, spread(e.hint_faults, e2.hint_faults));
    within(
        &what("page migrations"),
        e.page_migrations as f64,
        f.page_migrations as f64,
        0.05,
        spread(e.page_migrations, e2.page_migrations),
    );
    assert_eq!(f.pages_per_node.iter().sum::<u64>(), f.placed_pages, "{}", what("pages conserved"));
}

#[test]
fn random_and_gather_entries_match_the_exact_engine() {
    check("server-a-4n", "is-like", 16, 0.01, "first-touch");
    check("server-a-4n", "ua-like", 16, 0.02, "first-touch");
}

#[test]
fn owner_escapes_and_strided_sweeps_match_the_exact_engine() {
    check("server-a-4n", "cg-like", 16, 0.01, "first-touch");
    check("amd48", "bt-like", 16, 0.01, "first-touch");
    check("server-b-8n", "ft-like", 16, 0.01, "round-4k");
}

#[test]
fn dynamic_policies_match_the_exact_engine() {
    check("server-a-4n", "cg-like", 16, 0.01, "autonuma");
    check("xeon-e5-2690-2s", "is-like", 16, 0.01, "autonuma");
}

#[test]
fn the_fast_engine_is_deterministic() {
    let s = scenario("server-a-4n", "is-like", 8, 0.005, "first-touch", EngineKind::Fast);
    assert_eq!(run_one(&s, 3).unwrap(), run_one(&s, 3).unwrap());
}
