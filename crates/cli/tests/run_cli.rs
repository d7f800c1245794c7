//! `numalab run` end to end on this host (one node is enough for what is checked here: the
//! memory policy the launched program sees, exit status, errors) and, with `--dry-run
//! --root`, the plans for the captured multi-node guests. The placement itself on a 2-node
//! guest is checked by live_guest.rs.

use assert_cmd::Command;
use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../linux/tests/fixtures")
}

fn numalab() -> Command {
    Command::cargo_bin("numalab").unwrap()
}

fn run(args: &[&str]) -> (Option<i32>, String, String) {
    let out = numalab().args(args).output().unwrap();
    (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// The first VMA's policy in the program's own numa_maps (its text segment).
const SHOW_POLICY: &str = "head -n 1 /proc/self/numa_maps | cut -d' ' -f2";

#[test]
fn the_program_runs_under_the_policys_memory_policy_and_its_output_is_untouched() {
    let (code, stdout, stderr) = run(&["run", "--policy", "round-4k", "--", "sh", "-c", SHOW_POLICY]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(stdout, "interleave:0\n");
    assert!(stderr.contains("memory policy interleave on nodes 0 (applied)"), "{stderr}");
    assert!(stderr.contains("exit code 0"), "{stderr}");

    let (_, stdout, _) = run(&["run", "--policy", "bind", "--set", "policy.nodes=[0]", "--", "sh", "-c", SHOW_POLICY]);
    assert_eq!(stdout, "bind:0\n");
    // numactl's names are accepted.
    let (_, stdout, _) = run(&["run", "--policy", "local", "--", "sh", "-c", SHOW_POLICY]);
    assert_eq!(stdout, "local\n");
    let (_, stdout, _) = run(&["run", "--", "sh", "-c", SHOW_POLICY]);
    assert_eq!(stdout, "default\n");
}

#[test]
fn dry_run_decides_logs_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("actions.jsonl");
    let root = fixtures().join("guest-2n");
    let (code, stdout, stderr) = run(&[
        "run",
        "--dry-run",
        "--root",
        root.to_str().unwrap(),
        "--policy",
        "interleave",
        "--cpus-on",
        "1",
        "--decision-log",
        log.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        SHOW_POLICY,
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(stdout, "default\n", "a dry run must not set the policy");
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&log).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(
        lines[0]["decision"],
        serde_json::json!({"kind": "set_mempolicy", "mode": "interleave", "nodes": [0, 1], "caveat": "the kernel indexes by virtual page number and falls back by distance"})
    );
    assert_eq!(lines[1]["decision"], serde_json::json!({"kind": "set_affinity", "nodes": [1], "cpus": [2, 3]}));
    for l in &lines {
        assert_eq!(l["outcome"], "dry_run");
        assert_eq!(l["cause"]["event"], "launch");
    }
}

#[test]
fn the_json_summary_carries_policy_config_version_and_exit() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.json");
    let (code, _, stderr) = run(&["--out", out.to_str().unwrap(), "run", "--policy", "first-touch", "--", "sh", "-c", "exit 5"]);
    assert_eq!(code, Some(5), "numalab passes the program's status through: {stderr}");
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(v["schema"], "numalab.run/1");
    assert_eq!(v["numalab_version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(v["policy"]["name"], "first-touch");
    assert!(v["policy"]["config"].is_object());
    assert_eq!(v["exit"], serde_json::json!({"code": 5, "signal": null}));
    assert_eq!(v["actions"][0]["decision"]["mode"], "local");
    assert_eq!(v["actions"][0]["outcome"], "applied");
}

#[test]
fn a_signal_ending_the_program_is_reported_as_128_plus_n() {
    let (code, _, stderr) = run(&["run", "--", "sh", "-c", "kill -TERM $$"]);
    assert_eq!(code, Some(128 + 15), "{stderr}");
    assert!(stderr.contains("killed by signal 15"), "{stderr}");
}

#[test]
fn what_cannot_be_launched_is_refused_with_the_reason() {
    let cases: &[(&[&str], i32, &str)] = &[
        (&["run", "--policy", "autonuma", "--sampler", "pebs", "--", "true"], 2, "error: --sampler pebs: unknown sampler"),
        (&["run", "--policy", "autonuma", "--period-ms", "0", "--", "true"], 2, "error: --period-ms 0"),
        (&["run", "--policy", "autonuma", "--profile", "--", "true"], 2, "error: --profile with a dynamic policy: not built"),
        (&["run", "--policy", "stable-numa", "--cpus-on", "9", "--", "true"], 2, "error: node 9 does not exist"),
        (&["run", "--policy", "round-1g", "--profile", "--", "true"], 2, "error: round-1g cannot be combined with --profile"),
        (
            &["run", "--policy", "round-1g", "--set", "policy.holes=[{start_bytes=0,end_bytes=4096}]", "--", "true"],
            2,
            "a live process has none",
        ),
        (&["run", "--policy", "bind", "--", "true"], 2, "needs a node set"),
        (&["run", "--policy", "bind", "--set", "policy.nodes=[7]", "--", "true"], 2, "names node 7"),
        (&["run", "--set", "machine.nodes=2", "--", "true"], 2, "takes policy settings only"),
        (&["run", "--cpus-on", "9", "--", "true"], 2, "error: node 9 does not exist"),
        (&["run", "--policy", "no-such", "--", "true"], 2, "no-such"),
        (&["run", "--", "/nonexistent/prog"], 1, "error: cannot run /nonexistent/prog: No such file or directory"),
        (&["run", "--root", "/tmp", "--", "true"], 2, "--dry-run"),
        (&["run", "--policy", "linux"], 2, "<CMD>"),
    ];
    for (args, want_code, want) in cases {
        let (code, _, stderr) = run(args);
        assert_eq!(code, Some(*want_code), "{args:?}: {stderr}");
        assert!(stderr.contains(want), "{args:?}: expected {want:?} in:\n{stderr}");
    }
}

#[test]
fn a_cpu_less_node_cannot_be_a_cpus_on_target() {
    let root = fixtures().join("guest-4n");
    let (code, _, stderr) = run(&["run", "--dry-run", "--root", root.to_str().unwrap(), "--cpus-on", "3", "--", "true"]);
    assert_eq!(code, Some(2));
    assert!(stderr.contains("node 3 has no CPUs"), "{stderr}");
}

/// A Python child running `script`, and the first line it prints.
fn python_child(script: &str) -> (std::process::Child, String) {
    use std::io::BufRead;
    let mut child = std::process::Command::new("python3").args(["-c", script]).stdout(std::process::Stdio::piped()).spawn().unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    (child, line)
}

/// A child that maps and touches 8 MiB, prints its pid, and waits to be killed.
fn toucher() -> (std::process::Child, u32) {
    let (child, line) = python_child("import mmap,os,sys,time\nm=mmap.mmap(-1,8<<20,flags=mmap.MAP_PRIVATE|mmap.MAP_ANONYMOUS)\nfor i in range(0,8<<20,4096): m[i]=1\nprint(os.getpid(),flush=True)\ntime.sleep(60)");
    (child, line.trim().parse().unwrap())
}

#[test]
fn attach_plans_the_resident_pages_of_a_running_process() {
    let (mut child, pid) = toucher();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("moves.jsonl");
    let pid_s = pid.to_string();
    let (code, stdout, stderr) = run(&[
        "--format",
        "json",
        "attach",
        "--pid",
        &pid_s,
        "--policy",
        "bind",
        "--set",
        "policy.nodes=[0]",
        "--dry-run",
        "--decision-log",
        log.to_str().unwrap(),
    ]);
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(code, Some(0), "{stderr}");
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["schema"], "numalab.attach/1");
    assert_eq!(v["pid"], pid);
    // This host has one node: every resident page is already where bind([0]) wants it.
    let resident = v["plan"]["resident_pages"].as_u64().unwrap();
    assert!(resident >= 2048, "the 8 MiB the child touched are resident: {}", v["plan"]);
    assert_eq!(v["plan"]["in_place_pages"], resident);
    assert_eq!(v["planned_moves"], 0);
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "");
}

#[test]
fn attach_refuses_what_it_cannot_do_with_the_reason() {
    let me = std::process::id().to_string();
    let cases: &[(&[&str], &str)] = &[
        (&["attach", "--pid", "0", "--policy", "round-4k"], "--pid 0 names no process"),
        (&["attach", "--pid", "999999999", "--policy", "round-4k"], "--pid 999999999: no such process"),
        (
            &["attach", "--pid", &me, "--policy", "autonuma", "--sampler", "pebs"],
            "--sampler pebs: unknown sampler (auto, perf, damon, hinting-faults, replay:FILE)",
        ),
        (&["attach", "--pid", &me, "--policy", "autonuma", "--period-ms", "0"], "--period-ms 0"),
        (&["attach", "--pid", &me, "--policy", "round-4k", "--rate-limit-mbps=-1"], "--rate-limit-mbps -1"),
        (&["attach", "--pid", &me], "--policy"),
    ];
    for (args, want) in cases {
        let (code, _, stderr) = run(args);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(want), "{args:?}: expected {want:?} in:\n{stderr}");
    }
}

#[test]
fn run_profile_counts_the_program_under_its_policy() {
    // The kernel counts interleaved allocations in numa_interleave: the profiled program's
    // own allocations (a shell loop) are interleaved by round-4k from its first instruction.
    let (code, stdout, stderr) = run(&[
        "--format",
        "json",
        "run",
        "--profile",
        "--policy",
        "round-4k",
        "--",
        "sh",
        "-c",
        "i=0; while [ $i -lt 5000 ]; do i=$((i+1)); done; exit 4",
    ]);
    assert_eq!(code, Some(4), "{stderr}");
    assert!(stdout.is_empty(), "the summary goes to standard error");
    let v: serde_json::Value = serde_json::from_str(&stderr).unwrap();
    assert_eq!(v["exit"]["code"], 4);
    let p = &v["profile"];
    assert_eq!(p["schema"], "numalab.profile/1");
    assert_eq!(p["target"]["exit_code"], 4);
    let faults = p["events"].as_array().unwrap().iter().find(|e| e["name"] == "sw.page_faults").unwrap();
    assert!(faults["value"].as_u64().unwrap() > 10, "{faults}");
    let interleaved = p["numa"]["vmstat"]["numa_interleave"]["value"].as_u64();
    assert!(interleaved.is_some_and(|n| n > 0), "numa_interleave: {}", p["numa"]["vmstat"]);
    assert!(v["agent_cpu_s"].as_f64().unwrap() > 0.0);
}

#[test]
fn sigterm_to_numalab_reaches_the_program_and_the_summary_is_still_printed() {
    // A static policy, and a dynamic one whose engine runs until the program ends (with the
    // hinting-fault library loaded into the shell).
    let dynamic: &[&str] = &["run", "--policy", "autonuma", "--sampler", "hinting-faults", "--"];
    for args in [&["run", "--"][..], dynamic] {
        let dir = tempfile::tempdir().unwrap();
        let ready = dir.path().join("ready");
        // The program says it is ready, then exits 7 on SIGTERM.
        let script = format!("trap 'exit 7' TERM; touch {}; while :; do sleep 0.05; done", ready.display());
        let child = std::process::Command::new(env!("CARGO_BIN_EXE_numalab"))
            .args(args)
            .args(["sh", "-c", &script])
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        for _ in 0..400 {
            if ready.exists() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(25));
        }
        assert!(ready.exists(), "{args:?}: the program never started");
        // SAFETY: signalling the child process this test started.
        assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(7), "{args:?}: {stderr}");
        assert!(stderr.contains("exit code 7"), "{args:?}: {stderr}");
        if args.len() > 2 {
            assert!(stderr.contains("the process exited") && stderr.contains("hinting-faults"), "{stderr}");
        }
    }
}

/// The PMU offers a memory-sampling event numalab can use (then the refusal below cannot be
/// checked on this host).
fn host_has_memory_sampling() -> bool {
    let d = std::path::Path::new("/sys/bus/event_source/devices");
    d.join("cpu/events/mem-loads").exists() || d.join("cpu_core/events/mem-loads").exists() || d.join("ibs_op").exists()
}

#[test]
fn attach_with_a_dynamic_policy_refuses_without_a_sampler_naming_each() {
    if host_has_memory_sampling() {
        eprintln!("this host has a memory-sampling PMU: the refusal is not what happens here");
        return;
    }
    let (mut child, pid) = toucher();
    let pid_s = pid.to_string();
    let (code, stdout, stderr) = run(&["attach", "--pid", &pid_s, "--policy", "autonuma"]);
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stdout.is_empty());
    let want = "error: autonuma needs to observe the program's memory accesses, and no access sampler is available on this host: perf: ";
    assert!(stderr.starts_with(want), "{stderr}");
    for part in [
        // What DAMON's part says depends on the host (tests/damon_host.rs checks it): `auto`
        // never takes it for a policy that needs the accessing thread.
        "; damon: ",
        "; hinting-faults: only for programs numalab launches (`numalab run --policy NAME -- CMD`): the library must be loaded at the program's start",
    ] {
        assert!(stderr.contains(part), "{part:?} in {stderr}");
    }
    assert_eq!(stderr.lines().count(), 1, "one sentence: {stderr}");
}

/// A child with a busy second thread (so the scanner does not skip the single user's own
/// node) and 8 MiB touched; prints its pid and the mapping's address.
fn busy_toucher() -> (std::process::Child, u32, u64) {
    let (child, line) = python_child("import mmap,os,sys,time,threading,ctypes\nm=mmap.mmap(-1,8<<20,flags=mmap.MAP_PRIVATE|mmap.MAP_ANONYMOUS)\nfor i in range(0,8<<20,4096): m[i]=1\ndef spin():\n    while True: pass\nthreading.Thread(target=spin,daemon=True).start()\nprint(os.getpid(),ctypes.addressof(ctypes.c_char.from_buffer(m)),flush=True)\nt=time.time()\nwhile time.time()-t<30: m[0]=2");
    let mut f = line.split_whitespace().map(|x| x.parse::<u64>().unwrap());
    (child, f.next().unwrap() as u32, f.next().unwrap())
}

/// `attach --policy autonuma --dry-run` on a live child with a replayed observation stream:
/// the engine reads the child's threads and mappings, the scan steps locate its pages with
/// move_pages, replayed accesses to marked pages become hinting faults, and nothing is moved.
/// This host has one node, so every fault is local and no page move is decided.
#[test]
fn attach_dry_run_with_a_replayed_stream_runs_the_engine_on_a_live_process() {
    let (mut child, pid, start) = busy_toucher();
    let dir = tempfile::tempdir().unwrap();
    let replay = dir.path().join("obs.jsonl");
    let line = |k: u64| {
        let obs: Vec<String> = (0..4)
            .map(|p| {
                format!(
                    r#"{{"tid":{pid},"cpu":0,"cpu_node":0,"addr":{},"page_node":null,"write":false,"time_ns":{}}}"#,
                    start + p * 4096,
                    k * 50_000_000
                )
            })
            .collect();
        format!("[{}]\n", obs.join(","))
    };
    std::fs::write(&replay, (0..40).map(line).collect::<String>()).unwrap();
    let log = dir.path().join("d.jsonl");
    let pid_s = pid.to_string();
    let sampler = format!("replay:{}", replay.display());
    let (code, stdout, stderr) = run(&[
        "--format",
        "json",
        "attach",
        "--pid",
        &pid_s,
        "--policy",
        "autonuma",
        "--set",
        "policy.scan_delay_ms=1",
        "--set",
        "policy.scan_period_min_ms=10",
        "--dry-run",
        "--sampler",
        &sampler,
        "--period-ms",
        "50",
        "--duration",
        "1.5",
        "--decision-log",
        log.to_str().unwrap(),
    ]);
    let alive = child.try_wait().unwrap().is_none();
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(alive, "the child ran throughout");
    assert_eq!(code, Some(0), "{stderr}");
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["mode"], "dynamic");
    assert_eq!(v["sampler"], "scripted");
    assert_eq!(v["stopped_by"], "deadline");
    let live = &v["live"];
    assert_eq!(live["observations_unmapped"], 0, "{live}");
    assert!(live["observations"].as_u64().unwrap() >= 40, "{live}");
    assert!(live["scan_steps"].as_u64().unwrap() >= 1, "{live}");
    assert!(live["hint_faults"].as_u64().unwrap() >= 1, "{live}");
    assert_eq!(
        (live["pages_moved"].as_u64(), live["move_pages_calls"].as_u64(), live["thread_moves"].as_u64()),
        (Some(0), Some(0), Some(0))
    );
    let text = std::fs::read_to_string(&log).unwrap();
    let mut kinds = std::collections::BTreeSet::new();
    for l in text.lines() {
        let r: serde_json::Value = serde_json::from_str(l).unwrap();
        kinds.insert(r["decision"]["kind"].as_str().unwrap().to_string());
        assert_ne!(r["decision"]["kind"], "migrate_page", "one node: every fault is local: {l}");
    }
    assert!(kinds.contains("scan_step"), "{text}");
}

/// `run --policy autonuma` with a replayed stream: the live engine manages the launched
/// program until it exits, reading its threads and mappings, and numalab passes the exit
/// status through. The replay names the child's pid as the accessing thread, which it cannot
/// know in advance: those observations are counted as not placeable, the rest of the run is
/// the real engine on the real child.
#[test]
fn run_with_a_dynamic_policy_manages_the_program_until_it_exits() {
    let dir = tempfile::tempdir().unwrap();
    let replay = dir.path().join("obs.jsonl");
    std::fs::write(&replay, "[{\"tid\":1,\"cpu\":0,\"cpu_node\":0,\"addr\":4096,\"page_node\":null,\"write\":false,\"time_ns\":1}]\n[]\n")
        .unwrap();
    let log = dir.path().join("d.jsonl");
    let sampler = format!("replay:{}", replay.display());
    let (code, stdout, stderr) = run(&[
        "--format",
        "json",
        "run",
        "--policy",
        "autonuma",
        "--sampler",
        &sampler,
        "--period-ms",
        "20",
        "--decision-log",
        log.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        "sleep 0.5; echo out; exit 7",
    ]);
    assert_eq!(code, Some(7), "{stderr}");
    assert_eq!(stdout, "out\n", "the program's output, untouched");
    let v: serde_json::Value = serde_json::from_str(&stderr).unwrap();
    assert_eq!(v["schema"], "numalab.run/1");
    assert_eq!(v["mode"], "dynamic");
    assert_eq!(v["sampler"], "scripted");
    assert_eq!(v["stopped_by"], "target_exited");
    assert_eq!(v["exit"]["code"], 7);
    let live = &v["live"];
    assert!(live["rounds"].as_u64().unwrap() >= 10, "{live}");
    assert_eq!(live["observations"], 1, "{live}");
    assert_eq!(live["observations_unmapped"], 1, "{live}");
    assert!(log.exists());
    // --duration shorter than the program: the agent stops, the program runs on.
    let (code, stdout, stderr) =
        run(&["--format", "json", "run", "--policy", "stable-numa", "--sampler", &sampler, "--duration", "0.2", "--", "sleep", "0.6"]);
    assert_eq!((code, stdout.as_str()), (Some(0), ""), "{stderr}");
    let v: serde_json::Value = serde_json::from_str(&stderr).unwrap();
    assert_eq!(v["stopped_by"], "deadline");
    assert!(v["wall_s"].as_f64().unwrap() >= 0.6, "numalab waited for the program: {v}");
}

/// round-1g on this host: a dynamically linked program loads the preload library and every
/// range piece of its mmaps is bound; a statically linked one (busybox-static, when
/// installed) is reported; a bad range size is refused before launch (docs/live.md,
/// "round-1g for launched programs"). Where pages land is checked in the 2-node guest.
#[test]
fn round_1g_binds_ranges_through_its_preload_library_or_says_why_not() {
    let dir = tempfile::tempdir().unwrap();
    let summary = dir.path().join("run.json");
    let out = numalab()
        .args(["--format", "json", "--out"])
        .arg(&summary)
        .args(["run", "--policy", "round-1g", "--", "sh", "-c", "cat /proc/self/numa_maps"])
        .env("NUMALAB_R1G_RANGE_BYTES", "2097152")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains(" interleave:"), "the process-wide interleave: {stdout}");
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    assert_eq!(v["range_bytes"], 2 << 20);
    assert_eq!(v["ranges"]["pieces_failed"], 0, "{v}");
    let bad = numalab().args(["run", "--policy", "round-1g", "--", "true"]).env("NUMALAB_R1G_RANGE_BYTES", "1000").output().unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("NUMALAB_R1G_RANGE_BYTES=1000: the range size must be a power of two"));
    if std::path::Path::new("/bin/busybox").exists() {
        let (code, _, stderr) = run(&["run", "--policy", "round-1g", "--", "/bin/busybox", "true"]);
        assert_eq!(code, Some(2), "{stderr}");
        assert!(stderr.contains("did not load round-1g's preload library (statically linked"), "{stderr}");
    }
}

/// round-1g's agent on this host (docs/live.md, "round-1g by moving pages"): while a program
/// runs, `run` makes a range pass every period (on one node nothing is misplaced, so nothing
/// moves); below 2 MiB ranges it makes none and says why; `attach` places a running process
/// once, and refuses ranges below 2 MiB.
#[test]
fn round_1g_agent_passes_while_the_program_runs_and_attach_places_a_process() {
    let dir = tempfile::tempdir().unwrap();
    let summary = dir.path().join("run.json");
    let log = dir.path().join("d.jsonl");
    let out = numalab()
        .args(["--format", "json", "--out"])
        .arg(&summary)
        .args(["run", "--policy", "round-1g", "--period-ms", "50", "--decision-log"])
        .arg(&log)
        .args(["--", "sh", "-c", "sleep 0.6"])
        .env("NUMALAB_R1G_RANGE_BYTES", "2097152")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    let m = &v["range_moves"];
    assert_eq!((m["period_ms"].as_u64(), &m["error"]), (Some(50), &serde_json::Value::Null), "{m}");
    assert!(m["totals"]["passes"].as_u64().unwrap() >= 3, "{m}");
    assert!(m["totals"]["scanned_pages"].as_u64().unwrap() > 0, "{m}");
    assert_eq!(m["totals"]["misplaced_pages"], 0, "one node: every page is on its range's node: {m}");
    assert_eq!(std::fs::read_to_string(&log).unwrap().lines().count(), 1, "the launch's set_mempolicy only");

    // --duration ends the passes; the program runs on to its end.
    let out = numalab()
        .args(["--format", "json", "run", "--policy", "round-1g", "--period-ms", "50", "--duration", "0.12", "--", "sh", "-c", "sleep 0.6"])
        .env("NUMALAB_R1G_RANGE_BYTES", "2097152")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stderr).unwrap();
    assert!(v["range_moves"]["totals"]["passes"].as_u64().unwrap() <= 2, "{}", v["range_moves"]);
    assert!(v["wall_s"].as_f64().unwrap() >= 0.6, "{v}");
    let bad = numalab().args(["run", "--policy", "round-1g", "--period-ms", "0", "--", "true"]).output().unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--period-ms 0"));

    let small = numalab()
        .args(["--format", "json", "run", "--policy", "round-1g", "--", "true"])
        .env("NUMALAB_R1G_RANGE_BYTES", "4096")
        .output()
        .unwrap();
    assert_eq!(small.status.code(), Some(0), "{}", String::from_utf8_lossy(&small.stderr));
    let v: serde_json::Value = serde_json::from_slice(&small.stderr).unwrap();
    assert_eq!(v["range_moves"], serde_json::Value::Null);
    let text = numalab().args(["run", "--policy", "round-1g", "--", "true"]).env("NUMALAB_R1G_RANGE_BYTES", "4096").output().unwrap();
    assert!(String::from_utf8_lossy(&text.stderr).contains("the agent does not move pages per range"));

    let mut child = std::process::Command::new("sleep").arg("5").spawn().unwrap();
    let pid = child.id().to_string();
    let out = numalab()
        .args(["--format", "json", "attach", "--pid", &pid, "--policy", "round-1g"])
        .env("NUMALAB_R1G_RANGE_BYTES", "2097152")
        .output()
        .unwrap();
    let refused =
        numalab().args(["attach", "--pid", &pid, "--policy", "round-1g"]).env("NUMALAB_R1G_RANGE_BYTES", "4096").output().unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["range_bytes"], 2 << 20);
    assert!(v["plan"]["resident_pages"].as_u64().unwrap() > 0, "{v}");
    assert_eq!(v["plan"]["resident_pages"], v["plan"]["in_place_pages"], "{v}");
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr)
        .contains("NUMALAB_R1G_RANGE_BYTES=4096: numalab attach moves pages per range of at least 2 MiB"));
}
