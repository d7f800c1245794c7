//! The policy trait and the object-safe form the drivers use.

use crate::decision::{Decision, Extent, HintFault, MempolicyIntent, PlaceRequest, ScanEnd, SpaceId, Tick};
use crate::error::{OutOfMemory, PolicyError};
use numalab_core::{Machine, NodeId, PageIdx, ThreadId};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::fmt::Debug;
use std::sync::Arc;

/// What a policy is told when it is built.
#[derive(Clone, Debug)]
pub struct PolicyEnv {
    pub machine: Arc<Machine>,
    /// Nodes the address space may use (memory nodes, ascending). Never empty.
    pub allowed: Vec<NodeId>,
    /// Base page size in bytes.
    pub page_bytes: u64,
}

impl PolicyEnv {
    pub fn new(machine: Arc<Machine>) -> PolicyEnv {
        let allowed = machine.memory_nodes();
        let page_bytes = machine.base_page_bytes();
        PolicyEnv { machine, allowed, page_bytes }
    }
}

/// Free and total memory per node, in base pages, as the driver sees it at the moment.
pub trait MemoryState {
    fn free_pages(&self, node: NodeId) -> u64;
    fn capacity_pages(&self, node: NodeId) -> u64;
    /// A node is full when it cannot supply `pages` (static-policies.md §1, reserve 0).
    fn is_full(&self, node: NodeId, pages: u64) -> bool {
        self.free_pages(node) < pages
    }
}

/// Read-only view of the system for dynamic policies' hooks.
pub trait SystemView: MemoryState {
    fn now_ns(&self) -> u64;
    fn threads(&self, space: SpaceId) -> u32;
    fn node_of_thread(&self, space: SpaceId, thread: ThreadId) -> NodeId;
    /// Home node of a page, `None` if not yet placed.
    fn page_node(&self, space: SpaceId, page: PageIdx) -> Option<NodeId>;
}

/// Size and shape of an address space when it is created.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AddressSpaceInfo {
    pub space: SpaceId,
    pub pages: u64,
    pub threads: u32,
}

/// A placement policy. Hooks have no-op defaults, so a static policy implements `place` only.
pub trait Policy: Send + Sized + 'static {
    /// Tunables, read from the `[policy]` table (`deny_unknown_fields`).
    type Config: Serialize + DeserializeOwned + Default + Clone + Debug + Send;
    /// Registry name (kebab-case).
    const NAME: &'static str;
    /// One line for `numalab list policies`.
    const SUMMARY: &'static str;

    fn new(config: Self::Config, env: &PolicyEnv) -> Result<Self, PolicyError>;
    fn config(&self) -> &Self::Config;

    /// Choose the node for a page at its placement event.
    fn place(&mut self, req: &PlaceRequest, mem: &dyn MemoryState) -> Result<NodeId, OutOfMemory>;

    /// Eager layout of a whole address space at creation; `None` = place lazily on first touch.
    fn layout(&mut self, _space: &AddressSpaceInfo, _mem: &dyn MemoryState) -> Result<Option<Vec<Extent>>, OutOfMemory> {
        Ok(None)
    }

    /// Whether the driver should run a hinting-fault scanner for this policy at all.
    fn wants_hint_faults(&self) -> bool {
        false
    }

    /// Selective profiling: may the scanner unmap this page in this pass?
    fn should_unmap(&mut self, _space: SpaceId, _page: PageIdx) -> bool {
        true
    }

    fn on_hint_fault(&mut self, _fault: &HintFault, _view: &dyn SystemView, _out: &mut Vec<Decision>) {}

    fn on_scan_end(&mut self, _scan: &ScanEnd, _view: &dyn SystemView, _out: &mut Vec<Decision>) {}

    fn on_tick(&mut self, _tick: &Tick, _view: &dyn SystemView, _out: &mut Vec<Decision>) {}

    /// How the live agent realises this policy with Linux mempolicy, if it can.
    fn mempolicy(&self) -> Option<MempolicyIntent> {
        None
    }
}

/// Object-safe face of [`Policy`], implemented for every policy.
pub trait DynPolicy: Send {
    fn name(&self) -> &'static str;
    /// The resolved configuration, for result files.
    fn config_toml(&self) -> toml::Table;
    fn place(&mut self, req: &PlaceRequest, mem: &dyn MemoryState) -> Result<NodeId, OutOfMemory>;
    fn layout(&mut self, space: &AddressSpaceInfo, mem: &dyn MemoryState) -> Result<Option<Vec<Extent>>, OutOfMemory>;
    fn wants_hint_faults(&self) -> bool;
    fn should_unmap(&mut self, space: SpaceId, page: PageIdx) -> bool;
    fn on_hint_fault(&mut self, fault: &HintFault, view: &dyn SystemView, out: &mut Vec<Decision>);
    fn on_scan_end(&mut self, scan: &ScanEnd, view: &dyn SystemView, out: &mut Vec<Decision>);
    fn on_tick(&mut self, tick: &Tick, view: &dyn SystemView, out: &mut Vec<Decision>);
    fn mempolicy(&self) -> Option<MempolicyIntent>;
}

impl<P: Policy> DynPolicy for P {
    fn name(&self) -> &'static str {
        P::NAME
    }
    fn config_toml(&self) -> toml::Table {
        match toml::Value::try_from(self.config()) {
            Ok(toml::Value::Table(t)) => t,
            _ => toml::Table::new(),
        }
    }
    fn place(&mut self, req: &PlaceRequest, mem: &dyn MemoryState) -> Result<NodeId, OutOfMemory> {
        Policy::place(self, req, mem)
    }
    fn layout(&mut self, space: &AddressSpaceInfo, mem: &dyn MemoryState) -> Result<Option<Vec<Extent>>, OutOfMemory> {
        Policy::layout(self, space, mem)
    }
    fn wants_hint_faults(&self) -> bool {
        Policy::wants_hint_faults(self)
    }
    fn should_unmap(&mut self, space: SpaceId, page: PageIdx) -> bool {
        Policy::should_unmap(self, space, page)
    }
    fn on_hint_fault(&mut self, fault: &HintFault, view: &dyn SystemView, out: &mut Vec<Decision>) {
        Policy::on_hint_fault(self, fault, view, out)
    }
    fn on_scan_end(&mut self, scan: &ScanEnd, view: &dyn SystemView, out: &mut Vec<Decision>) {
        Policy::on_scan_end(self, scan, view, out)
    }
    fn on_tick(&mut self, tick: &Tick, view: &dyn SystemView, out: &mut Vec<Decision>) {
        Policy::on_tick(self, tick, view, out)
    }
    fn mempolicy(&self) -> Option<MempolicyIntent> {
        Policy::mempolicy(self)
    }
}
