//! numalab-model: analytic models of NUMA and tiered-memory placement. No I/O: inputs arrive as
//! values or text, errors are typed ([`ModelError`]).
//!
//! - [`mva`]: closed queueing networks with queueing and delay stations — exact MVA
//!   (multi-class), Schweitzer–Bard approximate MVA and the Linearizer (docs/model.md §1).
//! - [`local_remote`]: the local/remote NUMA machine model, `R = tau + R_r + R_f`, with waits
//!   from approximate MVA (§1–§4). The wait solution and `R_f` follow the spec's
//!   reconstruction **[R]**; see `docs/model.md`.
//! - [`classes`]: the five page classes PR, RO, RM, SS, SP and their TOML file format (§5).
//! - [`policy`]: static, cache, MOR, ideal, RC and error mapped to `p_l, p_r, q_m, q_r, q_c` (§6).
//! - [`scenario`]: all inputs of one solve by parameter name, and `--sweep` axes.
//! - [`validate`]: calibration of `tau` from a 1-node run, static prediction, Student-t
//!   intervals (§9).
//! - [`roofline`]: per-tier bandwidth ceilings, the compute ceiling, ridge points and the
//!   tier-move gain (docs/model.md §5).
//! - [`bench`]: throughput benchmark of the local/remote model for `numalab bench`.

pub mod bench;
pub mod classes;
pub mod error;
pub mod local_remote;
pub mod mva;
pub mod policy;
pub mod roofline;
pub mod scenario;
#[cfg(test)]
mod testutil;
pub mod validate;

pub use bench::bench_local_remote;
pub use error::ModelError;
