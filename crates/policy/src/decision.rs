//! What the driver tells a policy (requests, faults, ticks) and what a policy answers
//! (decisions). Plain data, so a recorded trace can be replayed and compared.

use numalab_core::{CpuId, NodeId, PageIdx, ThreadId};
use serde::{Deserialize, Serialize};

/// An address space: a simulated process (or VM), or one live Linux process.
pub type SpaceId = u32;

/// A page is being placed (first touch, or a lazily placed interleave page).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlaceRequest {
    pub space: SpaceId,
    pub thread: ThreadId,
    pub cpu: CpuId,
    /// Node of the CPU executing the access.
    pub cpu_node: NodeId,
    /// Base-page index inside the address space (`addr >> page_shift`).
    pub page: PageIdx,
}

/// A hinting fault: a thread touched a page the scanner had unmapped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HintFault {
    pub space: SpaceId,
    pub thread: ThreadId,
    pub cpu: CpuId,
    pub cpu_node: NodeId,
    pub page: PageIdx,
    /// Where the page lives now.
    pub page_node: NodeId,
    pub write: bool,
    pub time_ns: u64,
}

/// One completed scan pass over an address space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScanEnd {
    pub space: SpaceId,
    /// Passes completed so far (1 after the first).
    pub sequence: u64,
    pub time_ns: u64,
}

/// Periodic statistics handed to policies (every `tick_ms` of simulated or wall time).
#[derive(Clone, Debug, PartialEq)]
pub struct Tick {
    pub time_ns: u64,
    pub interval_ns: u64,
    /// `access_matrix[i][j]`: memory accesses issued by CPUs of node i, served by node j,
    /// during the interval.
    pub access_matrix: Vec<Vec<u64>>,
}

/// A run of contiguous pages placed together (eager layouts such as Round-1G).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Extent {
    pub first_page: PageIdx,
    pub pages: u64,
    pub node: NodeId,
}

/// An action a policy asks the driver to carry out. The driver may refuse one it cannot do
/// (the live agent refuses replication) and counts refusals.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Decision {
    /// Move a page's only copy to another node.
    MigratePage { space: SpaceId, page: PageIdx, to: NodeId },
    /// Add a read-only copy of a page on a node (simulator only).
    Replicate { space: SpaceId, page: PageIdx, to: NodeId },
    /// Drop every copy but the one on `keep` (before a write).
    CollapseReplicas { space: SpaceId, page: PageIdx, keep: NodeId },
    /// Make a page inaccessible so its next access is a hinting fault.
    Unmap { space: SpaceId, page: PageIdx },
    /// Move a thread to a CPU of another node.
    MoveThread { space: SpaceId, thread: ThreadId, to: NodeId },
    /// Exchange the CPUs of two threads.
    SwapThreads { space: SpaceId, a: ThreadId, b: ThreadId },
    /// Move every page of an address space to a node (tier migration, HyDM).
    MoveSpace { space: SpaceId, to: NodeId },
}

/// How a static policy is realised with Linux `set_mempolicy(2)`/`mbind(2)`
/// (static-policies.md §8). Pure data; the live agent owns the system calls.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MempolicyIntent {
    pub mode: MempolicyMode,
    pub nodes: Vec<NodeId>,
    /// Why the realisation differs from the simulated policy, if it does.
    pub caveat: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MempolicyMode {
    Default,
    Local,
    Bind,
    Preferred,
    PreferredMany,
    Interleave,
    WeightedInterleave,
}
