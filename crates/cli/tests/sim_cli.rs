//! `numalab sim` (and `compare` where they share a flag): happy paths checked on values,
//! determinism, `--set` overrides, `--out`, output formats, and bad input checked for a
//! one-line `error: ...` that names the problem. (`compare` itself: compare_cli.rs; listings
//! and `show`: presets_cli.rs; `bench`: bench_cli.rs.)
//!
//! Runs are kept tiny (scale 0.0005-0.001, 4 threads, 2-3 runs) so the file is fast in a
//! debug build.

mod common;

use assert_cmd::Command;
use common::*;
use serde_json::Value;

/// Fast and with run-to-run variation (scheduler noise), so quantiles and `--jobs` matter.
const VARIED: [&str; 10] = ["--machine", "server-a-2n", "--workload", "is-like", "--scale", "0.0005", "--threads", "4", "--runs", "3"];

// ---------------------------------------------------------------------------------------
// sim

const RUN_FIELDS: [&str; 10] = [
    "seed",
    "exec_time_s",
    "local_access_ratio",
    "node_imbalance",
    "interconnect_load",
    "first_touch_faults",
    "hint_faults",
    "page_migrations",
    "thread_migrations",
    "tlb_shootdowns",
];

#[test]
fn sim_json_carries_schema_config_runs_and_summary() {
    let doc = json_of(&[&["sim", "--seed", "7"][..], &SMALL].concat());
    assert_eq!(doc["schema"], "numalab.sim/2");
    assert_eq!(doc["seed"], 7);
    assert_eq!(doc["numalab_version"], env!("CARGO_PKG_VERSION"));

    let config = &doc["config"];
    let mut keys: Vec<&str> = config.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort();
    assert_eq!(keys, ["machine", "policy", "sim", "workload"]);
    assert_eq!(config["machine"]["name"], "amd48");
    assert_eq!(config["machine"]["nodes"].as_array().unwrap().len(), 8);
    assert_eq!(config["workload"]["source"], "stream-like");
    assert_eq!(f(&config["workload"]["scale"]), 0.001);
    assert_eq!(config["workload"]["threads"], 4);
    assert_eq!(config["workload"]["definition"]["workload"]["name"], "stream-like");
    // The policy's defaults are filled in.
    assert_eq!(config["policy"], serde_json::json!({"name": "first-touch", "fallback": "next_round_robin"}));
    // The simulator's defaults, all of them.
    assert_eq!(config["sim"], serde_json::to_value(numalab_sim::SimConfig::default()).unwrap());

    let runs = doc["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    for r in runs {
        for k in RUN_FIELDS {
            assert!(r.get(k).is_some(), "run lacks '{k}': {r}");
        }
        assert!(f(&r["exec_time_s"]) > 0.0);
        let local = f(&r["local_access_ratio"]);
        assert!((0.0..=1.0).contains(&local), "{local}");
        // Every page is first touched once; 4 threads on their own nodes stream locally.
        assert!(r["first_touch_faults"].as_u64().unwrap() > 0);
        assert_eq!(local, 1.0);
        assert_eq!(r["node_accesses"].as_array().unwrap().len(), 8);
    }
    assert_ne!(runs[0]["seed"], runs[1]["seed"]);

    let s = &doc["summary"];
    assert_eq!(s["runs"], 2);
    let mean = runs.iter().map(|r| f(&r["exec_time_s"])).sum::<f64>() / 2.0;
    assert!((f(&s["exec_time_s"]["mean"]) - mean).abs() <= 1e-12 * mean);
}

#[test]
fn sim_summary_quantiles_are_ordered() {
    let doc = json_of(&[&["sim"][..], &VARIED].concat());
    let runs: Vec<f64> = doc["runs"].as_array().unwrap().iter().map(|r| f(&r["exec_time_s"])).collect();
    assert_eq!(runs.len(), 3);
    let e = &doc["summary"]["exec_time_s"];
    for k in ["mean", "median", "min", "max", "stddev", "cv", "nmmd", "q1", "q3"] {
        assert!(e[k].is_f64(), "summary.exec_time_s.{k} missing: {e}");
    }
    let (min, q1, median, q3, max) = (f(&e["min"]), f(&e["q1"]), f(&e["median"]), f(&e["q3"]), f(&e["max"]));
    assert!(min <= q1 && q1 <= median && median <= q3 && q3 <= max, "{e}");
    let lo = runs.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = runs.iter().copied().fold(0.0, f64::max);
    assert_eq!(min, lo);
    assert_eq!(max, hi);
    assert!(min < max, "runs should differ (scheduler noise): {runs:?}");
    let mut sorted = runs.clone();
    sorted.sort_by(f64::total_cmp);
    assert_eq!(median, sorted[1]);
    let mean = f(&e["mean"]);
    assert!(min <= mean && mean <= max);
    assert!(f(&e["stddev"]) > 0.0);
    assert!((f(&e["cv"]) - f(&e["stddev"]) / mean).abs() < 1e-12);
}

#[test]
fn sim_is_deterministic_across_repeats_and_jobs() {
    let base = [&["sim", "--format", "json"][..], &VARIED].concat();
    let first = stdout_of(&base);
    assert_eq!(stdout_of(&base), first, "same command, different output");
    let jobs1 = stdout_of(&[&base[..], &["--jobs", "1"]].concat());
    let jobs2 = stdout_of(&[&base[..], &["--jobs", "2"]].concat());
    assert_eq!(jobs1, first, "--jobs 1 differs from the default");
    assert_eq!(jobs2, jobs1, "--jobs 2 differs from --jobs 1");
}

/// `--engine fast` is `--set sim.engine=fast` (the same bytes) and the default, a `--set` given
/// too wins, and the fast engine's runs differ from the exact engine's (it draws no line for the random
/// references it charges by expectation). An unknown engine is refused by name.
#[test]
fn engine_flag_selects_the_engine_like_set() {
    let base = [&["sim", "--format", "json"][..], &VARIED].concat();
    let flag = stdout_of(&[&base[..], &["--engine", "fast"]].concat());
    let set = stdout_of(&[&base[..], &["--set", "sim.engine=fast"]].concat());
    assert_eq!(flag, set, "--engine fast differs from --set sim.engine=fast");
    let doc: Value = serde_json::from_str(&flag).unwrap();
    assert_eq!(doc["config"]["sim"]["engine"], "fast");
    assert_eq!(flag, stdout_of(&base), "--engine fast differs from the default");
    let exact = stdout_of(&[&base[..], &["--engine", "exact"]].concat());
    assert_eq!(serde_json::from_str::<Value>(&exact).unwrap()["config"]["sim"]["engine"], "exact");
    assert_ne!(exact, flag, "the engines gave the same runs");
    let both = stdout_of(&[&base[..], &["--engine", "exact", "--set", "sim.engine=fast"]].concat());
    assert_eq!(both, flag, "a --set sim.engine given with --engine wins");
    // clap's own message (several lines, exit status 2) names the value and the choices.
    let out = numalab().args([&base[..], &["--engine", "quick"]].concat()).assert().code(2).get_output().clone();
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("'quick'") && err.contains("[possible values: exact, fast]"), "{err}");
}

/// A `--set policy.NAME.KEY` whose NAME is a policy this command does not run is ignored, as
/// docs/config.md says, and a note on standard error says so: under `first-touch+carrefour`,
/// `policy.carrefour.*` does not reach Carrefour (its keys go under the combined name). The
/// output (results and resolved config) is the same as without the setting; a setting under
/// the combined name reaches the resolved config.
#[test]
fn a_set_for_a_policy_not_run_is_noted_and_ignored() {
    let base = [&["sim", "--format", "json", "--policy", "first-touch+carrefour", "--runs", "1"][..], &VARIED[..8]].concat();
    let plain = numalab().args(&base).assert().success().get_output().clone();
    let other =
        numalab().args([&base[..], &["--set", "policy.carrefour.enable_migration=false"]].concat()).assert().success().get_output().clone();
    let err = String::from_utf8(other.stderr).unwrap();
    assert!(
        err.contains("note: --set policy.carrefour.enable_migration=false: policy 'carrefour' is not run here (first-touch+carrefour)")
            && err.contains("policy.first-touch+carrefour.KEY"),
        "{err}"
    );
    assert_eq!(plain.stdout, other.stdout, "an ignored setting changed the run");
    let own = numalab()
        .args([&base[..], &["--set", "policy.first-touch+carrefour.interval_ms=1"]].concat())
        .assert()
        .success()
        .get_output()
        .clone();
    assert!(!String::from_utf8(own.stderr).unwrap().contains("not run here"));
    let own: Value = serde_json::from_slice(&own.stdout).unwrap();
    assert_eq!(own["config"]["policy"]["interval_ms"], 1, "the combined policy's own key did not reach it");
    // compare: a setting for one of the compared policies is no note; one for another is.
    let cmp = [
        "compare",
        "--format",
        "json",
        "--policies",
        "first-touch,bind",
        "--runs",
        "1",
        "--set",
        "policy.bind.nodes=[0]",
        "--set",
        "policy.dunx.recent_mod=3",
    ];
    let out = numalab().args([&cmp[..], &VARIED[..8]].concat()).assert().success().get_output().clone();
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(!err.contains("policy.bind.nodes"), "{err}");
    assert!(
        err.contains(
            "note: --set policy.dunx.recent_mod=3: policy 'dunx' is not run here (first-touch, bind), so the setting is ignored\n"
        ),
        "{err}"
    );
}

#[test]
fn different_seeds_give_different_run_seeds() {
    let seeds = |seed: &str| -> Vec<u64> {
        let doc = json_of(&[&["sim", "--seed", seed][..], &SMALL].concat());
        assert_eq!(doc["seed"], seed.parse::<u64>().unwrap());
        doc["runs"].as_array().unwrap().iter().map(|r| r["seed"].as_u64().unwrap()).collect()
    };
    let a = seeds("1");
    let b = seeds("2");
    assert_eq!(a.len(), 2);
    assert_ne!(a[0], a[1]);
    assert!(a.iter().all(|s| !b.contains(s)), "{a:?} vs {b:?}");
}

#[test]
fn sim_table_and_csv_have_the_header_and_one_row_per_run() {
    let header = ["run", "seed", "exec_time_s", "local_ratio", "imbalance_%", "link_load_%", "ft_faults", "thread_migs", "cross_node"];
    let doc = json_of(&[&["sim"][..], &SMALL].concat());
    let seeds: Vec<String> = doc["runs"].as_array().unwrap().iter().map(|r| r["seed"].to_string()).collect();

    let text = stdout_of(&[&["sim", "--format", "table"][..], &SMALL].concat());
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0].split_whitespace().collect::<Vec<_>>(), header);
    assert_eq!(lines.len(), 2 + 2, "{text}");
    // The summary and legends are notes: standard error.
    let err = stderr_of(&[&["sim", "--format", "table"][..], &SMALL].concat());
    assert!(err.lines().any(|l| l.starts_with("first-touch on amd48 (2 runs): exec time mean ")), "{err}");

    let rows = parse_csv(&stdout_of(&[&["sim", "--format", "csv"][..], &SMALL].concat()));
    assert_eq!(rows[0], header);
    assert_eq!(rows.len(), 3, "{rows:?}");
    for (i, row) in rows[1..].iter().enumerate() {
        assert_eq!(row.len(), header.len());
        assert_eq!(row[0], i.to_string());
        assert_eq!(row[1], seeds[i]);
        assert_eq!(row[3], "1.000");
        let t: f64 = row[2].parse().unwrap();
        assert!((t - f(&doc["runs"][i]["exec_time_s"])).abs() <= 5e-7);
    }
}

#[test]
fn default_format_is_json_when_piped() {
    let text = stdout_of(&[&["sim"][..], &SMALL].concat());
    let doc: Value = serde_json::from_str(&text).expect("JSON by default on a pipe");
    assert_eq!(doc["schema"], "numalab.sim/2");
}

// ---------------------------------------------------------------------------------------
// --set

#[test]
fn set_node_bandwidth_shows_in_config_and_slows_the_run() {
    let base = json_of(&[&["sim"][..], &SMALL].concat());
    let slow = json_of(&[&["sim", "--set", "machine.nodes[1].mem_bw_gbps=5"][..], &SMALL].concat());
    let nodes = slow["config"]["machine"]["nodes"].as_array().unwrap();
    assert_eq!(f(&nodes[1]["mem_bw_gbps"]), 5.0);
    assert_eq!(f(&nodes[0]["mem_bw_gbps"]), 12.5, "only node 1 changes");
    let t0 = f(&base["summary"]["exec_time_s"]["mean"]);
    let t1 = f(&slow["summary"]["exec_time_s"]["mean"]);
    assert!(t1 > 1.1 * t0, "a 5 GB/s node should slow the stream: {t0} -> {t1}");
}

#[test]
fn set_sim_epoch() {
    let doc = json_of(&[&["sim", "--set", "sim.epoch_us=10"][..], &SMALL].concat());
    assert_eq!(f(&doc["config"]["sim"]["epoch_us"]), 10.0);
    assert_eq!(doc["runs"].as_array().unwrap().len(), 2);
}

#[test]
fn set_policy_nodes_binds_every_page() {
    let doc = json_of(&[&["sim", "--policy", "bind", "--set", "policy.nodes=[0]"][..], &SMALL].concat());
    assert_eq!(doc["config"]["policy"], serde_json::json!({"name": "bind", "nodes": [0]}));
    for r in doc["runs"].as_array().unwrap() {
        let served: Vec<u64> = r["node_accesses"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect();
        assert!(served[0] > 0);
        assert!(served[1..].iter().all(|&n| n == 0), "{served:?}");
        let pages: Vec<u64> = r["pages_per_node"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect();
        assert!(pages[1..].iter().all(|&n| n == 0), "{pages:?}");
        // 1 of the 4 threads runs on node 0.
        let local = f(&r["local_access_ratio"]);
        assert!((local - 0.25).abs() < 1e-3, "{local}");
    }
}

#[test]
fn set_unknown_keys_are_named() {
    let sim = |set: &str| error_of(&[&["sim", "--set", set][..], &SMALL].concat());
    let e = sim("machine.bogus=1");
    assert!(e.starts_with("error: machine (after --set): bogus: unknown field `bogus`, expected one of `name`"), "{e}");
    let e = sim("machine.nodes[0].bogus=1");
    assert!(e.starts_with("error: machine (after --set): nodes[0].bogus: unknown field `bogus`, expected one of `socket`"), "{e}");
    let e = sim("sim.nope=1");
    assert!(e.starts_with("error: [sim] (after --set): nope: unknown field `nope`, expected one of `epoch_us`"), "{e}");
    assert_eq!(sim("nonsense=1"), "error: --set: unknown top-level key 'nonsense' (valid: machine, workload, policy, sim)");
    assert_eq!(sim("workload.bogus=1"), "error: --set: unknown key 'workload.bogus' (valid: source, scale, threads, definition)");
    assert_eq!(sim("policy.bogus=1"), "error: policy 'first-touch': unknown field `bogus`, expected `fallback`");
}

#[test]
fn set_errors_name_the_index_and_the_syntax() {
    let sim = |set: &str| error_of(&[&["sim", "--set", set][..], &SMALL].concat());
    assert_eq!(
        sim("machine.nodes[9].mem_bw_gbps=1"),
        "error: override 'machine.nodes[9].mem_bw_gbps=1': index 9 is out of range (the array has 8 entries)"
    );
    assert_eq!(sim("machine.nodes[1].mem_bw_gbps"), "error: override 'machine.nodes[1].mem_bw_gbps' is not of the form key=value");
    assert_eq!(sim("sim.epoch_us=-1"), "error: invalid simulator setting: sim.epoch_us = -1 µs: must be a finite number in [1, 1000000]");
    assert_eq!(sim("sim.epoch_us=\"x\""), "error: [sim] (after --set): epoch_us: invalid type: string \"x\", expected f64");
    // A wrong type deep in a tree names the key path, not only the table.
    assert_eq!(
        sim("sim.sched.background_in_nr_running=yes"),
        "error: [sim] (after --set): sched.background_in_nr_running: invalid type: string \"yes\", expected a boolean"
    );
    assert_eq!(sim("machine.clock_ghz=abc"), "error: machine (after --set): clock_ghz: invalid type: string \"abc\", expected f64");
    assert_eq!(
        sim("sim.memory.demand_tolerance=2"),
        "error: invalid simulator setting: sim.memory.demand_tolerance = 2 : must be a finite number in [0, 1]"
    );
}

// ---------------------------------------------------------------------------------------
// --out

#[test]
fn out_file_format_follows_the_extension_and_stdout_stays_empty() {
    let dir = tempfile::tempdir().unwrap();
    let json_path = dir.path().join("r.json");
    let csv_path = dir.path().join("r.csv");
    let txt_path = dir.path().join("r.txt");
    for p in [&json_path, &csv_path] {
        numalab().args([&["sim", "--out", p.to_str().unwrap()][..], &SMALL].concat()).assert().success().stdout("").stderr("");
    }
    // A table's notes (summary, legends) go to standard error, not into the file.
    numalab().args([&["sim", "--out", txt_path.to_str().unwrap()][..], &SMALL].concat()).assert().success().stdout("");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    assert_eq!(doc["schema"], "numalab.sim/2");
    assert_eq!(doc, json_of(&[&["sim"][..], &SMALL].concat()));

    let rows = parse_csv(&std::fs::read_to_string(&csv_path).unwrap());
    assert_eq!(rows[0][0], "run");
    assert_eq!(rows.len(), 3);

    let table = std::fs::read_to_string(&txt_path).unwrap();
    assert!(table.starts_with("  run "), "{table}");

    // No temporary files are left behind.
    let mut left: Vec<String> =
        std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    left.sort();
    assert_eq!(left, ["r.csv", "r.json", "r.txt"]);

    // An explicit --format wins over the extension.
    let p = dir.path().join("forced.csv");
    numalab()
        .args([&["compare", "--policies", "first-touch,round-4k", "--format", "json", "--out", p.to_str().unwrap()][..], &SMALL].concat())
        .assert()
        .success()
        .stdout("");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    assert_eq!(doc["schema"], "numalab.compare/2");
}

// ---------------------------------------------------------------------------------------
// bad input

#[test]
fn unknown_presets_and_policies_list_the_valid_names() {
    assert_eq!(
        error_of(&["sim", "--machine", "nosuch", "--scale", "0.001", "--runs", "1"]),
        format!("error: unknown machine preset 'nosuch'; valid presets: {}", MACHINES.join(", "))
    );
    assert_eq!(
        error_of(&["sim", "--workload", "nosuch", "--scale", "0.001", "--runs", "1"]),
        format!("error: unknown workload preset 'nosuch'; valid presets: {}", WORKLOADS.join(", "))
    );
    assert_eq!(
        error_of(&[&["sim", "--policy", "nosuch"][..], &SMALL].concat()),
        format!("error: unknown policy 'nosuch'; valid policies: {}", POLICIES.join(", "))
    );
}

#[test]
fn malformed_machine_toml_names_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_file(&dir, "bad.toml", "name = \"x\"\nsockets = 1\nsmt = = 2\n");
    let e = error_of(&[&["sim", "--machine", &path][..], &SMALL[2..]].concat());
    assert!(e.starts_with(&format!("error: {path}:3: ")), "{e}");
    assert!(e.contains("invalid string"), "{e}");
    // `machine show` reports it the same way.
    assert_eq!(error_of(&["machine", "show", &path]), e);

    let missing = dir.path().join("missing.toml");
    let missing = missing.to_str().unwrap();
    let e = error_of(&[&["sim", "--machine", missing][..], &SMALL[2..]].concat());
    assert!(e.starts_with(&format!("error: cannot read {missing}: ")), "{e}");
}

#[test]
fn malformed_workload_toml_names_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_file(&dir, "w.toml", "[workload]\nname = \"x\"\nthreads = = 2\n");
    let e = error_of(&[&["sim", "--workload", &path, "--machine", "amd48", "--runs", "1"][..]].concat());
    assert!(e.starts_with(&format!("error: {path}:3: ")), "{e}");
    assert_eq!(error_of(&["workload", "show", &path]), e);
}

#[test]
fn machine_toml_with_an_unknown_key_names_key_and_line() {
    let toml_text = stdout_of(&["machine", "show", "amd48"]);
    let mut lines: Vec<&str> = toml_text.lines().collect();
    let smt = lines.iter().position(|l| *l == "smt = 1").unwrap();
    lines.insert(smt + 1, "frobnicate = 3");
    let dir = tempfile::tempdir().unwrap();
    let path = write_file(&dir, "unk.toml", &(lines.join("\n") + "\n"));
    let e = error_of(&[&["sim", "--machine", &path][..], &SMALL[2..]].concat());
    assert!(e.starts_with(&format!("error: {path}:{}: unknown field `frobnicate`, expected one of `name`", smt + 2)), "{e}");
}

#[test]
fn zero_threads_runs_and_jobs_are_rejected() {
    let base = ["--machine", "amd48", "--workload", "stream-like", "--scale", "0.001"];
    let with = |cmd: &str, extra: &[&str]| error_of(&[&[cmd][..], &base, extra].concat());
    assert_eq!(with("sim", &["--threads", "0", "--runs", "1"]), "error: stream-like: threads must be at least 1 (got 0)");
    assert_eq!(with("compare", &["--threads", "0", "--runs", "1"]), "error: stream-like: threads must be at least 1 (got 0)");
    for cmd in ["sim", "compare"] {
        assert_eq!(with(cmd, &["--threads", "4", "--runs", "0"]), "error: --runs must be at least 1");
        assert_eq!(with(cmd, &["--threads", "4", "--runs", "1", "--jobs", "0"]), "error: --jobs must be at least 1");
    }
    assert_eq!(
        error_of(&["sim", "--workload", "stream-like", "--machine", "amd48", "--scale", "0", "--runs", "1"]),
        "error: stream-like: --scale 0 must be a positive number"
    );
}

#[test]
fn oversize_footprint_says_by_how_much_and_suggests_a_scale() {
    let e = error_of(&["sim", "--machine", "amd48", "--workload", "stream-like", "--scale", "100000", "--runs", "1"]);
    // stream-like is 3 x 640 MB at scale 1; amd48 has 128 GiB.
    let need: u64 = 3 * 640_000_000 * 100_000;
    let have: u64 = 128 << 30;
    let prefix =
        format!("error: stream-like: footprint {need} bytes exceeds the machine's memory ({have} bytes) by {} bytes (", need - have);
    assert!(e.starts_with(&prefix), "{e}");
    let pct = 100.0 * (need - have) as f64 / have as f64;
    assert!(e.contains(&format!("({pct:.1}%); try --scale ")), "{e}");
    let suggest: f64 = e.rsplit("try --scale ").next().unwrap().parse().unwrap();
    assert!(suggest > 0.0 && suggest < 100_000.0, "{e}");
    // The suggestion must actually fit.
    assert!(need as f64 / 100_000.0 * suggest <= have as f64, "suggested scale {suggest} still does not fit: {e}");
}

#[test]
fn bind_without_nodes_and_with_a_bad_node_are_rejected() {
    assert_eq!(
        error_of(&[&["sim", "--policy", "bind"][..], &SMALL].concat()),
        "error: policy 'bind': needs a node set, e.g. --set policy.nodes=[0,1]"
    );
    assert_eq!(
        error_of(&[&["sim", "--policy", "bind", "--set", "policy.nodes=[99]"][..], &SMALL].concat()),
        "error: policy 'bind' names node 99, but the machine has 8 nodes"
    );
    assert_eq!(
        error_of(&[&["compare", "--policies", "first-touch,bind"][..], &SMALL].concat()),
        "error: policy 'bind': needs a node set, e.g. --set policy.nodes=[0,1]"
    );
}

#[test]
fn the_engine_is_a_setting_recorded_with_the_result() {
    let run = |engine: &str| {
        json_of(&[
            "sim",
            "--machine",
            "server-a-2n",
            "--workload",
            "is-like",
            "--iterations",
            "1",
            "--scale",
            "0.01",
            "--runs",
            "1",
            "--set",
            &format!("sim.engine={engine}"),
        ])
    };
    let (exact, fast) = (run("exact"), run("fast"));
    assert_eq!(exact["config"]["sim"]["engine"], "exact");
    assert_eq!(fast["config"]["sim"]["engine"], "fast");
    // Every reference charged once either way.
    assert_eq!(exact["summary"]["accesses"], fast["summary"]["accesses"]);
    let out = numalab().args(["sim", "--machine", "amd48", "--workload", "lu-like", "--set", "sim.engine=quick"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown variant `quick`, expected `exact` or `fast`"));
    let doc =
        json_of(&["bench", "--slowdown", "--machine", "server-a-2n", "--workload", "lu-like", "--iterations", "1", "--engine", "fast"]);
    assert_eq!(doc["runs"][0]["engine"], "fast");
}

#[test]
fn sim_profile_speaks_the_live_profilers_schema_and_diffs() {
    let dir = tempfile::tempdir().unwrap();
    let mut paths = Vec::new();
    for policy in ["first-touch", "round-4k"] {
        let path = dir.path().join(format!("{policy}.json"));
        let out = Command::cargo_bin("numalab")
            .unwrap()
            .args(["sim", "--profile", "--policy", policy, "--scale", "0.001", "--threads", "4", "--runs", "1", "--out"])
            .arg(&path)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(doc["schema"], "numalab.profile/1");
        assert_eq!(doc["backend"], "sim");
        let event = |name: &str| doc["events"].as_array().unwrap().iter().find(|e| e["name"] == name).unwrap().clone();
        assert_eq!(event("cpu.cycles")["status"], "unsupported");
        assert!(event("cpu.cycles")["value"].is_null(), "an unsupported counter is never 0");
        let n = |name: &str| event(name)["value"].as_u64().unwrap();
        assert_eq!(n("node.read.local") + n("node.read.remote"), n("llc.read.miss"));
        assert_eq!(n("node.write.local") + n("node.write.remote"), n("llc.write.miss"));
        paths.push(path);
    }
    let out = Command::cargo_bin("numalab").unwrap().args(["profile", "diff"]).args(&paths).args(["--format", "json"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let diff: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(diff["schema"], "numalab.profile-diff/1");
}

/// The oracle policies (docs/policies/oracle.md) need the workload's page classes: refused in
/// one sentence on a workload without `runs` regions, and `--set policy.errors.ss` reaches the
/// error fraction on a synth instance (exactly half of its 8 SS pages wrong).
#[test]
fn oracle_policies_need_page_classes_and_take_their_fractions() {
    let err =
        error_of(&["sim", "--policy", "ideal", "--machine", "gp1000", "--workload", "stream-like", "--scale", "0.001", "--runs", "1"]);
    assert!(err.contains("policy 'ideal'") && err.contains("DUnX class") && err.contains("live agent"), "{err}");
    let ss = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../studies/dunx/synth-ss.toml");
    let doc = json_of(&[
        "sim",
        "--policy",
        "error",
        "--machine",
        "gp1000",
        "--workload",
        ss.to_str().unwrap(),
        "--set",
        "policy.errors.ss=0.5",
        "--runs",
        "1",
    ]);
    let c = &doc["runs"][0]["policy_counters"];
    assert_eq!((c["pages_ss"].as_u64(), c["wrong_pages_ss"].as_u64()), (Some(8), Some(4)), "{c}");
    // Four pages migrate on each of their 7 later runs; the four wrong ones stay put.
    assert_eq!(c["faults_migration"].as_u64(), Some(28), "{c}");
    assert_eq!(c["faults_static"].as_u64(), Some(4), "{c}");
}

/// `sim.sched.wait_policy` from the command line (docs/scheduler.md, "Barrier waits: spin,
/// then sleep"): the result file carries the policy and the machine's cycles per PAUSE, a
/// passive wait changes the run, and a name libgomp does not have is refused in one sentence.
#[test]
fn sim_takes_the_wait_policy_and_refuses_unknown_ones() {
    let run = |policy: &str| {
        json_of(&[
            "sim",
            "--machine",
            "server-a-2n",
            "--workload",
            "master-slave",
            "--scale",
            "0.002",
            "--runs",
            "1",
            "--set",
            &format!("sim.sched.wait_policy={policy}"),
        ])
    };
    let (fixed, passive) = (run("fixed"), run("libgomp-passive"));
    assert_eq!(fixed["config"]["sim"]["sched"]["wait_policy"], "fixed");
    assert_eq!(passive["config"]["sim"]["sched"]["wait_policy"], "libgomp-passive");
    assert_eq!(passive["config"]["machine"]["core"]["pause_cycles"], 140.0);
    assert_ne!(fixed["runs"], passive["runs"]);
    let out =
        numalab().args(["sim", "--machine", "amd48", "--workload", "lu-like", "--set", "sim.sched.wait_policy=gomp"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unknown variant `gomp`, expected one of `fixed`, `libgomp`, `libgomp-active`, `libgomp-passive`, `llvm`, `llvm-active`, `llvm-passive`"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}
