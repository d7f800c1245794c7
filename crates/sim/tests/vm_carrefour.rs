//! Carrefour run by the hypervisor over the VM placements (docs/vm.md, "Carrefour in the
//! hypervisor"): names, conservation and capacity over VMs, confinement to each VM's home
//! nodes, the host's frame table following every move, and determinism.

use numalab_core::machine::presets;
use numalab_core::Machine;
use numalab_sim::vmrun::{policy_name, run_one_vm, VmSetup};
use numalab_sim::{RunMetrics, Scenario, SimConfig};
use numalab_workload::{compile, compile_spec, presets as wp, CompileOptions, WorkloadSpec};
use std::sync::Arc;

const MIB: u64 = 1 << 20;

/// Every VM base, each under the hypervisor's Carrefour.
const BASES: [&str; 4] = ["round-1g", "round-4k", "first-touch-no-queue", "first-touch+queue"];

fn sim() -> SimConfig {
    // Ticks of 0.5 ms and Carrefour intervals of 1 ms, so a run of a few ms has several rounds.
    let mut sim = SimConfig { tick_ms: 0.5, metrics_interval_ms: 1.0, ..SimConfig::default() };
    sim.sched.noise_rate_per_cpu_hz = 0.0;
    sim
}

fn scenario(workload: &str, threads: u32, scale: f64) -> Scenario {
    let m = Arc::new(presets::load("server-a-4n").unwrap());
    let file = wp::load(workload).unwrap();
    let program = compile(&file, workload, &m, &CompileOptions { threads: Some(threads), scale }).unwrap();
    Scenario {
        machine: m,
        program: Arc::new(program),
        policy: numalab_policy::find("first-touch").unwrap(),
        policy_config: Default::default(),
        sim: sim(),
    }
}

/// `[hypervisor.carrefour]` deciding every 1 ms, replication gated on the memory read ratio
/// (the simulator has no modified-refill counts) from the first candidate on.
const CARREFOUR: &str = "[hypervisor.carrefour]\ninterval_ms = 1\nread_ratio_metric = \"mrr\"\nreplication_min_orders = 1\n";

fn setup(vms: &str) -> VmSetup {
    VmSetup::from_toml_str(&format!("{CARREFOUR}{vms}")).unwrap()
}

/// Conservation and capacity with replicas counted apart, every home and every copy on the
/// VMs' home nodes, and the host's frame table moved with every page the simulator moved.
fn check(r: &RunMetrics, m: &Machine, pages: u64, home: &[u16], what: &str) {
    let resident: u64 = r.pages_per_node.iter().sum();
    assert_eq!(resident, r.placed_pages + r.replica_pages, "{what}: resident = homes + replicas");
    assert_eq!(r.placed_pages + r.unplaced_pages + r.pages_freed_at_exit, pages, "{what}: pages conserved");
    for (n, &used) in r.pages_per_node.iter().enumerate() {
        assert!(used <= m.nodes[n].mem_bytes / 4096, "{what}: node {n} over capacity");
        if !home.contains(&(n as u16)) {
            assert_eq!(used, 0, "{what}: node {n} is no home node but holds pages: {:?}", r.pages_per_node);
        }
    }
    assert_eq!(r.thread_migrations, 0, "{what}: vCPUs stay pinned");
    let c = &r.policy_counters;
    assert_eq!(c["vm_frames_migrated"], r.page_migrations, "{what}: the host moved every frame the simulator moved");
    assert_eq!(c["vm_frames_migrate_refused"], 0, "{what}");
    assert!(c["carrefour_intervals"] > 0, "{what}: Carrefour ran: {c:?}");
}

#[test]
fn policy_names_add_and_remove_the_hypervisors_carrefour() {
    let s = VmSetup::from_toml_str(&format!("[[vm]]\nvcpus = 4\nmem_bytes = {}\n", 64 * MIB)).unwrap();
    for base in BASES {
        let c = s.with_policy_name(&format!("{base}+carrefour")).unwrap();
        assert_eq!(c.hypervisor.carrefour, Some(Default::default()), "{base}: the defaults when the file has none");
        assert_eq!(policy_name(&c), format!("vm:{base}+carrefour"));
        let plain = c.with_policy_name(base).unwrap();
        assert_eq!(plain.hypervisor.carrefour, None, "{base}: a name without +carrefour runs none");
        assert_eq!(policy_name(&plain), format!("vm:{base}"));
    }
    // The file's keys are kept.
    let f = setup(&format!("[[vm]]\nvcpus = 4\nmem_bytes = {}\n", 64 * MIB));
    assert_eq!(f.with_policy_name("round-4k+carrefour").unwrap().hypervisor.carrefour.unwrap().interval_ms, 1);
    assert_eq!(policy_name(&f), "vm:round-4k+carrefour", "as written: the file's Carrefour runs");
    let e = s.with_policy_name("round-2m+carrefour").unwrap_err().to_string();
    assert!(e.contains("unknown vm policy 'round-2m+carrefour'") && e.contains("+carrefour"), "{e}");
    let e = VmSetup::from_toml_str("[hypervisor.carrefour]\nbogus = 1\n").unwrap_err().to_string();
    assert!(e.contains("bogus"), "{e}");
}

/// One VM of 12 vCPUs on server-a-4n: home nodes {0, 1}, threads 0–7 on node 0, 8–11 on
/// node 1. Under every base, Carrefour's moves stay on the home nodes and the host follows.
#[test]
fn carrefour_over_every_vm_base_conserves_pages_and_stays_home() {
    let s = scenario("stream-like", 12, 0.02);
    let vm = setup(&format!("[[vm]]\nvcpus = 12\nmem_bytes = {}\n[vm.guest]\nprocesses = 16\nprocess_bytes = {}\n", 256 * MIB, MIB));
    for base in BASES {
        let v = vm.with_policy_name(&format!("{base}+carrefour")).unwrap();
        let r = run_one_vm(&s, &v, 11).unwrap();
        check(&r, &s.machine, s.program.total_pages, &[0, 1], base);
    }
}

/// Round-1g lays the 256 MiB VM out in 2 MiB extents alternating over nodes 0 and 1, so each
/// thread streams half its data from the other node (LAR about 50 % < 80 %): migration is on,
/// and Carrefour moves the single-reader pages the sampler saw toward their reader. Without
/// Carrefour nothing moves.
#[test]
fn carrefour_moves_round_1gs_frames_toward_their_readers() {
    let s = scenario("stream-like", 12, 0.02);
    let vm = setup(&format!("[[vm]]\nvcpus = 12\nmem_bytes = {}\n", 256 * MIB));
    let plain = run_one_vm(&s, &vm.with_policy_name("round-1g").unwrap(), 5).unwrap();
    assert!(plain.pages_per_node[0] > 0 && plain.pages_per_node[1] > 0, "{:?}", plain.pages_per_node);
    assert!(plain.local_access_ratio.unwrap() < 0.8);
    assert_eq!(plain.page_migrations, 0);
    assert!(!plain.policy_counters.contains_key("carrefour_intervals"));
    let c = run_one_vm(&s, &vm.with_policy_name("round-1g+carrefour").unwrap(), 5).unwrap();
    check(&c, &s.machine, s.program.total_pages, &[0, 1], "round-1g+carrefour");
    let k = &c.policy_counters;
    assert!(k["carrefour_active_intervals"] > 0, "{k:?}");
    assert!(c.page_migrations > 0 && c.pages_per_node[1] > 0, "pages moved to node 1: {:?}", c.pages_per_node);
    // Same inputs, same seed: the same run.
    let again = run_one_vm(&s, &vm.with_policy_name("round-1g+carrefour").unwrap(), 5).unwrap();
    assert_eq!(
        (again.exec_time_s, again.page_migrations, again.pages_per_node),
        (c.exec_time_s, c.page_migrations, c.pages_per_node.clone())
    );
}

/// Two VMs, one per process of a two-copy mix: VM 0 on node 0, VM 1 on node 1. Round-4k
/// over one home node leaves nothing to interleave across, and a VM's pages never leave its
/// node: Carrefour's destinations are the VM's own home nodes.
#[test]
fn two_vms_keep_their_pages_under_the_hypervisors_carrefour() {
    let m = Arc::new(presets::load("server-a-4n").unwrap());
    let text = "mix = { name = \"two\", placement = \"compact\" }\nmember = [{ preset = \"stream-like\", copies = 2, threads = 8 }]\n";
    let spec = WorkloadSpec::parse(text, "test").unwrap();
    let program = compile_spec(&spec, "test", &m, &CompileOptions { threads: None, scale: 0.02 }).unwrap();
    let s = Scenario {
        machine: m.clone(),
        program: Arc::new(program),
        policy: numalab_policy::find("first-touch").unwrap(),
        policy_config: Default::default(),
        sim: sim(),
    };
    let one = format!("[[vm]]\nvcpus = 8\nmem_bytes = {}\n", 128 * MIB);
    let vms = setup(&format!("{one}{one}"));
    for base in BASES {
        let r = run_one_vm(&s, &vms.with_policy_name(&format!("{base}+carrefour")).unwrap(), 3).unwrap();
        check(&r, &m, s.program.total_pages, &[0, 1], base);
        // Node 0's CPUs run VM 0 only, whose pages live on node 0: every access is local.
        assert_eq!(r.local_access_ratio, Some(1.0), "{base}: {:?}", r.access_matrix);
    }
}

#[test]
fn bad_hypervisor_carrefour_settings_are_refused_before_the_run() {
    let s = scenario("stream-like", 4, 0.002);
    for (keys, want) in [
        ("base = \"first-touch\"", "each VM's own placement"),
        ("max_vaddr = 4096", "which a hypervisor does not see"),
        ("interval_ms = 0", "interval_ms must be at least 1"),
    ] {
        let v = VmSetup::from_toml_str(&format!("[hypervisor.carrefour]\n{keys}\n[[vm]]\nvcpus = 4\nmem_bytes = {}\n", 64 * MIB)).unwrap();
        let e = run_one_vm(&s, &v, 1).unwrap_err().to_string();
        assert!(e.contains(want), "{keys}: {e}");
    }
}
