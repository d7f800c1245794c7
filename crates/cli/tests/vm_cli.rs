//! `numalab vm` (docs/vm.md, "Churn runs"): the example run file end to end, determinism, and
//! bad run files as one-line errors with exit status 2.

use assert_cmd::Command;
use serde_json::Value;

fn numalab() -> Command {
    Command::cargo_bin("numalab").unwrap()
}

const EXAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/examples/vm-churn.toml");

fn run_json(args: &[&str]) -> Value {
    let out = numalab().args(args).args(["--format", "json"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn the_example_runs_and_is_deterministic() {
    let a = run_json(&["vm", EXAMPLE, "--machine", "amd48", "--seed", "1"]);
    assert_eq!(a["schema"], "numalab.vm-run/1");
    let vm = &a["vms"][0];
    assert_eq!((vm["static_policy"].as_str(), vm["queue_active"].as_bool()), (Some("first-touch"), Some(true)));
    assert_eq!(vm["home_nodes"], serde_json::json!([0, 1]));
    assert!(vm["frames_unbacked"].as_u64().unwrap() > 0);
    let b = run_json(&["vm", EXAMPLE, "--machine", "amd48", "--seed", "1"]);
    assert_eq!(a, b);
}

#[test]
fn bad_run_files_are_usage_errors() {
    let dir = std::env::temp_dir().join(format!("numalab-vm-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("bad.toml");
    std::fs::write(&f, "[[vm]]\nvcpus = 2\n[vm.queue]\npartitions = 3\n[[guest]]\n").unwrap();
    let out = numalab().args(["vm", f.to_str().unwrap()]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("vm setting 'vm.queue.partitions': 3 is not a power of two"), "{err}");
    std::fs::write(&f, "[[vm]]\nvcpu = 2\n").unwrap();
    let out = numalab().args(["vm", f.to_str().unwrap()]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown field `vcpu`"));
    std::fs::remove_dir_all(&dir).unwrap();
}

const VM_ONE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/examples/vm-one.toml");

/// `numalab sim --vm` (docs/vm.md, "A workload inside VMs"): the example VM on two of
/// server-a-4n's nodes, its memory interleaved page by page by round-4k, so half the accesses
/// are local; the policy names and the pairing of `--vm` with a `vm` policy are checked.
#[test]
fn a_workload_runs_inside_the_example_vm() {
    let args = [
        "sim",
        "--machine",
        "server-a-4n",
        "--workload",
        "stream-like",
        "--threads",
        "12",
        "--scale",
        "0.002",
        "--runs",
        "1",
        "--vm",
        VM_ONE,
    ];
    let r = run_json(&[&args[..], &["--policy", "vm:round-4k"]].concat());
    let run = &r["runs"][0];
    let local = run["local_access_ratio"].as_f64().unwrap();
    assert!((local - 0.5).abs() < 0.01, "round-4k over the VM's two nodes: local ratio {local}");
    let pages = run["pages_per_node"].as_array().unwrap();
    assert!(pages[2..].iter().all(|p| p == 0), "nothing outside the VM's home nodes: {pages:?}");
    let ft = run_json(&[&args[..], &["--policy", "vm:first-touch"]].concat());
    assert_eq!(ft["runs"][0]["local_access_ratio"], 1.0, "pinned vCPUs touch their own pages first");
    for (policy, msg) in
        [("vm:bogus", "unknown vm policy 'bogus'"), ("first-touch", "--vm runs the workload in VMs only under --policy vm or vm:KIND")]
    {
        let out = numalab().args(args).args(["--policy", policy]).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{policy}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(msg), "{policy}: {err}");
    }
}

/// A study file with `[[vm]]` tables (docs/vm.md, "VMs in a study"): native and VM policies
/// side by side, the VMs in each VM cell's config, and a `vm` policy without VMs refused.
#[test]
fn a_study_runs_vm_cells_beside_native_ones() {
    let dir = std::env::temp_dir().join(format!("numalab-vm-study-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("s.toml");
    let study = "[study]\nmachines = [\"server-a-4n\"]\nworkloads = [\"stream-like\"]\n\
                 policies = [\"first-touch\", \"vm:round-4k\", \"vm:first-touch-no-queue\"]\nruns = 1\nscale = 0.002\nthreads = 12\n";
    std::fs::write(&f, format!("{study}[[vm]]\nvcpus = 12\nmem_bytes = 268435456\n[vm.guest]\nprocesses = 24\nprocess_bytes = 1048576\n"))
        .unwrap();
    let out = numalab().args(["study", f.to_str().unwrap(), "--jobs", "1", "--format", "json"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let cells = doc["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 3);
    assert_eq!(cells[1]["config"]["policy"]["name"], "vm:round-4k");
    assert_eq!(cells[1]["config"]["policy"]["vm"][0]["static_policy"], "round-4k");
    assert_eq!(cells[2]["config"]["policy"]["vm"][0]["queue"]["enabled"], false);
    let local = |c: &Value| c["runs"][0]["local_access_ratio"].as_f64().unwrap_or(-1.0);
    assert!((local(&cells[1]) - 0.5).abs() < 0.02, "round-4k over two nodes: {}", local(&cells[1]));
    assert!(local(&cells[2]) < 0.99, "reused frames keep their old nodes without the queue: {}", local(&cells[2]));
    std::fs::write(&f, study).unwrap();
    let out = numalab().args(["study", f.to_str().unwrap(), "--dry-run"]).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("a study gives its VMs as [[vm]] tables"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}
