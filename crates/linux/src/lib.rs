//! numalab-linux: the live Linux backend.
//!
//! * [`sysfs`], [`procfs`]: readers of kernel text. Every reader takes an [`FsRoot`] so tests
//!   run on captured text (`tests/fixtures/`) exactly as production runs on `/`; parse errors
//!   name the file, line and field.
//! * [`topology`], [`export`]: the host's NUMA topology and its machine-file export.
//! * [`perf`]: `perf_event_open(2)` groups, errno classification, the capability probe.
//! * [`act`]: actuators of the live agent (`numalab run`): memory policy and CPU affinity of a
//!   launched program, behind a trait with a recording fake.
//! * [`sampler`], [`session`]: the profiler behind `numalab profile`, filling
//!   [`numalab_core::profile::ProfileReport`].

pub mod act;
pub mod error;
pub mod export;
pub mod live;
pub mod measure;
pub mod parse;
pub mod perf;
pub mod procfs;
pub mod root;
pub mod sampler;
pub mod session;
pub mod sysfs;
pub mod topology;

pub use error::{LinuxError, Result};
pub use root::FsRoot;
pub use topology::Topology;
