//! The policy trait and the object-safe form the drivers use.

use crate::decision::{
    AccessSample, Decision, EventRef, Extent, HintFault, MempolicyIntent, Outcome, PageScan, PlaceRequest, RegionHeat, ScanStepDone,
    SpaceId, TaskTick, ThreadMigrated, Tick,
};
use crate::error::{OutOfMemory, PolicyError};
use crate::oracle::PageClasses;
use numalab_core::{CpuId, Machine, NodeId, PageIdx, ThreadId};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::fmt::Debug;
use std::sync::Arc;

/// Why a policy moved a whole application.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AppMoveKind {
    /// To the fast tier (HyDM's migration).
    Promote,
    /// Back to the slow tier (HyDM's rollback of a misprediction).
    Rollback,
}

impl AppMoveKind {
    pub fn as_str(self) -> &'static str {
        match self {
            AppMoveKind::Promote => "promote",
            AppMoveKind::Rollback => "rollback",
        }
    }
}

/// One whole-application move a policy decided, as it saw it (docs/metrics.md, "Application
/// moves").
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AppMove {
    /// When the move was decided (the tick's time).
    pub time_ns: u64,
    /// The policy's own window index, where it counts windows (HyDM's `g`).
    pub window: Option<u64>,
    pub space: SpaceId,
    pub kind: AppMoveKind,
    /// The node the move targeted.
    pub to: NodeId,
    /// The arithmetic intensity the policy predicted for the application when it decided,
    /// flop/byte (`None`: the policy measures none, or had no finite value).
    pub intensity_flop_per_byte: Option<f64>,
    /// The application's resident pages when the move was decided.
    pub resident_pages: u64,
    /// What became of the move; `None` until the driver reported its outcome.
    pub outcome: Option<Outcome>,
}

/// What a policy is told when it is built.
#[derive(Clone, Debug)]
pub struct PolicyEnv {
    pub machine: Arc<Machine>,
    /// Nodes the address space may use (memory nodes, ascending). Never empty.
    pub allowed: Vec<NodeId>,
    /// Base page size in bytes.
    pub page_bytes: u64,
    /// The run's seed: a policy that draws random numbers derives its own stream from it
    /// (`numalab_core::rng::stream(seed, "policy.NAME", 0)`).
    pub seed: u64,
    /// Each page's DUnX class, for the oracle policies (docs/policies/oracle.md): supplied by a
    /// driver that knows the workload (the simulator); `None` elsewhere.
    pub page_classes: Option<Arc<PageClasses>>,
}

impl PolicyEnv {
    pub fn new(machine: Arc<Machine>) -> PolicyEnv {
        let allowed = machine.memory_nodes();
        let page_bytes = machine.base_page_bytes();
        PolicyEnv { machine, allowed, page_bytes, seed: 0, page_classes: None }
    }

    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    pub fn with_page_classes(mut self, classes: Option<Arc<PageClasses>>) -> Self {
        self.page_classes = classes;
        self
    }
}

/// Free and total memory per node, in base pages, as the driver sees it at the moment.
pub trait MemoryState {
    fn free_pages(&self, node: NodeId) -> u64;
    fn capacity_pages(&self, node: NodeId) -> u64;
    /// A node is full when it cannot supply `pages` (docs/policies/README.md, reserve 0).
    fn is_full(&self, node: NodeId, pages: u64) -> bool {
        self.free_pages(node) < pages
    }
}

/// Read-only view of the running system for dynamic policies' hooks: what Linux's NUMA
/// balancing reads of the scheduler and the memory manager. Threads and CPUs are numbered
/// globally; pages are local to their space.
pub trait SystemView: MemoryState {
    fn now_ns(&self) -> u64;
    /// Address spaces of the run (spaces are numbered `0..spaces()`).
    fn spaces(&self) -> u32;
    /// Pages of an address space (its local page indices are `0..space_pages`).
    fn space_pages(&self, space: SpaceId) -> u64;
    /// Threads of an address space: a contiguous range of global thread ids.
    fn space_threads(&self, space: SpaceId) -> std::ops::Range<ThreadId>;
    /// Workload threads of the whole run.
    fn thread_count(&self) -> u32;
    fn space_of_thread(&self, thread: ThreadId) -> SpaceId;
    /// The thread has not finished its work.
    fn thread_alive(&self, thread: ThreadId) -> bool;
    /// CPU time the thread has run so far (Linux's `se.sum_exec_runtime`).
    fn thread_runtime_ns(&self, thread: ThreadId) -> u64;
    fn cpu_of_thread(&self, thread: ThreadId) -> CpuId;
    fn node_of_thread(&self, thread: ThreadId) -> NodeId;
    /// The node the balancer keeps the thread on, set by [`Decision::SetPreferredNode`].
    fn preferred_node(&self, thread: ThreadId) -> Option<NodeId>;
    /// The thread may not change CPU (pinned workloads).
    fn thread_pinned(&self, thread: ThreadId) -> bool;
    fn cpu_count(&self) -> u32;
    fn node_of_cpu(&self, cpu: CpuId) -> NodeId;
    /// CPUs of a node (0 for a memory-only node).
    fn node_cpu_count(&self, node: NodeId) -> u32;
    /// The workload thread current on a CPU (running, or spinning at a barrier), if any.
    fn current_thread(&self, cpu: CpuId) -> Option<ThreadId>;
    /// Nothing runs on the CPU: no workload thread and no background task.
    fn cpu_idle(&self, cpu: CpuId) -> bool;
    /// Runnable tasks on the node's CPUs (workload threads and background tasks), Linux's
    /// summed `nr_running`.
    fn nr_running(&self, node: NodeId) -> u32;
    /// Home node of a page, `None` if not yet placed.
    fn page_node(&self, space: SpaceId, page: PageIdx) -> Option<NodeId>;
    /// Every node holding a copy of the page (its home and any read-only replicas), as a bit
    /// mask; 0 if not yet placed. Drivers without replication answer the home alone.
    fn page_copies(&self, space: SpaceId, page: PageIdx) -> u64 {
        self.page_node(space, page).map_or(0, |n| 1u64 << n)
    }
}

/// Size and shape of an address space when it is created.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AddressSpaceInfo {
    pub space: SpaceId,
    pub pages: u64,
    pub threads: u32,
}

/// A placement policy. Hooks have no-op defaults, so a static policy implements `place` only.
///
/// **One instance per run, state per space.** A driver builds one instance for the whole run
/// and hands it the events of every address space; a policy that keeps state keeps it per
/// [`SpaceId`] (and per thread, threads being numbered globally), as the kernel keeps NUMA
/// state per mm and per task. This lets a policy compare threads of different processes (a
/// NUMA swap may exchange two of them), which one instance per space could not.
///
/// Hooks never touch memory or threads: they push [`Decision`]s, which the driver carries out
/// in order after the hook returns, and whose follow-up events (a scan step's
/// [`ScanStepDone`], a move's [`ThreadMigrated`]) are delivered after that.
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

    /// Selective profiling: may a scan step make this page (now on `node`) inaccessible?
    fn should_unmap(&mut self, _space: SpaceId, _page: PageIdx, _node: NodeId) -> bool {
        true
    }

    /// A thread touched a page a scan step had made inaccessible.
    fn on_hint_fault(&mut self, _fault: &HintFault, _view: &dyn SystemView, _out: &mut Vec<Decision>) {}

    /// A [`Decision::ScanStep`] was carried out.
    fn on_scan_step(&mut self, _step: &ScanStepDone, _view: &dyn SystemView, _out: &mut Vec<Decision>) {}

    /// Periodic statistics, every `tick_ms`.
    fn on_tick(&mut self, _tick: &Tick, _view: &dyn SystemView, _out: &mut Vec<Decision>) {}

    /// A scheduler tick on a CPU running one of the workload's threads.
    fn on_task_tick(&mut self, _tick: &TaskTick, _view: &dyn SystemView, _out: &mut Vec<Decision>) {}

    /// A thread moved to another node, for any cause (the policy's own moves included).
    fn on_thread_migrated(&mut self, _moved: &ThreadMigrated, _view: &dyn SystemView, _out: &mut Vec<Decision>) {}

    /// Access sampling the policy wants: the period between two samples of a thread, in
    /// nanoseconds of its CPU time (a cycle-mode sampling period divided by the clock);
    /// `None` (the default) samples nothing. Drivers ask again at every epoch (simulator) or
    /// sampling round (live), so a policy can change its rate at run time.
    fn sample_period_ns(&self) -> Option<f64> {
        None
    }

    /// One access sample (only while [`Policy::sample_period_ns`] asks for samples). Samples
    /// are accumulated, not acted on one by one: the hook takes no decisions.
    fn on_sample(&mut self, _sample: &AccessSample) {}

    /// What became of the decisions a hook just took (`outcomes[i]` is that of
    /// `decisions[i]`), delivered after they were carried out; only when there were any.
    fn on_outcomes(&mut self, _cause: &EventRef, _decisions: &[Decision], _outcomes: &[Outcome]) {}

    /// How the live agent realises this policy with Linux mempolicy, if it can.
    fn mempolicy(&self) -> Option<MempolicyIntent> {
        None
    }

    /// The policy's own event counters, by name, for the run's `policy_counters`
    /// (docs/metrics.md); none by default.
    fn counters(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }

    /// Every whole-application move the policy took ([`Decision::MoveSpace`]), in order, with
    /// the measure it chose the application by, for the run's `app_moves` (docs/metrics.md,
    /// "Application moves"); none by default.
    fn app_moves(&self) -> Vec<AppMove> {
        Vec::new()
    }

    /// Per-node mappings and page-scanner daemons (docs/simulator.md, "Page mappings and
    /// scanner daemons"): `Some(period)` asks the driver to keep a mapping per node and page
    /// with referenced and modified bits, to deliver every reference of a node without a
    /// suitable mapping as a fault to [`Policy::on_hint_fault`], and to run each node's
    /// scanner every `period` nanoseconds ([`Policy::on_page_scan`]). Asked once, when the
    /// run starts. `None` (the default): no mappings, no scanners.
    fn page_scanner_period_ns(&self) -> Option<u64> {
        None
    }

    /// One node's scanner pass (only while [`Policy::page_scanner_period_ns`] asks for it).
    fn on_page_scan(&mut self, _scan: &PageScan, _view: &dyn SystemView, _out: &mut Vec<Decision>) {}

    /// Region heat from an accessor-less monitor (the live agent's DAMON sampler; docs/live.md,
    /// "Region heat"): no thread, no CPU, no node. Nothing by default; the simulator never
    /// calls it.
    fn on_region_heat(&mut self, _heat: &RegionHeat) {}
}

/// Object-safe face of [`Policy`], implemented for every policy.
///
/// Every hook but `name`, `config_toml` and `place` has a default that is the same as
/// [`Policy`]'s own default, so an implementer that is not a [`Policy`] (a VM run's placement,
/// `numalab_sim::vmrun`) states only the hooks it uses. The blanket implementation for every
/// [`Policy`] forwards every hook explicitly, so no policy falls back to these defaults.
pub trait DynPolicy: Send {
    fn name(&self) -> &'static str;
    /// The resolved configuration, for result files.
    fn config_toml(&self) -> toml::Table;
    fn place(&mut self, req: &PlaceRequest, mem: &dyn MemoryState) -> Result<NodeId, OutOfMemory>;
    /// Time the last [`DynPolicy::place`] call costs the faulting thread on top of the
    /// first-touch fault, taken (reset to zero) by the driver; zero by default. A VM run's
    /// guest pays its notification-queue appends here (docs/vm.md, "Guest frame reuse").
    fn take_place_cost_ns(&mut self) -> f64 {
        0.0
    }
    /// Whether the policy places the program's threads itself although the program runs
    /// pinned: the driver then carries out its [`Decision::MoveThread`]s while the load
    /// balancer stays off (a VM run under the hypervisor's credit scheduler: docs/vm.md, "The
    /// hypervisor's vCPU scheduler"). Asked once, when the run starts; false by default.
    fn moves_pinned_threads(&self) -> bool {
        false
    }
    fn layout(&mut self, _space: &AddressSpaceInfo, _mem: &dyn MemoryState) -> Result<Option<Vec<Extent>>, OutOfMemory> {
        Ok(None)
    }
    fn should_unmap(&mut self, _space: SpaceId, _page: PageIdx, _node: NodeId) -> bool {
        true
    }
    fn on_hint_fault(&mut self, _fault: &HintFault, _view: &dyn SystemView, _out: &mut Vec<Decision>) {}
    fn on_scan_step(&mut self, _step: &ScanStepDone, _view: &dyn SystemView, _out: &mut Vec<Decision>) {}
    fn on_tick(&mut self, _tick: &Tick, _view: &dyn SystemView, _out: &mut Vec<Decision>) {}
    fn on_task_tick(&mut self, _tick: &TaskTick, _view: &dyn SystemView, _out: &mut Vec<Decision>) {}
    fn on_thread_migrated(&mut self, _moved: &ThreadMigrated, _view: &dyn SystemView, _out: &mut Vec<Decision>) {}
    fn sample_period_ns(&self) -> Option<f64> {
        None
    }
    fn on_sample(&mut self, _sample: &AccessSample) {}
    fn on_outcomes(&mut self, _cause: &EventRef, _decisions: &[Decision], _outcomes: &[Outcome]) {}
    fn mempolicy(&self) -> Option<MempolicyIntent> {
        None
    }
    fn counters(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }
    fn app_moves(&self) -> Vec<AppMove> {
        Vec::new()
    }
    fn page_scanner_period_ns(&self) -> Option<u64> {
        None
    }
    fn on_page_scan(&mut self, _scan: &PageScan, _view: &dyn SystemView, _out: &mut Vec<Decision>) {}
    fn on_region_heat(&mut self, _heat: &RegionHeat) {}
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
    fn should_unmap(&mut self, space: SpaceId, page: PageIdx, node: NodeId) -> bool {
        Policy::should_unmap(self, space, page, node)
    }
    fn on_hint_fault(&mut self, fault: &HintFault, view: &dyn SystemView, out: &mut Vec<Decision>) {
        Policy::on_hint_fault(self, fault, view, out)
    }
    fn on_scan_step(&mut self, step: &ScanStepDone, view: &dyn SystemView, out: &mut Vec<Decision>) {
        Policy::on_scan_step(self, step, view, out)
    }
    fn on_tick(&mut self, tick: &Tick, view: &dyn SystemView, out: &mut Vec<Decision>) {
        Policy::on_tick(self, tick, view, out)
    }
    fn on_task_tick(&mut self, tick: &TaskTick, view: &dyn SystemView, out: &mut Vec<Decision>) {
        Policy::on_task_tick(self, tick, view, out)
    }
    fn on_thread_migrated(&mut self, moved: &ThreadMigrated, view: &dyn SystemView, out: &mut Vec<Decision>) {
        Policy::on_thread_migrated(self, moved, view, out)
    }
    fn sample_period_ns(&self) -> Option<f64> {
        Policy::sample_period_ns(self)
    }
    fn on_sample(&mut self, sample: &AccessSample) {
        Policy::on_sample(self, sample)
    }
    fn on_outcomes(&mut self, cause: &EventRef, decisions: &[Decision], outcomes: &[Outcome]) {
        Policy::on_outcomes(self, cause, decisions, outcomes)
    }
    fn mempolicy(&self) -> Option<MempolicyIntent> {
        Policy::mempolicy(self)
    }
    fn counters(&self) -> Vec<(&'static str, u64)> {
        Policy::counters(self)
    }
    fn app_moves(&self) -> Vec<AppMove> {
        Policy::app_moves(self)
    }
    fn page_scanner_period_ns(&self) -> Option<u64> {
        Policy::page_scanner_period_ns(self)
    }
    fn on_page_scan(&mut self, scan: &PageScan, view: &dyn SystemView, out: &mut Vec<Decision>) {
        Policy::on_page_scan(self, scan, view, out)
    }
    fn on_region_heat(&mut self, heat: &RegionHeat) {
        Policy::on_region_heat(self, heat)
    }
}
