//! The live engine: a dynamic policy driven on a real process (docs/live.md, "The live
//! engine"). Every period it reads the target's threads and mappings, takes the accesses an
//! [`AccessObserver`] saw, turns them into the events the simulator hands a policy (the same
//! `DynPolicy` hooks), and carries out the decisions through actuator traits: page moves with
//! `move_pages` ([`PageMover`], in paced batches), thread moves with `sched_setaffinity`
//! ([`ThreadPlacer`]). What live Linux cannot do is refused with a counted reason.
//!
//! How observations become events, as the simulator makes them (docs/simulator.md, "The
//! hinting scanner", "Access sampling"):
//! * A policy's [`Decision::ScanStep`] runs the shared scan walk (`numalab_policy::scan`)
//!   over the target's pages, located with `move_pages`; the pages it marks are marked in the
//!   engine's books only (the program's page tables are not touched). The next *observed*
//!   access to a marked page is the page's hinting fault: [`Policy::on_hint_fault`] with the
//!   observed thread, CPU and the page's node. A sampler sees a fraction of the accesses, so
//!   the faults are a sample of those Linux would take.
//! * Every observation is an access sample ([`Policy::on_sample`]) for policies that ask for
//!   samples, and counts in the tick's node-to-node access matrix.
//! * Each period, every thread whose CPU time advanced gets one scheduler tick
//!   ([`Policy::on_task_tick`]) with its CPU time; every `tick_ms`, [`Policy::on_tick`].
//!
//! [`Policy::on_hint_fault`]: numalab_policy::Policy::on_hint_fault
//! [`Policy::on_sample`]: numalab_policy::Policy::on_sample
//! [`Policy::on_task_tick`]: numalab_policy::Policy::on_task_tick
//! [`Policy::on_tick`]: numalab_policy::Policy::on_tick

use super::observe::{AccessObserver, Observation, ObserveError, RegionAccess};
use super::placer::ThreadPlacer;
use super::space::SpaceIndex;
use super::target::Target;
use crate::act::pages::{locate, move_batched, MoveError, MoveOptions, PageMove, PageMover, PageOutcome};
use crate::error::LinuxError;
use numalab_core::{CpuId, NodeId, PageIdx, ThreadId};
use numalab_policy::scan::{scan_walk, ScanCursor, ScanPages};
use numalab_policy::{
    space_move_takes, AccessSample, Decision, DecisionRecord, DynPolicy, EventRef, HintFault, MemoryState, NodeMask, Outcome, Refusal,
    RegionHeat, ScanStepDone, SpaceId, SystemView, TaskTick, ThreadMigrated, Tick,
};
use serde::Serialize;
use std::collections::{BTreeMap, VecDeque};
use std::io::Write;

/// The host as the policy sees it: policy node `i` is the `i`-th online node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LiveHost {
    /// Kernel node id of each policy node.
    pub kernel_nodes: Vec<u32>,
    /// Policy node of each CPU (kernel CPU numbers; CPUs of no node are absent: `None`).
    pub cpu_node: Vec<Option<NodeId>>,
    /// Free and total base pages of each policy node at the start.
    pub free_pages: Vec<u64>,
    pub capacity_pages: Vec<u64>,
}

impl LiveHost {
    pub fn from_topology(topo: &crate::Topology, page_bytes: u64) -> LiveHost {
        let max_cpu = topo.nodes.iter().flat_map(|n| n.cpus.iter().copied()).max().map_or(0, |c| c as usize + 1);
        let mut cpu_node = vec![None; max_cpu];
        for (i, n) in topo.nodes.iter().enumerate() {
            for &c in &n.cpus {
                cpu_node[c as usize] = Some(i as NodeId);
            }
        }
        LiveHost {
            kernel_nodes: topo.nodes.iter().map(|n| n.id).collect(),
            cpu_node,
            free_pages: topo.nodes.iter().map(|n| n.mem_free_bytes / page_bytes).collect(),
            capacity_pages: topo.nodes.iter().map(|n| n.mem_total_bytes / page_bytes).collect(),
        }
    }

    fn node_of_kernel(&self, kernel: u32) -> Option<NodeId> {
        self.kernel_nodes.iter().position(|&k| k == kernel).map(|i| i as NodeId)
    }

    fn cpus_of(&self, node: NodeId) -> Vec<u32> {
        (0..self.cpu_node.len() as u32).filter(|&c| self.cpu_node[c as usize] == Some(node)).collect()
    }
}

/// How the engine runs.
#[derive(Clone, Debug, PartialEq)]
pub struct LiveConfig {
    /// Decide and log, but move no page and no thread.
    pub dry_run: bool,
    /// Interval of the policy's `on_tick`, milliseconds (the simulator's `tick_ms`).
    pub tick_ms: u64,
    pub moves: MoveOptions,
    /// Largest address space the engine numbers, in base pages (`docs/live.md`, "Page
    /// numbers"); pages of mappings beyond it are not observed.
    pub max_space_pages: u64,
    /// Pages asked about per `move_pages` location call.
    pub locate_batch_pages: usize,
}

impl Default for LiveConfig {
    fn default() -> Self {
        LiveConfig {
            dry_run: false,
            tick_ms: 1000,
            moves: MoveOptions { rate_limit_bytes_per_s: Some(1_000_000_000), ..Default::default() },
            // 256 GiB of 4 KiB pages [A]: per-page policy state (autonuma keeps 8 bytes a
            // page) then stays under 1 GiB.
            max_space_pages: 1 << 26,
            locate_batch_pages: 16384,
        }
    }
}

/// Why the engine stopped with an error (the target exiting is not one).
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    #[error(transparent)]
    Move(#[from] MoveError),
    #[error(transparent)]
    Observe(#[from] ObserveError),
    #[error(transparent)]
    Read(#[from] LinuxError),
    #[error("sched_setaffinity on thread {tid} of process {pid}: {reason}")]
    Affinity { pid: i32, tid: i32, errno: i32, reason: String },
    #[error("cannot write the decision log: {0}")]
    Log(String),
}

/// The totals of a live run (the summary and `numalab.attach/1`).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct LiveSummary {
    pub rounds: u64,
    pub observations: u64,
    /// Observations the engine could not place: outside the numbered mappings (file
    /// mappings, a mapping beyond the index bound), of a thread it never saw, on a CPU of no
    /// node, or on a page not resident when located.
    pub observations_unmapped: u64,
    pub hint_faults: u64,
    pub access_samples: u64,
    /// Runs of numbered pages handed to the policy's `on_region_heat` (the DAMON sampler's
    /// regions; docs/live.md, "Region heat").
    pub region_heat_runs: u64,
    pub scan_steps: u64,
    pub pages_marked: u64,
    pub decisions: u64,
    pub applied: u64,
    /// Decided in a dry run: logged, not carried out.
    pub dry_run: u64,
    /// Refused decisions by `kind: reason` (`set_preferred_node: unsupported`, …).
    pub refused: BTreeMap<String, u64>,
    /// Base pages moved by `move_pages`, and per outcome of every page asked to move.
    pub pages_moved: u64,
    pub page_outcomes: BTreeMap<PageOutcome, u64>,
    pub move_pages_calls: u64,
    pub locate_calls: u64,
    /// Whole-process moves (`migrate_pages`, a policy's `MoveSpace`) carried out, and the
    /// pages those calls said they could not move.
    pub space_moves: u64,
    pub space_move_pages_left: u64,
    /// `sched_setaffinity` calls that moved a thread, and those restoring one at the end.
    pub thread_moves: u64,
    pub affinities_restored: u64,
    /// Threads whose affinity could not be restored because they had exited.
    pub affinities_gone: u64,
    pub target_gone: bool,
}

/// What a round found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RoundEnd {
    Continue,
    /// The target exited; [`LiveEngine::finish`] next.
    TargetGone,
}

/// The I/O the engine acts through.
pub struct LiveIo<'a> {
    pub target: &'a mut dyn Target,
    pub observer: &'a mut dyn AccessObserver,
    pub mover: &'a mut dyn PageMover,
    pub placer: &'a mut dyn ThreadPlacer,
    /// The decision log (`numalab.decisions/1` JSON lines), if any.
    pub log: Option<&'a mut dyn Write>,
}

#[derive(Clone, Debug)]
struct LiveThread {
    tid: i32,
    cpu: CpuId,
    runtime_ns: u64,
    /// CPU time at the previous round: a thread whose time advanced ran.
    prev_runtime_ns: u64,
    alive: bool,
    ran: bool,
    /// Its affinity allows a single CPU (it cannot be moved).
    pinned: bool,
}

/// Page node unknown (never located, or not present).
const UNKNOWN: u8 = u8::MAX;

/// Everything a policy may look at; the policy itself lives beside it.
struct State {
    host: LiveHost,
    cfg: LiveConfig,
    pid: i32,
    now_ns: u64,
    threads: Vec<LiveThread>,
    by_tid: BTreeMap<i32, ThreadId>,
    space: SpaceIndex,
    /// Last known node of each numbered page (`UNKNOWN` if not known).
    page_node: Vec<u8>,
    /// Pages marked by scan steps (bit per page).
    marked: Vec<u64>,
    cursor: ScanCursor,
    free_pages: Vec<u64>,
    /// Original affinity of every thread the engine moved.
    original_affinity: BTreeMap<i32, Vec<u32>>,
    summary: LiveSummary,
    gone: bool,
}

impl State {
    fn grow(&mut self) {
        let n = self.space.pages() as usize;
        if self.page_node.len() < n {
            self.page_node.resize(n, UNKNOWN);
            self.marked.resize(n.div_ceil(64), 0);
        }
    }

    fn node_of_page(&self, page: PageIdx) -> Option<NodeId> {
        self.page_node.get(page as usize).copied().filter(|&n| n != UNKNOWN).map(NodeId::from)
    }

    fn is_marked(&self, page: PageIdx) -> bool {
        self.marked.get(page as usize / 64).is_some_and(|w| w & (1 << (page % 64)) != 0)
    }

    fn set_marked(&mut self, page: PageIdx, on: bool) {
        if let Some(w) = self.marked.get_mut(page as usize / 64) {
            if on {
                *w |= 1 << (page % 64);
            } else {
                *w &= !(1 << (page % 64));
            }
        }
    }

    fn node_of_cpu_checked(&self, cpu: CpuId) -> NodeId {
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
struct LivePages<'s, 'm> {
    st: &'s mut State,
    mover: &'m mut dyn PageMover,
    error: Option<MoveError>,
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

/// A hook call whose page moves wait for the round's batch.
struct Pending {
    cause: EventRef,
    time_ns: u64,
    decisions: Vec<Decision>,
    outcomes: Vec<Option<Outcome>>,
}

/// An event produced while carrying out decisions, delivered next.
enum FollowUp {
    Scan(ScanStepDone),
    Migrated(ThreadMigrated),
}

/// The engine: one policy, one target.
pub struct LiveEngine {
    policy: Box<dyn DynPolicy>,
    st: State,
    next_tick_ns: u64,
    tick_start_ns: u64,
    access_matrix: Vec<Vec<u64>>,
    write_matrix: Vec<Vec<u64>>,
    /// Page moves decided this round: (pending hook, decision index, page, from, to, move).
    moves: Vec<(usize, usize, PageIdx, NodeId, NodeId, PageMove)>,
    /// Pages with a move booked this round: their node in the books is the booked one.
    booked: std::collections::BTreeSet<PageIdx>,
    pending: Vec<Pending>,
    follow_ups: VecDeque<FollowUp>,
    log_error: Option<String>,
    /// Whole-process moves decided this round: (pending hook, decision index, to, source nodes).
    space_moves: Vec<(usize, usize, NodeId, Option<NodeMask>)>,
    /// Marks changed since the observer was last told which pages to watch.
    arm_dirty: bool,
    /// Where the next set of marked pages handed to the observer starts (its capacity may be
    /// smaller than the marks: the sets take turns over them).
    arm_cursor: PageIdx,
}

impl LiveEngine {
    pub fn new(policy: Box<dyn DynPolicy>, host: LiveHost, cfg: LiveConfig, pid: i32) -> LiveEngine {
        let n = host.kernel_nodes.len();
        let page_bytes = cfg.moves.page_bytes;
        let free_pages = host.free_pages.clone();
        let max = cfg.max_space_pages;
        LiveEngine {
            policy,
            st: State {
                host,
                cfg,
                pid,
                now_ns: 0,
                threads: Vec::new(),
                by_tid: BTreeMap::new(),
                space: SpaceIndex::new(page_bytes, max),
                page_node: Vec::new(),
                marked: Vec::new(),
                cursor: ScanCursor::default(),
                free_pages,
                original_affinity: BTreeMap::new(),
                summary: LiveSummary::default(),
                gone: false,
            },
            next_tick_ns: 0,
            tick_start_ns: 0,
            access_matrix: vec![vec![0; n]; n],
            write_matrix: vec![vec![0; n]; n],
            moves: Vec::new(),
            booked: std::collections::BTreeSet::new(),
            pending: Vec::new(),
            follow_ups: VecDeque::new(),
            log_error: None,
            space_moves: Vec::new(),
            arm_dirty: false,
            arm_cursor: 0,
        }
    }

    pub fn summary(&self) -> &LiveSummary {
        &self.st.summary
    }

    pub fn policy(&self) -> &dyn DynPolicy {
        self.policy.as_ref()
    }

    /// The page number the engine gave an address (tests, the decision log's readers).
    pub fn page_of(&self, addr: u64) -> Option<PageIdx> {
        self.st.space.page_of(addr)
    }

    /// One period at `now_ns` (nanoseconds since the agent started).
    pub fn round(&mut self, io: &mut LiveIo, now_ns: u64) -> Result<RoundEnd, LiveError> {
        self.st.now_ns = now_ns;
        if self.st.summary.rounds == 0 {
            self.next_tick_ns = now_ns + self.st.cfg.tick_ms * 1_000_000;
            self.tick_start_ns = now_ns;
        }
        self.st.summary.rounds += 1;
        if !self.refresh(io)? {
            return Ok(self.gone());
        }
        let mut obs = Vec::new();
        io.observer.poll(&mut obs)?;
        self.observe(io, &obs)?;
        if self.st.gone {
            return self.end_round(io);
        }
        let mut regions = Vec::new();
        io.observer.take_regions(&mut regions);
        self.region_heat(&regions, now_ns);
        // Scheduler ticks of the threads that ran, in thread order.
        for t in 0..self.st.threads.len() {
            let th = &self.st.threads[t];
            if !th.alive || !th.ran {
                continue;
            }
            let tick = TaskTick { space: 0, thread: t as ThreadId, cpu: th.cpu, runtime_ns: th.runtime_ns, time_ns: now_ns };
            self.dispatch(io, EventRef::TaskTick { thread: t as ThreadId }, |p, v, o| p.on_task_tick(&tick, v, o))?;
            if self.st.gone {
                return self.end_round(io);
            }
        }
        if now_ns >= self.next_tick_ns {
            let tick = Tick {
                time_ns: now_ns,
                interval_ns: now_ns - self.tick_start_ns,
                access_matrix: std::mem::take(&mut self.access_matrix),
                write_matrix: std::mem::take(&mut self.write_matrix),
                cache_refills: None,
                ipc: None,
                spaces: Vec::new(),
            };
            let n = self.st.host.kernel_nodes.len();
            self.access_matrix = vec![vec![0; n]; n];
            self.write_matrix = vec![vec![0; n]; n];
            self.tick_start_ns = now_ns;
            self.next_tick_ns = now_ns + self.st.cfg.tick_ms * 1_000_000;
            self.dispatch(io, EventRef::Tick, |p, v, o| p.on_tick(&tick, v, o))?;
        }
        self.end_round(io)
    }

    fn gone(&mut self) -> RoundEnd {
        self.st.gone = true;
        self.st.summary.target_gone = true;
        RoundEnd::TargetGone
    }

    fn end_round(&mut self, io: &mut LiveIo) -> Result<RoundEnd, LiveError> {
        self.flush_moves(io)?;
        if !self.st.gone {
            self.arm_marked(io);
        }
        if let Some(e) = self.log_error.take() {
            return Err(LiveError::Log(e));
        }
        Ok(if self.st.gone { self.gone() } else { RoundEnd::Continue })
    }

    /// An observer that can watch the pages the engine chooses (the hinting-fault library)
    /// is handed the marked pages after marks changed (docs/live.md, "The agent chooses the
    /// protected pages"): up to its capacity, from `arm_cursor` on, wrapping, as addresses in
    /// ascending order. An observation of one of them is then the hinting fault the mark
    /// stands for, as Linux's scanner makes a marked page fault. Pages in ranges the observer
    /// says it can never watch (the library's thread stacks) are left out: a set of them
    /// would be refused whole.
    fn arm_marked(&mut self, io: &mut LiveIo) {
        let cap = io.observer.arm_capacity();
        if !self.arm_dirty || cap == 0 {
            return;
        }
        let mut unwatchable = Vec::new();
        io.observer.unwatchable(&mut unwatchable);
        let unwatchable = merged_ranges(unwatchable);
        let watchable = |a: u64| {
            // The last range starting at or before `a`: merged ranges are disjoint.
            let i = unwatchable.partition_point(|&(lo, _)| lo <= a);
            i == 0 || unwatchable[i - 1].1 <= a
        };
        let pages = self.st.space.pages();
        let mut chosen = Vec::new();
        let mut last = None;
        let mut k = 0;
        while k < pages {
            let p = (self.arm_cursor + k) % pages;
            // Whole words without a mark are skipped (not across the wrap).
            if p.is_multiple_of(64) && p + 64 <= pages && k + 64 <= pages && self.st.marked.get(p as usize / 64) == Some(&0) {
                k += 64;
                continue;
            }
            k += 1;
            if self.st.is_marked(p) {
                if let Some(a) = self.st.space.addr_of(p).filter(|&a| watchable(a)) {
                    chosen.push(a);
                    last = Some(p);
                    if chosen.len() == cap {
                        break;
                    }
                }
            }
        }
        chosen.sort_unstable();
        if io.observer.arm(&chosen) {
            self.arm_dirty = false;
            if chosen.len() == cap {
                self.arm_cursor = last.map_or(0, |p| (p + 1) % pages.max(1));
            }
        }
    }

    /// Threads and mappings; `false` when the target is gone.
    fn refresh(&mut self, io: &mut LiveIo) -> Result<bool, LiveError> {
        let Some(tasks) = io.target.tasks()? else { return Ok(false) };
        let Some(ranges) = io.target.anon_ranges()? else { return Ok(false) };
        for t in &mut self.st.threads {
            t.alive = false;
            t.ran = false;
        }
        for task in tasks {
            let idx = match self.st.by_tid.get(&task.tid) {
                Some(&i) => i as usize,
                None => {
                    // A new thread: pinned when its affinity allows one CPU.
                    let pinned = io.placer.get_affinity(task.tid).is_ok_and(|c| c.len() == 1);
                    self.st.threads.push(LiveThread {
                        tid: task.tid,
                        cpu: task.cpu,
                        runtime_ns: 0,
                        prev_runtime_ns: 0,
                        alive: true,
                        ran: false,
                        pinned,
                    });
                    self.st.by_tid.insert(task.tid, (self.st.threads.len() - 1) as ThreadId);
                    self.st.threads.len() - 1
                }
            };
            let th = &mut self.st.threads[idx];
            th.prev_runtime_ns = th.runtime_ns;
            th.runtime_ns = task.runtime_ns;
            th.cpu = task.cpu;
            th.alive = true;
            th.ran = task.runtime_ns > th.prev_runtime_ns;
        }
        self.st.space.update(&ranges);
        self.st.grow();
        Ok(true)
    }

    /// An accessor-less monitor's regions to the policy's `on_region_heat`: one call per run
    /// of numbered pages in each region (docs/live.md, "Region heat"); parts of a region outside
    /// the numbered mappings (gaps, file mappings) are left out.
    fn region_heat(&mut self, regions: &[RegionAccess], now_ns: u64) {
        for r in regions {
            for (first_page, pages) in self.st.space.runs(r.start, r.end) {
                self.st.summary.region_heat_runs += 1;
                self.policy.on_region_heat(&RegionHeat {
                    space: 0,
                    first_page,
                    pages,
                    nr_accesses: r.nr_accesses,
                    max_accesses: r.max_accesses,
                    age: r.age,
                    time_ns: now_ns,
                });
            }
        }
    }

    /// Observations to samples and hinting faults.
    fn observe(&mut self, io: &mut LiveIo, obs: &[Observation]) -> Result<(), LiveError> {
        self.st.summary.observations += obs.len() as u64;
        // Pages of the round whose node the observer did not give: one batched location.
        let mut ask: Vec<u64> = obs
            .iter()
            .filter(|o| o.page_node.is_none())
            .filter_map(|o| self.st.space.page_of(o.addr).and_then(|p| self.st.space.addr_of(p)))
            .collect();
        ask.sort_unstable();
        ask.dedup();
        let mut located = BTreeMap::new();
        if !ask.is_empty() {
            self.st.summary.locate_calls += 1;
            match locate(io.mover, self.st.pid, &ask, self.st.cfg.locate_batch_pages)? {
                Some(status) => {
                    for (a, s) in ask.iter().zip(status) {
                        if let Ok(k) = u32::try_from(s) {
                            located.insert(*a, k);
                        }
                    }
                }
                None => {
                    self.st.gone = true;
                    return Ok(());
                }
            }
        }
        let sampling = self.policy.sample_period_ns().is_some();
        for o in obs {
            let page = self.st.space.page_of(o.addr);
            let thread = self.st.by_tid.get(&o.tid).copied();
            let cpu_node = self.st.host.node_of_kernel(o.cpu_node);
            let base = o.addr & !(self.st.cfg.moves.page_bytes - 1);
            let page_kernel = o.page_node.or_else(|| located.get(&base).copied());
            let page_node = page_kernel.and_then(|k| self.st.host.node_of_kernel(k));
            let (Some(page), Some(thread), Some(cpu_node), Some(page_node)) = (page, thread, cpu_node, page_node) else {
                self.st.summary.observations_unmapped += 1;
                continue;
            };
            // The event tells where the page was when it was touched; a page whose move is
            // booked for the end of the round keeps its booking in the books.
            if !self.booked.contains(&page) {
                self.st.page_node[page as usize] = page_node as u8;
            }
            self.st.threads[thread as usize].cpu = o.cpu;
            self.access_matrix[cpu_node as usize][page_node as usize] += 1;
            self.write_matrix[cpu_node as usize][page_node as usize] += u64::from(o.write);
            if sampling {
                self.st.summary.access_samples += 1;
                self.policy.on_sample(&AccessSample {
                    space: 0,
                    thread,
                    cpu: o.cpu,
                    cpu_node,
                    page,
                    served_node: page_node,
                    page_node,
                    write: o.write,
                    time_ns: o.time_ns,
                });
            }
            if self.st.is_marked(page) {
                self.st.set_marked(page, false);
                self.st.summary.hint_faults += 1;
                let fault = HintFault {
                    space: 0,
                    thread,
                    cpu: o.cpu,
                    cpu_node,
                    page,
                    page_node,
                    write: o.write,
                    pte_writable: true,
                    shared_mapping: false,
                    time_ns: o.time_ns,
                };
                self.dispatch(io, EventRef::from(&fault), |p, v, o| p.on_hint_fault(&fault, v, o))?;
                if self.st.gone {
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// Call one hook, carry out its decisions, deliver their follow-up events.
    fn dispatch(
        &mut self,
        io: &mut LiveIo,
        cause: EventRef,
        hook: impl FnOnce(&mut dyn DynPolicy, &dyn SystemView, &mut Vec<Decision>),
    ) -> Result<(), LiveError> {
        let mut out = Vec::new();
        hook(self.policy.as_mut(), &self.st, &mut out);
        self.carry_out(io, cause, out)?;
        while let Some(f) = self.follow_ups.pop_front() {
            let mut out = Vec::new();
            let cause = match f {
                FollowUp::Scan(step) => {
                    self.policy.on_scan_step(&step, &self.st, &mut out);
                    EventRef::ScanStep { space: step.space, thread: step.thread, sequence: step.sequence }
                }
                FollowUp::Migrated(m) => {
                    self.policy.on_thread_migrated(&m, &self.st, &mut out);
                    EventRef::ThreadMigrated { thread: m.thread, from_node: m.from_node, to_node: m.to_node }
                }
            };
            self.carry_out(io, cause, out)?;
        }
        Ok(())
    }

    fn carry_out(&mut self, io: &mut LiveIo, cause: EventRef, decisions: Vec<Decision>) -> Result<(), LiveError> {
        if decisions.is_empty() {
            return Ok(());
        }
        let idx = self.pending.len();
        let mut outcomes = Vec::with_capacity(decisions.len());
        let mut waits = false;
        for (k, d) in decisions.iter().enumerate() {
            self.st.summary.decisions += 1;
            let o = self.apply(io, d, idx, k)?;
            waits |= o.is_none();
            outcomes.push(o);
        }
        let p = Pending { cause, time_ns: self.st.now_ns, decisions, outcomes };
        if waits {
            self.pending.push(p);
        } else {
            self.conclude(io, p);
        }
        Ok(())
    }

    /// Log a hook's decisions with their outcomes and tell the policy.
    fn conclude(&mut self, io: &mut LiveIo, p: Pending) {
        let outcomes: Vec<Outcome> = p.outcomes.iter().map(|o| o.unwrap_or(Outcome::Refused(Refusal::Failed))).collect();
        for (d, o) in p.decisions.iter().zip(&outcomes) {
            let dry = self.st.cfg.dry_run && o.took_effect() && acts(d);
            if dry {
                self.st.summary.dry_run += 1;
            } else if let Outcome::Refused(r) = o {
                *self.st.summary.refused.entry(format!("{}: {}", kind_name(d), r.as_str())).or_insert(0) += 1;
            } else {
                self.st.summary.applied += 1;
            }
            if let Some(log) = io.log.as_mut() {
                if self.log_error.is_none() {
                    let mut rec = DecisionRecord::new(0, p.time_ns, &p.cause, d, o);
                    if dry {
                        rec.outcome = "dry_run";
                    }
                    let res = serde_json::to_writer(&mut **log, &rec).map_err(std::io::Error::from).and_then(|_| log.write_all(b"\n"));
                    if let Err(e) = res {
                        self.log_error = Some(e.to_string());
                    }
                }
            }
        }
        self.policy.on_outcomes(&p.cause, &p.decisions, &outcomes);
    }

    /// Carry out one decision; `None`: a page move waiting for the round's batch.
    fn apply(&mut self, io: &mut LiveIo, d: &Decision, pending: usize, k: usize) -> Result<Option<Outcome>, LiveError> {
        let refused = |r| Ok(Some(Outcome::Refused(r)));
        let nodes = self.st.host.kernel_nodes.len();
        match *d {
            Decision::MigratePage { space, page, to } => {
                if space != 0 || page >= self.st.space.pages() || to as usize >= nodes {
                    return refused(Refusal::NoSuchTarget);
                }
                let Some(from) = self.st.node_of_page(page) else { return refused(Refusal::NotPlaced) };
                if from == to {
                    return refused(Refusal::AlreadyThere);
                }
                if self.st.free_pages(to) == 0 {
                    return refused(Refusal::NodeFull);
                }
                if self.st.cfg.dry_run {
                    return Ok(Some(Outcome::Applied));
                }
                let addr = self.st.space.addr_of(page).expect("numbered page");
                let kernel = self.st.host.kernel_nodes[to as usize] as i32;
                self.moves.push((pending, k, page, from, to, PageMove::base(addr, kernel)));
                self.booked.insert(page);
                // Booked now, corrected by the batch's answer.
                self.st.page_node[page as usize] = to as u8;
                self.st.free_pages[to as usize] -= 1;
                self.st.free_pages[from as usize] += 1;
                Ok(None)
            }
            Decision::Unmap { space, page } => {
                if space != 0 || page >= self.st.space.pages() {
                    return refused(Refusal::NoSuchTarget);
                }
                if self.st.node_of_page(page).is_none() {
                    return refused(Refusal::NotPlaced);
                }
                if self.st.is_marked(page) {
                    return refused(Refusal::AlreadyThere);
                }
                self.st.set_marked(page, true);
                self.st.summary.pages_marked += 1;
                self.arm_dirty = true;
                Ok(Some(Outcome::Applied))
            }
            Decision::ScanStep { space, thread, pages } => {
                if space != 0 || pages == 0 || self.st.space.pages() == 0 || thread as usize >= self.st.threads.len() {
                    return refused(Refusal::NoSuchTarget);
                }
                let range_pages = ((2u64 << 20) / self.st.cfg.moves.page_bytes).max(1);
                let alive = self.st.threads.iter().filter(|t| t.alive).count();
                let skip_node = (alive == 1).then(|| self.st.node_of_thread(thread));
                let space_pages = self.st.space.pages();
                let mut cursor = self.st.cursor;
                let policy = self.policy.as_mut();
                let mut pages_of = LivePages { st: &mut self.st, mover: io.mover, error: None };
                let walk = scan_walk(&mut cursor, 0, space_pages, range_pages, pages, skip_node, &mut pages_of, &mut |s, p, n| {
                    policy.should_unmap(s, p, n)
                });
                if let Some(e) = pages_of.error {
                    return Err(e.into());
                }
                self.st.cursor = cursor;
                if self.st.gone {
                    return refused(Refusal::SpaceExited);
                }
                self.st.summary.scan_steps += 1;
                self.st.summary.pages_marked += walk.updates;
                self.arm_dirty |= walk.updates > 0;
                // The agent did the walk: the target thread was charged no time.
                self.follow_ups.push_back(FollowUp::Scan(ScanStepDone {
                    space,
                    thread,
                    pte_updates: walk.updates,
                    cpu_ns: 0,
                    sequence: cursor.sequence,
                    pass_completed: walk.pass_completed,
                    time_ns: self.st.now_ns,
                }));
                Ok(Some(Outcome::Applied))
            }
            Decision::MoveThread { thread, to, cpu, cause } => {
                let Some(th) = self.st.threads.get(thread as usize).filter(|t| t.alive) else {
                    return refused(Refusal::NoSuchTarget);
                };
                if to as usize >= nodes || cpu.is_some_and(|c| self.st.host.cpu_node.get(c as usize).copied().flatten() != Some(to)) {
                    return refused(Refusal::NoSuchTarget);
                }
                if th.pinned {
                    return refused(Refusal::Pinned);
                }
                let from = self.st.node_of_thread(thread);
                let cpus = self.st.host.cpus_of(to);
                if cpus.is_empty() {
                    return refused(Refusal::NoSuchTarget);
                }
                if let Some(r) = self.set_node(io, thread, &cpus)? {
                    return refused(r);
                }
                self.st.threads[thread as usize].cpu = cpu.unwrap_or(cpus[0]);
                if from != to {
                    self.follow_ups.push_back(FollowUp::Migrated(ThreadMigrated {
                        space: 0,
                        thread,
                        from_node: from,
                        to_node: to,
                        cause,
                        time_ns: self.st.now_ns,
                    }));
                }
                Ok(Some(Outcome::Applied))
            }
            Decision::SwapThreads { a, b, cause } => {
                let ok = |t: ThreadId| self.st.threads.get(t as usize).is_some_and(|x| x.alive);
                if !ok(a) || !ok(b) || a == b {
                    return refused(Refusal::NoSuchTarget);
                }
                if self.st.threads[a as usize].pinned || self.st.threads[b as usize].pinned {
                    return refused(Refusal::Pinned);
                }
                let (na, nb) = (self.st.node_of_thread(a), self.st.node_of_thread(b));
                let (ca, cb) = (self.st.threads[a as usize].cpu, self.st.threads[b as usize].cpu);
                let (cpus_a, cpus_b) = (self.st.host.cpus_of(nb), self.st.host.cpus_of(na));
                if let Some(r) = self.set_node(io, a, &cpus_a)? {
                    return refused(r);
                }
                if let Some(r) = self.set_node(io, b, &cpus_b)? {
                    return refused(r);
                }
                self.st.threads[a as usize].cpu = cb;
                self.st.threads[b as usize].cpu = ca;
                if na != nb {
                    let now = self.st.now_ns;
                    for (t, from, to) in [(a, na, nb), (b, nb, na)] {
                        self.follow_ups.push_back(FollowUp::Migrated(ThreadMigrated {
                            space: 0,
                            thread: t,
                            from_node: from,
                            to_node: to,
                            cause,
                            time_ns: now,
                        }));
                    }
                }
                Ok(Some(Outcome::Applied))
            }
            Decision::MoveSpace { space, to, from } => {
                if space != 0 || to as usize >= nodes {
                    return refused(Refusal::NoSuchTarget);
                }
                if self.st.cfg.dry_run {
                    return Ok(Some(Outcome::Applied));
                }
                self.space_moves.push((pending, k, to, from));
                Ok(None)
            }
            // Linux keeps a task's preferred node (`numa_preferred_nid`) in the kernel, with no
            // system call to set it; replication is not built.
            Decision::SetPreferredNode { .. }
            | Decision::Replicate { .. }
            | Decision::CollapseReplicas { .. }
            | Decision::DropMappings { .. } => refused(Refusal::Unsupported),
        }
    }

    /// A whole-process move to policy node `to` (docs/live.md, "Whole-process moves"): one
    /// `migrate_pages` call from the nodes of `from` (every other node when `None`), at the
    /// end of the round, after its page moves. The pages are located first (`move_pages`
    /// status, in batches); the kernel then says how many pages it could not move, not which:
    /// the pages that were on the source nodes are then unknown until located again, and the
    /// outcome is `Partial` with the count of pages that were there minus those left.
    fn move_space(&mut self, io: &mut LiveIo, to: NodeId, from: Option<NodeMask>) -> Result<Outcome, LiveError> {
        if self.st.gone {
            return Ok(Outcome::Refused(Refusal::SpaceExited));
        }
        // Where every numbered page is now, so that the outcome counts what moved.
        let total = self.st.space.pages();
        let chunk = self.st.cfg.locate_batch_pages.max(1) as u64;
        let mut start = 0;
        while start < total {
            let end = (start + chunk).min(total);
            let mut pages_of = LivePages { st: &mut self.st, mover: io.mover, error: None };
            pages_of.visit_range(start, end);
            if let Some(e) = pages_of.error {
                return Err(e.into());
            }
            if self.st.gone {
                return Ok(Outcome::Refused(Refusal::SpaceExited));
            }
            start = end;
        }
        let moves = |node: usize| space_move_takes(to, from, node as NodeId);
        let elsewhere: Vec<usize> =
            (0..self.st.page_node.len()).filter(|&p| self.st.page_node[p] != UNKNOWN && moves(self.st.page_node[p] as usize)).collect();
        let kernel = &self.st.host.kernel_nodes;
        let old_nodes: Vec<u32> = kernel.iter().enumerate().filter(|&(i, _)| moves(i)).map(|(_, &k)| k).collect();
        if old_nodes.is_empty() {
            // Nothing to move from (`from` holds only `to`): as the simulator answers it.
            return Ok(Outcome::Refused(Refusal::AlreadyThere));
        }
        match io.mover.migrate_pages(self.st.pid, &old_nodes, &[kernel[to as usize]]) {
            Ok(left) => {
                self.st.summary.space_moves += 1;
                self.st.summary.space_move_pages_left += left;
                let moved = (elsewhere.len() as u64).saturating_sub(left);
                for &p in &elsewhere {
                    let old = self.st.page_node[p] as usize;
                    if left == 0 {
                        self.st.free_pages[old] += 1;
                        self.st.free_pages[to as usize] = self.st.free_pages[to as usize].saturating_sub(1);
                        self.st.page_node[p] = to as u8;
                    } else {
                        self.st.page_node[p] = UNKNOWN;
                    }
                }
                Ok(if left == 0 { Outcome::Applied } else { Outcome::Partial { moved_pages: moved, left_pages: left } })
            }
            Err(libc::ESRCH) => {
                self.st.gone = true;
                Ok(Outcome::Refused(Refusal::SpaceExited))
            }
            Err(libc::ENOSYS) => Ok(Outcome::Refused(Refusal::Unsupported)),
            Err(libc::EPERM) => Err(MoveError::Permission { pid: self.st.pid }.into()),
            Err(e) => Err(MoveError::Call { pid: self.st.pid, errno: e, reason: crate::act::syscall::errno_text(e) }.into()),
        }
    }

    /// Confine a thread to `cpus` (its first move saves its affinity for the restore);
    /// `Some(refusal)` if it cannot be done.
    fn set_node(&mut self, io: &mut LiveIo, thread: ThreadId, cpus: &[u32]) -> Result<Option<Refusal>, LiveError> {
        if self.st.cfg.dry_run {
            return Ok(None);
        }
        let tid = self.st.threads[thread as usize].tid;
        if let std::collections::btree_map::Entry::Vacant(slot) = self.st.original_affinity.entry(tid) {
            match io.placer.get_affinity(tid) {
                Ok(c) => {
                    slot.insert(c);
                }
                Err(libc::ESRCH) => {
                    self.st.threads[thread as usize].alive = false;
                    return Ok(Some(Refusal::NoSuchTarget));
                }
                Err(e) => return Err(affinity_error(self.st.pid, tid, e)),
            }
        }
        match io.placer.set_affinity(tid, cpus) {
            Ok(()) => {
                self.st.summary.thread_moves += 1;
                Ok(None)
            }
            Err(libc::ESRCH) => {
                self.st.threads[thread as usize].alive = false;
                Ok(Some(Refusal::NoSuchTarget))
            }
            // A CPU outside the thread's cpuset: the kernel refuses (EINVAL).
            Err(libc::EINVAL) => Ok(Some(Refusal::Pinned)),
            Err(e) => Err(affinity_error(self.st.pid, tid, e)),
        }
    }

    /// Carry out the round's page moves in paced batches, then log and report the hooks that
    /// waited for them, in order.
    fn flush_moves(&mut self, io: &mut LiveIo) -> Result<(), LiveError> {
        let moves = std::mem::take(&mut self.moves);
        self.booked.clear();
        if !moves.is_empty() {
            let list: Vec<PageMove> = moves.iter().map(|m| m.5).collect();
            // Outcomes by address, first decided first (a page moved twice in a round is
            // asked twice, in order).
            let mut heard: BTreeMap<u64, VecDeque<PageOutcome>> = BTreeMap::new();
            let stats =
                move_batched(io.mover, self.st.pid, &list, &self.st.cfg.moves, &mut |m, o| heard.entry(m.addr).or_default().push_back(o))?;
            self.st.summary.move_pages_calls += stats.calls;
            for (pending, k, page, from, to, m) in moves {
                let o = heard.get_mut(&m.addr).and_then(VecDeque::pop_front).unwrap_or(PageOutcome::Failed);
                *self.st.summary.page_outcomes.entry(o).or_insert(0) += 1;
                let outcome = match o {
                    PageOutcome::Moved => {
                        self.st.summary.pages_moved += 1;
                        Outcome::Applied
                    }
                    PageOutcome::Busy => Outcome::Refused(Refusal::Busy),
                    PageOutcome::Shared => Outcome::Refused(Refusal::Shared),
                    PageOutcome::NotPresent => Outcome::Refused(Refusal::NotPlaced),
                    PageOutcome::NoMemory => Outcome::Refused(Refusal::NodeFull),
                    PageOutcome::ProcessGone => Outcome::Refused(Refusal::SpaceExited),
                    PageOutcome::Failed => Outcome::Refused(Refusal::Failed),
                };
                if o != PageOutcome::Moved {
                    // The booking made when the move was decided is undone.
                    self.st.free_pages[to as usize] += 1;
                    self.st.free_pages[from as usize] = self.st.free_pages[from as usize].saturating_sub(1);
                    self.st.page_node[page as usize] = if o == PageOutcome::NotPresent { UNKNOWN } else { from as u8 };
                }
                self.pending[pending].outcomes[k] = Some(outcome);
            }
            if stats.process_gone {
                self.st.gone = true;
            }
        }
        for (pending, k, to, from) in std::mem::take(&mut self.space_moves) {
            self.pending[pending].outcomes[k] = Some(self.move_space(io, to, from)?);
        }
        let pending = std::mem::take(&mut self.pending);
        for p in pending {
            self.conclude(io, p);
        }
        Ok(())
    }

    /// End the run: restore the affinity of every thread the engine moved (threads that
    /// exited meanwhile are counted), and return the totals.
    pub fn finish(mut self, io: &mut LiveIo) -> Result<LiveSummary, LiveError> {
        self.flush_moves(io)?;
        for (tid, cpus) in std::mem::take(&mut self.st.original_affinity) {
            match io.placer.set_affinity(tid, &cpus) {
                Ok(()) => self.st.summary.affinities_restored += 1,
                Err(libc::ESRCH) => self.st.summary.affinities_gone += 1,
                Err(e) => return Err(affinity_error(self.st.pid, tid, e)),
            }
        }
        if let Some(log) = io.log.as_mut() {
            if let Err(e) = log.flush() {
                self.log_error.get_or_insert(e.to_string());
            }
        }
        if let Some(e) = self.log_error.take() {
            return Err(LiveError::Log(e));
        }
        Ok(self.st.summary)
    }
}

fn affinity_error(pid: i32, tid: i32, errno: i32) -> LiveError {
    LiveError::Affinity { pid, tid, errno, reason: crate::act::syscall::errno_text(errno) }
}

/// The decision acts on the program (it is what a dry run leaves undone).
fn acts(d: &Decision) -> bool {
    matches!(d, Decision::MigratePage { .. } | Decision::MoveThread { .. } | Decision::SwapThreads { .. } | Decision::MoveSpace { .. })
}

fn kind_name(d: &Decision) -> &'static str {
    match d {
        Decision::MigratePage { .. } => "migrate_page",
        Decision::Replicate { .. } => "replicate",
        Decision::CollapseReplicas { .. } => "collapse_replicas",
        Decision::Unmap { .. } => "unmap",
        Decision::ScanStep { .. } => "scan_step",
        Decision::MoveThread { .. } => "move_thread",
        Decision::SwapThreads { .. } => "swap_threads",
        Decision::SetPreferredNode { .. } => "set_preferred_node",
        Decision::MoveSpace { .. } => "move_space",
        Decision::DropMappings { .. } => "drop_mappings",
    }
}

/// Ranges `[lo, hi)` sorted by start with overlapping and touching ones joined.
fn merged_ranges(mut ranges: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    ranges.retain(|&(lo, hi)| lo < hi);
    ranges.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(ranges.len());
    for (lo, hi) in ranges {
        match out.last_mut() {
            Some(last) if lo <= last.1 => last.1 = last.1.max(hi),
            _ => out.push((lo, hi)),
        }
    }
    out
}
