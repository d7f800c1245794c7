//! What policies see of a running simulation, and the stand-in policy used while the real
//! one is borrowed out during a hook.

use crate::engine::Engine;
use numalab_core::{CpuId, NodeId, PageIdx, ThreadId};
use numalab_policy::{
    AddressSpaceInfo, Decision, DynPolicy, HintFault, MemoryState, PlaceRequest, ScanStepDone, SpaceId, SystemView, TaskTick,
    ThreadMigrated, Tick,
};

/// What policies see of the running simulation.
pub(crate) struct View<'e, 'a> {
    pub e: &'e Engine<'a>,
}

impl MemoryState for View<'_, '_> {
    fn free_pages(&self, node: NodeId) -> u64 {
        self.e.mem.free[node as usize]
    }
    fn capacity_pages(&self, node: NodeId) -> u64 {
        self.e.mem.capacity[node as usize]
    }
}

impl SystemView for View<'_, '_> {
    fn now_ns(&self) -> u64 {
        self.e.now as u64
    }
    fn spaces(&self) -> u32 {
        self.e.p.processes() as u32
    }
    fn space_pages(&self, space: SpaceId) -> u64 {
        match self.e.p.members.get(space as usize) {
            Some(m) => m.program.total_pages,
            None => self.e.p.total_pages,
        }
    }
    fn space_threads(&self, space: SpaceId) -> std::ops::Range<ThreadId> {
        self.e.p.process_threads(space as usize)
    }
    fn thread_count(&self) -> u32 {
        self.e.p.threads
    }
    fn space_of_thread(&self, thread: ThreadId) -> SpaceId {
        self.e.p.process_of(thread) as SpaceId
    }
    fn thread_alive(&self, thread: ThreadId) -> bool {
        self.e.thread_alive(thread)
    }
    fn thread_runtime_ns(&self, thread: ThreadId) -> u64 {
        self.e.thread_runtime_ns(thread)
    }
    fn cpu_of_thread(&self, thread: ThreadId) -> CpuId {
        self.e.sched.cpu_of[thread as usize]
    }
    fn node_of_thread(&self, thread: ThreadId) -> NodeId {
        self.e.sched.node_of_thread(thread)
    }
    fn preferred_node(&self, thread: ThreadId) -> Option<NodeId> {
        self.e.sched.preferred(thread)
    }
    fn thread_pinned(&self, _thread: ThreadId) -> bool {
        self.e.sched.pinned()
    }
    fn cpu_count(&self) -> u32 {
        self.e.sched.cpu_count() as u32
    }
    fn node_of_cpu(&self, cpu: CpuId) -> NodeId {
        self.e.sched.node_of_cpu(cpu)
    }
    fn node_cpu_count(&self, node: NodeId) -> u32 {
        self.e.sched.node_cpu_count(node)
    }
    fn current_thread(&self, cpu: CpuId) -> Option<ThreadId> {
        self.e.sched.current_thread(cpu, self.e.task_states())
    }
    fn cpu_idle(&self, cpu: CpuId) -> bool {
        self.e.sched.cpu_idle(cpu, self.e.now)
    }
    fn nr_running(&self, node: NodeId) -> u32 {
        self.e.sched.nr_running(node, self.e.now)
    }
    fn page_node(&self, space: SpaceId, page: PageIdx) -> Option<NodeId> {
        let first = self.e.p.members.get(space as usize).map_or(0, |m| m.first_page);
        if page < self.space_pages(space) {
            self.e.mem.node_of(first + page)
        } else {
            None
        }
    }
}

/// Stand-in while the real policy is borrowed out during a hook.
pub(crate) struct Nop;

impl DynPolicy for Nop {
    fn name(&self) -> &'static str {
        "nop"
    }
    fn config_toml(&self) -> toml::Table {
        toml::Table::new()
    }
    fn place(&mut self, req: &PlaceRequest, _mem: &dyn MemoryState) -> Result<NodeId, numalab_policy::OutOfMemory> {
        Err(numalab_policy::OutOfMemory { wanted: req.cpu_node, pages: 1 })
    }
    fn layout(
        &mut self,
        _s: &AddressSpaceInfo,
        _m: &dyn MemoryState,
    ) -> Result<Option<Vec<numalab_policy::Extent>>, numalab_policy::OutOfMemory> {
        Ok(None)
    }
    fn should_unmap(&mut self, _s: SpaceId, _p: PageIdx) -> bool {
        false
    }
    fn on_hint_fault(&mut self, _f: &HintFault, _v: &dyn SystemView, _o: &mut Vec<Decision>) {}
    fn on_scan_step(&mut self, _s: &ScanStepDone, _v: &dyn SystemView, _o: &mut Vec<Decision>) {}
    fn on_tick(&mut self, _t: &Tick, _v: &dyn SystemView, _o: &mut Vec<Decision>) {}
    fn on_task_tick(&mut self, _t: &TaskTick, _v: &dyn SystemView, _o: &mut Vec<Decision>) {}
    fn on_thread_migrated(&mut self, _m: &ThreadMigrated, _v: &dyn SystemView, _o: &mut Vec<Decision>) {}
    fn mempolicy(&self) -> Option<numalab_policy::MempolicyIntent> {
        None
    }
}
