//! The epoch loop. Every `epoch_us` of simulated time: the scheduler places threads and
//! background noise, the contention model turns last epoch's traffic into latencies, and
//! every running thread issues accesses until its clock passes the epoch's end or it blocks
//! at a barrier. Threads run one after another in id order; the result depends only on the
//! seed.
//!
//! [`World`] is the simulated machine and program; the policy lives in the [`Driver`], which
//! calls it with a view of the world and carries out its decisions (docs/simulator.md).

use crate::config::{EngineKind, SimConfig};
use crate::contention::{Contention, Demand};
use crate::driver::{Driver, FollowUp};
use crate::fast::{EscapeMemo, FastEntry, FastState, FastStep, SegShares};
use crate::hot::{kind_index, Hot, SlowRef, Tally};
use crate::mappings::{Mappings, MAX_MAPPED_NODES};
use crate::memory::{Memory, ARMED, FREED, MAX_NODES, NODE_MASK, REPLICATED, SLOW, UNPLACED};
use crate::metrics::{node_imbalance, BusySummary, Counters, RunMetrics, TimelinePoint};
use crate::pingpong::PingPong;
use crate::sched::{Move, Scheduler, TaskState};
use crate::windows::SpaceCounters;
use crate::SimError;
use numalab_core::rng::{stream, StreamRng};
use numalab_core::{Machine, NodeId, ThreadId};
use numalab_policy::{AccessSample, AddressSpaceInfo, EventRef, HintFault, PlaceRequest, SpaceId, TaskTick, ThreadMigrated, Tick};
use numalab_workload::program::{HomeRule, ThreadWork};
use numalab_workload::stream::{AccessKind, Compute, Swrr};
use numalab_workload::{EscapeLists, Program};
use std::collections::VecDeque;
use timeorder::{OrderQueue, TimeOrder};

mod timeorder;

/// Longest round-robin cycle charged in bulk: a cycle goes in one step only if every entry's
/// run on its page holds its picks, and a run is at most one page (64 lines of 64 bytes in a
/// 4 KiB page), so longer cycles would almost never qualify.
const MAX_BULK_PERIOD: u64 = 64;

/// The share of a step's predicted remaining time a fast-forward window may cover: the
/// prediction takes this epoch's latencies and CPU share, which may still change [ours].
const FAST_FORWARD_MARGIN: f64 = 0.75;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Run,
    /// Arrived at the barrier after this step.
    Barrier(usize),
    /// Waiting for the p2p predecessor to finish a stage.
    P2pWait,
    Done,
}

struct Thread {
    rng: StreamRng,
    step: usize,
    work: ThreadWork,
    swrr: Swrr,
    /// Every main entry walks and the round-robin cycle is short: charge whole cycles
    /// (`Hot::issue_cycles`).
    cycles: bool,
    /// Main-entry references left in this step, and all of them.
    left: u64,
    main_refs: u64,
    /// The fast engine charges this step's main entries in proportional blocks
    /// (`Hot::issue_fast`): how it charges each entry, and its rounding state.
    fast_ok: bool,
    fast_kinds: Vec<FastEntry>,
    /// The mixtures this thread's last steps escaped to (`FastEntry::of`).
    escape_memo: EscapeMemo,
    /// The escape lists of this thread's last steps (`Program::work_with`).
    escape_lists: EscapeLists,
    /// The fast engine charged some of this step: `swrr` no longer matches what is left.
    swrr_stale: bool,
    fast: FastState,
    epilogue_idx: usize,
    clock: f64,
    busy_ns: f64,
    /// CPU time spent busy-waiting at barriers (counts as run time, like Linux's).
    spin_ns: f64,
    state: State,
    // p2p: references issued in this step, index of the next stage to start, its boundary.
    issued: u64,
    total: u64,
    stage: u32,
    stage_started: bool,
    /// Per kind (3) x node: ns per access this epoch.
    cost: Vec<f64>,
    /// What `cost` was built from: the CPU share, the compute ns per access and the solve
    /// (`World::solves`). The same three give the same table, so it is not built again.
    cost_from: (f64, f64, u64),
    gap_exp_ns: f64,
    /// Counters of the current epoch.
    acc: Vec<u64>,
    wr: Vec<u64>,
    /// Access mix of the last epoch with traffic, for the contention demand.
    frac: Vec<f64>,
    write_frac: f64,
    /// CPU time until this thread's next access sample (docs/simulator.md, "Access sampling").
    sample_left_ns: f64,
    /// A reference the exact path takes once no other thread is behind this one's clock
    /// (windows run in the order of time, `timeorder`; never a sample: the order does not
    /// apply while the policy samples accesses).
    waiting: Option<SlowRef>,
}

/// An address space: a process of the program (a mix has one per instance). Its pages are the
/// contiguous global range `first_page..first_page + pages`; policies see them as `0..pages`.
#[derive(Clone, Debug)]
pub(crate) struct Space {
    pub first_page: u64,
    pub pages: u64,
    pub threads: std::ops::Range<ThreadId>,
    /// Every thread of the space finished and its pages were freed (docs/simulator.md,
    /// "Program exit"): decisions naming it are refused with `Refusal::SpaceExited`.
    pub exited: bool,
}

/// Where a space's hinting scanner resumes, and how many passes it completed (the walk is
/// shared with the live agent: `numalab_policy::scan`).
pub(crate) use numalab_policy::scan::ScanCursor;

/// The simulated machine and program: everything a policy may look at, nothing of the policy.
pub(crate) struct World<'a> {
    pub(crate) m: &'a Machine,
    pub(crate) p: &'a Program,
    cfg: &'a SimConfig,
    pub(crate) mem: Memory,
    pub(crate) sched: Scheduler,
    pub(crate) spaces: Vec<Space>,
    cont: Contention,
    threads: Vec<Thread>,
    pub(crate) n: usize,
    node_of_cpu: Vec<NodeId>,
    memory_nodes: Vec<NodeId>,
    ns_per_flop: f64,
    mlp: [f64; 3],
    svc_mult: [f64; 3],
    pub(crate) now: f64,
    // p2p stage completion times: [thread][step * max_chunks + stage], NaN = not yet.
    p2p_done: Vec<Vec<f64>>,
    max_chunks: usize,
    // metrics
    access_matrix: Vec<u64>,
    write_matrix: Vec<u64>,
    link_bytes_interval: Vec<f64>,
    interval_start: f64,
    interval_maxima: Vec<(f64, f64)>,
    /// The timeline so far, and what the counters and the access matrix held when the current
    /// interval started.
    timeline: Vec<TimelinePoint>,
    interval_counters: Counters,
    interval_cross_node_moves: u64,
    interval_matrix: Vec<u64>,
    link_capacity: Vec<f64>,
    pub(crate) counters: Counters,
    pingpong: PingPong,
    // scanner, ticks and follow-up events
    pub(crate) scan: Vec<ScanCursor>,
    pub(crate) follow_ups: VecDeque<FollowUp>,
    tick_next_ns: f64,
    task_tick_next_ns: f64,
    tick_matrix: Vec<u64>,
    tick_write_matrix: Vec<u64>,
    tick_start: f64,
    /// The policy's access-sampling period this epoch (ns of a thread's CPU time), if any.
    sample_period_ns: Option<f64>,
    pub(crate) states: Vec<TaskState>,
    share: Vec<f64>,
    moves: Vec<Move>,
    demands: Vec<Demand>,
    /// The demands of the last contention solve (the fast engine reuses it while they hold).
    solved_for: Vec<Demand>,
    /// The CPU shares the cost tables were built with.
    solved_share: Vec<f64>,
    /// Contention solves so far (names the latencies the cost tables use).
    solves: u64,
    /// Steps begun by any thread so far, and that count when the loop's last step began: a
    /// window follows only a step of the loop in which no thread began a step, so the demand
    /// it was solved for is the traffic of the steps the threads are in (docs/simulator.md,
    /// "Fast-forward").
    steps_begun: u64,
    steps_begun_at_last: u64,
    /// Steps of the epoch loop so far (`RunMetrics::loop_steps`).
    loop_steps: u64,
    /// Node shares of the segments random entries draw from (fast engine).
    shares: SegShares,
    /// Per-space counters of the current tick interval (`Tick::spaces`).
    space_counters: SpaceCounters,
    /// Per-node mappings and scanner daemons, for a policy that asked for them
    /// (docs/simulator.md, "Page mappings and scanner daemons").
    pub(crate) maps: Option<Mappings>,
    /// The window being run in the order of time, if one is (`timeorder`).
    order: TimeOrder,
    order_queue: OrderQueue,
}

/// A run: the world and the driver of its policy.
pub struct Engine<'a, 'l> {
    w: World<'a>,
    drv: Driver<'l>,
}

/// What the scheduler is told about a thread at `at`: a waiter spins for `spin_ns` after it
/// arrived (its clock stopped at the arrival), then sleeps (docs/simulator.md, "Barriers").
fn task_state(th: &Thread, at: f64, spin_ns: f64) -> TaskState {
    match th.state {
        State::Run => TaskState::Runnable,
        State::Done => TaskState::Done,
        State::Barrier(_) | State::P2pWait if at < th.clock + spin_ns => TaskState::Spinning,
        State::Barrier(_) | State::P2pWait => TaskState::Sleeping,
    }
}

/// The address spaces of a program: one per process.
fn spaces_of(p: &Program) -> Vec<Space> {
    if p.members.is_empty() {
        return vec![Space { first_page: 0, pages: p.total_pages, threads: 0..p.threads, exited: false }];
    }
    p.members
        .iter()
        .map(|m| Space {
            first_page: m.first_page,
            pages: m.program.total_pages,
            threads: m.first_thread..m.first_thread + m.program.threads,
            exited: false,
        })
        .collect()
}

impl<'a, 'l> Engine<'a, 'l> {
    pub fn new(m: &'a Machine, p: &'a Program, cfg: &'a SimConfig, drv: Driver<'l>, seed: u64) -> Result<Engine<'a, 'l>, SimError> {
        let n = m.node_count();
        if n > MAX_NODES {
            return Err(SimError::Machine(format!("{n} nodes: the simulator supports at most {MAX_NODES}")));
        }
        let cpus = m.cpu_table();
        let capacity: Vec<u64> = m.nodes.iter().map(|node| node.mem_bytes / p.page_bytes).collect();
        let mut mem = Memory::new(p.total_pages, capacity);
        // Regions with an explicit home are placed before the run, whoever touches them.
        let memory_nodes = m.memory_nodes();
        for r in &p.regions {
            let Some(rule) = r.home else { continue };
            for i in 0..r.pages {
                let want = match rule {
                    HomeRule::Node(node) => node,
                    HomeRule::Interleave => memory_nodes[(i % memory_nodes.len() as u64) as usize],
                    HomeRule::Owner => {
                        let owner = r.thread_base + r.owner_of.owner(i, r.pages).unwrap_or(0);
                        cpus.node_of_cpu[p.initial_cpus[owner as usize] as usize]
                    }
                };
                let node = if mem.free[want as usize] > 0 {
                    want
                } else {
                    memory_nodes
                        .iter()
                        .copied()
                        .find(|&n| mem.free[n as usize] > 0)
                        .ok_or(SimError::OutOfMemory { page: r.first_page + i })?
                };
                mem.place(r.first_page + i, node);
            }
        }
        let spaces = spaces_of(p);
        let mut drv = drv;
        // Eager layouts (round-1g) cover every page of a space not placed by a home rule.
        for (s, sp) in spaces.iter().enumerate() {
            let info = AddressSpaceInfo { space: s as SpaceId, pages: sp.pages, threads: sp.threads.len() as u32 };
            let Some(extents) = drv.policy_mut().layout(&info, &mem).map_err(|e| SimError::Policy(e.to_string()))? else { continue };
            for e in extents {
                if e.first_page.checked_add(e.pages).is_none_or(|end| end > sp.pages) || e.node as usize >= n {
                    return Err(SimError::Policy(format!(
                        "policy '{}' laid out pages {}..+{} on node {} outside space {s} ({} pages)",
                        drv.policy_name(),
                        e.first_page,
                        e.pages,
                        e.node,
                        sp.pages
                    )));
                }
                for pg in sp.first_page + e.first_page..sp.first_page + e.first_page + e.pages {
                    if mem.home()[pg as usize] == UNPLACED {
                        if mem.free[e.node as usize] == 0 {
                            return Err(SimError::OutOfMemory { page: pg });
                        }
                        mem.place(pg, e.node);
                    }
                }
            }
        }
        let maps = match drv.policy_mut().page_scanner_period_ns() {
            None => None,
            Some(0) => {
                return Err(SimError::Policy(format!("policy '{}' asked for page scanners with a period of 0 ns", drv.policy_name())))
            }
            Some(_) if n > MAX_MAPPED_NODES => {
                return Err(SimError::Policy(format!(
                "policy '{}' needs per-node mappings, which the simulator keeps for at most {MAX_MAPPED_NODES} nodes; this machine has {n}",
                drv.policy_name()
            )))
            }
            Some(period) => Some(Mappings::new(p.total_pages, n, period as f64)),
        };
        let ic = m.interconnect();
        let cont = Contention::new(m, &ic, p.access_bytes, p.threads as usize);
        let mut sched = Scheduler::new(
            cfg.sched.clone(),
            cpus.node_of_cpu.clone(),
            cpus.core_of_cpu.clone(),
            p.initial_cpus.clone(),
            p.pinned,
            stream(seed, "sched", 0),
        );
        if drv.policy_mut().moves_pinned_threads() {
            sched.let_policy_place();
        }
        let threads = (0..p.threads)
            .map(|t| {
                let node = cpus.node_of_cpu[p.initial_cpus[t as usize] as usize] as usize;
                let mut frac = vec![0.0; n];
                frac[node] = 1.0;
                Thread {
                    rng: stream(seed, "workload.thread", t as u64),
                    step: 0,
                    work: ThreadWork::default(),
                    swrr: Swrr::default(),
                    cycles: false,
                    left: 0,
                    epilogue_idx: 0,
                    clock: 0.0,
                    busy_ns: 0.0,
                    spin_ns: 0.0,
                    state: State::Run,
                    issued: 0,
                    total: 0,
                    stage: 0,
                    stage_started: false,
                    cost: vec![0.0; 3 * n],
                    cost_from: (f64::NAN, f64::NAN, u64::MAX),
                    gap_exp_ns: 0.0,
                    acc: vec![0; n],
                    wr: vec![0; n],
                    frac,
                    write_frac: 0.0,
                    sample_left_ns: f64::INFINITY,
                    waiting: None,
                    main_refs: 0,
                    fast_ok: false,
                    swrr_stale: false,
                    fast_kinds: Vec::new(),
                    escape_memo: EscapeMemo::default(),
                    escape_lists: EscapeLists::default(),
                    fast: FastState::default(),
                }
            })
            .collect();
        let max_chunks =
            (0..p.threads).flat_map(|t| p.steps_of(t).iter()).filter_map(|s| s.p2p.map(|x| x.chunks as usize)).max().unwrap_or(0);
        let p2p_done =
            if max_chunks > 0 { (0..p.threads).map(|t| vec![f64::NAN; p.steps_of(t).len() * max_chunks]).collect() } else { Vec::new() };
        let space_counters = SpaceCounters::new(&spaces, &mem, n);
        let links = cont.links();
        let link_capacity = ic.links.iter().map(|l| l.capacity_gbps).collect();
        let eff = cfg.memory.random_efficiency;
        let mut w = World {
            m,
            p,
            cfg,
            mem,
            sched,
            scan: vec![ScanCursor::default(); spaces.len()],
            spaces,
            cont,
            threads,
            n,
            node_of_cpu: cpus.node_of_cpu.clone(),
            memory_nodes,
            ns_per_flop: 1.0 / (m.clock_ghz * cfg.core.flops_per_cycle),
            mlp: [cfg.core.mlp_stream_on(m), cfg.core.mlp_random, cfg.core.mlp_dependent],
            svc_mult: [1.0, 1.0 / eff, 1.0 / eff],
            now: 0.0,
            p2p_done,
            max_chunks,
            access_matrix: vec![0; n * n],
            write_matrix: vec![0; n * n],
            link_bytes_interval: vec![0.0; links],
            interval_start: 0.0,
            interval_maxima: Vec::new(),
            timeline: Vec::new(),
            interval_counters: Counters::default(),
            interval_cross_node_moves: 0,
            interval_matrix: vec![0; n * n],
            link_capacity,
            counters: Counters::default(),
            pingpong: PingPong::new(p.threads as usize),
            follow_ups: VecDeque::new(),
            tick_next_ns: cfg.tick_ms * 1e6,
            task_tick_next_ns: 1e9 / cfg.sched.tick_hz,
            tick_matrix: vec![0; n * n],
            tick_write_matrix: vec![0; n * n],
            tick_start: 0.0,
            sample_period_ns: None,
            states: vec![TaskState::Runnable; p.threads as usize],
            share: vec![1.0; p.threads as usize],
            moves: Vec::new(),
            demands: vec![Demand::default(); p.threads as usize],
            solved_for: Vec::new(),
            solved_share: Vec::new(),
            solves: 0,
            steps_begun: 0,
            steps_begun_at_last: 0,
            loop_steps: 0,
            shares: SegShares::default(),
            space_counters,
            maps,
            order: TimeOrder::default(),
            order_queue: OrderQueue::default(),
        };
        for t in 0..p.threads {
            w.load_step(t as usize);
        }
        Ok(Engine { w, drv })
    }

    /// Run to completion.
    pub fn run(self, seed: u64) -> Result<RunMetrics, SimError> {
        let Engine { mut w, mut drv } = self;
        let epoch = w.cfg.epoch_us * 1e3;
        let spin_ns = w.cfg.sched.barrier_spin_us * 1e3;
        loop {
            let start = w.now;
            let end = start + epoch * w.fast_forward_epochs(start, epoch) as f64;
            w.loop_steps += 1;
            w.steps_begun_at_last = w.steps_begun;
            for (t, th) in w.threads.iter().enumerate() {
                w.states[t] = task_state(th, start, spin_ns);
            }
            let mut moves = std::mem::take(&mut w.moves);
            w.sched.epoch(start, end, &w.states, &mut w.share, &mut moves);
            w.note_moves(&moves);
            w.moves = moves;
            drv.deliver_follow_ups(&mut w);
            w.update_costs();
            w.update_sampling(drv.policy_mut().sample_period_ns());
            w.run_window(&mut drv, start, end, epoch)?;
            w.close_epoch(end);
            w.now = end;
            w.service(&mut drv, end);
            if w.threads.iter().all(|t| t.state == State::Done) {
                break;
            }
            if !w.threads.iter().any(|t| matches!(t.state, State::Run | State::P2pWait)) {
                return Err(SimError::Internal(format!("every thread is blocked at {} ns", w.now)));
            }
        }
        let policy_counters = drv.policy_mut().counters().into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        let app_moves = crate::apps::move_records(w.p, w.m, &drv.policy_mut().app_moves());
        let apps = crate::apps::finishes(w.p, &w.threads.iter().map(|t| t.clock).collect::<Vec<_>>());
        drv.finish()?;
        Ok(RunMetrics { policy_counters, apps, app_moves, ..w.finish(seed) })
    }
}

impl World<'_> {
    fn load_step(&mut self, t: usize) {
        self.steps_begun += 1;
        let th = &mut self.threads[t];
        th.work = self.p.work_with(th.step, t as u32, &mut th.rng, &mut th.escape_lists);
        th.swrr = Swrr::new(th.work.entries.iter().map(|e| e.refs));
        th.left = th.work.entries.iter().map(|e| e.refs).sum();
        th.main_refs = th.left;
        th.epilogue_idx = 0;
        th.issued = 0;
        th.total = th.work.total_refs();
        th.stage = 0;
        th.stage_started = false;
        th.gap_exp_ns = match th.work.compute {
            Some(Compute::GapExp(ns)) => ns,
            _ => 0.0,
        };
        let lpp = self.p.lines_per_page;
        th.cycles = th.work.entries.len() > 1
            && th.gap_exp_ns == 0.0
            && th.swrr.period() <= MAX_BULK_PERIOD
            && th.work.entries.iter().all(|e| e.peek_run(lpp, 1).is_some());
        // The fast engine takes over what the exact paths charge one reference at a time:
        // steps with a random entry, and multi-entry walks whose cycle is too long to charge
        // whole (docs/simulator.md, "The fast engine").
        th.fast_kinds.clear();
        th.fast_ok = false;
        th.swrr_stale = false;
        if self.maps.is_some() {
            // Mappings are checked reference by reference (`Hot::issue` only).
            th.cycles = false;
            return;
        }
        if self.cfg.engine == EngineKind::Fast && th.gap_exp_ns == 0.0 && th.left > 0 {
            let n = self.n;
            let memo = &mut th.escape_memo;
            let kinds: Option<Vec<FastEntry>> = th.work.entries.iter().map(|e| FastEntry::of(e, &mut self.shares, memo, n)).collect();
            if let Some(kinds) = kinds {
                // Walk-only steps too: a block's walk run spans up to 32 pages of one node,
                // where the exact paths stop at every page.
                th.fast_ok = !kinds.is_empty();
                th.fast_kinds = kinds;
                th.fast.begin_step(n);
            }
        }
    }

    /// Charge cache refills, record ping-pong and queue `ThreadMigrated` for cross-node moves.
    pub(crate) fn note_moves(&mut self, moves: &[Move]) {
        let refill = self.m.os_costs.thread_migration_refill_ns;
        for mv in moves {
            let t = mv.thread as usize;
            let th = &mut self.threads[t];
            th.clock += if mv.cross_node { refill } else { refill * self.cfg.sched.intra_node_refill_share };
            if mv.cross_node {
                let (from, to) = (self.node_of_cpu[mv.from as usize], self.node_of_cpu[mv.to as usize]);
                self.pingpong.record(t, from, to, mv.at_ns);
                self.follow_ups.push_back(FollowUp::Migrated(ThreadMigrated {
                    space: self.p.process_of(mv.thread) as SpaceId,
                    thread: mv.thread,
                    from_node: from,
                    to_node: to,
                    cause: mv.cause,
                    time_ns: mv.at_ns as u64,
                }));
            }
        }
    }

    /// Charge policy work to a thread. A finished thread is not charged: its clock marks the
    /// end of its program, and work done for it after that is a daemon's, not the program's.
    pub(crate) fn charge_thread(&mut self, t: usize, ns: f64) {
        let th = &mut self.threads[t];
        if th.state != State::Done {
            th.clock += ns;
            th.busy_ns += ns;
        }
    }

    /// Simulated time in `actor`'s context (its clock, or the epoch start if it is behind).
    pub(crate) fn now_ns(&self, actor: usize) -> u64 {
        self.threads.get(actor).map_or(self.now, |th| th.clock.max(self.now)) as u64
    }

    pub(crate) fn thread_alive(&self, t: ThreadId) -> bool {
        self.threads[t as usize].state != State::Done
    }

    /// CPU time: busy time plus busy-waiting at barriers.
    pub(crate) fn thread_runtime_ns(&self, t: ThreadId) -> u64 {
        let th = &self.threads[t as usize];
        (th.busy_ns + th.spin_ns) as u64
    }

    pub(crate) fn task_states(&self) -> &[TaskState] {
        &self.states
    }

    /// Solve the contention model for the coming epoch and build each thread's cost table.
    fn update_costs(&mut self) {
        for (t, th) in self.threads.iter().enumerate() {
            let compute_ns = self.compute_ns(t, th);
            let d = &mut self.demands[t];
            d.node = self.node_of_cpu[self.sched.cpu_of[t] as usize] as usize;
            d.share = if self.states[t] == TaskState::Runnable { self.share[t] } else { 0.0 };
            let (mut w, mut inv_mlp, mut svc) = (0.0, 0.0, 0.0);
            for e in &th.work.entries {
                let r = e.remaining() as f64;
                let k = kind_index(e.kind);
                w += r;
                inv_mlp += r / self.mlp[k];
                svc += r * self.svc_mult[k];
            }
            if w == 0.0 {
                (w, inv_mlp, svc) = (1.0, 1.0 / self.mlp[0], 1.0);
            }
            d.inv_mlp = inv_mlp / w;
            d.svc_mult = svc / w;
            d.compute_ns = compute_ns;
            d.frac.clone_from(&th.frac);
            d.write_frac = th.write_frac;
        }
        // The fast engine reuses the last solve while every thread's demand stays within
        // `memory.demand_tolerance` of the demand it was solved for (docs/simulator.md,
        // "Contention"): the loaded latencies would move by about as much as the solve's own
        // tolerance, far less than the sampling noise of the demand estimate itself.
        let mem = &self.cfg.memory;
        let reuse = self.cfg.engine == EngineKind::Fast
            && crate::contention::solve_holds(&self.demands, &self.solved_for, mem.demand_tolerance, mem.population_tolerance);
        if reuse {
            // The latencies hold; the cost tables take this epoch's CPU shares.
            if self.share != self.solved_share {
                self.solved_share.clone_from(&self.share);
                self.build_costs();
            }
            return;
        }
        self.solved_for.clone_from(&self.demands);
        self.solved_share.clone_from(&self.share);
        // Threads with the same demand are one class of the solve; the fast engine merges
        // demands within the tolerance it reuses solves by, the exact engine only identical ones.
        let merge_tolerance = Some(if self.cfg.engine == EngineKind::Fast { self.cfg.memory.demand_tolerance } else { 0.0 });
        let extrapolate = self.cfg.engine == EngineKind::Fast && self.cfg.memory.solver_extrapolation;
        self.cont.solve(&self.demands, self.cfg.memory.solver_iterations, self.cfg.memory.solver_tolerance, merge_tolerance, extrapolate);
        self.solves += 1;
        self.build_costs();
    }

    /// Each thread's ns per access by kind and memory node: its compute and the loaded latency
    /// of the last solve over its memory-level parallelism, stretched by its CPU share.
    fn build_costs(&mut self) {
        let n = self.n;
        for t in 0..self.threads.len() {
            let share = self.share[t].max(1e-3);
            let compute = self.compute_ns(t, &self.threads[t]);
            let th = &mut self.threads[t];
            // A background task or a neighbour changes a few threads' shares: only their
            // tables change (3 · nodes divisions each).
            if th.cost_from == (share, compute, self.solves) {
                continue;
            }
            th.cost_from = (share, compute, self.solves);
            // Row by row over slices: the divisions of a row are independent, and without
            // bounds checks they run two or more to an instruction.
            let latency_ns = self.cont.latency(t);
            for (row, &mlp) in th.cost.chunks_exact_mut(n).zip(&self.mlp) {
                for (c, &lat) in row.iter_mut().zip(latency_ns) {
                    *c = (compute + lat / mlp) / share;
                }
            }
        }
    }

    /// How many epochs of `epoch_ns` the window starting at `start` spans (docs/simulator.md,
    /// "Fast-forward"). One, unless the fast engine may fast-forward and the system is steady:
    /// every thread runs (none waits at a barrier or for a pipeline stage), no follow-up event
    /// is queued, and the last contention solve was reused. Then the window runs up to the
    /// first event that an epoch boundary would have to meet: a background task's arrival,
    /// a scheduler balance, the policy tick, the scheduler tick, a page scan, the end of a
    /// metrics interval, and the predicted end of every running thread's step; at most
    /// `sim.fast_forward_max_us`. Every boundary stays on the grid of `epoch_ns` from 0.
    fn fast_forward_epochs(&self, start: f64, epoch_ns: f64) -> u64 {
        let max_ns = self.cfg.fast_forward_max_us * 1e3;
        if self.cfg.engine != EngineKind::Fast
            || max_ns < 2.0 * epoch_ns
            || self.steps_begun != self.steps_begun_at_last
            || !self.follow_ups.is_empty()
        {
            return 1;
        }
        // Epochs that fit before `at`, where an event must start an epoch of its own, and
        // epochs until the first boundary at or after `at`, where an event fires at the
        // boundary.
        let before = |at: f64| ((at - start) / epoch_ns).floor();
        let until = |at: f64| ((at - start) / epoch_ns).ceil();
        let (arrival_ns, due_ns) = self.sched.next_events(start);
        let mut epochs = (max_ns / epoch_ns).floor().min(before(arrival_ns)).min(until(due_ns));
        epochs = epochs.min(until(self.tick_next_ns)).min(until(self.task_tick_next_ns));
        if let Some(maps) = &self.maps {
            epochs = epochs.min(until(maps.next_ns));
        }
        epochs = epochs.min(until(self.interval_start + self.cfg.metrics_interval_ms * 1e6));
        // A thread that waits (at a barrier, or for its pipeline predecessor) changes what the
        // scheduler sees once it stops spinning and sleeps, `spin_ns` after it arrived: the
        // window ends at the first boundary after that for a thread already waiting, and short
        // of it for one that may begin to wait in the window. No thread that begins to wait in
        // the window sleeps before `start + spin_ns`; beyond that, the window needs the
        // predicted end of every running thread's step, with a margin for the prediction's
        // error (its CPU share and latencies may still change). A pipelined step may wait at
        // any stage, so it allows no more than the spin.
        let n = self.n;
        let spin_ns = self.cfg.sched.barrier_spin_us * 1e3;
        let spin_floor = before(start + spin_ns).max(1.0);
        for (t, th) in self.threads.iter().enumerate() {
            if epochs <= 1.0 {
                break;
            }
            match th.state {
                State::Done => continue,
                State::Barrier(_) | State::P2pWait => {
                    if th.clock + spin_ns > start {
                        epochs = epochs.min(until(th.clock + spin_ns));
                    }
                    continue;
                }
                State::Run => {}
            }
            if self.p.steps_of(t as u32)[th.step].p2p.is_some() {
                epochs = epochs.min(spin_floor);
                continue;
            }
            let mut step_ns = 0.0;
            for e in th.work.entries.iter().chain(&th.work.epilogue) {
                let k = kind_index(e.kind);
                let per_ref_ns: f64 = (0..n).map(|j| th.frac[j] * th.cost[k * n + j]).sum();
                step_ns += e.remaining() as f64 * per_ref_ns;
            }
            if step_ns.is_nan() || step_ns <= 0.0 {
                epochs = epochs.min(spin_floor);
                continue;
            }
            epochs = epochs.min(before(th.clock.max(start) + FAST_FORWARD_MARGIN * step_ns + spin_ns).max(spin_floor));
        }
        epochs.max(1.0) as u64
    }

    /// Take the policy's sampling period for this epoch. A thread's countdown starts (or
    /// restarts) when sampling is switched on or the period changes; a period shorter than
    /// one access samples every access.
    fn update_sampling(&mut self, period_ns: Option<f64>) {
        let period_ns = period_ns.filter(|p| p.is_finite() && *p >= 0.0);
        if period_ns == self.sample_period_ns {
            return;
        }
        self.sample_period_ns = period_ns;
        let left = period_ns.unwrap_or(f64::INFINITY);
        for th in &mut self.threads {
            th.sample_left_ns = left;
        }
    }

    fn compute_ns(&self, t: usize, th: &Thread) -> f64 {
        match th.work.compute {
            Some(Compute::Flops(f)) => {
                let smt = if self.m.smt > 1 && self.sched.smt_busy(t as ThreadId) { self.cfg.core.smt_share } else { 1.0 };
                f * self.ns_per_flop / smt
            }
            Some(Compute::GapConst(ns)) => ns,
            _ => 0.0,
        }
    }

    /// Run the threads from `start` to `end`, a window of whole epochs. While the policy
    /// observes references one at a time (pages armed for hinting faults, or access
    /// sampling), a window of several epochs runs in lockstep, every thread one epoch at a
    /// time, as the epoch-by-epoch loop would: run thread after thread over the whole
    /// window, the first thread would take the hinting fault of every page it shares with
    /// the others, and a page-state machine would see each shared page as the first thread's
    /// (docs/simulator.md, "Fast-forward"). The window's other savings stay: one scheduler
    /// step, one contention solve, one round of services.
    fn run_window(&mut self, drv: &mut Driver, start: f64, end: f64, epoch_ns: f64) -> Result<(), SimError> {
        let epochs = ((end - start) / epoch_ns).round() as u64;
        let observed = self.mem.armed_pages() > 0 || self.sample_period_ns.is_some();
        if !observed {
            return self.run_epoch(drv, end);
        }
        // In the order of time where that applies (`timeorder`), even for a single epoch; in
        // lockstep for the rest of a window whose order a decision broke, and where it does
        // not apply.
        if self.time_order_applies() && self.run_in_time_order(drv, end)? {
            return Ok(());
        }
        if epochs > 1 && self.cfg.fast_forward_lockstep {
            for i in 1..epochs {
                self.run_epoch(drv, start + epoch_ns * i as f64)?;
            }
        }
        self.run_epoch(drv, end)?;
        self.take_waiting(drv, end)
    }

    fn run_epoch(&mut self, drv: &mut Driver, end: f64) -> Result<(), SimError> {
        loop {
            let mut progressed = false;
            for t in 0..self.threads.len() {
                match self.threads[t].state {
                    State::Run if self.threads[t].clock < end => {
                        self.run_thread(drv, t, end, false)?;
                        progressed = true;
                    }
                    State::P2pWait => progressed |= self.p2p_ready(t),
                    _ => {}
                }
            }
            if self.release_barrier() {
                self.after_release(drv);
                progressed = true;
            }
            if !progressed {
                return Ok(());
            }
        }
    }

    /// After a barrier's release: its follow-up events, the task states of the threads that
    /// do not run, and the costs of the new phase, whose threads load memory from now on.
    fn after_release(&mut self, drv: &mut Driver) {
        drv.deliver_follow_ups(self);
        let spin_ns = self.cfg.sched.barrier_spin_us * 1e3;
        for (t, th) in self.threads.iter().enumerate() {
            if th.state != State::Run {
                self.states[t] = task_state(th, th.clock.max(self.now), spin_ns);
            }
        }
        self.update_costs();
    }

    /// Release each process's barrier when all its threads have arrived (or finished).
    fn release_barrier(&mut self) -> bool {
        let mut released = false;
        let spin_ns = self.cfg.sched.barrier_spin_us * 1e3;
        for proc in 0..self.p.processes() {
            let threads = self.p.process_threads(proc);
            let mut step = None;
            let mut all_in = true;
            for t in threads.clone() {
                match self.threads[t as usize].state {
                    State::Barrier(s) => step = Some(s),
                    State::Done => {}
                    _ => all_in = false,
                }
            }
            let Some(s) = step.filter(|_| all_in) else { continue };
            let release = threads.clone().map(|t| self.threads[t as usize].clock).fold(0.0, f64::max);
            for t in threads {
                let t = t as usize;
                if self.threads[t].state == State::Barrier(s) {
                    // A waiter still spinning continues in place; one asleep is woken, and the
                    // scheduler may place it on another CPU.
                    let asleep = task_state(&self.threads[t], release, spin_ns) == TaskState::Sleeping;
                    let th = &mut self.threads[t];
                    th.spin_ns += (release - th.clock).min(spin_ns);
                    th.clock = release;
                    self.advance(t, s + 1);
                    if asleep {
                        self.states[t] = TaskState::Runnable;
                        let mut woke = Vec::new();
                        self.sched.wake(t as ThreadId, release, &self.states, &mut woke);
                        self.note_moves(&woke);
                        self.moves.extend(woke);
                    }
                }
            }
            released = true;
        }
        released
    }

    fn advance(&mut self, t: usize, next: usize) {
        if next >= self.p.steps_of(t as u32).len() {
            self.threads[t].state = State::Done;
            self.exit_if_last(t);
            return;
        }
        self.threads[t].step = next;
        self.threads[t].state = State::Run;
        self.load_step(t);
    }

    /// Thread `t` just finished. If it was the last thread of its address space and other
    /// threads of the run still have work, the program exits and its memory is freed
    /// (docs/simulator.md, "Program exit"): every placed page of the space returns its home
    /// copy and its replicas to their nodes and becomes `FREED`; pages never touched stay
    /// unplaced. The run's last program is not freed: the run ends with its exit, and the
    /// end-of-run residency (`pages_per_node`) is taken at that moment.
    fn exit_if_last(&mut self, t: usize) {
        if self.threads.iter().all(|th| th.state == State::Done) {
            return;
        }
        let space = self.p.process_of(t as ThreadId);
        let sp = &self.spaces[space];
        if sp.exited || sp.threads.clone().any(|u| self.threads[u as usize].state != State::Done) {
            return;
        }
        for g in sp.first_page..sp.first_page + sp.pages {
            self.mem.release(g);
        }
        self.spaces[space].exited = true;
    }

    /// p2p: may thread t start its next stage? Updates its clock and state.
    fn p2p_ready(&mut self, t: usize) -> bool {
        let th = &self.threads[t];
        let step = th.step;
        let Some(p2p) = self.p.steps_of(t as u32)[step].p2p else {
            self.threads[t].state = State::Run;
            return true;
        };
        // The neighbour inside the same process.
        let range = self.p.process_threads(self.p.process_of(t as u32));
        let pred = if p2p.reverse { t + 1 } else { t.wrapping_sub(1) };
        if !range.contains(&(pred as u32)) {
            self.threads[t].state = State::Run;
            self.threads[t].stage_started = true;
            return true;
        }
        let done = self.p2p_done[pred][step * self.max_chunks + th.stage as usize];
        if done.is_nan() {
            self.threads[t].state = State::P2pWait;
            return false;
        }
        let th = &mut self.threads[t];
        th.clock = th.clock.max(done);
        th.state = State::Run;
        th.stage_started = true;
        true
    }

    /// References issued when stage `stage` ends.
    fn stage_end(total: u64, chunks: u32, stage: u32) -> u64 {
        ((stage as u128 + 1) * total as u128 / chunks as u128) as u64
    }

    /// Issue thread t's accesses until its clock reaches `end` or it blocks. With `defer`
    /// (a window in the order of time), a reference the exact path must take ends the call
    /// and waits in `waiting`; a waiting reference is taken first.
    fn run_thread(&mut self, drv: &mut Driver, t: usize, end: f64, defer: bool) -> Result<(), SimError> {
        let shift = self.p.line_shift();
        let n = self.n;
        let cpu = self.sched.cpu_of[t];
        let cpu_node = self.node_of_cpu[cpu as usize];
        if let Some(access) = self.threads[t].waiting.take() {
            self.slow_access(drv, t, cpu, cpu_node, access, false)?;
            if self.sched.cpu_of[t] != cpu || self.threads[t].clock >= end {
                return Ok(());
            }
        }
        loop {
            let step = self.threads[t].step;
            let p = self.p;
            let steps = p.steps_of(t as u32);
            let p2p = steps[step].p2p;
            // p2p steps: a stage starts once the predecessor finished the same stage; its end
            // is recorded for the successor.
            if let Some(pp) = p2p {
                let th = &self.threads[t];
                if th.stage < pp.chunks {
                    if !th.stage_started {
                        if !self.p2p_ready(t) {
                            return Ok(());
                        }
                        continue;
                    }
                    if th.issued == Self::stage_end(th.total, pp.chunks, th.stage) {
                        let (stage, clock) = (th.stage, th.clock);
                        self.p2p_done[t][step * self.max_chunks + stage as usize] = clock;
                        let th = &mut self.threads[t];
                        th.stage += 1;
                        th.stage_started = false;
                        continue;
                    }
                }
            }
            let th = &mut self.threads[t];
            // Main entries (interleaved by smooth weighted round-robin), then the epilogue.
            let in_main = th.left > 0;
            if !in_main {
                if th.epilogue_idx >= th.work.epilogue.len() {
                    // Step done.
                    if steps[step].barrier_after {
                        th.state = State::Barrier(step);
                        return Ok(());
                    }
                    self.advance(t, step + 1);
                    if self.threads[t].state == State::Done {
                        return Ok(());
                    }
                    continue;
                }
                if th.work.epilogue[th.epilogue_idx].remaining() == 0 {
                    th.epilogue_idx += 1;
                    continue;
                }
            }
            let limit = match p2p {
                Some(pp) if th.stage < pp.chunks => Self::stage_end(th.total, pp.chunks, th.stage) - th.issued,
                _ => u64::MAX,
            };
            let start_clock = th.clock;
            let lpp = self.p.lines_per_page;
            // Access sampling: the issue loop stops where the thread's sampling countdown
            // runs out; the reference after that is the sample, taken on its own through the
            // exact path (docs/simulator.md, "Access sampling").
            let sampling = self.sample_period_ns.is_some();
            let sample_now = sampling && th.sample_left_ns <= 0.0;
            let stop = if sampling && !sample_now { end.min(start_clock + th.sample_left_ns) } else { end };
            let slow_from = if sample_now { 0 } else { SLOW };
            let maps = self.maps.as_ref().map_or(&[][..], |m| m.fast());
            let hot =
                Hot { home: self.mem.home(), shift, n, end: stop, gap_exp_ns: th.gap_exp_ns, slow_from, maps, node: cpu_node as usize };
            let by_reference = !maps.is_empty();
            // The fast engine charges the step while the memory its entries range over is
            // settled; otherwise the exact paths run, with the round-robin restarted from the
            // references each entry has left (the fast blocks do not follow it).
            let fast_now = in_main && th.fast_ok && !sample_now && {
                let epoch_ns = self.cfg.epoch_us * 1e3;
                let mut ready = true;
                for (s, unarmed) in th.fast_kinds.iter().flat_map(|k| k.needs()) {
                    ready = ready
                        && self.shares.ready(s, &self.mem, shift, self.now, epoch_ns)
                        && (!unarmed || self.shares.armed_frac(s) == 0.0);
                }
                ready
            };
            if in_main && th.fast_ok && !fast_now && th.swrr_stale {
                th.swrr = Swrr::new(th.work.entries.iter().map(|e| e.remaining()));
                th.swrr_stale = false;
            }
            th.swrr_stale |= fast_now;
            let gap_exp = th.gap_exp_ns > 0.0;
            let mut tally = Tally { rng: &mut th.rng, acc: &mut th.acc, wr: &mut th.wr, cost: &th.cost };
            // Monomorphise the loop for the exponential-gap case so the common one pays nothing.
            macro_rules! issue {
                ($entries:expr, $pick:expr, $max:expr) => {
                    if gap_exp {
                        hot.issue::<true>($entries, $pick, $max, &mut tally, start_clock)
                    } else {
                        hot.issue::<false>($entries, $pick, $max, &mut tally, start_clock)
                    }
                };
            }
            let (issued, clock, slow) = if in_main {
                let max = if sample_now { 1 } else { th.left.min(limit) };
                if fast_now {
                    let step =
                        FastStep { kinds: &th.fast_kinds, shares: &self.shares, total_refs: th.main_refs, lpp, slowed: self.mem.slowed() };
                    hot.issue_fast(&mut th.work.entries, &step, &mut th.fast, max, &mut tally, start_clock)
                } else if th.work.entries.len() == 1
                    && th.work.entries[0].peek_run(lpp, 1).is_some()
                    && !gap_exp
                    && !sample_now
                    && !by_reference
                {
                    hot.issue_runs(&mut th.work.entries[0], max, &mut tally, start_clock, lpp)
                } else if th.work.entries.len() == 1 {
                    issue!(&mut th.work.entries, |_| 0, max)
                } else if th.cycles && !sample_now {
                    hot.issue_cycles(&mut th.work.entries, &mut th.swrr, max, &mut tally, start_clock, lpp)
                } else {
                    let swrr = &mut th.swrr;
                    issue!(&mut th.work.entries, |_| swrr.pick(), max)
                }
            } else {
                let idx = th.epilogue_idx;
                let max = if sample_now { 1 } else { th.work.epilogue[idx].remaining().min(limit) };
                // An epilogue entry walks (a reduction's closing read of its region): charged
                // by page runs like a single walking entry.
                if th.work.epilogue[idx].peek_run(lpp, 1).is_some() && !gap_exp && !sample_now && !by_reference {
                    hot.issue_runs(&mut th.work.epilogue[idx], max, &mut tally, start_clock, lpp)
                } else {
                    issue!(&mut th.work.epilogue, |_| idx, max)
                }
            };
            if in_main {
                th.left -= issued;
            }
            th.busy_ns += clock - start_clock;
            if sampling {
                th.sample_left_ns -= clock - start_clock;
            }
            th.clock = clock;
            th.issued += issued;
            if let Some(access) = slow {
                if sample_now {
                    th.sample_left_ns = self.sample_period_ns.unwrap_or(f64::INFINITY);
                }
                if defer {
                    debug_assert!(!sample_now, "the order of time does not apply while the policy samples");
                    th.waiting = Some(access);
                    return Ok(());
                }
                self.slow_access(drv, t, cpu, cpu_node, access, sample_now)?;
                // A decision may have moved the thread: later accesses count on its new node.
                if self.sched.cpu_of[t] != cpu {
                    return Ok(());
                }
            }
            let th = &self.threads[t];
            if th.clock >= end {
                return Ok(());
            }
        }
    }

    /// First touches, hinting faults, replicated pages and access samples.
    fn slow_access(
        &mut self,
        drv: &mut Driver,
        t: usize,
        cpu: u32,
        cpu_node: NodeId,
        access: (u64, bool, AccessKind),
        sampled: bool,
    ) -> Result<(), SimError> {
        let (page, write, kind) = access;
        let n = self.n;
        let costs = &self.m.os_costs;
        let space = self.p.process_of(t as u32);
        let local_page = page - self.spaces[space].first_page;
        let mut h = self.mem.home()[page as usize];
        if h == FREED {
            // Only threads of a space access its pages, and a space is freed once all of them
            // finished: a freed page reached here is a simulator bug, not a user error.
            return Err(SimError::Internal(format!("thread {t} touched page {page}, freed when its program exited")));
        }
        let mut extra = 0.0;
        if h == UNPLACED {
            let req = PlaceRequest { space: space as SpaceId, thread: t as ThreadId, cpu, cpu_node, page: local_page };
            let node = drv.place(&req, self).map_err(|_| SimError::OutOfMemory { page })?;
            if node as usize >= n || self.mem.free[node as usize] == 0 {
                return Err(SimError::Policy(format!(
                    "policy '{}' placed page {page} on node {node}, which cannot hold it",
                    drv.policy_name()
                )));
            }
            self.mem.place(page, node);
            self.counters.first_touch_faults += 1;
            extra += costs.first_touch_fault_ns + drv.take_place_cost_ns();
            h = node as u8;
            if let Some(maps) = &mut self.maps {
                // The first-touch fault maps the toucher to the new (only) copy, writably.
                maps.map(page, cpu_node as usize, true);
            }
        }
        if h & ARMED != 0 {
            self.mem.disarm(page);
            h &= !ARMED;
            let page_node = (h & NODE_MASK) as NodeId;
            self.counters.numa_hint_faults += 1;
            self.counters.numa_hint_faults_local += u64::from(page_node == cpu_node);
            extra += costs.hint_fault_ns;
            let fault = HintFault {
                space: space as SpaceId,
                thread: t as ThreadId,
                cpu,
                cpu_node,
                page: local_page,
                page_node,
                write,
                pte_writable: true,
                shared_mapping: false,
                time_ns: self.threads[t].clock as u64,
            };
            self.order.taking(Some(page));
            extra += drv.dispatch(self, EventRef::from(&fault), t, true, |p, v, o| p.on_hint_fault(&fault, v, o));
            self.order.taking(None);
            h = self.mem.home()[page as usize] & !ARMED;
        }
        if self.maps.is_some() {
            extra += self.mapped_access(drv, t, cpu, cpu_node, page, local_page, write);
            h = self.mem.home()[page as usize];
        }
        let mut j = (h & NODE_MASK) as NodeId;
        if h & REPLICATED != 0 {
            if write {
                // Replicas are read-only: the write takes a protection fault, which keeps the
                // writer's local copy if it has one, frees the others and shoots down their
                // translations (docs/simulator.md, "Replicated pages").
                let freed = self.collapse_mapped(page, cpu_node);
                self.counters.replica_collapses += 1;
                self.counters.tlb_shootdowns += u64::from(freed);
                extra += costs.hint_fault_ns + f64::from(freed) * costs.tlb_shootdown_ns;
                j = self.mem.node_of(page).expect("placed");
            } else {
                j = self.mem.read_copy(page, cpu_node);
            }
        }
        if sampled {
            self.counters.access_samples += 1;
            extra += costs.access_sample_ns;
            let page_node = self.mem.node_of(page).expect("placed");
            drv.sample(&AccessSample {
                space: space as SpaceId,
                thread: t as ThreadId,
                cpu,
                cpu_node,
                page: local_page,
                served_node: j,
                page_node,
                write,
                time_ns: self.threads[t].clock as u64,
            });
        }
        let th = &mut self.threads[t];
        th.acc[j as usize] += 1;
        th.wr[j as usize] += u64::from(write);
        let c = th.cost[kind_index(kind) * n + j as usize] + extra;
        th.clock += c;
        th.busy_ns += c;
        Ok(())
    }

    /// Fold the epoch's counters into the metrics and the next demand estimate.
    fn close_epoch(&mut self, end: f64) {
        let n = self.n;
        let ab = self.p.access_bytes as f64;
        for t in 0..self.threads.len() {
            let i = self.node_of_cpu[self.sched.cpu_of[t] as usize] as usize;
            let th = &mut self.threads[t];
            // The next demand takes the fast engine's expected counts, not their integer
            // rounding: the rounding is bookkeeping, and its epoch-to-epoch jitter would
            // defeat the reuse of contention solves (docs/simulator.md, "The fast engine").
            let expected = th.fast.expected_shares(&th.acc, &th.wr, &mut th.frac);
            th.fast.flush(&mut th.acc, &mut th.wr);
            let total: u64 = th.acc.iter().sum();
            if total == 0 {
                continue;
            }
            let writes: u64 = th.wr.iter().sum();
            let flops_per_ref = match th.work.compute {
                Some(Compute::Flops(f)) => f,
                _ => 0.0,
            };
            self.space_counters.record(self.p.process_of(t as ThreadId), total, flops_per_ref);
            for j in 0..n {
                let a = th.acc[j];
                if a == 0 {
                    if expected.is_none() {
                        th.frac[j] = 0.0;
                    }
                    continue;
                }
                if expected.is_none() {
                    th.frac[j] = a as f64 / total as f64;
                }
                self.access_matrix[i * n + j] += a;
                self.tick_matrix[i * n + j] += a;
                let w = th.wr[j];
                self.write_matrix[i * n + j] += w;
                self.tick_write_matrix[i * n + j] += w;
                for &l in self.cont.route_rd(i, j) {
                    self.link_bytes_interval[l as usize] += (a - w) as f64 * ab;
                }
                for &l in self.cont.route_wr(i, j) {
                    self.link_bytes_interval[l as usize] += w as f64 * ab;
                }
            }
            th.write_frac = expected.unwrap_or(writes as f64 / total as f64);
            th.acc.iter_mut().for_each(|x| *x = 0);
            th.wr.iter_mut().for_each(|x| *x = 0);
        }
        // Once every thread is done, the run ends at the last thread's clock, which may lie
        // before this epoch's (or window's) end: `finish` closes the last interval there, so
        // that the timeline ends where the run does.
        let interval = self.cfg.metrics_interval_ms * 1e6;
        if end - self.interval_start >= interval && self.threads.iter().any(|t| t.state != State::Done) {
            self.close_interval(end, true);
        }
    }

    /// Close the metrics interval at `end`; `timeline` = record it as a point of the timeline.
    fn close_interval(&mut self, end: f64, timeline: bool) {
        let len = end - self.interval_start;
        if len <= 0.0 {
            return;
        }
        if timeline {
            self.record_timeline(end, len);
        }
        self.interval_start = end;
        if self.link_capacity.is_empty() {
            return;
        }
        let max = self
            .link_bytes_interval
            .iter()
            .zip(&self.link_capacity)
            .map(|(b, c)| (100.0 * b / (c * len)).clamp(0.0, 100.0))
            .fold(0.0, f64::max);
        self.interval_maxima.push((max, len));
        self.link_bytes_interval.iter_mut().for_each(|b| *b = 0.0);
    }

    /// One point of the timeline: the interval's accesses from the access matrix, its events
    /// from the counters, the pages on each node now.
    fn record_timeline(&mut self, end: f64, len: f64) {
        let n = self.n;
        let d: Vec<u64> = self.access_matrix.iter().zip(&self.interval_matrix).map(|(a, b)| a - b).collect();
        let accesses: u64 = d.iter().sum();
        let local: u64 = (0..n).map(|i| d[i * n + i]).sum();
        let (c, c0) = (self.counters, self.interval_counters);
        let cross = self.sched.migrations.cross_node();
        self.timeline.push(TimelinePoint {
            t_s: end / 1e9,
            interval_s: len / 1e9,
            accesses,
            local_access_ratio: (accesses > 0).then(|| local as f64 / accesses as f64),
            node_accesses: (0..n).map(|j| (0..n).map(|i| d[i * n + j]).sum()).collect(),
            page_migrations: c.page_migrations - c0.page_migrations,
            replications: c.replications - c0.replications,
            hint_faults: c.numa_hint_faults - c0.numa_hint_faults,
            thread_migrations: cross - self.interval_cross_node_moves,
            pages_per_node: self.mem.resident_per_node(),
            apps: self.space_counters.take_timeline(&self.spaces, &self.mem, self.p, self.m, len / 1e9),
        });
        self.interval_counters = c;
        self.interval_cross_node_moves = cross;
        self.interval_matrix.copy_from_slice(&self.access_matrix);
    }

    /// The periodic policy tick, the page scanners and the scheduler tick of every thread
    /// on a CPU.
    fn service(&mut self, drv: &mut Driver, end: f64) {
        self.run_page_scanners(drv, end);
        if end >= self.tick_next_ns {
            let n = self.n;
            let tick = Tick {
                time_ns: end as u64,
                interval_ns: (end - self.tick_start) as u64,
                access_matrix: (0..n).map(|i| self.tick_matrix[i * n..(i + 1) * n].to_vec()).collect(),
                write_matrix: (0..n).map(|i| self.tick_write_matrix[i * n..(i + 1) * n].to_vec()).collect(),
                // No caches and no instruction counts are simulated: unsupported, not zero.
                cache_refills: None,
                ipc: None,
                spaces: self.space_counters.take(&self.spaces, &self.mem, n),
            };
            self.tick_matrix.iter_mut().for_each(|x| *x = 0);
            self.tick_write_matrix.iter_mut().for_each(|x| *x = 0);
            self.tick_start = end;
            self.tick_next_ns = end + self.cfg.tick_ms * 1e6;
            // A daemon's work: it runs as an unbound task woken on CPU 0 (docs/simulator.md,
            // "Who pays for a policy's work").
            let ns = drv.dispatch(self, EventRef::Tick, 0, false, |p, v, o| p.on_tick(&tick, v, o));
            self.sched.run_daemon(0, end, ns);
        }
        if end >= self.task_tick_next_ns {
            // One tick per epoch at most; an epoch longer than a tick does not pile them up.
            let period = 1e9 / self.cfg.sched.tick_hz;
            while self.task_tick_next_ns <= end {
                self.task_tick_next_ns += period;
            }
            for t in 0..self.threads.len() {
                if !self.states[t].on_cpu() || self.threads[t].state == State::Done {
                    continue;
                }
                let tick = TaskTick {
                    space: self.p.process_of(t as ThreadId) as SpaceId,
                    thread: t as ThreadId,
                    cpu: self.sched.cpu_of[t],
                    runtime_ns: self.thread_runtime_ns(t as ThreadId),
                    time_ns: self.now_ns(t),
                };
                let ns = drv.dispatch(self, EventRef::TaskTick { thread: t as ThreadId }, t, false, |p, v, o| p.on_task_tick(&tick, v, o));
                self.charge_thread(t, ns);
            }
        }
    }

    fn finish(mut self, seed: u64) -> RunMetrics {
        let exec_ns = self.threads.iter().map(|t| t.clock).fold(0.0, f64::max);
        // The last, partial interval (none if the previous one ended with the run).
        self.close_interval(exec_ns.max(self.interval_start + 1.0), exec_ns > self.interval_start);
        let n = self.n;
        let total: u64 = self.access_matrix.iter().sum();
        let local: u64 = (0..n).map(|i| self.access_matrix[i * n + i]).sum();
        let node_accesses: Vec<u64> = (0..n).map(|j| (0..n).map(|i| self.access_matrix[i * n + j]).sum()).collect();
        let exec_s = exec_ns / 1e9;
        let ab = self.p.access_bytes as f64;
        let interconnect_load = if self.interval_maxima.is_empty() {
            None
        } else {
            let w: f64 = self.interval_maxima.iter().map(|x| x.1).sum();
            Some(self.interval_maxima.iter().map(|(m, l)| m * l).sum::<f64>() / w)
        };
        let c = self.counters;
        let migrations = self.sched.migrations;
        let per_s = |x: u64| if exec_s > 0.0 { x as f64 / exec_s } else { 0.0 };
        RunMetrics {
            seed,
            exec_time_s: exec_s,
            sim_time_s: exec_s,
            local_access_ratio: (total > 0).then(|| local as f64 / total as f64),
            node_imbalance: node_imbalance(&node_accesses, &self.memory_nodes),
            interconnect_load,
            first_touch_faults: c.first_touch_faults,
            hint_faults: c.numa_hint_faults,
            page_migrations: c.page_migrations,
            thread_migrations: migrations.total(),
            tlb_shootdowns: c.tlb_shootdowns,
            accesses: total,
            controller_utilisation: (0..n)
                .map(|j| {
                    let bw = self.m.nodes[j].mem_bw_gbps;
                    if bw > 0.0 && exec_ns > 0.0 {
                        node_accesses[j] as f64 * ab / (bw * exec_ns)
                    } else {
                        0.0
                    }
                })
                .collect(),
            node_accesses,
            access_matrix: (0..n).map(|i| self.access_matrix[i * n..(i + 1) * n].to_vec()).collect(),
            write_matrix: (0..n).map(|i| self.write_matrix[i * n..(i + 1) * n].to_vec()).collect(),
            thread_migrations_by_cause: migrations,
            pingpong_returns: self.pingpong.returns,
            pingpong_intervals_s: self.pingpong.histogram(),
            hint_faults_per_s: per_s(c.numa_hint_faults),
            page_migrations_per_s: per_s(c.page_migrations),
            thread_migrations_per_s: per_s(migrations.cross_node()),
            numa: c.numa_counters(),
            thread_busy_s: BusySummary::of(&self.threads.iter().map(|t| t.busy_ns / 1e9).collect::<Vec<_>>()),
            pages_per_node: self.mem.resident_per_node(),
            placed_pages: self.mem.home().iter().filter(|&&h| h & NODE_MASK != UNPLACED).count() as u64,
            replica_pages: self.mem.replica_copies(),
            unplaced_pages: self.mem.unplaced_pages(),
            pages_freed_at_exit: self.mem.freed_pages(),
            replications: c.replications,
            replica_collapses: c.replica_collapses,
            access_samples: c.access_samples,
            refused_decisions: c.refused_decisions,
            policy_counters: Default::default(),
            loop_steps: self.loop_steps,
            apps: Vec::new(),
            app_moves: Vec::new(),
            timeline: std::mem::take(&mut self.timeline),
        }
    }
}
