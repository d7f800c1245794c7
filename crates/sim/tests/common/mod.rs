//! Set-up shared by the simulator's integration tests.

use numalab_core::Machine;
use numalab_sim::{Scenario, SimConfig};
use numalab_workload::Program;
use std::sync::Arc;

/// `program` on `machine` under first-touch (a VM run replaces the policy with its VMs'),
/// with `sim`'s settings and no background noise, so runs differ only by what a test varies.
pub fn quiet_first_touch(machine: Arc<Machine>, program: Program, mut sim: SimConfig) -> Scenario {
    sim.sched.noise_rate_per_cpu_hz = 0.0;
    Scenario {
        machine,
        program: Arc::new(program),
        policy: numalab_policy::find("first-touch").unwrap(),
        policy_config: Default::default(),
        sim,
    }
}

/// Sixteen pinned threads on amd48 walk one shared region together, a node's block at a time,
/// each from its own block: the load moves from controller to controller with the walks
/// (docs/simulator.md, "Contention", "The demand: the references ahead", and "Fast-forward").
#[allow(dead_code)] // used by the demand and fast-forward tests, not by every test that shares this module
pub const WALK_TOGETHER: &str = r#"
    [workload]
    name = "walk-together"
    threads = 16
    pinned = true
    init = "parallel_ft"
    run = { iterations = 1 }
    [[region]]
    name = "data"
    pages = 2048
    sharing = "shared_ro"
    partition = "block"
    [[phase]]
    name = "sweep"
    barrier = "end"
    refs = 2097152
    accesses = [ { region = "data", who = "all", pattern = "seq", share = 1.0 } ]
"#;
