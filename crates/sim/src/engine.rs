//! The epoch loop. Every `epoch_us` of simulated time: the scheduler places threads and
//! background noise, the contention model turns the coming step's traffic into latencies, and
//! every running thread issues accesses until its clock passes the epoch's end or it blocks
//! at a barrier. Threads run one after another in id order; the result depends only on the
//! seed.
//!
//! [`World`] is the simulated machine and program; the policy lives in the [`Driver`], which
//! calls it with a view of the world and carries out its decisions (docs/simulator.md).

use crate::config::{DemandSource, SimConfig};
use crate::contention::{Contention, Demand};
use crate::driver::{Driver, FollowUp};
use crate::fast::{EscapeMemo, FastEntry, FastState, SegShares};
use crate::hot::SlowRef;
use crate::mappings::Mappings;
use crate::memory::Memory;
use crate::metrics::{Counters, EngineCounts, RunMetrics, StepBound, TimelinePoint};
use crate::pingpong::PingPong;
use crate::sched::{Move, Scheduler, TaskState};
use crate::windows::SpaceCounters;
use crate::SimError;
use numalab_core::rng::StreamRng;
use numalab_core::{Machine, NodeId, ThreadId};
use numalab_policy::{EventRef, SpaceId, TaskTick, ThreadMigrated, Tick};
use numalab_workload::program::ThreadWork;
use numalab_workload::stream::Swrr;
use numalab_workload::{EscapeLists, Program};
use std::collections::VecDeque;
use timeorder::{OrderQueue, TimeOrder};

mod close;
mod costs;
mod forecast;
mod issue;
mod sample_entry;
mod setup;
mod steps;
mod timeorder;
mod window;

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
    /// The round-robin's successors, for the entry of an access sample after fast blocks.
    sample_next: sample_entry::Successors,
    fast: FastState,
    epilogue_idx: usize,
    clock: f64,
    busy_ns: f64,
    /// CPU time spent busy-waiting at barriers (counts as run time, like Linux's).
    spin_ns: f64,
    /// How long this thread spins when it waits at a barrier before it sleeps
    /// (`SimConfig::barrier_spin_ns`; docs/scheduler.md, "Barrier waits: spin, then sleep").
    spin_limit_ns: f64,
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
    /// Access mix for the contention demand: the references ahead where the forecast knows
    /// them (`World::forecast_mix`), else the last epoch with traffic.
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
    /// The shortest barrier spin of any thread (`Thread::spin_limit_ns`).
    shortest_spin_ns: f64,
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
    /// Scratch of `settle_carried`: one thread's carried counts made integer.
    settled_acc: Vec<u64>,
    settled_wr: Vec<u64>,
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
    /// The window's naps: threads spinning at its start that fall asleep inside it, with the
    /// time (`World::fast_forward_epochs`, docs/simulator.md "Fast-forward").
    naps: Vec<(usize, f64)>,
    /// The last window ended where a walk's own load moved to another node (`walk_moves_load`):
    /// the next step is one epoch, whose traffic the solve after it takes.
    after_load_moved: bool,
    /// Scratch of `fast_forward_epochs`: per process, the earliest its barrier may be released.
    release_floor: Vec<f64>,
    /// Windows past arrivals (`SimConfig::fast_forward_past_arrivals`): each running thread's
    /// predicted arrival at the end of its step (NaN: none), from `fast_forward_epochs`.
    arrive_ns: Vec<f64>,
    /// Scratch of `fast_forward_epochs`: per process, its running threads' earliest margined
    /// arrival.
    first_arrival: Vec<f64>,
    /// Scratch of the blended solve: each thread's references per ns by kind and node, summed
    /// over the window's stretches.
    blend_inv: Vec<f64>,
    /// Scratch of `World::forecast_mix`: a thread's references per node in the window.
    forecast_counts: Vec<f64>,
    demands: Vec<Demand>,
    /// The demands of the last contention solve (the fast engine reuses it while they hold).
    solved_for: Vec<Demand>,
    /// The CPU shares the cost tables were built with.
    solved_share: Vec<f64>,
    /// Contention solves so far (names the latencies the cost tables use).
    solves: u64,
    /// Per thread whose latencies others take (`Contention::latency_source`): the thread whose
    /// cost table was last built from them, for the others to copy when it still holds.
    cost_built: Vec<usize>,
    /// Steps begun by any thread so far, and that count when the loop's last step began: a
    /// window follows only a step of the loop in which no thread began a step, so the demand
    /// it was solved for is the traffic of the steps the threads are in (docs/simulator.md,
    /// "Fast-forward").
    steps_begun: u64,
    steps_begun_at_last: u64,
    /// What the engine did so far (`RunMetrics::engine`; its solves are counted in `solves`,
    /// its blocks in each thread's `FastState`).
    counts: EngineCounts,
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
fn task_state(th: &Thread, at: f64) -> TaskState {
    match th.state {
        State::Run => TaskState::Runnable,
        State::Done => TaskState::Done,
        State::Barrier(_) | State::P2pWait if at < th.clock + th.spin_limit_ns => TaskState::Spinning,
        State::Barrier(_) | State::P2pWait => TaskState::Sleeping,
    }
}

impl<'a, 'l> Engine<'a, 'l> {
    /// Run to completion.
    pub fn run(self, seed: u64) -> Result<RunMetrics, SimError> {
        let Engine { mut w, mut drv } = self;
        let epoch = w.cfg.epoch_us * 1e3;
        loop {
            let start = w.now;
            for (t, th) in w.threads.iter().enumerate() {
                w.states[t] = task_state(th, start);
            }
            let (epochs, bound) = w.fast_forward_epochs(start, epoch);
            let end = start + epoch * epochs as f64;
            w.counts.loop_steps += 1;
            w.steps_begun_at_last = w.steps_begun;
            let mut moves = std::mem::take(&mut w.moves);
            // The scheduler may end the window early: where a newidle balance would pull a
            // thread, or a nap would change another thread's share.
            let end = w.sched.epoch(start, end, epoch, &w.states, &w.naps, &mut w.share, &mut moves);
            if end - start > epoch {
                w.counts.windows += 1;
            } else {
                w.counts.one_epoch.add(if epochs > 1 { StepBound::SchedulerCut } else { bound });
            }
            w.note_moves(&moves);
            w.moves = moves;
            if w.cfg.fast_forward_past_arrivals && end - start > epoch {
                w.share_of_arrivals(start, end, epoch);
            }
            drv.deliver_follow_ups(&mut w);
            // The solve takes each thread's mix from the pages its walks will reach in this
            // step (docs/simulator.md, "Contention", "The demand: the references ahead"); a
            // window of several epochs always does, or it would run up to 2 ms on traffic its
            // threads have left.
            if end - start > epoch || w.cfg.memory.demand == DemandSource::Ahead {
                w.forecast_mix(start, end, end - start > epoch);
            }
            w.update_costs((w.cfg.fast_forward_past_arrivals && end - start > epoch).then_some((start, end)));
            w.update_sampling(drv.policy_mut().sample_period_ns());
            w.run_window(&mut drv, start, end, epoch)?;
            w.close_epoch(end);
            w.now = end;
            // The services see the threads' states of the window's last epoch start.
            w.note_naps(end - epoch);
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
    /// The window's naps the epoch-by-epoch loop would see at the epoch start `at`: those
    /// threads are asleep in `states` from there (while they still wait).
    pub(crate) fn note_naps(&mut self, at: f64) {
        for &(t, asleep) in &self.naps {
            if asleep <= at && self.states[t] == TaskState::Spinning && matches!(self.threads[t].state, State::Barrier(_) | State::P2pWait)
            {
                self.states[t] = TaskState::Sleeping;
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

    /// The periodic policy tick, the page scanners and the scheduler tick of every thread
    /// on a CPU.
    fn service(&mut self, drv: &mut Driver, end: f64) {
        self.run_page_scanners(drv, end);
        if end >= self.tick_next_ns {
            // The tick's matrices count every reference up to now.
            self.settle_carried();
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
}
