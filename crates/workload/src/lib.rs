//! Workloads: what a parallel program does to memory.
//!
//! A workload file (TOML, `docs/workloads.md`) names threads, memory regions and phases of
//! accesses. [`compile`] turns it, for one machine, into a [`Program`]: the page layout, who
//! first-touches what, and for every step of the run each thread's access streams. The
//! simulator executes programs; it never reads workload files itself.
//!
//! The events are memory-level accesses: references that missed every cache, one per
//! `access_bytes` line.

pub mod error;
pub mod escapes;
pub mod mix;
pub mod presets;
pub mod program;
pub mod schema;
pub mod stream;
pub mod sweep;
pub mod synth;

mod compile;
mod layout;
mod schedule;
mod work;

pub use compile::{compile, limits, CompileOptions};
pub use error::WorkloadError;
pub use escapes::EscapeLists;
pub use mix::{compile_spec, MixFile, WorkloadSpec};
pub use program::{Program, RegionLayout, Step};
pub use schema::WorkloadFile;
pub use stream::{Cursor, Entry, Seg};
pub use synth::{ClassCounts, ClassPages, DunxClass, SynthCounts};
