//! numalab-model
pub mod error;
pub mod local_remote;
pub mod mva;
#[cfg(test)]
mod testutil;
pub use error::ModelError;
