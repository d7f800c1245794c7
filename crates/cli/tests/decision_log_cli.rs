//! `numalab sim --decision-log`: one JSON line per decision, in run order, whatever `--jobs`.

use assert_cmd::Command;

fn numalab() -> Command {
    Command::cargo_bin("numalab").unwrap()
}

fn log_of(dir: &std::path::Path, jobs: &str) -> String {
    let path = dir.join(format!("d{jobs}.jsonl"));
    numalab()
        .args(["sim", "--machine", "xeon-e5-2690-2s", "--workload", "master-slave", "--scale", "0.01", "--policy", "autonuma"])
        .args(["--set", "policy.scan_delay_ms=5", "--set", "policy.scan_period_min_ms=5", "--runs", "2", "--jobs", jobs])
        .args(["--format", "json", "--decision-log", path.to_str().unwrap()])
        .assert()
        .success();
    std::fs::read_to_string(path).unwrap()
}

#[test]
fn the_decision_log_is_in_run_order_and_independent_of_jobs() {
    let dir = tempfile::tempdir().unwrap();
    let one = log_of(dir.path(), "1");
    assert_eq!(one, log_of(dir.path(), "2"), "same bytes with --jobs 1 and 2");
    let runs: Vec<u64> = one.lines().map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["run"].as_u64().unwrap()).collect();
    assert!(runs.windows(2).all(|w| w[0] <= w[1]) && runs.contains(&0) && runs.contains(&1), "runs in order");
    assert!(one.contains(r#""kind":"migrate_page""#) && one.contains(r#""event":"hint_fault""#));
    assert!(one.contains(r#""kind":"scan_step""#) && one.contains(r#""event":"task_tick""#));
    // No part files are left behind.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
}

#[test]
fn an_unwritable_decision_log_is_an_error() {
    let out = numalab()
        .args(["sim", "--machine", "server-a-2n", "--workload", "cg-like", "--scale", "0.001", "--runs", "1"])
        .args(["--decision-log", "/nonexistent-dir/d.jsonl"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/nonexistent-dir/"), "{err}");
}

#[test]
fn iterations_shorten_a_run_without_shortening_its_phases() {
    let run = |extra: &[&str]| {
        let out = numalab()
            .args(["sim", "--machine", "server-a-2n", "--workload", "stream-like", "--scale", "0.01", "--threads", "4", "--runs", "1"])
            .args(extra)
            .args(["--format", "json"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        (doc["runs"][0]["exec_time_s"].as_f64().unwrap(), doc["config"]["workload"]["definition"]["workload"]["run"]["iterations"].clone())
    };
    let (full, it_full) = run(&[]);
    let (two, it_two) = run(&["--iterations", "2"]);
    assert_eq!(it_full, 10);
    assert_eq!(it_two, 2, "recorded in the resolved config");
    assert!(two < full / 3.0, "2 of 10 iterations: {two} vs {full}");
    let out = numalab().args(["sim", "--iterations", "0", "--runs", "1"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--iterations must be at least 1"));
}
