//! Golden outputs: what "same inputs and seed give the same bytes" promises, pinned across
//! builds. Each case runs a small simulation and compares its output byte for byte with a file
//! under `tests/golden/`. The cases cover what a change of arithmetic, event order or random
//! generator would move: a random access pattern with scheduler noise on, and the dynamic
//! policies' decisions.
//!
//! A change that moves these bytes on purpose (a new generator, a model change) regenerates
//! them with `NUMALAB_UPDATE_GOLDEN=1 cargo test -p numalab-cli --test golden` and says why in
//! its commit; docs/testing.md describes the procedure.

use assert_cmd::Command;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join("golden")
}

/// Compare `actual` with the golden file `name`, or write it when updating. On a mismatch the
/// actual bytes are left beside the build output so they can be diffed.
fn check(name: &str, actual: &str) {
    let path = golden_dir().join(name);
    if std::env::var_os("NUMALAB_UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(golden_dir()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e} (create it with NUMALAB_UPDATE_GOLDEN=1)", path.display()));
    if expected != actual {
        let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
        std::fs::write(&out, actual).unwrap();
        let line = expected.lines().zip(actual.lines()).position(|(a, b)| a != b).map_or_else(
            || format!("lengths differ ({} vs {} lines)", expected.lines().count(), actual.lines().count()),
            |i| format!("first difference at line {}", i + 1),
        );
        panic!("{} changed: {line}; actual output in {}", path.display(), out.display());
    }
}

fn stdout_of(args: &[&str]) -> String {
    let out = Command::cargo_bin("numalab").unwrap().args(args).output().unwrap();
    assert!(out.status.success(), "numalab {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// is-like (its key scatter is a random access pattern) for two runs with Poisson background
/// noise on `engine`: every per-thread generator stream and the scheduler's stream enter
/// these bytes.
fn is_like_run(engine: &str) -> String {
    let engine = format!("sim.engine={engine}");
    stdout_of(&[
        "sim",
        "--machine",
        "server-a-2n",
        "--workload",
        "is-like",
        "--scale",
        "0.05",
        "--iterations",
        "1",
        "--policy",
        "linux",
        "--runs",
        "2",
        "--seed",
        "7",
        "--set",
        &engine,
        "--format",
        "json",
    ])
}

#[test]
fn a_static_run_with_random_accesses_and_noise() {
    check("sim-is-like-linux.json", &is_like_run("exact"));
}

/// The fast engine on the same run (docs/simulator.md, "The fast engine"): its proportional
/// blocks and expected-count rounding are pinned as the exact engine's draws are above.
#[test]
fn the_fast_engine_on_random_accesses_and_noise() {
    check("sim-is-like-linux-fast.json", &is_like_run("fast"));
}

/// Run `policy` on master-slave (one thread first-touches what all threads then read) with
/// a decision log, on the exact engine unless `extra` names another; returns (result JSON,
/// decision log).
fn dynamic_run(policy: &str, extra: &[&str]) -> (String, String) {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("decisions.jsonl");
    let mut args = vec![
        "sim",
        "--machine",
        "xeon-e5-2690-2s",
        "--workload",
        "master-slave",
        "--scale",
        "0.01",
        "--policy",
        policy,
        "--engine",
        "exact",
    ];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--runs", "2", "--seed", "3", "--format", "json", "--decision-log", log.to_str().unwrap()]);
    let out = stdout_of(&args);
    (out, std::fs::read_to_string(&log).unwrap())
}

/// AutoNUMA with its scan delay shortened so that a 0.01-scale run scans, faults and migrates
/// (about 9,000 hint faults and 4,600 page migrations per run). The decision log (about 2 MB)
/// is pinned by its line count and SHA-256.
#[test]
fn autonuma_results_and_decisions() {
    let (out, log) = dynamic_run("autonuma", &["--set", "policy.scan_delay_ms=5", "--set", "policy.scan_period_min_ms=5"]);
    check("sim-master-slave-autonuma.json", &out);
    let digest = format!("lines {}\nsha256 {:x}\n", log.lines().count(), Sha256::digest(log.as_bytes()));
    check("sim-master-slave-autonuma.decisions.sha256", &digest);
}

/// The same AutoNUMA run on the fast engine, the default (docs/simulator.md, "The fast
/// engine"): its windows, hinting faults drawn for random references and faults in the order
/// of time are pinned as the exact engine's run is above.
#[test]
fn autonuma_on_the_fast_engine() {
    let (out, log) =
        dynamic_run("autonuma", &["--set", "policy.scan_delay_ms=5", "--set", "policy.scan_period_min_ms=5", "--set", "sim.engine=fast"]);
    assert!(out.contains("\"engine\": \"fast\""), "the run is on the fast engine");
    check("sim-master-slave-autonuma-fast.json", &out);
    let digest = format!("lines {}\nsha256 {:x}\n", log.lines().count(), Sha256::digest(log.as_bytes()));
    check("sim-master-slave-autonuma-fast.decisions.sha256", &digest);
}

/// Stable-NUMA's thread clustering and page-state decisions, the whole log.
#[test]
fn stable_numa_results_and_decisions() {
    let (out, log) = dynamic_run("stable-numa", &[]);
    assert!(!log.is_empty(), "stable-numa decides something in this run");
    check("sim-master-slave-stable-numa.json", &out);
    check("sim-master-slave-stable-numa.decisions.jsonl", &log);
}
