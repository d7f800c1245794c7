//! `numalab study`: expansion, the cache, shards and merge (docs/study.md).

use assert_cmd::Command;
use serde_json::Value;
use std::path::Path;

fn numalab() -> Command {
    Command::cargo_bin("numalab").unwrap()
}

const STUDY: &str = r#"
[study]
name = "tiny"
machines = ["server-a-2n"]
workloads = ["cg-like", "stream-like"]
policies = ["first-touch", "round-4k"]
runs = 3
scale = 0.0005
threads = 4
[grid]
"sim.sched.noise_rate_per_cpu_hz" = [50.0, 0.0]
"#;

/// One cell run by both engines (`numalab study engines`).
const BOTH_ENGINES: &str = r#"
[study]
name = "engines"
machines = ["server-a-2n"]
workloads = ["is-like"]
policies = ["linux"]
runs = 2
scale = 0.001
threads = 4
[grid]
"sim.engine" = ["exact", "fast"]
"#;

fn write_study(dir: &Path, text: &str) -> std::path::PathBuf {
    let p = dir.join("s.toml");
    std::fs::write(&p, text).unwrap();
    p
}

/// Run the study `text` in `dir` and return the path of its numalab.study/1 document.
fn study_doc(dir: &Path, text: &str) -> std::path::PathBuf {
    let file = write_study(dir, text);
    let doc = dir.join("doc.json");
    numalab().args(["study", file.to_str().unwrap(), "--format", "json", "--out", doc.to_str().unwrap()]).assert().success();
    doc
}

fn run_json(args: &[&str]) -> (Value, String) {
    let out = numalab().args(args).args(["--format", "json"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    (serde_json::from_slice(&out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap())
}

#[test]
fn a_study_expands_caches_and_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let file = write_study(dir.path(), STUDY);
    let f = file.to_str().unwrap();
    let (doc, err) = run_json(&["study", f]);
    assert!(err.contains("8 cells, 24 jobs, 0 cached, 24 to run"), "{err}");
    assert!(err.contains(": ran 24 runs in ") && err.contains(" s wall, "), "{err}");
    assert_eq!(doc["schema"], "numalab.study/1");
    let cells = doc["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 8, "2 workloads x 2 policies x 2 grid points");
    assert_eq!(cells[0]["workload"], "cg-like");
    assert_eq!(cells[0]["grid"]["sim.sched.noise_rate_per_cpu_hz"], 50.0);
    assert_eq!(cells[1]["grid"]["sim.sched.noise_rate_per_cpu_hz"], 0.0);
    assert_eq!(cells[0]["config"]["sim"]["sched"]["noise_rate_per_cpu_hz"], 50.0, "the grid value reaches the config");
    assert_eq!(cells[0]["runs"].as_array().unwrap().len(), 3);
    assert_eq!(cells[0]["summary"]["runs"], 3);
    // Run k of every cell has the same seed (common random numbers).
    assert_eq!(cells[0]["runs"][2]["seed"], cells[5]["runs"][2]["seed"]);
    // Again: everything comes from the cache, same bytes.
    let (again, err) = run_json(&["study", f]);
    assert!(err.contains("24 cached, 0 to run"), "{err}");
    assert!(!err.contains(" runs in "), "nothing ran: {err}");
    assert_eq!(doc, again);
    // Extending the study (one more run per cell) computes only the new runs.
    write_study(dir.path(), &STUDY.replace("runs = 3", "runs = 4"));
    let (more, err) = run_json(&["study", f]);
    assert!(err.contains("32 jobs, 24 cached, 8 to run"), "{err}");
    assert_eq!(more["cells"][3]["runs"][1], doc["cells"][3]["runs"][1]);
}

/// `numalab study FILE --set KEY=VALUE` overrides a key in every cell after the file's own
/// `set`, records it in the document, and caches those runs apart from the file's.
#[test]
fn a_set_on_the_command_line_reaches_every_cell_and_the_document() {
    let dir = tempfile::tempdir().unwrap();
    let file = write_study(dir.path(), &STUDY.replace("runs = 3", "runs = 1"));
    let f = file.to_str().unwrap();
    let (plain, _) = run_json(&["study", f]);
    let (passive, err) = run_json(&["study", f, "--set", "sim.sched.wait_policy=libgomp-passive", "--set", "sim.epoch_us=40"]);
    assert!(err.contains("8 jobs, 0 cached, 8 to run"), "other runs than the file's own: {err}");
    assert_eq!(passive["study"]["study"]["set"], serde_json::json!(["sim.sched.wait_policy=libgomp-passive", "sim.epoch_us=40"]));
    for cell in passive["cells"].as_array().unwrap() {
        assert_eq!(cell["config"]["sim"]["sched"]["wait_policy"], "libgomp-passive");
        assert_eq!(cell["config"]["sim"]["epoch_us"], 40.0);
    }
    assert_eq!(plain["cells"][0]["config"]["sim"]["sched"]["wait_policy"], "fixed");
    let (again, err) = run_json(&["study", f]);
    assert!(err.contains("8 cached, 0 to run"), "{err}");
    assert_eq!(plain, again);
    let out = numalab().args(["study", f, "--set", "sim.sched.wait_policy=gomp"]).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unknown variant `gomp`"), "{err}");
}

#[test]
fn shards_merge_into_the_bytes_of_the_whole_study() {
    let dir = tempfile::tempdir().unwrap();
    let file = write_study(dir.path(), STUDY);
    let f = file.to_str().unwrap();
    let whole = dir.path().join("whole.json");
    numalab().args(["study", f, "--format", "json", "--out", whole.to_str().unwrap()]).assert().success();
    let mut shards = Vec::new();
    for i in 0..3 {
        let out = dir.path().join(format!("shard{i}.json"));
        let cache = dir.path().join(format!("cache{i}"));
        numalab()
            .args(["study", f, "--shard", &format!("{i}/3"), "--cache", cache.to_str().unwrap(), "--jobs", "1"])
            .args(["--format", "json", "--out", out.to_str().unwrap()])
            .assert()
            .success();
        let doc: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
        assert_eq!(doc["shard"], format!("{i}/3"));
        shards.push(out.to_str().unwrap().to_string());
    }
    let merged = dir.path().join("merged.json");
    numalab()
        .args(["study", "merge", &shards[2], &shards[0], &shards[1], "--format", "json", "--out", merged.to_str().unwrap()])
        .assert()
        .success();
    assert_eq!(std::fs::read(&whole).unwrap(), std::fs::read(&merged).unwrap(), "merge = the whole study, byte for byte");
}

#[test]
fn bad_studies_and_merges_fail_with_one_sentence() {
    let dir = tempfile::tempdir().unwrap();
    let file = write_study(dir.path(), &STUDY.replace("runs = 3", "runs = 0"));
    let out = numalab().args(["study", file.to_str().unwrap()]).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("study.runs must be at least 1"), "{err}");
    let file = write_study(dir.path(), &STUDY.replace("cg-like", "no-such-workload"));
    let err = String::from_utf8(numalab().args(["study", file.to_str().unwrap()]).output().unwrap().stderr).unwrap();
    assert!(err.contains("no-such-workload"), "{err}");
    let out = numalab().args(["study", file.to_str().unwrap(), "--shard", "3/3"]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("a shard is I/N"));
    // Documents of different studies do not merge.
    let a = dir.path().join("a.json");
    let b = dir.path().join("b.json");
    let one = write_study(dir.path(), &STUDY.replace("runs = 3", "runs = 1"));
    numalab().args(["study", one.to_str().unwrap(), "--format", "json", "--out", a.to_str().unwrap()]).assert().success();
    let two = write_study(dir.path(), &STUDY.replace("runs = 3", "runs = 2"));
    numalab().args(["study", two.to_str().unwrap(), "--format", "json", "--out", b.to_str().unwrap()]).assert().success();
    let err =
        String::from_utf8(numalab().args(["study", "merge", a.to_str().unwrap(), b.to_str().unwrap()]).output().unwrap().stderr).unwrap();
    assert!(err.contains("different studies"), "{err}");
}

/// A different executable (here the same one with a byte appended, which still runs) must not
/// reuse the results cached by another: the version number alone does not change per commit.
#[test]
fn a_rebuilt_numalab_does_not_reuse_the_cache() {
    let dir = tempfile::tempdir().unwrap();
    let file = write_study(dir.path(), &STUDY.replace("runs = 3", "runs = 1").replace(", \"stream-like\"", ""));
    let f = file.to_str().unwrap();
    let (first, err) = run_json(&["study", f]);
    assert!(err.contains("4 cells, 4 jobs, 0 cached, 4 to run"), "{err}");
    let (_, err) = run_json(&["study", f]);
    assert!(err.contains("4 cached, 0 to run"), "{err}");
    let original = assert_cmd::cargo::cargo_bin("numalab");
    let rebuilt = dir.path().join("numalab-rebuilt");
    let mut bytes = std::fs::read(&original).unwrap();
    bytes.push(0);
    std::fs::write(&rebuilt, bytes).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&rebuilt, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let out = std::process::Command::new(&rebuilt).args(["study", f, "--format", "json"]).output().unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(out.status.success(), "{err}");
    assert!(err.contains("0 cached, 4 to run"), "{err}");
    let mut second: Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut first = first;
    for (a, b) in first["cells"].as_array_mut().unwrap().iter_mut().zip(second["cells"].as_array_mut().unwrap()) {
        let (ka, kb) = (a["key"].take(), b["key"].take());
        assert_ne!(ka, kb, "the cell key names the build");
    }
    // Compare without printing two whole documents on failure.
    assert!(first == second, "the same code gives the same results, computed again");
}

/// The CSV table: one row per cell; `vs_first` is the mean time over the first policy's in the
/// same machine, workload and grid point, and its geometric mean goes in a note.
#[test]
fn the_csv_table_relates_each_policy_to_the_first() {
    let dir = tempfile::tempdir().unwrap();
    let file = write_study(dir.path(), &STUDY.replace("runs = 3", "runs = 2").replace(", \"stream-like\"", ""));
    let csv = dir.path().join("s.csv");
    let out = numalab().args(["study", file.to_str().unwrap(), "--format", "json", "--csv", csv.to_str().unwrap()]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let text = std::fs::read_to_string(&csv).unwrap();
    let rows: Vec<Vec<&str>> = text.lines().map(|l| l.split(',').collect()).collect();
    let col = |name: &str| rows[0].iter().position(|h| *h == name).unwrap_or_else(|| panic!("no column {name}: {:?}", rows[0]));
    let (vs, mean, nmmd, sd, tlb) = (col("vs_first"), col("mean_s"), col("nmmd_%"), col("local_ratio_sd"), col("tlb_shootdowns_per_s"));
    assert_eq!(rows.len(), 1 + 4, "header + 2 policies x 2 grid points");
    let cells = doc["cells"].as_array().unwrap();
    for (i, row) in rows[1..].iter().enumerate() {
        let c = &cells[i];
        // Cells are policy-major within a workload: first-touch's two grid points, then round-4k's.
        let base = &cells[i % 2];
        let expect = c["summary"]["exec_time_s"]["mean"].as_f64().unwrap() / base["summary"]["exec_time_s"]["mean"].as_f64().unwrap();
        assert_eq!(row[vs], format!("{expect:.3}"), "row {i}: {row:?}");
        assert_eq!(row[mean], format!("{:.6}", c["summary"]["exec_time_s"]["mean"].as_f64().unwrap()));
        assert_eq!(row[nmmd], format!("{:.2}", 100.0 * c["summary"]["exec_time_s"]["nmmd"].as_f64().unwrap()));
        let l: Vec<f64> = c["runs"].as_array().unwrap().iter().map(|r| r["local_access_ratio"].as_f64().unwrap()).collect();
        let m = (l[0] + l[1]) / 2.0;
        let sd_expect = (((l[0] - m).powi(2) + (l[1] - m).powi(2)) / 1.0).sqrt();
        assert_eq!(row[sd], format!("{sd_expect:.4}"));
        assert_eq!(row[tlb], "0.0", "static policies shoot down no TLBs");
    }
    assert_eq!(rows[1][vs], "1.000");
    // The table (from the cache now) carries the geometric means.
    let out = numalab().args(["study", file.to_str().unwrap(), "--format", "table"]).output().unwrap();
    let err = String::from_utf8(out.stdout).unwrap() + &String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("server-a-2n / round-4k: geometric mean of vs_first (mean time / first-touch's) over 2 cells:"), "{err}");
}

#[test]
fn a_grid_over_the_engine_writes_plain_values_to_the_csv() {
    let dir = tempfile::tempdir().unwrap();
    let file = write_study(dir.path(), BOTH_ENGINES);
    let out = numalab().args(["study", file.to_str().unwrap(), "--format", "csv"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let csv = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert!(lines[0].starts_with("machine,workload,policy,sim.engine,"), "{}", lines[0]);
    assert!(lines[1].starts_with("server-a-2n,is-like,linux,exact,"), "{}", lines[1]);
    assert!(lines[2].starts_with("server-a-2n,is-like,linux,fast,"), "{}", lines[2]);
}

/// The repository root, where the DUnX study files name their workloads from.
fn repo_root() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

#[test]
fn the_dunx_studies_parse_and_expand_without_running() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("c");
    let cache = cache.to_str().unwrap();
    // The sweep: 5 instances x 1 policy x 5 freeze windows x 4 recent_mod values.
    let out = numalab()
        .current_dir(repo_root())
        .args(["study", "studies/dunx-gp1000-sweep.toml", "--dry-run", "--cache", cache, "--format", "json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("100 cells, 100 jobs, 0 cached, 100 to run"), "{err}");
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["schema"], "numalab.study-cells/1");
    let cells = doc["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 100);
    assert_eq!(cells[0]["workload"], "studies/dunx/synth-5c.toml");
    assert_eq!(cells[0]["policy"], "dunx");
    assert_eq!(cells[0]["grid"]["policy.dunx.freeze_window_ms"], 0.0);
    assert_eq!(cells[0]["grid"]["policy.dunx.recent_mod"], 0.0);
    // The last key varies fastest; inf is kept (JSON writes it as null).
    assert_eq!(cells[1]["grid"]["policy.dunx.recent_mod"], 31.0);
    assert_eq!(cells[3]["grid"]["policy.dunx.recent_mod"], Value::Null);
    assert_eq!(cells[19]["grid"]["policy.dunx.freeze_window_ms"], Value::Null);
    assert_eq!(cells[20]["workload"], "studies/dunx/synth-pr-ro.toml");
    let keys: std::collections::BTreeSet<&str> = cells.iter().map(|c| c["key"].as_str().unwrap()).collect();
    assert_eq!(keys.len(), 100, "every grid point is a different configuration");
    assert!(!Path::new(cache).exists(), "a dry run writes nothing");
    // The comparison: 5 instances x 5 policies (the model's oracle `ideal` included), 10 runs each.
    let out = numalab()
        .current_dir(repo_root())
        .args(["study", "studies/dunx-gp1000.toml", "--dry-run", "--cache", cache, "--format", "json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let cells = doc["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 25);
    let policies: Vec<&str> = cells[..5].iter().map(|c| c["policy"].as_str().unwrap()).collect();
    assert_eq!(policies, ["first-touch", "cache", "mor", "dunx", "ideal"]);
    assert!(cells.iter().all(|c| c["jobs"] == 10 && c["to_run"] == 10));
}

/// Every study file the repository ships (studies/ and docs/results/) expands, run from the
/// repository's root as the documented commands are: a renamed preset, key, policy or
/// workload file breaks this, not a user's run of a documented command.
#[test]
fn every_shipped_study_file_expands() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files: Vec<std::path::PathBuf> = ["studies", "docs/results"]
        .iter()
        .flat_map(|d| std::fs::read_dir(root.join(d)).unwrap().map(|e| e.unwrap().path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    assert!(files.len() >= 10, "found {files:?}");
    for path in files {
        let rel = path.strip_prefix(&root).unwrap();
        let out = numalab().current_dir(&root).args(["study", "--dry-run", "--format", "json"]).arg(rel).output().unwrap();
        assert!(out.status.success(), "{}: {}", rel.display(), String::from_utf8_lossy(&out.stderr));
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let spec: toml::Table = toml::from_str(&text).unwrap();
        let study = spec["study"].as_table().unwrap();
        let len = |k: &str| study[k].as_array().unwrap().len();
        let grid_points: usize =
            spec.get("grid").map_or(1, |g| g.as_table().unwrap().values().map(|v| v.as_array().unwrap().len()).product());
        assert_eq!(
            doc["cells"].as_array().unwrap().len(),
            len("machines") * len("workloads") * len("policies") * grid_points,
            "{}",
            rel.display()
        );
    }
}

/// The repository's study files, expanded but not run (`--dry-run`): the cell counts the
/// results pages rely on, and the fast tier sized from each workload's footprint. Returns the
/// summary line and the cells.
fn dry_run(study: &str) -> (String, Vec<Value>) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../studies").join(study);
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let out = numalab()
        .args(["study", path.to_str().unwrap(), "--dry-run", "--format", "json", "--cache", cache.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!cache.exists(), "a dry run neither runs nor caches");
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    (String::from_utf8(out.stderr).unwrap(), doc["cells"].as_array().unwrap().clone())
}

fn cell_names(c: &Value) -> [&str; 3] {
    [c["machine"].as_str().unwrap(), c["workload"].as_str().unwrap(), c["policy"].as_str().unwrap()]
}

#[test]
fn the_tiering_study_expands_to_72_cells_with_the_fast_tier_sized_from_the_footprint() {
    let (head, cells) = dry_run("tiering-cxl-hbm.toml");
    assert!(head.contains(": 72 cells, 216 jobs"), "{head}");
    assert_eq!(cells.len(), 72, "2 machines x 4 workloads x 3 policies x 3 fractions");
    for c in &cells {
        let (footprint, fast) = (c["footprint_pages"].as_f64().unwrap(), c["fast_tier_pages"].as_f64().unwrap());
        let fraction = c["grid"]["fast_tier_fraction"].as_f64().unwrap();
        // Two fast-tier nodes, each rounded up to a whole page.
        assert!(fast >= fraction * footprint && fast <= fraction * footprint + 2.0, "{c}");
    }
    assert_eq!(cell_names(&cells[0]), ["cxl-expander", "stream-like", "tier-static"]);
    assert_eq!(cells[0]["grid"]["fast_tier_fraction"], 0.25);
    assert_eq!((cells[0]["footprint_pages"].as_u64(), cells[0]["fast_tier_pages"].as_u64()), (Some(4689), Some(1174)));
    assert_eq!(cell_names(&cells[71]), ["xeon-max-hbm-flat", "tiering-mix", "hydm"]);
    assert_eq!((cells[71]["footprint_pages"].as_u64(), cells[71]["fast_tier_pages"].as_u64()), (Some(107616), Some(107616)));
}

#[test]
fn a_fast_tier_fraction_reaches_the_machine_of_every_cell() {
    let dir = tempfile::tempdir().unwrap();
    let text = r#"
[study]
machines = ["knl-7250-flat"]
workloads = ["hydm-npb-mix"]
policies = ["tier-static"]
runs = 1
scale = 0.002
[grid]
fast_tier_fraction = [0.5]
"#;
    let file = write_study(dir.path(), text);
    let out = numalab().args(["study", file.to_str().unwrap(), "--dry-run", "--format", "json"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    // 16,896 pages at 50 %: MCDRAM (node 1, the only fast node) holds 8,448.
    let c = &doc["cells"][0];
    assert_eq!((c["footprint_pages"].as_u64(), c["fast_tier_pages"].as_u64()), (Some(16896), Some(8448)), "{c}");
    let bad = write_study(dir.path(), &STUDY.replace("[grid]", "[grid]\nfast_tier_fraction = [0.0]"));
    let out = numalab().args(["study", bad.to_str().unwrap(), "--dry-run"]).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("grid.fast_tier_fraction = 0.0: every value must be a positive number"), "{err}");
}

#[test]
fn the_hydm_study_expands_to_two_mixes_and_four_policies() {
    let (head, cells) = dry_run("hydm-knl.toml");
    assert!(head.contains(": 8 cells, 80 jobs"), "{head}");
    assert_eq!(cell_names(&cells[7]), ["knl-7250-flat", "hydm-npb-mix-32", "linux-tiering"]);
    // The 32-program mix is twice the 16-program one; the MCDRAM is 8,388 pages in both.
    assert_eq!((cells[3]["footprint_pages"].as_u64(), cells[3]["fast_tier_pages"].as_u64()), (Some(16896), Some(8388)));
    assert_eq!((cells[7]["footprint_pages"].as_u64(), cells[7]["fast_tier_pages"].as_u64()), (Some(33792), Some(8388)));
}

/// `machine_iterations` gives one machine its own run length: its cells are the cells of a
/// study of that machine alone at that iteration count (the same content key), and the other
/// machine keeps the study's `iterations`.
#[test]
fn a_machine_s_own_iteration_count_makes_the_same_cell_as_a_study_of_it_alone() {
    let dir = tempfile::tempdir().unwrap();
    let keys = |text: &str| -> Vec<String> {
        let file = write_study(dir.path(), text);
        let out = numalab().args(["study", file.to_str().unwrap(), "--dry-run", "--format", "json"]).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
        doc["cells"].as_array().unwrap().iter().map(|c| c["key"].as_str().unwrap().to_string()).collect()
    };
    let head = "[study]\nworkloads = [\"cg-like\"]\npolicies = [\"linux\"]\nruns = 1\n";
    let both = keys(&format!(
        "{head}machines = [\"server-a-2n\", \"server-a-4n\"]\niterations = 2\nmachine_iterations = {{ \"server-a-4n\" = {{ \"cg-like\" = 5 }} }}\n"
    ));
    let a2 = keys(&format!("{head}machines = [\"server-a-2n\"]\niterations = 2\n"));
    let a4 = keys(&format!("{head}machines = [\"server-a-4n\"]\niterations = 5\n"));
    let a4_other = keys(&format!("{head}machines = [\"server-a-4n\"]\niterations = 2\n"));
    assert_eq!(both, [a2[0].clone(), a4[0].clone()]);
    assert_ne!(a4, a4_other, "the iteration count is part of the cell");
}

/// `numalab study engines` pairs a study's exact and fast cells and checks each pair against
/// the fast engine's tolerances (docs/study.md, "Comparing the engines").
#[test]
fn the_engine_check_pairs_the_cells_run_by_both_engines() {
    let dir = tempfile::tempdir().unwrap();
    let doc_path = study_doc(dir.path(), BOTH_ENGINES);
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&doc_path).unwrap()).unwrap();
    let (check, stderr) = run_json(&["study", "engines", doc_path.to_str().unwrap(), "--report-only"]);
    assert_eq!(check["schema"], "numalab.engine-check/1");
    assert_eq!(check["pairs_total"], 1);
    assert!(stderr.contains("1 pairs:"), "{stderr}");
    let pair = &check["pairs"][0];
    assert_eq!(pair["runs_exact"], 2);
    assert_eq!(pair["runs_fast"], 2);
    assert!(pair["grid"].as_object().unwrap().is_empty(), "the engine is not part of the pair's grid: {}", pair["grid"]);
    // The time check carries both engines' means, as the study's summaries give them.
    let time = pair["checks"].as_array().unwrap().iter().find(|c| c["metric"] == "time_s").unwrap();
    let mean = |engine: &str| {
        let cell = doc["cells"].as_array().unwrap().iter().find(|c| c["grid"]["sim.engine"] == engine).unwrap();
        cell["summary"]["exec_time_s"]["mean"].as_f64().unwrap()
    };
    assert!((time["exact"].as_f64().unwrap() - mean("exact")).abs() < 1e-12);
    assert!((time["fast"].as_f64().unwrap() - mean("fast")).abs() < 1e-12);
    let diff = time["diff"].as_f64().unwrap();
    assert!((diff - (mean("fast") / mean("exact") - 1.0)).abs() < 1e-12);
    // Its standard error, relative to the exact mean as `diff` is: the two engines' standard
    // errors of the mean combined.
    let se_of = |engine: &str| {
        let cell = doc["cells"].as_array().unwrap().iter().find(|c| c["grid"]["sim.engine"] == engine).unwrap();
        let xs: Vec<f64> = cell["runs"].as_array().unwrap().iter().map(|r| r["exec_time_s"].as_f64().unwrap()).collect();
        let m = xs.iter().sum::<f64>() / xs.len() as f64;
        let var = xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (xs.len() - 1) as f64;
        var / xs.len() as f64
    };
    let se = (se_of("exact") + se_of("fast")).sqrt() / mean("exact");
    assert!((time["se"].as_f64().unwrap() - se).abs() < 1e-12, "{} against {se}", time["se"]);
    let metrics: Vec<&str> = pair["checks"].as_array().unwrap().iter().map(|c| c["metric"].as_str().unwrap()).collect();
    assert_eq!(metrics, ["time_s", "local_ratio", "hint_faults_per_s", "page_migrations_per_s", "thread_migrations_per_s", "cv"]);

    // A fast engine 50 % slower in both runs is outside the tolerances: a non-zero exit that
    // says so, unless the table is only being published.
    let mut slow = doc.clone();
    let exact_mean = mean("exact");
    for cell in slow["cells"].as_array_mut().unwrap().iter_mut().filter(|c| c["grid"]["sim.engine"] == "fast") {
        for run in cell["runs"].as_array_mut().unwrap() {
            run["exec_time_s"] = Value::from(1.5 * exact_mean);
        }
    }
    let slow_path = dir.path().join("slow.json");
    std::fs::write(&slow_path, serde_json::to_string(&slow).unwrap()).unwrap();
    let out = numalab().args(["study", "engines", slow_path.to_str().unwrap(), "--format", "json"]).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("1 of 1 cells are outside the fast engine's tolerances"), "{err}");
    let (check, _) = run_json(&["study", "engines", slow_path.to_str().unwrap(), "--report-only"]);
    assert_eq!(check["outside"], 1);
    assert_eq!(check["pairs"][0]["checks"][0]["verdict"], "outside");

    // Thread migrations are held to 5 % too: no cross-node move in the exact runs and two per
    // second in both fast runs is outside, whatever the times.
    let mut moved = doc.clone();
    for cell in moved["cells"].as_array_mut().unwrap() {
        let rate = if cell["grid"]["sim.engine"] == "fast" { 2.0 } else { 0.0 };
        for run in cell["runs"].as_array_mut().unwrap() {
            run["thread_migrations_per_s"] = Value::from(rate);
        }
    }
    let moved_path = dir.path().join("moved.json");
    std::fs::write(&moved_path, serde_json::to_string(&moved).unwrap()).unwrap();
    let (check, _) = run_json(&["study", "engines", moved_path.to_str().unwrap(), "--report-only"]);
    let tmig = check["pairs"][0]["checks"].as_array().unwrap().iter().find(|c| c["metric"] == "thread_migrations_per_s").unwrap();
    assert_eq!((tmig["exact"].as_f64(), tmig["fast"].as_f64(), tmig["verdict"].as_str()), (Some(0.0), Some(2.0), Some("outside")));
    assert_eq!(check["pairs"][0]["thread_migrations_per_s"], serde_json::json!([0.0, 2.0]));
    assert_eq!(check["outside"], 1);
}

/// The exact engine's runs of BOTH_ENGINES' cell at half and twice the default epoch.
fn band_study() -> String {
    BOTH_ENGINES
        .replace("name = \"engines\"", "name = \"engines-band\"")
        .replace("\"sim.engine\" = [\"exact\", \"fast\"]", "\"sim.engine\" = [\"exact\"]\n\"sim.epoch_us\" = [25.0, 100.0]")
}

/// `--band`: the exact engine's cells under other epochs widen what the fast engine may be
/// within (docs/study.md, "The reference's own band").
#[test]
fn the_engine_check_takes_the_exact_engine_s_band_from_other_documents() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    let doc_path = study_doc(&a, BOTH_ENGINES);
    let band_path = study_doc(&b, &band_study());
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&doc_path).unwrap()).unwrap();
    let band: Value = serde_json::from_str(&std::fs::read_to_string(&band_path).unwrap()).unwrap();
    let (check, _) = run_json(&["study", "engines", doc_path.to_str().unwrap(), "--band", band_path.to_str().unwrap(), "--report-only"]);
    let pair = &check["pairs"][0];
    assert_eq!(pair["band_cells"], 2);
    // The time check's band is the lowest and highest mean of the three exact cells, each band
    // cell's moved towards the default reference by two standard errors of its runs.
    let mean = |c: &Value| c["summary"]["exec_time_s"]["mean"].as_f64().unwrap();
    let exact = doc["cells"].as_array().unwrap().iter().find(|c| c["grid"]["sim.engine"] == "exact").unwrap();
    let reference = mean(exact);
    let shown = |c: &Value| {
        let times: Vec<f64> = c["runs"].as_array().unwrap().iter().map(|r| r["exec_time_s"].as_f64().unwrap()).collect();
        let n = times.len() as f64;
        let m = times.iter().sum::<f64>() / n;
        let se = (times.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1.0)).sqrt() / n.sqrt();
        if m > reference {
            (m - 2.0 * se).max(reference)
        } else {
            (m + 2.0 * se).min(reference)
        }
    };
    let ends: Vec<f64> = band["cells"].as_array().unwrap().iter().map(shown).chain([reference]).collect();
    let time = pair["checks"].as_array().unwrap().iter().find(|c| c["metric"] == "time_s").unwrap();
    let lo = ends.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = ends.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let band_of = |i: usize| time["band"][i].as_f64().unwrap();
    assert!((band_of(0) - lo).abs() < 1e-12 && (band_of(1) - hi).abs() < 1e-12, "{} against {lo}..{hi}", time["band"]);
    // Without --band there is no band.
    let (plain, _) = run_json(&["study", "engines", doc_path.to_str().unwrap(), "--report-only"]);
    assert_eq!(plain["pairs"][0]["band_cells"], 0);
    assert!(plain["pairs"][0]["checks"][0].get("band").is_none());

    // A fast engine 50 % slower than the default reference, where the exact engine at 25 µs
    // epochs is 50 % slower too: the pair is within the band, and the command exits zero.
    let slow_mean = 1.5 * mean(exact);
    let mut slow = doc.clone();
    for cell in slow["cells"].as_array_mut().unwrap().iter_mut().filter(|c| c["grid"]["sim.engine"] == "fast") {
        for run in cell["runs"].as_array_mut().unwrap() {
            run["exec_time_s"] = Value::from(slow_mean);
        }
    }
    let mut slow_band = band.clone();
    for cell in slow_band["cells"].as_array_mut().unwrap().iter_mut().filter(|c| c["grid"]["sim.epoch_us"] == 25.0) {
        for run in cell["runs"].as_array_mut().unwrap() {
            run["exec_time_s"] = Value::from(slow_mean);
        }
    }
    let (slow_path, slow_band_path) = (dir.path().join("slow.json"), dir.path().join("slow-band.json"));
    std::fs::write(&slow_path, serde_json::to_string(&slow).unwrap()).unwrap();
    std::fs::write(&slow_band_path, serde_json::to_string(&slow_band).unwrap()).unwrap();
    let out = numalab()
        .args(["study", "engines", slow_path.to_str().unwrap(), "--band", slow_band_path.to_str().unwrap(), "--format", "json"])
        .output()
        .unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(out.status.success(), "{err}");
    assert!(err.contains("1 within the exact engine's own band"), "{err}");
    let check: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((check["within_band"].as_u64(), check["outside"].as_u64()), (Some(1), Some(0)));
    assert_eq!(check["pairs"][0]["verdict"], "band");
    assert_eq!(check["pairs"][0]["checks"][0]["verdict"], "band");
    // The same fast engine against a band that does not reach it is outside.
    let out = numalab()
        .args(["study", "engines", slow_path.to_str().unwrap(), "--band", band_path.to_str().unwrap(), "--format", "json"])
        .output()
        .unwrap();
    assert!(!out.status.success());

    // A band document of other cells (another scale) is refused, naming it.
    let c = dir.path().join("c");
    std::fs::create_dir_all(&c).unwrap();
    let other = study_doc(&c, &band_study().replace("scale = 0.001", "scale = 0.002"));
    let out = numalab().args(["study", "engines", doc_path.to_str().unwrap(), "--band", other.to_str().unwrap()]).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains(&format!("band document {} holds no exact cell of the pairs of study engines", other.display())), "{err}");
}

#[test]
fn the_engine_check_refuses_a_study_run_by_one_engine() {
    let dir = tempfile::tempdir().unwrap();
    let doc_path = study_doc(dir.path(), STUDY);
    let out = numalab().args(["study", "engines", doc_path.to_str().unwrap()]).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("no cell of study tiny was run by both engines"), "{err}");
    assert!(err.contains("\"sim.engine\""), "the error says how to add the grid: {err}");
    // Not a study document at all.
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "{\"schema\": \"numalab.sim/2\"}").unwrap();
    let err = String::from_utf8(numalab().args(["study", "engines", bad.to_str().unwrap()]).output().unwrap().stderr).unwrap();
    assert!(err.contains("not a numalab.study/1 document"), "{err}");
}
