//! The guest programs that results pages run (guest/src/), built and run on the host, so that a
//! documented command does not break unseen. barrier_walk is the program of
//! docs/results/barrier-wait-guest.md: an OpenMP program built with the host's C compiler and
//! libgomp, also the program `numalab profile` finds an OpenMP runtime in.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Compile guest/src/SOURCE.c with `cflags`, linking `libs` (after the source, as the linker
/// needs them), into a file of its own for test `test` (tests run at once).
fn build(source: &str, cflags: &[&str], libs: &[&str], test: &str) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{source}-{test}"));
    let c_file = root.join(format!("guest/src/{source}.c"));
    let status = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
        .args(["-O2", "-Wall", "-Werror"])
        .args(cflags)
        .arg("-o")
        .arg(&out)
        .arg(&c_file)
        .args(libs)
        .status()
        .unwrap_or_else(|e| panic!("a C compiler for {}: {e}", c_file.display()));
    assert!(status.success(), "cc failed on {}", c_file.display());
    out
}

/// `key=value` fields of barrier_walk's first output line.
fn field(line: &str, key: &str) -> i64 {
    let prefix = format!("{key}=");
    let value = line.split_whitespace().find_map(|w| w.strip_prefix(prefix.as_str())).unwrap_or_else(|| panic!("no {key} in {line}"));
    value.parse::<f64>().unwrap_or_else(|e| panic!("{key}={value}: {e}")) as i64
}

#[test]
fn barrier_walk_counts_its_waiters_sleeps_and_refuses_bad_arguments() {
    let program = build("barrier_walk", &["-fopenmp"], &["-lm"], "counts");
    let run = |wait: Option<&str>| {
        let mut cmd = Command::new(&program);
        cmd.env("OMP_NUM_THREADS", "2").args(["--iterations", "50", "--mib", "1", "--seed", "3"]);
        if let Some(w) = wait {
            cmd.env("OMP_WAIT_POLICY", w);
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let passive = run(Some("passive"));
    let lines: Vec<&str> = passive.lines().collect();
    assert_eq!(lines.len(), 2, "{passive}");
    assert_eq!(field(lines[0], "threads"), 2);
    assert_eq!(field(lines[0], "iterations"), 50);
    // A passive waiter sleeps at once: one of the two threads waits at nearly every barrier.
    assert!(field(lines[0], "sleeps") >= 25, "{passive}");
    assert!(field(lines[0], "node_changes") <= field(lines[0], "cpu_changes"), "{passive}");
    assert!(lines[1].starts_with("iteration_ms min="), "{passive}");
    // The same seed walks the same lengths, whatever the wait: the checksum agrees.
    let active = run(Some("active"));
    assert_eq!(field(active.lines().next().unwrap(), "checksum"), field(lines[0], "checksum"));

    let bad = Command::new(&program).args(["--jitter", "1.5"]).output().unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--jitter in [0, 1)"), "{}", String::from_utf8_lossy(&bad.stderr));
    let bad = Command::new(&program).args(["--noise", "0", "200", "1"]).output().unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--noise needs HZ, MEAN_US and SECONDS above 0"));
}

/// `numalab profile` names the OpenMP runtime barrier_walk loaded and its wait settings, and
/// the `--set` settings it proposes are ones `numalab sim` takes (docs/profile.md, "The OpenMP
/// runtime").
#[test]
fn profile_finds_the_openmp_runtime_and_the_simulator_takes_its_settings() {
    let program = build("barrier_walk", &["-fopenmp"], &["-lm"], "profile");
    let numalab = env!("CARGO_BIN_EXE_numalab");
    // The profile of barrier_walk under `env`, long enough for several samples at 20 ms on a
    // busy host.
    let profile = |env: &[(&str, &str)]| {
        let out = Command::new(numalab)
            .envs(env.iter().copied())
            .args(["--format", "json", "profile", "--interval", "20", "--"])
            .arg(&program)
            .args(["--iterations", "4000", "--mib", "1"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    let v = profile(&[("OMP_NUM_THREADS", "2"), ("OMP_WAIT_POLICY", "passive"), ("GOMP_SPINCOUNT", "3k")]);
    let o = &v["target"]["openmp"];
    assert_eq!(o["runtime"], "libgomp", "{v}");
    assert!(o["library"].as_str().unwrap().contains("libgomp.so"), "{o}");
    assert_eq!(o["environment"]["GOMP_SPINCOUNT"], "3k");
    assert_eq!(o["environment"]["OMP_WAIT_POLICY"], "passive");
    let set: Vec<&str> = o["sim_set"].as_array().unwrap().iter().map(|s| s.as_str().unwrap()).collect();
    assert_eq!(set, ["sim.sched.wait_policy=libgomp-passive", "sim.sched.gomp_spincount=3000"]);
    assert!(v["notes"].as_array().unwrap().iter().any(|n| n.as_str().unwrap().starts_with("openmp: libgomp (")), "{}", v["notes"]);

    let mut sim = Command::new(numalab);
    sim.args(["--format", "json", "sim", "--machine", "server-a-2n", "--workload", "master-slave", "--scale", "0.002", "--runs", "1"]);
    for s in &set {
        sim.args(["--set", s]);
    }
    let out = sim.output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["config"]["sim"]["sched"]["wait_policy"], "libgomp-passive");
    assert_eq!(r["config"]["sim"]["sched"]["gomp_spincount"], 3000);

    // One thread on a host with more CPUs: the note says CPUs were left idle.
    let v = profile(&[("OMP_NUM_THREADS", "1")]);
    let note = v["notes"].as_array().unwrap().iter().filter_map(|n| n.as_str()).find(|n| n.starts_with("openmp: ")).unwrap().to_string();
    if std::thread::available_parallelism().map_or(1, |n| n.get()) > 1 {
        assert!(note.contains("; it ran 1 thread on ") && note.contains("CPUs left idle"), "{note}");
    }

    // A program without a runtime has no `openmp`.
    let out = Command::new(numalab).args(["--format", "json", "profile", "--interval", "20", "--", "sleep", "0.1"]).output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["target"].get("openmp").is_none(), "{v}");
}
