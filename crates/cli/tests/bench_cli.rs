//! `numalab bench`: the quick hot-loop scenarios and the slowdown of the NPB-like suite,
//! checked on the fields and on their relation to `numalab sim`'s runs.

mod common;

use common::*;

// ---------------------------------------------------------------------------------------
// bench

#[test]
fn bench_quick_smoke() {
    let doc = json_of(&["bench", "--quick"]);
    assert_eq!(doc["schema"], "numalab.bench/1");
    assert_eq!(doc["numalab_version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(doc["quick"], true);
    assert!(doc["bytes_per_page"].is_number() || doc["bytes_per_page"].is_null(), "{doc}");
    let scenarios = doc["scenarios"].as_array().unwrap();
    assert!(!scenarios.is_empty());
    for s in scenarios {
        assert!(!s["name"].as_str().unwrap().is_empty());
        assert!(POLICIES.contains(&s["policy"].as_str().unwrap()), "{s}");
        assert!(s["events"].as_u64().unwrap() > 0);
        assert!(s["simulated_pages"].as_u64().unwrap() > 0);
        for k in ["seconds", "events_per_s", "bare_loop_events_per_s", "ratio_to_bare"] {
            assert!(f(&s[k]) > 0.0, "{k}: {s}");
        }
        let ratio = f(&s["events_per_s"]) / f(&s["bare_loop_events_per_s"]);
        assert!((f(&s["ratio_to_bare"]) - ratio).abs() <= 1e-9 * ratio, "{s}");
        // The RNG-only limit is measured for random scenarios and only for them.
        let random = s["name"].as_str().unwrap().starts_with("random");
        assert_eq!(s["rng_limit_events_per_s"].is_number(), random, "{s}");
    }
    let names: Vec<&str> = scenarios.iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["seq-first-touch", "triad-first-touch", "random-round-4k"]);
}

#[test]
fn bench_slowdown_reports_wall_seconds_per_simulated_second() {
    let doc = json_of(&[
        "bench",
        "--slowdown",
        "--machine",
        "server-a-2n",
        "--workload",
        "lu-like",
        "--iterations",
        "1",
        "--policy",
        "linux",
        "--policy",
        "autonuma",
    ]);
    assert_eq!(doc["schema"], "numalab.bench-slowdown/1");
    let runs = doc["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    for (r, policy) in runs.iter().zip(["linux", "autonuma"]) {
        assert_eq!((r["workload"].as_str(), r["policy"].as_str(), r["iterations"].as_u64()), (Some("lu-like"), Some(policy), Some(1)));
        let (wall, sim) = (f(&r["wall_s"]), f(&r["simulated_s"]));
        assert!(wall > 0.0 && sim > 0.0, "{r}");
        assert!((f(&r["slowdown"]) - wall / sim).abs() <= 1e-9 * wall / sim, "{r}");
        // What the engine did (the fast engine, the default): steps, some of them windows,
        // solves, thread calls and blocks; `linux` arms no page for a hinting fault.
        assert_eq!(r["engine"], "fast", "the engine's name, beside its counts: {r}");
        let e = &r["engine_counts"];
        let count = |k: &str| e[k].as_u64().unwrap_or_else(|| panic!("engine_counts.{k} in {r}"));
        assert!(count("loop_steps") > 0 && count("windows") <= count("loop_steps"), "{r}");
        assert!(count("solves") > 0 && count("thread_calls") > 0 && count("fast_blocks") > 0, "{r}");
        // The steps of one epoch, by what kept each to one epoch: every one counted once.
        let one_epoch = e["one_epoch"].as_object().unwrap_or_else(|| panic!("engine_counts.one_epoch in {r}"));
        let counted: u64 = one_epoch.values().map(|v| v.as_u64().unwrap()).sum();
        assert_eq!(counted, count("loop_steps") - count("windows"), "{r}");
        assert!(one_epoch.contains_key("arrival") && one_epoch.contains_key("scheduler_cut"), "{r}");
        assert!(r["hint_faults"].is_u64(), "{r}");
    }
    assert_eq!(runs[0]["hint_faults"], 0, "{}", runs[0]);
    // The cost of a policy over the first one, workload by workload.
    let (first_cpu, second_cpu) = (f(&runs[0]["cpu_s"]), f(&runs[1]["cpu_s"]));
    assert!(first_cpu > 0.0 && second_cpu > 0.0 && first_cpu <= f(&runs[0]["wall_s"]) * 1.01, "{}", runs[0]);
    assert_eq!(f(&runs[0]["cpu_vs_first"]), 1.0);
    assert!((f(&runs[1]["cpu_vs_first"]) - second_cpu / first_cpu).abs() <= 1e-9 * second_cpu / first_cpu, "{}", runs[1]);
    // Its options belong to --slowdown only.
    let out = numalab().args(["bench", "--machine", "amd48"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--slowdown"));
    // Two run lengths, named.
    let out = numalab().args(["bench", "--slowdown", "--length", "long"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("'long'") && err.contains("short") && err.contains("study"), "{err}");
}

/// `--runs N` times the runs `numalab sim --seed 1 --runs N` makes: the row's simulated
/// seconds are theirs summed, its slowdown the runs' wall over simulated seconds, within the
/// least and largest of one run.
#[test]
fn bench_slowdown_over_several_runs_sums_the_runs_of_sim() {
    let scenario = ["--machine", "server-a-2n", "--workload", "lu-like", "--iterations", "1"];
    let bench = json_of(&[&["bench", "--slowdown", "--engine", "fast", "--runs", "2"][..], &scenario[..]].concat());
    let row = &bench["runs"][0];
    assert_eq!(row["runs"], 2);
    let sim = json_of(&[&["sim", "--seed", "1", "--runs", "2", "--jobs", "1", "--set", "sim.engine=fast"][..], &scenario[..]].concat());
    let simulated: f64 = sim["runs"].as_array().unwrap().iter().map(|r| f(&r["sim_time_s"])).sum();
    assert!((f(&row["simulated_s"]) - simulated).abs() <= 1e-9 * simulated, "{row} against {simulated}");
    let slowdown = f(&row["slowdown"]);
    assert!((slowdown - f(&row["wall_s"]) / simulated).abs() <= 1e-9 * slowdown, "{row}");
    assert!(f(&row["slowdown_min"]) <= slowdown && slowdown <= f(&row["slowdown_max"]), "{row}");
    let out = numalab().args(["bench", "--slowdown", "--runs", "0"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--runs"), "{}", String::from_utf8_lossy(&out.stderr));
}

/// `--set` reaches every run: without fast-forward windows every step is one epoch, counted
/// as such, and the document names the override. Keys the benchmark sets from its own
/// options, and unknown keys, are refused with the key named.
#[test]
fn bench_slowdown_set_overrides_every_run() {
    let scenario = ["bench", "--slowdown", "--machine", "server-a-2n", "--workload", "lu-like", "--iterations", "1"];
    let plain = json_of(&scenario);
    assert_eq!(plain["set"], serde_json::json!([]), "{plain}");
    assert!(plain["runs"][0]["engine_counts"]["windows"].as_u64().unwrap() > 0, "{plain}");
    let no_windows = json_of(&[&scenario[..], &["--set", "sim.fast_forward_max_us=0"][..]].concat());
    assert_eq!(no_windows["set"], serde_json::json!(["sim.fast_forward_max_us=0"]), "{no_windows}");
    let e = &no_windows["runs"][0]["engine_counts"];
    assert_eq!(e["windows"], 0, "{e}");
    assert_eq!(e["one_epoch"]["no_fast_forward"], e["loop_steps"], "{e}");
    let err = error_of(&[&scenario[..], &["--set", "sim.engine=exact"][..]].concat());
    assert!(err.contains("sim.engine") && err.contains("--engine"), "{err}");
    let err = error_of(&[&scenario[..], &["--set", "sim.no_such_knob=1"][..]].concat());
    assert!(err.contains("no_such_knob"), "{err}");
}
