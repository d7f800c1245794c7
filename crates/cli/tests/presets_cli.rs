//! `numalab list|machine show|workload show`: every preset and policy named in each format,
//! TOML that round-trips through `sim`, and unknown names answered with the valid ones.

mod common;

use common::*;
use serde_json::Value;

fn names_in(doc: &Value, key: &str) -> Vec<String> {
    doc[key]
        .as_array()
        .unwrap_or_else(|| panic!("no array '{key}' in {doc}"))
        .iter()
        .map(|i| i["name"].as_str().unwrap().to_string())
        .collect()
}

/// First column of every data row of a text table (after the header and the rule).
fn table_first_column(text: &str, header_start: &str) -> Vec<String> {
    let mut lines = text.lines();
    let header = lines.next().expect("a header line");
    assert!(header.starts_with(header_start), "header: {header:?}");
    let rule = lines.next().expect("a rule line");
    assert!(rule.chars().all(|c| c == '-' || c == ' '), "rule: {rule:?}");
    // Continuation lines of a wrapped description start with spaces.
    lines.filter(|l| !l.starts_with(' ')).filter_map(|l| l.split_whitespace().next().map(String::from)).collect()
}

// ---------------------------------------------------------------------------------------
// list

#[test]
fn list_machines_table_and_json_name_every_preset() {
    let text = stdout_of(&["list", "machines", "--format", "table"]);
    let header = text.lines().next().unwrap();
    assert_eq!(header.split_whitespace().collect::<Vec<_>>(), ["name", "nodes", "sockets", "cores", "memory_gib", "tiers", "description"]);
    assert_eq!(table_first_column(&text, "name"), MACHINES);

    let doc = json_of(&["list", "machines"]);
    assert_eq!(doc["schema"], "numalab.list/1");
    assert_eq!(names_in(&doc, "machines"), MACHINES);
    let amd48 = &doc["machines"][0];
    assert_eq!(amd48["nodes"], 8);
    assert_eq!(amd48["sockets"], 4);
    assert_eq!(amd48["cores"], 48);
    assert_eq!(amd48["mem_bytes"], 128u64 << 30);
}

#[test]
fn long_descriptions_wrap() {
    let text = stdout_of(&["list", "machines", "--format", "table"]);
    let desc_col = text.lines().next().unwrap().find("description").unwrap();
    for l in text.lines() {
        assert!(l.chars().count() <= desc_col + 60, "{l}");
    }
    assert!(text.lines().any(|l| l.starts_with(' ')), "some description wraps:\n{text}");
}

#[test]
fn list_workloads_table_and_json_name_every_preset() {
    let text = stdout_of(&["list", "workloads", "--format", "table"]);
    assert_eq!(table_first_column(&text, "name"), WORKLOADS);
    let doc = json_of(&["list", "workloads"]);
    assert_eq!(doc["schema"], "numalab.list/1");
    assert_eq!(names_in(&doc, "workloads"), WORKLOADS);
    for w in doc["workloads"].as_array().unwrap() {
        assert!(!w["mimics"].as_str().unwrap().is_empty(), "{w}");
    }
}

#[test]
fn list_policies_table_json_and_csv_name_every_policy() {
    let text = stdout_of(&["list", "policies", "--format", "table"]);
    assert_eq!(table_first_column(&text, "name"), POLICIES);

    let doc = json_of(&["list", "policies"]);
    assert_eq!(doc["schema"], "numalab.list/1");
    assert_eq!(names_in(&doc, "policies"), POLICIES);
    let bind = &doc["policies"][3];
    assert_eq!(bind["kind"], "static");
    assert_eq!(bind["default_config"], serde_json::json!({"nodes": []}));

    // Summaries contain commas: the CSV must quote them so every row has three fields.
    let rows = parse_csv(&stdout_of(&["list", "policies", "--format", "csv"]));
    assert_eq!(rows[0], ["name", "kind", "summary"]);
    assert_eq!(rows.len(), 1 + POLICIES.len());
    for (row, name) in rows[1..].iter().zip(POLICIES) {
        assert_eq!(row.len(), 3, "{row:?}");
        assert_eq!(row[0], name);
    }
    assert_eq!(rows[2][2], "interleave every 4 KiB page over the nodes, whoever touches it (numactl --interleave)");
}

#[test]
fn list_rejects_an_unknown_category() {
    numalab().args(["list", "gadgets"]).assert().code(2).stderr(predicates::str::contains("invalid value 'gadgets' for '<WHAT>'"));
}

// ---------------------------------------------------------------------------------------
// machine show / workload show

#[test]
fn machine_show_toml_round_trips_through_sim() {
    let toml_text = stdout_of(&["machine", "show", "amd48"]);
    assert!(toml_text.starts_with("name = \"amd48\"\n"), "{toml_text}");
    let dir = tempfile::tempdir().unwrap();
    let path = write_file(&dir, "amd48-copy.toml", &toml_text);

    // Showing the file prints the same TOML again.
    assert_eq!(stdout_of(&["machine", "show", &path]), toml_text);

    // Simulating on the file gives the same machine config and the same runs as the preset.
    let args = |m: &str| {
        let mut a = vec!["sim", "--machine", m];
        a.extend(&SMALL[2..]);
        a.iter().map(|s| s.to_string()).collect::<Vec<_>>()
    };
    let a_preset = args("amd48");
    let a_file = args(&path);
    let preset = json_of(&a_preset.iter().map(String::as_str).collect::<Vec<_>>());
    let file = json_of(&a_file.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(file["config"]["machine"], preset["config"]["machine"]);
    assert_eq!(file["runs"], preset["runs"]);
    assert_eq!(file["summary"], preset["summary"]);
}

#[test]
fn machine_show_json_and_no_csv() {
    let m = json_of(&["machine", "show", "amd48"]);
    assert_eq!(m["name"], "amd48");
    assert_eq!(m["sockets"], 4);
    let nodes = m["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 8);
    assert_eq!(f(&nodes[0]["mem_bw_gbps"]), 12.5);
    assert_eq!(m["latency_ns"].as_array().unwrap().len(), 8);

    assert_eq!(error_of(&["machine", "show", "amd48", "--format", "csv"]), "error: machine show prints TOML or JSON, not CSV");
}

#[test]
fn workload_show_prints_the_preset_text_with_its_comments() {
    let text = stdout_of(&["workload", "show", "cg-like"]);
    assert_eq!(text, include_str!("../../workload/presets/cg-like.toml"));
    assert!(text.starts_with("# cg-like: NPB CG class C"));

    let doc = json_of(&["workload", "show", "cg-like"]);
    assert_eq!(doc["workload"]["name"], "cg-like");
    assert_eq!(doc["workload"]["threads"], "cores");
    assert!(doc["region"].as_array().unwrap().len() >= 2, "{doc}");
}

#[test]
fn show_unknown_presets_list_the_valid_names() {
    assert_eq!(
        error_of(&["machine", "show", "nosuch"]),
        format!("error: unknown machine preset 'nosuch'; valid presets: {}", MACHINES.join(", "))
    );
    assert_eq!(
        error_of(&["workload", "show", "nosuch"]),
        format!("error: unknown workload preset 'nosuch'; valid presets: {}", WORKLOADS.join(", "))
    );
}
