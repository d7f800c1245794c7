//! numalab-core: the vocabulary every numalab component shares.
//!
//! Pure types and arithmetic only: no file, process or network I/O happens here, so the
//! simulator, the analytic models and the live agent can all depend on it.

pub mod ids;
pub mod machine;
pub mod overrides;
pub mod profile;
pub mod rng;
pub mod stats;

pub use ids::{CpuId, NodeId, PageIdx, ThreadId};
pub use machine::{Machine, MachineError, Tier};
