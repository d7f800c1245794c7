//! The policy conformance suite (docs/policies/README.md, "Conformance"): one test function
//! per invariant, instantiated for every registered policy, plus a test-only policy that
//! makes every kind of decision so that every decision path of the engine runs under test.

use numalab_core::machine::presets;
use numalab_core::rng::{stream, StreamRng};
use numalab_core::NodeId;
use numalab_policy::{
    Decision, DynPolicy, HintFault, MemoryState, MoveCause, OutOfMemory, PlaceRequest, Policy, PolicyEnv, PolicyError, SystemView,
    TaskTick, ThreadMigrated, Tick,
};
use numalab_sim::{run_many, run_one, run_one_logged, run_with_policy, DecisionLog, RunMetrics, Scenario, SimConfig};
use numalab_workload::{compile, compile_spec, presets as wp, CompileOptions, WorkloadSpec};
use rand::Rng;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::sync::Arc;

mod common;

const MACHINE: &str = "server-a-4n";

/// Settings under which every policy acts within a short run: dynamic policies get short
/// delays and periods (the defaults wait a simulated second before the first scan).
fn policy_config(name: &str, env: &PolicyEnv, entry: &numalab_policy::PolicyEntry) -> toml::Table {
    let mut cfg = toml::Table::new();
    if entry.kind == numalab_policy::PolicyKind::Dynamic {
        for (k, v) in
            [("scan_delay_ms", 1), ("scan_period_min_ms", 2), ("scan_period_max_ms", 20), ("scan_interval_ms", 5), ("fault_period_ms", 5)]
        {
            if entry.default_config().contains_key(k) {
                cfg.insert(k.into(), toml::Value::Integer(v));
            }
        }
        // Carrefour: decide every 2 ms, and let replication run (memory read ratio; the
        // simulator has no modified-refill counts) from the first candidate on.
        if entry.default_config().contains_key("read_ratio_metric") {
            cfg.insert("interval_ms".into(), toml::Value::Integer(2));
            cfg.insert("read_ratio_metric".into(), toml::Value::String("mrr".into()));
            cfg.insert("replication_min_orders".into(), toml::Value::Integer(1));
        }
    }
    // The oracle policies (docs/policies/oracle.md): break-even counts of 0 (server-a-4n gives
    // no page-operation costs), so every shared page moves or is copied; under `error` every
    // SS page is wrong (left static: the classes have one page each at this scale).
    if ORACLES.contains(&name) {
        cfg.insert("k_mig".into(), toml::Value::Float(0.0));
        cfg.insert("k_rep".into(), toml::Value::Float(0.0));
        cfg.insert("scan_delay_ms".into(), toml::Value::Integer(1));
        if name == "error" {
            let ss: toml::Table = [("ss".to_string(), toml::Value::Float(1.0))].into_iter().collect();
            cfg.insert("errors".into(), toml::Value::Table(ss));
        }
    }
    // Policies that need a node set (bind, preferred) refuse their default config.
    if entry.build(cfg.clone(), env).is_err() {
        cfg.insert("nodes".into(), toml::Value::Array(vec![toml::Value::Integer(0), toml::Value::Integer(1)]));
    }
    assert!(entry.build(cfg.clone(), env).is_ok(), "{name}: no working config");
    cfg
}

fn scenario(name: &str, workload: &str, copies: u32) -> Scenario {
    let m = Arc::new(presets::load(MACHINE).unwrap());
    let mut file = wp::load(workload).unwrap();
    file.workload.copies = copies;
    let opts = CompileOptions { threads: Some(8), scale: 0.0005 };
    let program = if copies > 1 {
        compile_spec(&WorkloadSpec::Single(file), workload, &m, &opts).unwrap()
    } else {
        compile(&file, workload, &m, &opts).unwrap()
    };
    let entry = numalab_policy::find(name).unwrap();
    let mut sim = SimConfig { tick_ms: 1.0, metrics_interval_ms: 2.0, ..SimConfig::default() };
    sim.sched.tick_hz = 1000.0;
    let mut s = Scenario { policy_config: toml::Table::new(), machine: m, program: Arc::new(program), policy: entry, sim };
    // What the simulator tells the policy, the workload's page classes included.
    let env = numalab_sim::policy_env(&s, 0).unwrap();
    s.policy_config = policy_config(name, &env, entry);
    s
}

/// The oracle policies need page classes: they run the DUnX synth workload (one program, and
/// two copies as a mix of two spaces); the others run an NPB-like program and a mix.
fn workloads(name: &str) -> [(&'static str, u32); 2] {
    if ORACLES.contains(&name) {
        [("dunx-synth", 1), ("dunx-synth", 2)]
    } else {
        [("cg-like", 1), ("master-slave", 2)]
    }
}

const ORACLES: [&str; 2] = ["ideal", "error"];

/// Pages are conserved (each page has at most one home, replicas counted apart) and no node
/// holds more than its capacity, replicas included.
fn check_pages(r: &RunMetrics, s: &Scenario) {
    let resident: u64 = r.pages_per_node.iter().sum();
    assert_eq!(resident, r.placed_pages + r.replica_pages, "resident pages = homes + replicas");
    assert!(r.placed_pages <= s.program.total_pages);
    // Freed pages (programs that exited before the run's end) complete the count.
    assert_eq!(r.placed_pages + r.unplaced_pages + r.pages_freed_at_exit, s.program.total_pages, "placed + unplaced + freed = total");
    for (n, &used) in r.pages_per_node.iter().enumerate() {
        assert!(used <= s.machine.nodes[n].mem_bytes / s.program.page_bytes, "node {n} over capacity: {used}");
    }
    // The timeline adds up to the run and ends where the run ends.
    let tl = &r.timeline;
    assert!(!tl.is_empty());
    assert_eq!(tl.iter().map(|p| p.accesses).sum::<u64>(), r.accesses);
    assert_eq!(tl.iter().map(|p| p.page_migrations).sum::<u64>(), r.page_migrations);
    assert_eq!(tl.iter().map(|p| p.replications).sum::<u64>(), r.replications);
    assert_eq!(tl.iter().map(|p| p.hint_faults).sum::<u64>(), r.hint_faults);
    assert_eq!(tl.iter().map(|p| p.thread_migrations).sum::<u64>(), r.thread_migrations_by_cause.cross_node());
    assert_eq!(tl.last().unwrap().pages_per_node, r.pages_per_node);
    assert!(
        (tl.last().unwrap().t_s - r.exec_time_s).abs() < 1e-12,
        "timeline ends at {} s, run at {} s; {} points",
        tl.last().unwrap().t_s,
        r.exec_time_s,
        tl.len()
    );
    assert!(tl.windows(2).all(|w| w[0].t_s < w[1].t_s));
}

/// Run with a decision log and return its records.
fn logged(s: &Scenario, seed: u64, policy: Option<Box<dyn DynPolicy>>) -> (RunMetrics, Vec<serde_json::Value>) {
    let mut buf = Vec::new();
    let log = DecisionLog::new(0, Box::new(&mut buf), "memory");
    let r = match policy {
        Some(p) => run_with_policy(s, p, seed, Some(log)),
        None => run_one_logged(s, seed, Some(log)),
    }
    .unwrap();
    let records = String::from_utf8(buf).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    (r, records)
}

/// Every decision names an existing space, page, node and thread; refusals are only those a
/// correct policy can meet (a full node, a page already there, a pinned thread, a space whose
/// program exited since the event the policy answers was queued).
fn check_decisions(s: &Scenario, records: &[serde_json::Value]) {
    let nodes = s.machine.node_count() as u64;
    let threads = s.program.threads as u64;
    let spaces = s.program.processes() as u64;
    for rec in records {
        let d = &rec["decision"];
        for key in ["to", "keep"] {
            if let Some(n) = d[key].as_u64() {
                assert!(n < nodes, "{rec}");
            }
        }
        for key in ["thread", "a", "b"] {
            if let Some(t) = d[key].as_u64() {
                assert!(t < threads, "{rec}");
            }
        }
        if let Some(sp) = d["space"].as_u64() {
            assert!(sp < spaces, "{rec}");
            if let Some(p) = d["page"].as_u64() {
                let pages = match s.program.members.get(sp as usize) {
                    Some(m) => m.program.total_pages,
                    None => s.program.total_pages,
                };
                assert!(p < pages, "{rec}");
            }
        }
        if rec["outcome"] == "refused" {
            let why = rec["reason"].as_str().unwrap();
            assert!(
                ["node_full", "already_there", "pinned", "replicated", "space_exited"].contains(&why),
                "a correct policy met {why}: {rec}"
            );
        }
    }
}

fn pages_conserved(name: &str) {
    for (workload, copies) in workloads(name) {
        let s = scenario(name, workload, copies);
        let r = run_one(&s, 7).unwrap();
        check_pages(&r, &s);
        assert_eq!(r.accesses, r.node_accesses.iter().sum::<u64>());
        if ORACLES.contains(&name) {
            assert!(r.page_migrations > 0 && r.replications > 0, "{name} on {workload}: the treatments acted");
        }
        // The same on the fast engine advancing in windows (docs/simulator.md, "Fast-forward").
        let mut fast = s.clone();
        fast.sim.engine = numalab_sim::config::EngineKind::Fast;
        fast.sim.fast_forward_max_us = 2000.0;
        fast.sim.memory.population_tolerance = 0.01;
        let r = run_one(&fast, 7).unwrap();
        check_pages(&r, &fast);
        assert_eq!(r.accesses, r.node_accesses.iter().sum::<u64>());
    }
}

fn decisions_well_formed(name: &str) {
    for (workload, copies) in workloads(name) {
        let s = scenario(name, workload, copies);
        let (r, records) = logged(&s, 3, None);
        check_decisions(&s, &records);
        let refused = records.iter().filter(|r| r["outcome"] == "refused").count() as u64;
        assert_eq!(refused, r.refused_decisions, "the log and the counter agree");
    }
}

fn deterministic(name: &str) {
    let s = scenario(name, workloads(name)[0].0, 1);
    let one = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap().install(|| run_many(&s, 5, 3, &|| ()).unwrap());
    let two = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap().install(|| run_many(&s, 5, 3, &|| ()).unwrap());
    assert_eq!(one, two, "--jobs 1 and --jobs 2 give the same runs");
    assert_eq!(one[0], run_one(&s, one[0].seed).unwrap());
}

macro_rules! conformance {
    ($($id:ident => $name:literal),* $(,)?) => {
        $(mod $id {
            #[test]
            fn pages_conserved() {
                super::pages_conserved($name)
            }
            #[test]
            fn decisions_well_formed() {
                super::decisions_well_formed($name)
            }
            #[test]
            fn deterministic() {
                super::deterministic($name)
            }
        })*

        #[test]
        fn every_registered_policy_is_in_the_suite() {
            let listed: BTreeSet<&str> = [$($name),*].into_iter().collect();
            let registered: BTreeSet<&str> = numalab_policy::REGISTRY.iter().map(|e| e.name).collect();
            assert_eq!(listed, registered, "add the new policy to the conformance! list");
        }
    };
}

conformance! {
    first_touch => "first-touch",
    round_4k => "round-4k",
    round_1g => "round-1g",
    bind => "bind",
    preferred => "preferred",
    weighted_interleave => "weighted-interleave",
    linux => "linux",
    tier_static => "tier-static",
    autonuma => "autonuma",
    stable_numa => "stable-numa",
    kmaf => "kmaf",
    carrefour => "carrefour",
    first_touch_carrefour => "first-touch+carrefour",
    round_4k_carrefour => "round-4k+carrefour",
    hydm => "hydm",
    linux_tiering => "linux-tiering",
    dunx => "dunx",
    cache => "cache",
    mor => "mor",
    ideal => "ideal",
    error => "error",
}

// ---------------------------------------------------------------------------------------------
// A test-only policy that makes every kind of decision, valid and invalid.

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct ChaosConfig {}

struct Chaos {
    config: ChaosConfig,
    rng: StreamRng,
    nodes: NodeId,
}

impl Chaos {
    fn node(&mut self) -> NodeId {
        self.rng.random_range(0..self.nodes)
    }
}

impl Policy for Chaos {
    type Config = ChaosConfig;
    const NAME: &'static str = "chaos";
    const SUMMARY: &'static str = "test only: random decisions of every kind";

    fn new(config: ChaosConfig, env: &PolicyEnv) -> Result<Self, PolicyError> {
        Ok(Chaos { config, rng: stream(env.seed, "policy.chaos", 0), nodes: env.machine.node_count() as NodeId })
    }
    fn config(&self) -> &ChaosConfig {
        &self.config
    }
    fn place(&mut self, req: &PlaceRequest, mem: &dyn MemoryState) -> Result<NodeId, OutOfMemory> {
        (0..self.nodes)
            .map(|k| (req.cpu_node + k) % self.nodes)
            .find(|&n| !mem.is_full(n, 1))
            .ok_or(OutOfMemory { wanted: req.cpu_node, pages: 1 })
    }
    fn on_task_tick(&mut self, tick: &TaskTick, _view: &dyn SystemView, out: &mut Vec<Decision>) {
        if self.rng.random_range(0..3) == 0 {
            out.push(Decision::ScanStep { space: tick.space, thread: tick.thread, pages: 48 });
        }
    }
    fn on_hint_fault(&mut self, f: &HintFault, view: &dyn SystemView, out: &mut Vec<Decision>) {
        let threads = view.thread_count();
        let (space, page) = (f.space, f.page);
        let d = match self.rng.random_range(0..9) {
            0 => Decision::MigratePage { space, page, to: self.node() },
            1 => Decision::Replicate { space, page, to: self.node() },
            2 => Decision::CollapseReplicas { space, page, keep: f.cpu_node },
            3 => Decision::Unmap { space, page: (page + 1) % view.space_pages(space) },
            4 => Decision::MoveThread { thread: f.thread, to: self.node(), cpu: None, cause: MoveCause::Policy },
            5 => Decision::SwapThreads { a: f.thread, b: self.rng.random_range(0..threads), cause: MoveCause::Policy },
            6 => Decision::SetPreferredNode { thread: f.thread, node: Some(self.node()) },
            7 => Decision::MigratePage { space, page, to: self.nodes + 3 },
            _ => Decision::Replicate { space: view.spaces() + 1, page, to: 0 },
        };
        out.push(d);
    }
    fn on_tick(&mut self, _tick: &Tick, view: &dyn SystemView, out: &mut Vec<Decision>) {
        if self.rng.random_range(0..4) == 0 {
            let space = self.rng.random_range(0..view.spaces());
            out.push(Decision::MoveSpace { space, to: self.node(), from: None });
        }
    }
    fn on_thread_migrated(&mut self, m: &ThreadMigrated, view: &dyn SystemView, _out: &mut Vec<Decision>) {
        assert_eq!(view.node_of_thread(m.thread), m.to_node, "the event follows the move");
        assert_ne!(m.from_node, m.to_node);
    }
}

fn chaos(s: &Scenario) -> Box<dyn DynPolicy> {
    Box::new(Chaos::new(ChaosConfig::default(), &PolicyEnv::new(s.machine.clone()).with_seed(11)).unwrap())
}

#[test]
fn every_decision_path_of_the_engine_runs() {
    let s = scenario("first-touch", "master-slave", 2);
    let (r, records) = logged(&s, 11, Some(chaos(&s)));
    check_pages(&r, &s);
    // A whole-space move the target's capacity cut short (`partial`) ran its path too.
    let applied: BTreeSet<String> = records
        .iter()
        .filter(|r| r["outcome"] == "applied" || r["outcome"] == "partial")
        .map(|r| r["decision"]["kind"].as_str().unwrap().to_string())
        .collect();
    for kind in [
        "migrate_page",
        "replicate",
        "collapse_replicas",
        "unmap",
        "scan_step",
        "move_thread",
        "swap_threads",
        "set_preferred_node",
        "move_space",
    ] {
        assert!(applied.contains(kind), "{kind} never applied; applied: {applied:?}");
    }
    let reasons: BTreeSet<&str> = records.iter().filter_map(|r| r["reason"].as_str()).collect();
    assert!(reasons.contains("no_such_target"), "invalid decisions are refused by name: {reasons:?}");
    assert!(r.numa.numa_hint_faults > 0 && r.numa.numa_pte_updates > 0);
    assert!(r.thread_migrations_by_cause.policy.cross_node > 0);
    let causes: BTreeSet<&str> = records.iter().map(|r| r["cause"]["event"].as_str().unwrap()).collect();
    assert!(causes.is_superset(&["hint_fault", "task_tick", "tick"].into_iter().collect()), "{causes:?}");
    // The same seed gives the same decisions.
    let (r2, records2) = logged(&s, 11, Some(chaos(&s)));
    assert_eq!(r, r2);
    assert_eq!(records, records2);
}

#[test]
fn pinned_threads_refuse_moves_by_name() {
    let mut s = scenario("first-touch", "cg-like", 1);
    let mut p = (*s.program).clone();
    p.pinned = true;
    s.program = Arc::new(p);
    let (r, records) = logged(&s, 4, Some(chaos(&s)));
    check_pages(&r, &s);
    assert_eq!(r.thread_migrations, 0, "pinned threads never move");
    assert!(records.iter().any(|r| r["reason"] == "pinned"));
}

// ---------------------------------------------------------------------------------------------
// VM runs (docs/vm.md, "A workload inside VMs"): every `vm:NAME` placement the hypervisor
// offers (`vmrun::vm_policy_names`, derived from every static kind, each with and without
// Carrefour in the hypervisor), two VMs whose guests churn (a history before the run and
// processes during it, with a queue small enough to deliver), under pinned vCPUs and under the
// credit scheduler. Each run conserves pages, keeps every node within its capacity, and the
// host conserves machine frames.

mod vm {
    use super::check_pages;
    use numalab_core::machine::presets;
    use numalab_sim::vmrun::{run_one_vm, vm_policy_names, vm_scenario, VmSetup};
    use numalab_sim::{RunMetrics, Scenario, SimConfig};
    use numalab_workload::{compile_spec, CompileOptions, WorkloadSpec};
    use std::sync::Arc;

    const MIB: u64 = 1 << 20;

    /// A mix of two stream-like processes of `a` and `b` threads and `iterations` passes
    /// each on server-a-4n (4 nodes of 8 pCPUs).
    fn scenario(a: u32, b: u32, iterations: u32) -> Scenario {
        let m = Arc::new(presets::load(super::MACHINE).unwrap());
        let text = format!(
            "mix = {{ name = \"two\", placement = \"compact\" }}\n\
             member = [{{ preset = \"stream-like\", threads = {a}, iterations = {iterations} }}, {{ preset = \"stream-like\", threads = {b}, iterations = {iterations} }}]\n"
        );
        let spec = WorkloadSpec::parse(&text, "test").unwrap();
        let program = compile_spec(&spec, "test", &m, &CompileOptions { threads: None, scale: 0.002 }).unwrap();
        super::common::quiet_first_touch(m, program, SimConfig { tick_ms: 1.0, metrics_interval_ms: 2.0, ..SimConfig::default() })
    }

    /// Two VMs of `a` and `b` vCPUs, 64 MiB each, whose guests ran 16 processes of 1 MiB (two
    /// at a time) before the run and go on during it; a queue of 4 partitions of 16 entries.
    fn setup(scheduler: &str, a: u32, b: u32) -> VmSetup {
        let vm = |vcpus: u32| {
            format!(
                "[[vm]]\nvcpus = {vcpus}\nmem_bytes = {}\n[vm.guest]\nprocesses = 16\nprocess_bytes = {MIB}\nconcurrency = 2\nduring_run = true\n[vm.queue]\ncapacity = 16\n",
                64 * MIB
            )
        };
        let text = format!(
            "[hypervisor]\nvcpu_scheduler = \"{scheduler}\"\n[hypervisor.carrefour]\ninterval_ms = 2\nread_ratio_metric = \"mrr\"\n{}{}",
            vm(a),
            vm(b)
        );
        VmSetup::from_toml_str(&text).unwrap()
    }

    fn counter(r: &RunMetrics, k: &str) -> u64 {
        *r.policy_counters.get(k).unwrap_or_else(|| panic!("no counter {k}: {:?}", r.policy_counters))
    }

    /// Every VM placement on `vms`: conservation and capacity (the suite's page checks), the
    /// host's machine frames conserved, the churn ran, the run deterministic; `homes`: the
    /// nodes the VMs may use (pages elsewhere break confinement).
    fn every_vm_policy(s: &Scenario, vms: &VmSetup, homes: &[usize]) {
        let (s2, _) = vm_scenario(s, vms).unwrap();
        for name in vm_policy_names() {
            let setup = vms.with_policy_name(&name).unwrap();
            let r = run_one_vm(s, &setup, 7).unwrap();
            check_pages(&r, &s2);
            assert_eq!(r.accesses, r.node_accesses.iter().sum::<u64>(), "{name}");
            assert_eq!(counter(&r, "vm_host_frames_unaccounted"), 0, "vm:{name}: the host lost or made up machine frames");
            assert_eq!(counter(&r, "vm_guest_errors"), 0, "vm:{name}");
            assert!(counter(&r, "vm_guest_starts") > 0, "vm:{name}: the guests churn during the run");
            for (n, &used) in r.pages_per_node.iter().enumerate() {
                assert!(homes.contains(&n) || used == 0, "vm:{name}: node {n} is no VM's home: {:?}", r.pages_per_node);
            }
            let again = run_one_vm(s, &setup, 7).unwrap();
            assert_eq!(serde_json::to_string(&again).unwrap(), serde_json::to_string(&r).unwrap(), "vm:{name}: deterministic");
        }
    }

    /// Pinned: two VMs of 8 vCPUs, each on one node (homes {0} and {1}); nodes 2 and 3 stay
    /// empty.
    #[test]
    fn every_vm_policy_with_pinned_vcpus() {
        // About 2 ms of run time: a process start at 0.
        every_vm_policy(&scenario(8, 8, 30), &setup("pinned", 8, 8), &[0, 1]);
    }

    /// The credit scheduler on an overcommitted machine: VM 0 (24 vCPUs) packs on nodes 0–2,
    /// VM 1 (16 vCPUs) fits nowhere and takes every node; 40 vCPUs time-share 32 pCPUs.
    #[test]
    fn every_vm_policy_under_the_credit_scheduler() {
        // About 45 ms of run time: the scheduler's 30 ms timeslice ends at least once.
        let s = scenario(24, 16, 600);
        let vms = setup("credit", 24, 16);
        every_vm_policy(&s, &vms, &[0, 1, 2, 3]);
        let r = run_one_vm(&s, &vms.with_policy_name("first-touch+queue").unwrap(), 7).unwrap();
        assert!(counter(&r, "vm_vcpu_moves") > 0, "vCPUs move in {} s", r.exec_time_s);
    }

    /// Every name the list gives is a VM policy, and the list covers every static kind with
    /// and without Carrefour.
    #[test]
    fn every_vm_policy_name_is_accepted() {
        let names = vm_policy_names();
        let vms = setup("pinned", 8, 8);
        for name in &names {
            vms.with_policy_name(name).unwrap();
        }
        for k in numalab_policy::vm::StaticKind::ALL {
            assert!(names.iter().any(|n| n == k.name()) && names.iter().any(|n| *n == format!("{}+carrefour", k.name())), "{}", k.name());
        }
    }
}
