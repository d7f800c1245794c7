//! What policies see of a running simulation: a view that borrows only the world, never the
//! policy (docs/policies/README.md, "What a policy sees").

use crate::engine::World;
use numalab_core::{CpuId, NodeId, PageIdx, ThreadId};
use numalab_policy::{MemoryState, SpaceId, SystemView};

/// What policies see of the running simulation.
pub(crate) struct View<'e, 'a> {
    pub w: &'e World<'a>,
}

impl MemoryState for View<'_, '_> {
    fn free_pages(&self, node: NodeId) -> u64 {
        self.w.mem.free[node as usize]
    }
    fn capacity_pages(&self, node: NodeId) -> u64 {
        self.w.mem.capacity[node as usize]
    }
}

impl SystemView for View<'_, '_> {
    fn now_ns(&self) -> u64 {
        self.w.now as u64
    }
    fn spaces(&self) -> u32 {
        self.w.p.processes() as u32
    }
    fn space_pages(&self, space: SpaceId) -> u64 {
        self.w.spaces.get(space as usize).map_or(0, |s| s.pages)
    }
    fn space_threads(&self, space: SpaceId) -> std::ops::Range<ThreadId> {
        self.w.spaces.get(space as usize).map_or(0..0, |s| s.threads.clone())
    }
    fn thread_count(&self) -> u32 {
        self.w.p.threads
    }
    fn space_of_thread(&self, thread: ThreadId) -> SpaceId {
        self.w.p.process_of(thread) as SpaceId
    }
    fn thread_alive(&self, thread: ThreadId) -> bool {
        self.w.thread_alive(thread)
    }
    fn thread_runtime_ns(&self, thread: ThreadId) -> u64 {
        self.w.thread_runtime_ns(thread)
    }
    fn cpu_of_thread(&self, thread: ThreadId) -> CpuId {
        self.w.sched.cpu_of[thread as usize]
    }
    fn node_of_thread(&self, thread: ThreadId) -> NodeId {
        self.w.sched.node_of_thread(thread)
    }
    fn preferred_node(&self, thread: ThreadId) -> Option<NodeId> {
        self.w.sched.preferred(thread)
    }
    fn thread_pinned(&self, _thread: ThreadId) -> bool {
        self.w.sched.pinned()
    }
    fn cpu_count(&self) -> u32 {
        self.w.sched.cpu_count() as u32
    }
    fn node_of_cpu(&self, cpu: CpuId) -> NodeId {
        self.w.sched.node_of_cpu(cpu)
    }
    fn node_cpu_count(&self, node: NodeId) -> u32 {
        self.w.sched.node_cpu_count(node)
    }
    fn current_thread(&self, cpu: CpuId) -> Option<ThreadId> {
        self.w.sched.current_thread(cpu, self.w.task_states())
    }
    fn cpu_idle(&self, cpu: CpuId) -> bool {
        self.w.sched.cpu_idle(cpu, self.w.now)
    }
    fn nr_running(&self, node: NodeId) -> u32 {
        self.w.sched.nr_running(node, self.w.now)
    }
    fn page_node(&self, space: SpaceId, page: PageIdx) -> Option<NodeId> {
        let s = self.w.spaces.get(space as usize)?;
        (page < s.pages).then(|| self.w.mem.node_of(s.first_page + page)).flatten()
    }
    fn page_copies(&self, space: SpaceId, page: PageIdx) -> u64 {
        let Some(home) = self.page_node(space, page) else { return 0 };
        let g = self.w.spaces[space as usize].first_page + page;
        (1u64 << home) | self.w.mem.replica_mask(g)
    }
}
