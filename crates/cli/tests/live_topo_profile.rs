//! `numalab topo`, `machine import`, `profile` and `profile diff` end to end: topology from the
//! captured guest trees of numalab-linux's fixtures, profiles of real child processes.

use assert_cmd::Command;
use numalab_core::Machine;
use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../linux/tests/fixtures")
}

fn numalab() -> Command {
    Command::cargo_bin("numalab").unwrap()
}

fn json_of(args: &[&str]) -> serde_json::Value {
    json_of_status(args, 0)
}

/// The JSON a command prints, and its exit status (a profiled command's own status).
fn json_of_status(args: &[&str], code: i32) -> serde_json::Value {
    let out = numalab().args(args).output().unwrap();
    assert_eq!(out.status.code(), Some(code), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{args:?}: {e}: {}", String::from_utf8_lossy(&out.stdout)))
}

#[test]
fn topo_json_contract_on_the_four_node_guest() {
    let root = fixtures().join("guest-4n");
    let v = json_of(&["--format", "json", "topo", "--root", root.to_str().unwrap()]);
    assert_eq!(v["schema"], "numalab.topo/1");
    let nodes = v["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 4);
    assert_eq!(nodes[0]["cpus"], serde_json::json!([0, 1]));
    assert_eq!(nodes[3]["cpus"], serde_json::json!([]));
    assert_eq!(nodes[3]["cpu_less"], true);
    assert_eq!(nodes[3]["distances"], serde_json::json!([17, 28, 28, 10]));
    assert_eq!(nodes[3]["mem_total_bytes"], 513_720u64 * 1024);
    assert_eq!(nodes[2]["tier"], 4);
    assert_eq!(nodes[1]["numastat"]["numa_hit"], 2333);
    assert_eq!(v["cpu_less_nodes"], serde_json::json!([3]));
    assert_eq!(v["virtualized"], true);
}

#[test]
fn topo_table_and_export() {
    let root = fixtures().join("guest-2n");
    let dir = tempfile::tempdir().unwrap();
    let export = dir.path().join("m.toml");
    let out = numalab()
        .args(["--format", "table", "topo", "--root", root.to_str().unwrap(), "--export", export.to_str().unwrap(), "--name", "g2"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let row0 = text.lines().find(|l| l.split_whitespace().next() == Some("0")).unwrap_or_else(|| panic!("{text}"));
    assert!(row0.contains("0-1") && row0.contains("10 21") && row0.contains("5845"), "{row0}");
    // Notes (the tier legend) go to standard error.
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("memory_tier4: nodes 0-1"), "{err}");
    let toml = std::fs::read_to_string(&export).unwrap();
    let m = Machine::from_toml_str(&toml, "export").unwrap();
    assert_eq!(m.name, "g2");
    assert_eq!(m.slit, vec![vec![10, 21], vec![21, 10]]);
    assert!(toml.contains("# estimate: mem_bw_gbps"));
}

#[test]
fn machine_import_from_a_sysfs_tree() {
    let sys = fixtures().join("guest-4n/sys");
    let out = numalab().args(["machine", "import", "--sysfs", sys.to_str().unwrap(), "--name", "g4"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let m = Machine::from_toml_str(&String::from_utf8(out.stdout).unwrap(), "import").unwrap();
    assert_eq!(m.nodes.len(), 4);
    assert_eq!(m.nodes[3].cores, 0);
    assert_eq!(m.hops[1][3], 2);
    // The one-node tree given as its parent directory works too.
    let out = numalab().args(["machine", "import", "--sysfs", fixtures().join("guest-1n").to_str().unwrap()]).output().unwrap();
    let m = Machine::from_toml_str(&String::from_utf8(out.stdout).unwrap(), "import").unwrap();
    assert_eq!(m.nodes.len(), 1);
    let out = numalab().args(["machine", "import", "--sysfs", "/nonexistent"]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no devices/system/node"));
}

#[test]
fn profile_counts_a_child_and_never_prints_zero_for_unsupported() {
    // A shell loop: page faults at start-up, CPU time, and a known exit code, which numalab
    // exits with (as `perf stat` does).
    let v = json_of_status(
        &["--format", "json", "profile", "--interval", "50", "--", "sh", "-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; exit 3"],
        3,
    );
    assert_eq!(v["schema"], "numalab.profile/1");
    assert_eq!(v["target"]["exit_code"], 3);
    assert_eq!(v["target"]["command"][0], "sh");
    let events = v["events"].as_array().unwrap();
    assert_eq!(events.len(), 12, "default event set");
    for e in events {
        let ok = e["status"] == "ok";
        assert_eq!(e["value"].is_null(), !ok, "{e}");
        assert_eq!(e["scope"], "thread");
    }
    let faults = events.iter().find(|e| e["name"] == "sw.page_faults").unwrap();
    assert_eq!(faults["status"], "ok");
    assert!(faults["value"].as_u64().unwrap() > 50, "a shell start faults pages in: {faults}");
    let clock = events.iter().find(|e| e["name"] == "sw.task_clock").unwrap();
    assert!(clock["value"].as_u64().unwrap() > 1_000_000, "{clock}");
    if !Path::new("/sys/bus/event_source/devices/cpu").exists() {
        let cycles = events.iter().find(|e| e["name"] == "cpu.cycles").unwrap();
        assert_eq!(cycles["status"], "unsupported");
        let ipc = v["derived"].as_array().unwrap().iter().find(|d| d["name"] == "cpu.ipc").unwrap();
        assert!(ipc["value"].is_null() && ipc["status"] == "unsupported", "{ipc}");
    }
    assert!(!v["timeline"].as_array().unwrap().is_empty());
    assert!(v["numa"]["vmstat"]["numa_hit"]["status"].is_string());
}

#[test]
fn profile_csv_timeline_and_errors() {
    let out =
        numalab().args(["--format", "csv", "profile", "--group", "software", "--interval", "20", "--", "sleep", "0.2"]).output().unwrap();
    assert!(out.status.success());
    let csv = String::from_utf8(out.stdout).unwrap();
    let header = csv.lines().next().unwrap();
    assert!(header.starts_with("t_ms,enabled,label,sw.task_clock,sw.page_faults"), "{header}");
    assert!(csv.lines().count() >= 5, "{csv}");
    let out = numalab().args(["profile", "--events", "bogus", "--", "true"]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown event `bogus`"));
    let out = numalab().args(["profile", "--", "/nonexistent/cmd"]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot start `/nonexistent/cmd`"), "{}", String::from_utf8_lossy(&out.stderr));
    let out = numalab().args(["profile"]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("nothing to profile"));
}

#[test]
fn profile_diff_of_two_runs() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.json");
    let b = dir.path().join("b.json");
    for (path, n) in [(&a, "100"), (&b, "2000")] {
        let out = numalab()
            .args([
                "--out",
                path.to_str().unwrap(),
                "profile",
                "--group",
                "software",
                "--",
                "sh",
                "-c",
                &format!("i=0; while [ $i -lt {n} ]; do i=$((i+1)); done"),
            ])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let d = json_of(&["--format", "json", "profile", "diff", a.to_str().unwrap(), b.to_str().unwrap()]);
    assert_eq!(d["schema"], "numalab.profile-diff/1");
    let e = d["entries"].as_array().unwrap().iter().find(|e| e["name"] == "sw.task_clock").unwrap();
    let (va, vb) = (e["a"].as_f64().unwrap(), e["b"].as_f64().unwrap());
    assert!(vb > va, "20x the loop must take more CPU time: {e}");
    assert!((e["effect_pct"].as_f64().unwrap() - 100.0 * (vb - va) / va).abs() < 1e-6);
    assert!(d["notes"].as_array().unwrap().iter().any(|n| n.as_str().unwrap().contains("numa_balancing is the same")));
}

#[test]
fn profile_passes_the_child_status_through_and_rejects_pid_0() {
    // Killed by SIGSEGV: 128 + 11, like a shell reports it.
    let out = numalab().args(["--format", "json", "profile", "--", "sh", "-c", "kill -SEGV $$"]).output().unwrap();
    assert_eq!(out.status.code(), Some(139), "{}", String::from_utf8_lossy(&out.stderr));
    let out = numalab().args(["--format", "json", "profile", "--", "sh", "-c", "exit 7"]).output().unwrap();
    assert_eq!(out.status.code(), Some(7));
    let out = numalab().args(["profile", "--pid", "0"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--pid 0 names no process"));
}

#[test]
fn profile_duration_ends_the_command_and_still_samples_its_pages() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let script = format!("echo $$ > {}; exec sleep 30", pid_file.display());
    // --duration shorter than one --interval: the end-of-profile sample is the only one.
    let v = json_of(&["--format", "json", "profile", "--group", "software", "--duration", "300", "--", "sh", "-c", &script]);
    let pid: i32 = std::fs::read_to_string(&pid_file).unwrap().trim().parse().unwrap();
    // SAFETY: signal 0 only tests for existence.
    let alive = unsafe { libc::kill(pid, 0) } == 0;
    assert!(!alive, "the command (pid {pid}) outlived its profile");
    assert!(v["target"]["exit_code"].is_null(), "{}", v["target"]);
    let notes: Vec<&str> = v["notes"].as_array().unwrap().iter().map(|n| n.as_str().unwrap()).collect();
    assert!(notes.iter().any(|n| n.contains("ended it with SIGTERM")), "{notes:?}");
    let pages = v["numa"]["pages"].as_array().unwrap();
    assert!(!pages.is_empty(), "the target was alive at the end: {}", v["numa"]);
    assert!(v["numa"]["notes"].as_array().is_none_or(|n| n.iter().all(|n| !n.as_str().unwrap().contains("no numa_maps sample"))));
}

#[test]
fn profile_phases_total_what_ran_between_start_and_stop() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("ctl");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let f = fifo.display();
    // The sleeps around the loop (no CPU time) give the profiler 200 ms to read each control
    // line before the loop's time would fall on the wrong side of it: on a busy host (CI
    // sharing its two cores) it once read them late and the phase held 6 of 15 ms.
    let script = format!(
        "echo 'start solve' > {f}; sleep 0.2; i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; sleep 0.2; echo stop > {f}; sleep 0.05"
    );
    // One interval is longer than the whole run: before the fix, the only sample came after
    // the stop and carried the phase's counts without its label.
    let v = json_of(&[
        "--format",
        "json",
        "profile",
        "--group",
        "software",
        "--interval",
        "10000",
        "--control",
        fifo.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        &script,
    ]);
    let phases = v["phases"].as_array().unwrap_or_else(|| panic!("no phases: {v}"));
    assert_eq!(phases.len(), 1, "{phases:?}");
    assert_eq!(phases[0]["label"], "solve");
    let in_phase = phases[0]["events"]["sw.task_clock"].as_u64().unwrap();
    let total = v["events"].as_array().unwrap().iter().find(|e| e["name"] == "sw.task_clock").unwrap()["value"].as_u64().unwrap();
    assert!(in_phase * 2 > total, "the loop is most of the CPU time: {in_phase} of {total} ns in the phase");
    // The sample closing the phase carries its label; the one after the stop does not.
    let timeline = v["timeline"].as_array().unwrap();
    let closing = timeline.iter().position(|s| s["label"] == "solve").unwrap();
    assert!(timeline[closing + 1..].iter().all(|s| s["label"].is_null()));
}

/// Memory controllers (docs/profile.md, "Memory controllers"): on a host without an uncore IMC
/// PMU (this one, qemu guests) `--events imc` counts nothing and says why, and an explicit
/// controller event is unsupported with that reason, never 0.
#[test]
fn profile_memory_controllers_are_unsupported_without_an_imc_pmu() {
    let has_imc = std::fs::read_dir("/sys/bus/event_source/devices")
        .map(|d| d.filter_map(|e| e.ok()).any(|e| e.file_name().to_string_lossy().starts_with("uncore_imc")))
        .unwrap_or(false);
    if has_imc {
        eprintln!("this host has uncore IMC PMUs; the unsupported path is covered by numalab-linux's fixtures");
        return;
    }
    let v = json_of(&["--format", "json", "profile", "--events", "sw.task_clock,imc,imc.write[1]", "--", "true"]);
    let notes: Vec<&str> = v["notes"].as_array().unwrap().iter().filter_map(|n| n.as_str()).collect();
    assert!(notes.contains(&"imc: unsupported (no uncore_imc PMU in /sys/bus/event_source/devices)"), "{notes:?}");
    let events = v["events"].as_array().unwrap();
    let names: Vec<&str> = events.iter().map(|e| e["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["sw.task_clock", "imc.write[1]"]);
    assert_eq!(events[1]["status"], "unsupported");
    assert!(events[1]["value"].is_null());
    assert_eq!(events[1]["reason"], "no uncore_imc PMU in /sys/bus/event_source/devices");
    assert!(v["environment"].get("imc").is_none());
    // Without imc events asked for, the note is there all the same.
    let v = json_of(&["--format", "json", "profile", "--events", "sw.task_clock", "--", "true"]);
    assert!(v["notes"].as_array().unwrap().iter().any(|n| n == "imc: unsupported (no uncore_imc PMU in /sys/bus/event_source/devices)"));
}
