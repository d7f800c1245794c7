//! `numalab machine measure` on this host (docs/calibration.md, "Measuring your own machine"):
//! the refusal of a one-node host, `--single-node --quick` writing a machine file that
//! `machine show` and `calibrate` accept, and the usage errors. The numbers are this host's
//! and are not checked, except that they are positive and the pinning was kept.

use assert_cmd::Command;
use serde_json::Value;

fn numalab() -> Command {
    Command::cargo_bin("numalab").unwrap()
}

fn online_nodes() -> Vec<u32> {
    let text = std::fs::read_to_string("/sys/devices/system/node/online").unwrap_or_default();
    let mut v = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => v.extend(a.parse::<u32>().unwrap()..=b.parse().unwrap()),
            None => v.push(part.parse().unwrap()),
        }
    }
    v
}

#[test]
fn one_node_is_refused_without_single_node() {
    let nodes = online_nodes();
    if nodes.is_empty() {
        return; // a kernel without NUMA support: nothing to read
    }
    // One node: the host's only one, or one chosen with --nodes.
    let mut cmd = numalab();
    cmd.args(["machine", "measure", "--quick"]);
    let expected = if nodes.len() == 1 {
        "error: this host has one NUMA node; nothing to measure between nodes (give --single-node to measure the one node alone)"
    } else {
        cmd.args(["--nodes", &nodes[0].to_string()]);
        "error: --nodes selects one node; nothing to measure between nodes (add --single-node to measure it alone)"
    };
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(String::from_utf8_lossy(&out.stderr).trim(), expected);
    assert!(out.stdout.is_empty());
}

#[test]
fn bad_selections_are_usage_errors() {
    if online_nodes().is_empty() {
        return;
    }
    let out = numalab().args(["machine", "measure", "--nodes", "250", "--single-node"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--nodes [250]: this host's online nodes are"), "{err}");
    let out = numalab().args(["machine", "measure", "--format", "csv", "--single-node"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("machine measure prints TOML or JSON, not CSV"));
}

#[test]
fn single_node_quick_writes_a_file_show_and_calibrate_accept() {
    let nodes = online_nodes();
    if nodes.is_empty() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("my-box.toml");
    let file = path.to_str().unwrap();
    let node = nodes[0].to_string();
    let out = numalab()
        .args(["machine", "measure", "--single-node", "--quick", "--nodes", &node, "--name", "my-box", "--out", file])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    // Progress, one line per step when standard error is not a terminal, then a summary.
    assert!(err.contains("measure: 1/") && err.contains("idle latency to node 0"), "{err}");
    assert!(err.contains("measured 1 node(s) in"), "{err}");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.starts_with("# numalab machine measured on host "), "{text}");
    assert!(text.contains("# QUICK measurement"), "{text}");

    let out = numalab().args(["machine", "show", file, "--format", "json"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let m: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(m["name"], "my-box");
    assert_eq!(m["nodes"].as_array().unwrap().len(), 1);
    let meas = &m["measured"];
    assert_eq!(meas["quick"], true);
    assert_eq!(meas["kernel_node_ids"], serde_json::json!([nodes[0]]));
    assert!(meas["date"].as_str().unwrap().len() == 10 && !meas["hostname"].as_str().unwrap().is_empty(), "{meas}");
    assert!(["hugetlb", "thp", "base"].contains(&meas["memory_backing"].as_str().unwrap()));
    let fields: Vec<&str> = meas["fields"].as_array().unwrap().iter().map(|f| f.as_str().unwrap()).collect();
    assert!(
        fields.contains(&"latency_ns[0][0]") && fields.contains(&"nodes[0].mem_bw_gbps") && fields.contains(&"published.latency_local_ns"),
        "{fields:?}"
    );
    let local = m["latency_ns"][0][0].as_f64().unwrap();
    assert!(local > 0.0 && local == meas["chase_ns"][0][0].as_f64().unwrap());
    assert!(m["nodes"][0]["mem_bw_gbps"].as_f64().unwrap() > 0.0);
    assert!(meas["read_gbps"][0][0].as_f64().unwrap() > 0.0);
    // Every measurement ran where it was pinned, on memory of the node.
    for c in meas["pinning"].as_array().unwrap() {
        let pinned = c["cpus_pinned"].as_array().unwrap();
        assert!(c["cpus_seen"].as_array().unwrap().iter().all(|s| pinned.contains(s)), "{c}");
        assert_eq!(c["pages_on_node"], c["pages_checked"], "{c}");
    }
    let source = m["published"]["latency_local_ns"]["source"].as_str().unwrap();
    assert!(source.starts_with(&format!("measured {} on host ", meas["date"].as_str().unwrap())), "{source}");

    let out = numalab().args(["calibrate", "--machine", file, "--format", "json"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let c: Value = serde_json::from_slice(&out.stdout).unwrap();
    let local_row = c["comparisons"].as_array().unwrap().iter().find(|r| r["figure"] == "latency_local_ns").unwrap().clone();
    // The simulated chase reproduces the measured local latency it was given.
    assert_eq!(local_row["published"].as_f64().unwrap(), local);
    assert!(local_row["rel_error"].as_f64().unwrap().abs() < 0.01, "{local_row}");
}
