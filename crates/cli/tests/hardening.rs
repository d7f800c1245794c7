//! Every reproducer of the hardening issue, replayed through the binary: each must end in a
//! clear one-sentence error with exit status 2 (a usage error), never a panic (101), an
//! abort (134), a hang or a silently wrong result.

use assert_cmd::Command;
use std::path::{Path, PathBuf};
use std::time::Duration;

fn numalab() -> Command {
    let mut c = Command::cargo_bin("numalab").unwrap();
    c.timeout(Duration::from_secs(60));
    c
}

/// Run and expect exit status `code` with `needle` in standard error.
fn fails(args: &[&str], code: i32, needle: &str) {
    let out = numalab().args(args).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{args:?}: {err}");
    assert!(err.contains(needle), "{args:?}: wanted '{needle}' in '{err}'");
    assert!(!err.contains("panicked"), "{args:?}: {err}");
    assert_eq!(err.lines().filter(|l| l.starts_with("error:")).count(), 1, "{args:?}: one sentence: {err}");
}

/// `sim` with these overrides must be refused with `needle`.
fn sim_set(sets: &[&str], needle: &str) {
    let mut args = vec!["sim", "--runs", "1", "--format", "json"];
    for s in sets {
        args.push("--set");
        args.push(s);
    }
    fails(&args, 2, needle);
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../linux/tests/fixtures")
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let t = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &t);
        } else {
            std::fs::copy(e.path(), &t).unwrap();
        }
    }
}

/// A copy of the four-node guest tree with one file replaced.
fn guest_with(file: &str, text: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&fixtures().join("guest-4n"), dir.path());
    std::fs::write(dir.path().join(file), text).unwrap();
    dir
}

#[test]
fn huge_meminfo_is_an_error_not_a_panic() {
    let meminfo = "Node 0 MemTotal: 9007199254740992 kB\nNode 0 MemFree: 1 kB\n";
    let dir = guest_with("sys/devices/system/node/node0/meminfo", meminfo);
    let root = dir.path().to_str().unwrap();
    fails(&["machine", "import", "--sysfs", root], 2, "nodes[0].mem_bytes = 9223372036854775808 bytes");
    let export = dir.path().join("m.toml");
    fails(&["topo", "--root", root, "--export", export.to_str().unwrap(), "--format", "json"], 2, "nodes[0].mem_bytes");
}

#[test]
fn duplicate_and_overlapping_cpulists_are_rejected() {
    let dir = guest_with("sys/devices/system/node/node0/cpulist", "0-1,0-1\n");
    fails(&["topo", "--root", dir.path().to_str().unwrap(), "--format", "json"], 2, "`0-1,0-1` names 0 twice");
    // node1 lists CPUs 2-3 in the fixture; node0 claiming 0-3 overlaps.
    let dir = guest_with("sys/devices/system/node/node0/cpulist", "0-3\n");
    fails(&["machine", "import", "--sysfs", dir.path().to_str().unwrap()], 2, "is listed by more than one node's cpulist");
}

#[test]
fn p2p_chunks_are_bounded() {
    sim_set(
        &["workload.definition.phase[0].barrier=p2p_neighbours", "workload.definition.phase[0].chunks=1000000000"],
        "chunks = 1000000000: must lie in 1..=4096",
    );
}

#[test]
fn os_costs_must_be_finite_and_non_negative() {
    sim_set(&["machine.os_costs.first_touch_fault_ns=inf"], "`os_costs.first_touch_fault_ns` = inf ns");
    sim_set(&["machine.os_costs.first_touch_fault_ns=-1000"], "`os_costs.first_touch_fault_ns` = -1000 ns");
    sim_set(&["machine.os_costs.first_touch_fault_ns=nan"], "`os_costs.first_touch_fault_ns` = NaN ns");
    sim_set(&["machine.os_costs.migrate_fixed_ns=-5"], "`os_costs.migrate_fixed_ns` = -5 ns");
    sim_set(&["machine.os_costs.migrate_fixed_ns=nan"], "`os_costs.migrate_fixed_ns` = NaN ns");
    sim_set(&["machine.os_costs.thread_migration_refill_ns=nan"], "`os_costs.thread_migration_refill_ns` = NaN ns");
    sim_set(&["machine.os_costs.thread_migration_refill_ns=inf"], "`os_costs.thread_migration_refill_ns` = inf ns");
}

#[test]
fn latencies_and_bandwidths_are_range_checked() {
    for v in ["inf", "1e12", "1e308", "nan"] {
        sim_set(&[&format!("machine.latency_ns[0][1]={v}")], "`latency_ns[0][1]` =");
    }
    sim_set(&["machine.nodes[0].mem_bw_gbps=1e-9"], "`nodes[0].mem_bw_gbps` = 1e-9 GB/s");
    sim_set(&["machine.nodes[0].mem_peak_gbps=nan"], "`nodes[0].mem_peak_gbps` = NaN GB/s");
    sim_set(&["machine.link_bw_gbps=nan"], "`link_bw_gbps` = NaN GB/s");
    sim_set(&["machine.link_bw_gbps=-1"], "`link_bw_gbps` = -1 GB/s");
    sim_set(&["machine.link_bw_gbps=0"], "link_bw_gbps must be positive: the machine has cross-socket links");
    sim_set(&["machine.intra_socket_link_bw_gbps=nan"], "`intra_socket_link_bw_gbps` = NaN GB/s");
    sim_set(&["machine.nodes[0].mem_bytes=1"], "nodes[0].mem_bytes = 1 bytes: must be 0 (no memory) or between one page");
    sim_set(&["machine.nodes[0].cores=100000"], "nodes[0].cores = 100000: at most 1024");
}

#[test]
fn workload_numbers_are_range_checked() {
    sim_set(&["workload.definition.phase[1].flops_per_access=1e12"], "flops_per_access = 1e12: must be a finite number in [0, 100000]");
    sim_set(&["workload.definition.phase[1].flops_per_access=nan"], "flops_per_access = NaN");
    sim_set(&["workload.definition.phase[1].gap.us=nan"], "gap.us = NaN");
    sim_set(&["workload.definition.phase[0].accesses[0].share=nan"], "share = NaN must lie in [0, 1]");
    sim_set(&["workload.definition.region[0].pages=0"], "pages = 0: a region needs at least one page");
    sim_set(&["workload.definition.workload.run.iterations=1000000000"], "workload.run.iterations = 1000000000: at most 100000");
    sim_set(&["workload.definition.workload.copies=1000000"], "workload.copies = 1000000: at most 256");
    fails(&["sim", "--runs", "1", "--threads", "100000", "--format", "json"], 2, "--threads 100000: at most 4096");
    for (v, needle) in [("-0.5", "repartition.frac = -0.5"), ("nan", "repartition.frac = NaN"), ("2.0", "repartition.frac = 2")] {
        fails(
            &["sim", "--workload", "ua-like", "--runs", "1", "--set", &format!("workload.definition.phase[0].repartition.frac={v}")],
            2,
            needle,
        );
    }
    fails(
        &["sim", "--workload", "ua-like", "--runs", "1", "--set", "workload.definition.phase[0].repartition.every=0"],
        2,
        "repartition.every = 0: must be at least 1",
    );
}

#[test]
fn twenty_thousand_phases_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut text = String::from("[workload]\nname = \"many\"\nthreads = 2\n[[region]]\nname = \"a\"\npages = 4\nsharing = \"private\"\n");
    for i in 0..20_000 {
        text.push_str(&format!(
            "[[phase]]\nname = \"p{i}\"\naccesses = [ {{ region = \"a\", who = \"owner\", pattern = \"seq\", share = 1.0 }} ]\n"
        ));
    }
    let p = dir.path().join("many.toml");
    std::fs::write(&p, text).unwrap();
    fails(&["sim", "--workload", p.to_str().unwrap(), "--runs", "1"], 2, "20000 phases: at most 256");
}

#[test]
fn sim_settings_are_range_checked() {
    sim_set(&["sim.epoch_us=1e-6"], "sim.epoch_us = 0.000001 µs");
    sim_set(&["sim.sched.noise_rate_per_cpu_hz=1e12"], "sim.sched.noise_rate_per_cpu_hz = 1000000000000 Hz");
}

#[test]
fn the_work_estimate_refuses_huge_runs_unless_forced() {
    fails(&["sim", "--workload", "sp-like", "--runs", "1"], 2, "above the limit of 1e11 per run");
    fails(&["sim", "--workload", "sp-like", "--runs", "1"], 2, "pass --force");
}

#[test]
fn the_recorded_source_cannot_be_overridden() {
    sim_set(&["workload.source=cg-like"], "choose the workload with --workload instead");
}

#[test]
fn user_files_are_read_with_a_bound() {
    fails(&["machine", "show", "/dev/zero"], 2, "larger than 64 MiB");
    fails(&["profile", "diff", "/dev/urandom", "x"], 2, "cannot read /dev/urandom");
}

#[test]
fn jobs_beyond_the_cpu_count_are_capped_with_a_note() {
    let out = numalab().args(["sim", "--runs", "1", "--scale", "0.002", "--jobs", "100000", "--format", "json"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("note: --jobs 100000 is more than the"));
}

#[test]
fn out_follows_a_symlink_and_keeps_it() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("real.json");
    std::fs::write(&target, "old").unwrap();
    let link = dir.path().join("link.json");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let out = numalab().args(["list", "policies", "--out", link.to_str().unwrap()]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
    assert!(std::fs::read_to_string(&target).unwrap().contains("first-touch"));
    // /dev/null stays a device.
    let out = numalab().args(["list", "policies", "--out", "/dev/null"]).output().unwrap();
    assert!(out.status.success());
}

/// `--out -` is standard output, not a file named "-" (one such file had been committed to the
/// repository by a run that meant standard output).
#[test]
fn out_dash_is_standard_output() {
    let dir = tempfile::tempdir().unwrap();
    let out = numalab().current_dir(dir.path()).args(["list", "policies", "--format", "json", "--out", "-"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["schema"], "numalab.list/1");
    assert!(!dir.path().join("-").exists(), "a file named - was written");
}

#[test]
fn exit_codes_are_2_for_usage_and_1_for_runtime_failures() {
    fails(&["sim", "--machine", "nope"], 2, "unknown machine preset 'nope'");
    fails(&["sim", "--bogus-flag"], 2, "unexpected argument");
    // Writing into a directory that does not exist is a runtime failure.
    fails(&["list", "policies", "--out", "/nonexistent-dir/x.json"], 1, "cannot write /nonexistent-dir/x.json");
}

#[test]
fn numactl_policy_names_are_aliases() {
    let out = numalab().args(["sim", "--policy", "interleave", "--runs", "1", "--scale", "0.002", "--format", "json"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["config"]["policy"]["name"], "round-4k");
    let out = numalab().args(["sim", "--policy", "localalloc", "--runs", "1", "--scale", "0.002", "--format", "json"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["config"]["policy"]["name"], "first-touch");
    assert_eq!(v["config"]["policy"]["fallback"], "distance");
}

#[test]
fn naming_the_default_workload_keeps_the_default_scale() {
    let run = |extra: &[&str]| {
        let mut args = vec!["sim", "--runs", "1", "--format", "json"];
        args.extend_from_slice(extra);
        let out = numalab().args(&args).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v["config"]["workload"]["scale"].clone()
    };
    assert_eq!(run(&[]), run(&["--workload", "master-slave"]));
}

#[test]
fn machine_show_prints_one_matrix_row_per_line_and_loads_back() {
    let out = numalab().args(["machine", "show", "server-a-4n"]).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("latency_ns = [\n    [80.0, 88.0, 138.0, 138.0],\n"), "{text}");
    assert!(text.contains("slit = [\n    [10, 11, 21, 21],\n"), "{text}");
    numalab_core::Machine::from_toml_str(&text, "shown").unwrap();
}

#[test]
fn csv_is_honoured_or_refused() {
    fails(&["machine", "show", "amd48", "--format", "csv"], 2, "not CSV");
    fails(&["model", "classes", "dunx-synth-8c", "--format", "csv"], 2, "not CSV");
    let sys = fixtures().join("guest-4n/sys");
    fails(&["machine", "import", "--sysfs", sys.to_str().unwrap(), "--format", "csv"], 2, "not CSV");
    // topo's CSV gives bytes.
    let out = numalab().args(["topo", "--root", fixtures().join("guest-4n").to_str().unwrap(), "--format", "csv"]).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("node,cpus,mem_total_bytes,mem_free_bytes,"), "{text}");
    assert!(text.contains(&(514384u64 * 1024).to_string()), "{text}");
}

#[test]
fn model_parameters_are_checked_even_when_the_policy_ignores_them() {
    fails(&["model", "mva", "--policy", "ideal", "--e-ro", "nan"], 2, "parameter 'e_ro' = NaN: must lie in [0, 1]");
    fails(&["model", "roofline", "--ai", "nan"], 2, "must be finite and > 0");
}

#[test]
fn file_errors_name_the_file_line_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let machine = std::fs::read_to_string(root.join("crates/core/presets/machines/server-a-4n.toml")).unwrap();
    let line = machine.lines().position(|l| l.starts_with("mem_bw_gbps")).unwrap() + 1;
    let box_path = dir.path().join("my-box.toml");
    std::fs::write(&box_path, machine.replacen("mem_bw_gbps = 50.0", "mem_bw_gbps = nan", 1)).unwrap();
    fails(
        &["sim", "--machine", box_path.to_str().unwrap(), "--runs", "1"],
        2,
        &format!("my-box.toml:{line}: `nodes[0].mem_bw_gbps` = NaN GB/s: must be a finite number in [0.001, 100000]"),
    );
    let wl = std::fs::read_to_string(root.join("crates/workload/presets/master-slave.toml")).unwrap();
    let wl = wl.replacen("share = 1.0, read_frac", "share = nan, read_frac", 1);
    let line = wl.lines().position(|l| l.contains("share = nan")).unwrap() + 1;
    let app = dir.path().join("my-app.toml");
    std::fs::write(&app, wl).unwrap();
    fails(
        &["sim", "--workload", app.to_str().unwrap(), "--runs", "1"],
        2,
        &format!("my-app.toml:{line}: phase 'fill': access to 'points': share = NaN must lie in [0, 1]"),
    );
}

#[test]
fn out_dev_stdout_writes_to_the_redirected_file_and_keeps_appends() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log.txt");
    std::fs::write(&path, "first line\n").unwrap();
    let f = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
    let out = std::process::Command::new(assert_cmd::cargo::cargo_bin("numalab"))
        .args(["list", "policies", "--format", "csv", "--out", "/dev/stdout"])
        .stdout(f)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.starts_with("first line\nname,kind,summary\n"), "{text}");
}
