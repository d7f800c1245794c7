//! The DUnX application presets (docs/workloads.md, "DUnX application presets") run on gp1000:
//! under `dunx` and under static first-touch placement the simulator issues exactly the
//! closed-form references of their class rows, places every page, and first-touch keeps all
//! private (PR) references local.

use numalab_core::machine::presets;
use numalab_sim::{run_one, RunMetrics, Scenario, SimConfig};
use numalab_workload::schema::WorkloadFile;
use numalab_workload::{compile, presets as wp, CompileOptions};
use std::sync::Arc;

const APPS: [&str; 8] = ["msort-like", "gauss-like", "hh3d-like", "hough-like", "psolu-like", "wave-like", "fish-like", "mandel-like"];

fn scenario(name: &str, policy: &str) -> (WorkloadFile, Scenario) {
    let m = Arc::new(presets::load("gp1000").unwrap());
    let file = wp::load(name).unwrap();
    let program = compile(&file, name, &m, &CompileOptions::default()).unwrap();
    let s = Scenario {
        machine: m,
        program: Arc::new(program),
        policy: numalab_policy::find(policy).unwrap(),
        policy_config: toml::Table::new(),
        sim: SimConfig::default(),
    };
    (file, s)
}

/// (all references, writes, PR references) of one run, from the class rows alone: a shared page
/// has `M` sharers, each making `R + W` references; PR pages are per process (8 processes).
fn closed_form(f: &WorkloadFile) -> (u64, u64, u64) {
    let (mut refs, mut writes, mut pr) = (0, 0, 0);
    for r in &f.region {
        let pairs = r.pages.unwrap() * if r.dunx_class == "PR" { 8 } else { u64::from(r.sharers.unwrap()) };
        let (rd, wr) = (r.reads.unwrap() as u64, r.writes.unwrap() as u64);
        refs += pairs * (rd + wr);
        writes += pairs * wr;
        if r.dunx_class == "PR" {
            pr += pairs * (rd + wr);
        }
    }
    (refs, writes, pr)
}

fn check_counts(name: &str, f: &WorkloadFile, s: &Scenario, r: &RunMetrics) {
    let (refs, writes, _) = closed_form(f);
    assert_eq!(r.accesses, refs, "{name}: references");
    assert_eq!(r.write_matrix.iter().flatten().sum::<u64>(), writes, "{name}: writes");
    assert_eq!(r.unplaced_pages, 0, "{name}: every page is referenced");
    assert_eq!(r.placed_pages, s.program.total_pages, "{name}: every page placed once");
    assert!(r.exec_time_s > 0.0);
}

#[test]
fn every_app_preset_runs_under_first_touch_with_private_references_local() {
    for name in APPS {
        let (f, s) = scenario(name, "first-touch");
        let r = run_one(&s, 3).unwrap();
        check_counts(name, &f, &s, &r);
        let local: u64 = (0..r.access_matrix.len()).map(|i| r.access_matrix[i][i]).sum();
        let (_, _, pr) = closed_form(&f);
        assert!(local >= pr, "{name}: {local} local references < {pr} PR references");
        assert_eq!((r.page_migrations, r.replica_pages), (0, 0), "{name}: static placement moves nothing");
    }
}

#[test]
fn every_app_preset_runs_under_dunx() {
    for name in APPS {
        let (f, s) = scenario(name, "dunx");
        let r = run_one(&s, 3).unwrap();
        check_counts(name, &f, &s, &r);
        assert_eq!(r.refused_decisions, 0, "{name}");
        // Read-shared classes: the default recent_mod replicates pages never modified.
        if f.region.iter().any(|x| x.dunx_class == "RO") {
            assert!(r.policy_counters["faults_replication"] > 0, "{name}: RO pages replicated: {:?}", r.policy_counters);
        }
    }
    let (_, s) = scenario("fish-like", "dunx");
    assert_eq!(run_one(&s, 3).unwrap(), run_one(&s, 3).unwrap(), "same seed, same run");
}
