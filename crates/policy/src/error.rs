use numalab_core::NodeId;
use thiserror::Error;

/// No allowed node can hold the page. Carries what was wanted for the error message.
#[derive(Debug, Error, Clone, Copy, PartialEq, Eq)]
#[error("out of memory: no allowed node can hold {pages} page(s) (first choice was node {wanted})")]
pub struct OutOfMemory {
    pub wanted: NodeId,
    pub pages: u64,
}

#[derive(Debug, Error, Clone, PartialEq)]
pub enum PolicyError {
    #[error("unknown policy '{name}'; valid policies: {valid}")]
    Unknown { name: String, valid: String },
    #[error("policy '{policy}': {message}")]
    Config { policy: String, message: String },
    #[error("policy '{policy}' names node {node}, but the machine has {nodes} nodes")]
    NoSuchNode { policy: String, node: NodeId, nodes: usize },
    #[error("policy '{policy}' names node {node}, which has no memory")]
    MemorylessNode { policy: String, node: NodeId },
}
