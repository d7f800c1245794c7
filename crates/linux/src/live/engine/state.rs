//! What the live engine knows of its target, as a policy reads it (docs/live.md, "The live
//! engine"): the threads, the page numbering and each page's last known node, the scan marks,
//! the free memory per node; and the pages a scan step walks, located with `move_pages`.

use super::{LiveConfig, LiveHost, LiveSummary};
use crate::act::pages::{locate, MoveError, PageMover};
use crate::live::space::SpaceIndex;
use numalab_core::{CpuId, NodeId, PageIdx, ThreadId};
use numalab_policy::scan::{ScanCursor, ScanPages};
use numalab_policy::{MemoryState, SpaceId, SystemView};
use std::collections::BTreeMap;

#[derive(Clone, Debug)]
pub(super) struct LiveThread {
    pub(super) tid: i32,
    pub(super) cpu: CpuId,
    pub(super) runtime_ns: u64,
    /// CPU time at the previous round: a thread whose time advanced ran.
    pub(super) prev_runtime_ns: u64,
    pub(super) alive: bool,
    pub(super) ran: bool,
    /// Its affinity allows a single CPU (it cannot be moved).
    pub(super) pinned: bool,
}

/// Page node unknown (never located, or not present).
pub(super) const UNKNOWN: u8 = u8::MAX;

/// Everything a policy may look at; the policy itself lives beside it.
pub(super) struct State {
    pub(super) host: LiveHost,
    pub(super) cfg: LiveConfig,
    pub(super) pid: i32,
    pub(super) now_ns: u64,
    pub(super) threads: Vec<LiveThread>,
    pub(super) by_tid: BTreeMap<i32, ThreadId>,
    pub(super) space: SpaceIndex,
    /// Last known node of each numbered page (`UNKNOWN` if not known).
    pub(super) page_node: Vec<u8>,
    /// Pages marked by scan steps (bit per page).
    pub(super) marked: Vec<u64>,
    pub(super) cursor: ScanCursor,
    pub(super) free_pages: Vec<u64>,
    /// Original affinity of every thread the engine moved.
    pub(super) original_affinity: BTreeMap<i32, Vec<u32>>,
    pub(super) summary: LiveSummary,
    pub(super) gone: bool,
}

impl State {
    pub(super) fn grow(&mut self) {
        let n = self.space.pages() as usize;
        if self.page_node.len() < n {
            self.page_node.resize(n, UNKNOWN);
            self.marked.resize(n.div_ceil(64), 0);
        }
    }

    pub(super) fn node_of_page(&self, page: PageIdx) -> Option<NodeId> {
        self.page_node.get(page as usize).copied().filter(|&n| n != UNKNOWN).map(NodeId::from)
    }

    pub(super) fn is_marked(&self, page: PageIdx) -> bool {
        self.marked.get(page as usize / 64).is_some_and(|w| w & (1 << (page % 64)) != 0)
    }

    pub(super) fn set_marked(&mut self, page: PageIdx, on: bool) {
        if let Some(w) = self.marked.get_mut(page as usize / 64) {
            if on {
                *w |= 1 << (page % 64);
            } else {
                *w &= !(1 << (page % 64));
            }
        }
    }

    pub(super) fn node_of_cpu_checked(&self, cpu: CpuId) -> NodeId {
        self.host.cpu_node.get(cpu as usize).copied().flatten().unwrap_or(0)
    }
}

impl MemoryState for State {
    fn free_pages(&self, node: NodeId) -> u64 {
        self.free_pages.get(node as usize).copied().unwrap_or(0)
    }
    fn capacity_pages(&self, node: NodeId) -> u64 {
        self.host.capacity_pages.get(node as usize).copied().unwrap_or(0)
    }
}

/// The live system as a policy's hooks see it (docs/live.md, "What a policy sees"). The target
/// is one address space (space 0) whose threads are numbered in the order the engine first saw
/// them. Other processes are invisible: a CPU is idle when no thread of the target ran on it
/// during the last period, and `nr_running` counts the target's threads only.
impl SystemView for State {
    fn now_ns(&self) -> u64 {
        self.now_ns
    }
    fn spaces(&self) -> u32 {
        1
    }
    fn space_pages(&self, space: SpaceId) -> u64 {
        if space == 0 {
            self.space.pages()
        } else {
            0
        }
    }
    fn space_threads(&self, _space: SpaceId) -> std::ops::Range<ThreadId> {
        0..self.threads.len() as ThreadId
    }
    fn thread_count(&self) -> u32 {
        self.threads.len() as u32
    }
    fn space_of_thread(&self, _thread: ThreadId) -> SpaceId {
        0
    }
    fn thread_alive(&self, thread: ThreadId) -> bool {
        self.threads.get(thread as usize).is_some_and(|t| t.alive)
    }
    fn thread_runtime_ns(&self, thread: ThreadId) -> u64 {
        self.threads.get(thread as usize).map_or(0, |t| t.runtime_ns)
    }
    fn cpu_of_thread(&self, thread: ThreadId) -> CpuId {
        self.threads.get(thread as usize).map_or(0, |t| t.cpu)
    }
    fn node_of_thread(&self, thread: ThreadId) -> NodeId {
        self.node_of_cpu_checked(self.cpu_of_thread(thread))
    }
    /// Linux has no interface to set a task's preferred node from user space: none is ever set.
    fn preferred_node(&self, _thread: ThreadId) -> Option<NodeId> {
        None
    }
    fn thread_pinned(&self, thread: ThreadId) -> bool {
        self.threads.get(thread as usize).is_some_and(|t| t.pinned)
    }
    fn cpu_count(&self) -> u32 {
        self.host.cpu_node.len() as u32
    }
    fn node_of_cpu(&self, cpu: CpuId) -> NodeId {
        self.node_of_cpu_checked(cpu)
    }
    fn node_cpu_count(&self, node: NodeId) -> u32 {
        self.host.cpu_node.iter().filter(|&&n| n == Some(node)).count() as u32
    }
    fn current_thread(&self, cpu: CpuId) -> Option<ThreadId> {
        self.threads.iter().position(|t| t.alive && t.ran && t.cpu == cpu).map(|i| i as ThreadId)
    }
    fn cpu_idle(&self, cpu: CpuId) -> bool {
        self.current_thread(cpu).is_none()
    }
    fn nr_running(&self, node: NodeId) -> u32 {
        self.threads.iter().filter(|t| t.alive && t.ran && self.node_of_cpu_checked(t.cpu) == node).count() as u32
    }
    fn page_node(&self, space: SpaceId, page: PageIdx) -> Option<NodeId> {
        if space == 0 {
            self.node_of_page(page)
        } else {
            None
        }
    }
}

/// The pages a scan step walks, located with `move_pages` range by range.
pub(super) struct LivePages<'s, 'm> {
    pub(super) st: &'s mut State,
    pub(super) mover: &'m mut dyn PageMover,
    pub(super) error: Option<MoveError>,
}

impl ScanPages for LivePages<'_, '_> {
    fn visit_range(&mut self, start: PageIdx, end: PageIdx) {
        if self.st.gone || self.error.is_some() {
            return;
        }
        let addrs: Vec<u64> = (start..end).filter_map(|p| self.st.space.addr_of(p)).collect();
        if addrs.len() as u64 != end - start {
            return;
        }
        self.st.summary.locate_calls += 1;
        match locate(self.mover, self.st.pid, &addrs, self.st.cfg.locate_batch_pages) {
            Ok(Some(status)) => {
                for (k, s) in status.into_iter().enumerate() {
                    let node = u32::try_from(s).ok().and_then(|n| self.st.host.node_of_kernel(n));
                    self.st.page_node[(start + k as u64) as usize] = node.map_or(UNKNOWN, |n| n as u8);
                }
            }
            Ok(None) => self.st.gone = true,
            Err(e) => self.error = Some(e),
        }
    }
    fn markable(&self, page: PageIdx) -> Option<NodeId> {
        if self.st.gone || self.st.is_marked(page) {
            return None;
        }
        self.st.node_of_page(page)
    }
    fn mark(&mut self, page: PageIdx) {
        self.st.set_marked(page, true);
    }
}
