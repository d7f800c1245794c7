//! `autonuma`: Linux's automatic NUMA balancing in normal mode (docs/policies/autonuma.md).
//! Scan steps driven by CPU time make pages inaccessible; the hinting faults that follow feed
//! per-task and per-group statistics, migrate pages toward the faulting node through a
//! two-stage filter, and move or swap tasks toward their preferred node.

mod config;
mod filter;
pub(crate) mod period;
mod placement;
mod stats;

pub use config::AutoNumaConfig;

use crate::decision::{Decision, HintFault, MoveCause, PlaceRequest, ScanStepDone, SpaceId, TaskTick, ThreadMigrated};
use crate::dynamic::{pages_of_mb, ScanClock};
use crate::error::{OutOfMemory, PolicyError};
use crate::policy::{MemoryState, Policy, PolicyEnv, SystemView};
use crate::statics::{FirstTouch, FirstTouchConfig, FtFallback};
use filter::{Faulter, Last};
use numalab_core::rng::{stream, StreamRng};
use numalab_core::{CpuId, Machine, NodeId, ThreadId};
use period::{Bounds, GroupShape, Locality};
use stats::{Faults, Group, PRIVATE, SHARED};
use std::sync::Arc;

/// Per address space (Linux's per-mm state).
#[derive(Clone, Debug, Default)]
struct Mm {
    /// Earliest next scan step (`numa_next_scan`); `None` until the first tick.
    next_scan_ns: Option<u64>,
    /// Completed passes (`numa_scan_seq`), from the driver's scan steps.
    scan_seq: u64,
    /// Per page: 0 = unset, else `(cpu + 1) << 32 | pid bits` of the last hinting fault.
    last_cpupid: Vec<u64>,
}

/// Per task.
#[derive(Clone, Debug)]
struct Task {
    /// Scan period, period start and runtime stagger [S] (`task_tick_numa`).
    clock: ScanClock,
    scan_seq: u64,
    mem: Faults,
    cpu: Faults,
    mem_buf: Faults,
    cpu_buf: Faults,
    locality: Locality,
    total: u64,
    preferred: Option<NodeId>,
    migrate_retry_ns: u64,
    group: Option<usize>,
    last_runtime_ns: u64,
    last_wall_ns: u64,
}

pub struct AutoNuma {
    config: AutoNumaConfig,
    machine: Arc<Machine>,
    local: FirstTouch,
    rng: StreamRng,
    nodes: usize,
    page_bytes: u64,
    mms: Vec<Mm>,
    tasks: Vec<Task>,
    /// Groups in creation order (their index is the tie-break of equal-size joins).
    groups: Vec<Group>,
    tick_ns: u64,
}

impl AutoNuma {
    fn mm(&mut self, space: SpaceId) -> &mut Mm {
        if self.mms.len() <= space as usize {
            self.mms.resize(space as usize + 1, Mm::default());
        }
        &mut self.mms[space as usize]
    }

    fn task(&mut self, t: ThreadId) -> &mut Task {
        while self.tasks.len() <= t as usize {
            let delay = self.config.scan_delay_ms;
            self.tasks.push(Task {
                clock: ScanClock { period_ms: delay, ..ScanClock::default() },
                scan_seq: 0,
                mem: stats::zeros(self.nodes),
                cpu: stats::zeros(self.nodes),
                mem_buf: stats::zeros(self.nodes),
                cpu_buf: stats::zeros(self.nodes),
                locality: Locality::default(),
                total: 0,
                preferred: None,
                migrate_retry_ns: 0,
                group: None,
                last_runtime_ns: 0,
                last_wall_ns: 0,
            });
        }
        &mut self.tasks[t as usize]
    }

    fn pid(&self, t: ThreadId) -> u32 {
        if self.config.pid_bits >= 32 {
            t
        } else {
            t & ((1u32 << self.config.pid_bits) - 1)
        }
    }

    fn group_shape(&self, t: ThreadId) -> Option<GroupShape> {
        let g = &self.groups[self.tasks[t as usize].group?];
        let shared: u64 = g.mem.iter().map(|f| f[SHARED]).sum();
        let private: u64 = g.mem.iter().map(|f| f[PRIVATE]).sum();
        Some(GroupShape { nr_tasks: g.nr_tasks, shared, private })
    }

    fn bounds(&self, t: ThreadId, view: &dyn SystemView) -> Bounds {
        let space = view.space_of_thread(t);
        let scan_pages = pages_of_mb(self.config.scan_size_mb, self.page_bytes);
        period::bounds(
            view.space_pages(space),
            scan_pages,
            self.config.scan_size_mb,
            self.config.scan_period_min_ms,
            self.config.scan_period_max_ms,
            self.group_shape(t),
        )
    }

    fn nearest_cpu_node(&self, node: NodeId, view: &dyn SystemView) -> NodeId {
        if view.node_cpu_count(node) > 0 {
            return node;
        }
        (0..self.nodes as NodeId)
            .filter(|&n| view.node_cpu_count(n) > 0)
            .min_by_key(|&n| (self.machine.distance(node, n), n))
            .unwrap_or(node)
    }

    /// `task_numa_group`: on a shared fault, join the group of the task that faulted last.
    /// Returns the fault's private flag.
    fn numa_group(&mut self, t: ThreadId, last_cpu: CpuId, last_pid: u32, shared_mapping: bool, view: &dyn SystemView) -> bool {
        let nodes = self.nodes;
        if self.task(t).group.is_none() {
            let mut g = Group::new(nodes);
            let p = &self.tasks[t as usize];
            g.mem.clone_from(&p.mem);
            g.cpu.clone_from(&p.cpu);
            g.total = p.total;
            g.nr_tasks = 1;
            self.groups.push(g);
            self.tasks[t as usize].group = Some(self.groups.len() - 1);
        }
        let my = self.tasks[t as usize].group.expect("just made");
        let Some(q) = view.current_thread(last_cpu).filter(|&q| self.pid(q) == last_pid) else { return false };
        let Some(theirs) = self.tasks.get(q as usize).and_then(|x| x.group).filter(|&g| g != my) else { return false };
        let (mine_n, theirs_n) = (self.groups[my].nr_tasks, self.groups[theirs].nr_tasks);
        if mine_n > theirs_n || (mine_n == theirs_n && my > theirs) {
            return false;
        }
        let join = view.space_of_thread(q) == view.space_of_thread(t) || shared_mapping;
        if join {
            let p = &self.tasks[t as usize];
            let (mem, cpu, total) = (p.mem.clone(), p.cpu.clone(), p.total);
            for n in 0..nodes {
                for k in 0..2 {
                    self.groups[my].mem[n][k] -= mem[n][k].min(self.groups[my].mem[n][k]);
                    self.groups[my].cpu[n][k] -= cpu[n][k].min(self.groups[my].cpu[n][k]);
                    self.groups[theirs].mem[n][k] += mem[n][k];
                    self.groups[theirs].cpu[n][k] += cpu[n][k];
                }
            }
            self.groups[my].total -= total.min(self.groups[my].total);
            self.groups[my].nr_tasks -= 1;
            self.groups[theirs].total += total;
            self.groups[theirs].nr_tasks += 1;
            self.tasks[t as usize].group = Some(theirs);
        }
        !join
    }

    /// `task_numa_placement`: once per scan sequence, decay and fold in the buffers, pick the
    /// preferred node, update the group's active nodes and the scan period.
    fn placement(&mut self, t: ThreadId, view: &dyn SystemView, out: &mut Vec<Decision>) {
        let space = view.space_of_thread(t);
        let seq = self.mm(space).scan_seq;
        let now = view.now_ns();
        let runtime = view.thread_runtime_ns(t);
        let p = self.task(t);
        if p.scan_seq == seq {
            return;
        }
        p.scan_seq = seq;
        let wall = now.saturating_sub(p.last_wall_ns);
        let run = runtime.saturating_sub(p.last_runtime_ns);
        p.last_wall_ns = now;
        p.last_runtime_ns = runtime;
        let w = (65536u128 * run as u128 / (wall as u128 + 1)) as u64;
        let locality_total = p.locality.local + p.locality.remote;
        let private_buf: u64 = p.mem_buf.iter().map(|f| f[PRIVATE]).sum();
        let shared_buf: u64 = p.mem_buf.iter().map(|f| f[SHARED]).sum();
        let (mut mem, mut cpu, mut mem_buf, mut cpu_buf) =
            (std::mem::take(&mut p.mem), std::mem::take(&mut p.cpu), std::mem::take(&mut p.mem_buf), std::mem::take(&mut p.cpu_buf));
        let (dm, dc) = stats::decay(&mut mem, &mut cpu, &mut mem_buf, &mut cpu_buf, w, locality_total);
        let dtotal: i64 = dm.iter().map(|d| d[0] + d[1]).sum();
        p.total = (p.total as i64 + dtotal).max(0) as u64;
        let group = p.group;
        (p.mem, p.cpu, p.mem_buf, p.cpu_buf) = (mem, cpu, mem_buf, cpu_buf);
        if let Some(g) = group {
            let g = &mut self.groups[g];
            for n in 0..self.nodes {
                for k in 0..2 {
                    g.mem[n][k] = (g.mem[n][k] as i64 + dm[n][k]).max(0) as u64;
                    g.cpu[n][k] = (g.cpu[n][k] as i64 + dc[n][k]).max(0) as u64;
                }
            }
            g.total = (g.total as i64 + dtotal).max(0) as u64;
        }
        let source = match group {
            Some(g) => stats::busiest(&self.groups[g].mem),
            None => stats::busiest(&self.tasks[t as usize].mem),
        };
        if let Some(n) = source {
            let n = self.nearest_cpu_node(n, view);
            if self.tasks[t as usize].preferred != Some(n) {
                self.tasks[t as usize].preferred = Some(n);
                out.push(Decision::SetPreferredNode { thread: t, node: Some(n) });
            }
        }
        if let Some(g) = group {
            self.groups[g].update_active_nodes();
        }
        let b = self.bounds(t, view);
        let p = &mut self.tasks[t as usize];
        let (new_period, reset) = period::update(p.clock.period_ms, &b, &p.locality, private_buf, shared_buf);
        p.clock.period_ms = new_period;
        if reset {
            p.locality = Locality::default();
        } else {
            // Doubling also pushes the space's next scan out.
            let mm_next = now + new_period * 1_000_000;
            self.mm(space).next_scan_ns = Some(mm_next);
        }
    }
}

impl Policy for AutoNuma {
    type Config = AutoNumaConfig;
    const NAME: &'static str = "autonuma";
    const SUMMARY: &'static str = "Linux automatic NUMA balancing: hinting faults migrate pages and move or swap threads toward their data";

    fn new(config: AutoNumaConfig, env: &PolicyEnv) -> Result<Self, PolicyError> {
        config.validate()?;
        let local = FirstTouch::new(FirstTouchConfig { fallback: FtFallback::Distance }, env)?;
        Ok(AutoNuma {
            config,
            machine: env.machine.clone(),
            local,
            rng: stream(env.seed, "policy.autonuma", 0),
            nodes: env.machine.node_count(),
            page_bytes: env.page_bytes,
            mms: Vec::new(),
            tasks: Vec::new(),
            groups: Vec::new(),
            tick_ns: 4_000_000,
        })
    }

    fn config(&self) -> &AutoNumaConfig {
        &self.config
    }

    fn place(&mut self, req: &PlaceRequest, mem: &dyn MemoryState) -> Result<NodeId, OutOfMemory> {
        self.local.place(req, mem)
    }

    /// `task_tick_numa` and `task_numa_work`.
    fn on_task_tick(&mut self, tick: &TaskTick, view: &dyn SystemView, out: &mut Vec<Decision>) {
        let delay_ns = self.config.scan_delay_ms * 1_000_000;
        self.mm(tick.space).next_scan_ns.get_or_insert(tick.time_ns + delay_ns);
        self.task(tick.thread);
        let Some(first) = self.tasks[tick.thread as usize].clock.runtime_due(tick.runtime_ns, &mut self.rng) else {
            return;
        };
        if first {
            let b = self.bounds(tick.thread, view);
            self.tasks[tick.thread as usize].clock.period_ms = b.scan_start;
        }
        let mm_next = &mut self.mms[tick.space as usize].next_scan_ns;
        if !self.tasks[tick.thread as usize].clock.claim_scan(tick.time_ns, mm_next, self.tick_ns) {
            return;
        }
        out.push(Decision::ScanStep {
            space: tick.space,
            thread: tick.thread,
            pages: pages_of_mb(self.config.scan_size_mb, self.page_bytes),
        });
    }

    fn on_scan_step(&mut self, step: &ScanStepDone, _view: &dyn SystemView, _out: &mut Vec<Decision>) {
        self.mm(step.space).scan_seq = step.sequence;
        self.task(step.thread).clock.node_stamp_ns += 32 * step.cpu_ns;
    }

    /// The hinting-fault path: `do_numa_page`, `should_numa_migrate_memory`, `task_numa_fault`.
    fn on_hint_fault(&mut self, f: &HintFault, view: &dyn SystemView, out: &mut Vec<Decision>) {
        let (t, dst) = (f.thread, f.cpu_node);
        let pages = view.space_pages(f.space) as usize;
        let pid = self.pid(t);
        let mm = self.mm(f.space);
        if mm.last_cpupid.len() < pages {
            mm.last_cpupid.resize(pages, 0);
        }
        let raw = mm.last_cpupid[f.page as usize];
        let last = (raw != 0).then(|| ((raw >> 32) as u32 - 1, raw as u32));
        self.task(t);
        let mut target = None;
        if view.capacity_pages(dst) > 0 {
            self.mms[f.space as usize].last_cpupid[f.page as usize] = ((f.cpu as u64 + 1) << 32) | pid as u64;
            let p = &self.tasks[t as usize];
            let faulter =
                Faulter { pid, has_preferred: p.preferred.is_some(), scan_seq: p.scan_seq, group: p.group.map(|g| &self.groups[g]) };
            let last_node = last.map(|(cpu, pid)| Last { node: view.node_of_cpu(cpu), pid });
            if filter::allow(&faulter, last_node, f.page_node, dst) && f.page_node != dst {
                target = Some(dst);
            }
        }
        let (mut mem_node, mut failed) = (f.page_node, false);
        if let Some(to) = target {
            if view.free_pages(to) == 0 {
                failed = true;
            } else {
                out.push(Decision::MigratePage { space: f.space, page: f.page, to });
                mem_node = to;
            }
        }
        // task_numa_fault
        let mut private = last.is_none_or(|(_, lp)| lp == pid);
        if !private && f.pte_writable {
            let (cpu, lp) = last.expect("shared faults have a last fault");
            private = self.numa_group(t, cpu, lp, f.shared_mapping, view);
        }
        let mut local = f.page_node == f.cpu_node;
        if let Some(g) = self.tasks[t as usize].group {
            let g = &self.groups[g];
            if !private && !local && g.active_count() > 1 && g.active_nodes[f.cpu_node as usize] && g.active_nodes[mem_node as usize] {
                local = true;
            }
        }
        let now = view.now_ns();
        if now > self.tasks[t as usize].migrate_retry_ns {
            self.placement(t, view, out);
            self.migrate_preferred(t, view, out);
        }
        let p = &mut self.tasks[t as usize];
        let k = if private { PRIVATE } else { SHARED };
        p.mem_buf[mem_node as usize][k] += 1;
        p.cpu_buf[f.cpu_node as usize][k] += 1;
        if local {
            p.locality.local += 1;
        } else {
            p.locality.remote += 1;
        }
        if failed {
            p.locality.failed += 1;
        }
    }

    /// A cross-node move resets the scan period to `scan_start` when the task has statistics
    /// and either has not seen a sequence, or leaves its preferred node (or has none).
    fn on_thread_migrated(&mut self, m: &ThreadMigrated, view: &dyn SystemView, _out: &mut Vec<Decision>) {
        let t = m.thread;
        let has_stats = self.tasks.get(t as usize).is_some_and(|p| p.total > 0 || p.mem_buf.iter().any(|f| f[0] + f[1] > 0));
        if !has_stats {
            return;
        }
        let p = &self.tasks[t as usize];
        let reset = p.scan_seq == 0 || (p.preferred != Some(m.to_node) && p.preferred.is_none_or(|pref| pref == m.from_node));
        if reset {
            let start = self.bounds(t, view).scan_start;
            self.tasks[t as usize].clock.period_ms = start;
        }
    }
}

impl AutoNuma {
    /// `numa_migrate_preferred`.
    fn migrate_preferred(&mut self, t: ThreadId, view: &dyn SystemView, out: &mut Vec<Decision>) {
        let Some(pref) = self.tasks[t as usize].preferred else { return };
        let p = &mut self.tasks[t as usize];
        p.migrate_retry_ns = view.now_ns() + period::retry_ms(p.clock.period_ms) * 1_000_000;
        if view.node_of_thread(t) == pref || view.thread_pinned(t) {
            return;
        }
        let ctx = placement::Ctx::new(self, t, view);
        let (choice, preferred_after) = placement::task_numa_migrate(&ctx, view);
        if let Some(n) = preferred_after {
            if self.tasks[t as usize].preferred != Some(n) {
                self.tasks[t as usize].preferred = Some(n);
                out.push(Decision::SetPreferredNode { thread: t, node: Some(n) });
            }
        }
        match choice {
            Some(placement::Choice::Move { cpu }) => {
                out.push(Decision::MoveThread { thread: t, to: view.node_of_cpu(cpu), cpu: Some(cpu), cause: MoveCause::NumaMove })
            }
            Some(placement::Choice::Swap { with }) => out.push(Decision::SwapThreads { a: t, b: with, cause: MoveCause::NumaSwap }),
            None => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::FakeSystem;
    use numalab_core::machine::presets;

    /// 2 nodes x 4 CPUs, 4 threads on CPUs 0..4 (all on node 0), one space of 1000 pages.
    fn setup(cfg: AutoNumaConfig) -> (AutoNuma, FakeSystem) {
        let env = PolicyEnv::new(Arc::new(presets::load("xeon-e5-2690-2s").unwrap())).with_seed(3);
        (AutoNuma::new(cfg, &env).unwrap(), FakeSystem::new(2, 4, 4, 1000, 1000))
    }

    fn fault(thread: ThreadId, cpu: CpuId, cpu_node: NodeId, page: u64, page_node: NodeId) -> HintFault {
        HintFault { space: 0, thread, cpu, cpu_node, page, page_node, write: false, pte_writable: true, shared_mapping: false, time_ns: 0 }
    }

    #[test]
    fn scan_steps_follow_cpu_time_after_the_delay() {
        let (mut p, mut sys) = setup(AutoNumaConfig { scan_delay_ms: 10, scan_period_min_ms: 10, ..AutoNumaConfig::default() });
        let mut out = Vec::new();
        let mut steps = Vec::new();
        for ms in 0..200u64 {
            sys.now_ns = ms * 1_000_000;
            out.clear();
            let tick = TaskTick { space: 0, thread: 0, cpu: 0, runtime_ns: ms * 1_000_000, time_ns: sys.now_ns };
            p.on_task_tick(&tick, &sys, &mut out);
            if let Some(Decision::ScanStep { space: 0, thread: 0, pages }) = out.first() {
                assert_eq!(*pages, 65536, "256 MiB of 4 KiB pages");
                steps.push(ms);
            }
        }
        assert!(!steps.is_empty() && steps[0] >= 10, "not before the scan delay: {steps:?}");
        // scan_min for a 1000-page space is max(100, 10 / 1) = 100 ms: one step per period.
        assert!(steps.windows(2).all(|w| w[1] - w[0] >= 100), "{steps:?}");
        // A thread that does not run does not scan.
        let (mut p, sys) = setup(AutoNumaConfig { scan_delay_ms: 10, ..AutoNumaConfig::default() });
        let mut out = Vec::new();
        for ms in 0..200u64 {
            p.on_task_tick(&TaskTick { space: 0, thread: 0, cpu: 0, runtime_ns: 0, time_ns: ms * 1_000_000 }, &sys, &mut out);
        }
        assert!(out.is_empty());
    }

    #[test]
    fn a_private_page_follows_its_owner_on_the_second_fault_from_the_new_node() {
        let (mut p, mut sys) = setup(AutoNumaConfig::default());
        // Past the early window: thread 0 has a preferred node and has seen 10 sequences.
        p.task(0).preferred = Some(0);
        p.tasks[0].scan_seq = 10;
        p.mm(0).scan_seq = 10;
        p.tasks[0].migrate_retry_ns = u64::MAX;
        sys.put(0, 5);
        let mut out = Vec::new();
        // First fault from node 1 on a page of node 0 whose last fault came from node 0.
        p.mm(0).last_cpupid = vec![0; 1000];
        p.mms[0].last_cpupid[7] = 1 << 32; // CPU 0, pid 0
        p.on_hint_fault(&fault(0, 5, 1, 7, 0), &sys, &mut out);
        assert!(out.is_empty(), "two-stage filter: {out:?}");
        p.on_hint_fault(&fault(0, 5, 1, 7, 0), &sys, &mut out);
        assert_eq!(out, vec![Decision::MigratePage { space: 0, page: 7, to: 1 }]);
        // Target node full: no decision, counted as a failed migration.
        out.clear();
        sys.mem.fill(1);
        p.on_hint_fault(&fault(0, 5, 1, 8, 0), &sys, &mut out);
        p.on_hint_fault(&fault(0, 5, 1, 8, 0), &sys, &mut out);
        assert!(out.is_empty());
        assert_eq!(p.tasks[0].locality.failed, 2, "both faults on page 8 were allowed and failed");
        // Inside the early window the first fault already migrates.
        let (mut p, mut sys) = setup(AutoNumaConfig::default());
        sys.put(0, 5);
        p.task(0).migrate_retry_ns = u64::MAX;
        p.on_hint_fault(&fault(0, 5, 1, 3, 0), &sys, &mut out);
        assert_eq!(out, vec![Decision::MigratePage { space: 0, page: 3, to: 1 }]);
    }

    #[test]
    fn a_shared_fault_joins_the_larger_group_of_the_last_faulter() {
        let (mut p, sys) = setup(AutoNumaConfig::default());
        // q = thread 1 runs on CPU 1 and has a group of 3 tasks.
        p.task(3);
        p.groups.push(Group::new(2));
        p.groups[0].nr_tasks = 3;
        p.tasks[1].group = Some(0);
        let private = p.numa_group(0, 1, 1, false, &sys);
        assert!(!private, "shared");
        assert_eq!((p.tasks[0].group, p.groups[0].nr_tasks), (Some(0), 4), "p made a group, then joined q's");
        assert_eq!(p.groups[1].nr_tasks, 0);
        // q's group smaller than p's: no join, the fault stays shared.
        let (mut p, sys) = setup(AutoNumaConfig::default());
        p.task(3);
        p.groups.push(Group { nr_tasks: 2, ..Group::new(2) });
        p.groups.push(Group { nr_tasks: 1, ..Group::new(2) });
        p.tasks[0].group = Some(0);
        p.tasks[1].group = Some(1);
        assert!(!p.numa_group(0, 1, 1, false, &sys));
        assert_eq!(p.tasks[0].group, Some(0));
        // Equal sizes: p joins only if its group was created first.
        p.groups[1].nr_tasks = 2;
        assert!(!p.numa_group(0, 1, 1, false, &sys));
        assert_eq!(p.tasks[0].group, Some(1));
        // q in another process without MAP_SHARED: no join, counted private.
        let (mut p, mut sys) = setup(AutoNumaConfig::default());
        sys.space_of_thread = vec![0, 1, 1, 1];
        sys.space_pages = vec![1000, 1000];
        p.task(3);
        p.groups.push(Group { nr_tasks: 3, ..Group::new(2) });
        p.tasks[1].group = Some(0);
        assert!(p.numa_group(0, 1, 1, false, &sys), "private");
        assert_ne!(p.tasks[0].group, Some(0));
        assert!(!p.numa_group(0, 1, 1, true, &sys), "with MAP_SHARED: join, shared");
        assert_eq!(p.tasks[0].group, Some(0));
    }

    #[test]
    fn leaving_the_preferred_node_resets_the_scan_period() {
        let moved = |seq: u64, pref: Option<NodeId>, from: NodeId, to: NodeId| {
            let (mut p, sys) = setup(AutoNumaConfig { scan_period_min_ms: 250, ..AutoNumaConfig::default() });
            let t = p.task(0);
            t.total = 5;
            t.clock.period_ms = 4000;
            t.scan_seq = seq;
            t.preferred = pref;
            let ev = ThreadMigrated { space: 0, thread: 0, from_node: from, to_node: to, cause: MoveCause::LoadBalance, time_ns: 0 };
            p.on_thread_migrated(&ev, &sys, &mut Vec::new());
            p.tasks[0].clock.period_ms
        };
        assert_eq!(moved(0, Some(0), 1, 0), 250);
        assert_eq!(moved(3, Some(0), 0, 1), 250);
        assert_eq!(moved(3, Some(0), 1, 0), 4000);
        assert_eq!(moved(3, Some(0), 1, 2), 4000);
        assert_eq!(moved(3, None, 0, 1), 250);
    }

    #[test]
    fn bad_settings_are_refused_by_name() {
        let env = PolicyEnv::new(Arc::new(presets::load("xeon-e5-2690-2s").unwrap()));
        let e = AutoNuma::new(AutoNumaConfig { scan_period_min_ms: 5000, scan_period_max_ms: 1000, ..AutoNumaConfig::default() }, &env)
            .err()
            .unwrap();
        assert_eq!(e.to_string(), "policy 'autonuma': scan_period_min_ms = 5000 must not exceed scan_period_max_ms = 1000");
        let e = AutoNuma::new(AutoNumaConfig { scan_size_mb: 0, ..AutoNumaConfig::default() }, &env).err().unwrap();
        assert!(e.to_string().contains("scan_size_mb = 0 must be between 1"), "{e}");
        let e = AutoNuma::new(AutoNumaConfig { pid_bits: 0, ..AutoNumaConfig::default() }, &env).err().unwrap();
        assert!(e.to_string().contains("pid_bits = 0"), "{e}");
    }
}
