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
//! What the engine knows of the target, as the policy reads it, is in `engine/state.rs`;
//! carrying out decisions (page, whole-process and thread moves) in `engine/apply.rs`.
//!
//! [`Policy::on_hint_fault`]: numalab_policy::Policy::on_hint_fault
//! [`Policy::on_sample`]: numalab_policy::Policy::on_sample
//! [`Policy::on_task_tick`]: numalab_policy::Policy::on_task_tick
//! [`Policy::on_tick`]: numalab_policy::Policy::on_tick

use super::observe::{AccessObserver, Observation, ObserveError, RegionAccess};
use super::placer::ThreadPlacer;
use super::space::SpaceIndex;
use super::target::Target;
use crate::act::pages::{locate, MoveError, MoveOptions, PageMove, PageMover, PageOutcome};
use crate::error::LinuxError;
use numalab_core::{NodeId, PageIdx, ThreadId};
use numalab_policy::scan::ScanCursor;
use numalab_policy::{
    AccessSample, Decision, DecisionRecord, DynPolicy, EventRef, HintFault, NodeMask, Outcome, Refusal, RegionHeat, ScanStepDone,
    SystemView, TaskTick, ThreadMigrated, Tick,
};
use serde::Serialize;
use state::{LiveThread, State};
use std::collections::{BTreeMap, VecDeque};
use std::io::Write;

mod apply;
mod state;

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
