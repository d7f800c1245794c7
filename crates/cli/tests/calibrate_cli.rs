//! `numalab calibrate`: probes beside published figures, JSON and table output, machine files,
//! `--check` and errors.

use assert_cmd::Command;
use serde_json::Value;

fn numalab() -> Command {
    Command::cargo_bin("numalab").unwrap()
}

fn json(args: &[&str]) -> Value {
    let out = numalab().args(args).args(["--format", "json"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn json_has_every_probe_and_the_chase_matches_the_preset() {
    let v = json(&["calibrate", "--machine", "xeon-e5-2690-2s"]);
    assert_eq!(v["machine"], "xeon-e5-2690-2s");
    let figures: Vec<&str> = v["comparisons"].as_array().unwrap().iter().map(|c| c["figure"].as_str().unwrap()).collect();
    assert_eq!(
        figures,
        [
            "stream_triad_all_gbps",
            "stream_triad_socket_gbps",
            "stream_triad_thread_gbps",
            "latency_local_ns",
            "latency_remote_ns",
            "latency_contended_local_ns",
            "latency_contended_remote_ns"
        ]
    );
    let pairs = v["pairs"].as_array().unwrap();
    assert_eq!(pairs.len(), 4);
    for p in pairs {
        let (sim, preset) = (p["simulated_ns"].as_f64().unwrap(), p["preset_ns"].as_f64().unwrap());
        assert!((sim - preset).abs() / preset < 1e-3, "{p}");
    }
    assert_eq!(v["loaded"].as_array().unwrap().len(), 9);
    // The contended probe: one row per CPU node, every core chasing node 0; the preset states
    // no latency_ns_contended, so there is nothing beside them.
    let rows = v["contended"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(v["contended_node"], 0);
    assert!(rows.iter().all(|r| r["machine_ns"].is_null() && r["threads"] == 8), "{rows:?}");
    assert!(rows[1]["simulated_ns"].as_f64().unwrap() > rows[0]["simulated_ns"].as_f64().unwrap());
}

#[test]
fn table_prints_published_figures_with_their_relative_error() {
    let out = numalab().args(["calibrate", "--machine", "xeon-e5-2690-2s", "--format", "table"]).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.lines().any(|l| l.starts_with("latency_local_ns")), "{text}");
    assert!(text.contains("chase_ns[1][0]"), "{text}");
    // amd48 stores published figures: the row shows the figure, the error and a source note.
    let out = numalab().args(["calibrate", "--machine", "amd48", "--format", "table"]).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let row = text.lines().find(|l| l.starts_with("latency_local_ns")).unwrap();
    assert!(row.contains("70.90") && row.contains('%') && row.contains("[2]"), "{row}");
    let notes = String::from_utf8(out.stderr).unwrap();
    assert!(notes.contains("[2] Xen NUMA-policy paper, Table 3"), "{notes}");
}

#[test]
fn a_machine_file_is_accepted_and_check_fails_beyond_the_tolerance() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("box.toml");
    let text = numalab().args(["machine", "show", "xeon-e5-2690-1n", "--format", "table"]).output().unwrap().stdout;
    let mut text = String::from_utf8(text).unwrap();
    // Drop the preset's own figures, then state a local latency 50 % off the preset's 85 ns.
    if let Some(start) = text.find("\n[published]\n") {
        let end = text[start..].find("\n[[nodes]]").map(|e| start + e + 1).unwrap_or(text.len());
        text.replace_range(start..end, "");
    }
    let at = text.find("[[nodes]]").unwrap();
    text.insert_str(at, "[published]\ntolerance_pct = 5.0\nlatency_local_ns = { value = 170.0, source = \"test\" }\n\n");
    std::fs::write(&path, &text).unwrap();
    let p = path.to_str().unwrap();
    let v = json(&["calibrate", "--machine", p]);
    let local = v["comparisons"].as_array().unwrap().iter().find(|c| c["figure"] == "latency_local_ns").unwrap().clone();
    assert!((local["rel_error"].as_f64().unwrap() + 0.5).abs() < 1e-3, "{local}");
    let out = numalab().args(["calibrate", "--machine", p, "--check", "--format", "json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "a failed check is a result, status 1 (docs/calibration.md)");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("off its published figures beyond 5%: latency_local_ns"), "{err}");
}

#[test]
fn unknown_machine_is_a_one_line_error_naming_the_presets() {
    let out = numalab().args(["calibrate", "--machine", "no-such-box"]).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("error: unknown machine preset 'no-such-box'; valid presets: amd48,"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
}

#[test]
fn a_published_figure_without_a_source_is_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.toml");
    let text = String::from_utf8(numalab().args(["machine", "show", "server-a-2n", "--format", "table"]).output().unwrap().stdout).unwrap();
    let at = text.find("[[nodes]]").unwrap();
    let mut text = text;
    text.insert_str(at, "[published]\ntolerance_pct = 5.0\nlatency_local_ns = { value = 80.0, source = \" \" }\n\n");
    std::fs::write(&path, &text).unwrap();
    let out = numalab().args(["calibrate", "--machine", path.to_str().unwrap()]).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("published.latency_local_ns.source must name where the figure was published"), "{err}");
}
