//! The live agent's dynamic half (docs/live.md, "The live engine"): a dynamic policy driven
//! on a running process through the same `DynPolicy` hooks the simulator drives.
//!
//! * [`observe`]: the [`AccessObserver`] trait (what the agent sees of memory accesses) and a
//!   scripted observer.
//! * [`perf_sampler`]: hardware sampling of memory accesses with `perf_event_open` (Intel
//!   PEBS load latency, AMD IBS op, Arm SPE), its ring-buffer record parser, and the check of
//!   which samplers this host offers.
//! * [`damon_sampler`]: the kernel's DAMON (region access frequency), through its sysfs
//!   interface.
//! * [`hint_sampler`]: user-space hinting faults for launched programs (a preloaded library).
//! * [`target`]: the target's threads and mappings, read from procfs (and a fake).
//! * [`placer`]: thread moves with `sched_setaffinity`, behind a trait with a recording fake.
//! * [`space`]: the dense page numbering a policy sees.
//! * [`engine`]: the engine itself; [`drive`]: its real-time loop and the stop signals.

pub mod damon_sampler;
pub mod drive;
pub mod engine;
pub mod hint_sampler;
pub mod observe;
pub mod perf_sampler;
pub mod placer;
pub mod space;
pub mod target;

pub use drive::{drive, StopOnSignals, StopReason};
pub use engine::{LiveConfig, LiveEngine, LiveError, LiveHost, LiveIo, LiveSummary, RoundEnd};
pub use observe::{AccessObserver, Observation, ObserveError, ScriptedObserver};
pub use placer::{AffinityCall, FakeThreadPlacer, SystemThreadPlacer, ThreadPlacer};
pub use target::{FakeTarget, ProcTarget, Target, TaskInfo};

#[cfg(test)]
mod tests;
