//! What policies see of a running simulation, and the stand-in policy used while the real
//! one is borrowed out during a hook.

use crate::engine::Engine;
use numalab_core::{NodeId, PageIdx, ThreadId};
use numalab_policy::{AddressSpaceInfo, Decision, DynPolicy, HintFault, MemoryState, PlaceRequest, ScanEnd, SpaceId, SystemView, Tick};

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
    fn threads(&self, _space: SpaceId) -> u32 {
        self.e.p.threads
    }
    fn node_of_thread(&self, _space: SpaceId, thread: ThreadId) -> NodeId {
        self.e.sched.node_of_thread(thread)
    }
    fn page_node(&self, _space: SpaceId, page: PageIdx) -> Option<NodeId> {
        if page < self.e.p.total_pages {
            self.e.mem.node_of(page)
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
    fn wants_hint_faults(&self) -> bool {
        false
    }
    fn should_unmap(&mut self, _s: SpaceId, _p: PageIdx) -> bool {
        false
    }
    fn on_hint_fault(&mut self, _f: &HintFault, _v: &dyn SystemView, _o: &mut Vec<Decision>) {}
    fn on_scan_end(&mut self, _s: &ScanEnd, _v: &dyn SystemView, _o: &mut Vec<Decision>) {}
    fn on_tick(&mut self, _t: &Tick, _v: &dyn SystemView, _o: &mut Vec<Decision>) {}
    fn mempolicy(&self) -> Option<numalab_policy::MempolicyIntent> {
        None
    }
}
