//! numalab-model
pub mod classes;
pub mod error;
pub mod local_remote;
pub mod mva;
pub mod policy;
#[cfg(test)]
mod testutil;
pub use error::ModelError;
