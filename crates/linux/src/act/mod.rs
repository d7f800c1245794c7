//! Actuators: what the live agent does to a program (docs/live.md).
//!
//! * [`mempolicy`]: a policy's `MempolicyIntent` as `set_mempolicy(2)` arguments.
//! * [`syscall`]: the system calls as data, so a recording fake can stand in for the kernel.
//! * [`launch`]: `numalab run`'s plan, the [`Launcher`] trait and its recording fake.
//! * [`system`]: the real launcher (fork, calls, exec, wait; signal forwarding).
//! * [`pages`]: `move_pages(2)` in paced batches, with a recording fake.
//! * [`preload`]: handing a preload library and a shared memory area to a launched program.
//! * [`range_bind`]: round-1g's preload library (per-range mbind) for launched programs.
//! * [`range_move`]: round-1g by the agent: pages moved to their range's node.
//! * [`attach`]: a static policy applied to a running process's resident pages.

pub mod attach;
pub mod launch;
pub mod mempolicy;
pub mod pages;
pub mod preload;
pub mod range_bind;
pub mod range_move;
pub mod syscall;
pub mod system;

pub use launch::{
    action_records, checked_calls, cpu_plan, launch, own_cpu_seconds, static_plan, ActionOutcome, ActionRecord, ChildExit, LaunchAction,
    LaunchReport, Launcher, RecordingLauncher,
};
pub use mempolicy::KernelMempolicy;
pub use syscall::SysCall;
pub use system::{spawn, RunningChild, SystemLauncher};

#[derive(Debug, thiserror::Error)]
pub enum ActError {
    #[error("node {node} does not exist: this host has {nodes} nodes")]
    NoSuchNode { node: u32, nodes: usize },
    #[error("node {node} has no CPUs: --cpus-on needs nodes with CPUs")]
    CpuLessNode { node: u32 },
    #[error("memory policy: {0}")]
    Mempolicy(String),
    #[error("no command to run (give it after `--`)")]
    NoCommand,
    #[error("the kernel refused {call} for {what}: {reason}")]
    KernelRefused { call: &'static str, what: String, errno: i32, reason: String },
    #[error("cannot run {program}")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
}
