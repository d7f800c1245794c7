//! `numalab model mva|roofline|classes`: happy paths checked against the spec's values, and bad
//! input checked for a helpful message and a non-zero exit.

use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::Value;
use std::io::Write;

fn numalab() -> Command {
    Command::cargo_bin("numalab").unwrap()
}

fn json_of(args: &[&str]) -> Value {
    let out = numalab().args(args).args(["--format", "json"]).assert().success().get_output().stdout.clone();
    serde_json::from_slice(&out).expect("valid JSON")
}

fn close(v: &Value, want: f64, tol: f64) -> bool {
    let got = v.as_f64().unwrap_or(f64::NAN);
    (got - want).abs() <= tol * want.abs().max(1e-300)
}

fn write_file(dir: &tempfile::TempDir, name: &str, text: &str) -> String {
    let path = dir.path().join(name);
    std::fs::File::create(&path).unwrap().write_all(text.as_bytes()).unwrap();
    path.to_str().unwrap().to_string()
}

const SS_ONLY: &str =
    "name = \"ss-only\"\n[SS]\npages = 8\nreads = 5000\nwrites = 5000\nrun_granularity = 2500\nwrite_granularity = 2500\nsharers = 2\n";

#[test]
fn mva_all_policies_reproduce_the_spec_table() {
    let doc = json_of(&[
        "model",
        "mva",
        "--machine",
        "gp1000",
        "--classes",
        "dunx-synth-8c",
        "--policy",
        "all",
        "--e-ss",
        "0.5",
        "--e-sp",
        "0.1",
    ]);
    assert_eq!(doc["schema"], "numalab.model-mva/1");
    let points = doc["points"].as_array().unwrap();
    assert_eq!(points.len(), 6);
    // docs/model.md §3.1, built-in set: policy, p_l, R (us).
    let want = [
        ("static", 0.316454, 7.36023),
        ("cache", 1.0, 7.81086),
        ("mor", 1.0, 9.32577),
        ("ideal", 0.905787, 3.63506),
        ("rc", 0.905787, 3.66450),
        ("error", 0.906797, 4.07988),
    ];
    for (p, (name, p_l, r)) in points.iter().zip(want) {
        assert_eq!(p["policy"], name);
        assert!(close(&p["p_l"], p_l, 1e-5), "{name}: p_l {}", p["p_l"]);
        assert!(close(&p["r_us"], r, 1e-5), "{name}: r_us {}", p["r_us"]);
        assert!(close(&p["refs"], 594_400.0, 1e-12));
        let predicted = p["refs"].as_f64().unwrap() * p["r_us"].as_f64().unwrap() * 1e-6;
        assert!(close(&p["predicted_s"], predicted, 1e-12));
        for key in ["q_m", "q_r", "q_c", "n", "tau", "e_ss", "w_l_us", "w_r_us"] {
            assert!(p.get(key).is_some(), "{name}: missing {key}");
        }
    }
    assert!(close(&points[3]["q_m"], 1.34590e-5, 1e-5));
    assert!(close(&points[4]["q_r"], 6.74293e-5, 1e-5));
    assert_eq!(points[3]["ideal_treatments"]["SP"], "S");
    assert_eq!(points[3]["ideal_treatments"]["SS"], "Mg");
}

#[test]
fn mva_error_sweep_prints_one_row_per_point() {
    let doc = json_of(&["model", "mva", "--machine", "gp1000", "--policy", "error", "--sweep", "e_sp=0:0.5:0.05"]);
    let points = doc["points"].as_array().unwrap();
    assert_eq!(points.len(), 11);
    let mut last_r = 0.0;
    for (i, p) in points.iter().enumerate() {
        assert!(close(&p["e_sp"], i as f64 * 0.05, 1e-9), "{}", p["e_sp"]);
        let r = p["r_us"].as_f64().unwrap();
        assert!(r > last_r, "R grows with e_sp");
        last_r = r;
    }
    // e_sp = 0 is the ideal policy.
    assert!(close(&points[0]["r_us"], 3.63506, 1e-5));

    // Table and CSV: a header and one line per point.
    numalab()
        .args(["model", "mva", "--policy", "error", "--sweep", "e_sp=0:0.5:0.05", "--format", "csv"])
        .assert()
        .success()
        .stdout(predicate::str::starts_with("policy,e_sp,p_l,q_m,q_r,q_c,w_l_us,w_r_us,r_us,predicted_s\n"))
        .stdout(predicate::function(|s: &str| s.lines().count() == 12))
        .stdout(predicate::str::contains("\nerror,0.15,0.919919,"));
    numalab()
        .args(["model", "mva", "--policy", "ideal", "--format", "table"])
        .assert()
        .success()
        .stdout(predicate::str::contains("ideal   0.905787"))
        .stdout(predicate::str::contains("3.63506"))
        .stderr(predicate::str::contains("ideal treatments (first point): PR local, RO Rp, RM Rp, SS Mg, SP S"));
}

#[test]
fn mva_grid_sweep_and_overrides() {
    let doc = json_of(&["model", "mva", "--policy", "static,ideal", "--sweep", "n=8,16", "--sweep", "tau=1,2", "--network", "queue"]);
    let points = doc["points"].as_array().unwrap();
    assert_eq!(points.len(), 8);
    assert_eq!(points[0]["n"], 8);
    assert_eq!(points[7]["n"], 16);
    assert!(close(&points[7]["tau"], 2.0, 0.0));
    assert_eq!(points[0]["network"], "queue");
    assert!(points.iter().all(|p| p["w_n_us"].as_f64().unwrap() >= 0.0));
    // A file-based class set with an explicit node count of 16 and a class-parameter sweep.
    let dir = tempfile::tempdir().unwrap();
    let path = write_file(&dir, "ss.toml", SS_ONLY);
    let doc = json_of(&["model", "mva", "--classes", &path, "--policy", "ideal", "--sweep", "SS.r=1200,2500"]);
    let points = doc["points"].as_array().unwrap();
    assert_eq!(points[0]["SS.run_granularity"], 1200.0);
    // r = 1200 < k_mig,SS = 1304.35 keeps SS static; 2500 migrates it.
    assert_eq!(points[0]["ideal_treatments"]["SS"], "S");
    assert_eq!(points[1]["ideal_treatments"]["SS"], "Mg");
    assert_eq!(doc["classes"]["origin"], path.as_str());
}

#[test]
fn roofline_knl_values() {
    let doc = json_of(&["model", "roofline", "--machine", "knl-7250-flat", "--ai", "0.1,1,10,20,50"]);
    assert_eq!(doc["schema"], "numalab.model-roofline/1");
    assert!(close(&doc["peak_gflops"], 3046.4, 1e-12));
    assert_eq!(doc["tiers"][0]["tier"], "dram");
    assert_eq!(doc["tiers"][1]["tier"], "mcdram");
    assert!(close(&doc["tiers"][0]["ridge_flop_per_byte"], 30.464, 1e-12));
    let p = doc["points"].as_array().unwrap();
    let att = |i: usize, t: usize| &p[i]["tiers"][t]["attainable_gflops"];
    assert!(close(att(1, 0), 100.0, 1e-9));
    assert!(close(att(1, 1), 400.0, 1e-9));
    assert!(close(att(2, 1), 3046.4, 1e-9));
    assert!(close(att(4, 0), 3046.4, 1e-9));
    assert!(close(&p[1]["gain"], 4.0, 1e-9));
    assert!(close(&p[3]["gain"], 1.5232, 1e-9));
    assert_eq!(p[2]["tiers"][1]["bound"], "compute");
    assert_eq!(p[2]["tiers"][0]["bound"], "memory");

    numalab()
        .args(["model", "roofline", "--machine", "knl-7250-flat", "--ai", "0.1,1,10", "--format", "table"])
        .assert()
        .success()
        .stdout(predicate::str::contains("gain_mcdram_over_dram"))
        .stderr(predicate::str::contains("ridge point I* = 7.616 flop/B"));
    // Sustained bandwidth and an explicit compute ceiling.
    let doc = json_of(&["model", "roofline", "--ai", "1", "--bandwidth", "sustained", "--peak-gflops", "1000"]);
    assert!(close(&doc["points"][0]["tiers"][0]["attainable_gflops"], 88.4, 1e-12));
    assert!(close(&doc["peak_gflops"], 1000.0, 0.0));
}

#[test]
fn classes_preset_prints_loadable_toml() {
    let out = numalab().args(["model", "classes", "dunx-synth-8c"]).assert().success().get_output().stdout.clone();
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains("[SP]"));
    let dir = tempfile::tempdir().unwrap();
    let path = write_file(&dir, "copy.toml", &text);
    let doc = json_of(&["model", "mva", "--classes", &path, "--policy", "static"]);
    assert!(close(&doc["points"][0]["r_us"], 7.36023, 1e-5));
}

#[track_caller]
fn fails_with(args: &[&str], needle: &str) {
    numalab().args(args).assert().failure().code(2).stderr(predicate::str::contains(needle));
}

#[test]
fn unknown_presets_are_rejected() {
    fails_with(&["model", "mva", "--machine", "nope"], "unknown machine preset 'nope'; valid presets: amd48");
    fails_with(&["model", "mva", "--classes", "nope"], "unknown page-class preset 'nope'; valid presets: dunx-synth-8c");
    fails_with(&["model", "roofline", "--machine", "nope", "--ai", "1"], "unknown machine preset 'nope'");
    fails_with(&["model", "classes", "nope"], "unknown page-class preset 'nope'");
    fails_with(&["model", "mva", "--classes", "/nonexistent/c.toml"], "cannot read page-class file /nonexistent/c.toml");
    fails_with(&["model", "mva", "--policy", "first-touch"], "unknown policy 'first-touch'; valid policies: static, cache");
}

#[test]
fn malformed_class_files_name_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let bad = write_file(&dir, "bad.toml", &SS_ONLY.replace("reads = 5000", "reads = = 5000"));
    fails_with(&["model", "mva", "--classes", &bad], &format!("{bad}:4:"));
    let unknown = write_file(&dir, "unknown.toml", &SS_ONLY.replace("sharers = 2", "sharers = 2\nshares = 3"));
    fails_with(&["model", "mva", "--classes", &unknown], &format!("{unknown}:9: unknown field `shares`"));
    let table = write_file(&dir, "table.toml", &SS_ONLY.replace("[SS]", "[XS]"));
    fails_with(&["model", "mva", "--classes", &table], "unknown field `XS`, expected one of");
    let rule = write_file(&dir, "rule.toml", &SS_ONLY.replace("write_granularity = 2500", "write_granularity = 10"));
    fails_with(
        &["model", "mva", "--classes", &rule],
        &format!("{rule}:7: class SS, field 'write_granularity': 10 is below run_granularity 2500"),
    );
    let missing = write_file(&dir, "missing.toml", &SS_ONLY.replace("sharers = 2\n", ""));
    fails_with(&["model", "mva", "--classes", &missing], "missing field `sharers`");
}

#[test]
fn bad_sweeps_and_values_are_rejected() {
    fails_with(&["model", "mva", "--sweep", "e_sp=0:0.5"], "bad sweep 'e_sp=0:0.5': a range needs exactly START:END:STEP");
    fails_with(&["model", "mva", "--sweep", "e_sp"], "bad sweep 'e_sp': expected NAME=START:END:STEP");
    fails_with(&["model", "mva", "--sweep", "e_sp=0:1:-0.1"], "STEP must be > 0");
    fails_with(&["model", "mva", "--sweep", "bogus=1,2"], "parameter 'bogus' = NaN: unknown parameter");
    fails_with(&["model", "mva", "--sweep", "e_sp=0,x"], "'x' is not a number");
    fails_with(&["model", "mva", "--policy", "error", "--sweep", "e_sp=0:2:1"], "parameter 'e_sp' = 2: must lie in [0, 1]");
    fails_with(&["model", "mva", "--sweep", "n=2,8"], "class RO, field 'sharers': 8 sharers on a 2-node machine; need M <= n");
    fails_with(&["model", "mva", "--tau=-1"], "parameter 'tau' = -1: must be finite and >= 0");
    fails_with(&["model", "roofline", "--ai", "1,x"], "bad --ai value 'x': not a number");
    fails_with(&["model", "roofline", "--ai", "0"], "bad --ai value '0': arithmetic intensity must be finite and > 0");
    fails_with(
        &["model", "roofline", "--machine", "gp1000", "--ai", "1"],
        "machine 'gp1000': no compute ceiling (peak_gflops_dp); give it explicitly with --peak-gflops",
    );
    fails_with(
        &["model", "mva", "--machine", "amd48"],
        "no migration, replication and coherency-fault costs (costs_ms); give it explicitly with --c-mig",
    );
    fails_with(&["model", "mva", "--machine", "knl-7250-flat"], "node 1 lacks CPUs or memory");
}

#[test]
fn validate_small_instance_agrees_with_the_simulator() {
    let doc = json_of(&["model", "validate", "--machine", "gp1000", "--instances", "synth-sp", "--seeds", "2"]);
    assert_eq!(doc["schema"], "numalab.model-validate/1");
    let inst = &doc["instances"][0];
    assert_eq!(inst["name"], "synth-sp");
    let (pred, mean) = (inst["predicted_s"].as_f64().unwrap(), inst["simulated_mean_s"].as_f64().unwrap());
    let (lo, hi) = (inst["ci99"][0].as_f64().unwrap(), inst["ci99"][1].as_f64().unwrap());
    assert!(lo <= mean && mean <= hi);
    assert!(close(&inst["rel_error"], (pred - mean) / mean, 1e-12));
    // SP only: every synth phase is all-local or all-remote, so the barriers cost nothing the
    // model misses; agreement within 2%.
    assert!(inst["rel_error"].as_f64().unwrap().abs() < 0.02, "{inst}");
    assert!(close(&inst["p_l_simulated"], 0.125, 1e-12));
}

#[test]
fn validate_rejects_bad_arguments() {
    fails_with(&["model", "validate", "--instances", "bogus"], "unknown instance 'bogus'; valid: synth, synth-5c");
    fails_with(&["model", "validate", "--seeds", "1"], "--seeds must be at least 2");
    fails_with(&["model", "validate", "--machine", "amd48"], "no migration, replication and coherency-fault costs");
}

/// The repository's synth instance files (studies/dunx, docs/results/dunx.md).
fn instance(name: &str) -> String {
    format!("{}/../../studies/dunx/{name}.toml", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn a_synth_workload_file_gives_its_class_rows() {
    // synth-5c keeps every row of the dunx-synth preset, which are the §8(c) classes: the same
    // predictions as the built-in class set, for every policy.
    let from_file = json_of(&["model", "mva", "--classes", &instance("synth-5c"), "--policy", "all"]);
    let built_in = json_of(&["model", "mva", "--classes", "dunx-synth-8c", "--policy", "all"]);
    let (a, b) = (from_file["points"].as_array().unwrap(), built_in["points"].as_array().unwrap());
    assert_eq!(a.len(), 6);
    for (x, y) in a.iter().zip(b) {
        assert_eq!(x["policy"], y["policy"]);
        assert_eq!(x["predicted_s"], y["predicted_s"], "{}", x["policy"]);
        assert_eq!(x["refs"], 594_400.0);
    }
    assert_eq!(from_file["classes"]["name"], "synth-5c");
    // An SS-only instance: ideal migrates (r = 2500 above k_mig = 1304.35).
    let ss = json_of(&["model", "mva", "--classes", &instance("synth-ss"), "--policy", "ideal"]);
    assert_eq!(ss["points"][0]["ideal_treatments"]["SS"], "Mg");
    assert_eq!(ss["points"][0]["refs"], 2500.0 * 4.0 * 2.0);
    // A workload file without DUnX classes is refused by name.
    let dir = tempfile::tempdir().unwrap();
    let f = write_file(
        &dir,
        "w.toml",
        "[workload]\nname = \"plain\"\nthreads = 2\n[[region]]\nname = \"a\"\npages = 4\nsharing = \"shared_rw\"\n[[phase]]\nname = \"p\"\naccesses = [{ region = \"a\", who = \"all\", pattern = \"seq\" }]\n",
    );
    numalab().args(["model", "mva", "--classes", &f]).assert().failure().stderr(predicate::str::contains("region 'a' has no DUnX class"));
}

#[test]
fn measured_policy_times_the_given_mix() {
    // The ideal policy's own mix on the §8(c) classes gives the ideal R = 3.63506 us.
    let ideal = json_of(&["model", "mva", "--policy", "ideal"]);
    let p = &ideal["points"][0];
    let s = |k: &str| p[k].as_f64().unwrap().to_string();
    let doc =
        json_of(&["model", "mva", "--policy", "measured", "--p-l", &s("p_l"), "--q-m", &s("q_m"), "--q-r", &s("q_r"), "--q-c", &s("q_c")]);
    let m = &doc["points"][0];
    assert_eq!(m["policy"], "measured");
    assert!(close(&m["r_us"], 3.63506, 1e-5), "{}", m["r_us"]);
    assert_eq!(m["predicted_s"], p["predicted_s"]);
    // `all` stays the seed's six.
    let all = json_of(&["model", "mva", "--policy", "all"]);
    assert!(all["points"].as_array().unwrap().iter().all(|x| x["policy"] != "measured"));
    numalab()
        .args(["model", "mva", "--policy", "measured", "--p-l", "0.5"])
        .assert()
        .failure()
        .stderr(predicate::str::contains("policy measured needs all of --p-l, --q-m, --q-r and --q-c"));
    numalab()
        .args(["model", "mva", "--policy", "static", "--q-m", "0.001"])
        .assert()
        .failure()
        .stderr(predicate::str::contains("apply only to --policy measured"));
    numalab()
        .args(["model", "mva", "--policy", "measured", "--p-l", "1.5", "--q-m", "0", "--q-r", "0", "--q-c", "0"])
        .assert()
        .failure()
        .stderr(predicate::str::contains("parameter 'p_l' = 1.5: must lie in [0, 1]"));
}
