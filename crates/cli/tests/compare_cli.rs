//! `numalab compare`: one `sim` result per policy in the order given, the table and CSV, bad
//! policy lists, and `--set` scoped to a policy by name. Runs are tiny, as in sim_cli.rs.

mod common;

use assert_cmd::Command;
use common::*;

#[test]
fn compare_json_has_one_sim_result_per_policy_in_order() {
    let doc = json_of(&[&["compare", "--policies", "round-4k,first-touch,round-1g"][..], &SMALL].concat());
    assert_eq!(doc["schema"], "numalab.compare/2");
    assert_eq!(doc["numalab_version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(doc["seed"], 1);
    assert_eq!(doc["baseline"], "round-4k");
    let results = doc["results"].as_array().unwrap();
    let order: Vec<&str> = results.iter().map(|r| r["config"]["policy"]["name"].as_str().unwrap()).collect();
    assert_eq!(order, ["round-4k", "first-touch", "round-1g"]);
    let norm = doc["normalised_exec_time"].as_array().unwrap();
    assert_eq!(norm.len(), 3);
    assert_eq!(f(&norm[0]), 1.0, "the baseline normalises to exactly 1");
    let base = f(&results[0]["summary"]["exec_time_s"]["mean"]);
    for (r, n) in results.iter().zip(norm) {
        assert_eq!(r["schema"], "numalab.sim/2");
        assert_eq!(r["runs"].as_array().unwrap().len(), 2);
        // (Within an ulp or two: serde_json's default float parser is not exactly round-trip.)
        let want = f(&r["summary"]["exec_time_s"]["mean"]) / base;
        assert!((f(n) - want).abs() <= 4.0 * f64::EPSILON * want, "{n} vs {want}");
        // Same seeds for every policy.
        assert_eq!(r["runs"][0]["seed"], results[0]["runs"][0]["seed"]);
        assert_eq!(r["runs"][1]["seed"], results[0]["runs"][1]["seed"]);
    }
    // First touch keeps the stream local; interleaving does not.
    assert!(f(&norm[1]) < 1.0, "{norm:?}");

    // Each result is what `sim` gives for that policy alone.
    let alone = json_of(&[&["sim", "--policy", "first-touch"][..], &SMALL].concat());
    assert_eq!(results[1], alone);
}

#[test]
fn compare_table_and_csv_have_one_row_per_policy() {
    let args = [&["compare", "--policies", "first-touch,round-4k,round-1g"][..], &SMALL].concat();
    let text = stdout_of(&[&args[..], &["--format", "table"]].concat());
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0].split_whitespace().collect::<Vec<_>>(),
        ["policy", "mean_s", "stddev_s", "cv_%", "nmmd_%", "vs_first", "local_ratio", "imbalance_%", "link_load_%", "thread_migs"]
    );
    assert_eq!(lines.len(), 2 + 3, "{text}");
    let rows: Vec<Vec<&str>> = lines[2..5].iter().map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(rows.iter().map(|r| r[0]).collect::<Vec<_>>(), ["first-touch", "round-4k", "round-1g"]);
    assert_eq!(rows[0][5], "1.000");
    let err = stderr_of(&[&args[..], &["--format", "table"]].concat());
    assert!(err.lines().any(|l| l.starts_with("stream-like on amd48, scale 0.001, 2 runs per policy, seed 1;")), "{err}");

    let csv = parse_csv(&stdout_of(&[&args[..], &["--format", "csv"]].concat()));
    assert_eq!(csv.len(), 1 + 3, "{csv:?}");
    assert_eq!(csv[0][0], "policy");
    assert_eq!(csv[0].len(), 10);
    assert_eq!(csv[1..].iter().map(|r| r[0].as_str()).collect::<Vec<_>>(), ["first-touch", "round-4k", "round-1g"]);
    assert_eq!(csv[1][5], "1.000");
}

#[test]
fn compare_rejects_bad_policy_lists() {
    assert_eq!(
        error_of(&[&["compare", "--policies", "first-touch,round-4k,first-touch"][..], &SMALL].concat()),
        "error: --policies lists 'first-touch' twice"
    );
    assert_eq!(
        error_of(&[&["compare", "--policies", "first-touch,nosuch"][..], &SMALL].concat()),
        format!("error: unknown policy 'nosuch'; valid policies: {}", POLICIES.join(", "))
    );
}

#[test]
fn compare_scopes_policy_settings_by_name() {
    let out = Command::cargo_bin("numalab")
        .unwrap()
        .args([
            "compare",
            "--policies",
            "first-touch,bind",
            "--set",
            "policy.bind.nodes=[0]",
            "--scale",
            "0.001",
            "--threads",
            "4",
            "--runs",
            "1",
            "--format",
            "json",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let results = doc["results"].as_array().unwrap();
    assert_eq!(results[1]["config"]["policy"]["nodes"], serde_json::json!([0]));
    assert!(results[0]["config"]["policy"].get("nodes").is_none(), "first-touch has no node set");
    let pages = results[1]["runs"][0]["pages_per_node"].as_array().unwrap();
    assert!(pages[1..].iter().all(|p| p == 0), "bind to node 0 keeps every page there: {pages:?}");
}
