//! kMAF, the comparison system of the Stable-NUMA paper: a framework that learns from page
//! faults which threads use which pages. Besides the ordinary first-touch faults it
//! periodically induces faults on pages that are already mapped, records every fault in an
//! affinity table, migrates a page to the node whose threads fault on it most, and moves a
//! thread to the node holding most of the pages it faults on. docs/policies/kmaf.md restates
//! every rule and says where we had to choose (the Stable-NUMA paper describes kMAF in one
//! paragraph).
//!
//! Files: `config` (keys and validation), `affinity` (the table and the two placement rules);
//! this file wires them to the [`Policy`] hooks.

pub mod affinity;
pub mod config;
#[cfg(test)]
mod tests;

pub use config::KmafConfig;

use crate::decision::{Decision, HintFault, MoveCause, PlaceRequest, ScanStepDone, SpaceId, TaskTick, Tick};
use crate::error::{OutOfMemory, PolicyError};
use crate::policy::{MemoryState, Policy, PolicyEnv, SystemView};
use crate::statics::{FirstTouch, FirstTouchConfig};
use affinity::{page_target, thread_target, PageTable};
use numalab_core::{CpuId, NodeId, ThreadId};
use std::collections::BTreeMap;

/// Counters for tests and reports.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KmafStats {
    /// Induced faults seen (hinting faults).
    pub induced_faults: u64,
    /// Demand (first-touch) faults recorded.
    pub demand_faults: u64,
    pub page_migrations: u64,
    pub thread_moves: u64,
    pub thread_swaps: u64,
}

#[derive(Clone, Debug)]
struct SpaceState {
    pages: PageTable,
    next_scan_ns: Option<u64>,
}

pub struct Kmaf {
    config: KmafConfig,
    env: PolicyEnv,
    first_touch: FirstTouch,
    cpu_nodes: Vec<NodeId>,
    spaces: BTreeMap<SpaceId, SpaceState>,
    /// Per thread, faults this period by the node the page lives on after the fault.
    thread_nodes: BTreeMap<ThreadId, Vec<u64>>,
    next_placement_ns: Option<u64>,
    stats: KmafStats,
}

impl Kmaf {
    pub fn stats(&self) -> &KmafStats {
        &self.stats
    }

    /// The recorded sharers of a page: (thread, faults).
    pub fn sharers(&self, space: SpaceId, page: u64) -> Vec<(ThreadId, u32)> {
        self.spaces.get(&space).map_or_else(Vec::new, |s| s.pages.sharers(page))
    }

    /// A thread's faults this period per home node.
    pub fn thread_faults(&self, thread: ThreadId) -> Vec<u64> {
        self.thread_nodes.get(&thread).cloned().unwrap_or_else(|| vec![0; self.env.machine.node_count()])
    }

    fn space(&mut self, space: SpaceId) -> &mut SpaceState {
        let sharers = self.config.sharers as usize;
        self.spaces.entry(space).or_insert_with(|| SpaceState { pages: PageTable::new(sharers), next_scan_ns: None })
    }

    fn count_thread(&mut self, thread: ThreadId, home: NodeId) {
        let nodes = self.env.machine.node_count();
        if let Some(c) = self.thread_nodes.entry(thread).or_insert_with(|| vec![0; nodes]).get_mut(home as usize) {
            *c += 1;
        }
    }

    /// One placement round over every live, unpinned thread, in tid order.
    fn place_threads(&mut self, view: &dyn SystemView, out: &mut Vec<Decision>) {
        let cfg = &self.config;
        let target = |counts: Option<&Vec<u64>>, current: NodeId| {
            counts.and_then(|c| thread_target(c, &self.cpu_nodes, current, cfg.thread_min_faults, cfg.thread_majority))
        };
        let mut claimed: Vec<CpuId> = Vec::new();
        let mut moved: Vec<ThreadId> = Vec::new();
        let threads = view.thread_count();
        let free = |t: ThreadId, moved: &[ThreadId]| view.thread_alive(t) && !view.thread_pinned(t) && !moved.contains(&t);
        for t in 0..threads {
            if !free(t, &moved) {
                continue;
            }
            let cur = view.node_of_thread(t);
            let Some(to) = target(self.thread_nodes.get(&t), cur) else { continue };
            let idle = (0..view.cpu_count()).find(|&c| view.node_of_cpu(c) == to && view.cpu_idle(c) && !claimed.contains(&c));
            if let Some(cpu) = idle {
                out.push(Decision::MoveThread { thread: t, to, cpu: Some(cpu), cause: MoveCause::Policy });
                claimed.push(cpu);
                moved.push(t);
                self.stats.thread_moves += 1;
            } else if cfg.thread_swap {
                let partner = (0..threads).find(|&u| {
                    u != t && free(u, &moved) && view.node_of_thread(u) == to && target(self.thread_nodes.get(&u), to) == Some(cur)
                });
                if let Some(u) = partner {
                    out.push(Decision::SwapThreads { a: t, b: u, cause: MoveCause::Policy });
                    moved.extend([t, u]);
                    self.stats.thread_swaps += 1;
                }
            }
        }
        for c in self.thread_nodes.values_mut() {
            c.iter_mut().for_each(|x| *x = 0);
        }
    }
}

impl Policy for Kmaf {
    type Config = KmafConfig;
    const NAME: &'static str = "kmaf";
    const SUMMARY: &'static str = "kMAF: induced faults feed a thread-page affinity table; pages and threads move toward locality";

    fn new(config: KmafConfig, env: &PolicyEnv) -> Result<Self, PolicyError> {
        config.validate(Self::NAME)?;
        let first_touch = FirstTouch::new(FirstTouchConfig { fallback: config.fallback }, env)?;
        Ok(Kmaf {
            cpu_nodes: env.machine.cpu_nodes(),
            config,
            env: env.clone(),
            first_touch,
            spaces: BTreeMap::new(),
            thread_nodes: BTreeMap::new(),
            next_placement_ns: None,
            stats: KmafStats::default(),
        })
    }

    fn config(&self) -> &KmafConfig {
        &self.config
    }

    /// First touch; the demand fault is the page's first affinity record.
    fn place(&mut self, req: &PlaceRequest, mem: &dyn MemoryState) -> Result<NodeId, OutOfMemory> {
        let node = self.first_touch.place(req, mem)?;
        let pages = &mut self.space(req.space).pages;
        pages.reset(req.page);
        pages.record(req.page, req.thread);
        self.count_thread(req.thread, node);
        self.stats.demand_faults += 1;
        Ok(node)
    }

    fn on_hint_fault(&mut self, f: &HintFault, view: &dyn SystemView, out: &mut Vec<Decision>) {
        self.stats.induced_faults += 1;
        let sp = self.space(f.space);
        sp.pages.record(f.page, f.thread);
        let sharers = sp.pages.sharers(f.page);
        let cfg = &self.config;
        let to = page_target(&sharers, |u| view.node_of_thread(u), &self.env.allowed, f.page_node, cfg.page_min_faults, cfg.page_majority);
        let to = to.filter(|&n| view.free_pages(n) > 0);
        if let Some(to) = to {
            out.push(Decision::MigratePage { space: f.space, page: f.page, to });
            self.stats.page_migrations += 1;
        }
        // The thread's window counts the page where it lives after this fault: a page that
        // follows the thread counts as local and does not pull the thread away.
        self.count_thread(f.thread, to.unwrap_or(f.page_node));
    }

    /// Induced faults: one pass over the whole address space every `fault_period_ms`, run in
    /// the context of the ticking thread.
    fn on_task_tick(&mut self, tick: &TaskTick, view: &dyn SystemView, out: &mut Vec<Decision>) {
        let (delay, period) = (self.config.scan_delay_ms, self.config.fault_period_ms);
        let pages = view.space_pages(tick.space);
        let sp = self.space(tick.space);
        let next = *sp.next_scan_ns.get_or_insert(tick.time_ns + delay * 1_000_000);
        if tick.time_ns < next || pages == 0 {
            return;
        }
        sp.next_scan_ns = Some(tick.time_ns + period * 1_000_000);
        out.push(Decision::ScanStep { space: tick.space, thread: tick.thread, pages });
    }

    /// At the end of each pass the page table ages (every count halves).
    fn on_scan_step(&mut self, step: &ScanStepDone, _view: &dyn SystemView, _out: &mut Vec<Decision>) {
        if step.pass_completed {
            self.space(step.space).pages.age();
        }
    }

    /// Thread placement every `thread_period_ms`.
    fn on_tick(&mut self, tick: &Tick, view: &dyn SystemView, out: &mut Vec<Decision>) {
        let period = self.config.thread_period_ms * 1_000_000;
        let next = *self.next_placement_ns.get_or_insert(tick.time_ns + period);
        if tick.time_ns < next {
            return;
        }
        self.next_placement_ns = Some(tick.time_ns + period);
        self.place_threads(view, out);
    }
}
