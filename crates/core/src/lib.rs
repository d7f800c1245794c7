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

/// Join a multi-line message (the toml crate's parse errors span lines) into one line, so
/// every error the CLI prints stays one sentence.
pub fn one_line(message: &str) -> String {
    message.lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join("; ")
}
pub use machine::{Machine, MachineError, Tier};
