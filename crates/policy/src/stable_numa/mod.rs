//! Stable-NUMA (Stable-NUMA paper, IEEE Access 2021): hinting-fault profiling with a
//! per-page state machine that needs two consistent faults to change a page's class,
//! selective profiling by a per-page bypass exponent, system-shared page balancing, and
//! two-level thread clustering. Every mechanism is restated in docs/policies/stable-numa.md.
//!
//! Files: `page_state` (states, metadata byte, classification, rules R0–R6, unmap test),
//! `scan` (scanner cadence), `ss_balance` (the SS balancing rule), `cluster` (tables,
//! smoothing, move/swap decision), `config` (keys and validation); this file wires them to
//! the [`Policy`] hooks.

pub mod cluster;
pub mod config;
pub mod page_state;
pub mod scan;
pub mod ss_balance;
#[cfg(test)]
mod tests;

pub use config::{SsCountScope, StableNumaConfig};
pub use page_state::{FaultType, Kind, Meta, State};

use crate::decision::{Decision, HintFault, MoveCause, PlaceRequest, ScanStepDone, SpaceId, TaskTick};
use crate::error::{OutOfMemory, PolicyError};
use crate::policy::{MemoryState, Policy, PolicyEnv, SystemView};
use crate::statics::{FirstTouch, FirstTouchConfig};
use cluster::{Choice, Member, Params, Tables};
use numalab_core::{CpuId, NodeId, PageIdx, ThreadId};
use page_state::{classify, tid_mask, transition, unmap_due};
use std::collections::BTreeMap;

/// `last` of a page that has had no hinting fault yet.
const NO_LAST: (ThreadId, CpuId) = (ThreadId::MAX, CpuId::MAX);
/// A page not counted as SS.
const NO_HOME: NodeId = NodeId::MAX;

/// Counters for tests and reports.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StableNumaStats {
    pub hint_faults: u64,
    /// Faults by type: U, P, SL, SR.
    pub faults_by_type: [u64; 4],
    /// Stable pages a scan visit found mapped and left mapped.
    pub bypasses: u64,
    pub private_migrations: u64,
    pub ss_balance_migrations: u64,
    pub eager_migrations: u64,
    pub cluster_moves: u64,
    pub cluster_swaps: u64,
}

/// Where a thread stands in its root group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Membership {
    /// Not seen yet.
    New,
    /// In the sub-group of this node.
    In(NodeId),
    /// Exited: its rows and columns are gone.
    Gone,
}

/// One root group: the address space's threads, their sub-groups and the tables.
#[derive(Clone, Debug)]
struct Group {
    tables: Tables,
    members: Vec<Membership>,
}

/// Per address space: one metadata byte, one `last` record and the home an SS page is
/// counted at, per page (11 bytes a page), the scan sequence in progress, the scanner clock
/// and the root group.
#[derive(Clone, Debug, Default)]
struct SpaceState {
    meta: Vec<u8>,
    last: Vec<(ThreadId, CpuId)>,
    /// Per page: the node an SS page is counted at in `ss_count`, or `NO_HOME`. A table like
    /// `meta` rather than a map of SS pages: the map's searches at every fault were most of
    /// the policy's own time in the simulator (docs/policies/stable-numa.md, "Memory per
    /// page").
    ss_home: Vec<NodeId>,
    seq: u64,
    next_scan_ns: Option<u64>,
    group: Option<Group>,
}

impl SpaceState {
    fn grow(&mut self, page: PageIdx) {
        let need = page as usize + 1;
        if self.meta.len() < need {
            self.meta.resize(need, Meta::FRESH.pack());
            self.last.resize(need, NO_LAST);
            self.ss_home.resize(need, NO_HOME);
        }
    }

    /// The node an SS page is counted at.
    fn ss_home(&self, page: PageIdx) -> Option<NodeId> {
        self.ss_home.get(page as usize).copied().filter(|&h| h != NO_HOME)
    }

    /// Forget where an SS page is counted; returns where it was.
    fn take_ss_home(&mut self, page: PageIdx) -> Option<NodeId> {
        let h = std::mem::replace(self.ss_home.get_mut(page as usize)?, NO_HOME);
        (h != NO_HOME).then_some(h)
    }

    fn meta(&self, page: PageIdx) -> Meta {
        self.meta.get(page as usize).and_then(|&b| Meta::unpack(b)).unwrap_or(Meta::FRESH)
    }

    fn last(&self, page: PageIdx) -> Option<(ThreadId, CpuId)> {
        self.last.get(page as usize).copied().filter(|&l| l != NO_LAST)
    }
}

pub struct StableNuma {
    config: StableNumaConfig,
    env: PolicyEnv,
    first_touch: FirstTouch,
    mask: u32,
    /// Nodes with CPUs: the sub-groups and the only move targets.
    cpu_nodes: Vec<NodeId>,
    spaces: BTreeMap<SpaceId, SpaceState>,
    /// SS pages per node, keyed by space (`None` when the scope is global).
    ss_count: BTreeMap<Option<SpaceId>, Vec<u64>>,
    stats: StableNumaStats,
}

impl StableNuma {
    pub fn stats(&self) -> &StableNumaStats {
        &self.stats
    }

    /// A page's metadata (a fresh page if never seen).
    pub fn page_meta(&self, space: SpaceId, page: PageIdx) -> Meta {
        self.spaces.get(&space).map_or(Meta::FRESH, |s| s.meta(page))
    }

    /// The page's previous hinting fault `(thread, cpu)`.
    pub fn page_last(&self, space: SpaceId, page: PageIdx) -> Option<(ThreadId, CpuId)> {
        self.spaces.get(&space).and_then(|s| s.last(page))
    }

    /// SS pages per node as seen by `space` (machine-wide in the global scope).
    pub fn ss_count(&self, space: SpaceId) -> Vec<u64> {
        self.ss_count.get(&self.ss_key(space)).cloned().unwrap_or_else(|| vec![0; self.env.machine.node_count()])
    }

    /// The root group's tables of a space, once the group exists.
    pub fn tables(&self, space: SpaceId) -> Option<&Tables> {
        self.spaces.get(&space)?.group.as_ref().map(|g| &g.tables)
    }

    /// The sub-group (node) of a thread, once it joined.
    pub fn sub_group(&self, space: SpaceId, thread: ThreadId) -> Option<NodeId> {
        let g = self.spaces.get(&space)?.group.as_ref()?;
        match g.members[g.tables.row(thread)?] {
            Membership::In(n) => Some(n),
            _ => None,
        }
    }

    /// The sequence in progress for a space.
    pub fn sequence(&self, space: SpaceId) -> u64 {
        self.spaces.get(&space).map_or(0, |s| s.seq)
    }

    /// Tests: give a page metadata (and an SS page its count at `home`).
    #[cfg(test)]
    pub(crate) fn set_page(&mut self, space: SpaceId, page: PageIdx, meta: Meta, home: NodeId) {
        let sp = self.space(space);
        sp.grow(page);
        let old = sp.meta(page);
        sp.meta[page as usize] = meta.pack();
        if old.state == State::SS {
            if let Some(h) = sp.take_ss_home(page) {
                self.ss_add(space, h, -1);
            }
        }
        if meta.state == State::SS {
            self.ss_add(space, home, 1);
            self.space(space).ss_home[page as usize] = home;
        }
    }

    /// Tests: set a page's previous fault.
    #[cfg(test)]
    pub(crate) fn set_last(&mut self, space: SpaceId, page: PageIdx, last: (ThreadId, CpuId)) {
        let sp = self.space(space);
        sp.grow(page);
        sp.last[page as usize] = last;
    }

    #[cfg(test)]
    pub(crate) fn tables_mut(&mut self, space: SpaceId) -> Option<&mut Tables> {
        self.spaces.get_mut(&space)?.group.as_mut().map(|g| &mut g.tables)
    }

    fn ss_key(&self, space: SpaceId) -> Option<SpaceId> {
        match self.config.ss_count_scope {
            SsCountScope::Global => None,
            SsCountScope::Space => Some(space),
        }
    }

    fn ss_add(&mut self, space: SpaceId, node: NodeId, delta: i64) {
        let nodes = self.env.machine.node_count();
        let key = self.ss_key(space);
        let c = &mut self.ss_count.entry(key).or_insert_with(|| vec![0; nodes])[node as usize];
        *c = c.saturating_add_signed(delta);
    }

    fn space(&mut self, space: SpaceId) -> &mut SpaceState {
        self.spaces.entry(space).or_default()
    }

    /// Create the space's root group if needed and let `thread` join the sub-group of the
    /// node it runs on (announced with `SetPreferredNode`, the node it is kept on).
    fn join(&mut self, space: SpaceId, thread: ThreadId, view: &dyn SystemView, out: &mut Vec<Decision>) {
        let nodes = self.env.machine.node_count();
        let sp = self.spaces.entry(space).or_default();
        let g = sp.group.get_or_insert_with(|| {
            let r = view.space_threads(space);
            let n = (r.end - r.start) as usize;
            Group { tables: Tables::new(r.start, n, nodes), members: vec![Membership::New; n] }
        });
        let Some(row) = g.tables.row(thread) else { return };
        if g.members[row] == Membership::New && view.thread_alive(thread) {
            let node = view.node_of_thread(thread);
            g.members[row] = Membership::In(node);
            out.push(Decision::SetPreferredNode { thread, node: Some(node) });
        }
    }

    /// The group thread credited as the previous accessor: the thread itself with full ids,
    /// else the lowest group tid that matches in the kept bits.
    fn resolve_prev(&self, space: SpaceId, last_tid: ThreadId) -> Option<ThreadId> {
        let t = &self.spaces.get(&space)?.group.as_ref()?.tables;
        if self.mask == u32::MAX {
            return t.contains(last_tid).then_some(last_tid);
        }
        (t.first..t.first + t.threads as ThreadId).find(|&u| u & self.mask == last_tid & self.mask)
    }

    fn migrate(&self, space: SpaceId, page: PageIdx, to: NodeId, view: &dyn SystemView, out: &mut Vec<Decision>) -> bool {
        if !self.env.allowed.contains(&to) || view.free_pages(to) == 0 {
            return false;
        }
        out.push(Decision::MigratePage { space, page, to });
        true
    }

    /// End of a scan sequence: membership, smoothing, then at most
    /// `decisions_per_sequence` moves or swaps.
    fn sequence_end(&mut self, space: SpaceId, view: &dyn SystemView, out: &mut Vec<Decision>) {
        for t in view.space_threads(space) {
            self.join(space, t, view, out);
        }
        let cfg = self.config.clone();
        let Some(g) = self.spaces.get_mut(&space).and_then(|s| s.group.as_mut()) else { return };
        for row in 0..g.members.len() {
            let t = g.tables.first + row as ThreadId;
            if matches!(g.members[row], Membership::In(_)) && !view.thread_alive(t) {
                g.members[row] = Membership::Gone;
                g.tables.clear(t);
            }
        }
        g.tables.smooth(cfg.ema_alpha);
        let params = Params { min_gain: cfg.min_gain, imbalance_pct: cfg.numa_imbalance_pct as u64, swap_threshold: cfg.swap_threshold };
        let mut moved: Vec<ThreadId> = Vec::new();
        for _ in 0..cfg.decisions_per_sequence {
            let g = self.spaces.get(&space).and_then(|s| s.group.as_ref()).expect("group exists");
            let members: Vec<Member> = g
                .members
                .iter()
                .enumerate()
                .filter_map(|(row, m)| match *m {
                    Membership::In(sub) => {
                        let tid = g.tables.first + row as ThreadId;
                        Some(Member { tid, sub, runnable: true, movable: !view.thread_pinned(tid) && !moved.contains(&tid) })
                    }
                    _ => None,
                })
                .collect();
            let choice = cluster::decide(&g.tables, &members, &self.cpu_nodes, |n| view.node_cpu_count(n) as u64, params);
            match choice {
                Choice::Nothing => break,
                Choice::Move { thread, to, .. } => {
                    out.push(Decision::MoveThread { thread, to, cpu: None, cause: MoveCause::ClusterMove });
                    out.push(Decision::SetPreferredNode { thread, node: Some(to) });
                    self.set_member(space, thread, to);
                    self.stats.cluster_moves += 1;
                    moved.push(thread);
                    self.follow(space, &[(thread, to)], view, out);
                }
                Choice::Swap { thread, victim, from, to } => {
                    out.push(Decision::SwapThreads { a: thread, b: victim, cause: MoveCause::ClusterSwap });
                    out.push(Decision::SetPreferredNode { thread, node: Some(to) });
                    out.push(Decision::SetPreferredNode { thread: victim, node: Some(from) });
                    self.set_member(space, thread, to);
                    self.set_member(space, victim, from);
                    self.stats.cluster_swaps += 1;
                    moved.extend([thread, victim]);
                    self.follow(space, &[(thread, to), (victim, from)], view, out);
                }
            }
        }
    }

    fn set_member(&mut self, space: SpaceId, thread: ThreadId, node: NodeId) {
        if let Some(g) = self.spaces.get_mut(&space).and_then(|s| s.group.as_mut()) {
            if let Some(row) = g.tables.row(thread) {
                g.members[row] = Membership::In(node);
            }
        }
    }

    /// `eager_private_follow`: migrate the TP pages owned by moved threads to their new node,
    /// while that node has free pages.
    fn follow(&mut self, space: SpaceId, moves: &[(ThreadId, NodeId)], view: &dyn SystemView, out: &mut Vec<Decision>) {
        if !self.config.eager_private_follow {
            return;
        }
        let Some(sp) = self.spaces.get(&space) else { return };
        for &(thread, to) in moves {
            if !self.env.allowed.contains(&to) {
                continue;
            }
            let mut free = view.free_pages(to);
            for page in 0..sp.meta.len() as PageIdx {
                if free == 0 {
                    break;
                }
                let owned = sp.meta(page).state == State::TP && sp.last(page).is_some_and(|(t, _)| t == thread);
                if owned && view.page_node(space, page).is_some_and(|h| h != to) {
                    out.push(Decision::MigratePage { space, page, to });
                    free -= 1;
                    self.stats.eager_migrations += 1;
                }
            }
        }
    }
}

impl Policy for StableNuma {
    type Config = StableNumaConfig;
    const NAME: &'static str = "stable-numa";
    const SUMMARY: &'static str = "Stable-NUMA: two-fault page states, selective profiling, SS balancing, two-level thread clustering";

    fn new(config: StableNumaConfig, env: &PolicyEnv) -> Result<Self, PolicyError> {
        config.validate(Self::NAME)?;
        let first_touch = FirstTouch::new(FirstTouchConfig { fallback: config.fallback }, env)?;
        Ok(StableNuma {
            mask: tid_mask(config.pid_bits),
            cpu_nodes: env.machine.cpu_nodes(),
            config,
            env: env.clone(),
            first_touch,
            spaces: BTreeMap::new(),
            ss_count: BTreeMap::new(),
            stats: StableNumaStats::default(),
        })
    }

    fn config(&self) -> &StableNumaConfig {
        &self.config
    }

    /// First touch; a newly placed page starts fresh (UN, `e = 0`, no `last`).
    fn place(&mut self, req: &PlaceRequest, mem: &dyn MemoryState) -> Result<NodeId, OutOfMemory> {
        let sp = self.space(req.space);
        if (req.page as usize) < sp.meta.len() {
            sp.meta[req.page as usize] = Meta::FRESH.pack();
            sp.last[req.page as usize] = NO_LAST;
        }
        if let Some(h) = sp.take_ss_home(req.page) {
            self.ss_add(req.space, h, -1);
        }
        self.first_touch.place(req, mem)
    }

    fn should_unmap(&mut self, space: SpaceId, page: PageIdx, _node: NodeId) -> bool {
        let (meta, seq) = self.spaces.get(&space).map_or((Meta::FRESH, 0), |s| (s.meta(page), s.seq));
        let due = unmap_due(meta, seq);
        if !due {
            self.stats.bypasses += 1;
        }
        due
    }

    fn on_hint_fault(&mut self, f: &HintFault, view: &dyn SystemView, out: &mut Vec<Decision>) {
        self.join(f.space, f.thread, view, out);
        let (space, page, h, n) = (f.space, f.page, f.page_node, f.cpu_node);
        let last = {
            let sp = self.space(space);
            sp.grow(page);
            sp.last(page)
        };
        // (1) classify against the previous fault.
        let ft = classify(last, f.thread, f.cpu, self.mask, |c| view.node_of_cpu(c));
        self.stats.hint_faults += 1;
        self.stats.faults_by_type[ft as usize] += 1;
        // (2) tables, with the home before any migration.
        let prev = match (ft, last) {
            (FaultType::Sl | FaultType::Sr, Some((u, _))) => self.resolve_prev(space, u),
            _ => None,
        };
        let cfg = &self.config;
        let (it_memory, e_max) = (cfg.it_memory, cfg.e_max);
        let sp = self.spaces.get_mut(&space).expect("space exists");
        if let Some(g) = sp.group.as_mut() {
            g.tables.record(f.thread, h, prev);
        }
        // (3) remember this fault, (4) transition.
        sp.last[page as usize] = (f.thread, f.cpu);
        let old = sp.meta(page);
        let tr = transition(old, ft, it_memory, e_max);
        sp.meta[page as usize] = tr.next.pack();
        // SS bookkeeping: the counts follow the page's real home.
        if old.state == State::SS {
            if let Some(counted) = sp.ss_home(page) {
                if counted != h {
                    sp.ss_home[page as usize] = h;
                    self.ss_add(space, counted, -1);
                    self.ss_add(space, h, 1);
                }
            }
            if tr.next.state != State::SS {
                self.space(space).take_ss_home(page);
                self.ss_add(space, h, -1);
            }
        } else if tr.next.state == State::SS {
            sp.ss_home[page as usize] = h;
            self.ss_add(space, h, 1);
        }
        // (5) placement of the state reached.
        match tr.placement {
            Some(Kind::Tp | Kind::Np) if h != n => {
                if self.migrate(space, page, n, view, out) {
                    self.stats.private_migrations += 1;
                }
            }
            Some(Kind::Ss) => {
                let counts = self.ss_count(space);
                if let Some(to) = ss_balance::balance_target(&counts, &self.env.allowed, h, self.config.ss_balance_ratio) {
                    if self.migrate(space, page, to, view, out) {
                        self.ss_add(space, h, -1);
                        self.ss_add(space, to, 1);
                        self.space(space).ss_home[page as usize] = to;
                        self.stats.ss_balance_migrations += 1;
                    }
                }
            }
            Some(Kind::Tp | Kind::Np) | None => {}
        }
    }

    fn on_task_tick(&mut self, tick: &TaskTick, view: &dyn SystemView, out: &mut Vec<Decision>) {
        self.join(tick.space, tick.thread, view, out);
        let (delay, interval, chunk, page_bytes) =
            (self.config.scan_delay_ms, self.config.scan_interval_ms, self.config.scan_chunk_mb, self.env.page_bytes);
        let pages = view.space_pages(tick.space);
        let sp = self.space(tick.space);
        let next = *sp.next_scan_ns.get_or_insert(tick.time_ns + delay * 1_000_000);
        if tick.time_ns < next || pages == 0 {
            return;
        }
        let c = scan::cadence(pages * page_bytes, page_bytes, interval, chunk);
        sp.next_scan_ns = Some(tick.time_ns + c.step_ms * 1_000_000);
        out.push(Decision::ScanStep { space: tick.space, thread: tick.thread, pages: c.step_pages });
    }

    fn on_scan_step(&mut self, step: &ScanStepDone, view: &dyn SystemView, out: &mut Vec<Decision>) {
        self.space(step.space).seq = step.sequence;
        if step.pass_completed {
            self.sequence_end(step.space, view, out);
        }
    }
}
