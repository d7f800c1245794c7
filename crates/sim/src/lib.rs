//! numalab-sim: a fast, deterministic simulator of NUMA and tiered-memory machines running
//! parallel workloads under a placement policy.
//!
//! Same machine, program, policy, config and seed give bit-identical metrics. Runs are
//! independent; [`run_many`] spreads them over the current rayon pool and returns them in
//! run order whatever the pool size.

mod apply;
mod apps;
pub mod bench;
mod block_end;
pub mod calibrate;
pub mod classes;
pub mod config;
pub mod contention;
mod driver;
mod engine;
pub mod estimate;
mod fast;
mod hot;
pub mod log;
mod mappings;
pub mod memory;
pub mod metrics;
pub mod pingpong;
pub mod profile;
mod scanner;
pub mod sched;
mod segshares;
mod stridereach;
mod view;
pub mod vm;
pub mod vmlive;
pub mod vmplace;
pub mod vmrun;
mod walkruns;
mod windows;

pub use config::SimConfig;
pub use metrics::{EngineCounts, OneEpochSteps, RunMetrics, RunsSummary};

pub use log::DecisionLog;
use numalab_core::Machine;
use numalab_policy::{DynPolicy, PolicyEntry, PolicyEnv};
use numalab_workload::Program;
use rayon::prelude::*;
use std::sync::Arc;
use thiserror::Error;

#[derive(Debug, Error, Clone, PartialEq)]
pub enum SimError {
    #[error("machine: {0}")]
    Machine(String),
    #[error("{0}")]
    Policy(String),
    #[error("invalid simulator setting: {0}")]
    Config(String),
    #[error("out of memory: no allowed node could hold page {page}")]
    OutOfMemory { page: u64 },
    #[error("internal simulator error: {0}")]
    Internal(String),
    #[error("{0}")]
    Io(String),
}

/// Everything a run needs except its seed.
#[derive(Clone)]
pub struct Scenario {
    pub machine: Arc<Machine>,
    pub program: Arc<Program>,
    pub policy: &'static PolicyEntry,
    pub policy_config: toml::Table,
    pub sim: SimConfig,
}

impl Scenario {
    /// Check the policy configuration and simulator settings once, before any run.
    pub fn check(&self) -> Result<(), SimError> {
        self.sim.validate().map_err(SimError::Config)?;
        self.policy.build(self.policy_config.clone(), &policy_env(self, 0)?).map_err(|e| SimError::Policy(e.to_string()))?;
        Ok(())
    }

    /// The policy's resolved configuration (defaults filled in), for result files.
    pub fn resolved_policy_config(&self) -> Result<toml::Table, SimError> {
        let p = self.policy.build(self.policy_config.clone(), &policy_env(self, 0)?).map_err(|e| SimError::Policy(e.to_string()))?;
        Ok(p.config_toml())
    }
}

/// One run with its own seed.
pub fn run_one(s: &Scenario, seed: u64) -> Result<RunMetrics, SimError> {
    run_one_logged(s, seed, None)
}

/// What a scenario's policy is told for a run with `seed`: the machine, the seed, and each
/// page's DUnX class when the workload has `runs` regions (for the oracle policies,
/// docs/policies/oracle.md).
pub fn policy_env(s: &Scenario, seed: u64) -> Result<PolicyEnv, SimError> {
    Ok(PolicyEnv::new(s.machine.clone()).with_seed(seed).with_page_classes(classes::page_classes(&s.program)?))
}

/// The policy of a scenario, built for one run: its randomness derives from the run's seed.
pub fn build_policy(s: &Scenario, seed: u64) -> Result<Box<dyn DynPolicy>, SimError> {
    let env = policy_env(s, seed)?;
    s.policy.build(s.policy_config.clone(), &env).map_err(|e| SimError::Policy(e.to_string()))
}

/// One run, writing every decision of the policy to `log` (docs/json.md,
/// `numalab.decisions/1`).
pub fn run_one_logged(s: &Scenario, seed: u64, log: Option<DecisionLog<'_>>) -> Result<RunMetrics, SimError> {
    run_with_policy(s, build_policy(s, seed)?, seed, log)
}

/// One run of the scenario's machine, program and settings under any policy object (tests use
/// it to run policies that are not registered).
pub fn run_with_policy(s: &Scenario, policy: Box<dyn DynPolicy>, seed: u64, log: Option<DecisionLog<'_>>) -> Result<RunMetrics, SimError> {
    let drv = driver::Driver::new(policy, log);
    engine::Engine::new(&s.machine, &s.program, &s.sim, drv, seed)?.run(seed)
}

/// Makes the decision log of run `k` (or none).
pub type LogFactory<'f> = dyn Fn(u32) -> Result<Option<DecisionLog<'static>>, SimError> + Sync + 'f;

/// `run_many` with a decision log per run (`make_log(k)` for run `k`).
pub fn run_many_logged(
    s: &Scenario,
    master_seed: u64,
    runs: u32,
    on_done: &(dyn Fn() + Sync),
    make_log: &LogFactory<'_>,
) -> Result<Vec<RunMetrics>, SimError> {
    s.check()?;
    (0..runs)
        .into_par_iter()
        .map(|k| {
            let r = run_one_logged(s, numalab_core::rng::run_seed(master_seed, k as u64), make_log(k)?);
            on_done();
            r
        })
        .collect()
}

/// `runs` runs; run `k` uses `numalab_core::rng::run_seed(master_seed, k)`. `on_done` is
/// called after each run (for progress bars), from any thread.
pub fn run_many(s: &Scenario, master_seed: u64, runs: u32, on_done: &(dyn Fn() + Sync)) -> Result<Vec<RunMetrics>, SimError> {
    s.check()?;
    (0..runs as u64)
        .into_par_iter()
        .map(|k| {
            let r = run_one(s, numalab_core::rng::run_seed(master_seed, k));
            on_done();
            r
        })
        .collect()
}
