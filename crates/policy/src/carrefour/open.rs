//! Carrefour over an open base (docs/vm.md, "Carrefour in the hypervisor"): any placement
//! policy places the pages, and Carrefour samples and moves them as over a native static.
//! The base keeps every hook that is not Carrefour's (its placement costs, its scan and tick
//! work, its counters) and hears the outcomes of Carrefour's orders, so a layer that keeps its
//! own map of where pages live (a hypervisor's frame table) can follow the moves.

use super::{Carrefour, CarrefourConfig, Plain};
use crate::decision::{
    AccessSample, Decision, EventRef, Extent, HintFault, Outcome, PageScan, PlaceRequest, ScanStepDone, SpaceId, TaskTick, ThreadMigrated,
    Tick,
};
use crate::error::{OutOfMemory, PolicyError};
use crate::policy::{AddressSpaceInfo, AppMove, DynPolicy, MemoryState, Policy, PolicyEnv, SystemView};
use numalab_core::{NodeId, PageIdx};

/// Carrefour whose base is a policy handed in, under a name of the caller's (such as
/// `vm:round-1g+carrefour`).
pub struct OpenCarrefour {
    name: &'static str,
    engine: Carrefour<Plain>,
}

impl OpenCarrefour {
    pub fn new(name: &'static str, config: CarrefourConfig, env: &PolicyEnv, base: Box<dyn DynPolicy>) -> Result<Self, PolicyError> {
        Ok(OpenCarrefour { name, engine: Carrefour::with_base(config, env, base)? })
    }

    /// The Carrefour engine (its stats, flags and rate).
    pub fn engine(&self) -> &Carrefour<Plain> {
        &self.engine
    }

    /// Interleave destinations of one address space ([`Carrefour::restrict_space`]).
    pub fn restrict_space(&mut self, space: SpaceId, nodes: Vec<NodeId>) {
        self.engine.restrict_space(space, nodes);
    }

    fn base(&self) -> &dyn DynPolicy {
        // `with_base` always builds an open base.
        self.engine.open_base().expect("OpenCarrefour is built with an open base")
    }

    fn base_mut(&mut self) -> &mut (dyn DynPolicy + 'static) {
        self.engine.open_base_mut().expect("OpenCarrefour is built with an open base")
    }
}

impl DynPolicy for OpenCarrefour {
    fn name(&self) -> &'static str {
        self.name
    }
    /// The base's settings with Carrefour's as a `carrefour` table.
    fn config_toml(&self) -> toml::Table {
        let mut t = self.base().config_toml();
        if let Ok(toml::Value::Table(c)) = toml::Value::try_from(Policy::config(&self.engine)) {
            t.insert("carrefour".into(), toml::Value::Table(c));
        }
        t
    }
    fn place(&mut self, req: &PlaceRequest, mem: &dyn MemoryState) -> Result<NodeId, OutOfMemory> {
        Policy::place(&mut self.engine, req, mem)
    }
    fn take_place_cost_ns(&mut self) -> f64 {
        self.base_mut().take_place_cost_ns()
    }
    fn moves_pinned_threads(&self) -> bool {
        self.base().moves_pinned_threads()
    }
    fn layout(&mut self, space: &AddressSpaceInfo, mem: &dyn MemoryState) -> Result<Option<Vec<Extent>>, OutOfMemory> {
        Policy::layout(&mut self.engine, space, mem)
    }
    fn should_unmap(&mut self, space: SpaceId, page: PageIdx, node: NodeId) -> bool {
        self.base_mut().should_unmap(space, page, node)
    }
    fn on_hint_fault(&mut self, fault: &HintFault, view: &dyn SystemView, out: &mut Vec<Decision>) {
        self.base_mut().on_hint_fault(fault, view, out)
    }
    fn on_scan_step(&mut self, step: &ScanStepDone, view: &dyn SystemView, out: &mut Vec<Decision>) {
        self.base_mut().on_scan_step(step, view, out)
    }
    /// The base's tick work first, then Carrefour's interval.
    fn on_tick(&mut self, tick: &Tick, view: &dyn SystemView, out: &mut Vec<Decision>) {
        self.base_mut().on_tick(tick, view, out);
        Policy::on_tick(&mut self.engine, tick, view, out)
    }
    fn on_task_tick(&mut self, tick: &TaskTick, view: &dyn SystemView, out: &mut Vec<Decision>) {
        self.base_mut().on_task_tick(tick, view, out)
    }
    fn on_thread_migrated(&mut self, moved: &ThreadMigrated, view: &dyn SystemView, out: &mut Vec<Decision>) {
        self.base_mut().on_thread_migrated(moved, view, out)
    }
    fn sample_period_ns(&self) -> Option<f64> {
        Policy::sample_period_ns(&self.engine)
    }
    fn on_sample(&mut self, sample: &AccessSample) {
        Policy::on_sample(&mut self.engine, sample)
    }
    /// The base hears every outcome (Carrefour's moves included) before Carrefour sets its
    /// next sampling rate from them.
    fn on_outcomes(&mut self, cause: &EventRef, decisions: &[Decision], outcomes: &[Outcome]) {
        self.base_mut().on_outcomes(cause, decisions, outcomes);
        Policy::on_outcomes(&mut self.engine, cause, decisions, outcomes)
    }
    fn mempolicy(&self) -> Option<crate::decision::MempolicyIntent> {
        self.base().mempolicy()
    }
    /// The base's counters, then Carrefour's.
    fn counters(&self) -> Vec<(&'static str, u64)> {
        let s = self.engine.stats();
        let mut c = self.base().counters();
        c.extend([
            ("carrefour_intervals", s.intervals),
            ("carrefour_active_intervals", s.active_intervals),
            ("carrefour_samples", s.samples),
            ("carrefour_migrate_orders", s.migrate_orders),
            ("carrefour_interleave_orders", s.interleave_orders),
            ("carrefour_replicated_pages", s.replicated_pages),
            ("carrefour_executed_orders", s.executed_orders),
        ]);
        c
    }
    fn app_moves(&self) -> Vec<AppMove> {
        self.base().app_moves()
    }
    fn page_scanner_period_ns(&self) -> Option<u64> {
        self.base().page_scanner_period_ns()
    }
    fn on_page_scan(&mut self, scan: &PageScan, view: &dyn SystemView, out: &mut Vec<Decision>) {
        self.base_mut().on_page_scan(scan, view, out)
    }
}
