//! What the driver tells a policy (events) and what a policy answers (decisions), and what
//! became of a decision (outcomes). Plain serialisable data, so a run's decisions can be
//! logged, replayed and compared (`docs/policies/README.md`, "Decision log").
//!
//! Identifiers: a [`SpaceId`] names an address space (a simulated process, or one live Linux
//! process); a page index ([`PageIdx`]) is local to its space, page 0 being the first page of
//! that space; thread ids ([`ThreadId`]) and CPU ids are global to the run, as Linux pids and
//! CPU numbers are.

use numalab_core::{CpuId, NodeId, PageIdx, ThreadId};
use serde::{Deserialize, Serialize};

/// An address space: a simulated process (or VM), or one live Linux process.
pub type SpaceId = u32;

/// A page is being placed (first touch, or a lazily placed interleave page).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct PlaceRequest {
    pub space: SpaceId,
    pub thread: ThreadId,
    pub cpu: CpuId,
    /// Node of the CPU executing the access.
    pub cpu_node: NodeId,
    /// Base-page index inside the address space (`addr >> page_shift`).
    pub page: PageIdx,
}

/// A hinting fault: a thread touched a page the scanner had made inaccessible.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct HintFault {
    pub space: SpaceId,
    pub thread: ThreadId,
    pub cpu: CpuId,
    pub cpu_node: NodeId,
    pub page: PageIdx,
    /// Where the page lives now.
    pub page_node: NodeId,
    pub write: bool,
    /// The page's mapping is writable (Linux sets `TNF_NO_GROUP` on faults through a
    /// read-only PTE). Every simulated mapping is writable.
    pub pte_writable: bool,
    /// The page may be mapped by several processes (`MAP_SHARED`; Linux's `TNF_SHARED`).
    pub shared_mapping: bool,
    pub time_ns: u64,
}

/// The outcome of one scan step (a [`Decision::ScanStep`] the driver carried out).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ScanStepDone {
    pub space: SpaceId,
    /// The thread in whose context the step ran (it was charged the time).
    pub thread: ThreadId,
    /// PTEs made inaccessible by this step (Linux's `numa_pte_updates`).
    pub pte_updates: u64,
    /// CPU time the step cost the thread, nanoseconds.
    pub cpu_ns: u64,
    /// Completed passes over the space so far (Linux's `mm->numa_scan_seq`).
    pub sequence: u64,
    /// This step reached the end of the space and started a new pass.
    pub pass_completed: bool,
    pub time_ns: u64,
}

/// Periodic statistics handed to policies (every `tick_ms` of simulated or wall time).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Tick {
    pub time_ns: u64,
    pub interval_ns: u64,
    /// `access_matrix[i][j]`: memory accesses issued by CPUs of node i, served by node j,
    /// during the interval.
    #[serde(skip)]
    pub access_matrix: Vec<Vec<u64>>,
    /// `write_matrix[i][j]`: the writes among `access_matrix[i][j]` (empty when the driver
    /// cannot tell reads from writes).
    #[serde(skip)]
    pub write_matrix: Vec<Vec<u64>>,
    /// Data-cache refills from outside the core during the interval, total and those that
    /// arrived in Modified state (AMD event 0x43); `None` where nothing counts them (the
    /// simulator has no caches). Unsupported is never reported as zero.
    pub cache_refills: Option<CacheRefills>,
    /// Instructions per cycle over the interval, machine-wide; `None` where not counted.
    pub ipc: Option<f64>,
    /// Per address space, what it did during the interval (docs/simulator.md, "Per-space
    /// windows"), in space order. Empty where the driver does not count per space.
    #[serde(skip)]
    pub spaces: Vec<SpaceWindow>,
}

/// One page a node's scanner daemon examined: a page whose home (primary copy) is on the
/// scanning node, with the referenced and modified bits of the mappings to that copy since
/// the page's previous scan (docs/simulator.md, "Page mappings and scanner daemons").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ScannedPage {
    pub space: SpaceId,
    pub page: PageIdx,
    /// The scanning node's own mapping was referenced.
    pub local_ref: bool,
    /// A mapping of another node to this copy was referenced.
    pub remote_ref: bool,
    /// A mapping to this copy was written through.
    pub dirty: bool,
}

/// One pass of one node's page-scanner daemon: every page homed on `node`, in space and page
/// order. The bits it reports were cleared.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PageScan {
    pub node: NodeId,
    /// Passes of this node's scanner so far, this one included.
    pub pass: u64,
    pub time_ns: u64,
    pub pages: Vec<ScannedPage>,
}

/// Data-cache line refills from outside the core (Carrefour's DCMR input).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct CacheRefills {
    pub all: u64,
    pub modified: u64,
}

/// One run of pages an accessor-less monitor reported on (the live agent's DAMON sampler;
/// docs/live.md, "Region heat"): how often, in the last aggregation interval, its region was
/// found accessed, and by whom it does not say. A region covers the run's pages and possibly
/// more (unmapped gaps, other mappings): each run is one part of one region.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct RegionHeat {
    pub space: SpaceId,
    pub first_page: PageIdx,
    pub pages: u64,
    /// Checks of the last aggregation interval that found the region accessed.
    pub nr_accesses: u32,
    /// Checks per aggregation interval: `nr_accesses`'s largest value.
    pub max_accesses: u32,
    /// Aggregation intervals for which the region kept about this count.
    pub age: u32,
    /// End of the aggregation interval the counts are of.
    pub time_ns: u64,
}

/// One access sample: a memory reference the access sampler picked (instruction-based
/// sampling on AMD, PEBS memory events on Intel; the simulator's sampler is described in
/// docs/simulator.md, "Access sampling").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct AccessSample {
    pub space: SpaceId,
    pub thread: ThreadId,
    pub cpu: CpuId,
    /// Node of the CPU that issued the reference.
    pub cpu_node: NodeId,
    pub page: PageIdx,
    /// Node whose memory served the reference (the nearest copy of a replicated page).
    pub served_node: NodeId,
    /// Home node of the page (its only copy unless replicated).
    pub page_node: NodeId,
    pub write: bool,
    pub time_ns: u64,
}

/// One address space's counters over one tick interval (deltas, not running totals), and
/// where its pages are at the interval's end (docs/simulator.md, "Per-space windows").
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SpaceWindow {
    pub space: SpaceId,
    /// Floating-point operations: memory references times the step's `flops_per_access`.
    pub flops: f64,
    /// Memory references (one per simulated access, `access_bytes` each).
    pub mem_refs: u64,
    /// Page faults: first-touch faults (pages of the space placed during the interval).
    /// Hinting faults are not included.
    pub page_faults: u64,
    /// Pages of the space resident on each node at the interval's end (home copies; replicas
    /// not counted).
    pub pages_per_node: Vec<u64>,
}

impl SpaceWindow {
    /// Resident pages on all nodes.
    pub fn resident_pages(&self) -> u64 {
        self.pages_per_node.iter().sum()
    }
}

/// A scheduler tick on a CPU running a workload thread (Linux's `task_tick_fair`, which calls
/// `task_tick_numa`). Delivered every scheduler tick for every thread on a CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct TaskTick {
    pub space: SpaceId,
    pub thread: ThreadId,
    pub cpu: CpuId,
    /// CPU time the thread has run so far (Linux's `se.sum_exec_runtime`), nanoseconds.
    pub runtime_ns: u64,
    pub time_ns: u64,
}

/// Why a thread changed CPU. The same names are the keys of `thread_migrations_by_cause`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MoveCause {
    /// A CPU that went idle pulled it (newidle balancing).
    IdleBalance,
    /// Periodic (or active) load balancing.
    LoadBalance,
    /// Placed on another CPU when it woke up (`select_task_rq_fair`).
    Wakeup,
    /// NUMA task placement moved it to an idle CPU (`sched_move_numa`).
    NumaMove,
    /// NUMA task placement swapped it with another task (`sched_swap_numa`).
    NumaSwap,
    /// Thread clustering moved it to a node (Stable-NUMA's cluster placement).
    ClusterMove,
    /// Thread clustering swapped it with a thread of another node.
    ClusterSwap,
    /// Any other policy decision.
    Policy,
}

impl MoveCause {
    pub const ALL: [MoveCause; 8] = [
        MoveCause::IdleBalance,
        MoveCause::LoadBalance,
        MoveCause::Wakeup,
        MoveCause::NumaMove,
        MoveCause::NumaSwap,
        MoveCause::ClusterMove,
        MoveCause::ClusterSwap,
        MoveCause::Policy,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            MoveCause::IdleBalance => "idle_balance",
            MoveCause::LoadBalance => "load_balance",
            MoveCause::Wakeup => "wakeup",
            MoveCause::NumaMove => "numa_move",
            MoveCause::NumaSwap => "numa_swap",
            MoveCause::ClusterMove => "cluster_move",
            MoveCause::ClusterSwap => "cluster_swap",
            MoveCause::Policy => "policy",
        }
    }
}

/// A workload thread moved to a CPU of another node, whatever moved it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ThreadMigrated {
    pub space: SpaceId,
    pub thread: ThreadId,
    pub from_node: NodeId,
    pub to_node: NodeId,
    pub cause: MoveCause,
    pub time_ns: u64,
}

/// Every event a driver hands a policy, for the decision log (`cause` of a decision).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum EventRef {
    Place {
        space: SpaceId,
        thread: ThreadId,
        page: PageIdx,
    },
    HintFault {
        space: SpaceId,
        thread: ThreadId,
        page: PageIdx,
        page_node: NodeId,
        cpu_node: NodeId,
    },
    ScanStep {
        space: SpaceId,
        thread: ThreadId,
        sequence: u64,
    },
    Tick,
    TaskTick {
        thread: ThreadId,
    },
    ThreadMigrated {
        thread: ThreadId,
        from_node: NodeId,
        to_node: NodeId,
    },
    /// One node's page-scanner daemon pass (docs/simulator.md, "Page mappings and scanner
    /// daemons").
    PageScan {
        node: NodeId,
    },
}

impl From<&HintFault> for EventRef {
    fn from(f: &HintFault) -> Self {
        EventRef::HintFault { space: f.space, thread: f.thread, page: f.page, page_node: f.page_node, cpu_node: f.cpu_node }
    }
}

/// A run of contiguous pages placed together (eager layouts such as Round-1G).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Extent {
    pub first_page: PageIdx,
    pub pages: u64,
    pub node: NodeId,
}

/// A set of nodes, as the node masks of `migrate_pages(2)` hold them, for nodes 0 to 63 (the
/// simulator's limit is 63 nodes). Written as the list of its nodes, ascending.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct NodeMask(u64);

impl NodeMask {
    /// The highest node a mask can hold, plus one.
    pub const NODES: usize = 64;

    /// The mask of `nodes`; `None` if one of them is past [`NodeMask::NODES`].
    pub fn of(nodes: &[NodeId]) -> Option<NodeMask> {
        nodes.iter().try_fold(NodeMask(0), |m, &n| ((n as usize) < Self::NODES).then(|| NodeMask(m.0 | 1u64 << n)))
    }

    pub fn contains(self, node: NodeId) -> bool {
        (node as usize) < Self::NODES && self.0 >> node & 1 == 1
    }

    /// Its nodes, ascending.
    pub fn nodes(self) -> impl Iterator<Item = NodeId> {
        (0..Self::NODES as NodeId).filter(move |&n| self.contains(n))
    }
}

/// Whether `MoveSpace { to, from, .. }` takes a page on `node`: one on a node of `from` (every
/// node when `None`) that is not `to`. The simulator and the live agent both move by it.
pub fn space_move_takes(to: NodeId, from: Option<NodeMask>, node: NodeId) -> bool {
    node != to && from.is_none_or(|m| m.contains(node))
}

impl Serialize for NodeMask {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.nodes())
    }
}

impl<'de> Deserialize<'de> for NodeMask {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<NodeMask, D::Error> {
        let nodes = Vec::<NodeId>::deserialize(d)?;
        NodeMask::of(&nodes).ok_or_else(|| serde::de::Error::custom(format!("a node mask holds nodes 0 to {}", NodeMask::NODES - 1)))
    }
}

/// An action a policy asks the driver to carry out. The driver may refuse one it cannot do
/// (the live agent refuses replication; nobody migrates to a full node) and says why in a
/// [`Refusal`].
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
    /// One step of the space's hinting scanner, run in `thread`'s context (Linux's
    /// `task_numa_work`): from the space's resume offset, make up to `pages` pages
    /// inaccessible, 2 MiB range by range, skipping unplaced and already-marked pages and those
    /// the policy's `should_unmap` declines; at most `8 × pages` of address space is walked.
    /// The driver answers with a [`ScanStepDone`] to `on_scan_step`.
    ScanStep { space: SpaceId, thread: ThreadId, pages: u64 },
    /// Move a thread to a CPU of `to`: `cpu` if given (it must be on `to`), else the least
    /// busy CPU of `to`.
    MoveThread { thread: ThreadId, to: NodeId, cpu: Option<CpuId>, cause: MoveCause },
    /// Exchange the CPUs of two threads.
    SwapThreads { a: ThreadId, b: ThreadId, cause: MoveCause },
    /// The node a thread should run on, which the load balancer honours (Linux's
    /// `numa_preferred_nid`, read by `migrate_degrades_locality`); `None` clears it.
    SetPreferredNode { thread: ThreadId, node: Option<NodeId> },
    /// Move the pages of an address space to a node (tier migration, HyDM): those on the
    /// nodes of `from`, or with `None` every page not on `to`, as `migrate_pages(2)` moves
    /// the pages on its `old_nodes` (docs/policies/README.md, "Decisions").
    MoveSpace {
        space: SpaceId,
        to: NodeId,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        from: Option<NodeMask>,
    },
    /// Remove the per-node mappings of a page, all of them or all but `keep`'s, so that the
    /// next reference of each node that lost its mapping faults (DUnX's re-evaluation
    /// trigger). Only where the driver keeps per-node mappings, for a policy that asked for
    /// them (docs/simulator.md, "Page mappings and scanner daemons").
    DropMappings { space: SpaceId, page: PageIdx, keep: Option<NodeId> },
}

/// Why a driver did not carry out a decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Refusal {
    /// The decision names a space, page, thread, CPU or node that does not exist.
    NoSuchTarget,
    /// The page has not been placed yet (nothing to move, copy or unmap).
    NotPlaced,
    /// The target node has no free page.
    NodeFull,
    /// The page is already where the decision wants it (or already marked, or already copied).
    AlreadyThere,
    /// The page has replicas; collapse them before migrating it.
    Replicated,
    /// The threads are pinned, or the CPU is outside the thread's allowed set.
    Pinned,
    /// This driver does not implement the decision at all (e.g. replication on live Linux).
    Unsupported,
    /// The address space's program exited and its memory was freed (docs/simulator.md,
    /// "Program exit"): nothing of it is left to move, copy, unmap or scan.
    SpaceExited,
    /// Live agent: the kernel kept answering `EBUSY` for the page (locked, under writeback)
    /// after the retries.
    Busy,
    /// Live agent: the page is mapped by another process too (`EACCES`); moving it would need
    /// `MPOL_MF_MOVE_ALL` and privilege.
    Shared,
    /// Live agent: the kernel refused the move for another reason, or placed the page
    /// elsewhere than asked.
    Failed,
}

impl Refusal {
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::NoSuchTarget => "no_such_target",
            Refusal::NotPlaced => "not_placed",
            Refusal::NodeFull => "node_full",
            Refusal::AlreadyThere => "already_there",
            Refusal::Replicated => "replicated",
            Refusal::Pinned => "pinned",
            Refusal::Unsupported => "unsupported",
            Refusal::SpaceExited => "space_exited",
            Refusal::Busy => "busy",
            Refusal::Shared => "shared",
            Refusal::Failed => "failed",
        }
    }
}

/// What became of a decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", content = "reason", rename_all = "snake_case")]
pub enum Outcome {
    Applied,
    /// Carried out in part: a whole-space move ([`Decision::MoveSpace`]) that the target's
    /// free pages cut short. `moved_pages` moved; `left_pages` of the space's placed pages
    /// are still elsewhere than the target.
    Partial {
        moved_pages: u64,
        left_pages: u64,
    },
    Refused(Refusal),
}

impl Outcome {
    /// The decision took effect, wholly or in part.
    pub fn took_effect(&self) -> bool {
        !matches!(self, Outcome::Refused(_))
    }
}

/// One line of a decision log (`numalab.decisions/1`, docs/json.md): the time, the event
/// that caused the decision, the decision and what became of it. The simulator's log and the
/// live agent's write the same record.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct DecisionRecord<'a> {
    pub run: u32,
    pub time_ns: u64,
    pub cause: &'a EventRef,
    pub decision: &'a Decision,
    /// `applied`, `partial`, `refused`, or (live agent, `--dry-run`) `dry_run`.
    pub outcome: &'static str,
    /// Why a refused decision was refused (`node_full`, `pinned`, …), or why a partial one
    /// stopped (`node_full`); the live agent's own reasons (`busy`, `shared`, …) for pages
    /// the kernel would not move.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<&'static str>,
    /// Of a partial whole-space move: the pages that moved, and the placed pages left behind.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub moved_pages: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub left_pages: Option<u64>,
}

impl<'a> DecisionRecord<'a> {
    pub fn new(run: u32, time_ns: u64, cause: &'a EventRef, decision: &'a Decision, outcome: &Outcome) -> DecisionRecord<'a> {
        let (outcome, reason, moved_pages, left_pages) = match *outcome {
            Outcome::Applied => ("applied", None, None, None),
            Outcome::Partial { moved_pages, left_pages } => {
                ("partial", Some(Refusal::NodeFull.as_str()), Some(moved_pages), Some(left_pages))
            }
            Outcome::Refused(r) => ("refused", Some(r.as_str()), None, None),
        };
        DecisionRecord { run, time_ns, cause, decision, outcome, reason, moved_pages, left_pages }
    }
}

/// How a static policy is realised with Linux `set_mempolicy(2)`/`mbind(2)`
/// (docs/policies/README.md, "Live realisation"). Pure data; the live agent owns the system
/// calls.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_masks_hold_nodes_0_to_63_and_are_written_as_lists() {
        let m = NodeMask::of(&[3, 0, 63, 3]).unwrap();
        assert_eq!(m.nodes().collect::<Vec<_>>(), vec![0, 3, 63]);
        assert!(m.contains(0) && m.contains(63) && !m.contains(1) && !m.contains(64) && !m.contains(u16::MAX));
        assert_eq!(NodeMask::of(&[64]), None);
        assert_eq!(NodeMask::of(&[]).unwrap().nodes().count(), 0);
        // In a decision: `from` is written only when set, and read back.
        let d = Decision::MoveSpace { space: 2, to: 1, from: NodeMask::of(&[2, 3]) };
        let text = serde_json::to_string(&d).unwrap();
        assert_eq!(text, r#"{"kind":"move_space","space":2,"to":1,"from":[2,3]}"#);
        assert_eq!(serde_json::from_str::<Decision>(&text).unwrap(), d);
        let all = Decision::MoveSpace { space: 2, to: 1, from: None };
        assert_eq!(serde_json::to_string(&all).unwrap(), r#"{"kind":"move_space","space":2,"to":1}"#);
        assert_eq!(serde_json::from_str::<Decision>(r#"{"kind":"move_space","space":2,"to":1}"#).unwrap(), all);
        let err = serde_json::from_str::<Decision>(r#"{"kind":"move_space","space":2,"to":1,"from":[64]}"#).unwrap_err();
        assert!(err.to_string().contains("a node mask holds nodes 0 to 63"), "{err}");
    }
}
