//! Set-up shared by the VM tests.

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
