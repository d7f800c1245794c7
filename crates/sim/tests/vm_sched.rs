//! The hypervisor's credit scheduler in VM runs (docs/vm.md, "The hypervisor's vCPU
//! scheduler"): overcommitted machines and VMs that do not fit their home nodes run, guest
//! threads follow their vCPUs across pCPUs, first-touch places on the node of the pCPU running
//! the vCPU at that moment, conservation and capacity hold under every VM policy, and the
//! default (`pinned`) is unchanged.

use numalab_core::machine::presets;
use numalab_core::Machine;
use numalab_sim::vmrun::{plan, run_one_vm, VmSetup, VmSetupError};
use numalab_sim::{RunMetrics, Scenario, SimConfig};
use numalab_workload::{compile, compile_spec, presets as wp, CompileOptions, WorkloadSpec};
use std::sync::Arc;

const MIB: u64 = 1 << 20;

fn sim() -> SimConfig {
    let mut sim = SimConfig::default();
    sim.sched.noise_rate_per_cpu_hz = 0.0;
    sim
}

fn scenario(m: Machine, spec_text: &str) -> Scenario {
    let m = Arc::new(m);
    let spec = WorkloadSpec::parse(spec_text, "test").unwrap();
    let program = compile_spec(&spec, "test", &m, &CompileOptions { threads: None, scale: 1.0 }).unwrap();
    Scenario {
        machine: m,
        program: Arc::new(program),
        policy: numalab_policy::find("first-touch").unwrap(),
        policy_config: Default::default(),
        sim: sim(),
    }
}

/// server-a-2n with one core per node: pCPU 0 on node 0, pCPU 1 on node 1.
fn two_by_one() -> Machine {
    let mut m = presets::load("server-a-2n").unwrap();
    m.nodes.iter_mut().for_each(|n| n.cores = 1);
    m
}

/// Three threads, each walking its own 8 MB once, first-touching every page as it reaches it
/// (`init_by = "none"`), with enough computation per access that the walk lasts about 100 ms.
const LATE_TOUCH: &str = r#"
[workload]
name = "late-touch"
threads = 3
run = { iterations = 1 }

[[region]]
name = "a"
bytes = 24_000_000
sharing = "private"
init_by = "none"

[[phase]]
name = "walk"
barrier = "end"
flops_per_access = 4000.0
accesses = [ { region = "a", who = "owner", pattern = "seq", share = 1.0 } ]
"#;

fn setup(text: &str) -> VmSetup {
    VmSetup::from_toml_str(text).unwrap()
}

fn vm3(scheduler: &str) -> VmSetup {
    setup(&format!(
        "[hypervisor]\nvcpu_scheduler = \"{scheduler}\"\n[[vm]]\nvcpus = 3\nmem_bytes = {}\nstatic_policy = \"first-touch\"\n",
        64 * MIB
    ))
}

fn counter(r: &RunMetrics, k: &str) -> u64 {
    *r.policy_counters.get(k).unwrap_or_else(|| panic!("no counter {k}: {:?}", r.policy_counters))
}

/// Three vCPUs on two pCPUs. Pinned, the VM is refused; under the credit scheduler vCPUs 0 and
/// 2 start on pCPU 0 and vCPU 1 on pCPU 1 (placement: `credit.rs`'s worked examples). At the
/// second accounting (60 ms) pCPU 1's own vCPU is OVER and vCPU 2, waiting UNDER on pCPU 0, is
/// stolen: thread 2 moves to node 1, and the pages it first-touches from then on are placed on
/// node 1. Node 1 thus ends with more than thread 1's third of the pages; had the frames been
/// placed from the vCPU's first pCPU, it would hold exactly a third.
#[test]
fn an_overcommitted_vm_runs_and_its_first_touch_frames_follow_the_pcpus() {
    let s = scenario(two_by_one(), LATE_TOUCH);
    let e = plan(&s.machine, &s.program, &vm3("pinned")).unwrap_err();
    assert!(matches!(&e, VmSetupError::Config { key, .. } if key == "vm[0]"), "{e}");
    let vms = vm3("credit");
    let p = plan(&s.machine, &s.program, &vms).unwrap();
    assert_eq!((p.home_nodes.clone(), p.pins.clone()), (vec![vec![0, 1]], vec![vec![0, 1, 0]]));
    let r = run_one_vm(&s, &vms, 7).unwrap();
    let pages = s.program.total_pages;
    assert_eq!(r.pages_per_node.iter().sum::<u64>(), pages, "every page placed once");
    assert!(r.exec_time_s > 0.07, "the walk outlasts the 60 ms steal: {}", r.exec_time_s);
    assert_eq!(counter(&r, "vm_vcpu_steals_hard"), counter(&r, "vm_vcpu_moves"), "no soft affinity: home is every node");
    assert!(counter(&r, "vm_vcpu_cross_node_moves") >= 1);
    let policy_moves = r.thread_migrations_by_cause.policy;
    assert_eq!(policy_moves.cross_node, counter(&r, "vm_vcpu_cross_node_moves"), "each thread followed its vCPU");
    assert!(r.pages_per_node[1] > pages / 3 + 100, "frames follow the pCPU: {:?} of {pages}", r.pages_per_node);
    assert_eq!(counter(&r, "vm_fallbacks"), 0);
    let again = run_one_vm(&s, &vms, 7).unwrap();
    assert_eq!((again.exec_time_s, &again.pages_per_node, &again.policy_counters), (r.exec_time_s, &r.pages_per_node, &r.policy_counters));
}

/// `vcpu_scheduler = "pinned"` written out is the default: the same plan and bit-identical
/// metrics, and none of the scheduler's counters.
#[test]
fn pinned_is_the_default_and_changes_nothing() {
    let m = Arc::new(presets::load("server-a-4n").unwrap());
    let program =
        compile(&wp::load("stream-like").unwrap(), "stream-like", &m, &CompileOptions { threads: Some(12), scale: 0.002 }).unwrap();
    let s = Scenario {
        machine: m,
        program: Arc::new(program),
        policy: numalab_policy::find("first-touch").unwrap(),
        policy_config: Default::default(),
        sim: sim(),
    };
    let vm = format!("[[vm]]\nvcpus = 12\nmem_bytes = {}\nstatic_policy = \"first-touch\"\n", 256 * MIB);
    let implicit = setup(&vm);
    let explicit = setup(&format!("[hypervisor]\nvcpu_scheduler = \"pinned\"\n{vm}"));
    assert_eq!(implicit, explicit);
    let (a, b) = (run_one_vm(&s, &implicit, 3).unwrap(), run_one_vm(&s, &explicit, 3).unwrap());
    assert_eq!(serde_json::to_string(&a).unwrap(), serde_json::to_string(&b).unwrap());
    assert!(!a.policy_counters.contains_key("vm_vcpu_moves"));
}

/// Two VMs on server-a-4n (4 nodes of 8 pCPUs): VM 0 (24 vCPUs) packs on nodes 0–2; VM 1 (16
/// vCPUs) fits nowhere. Pinned, VM 1 is refused; under the credit scheduler it runs with every
/// node as home, 40 vCPUs time-share 32 pCPUs, and under every VM policy pages are conserved,
/// no node is over capacity, and every thread move is one of its vCPU's moves.
#[test]
fn vms_that_do_not_fit_run_under_every_policy_with_conservation_and_capacity() {
    let m = Arc::new(presets::load("server-a-4n").unwrap());
    let text = "mix = { name = \"two\", placement = \"compact\" }\n\
                member = [{ preset = \"stream-like\", threads = 24, iterations = 150 }, { preset = \"stream-like\", threads = 16, iterations = 150 }]\n";
    let spec = WorkloadSpec::parse(text, "test").unwrap();
    let program = compile_spec(&spec, "test", &m, &CompileOptions { threads: None, scale: 0.02 }).unwrap();
    let s = Scenario {
        machine: m.clone(),
        program: Arc::new(program),
        policy: numalab_policy::find("first-touch").unwrap(),
        policy_config: Default::default(),
        sim: sim(),
    };
    let vms = |sched: &str| {
        setup(&format!(
            "[hypervisor]\nvcpu_scheduler = \"{sched}\"\n[[vm]]\nvcpus = 24\nmem_bytes = {}\n[[vm]]\nvcpus = 16\nmem_bytes = {}\n",
            256 * MIB,
            256 * MIB
        ))
    };
    let e = plan(&m, &s.program, &vms("pinned")).unwrap_err();
    assert!(matches!(&e, VmSetupError::Config { key, .. } if key == "vm[1]"), "{e}");
    let credit = vms("credit");
    let p = plan(&m, &s.program, &credit).unwrap();
    assert_eq!(p.home_nodes, vec![vec![0, 1, 2], vec![0, 1, 2, 3]]);
    assert_eq!(p.pins[0], (0..24).collect::<Vec<u32>>(), "VM 0's vCPUs take its home nodes' idle pCPUs");
    assert_eq!(&p.pins[1][..8], &(24..32).collect::<Vec<u32>>()[..], "VM 1 takes the idle pCPUs left, then queues");
    let pages = s.program.total_pages;
    for name in ["round-1g", "round-4k", "first-touch-no-queue", "first-touch+queue"] {
        let r = run_one_vm(&s, &credit.with_policy_name(name).unwrap(), 5).unwrap();
        assert_eq!(r.placed_pages + r.unplaced_pages + r.pages_freed_at_exit, pages, "{name}: pages conserved");
        assert_eq!(r.pages_per_node.iter().sum::<u64>(), r.placed_pages, "{name}");
        for (n, &used) in r.pages_per_node.iter().enumerate() {
            assert!(used <= m.nodes[n].mem_bytes / 4096, "{name}: node {n} over capacity");
        }
        assert!(counter(&r, "vm_vcpu_moves") > 0, "{name}: 40 vCPUs on 32 pCPUs move");
        assert!(counter(&r, "vm_vcpu_switches") > 0, "{name}: and time-share");
        let t = r.thread_migrations_by_cause.policy;
        assert!(t.cross_node <= counter(&r, "vm_vcpu_cross_node_moves"), "{name}: {t:?}");
        assert!(t.in_node + t.cross_node <= counter(&r, "vm_vcpu_moves"), "{name}: {t:?}");
        assert_eq!(r.thread_migrations, t.in_node + t.cross_node, "{name}: no other cause moves a guest thread");
    }
}

/// A bad scheduler name or key is refused with an error naming it.
#[test]
fn bad_scheduler_keys_are_refused_by_name() {
    let e = VmSetup::from_toml_str("[hypervisor]\nvcpu_scheduler = \"credit2\"\n[[vm]]\nvcpus = 1\n").unwrap_err().to_string();
    assert!(e.contains("unknown variant `credit2`") && e.contains("pinned") && e.contains("credit"), "{e}");
    let e = VmSetup::from_toml_str("[hypervisor.credit]\ntimeslice_ms = 5\n[[vm]]\nvcpus = 1\n").unwrap_err().to_string();
    assert!(e.contains("unknown field `timeslice_ms`"), "{e}");
    let s = scenario(two_by_one(), LATE_TOUCH);
    let bad = setup(&format!(
        "[hypervisor]\nvcpu_scheduler = \"credit\"\n[hypervisor.credit]\ntslice_ms = 0\n[[vm]]\nvcpus = 3\nmem_bytes = {}\n",
        64 * MIB
    ));
    let e = plan(&s.machine, &s.program, &bad).unwrap_err().to_string();
    assert!(e.contains("hypervisor.credit.tslice_ms") && e.contains("outside 1..=1000"), "{e}");
}
