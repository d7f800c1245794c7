//! How long a step of the loop is and how its threads run (docs/simulator.md, "Fast-forward").

use super::{State, Thread, World};
use crate::config::EngineKind;
use crate::driver::Driver;
use crate::hot::kind_index;
use crate::memory::NODE_MASK;
use crate::metrics::StepBound;
use crate::sched::TaskState;
use crate::walkruns::leading_equal_in;
use crate::SimError;
use numalab_workload::Entry;

/// The share of a step's predicted remaining time a fast-forward window may cover: the
/// prediction takes this epoch's latencies and CPU share, which may still change [ours].
const FAST_FORWARD_MARGIN: f64 = 0.75;

/// The least part of a thread's latency to a node that its own queue there must be for a
/// window to end where its walk moves to another node [ours]: the fast engine's tolerance on
/// run time against the exact engine (docs/results/fast-vs-exact.md).
const OWN_WAIT_MIN: f64 = 0.02;

/// Runs of pages of one node past a walk's current one that a window's bound looks at for
/// where the walk's load moves (`World::walk_moves_load`) [ours].
const RUNS_AHEAD: usize = 16;

/// The entries a thread is running now and whether they are its step's main entries: the
/// main entries interleave, each at its share of the step's predicted rate; once they are
/// done, the epilogue's entries run one after the other, the current one alone.
pub(super) fn current_entries(th: &Thread) -> (&[Entry], bool) {
    let main_left: u64 = th.work.entries.iter().map(|e| e.remaining()).sum();
    if main_left > 0 {
        (&th.work.entries, true)
    } else {
        (th.work.epilogue.get(th.epilogue_idx..th.epilogue_idx + 1).unwrap_or(&[]), false)
    }
}

/// What one reference of kind index `k` costs thread `th` on average over its access mix, ns.
pub(super) fn per_ref_ns(th: &Thread, k: usize, n: usize) -> f64 {
    (0..n).map(|j| th.frac[j] * th.cost[k * n + j]).sum()
}

/// What the references left of `entries` (a thread's current entries) cost from here,
/// ns: each walk at what a reference costs on its current page's node, the others at
/// the thread's mix. The mix is the last step's, which a walk that has just turned to
/// another node has left: after a turn from a far node to a near one it priced the walk
/// at the far node's cost, and the window's forecast then took more references than the
/// window holds (cg-like's serial reduction on amd48 sampled the next node's pages for a
/// window that never reached them).
pub(super) fn pace_ns(th: &Thread, entries: &[Entry], home: &[u8], shift: u32, n: usize) -> f64 {
    let lines_per_page = 1u64 << shift;
    entries
        .iter()
        .filter(|e| e.remaining() > 0)
        .map(|e| {
            let k = kind_index(e.kind);
            let node = e
                .peek_run_and_chunk(lines_per_page, u64::MAX)
                .and_then(|(line, _, _)| home.get((line >> shift) as usize))
                .map(|&b| (b & NODE_MASK) as usize)
                .filter(|&j| j < n);
            e.remaining() as f64 * node.map_or_else(|| per_ref_ns(th, k, n), |j| th.cost[k * n + j])
        })
        .sum()
}

/// A window's length in epochs as bounds come down on it, and the bound that set it
/// (`EngineCounts::one_epoch`). `cap` keeps the smaller, as `f64::min` does, and says whether
/// the bound lowered it.
struct Shortest {
    epochs: f64,
    by: StepBound,
}

impl Shortest {
    fn cap(&mut self, epochs: f64, by: StepBound) -> bool {
        let lower = epochs < self.epochs;
        if lower {
            (self.epochs, self.by) = (epochs, by);
        }
        lower
    }
}

impl World<'_> {
    /// How many epochs of `epoch_ns` the window starting at `start` spans (docs/simulator.md,
    /// "Fast-forward"). One, unless the fast engine may fast-forward, the loop's last step
    /// began no thread's step and no follow-up event is queued. Then the window runs up to the
    /// first event that an epoch boundary would have to meet: a periodic balance, the policy
    /// tick, the scheduler tick, a page scan, the end of a metrics interval, the predicted end
    /// of every running thread's step, and the sleep of a waiting thread that is not a nap;
    /// at most `sim.fast_forward_max_us`. It fills `naps` with the waiting threads that fall
    /// asleep inside the window, which the scheduler replays (and may end the window earlier).
    /// Every boundary stays on the grid of `epoch_ns` from 0.
    pub(super) fn fast_forward_epochs(&mut self, start: f64, epoch_ns: f64) -> (u64, StepBound) {
        let max_ns = self.cfg.fast_forward_max_us * 1e3;
        let after_load_moved = std::mem::take(&mut self.after_load_moved);
        let no_window = if self.cfg.engine != EngineKind::Fast || max_ns < 2.0 * epoch_ns {
            Some(StepBound::NoFastForward)
        } else if self.steps_begun != self.steps_begun_at_last {
            Some(StepBound::StepBegun)
        } else if !self.follow_ups.is_empty() {
            Some(StepBound::FollowUps)
        } else if after_load_moved {
            Some(StepBound::AfterLoadMove)
        } else {
            None
        };
        if let Some(bound) = no_window {
            self.naps.clear();
            return (1, bound);
        }
        // Epochs that fit before `at`, where an event must start an epoch of its own, and
        // epochs until the first boundary at or after `at`, where an event fires at the
        // boundary.
        let before = |at: f64| ((at - start) / epoch_ns).floor();
        let until = |at: f64| ((at - start) / epoch_ns).ceil();
        let due_ns = self.sched.next_event();
        // The window's length so far and the bound that set it (`min` of the bounds, in the
        // order they are checked: an equal later bound leaves the first).
        let mut len = Shortest { epochs: (max_ns / epoch_ns).floor(), by: StepBound::NoFastForward };
        len.cap(until(due_ns), StepBound::SchedulerEvent);
        len.cap(until(self.tick_next_ns), StepBound::PolicyTick);
        len.cap(until(self.task_tick_next_ns), StepBound::TaskTick);
        if let Some(maps) = &self.maps {
            len.cap(until(maps.next_ns), StepBound::Mappings);
        }
        len.cap(until(self.interval_start + self.cfg.metrics_interval_ms * 1e6), StepBound::MetricsInterval);
        // Running threads: the window needs the predicted end of every running thread's step,
        // with a margin for the prediction's error (its CPU share and latencies may still
        // change), and ends before the first: a thread that reaches its barrier leaves the
        // population of the window's solve, and the threads still running would go on at the
        // latencies of a machine loaded by it. A pipelined step may wait at any stage; a
        // waiting thread spins before it sleeps (at least `shortest_spin_ns`), so such a step allows
        // that spin.
        let n = self.n;
        // Windows past arrivals while the policy observes no reference (docs/simulator.md,
        // "Windows past arrivals"): a window it observes runs in the order of time or in
        // lockstep, whose hinting faults and decisions the blended solve was not checked for.
        let past_arrivals =
            self.cfg.fast_forward_past_arrivals && self.mem.armed_pages() == 0 && self.sample_period_ns.is_none() && self.maps.is_none();
        // Each running thread's predicted arrival (NaN: none), and per process the earliest
        // margined arrival of its running threads (a window that holds one ends before the
        // barrier may be released); kept fresh whenever the setting is on, since a window's
        // solve reads them (`update_costs`).
        let mut arrive_ns = std::mem::take(&mut self.arrive_ns);
        let mut first_arrival = std::mem::take(&mut self.first_arrival);
        if self.cfg.fast_forward_past_arrivals {
            arrive_ns.clear();
            arrive_ns.resize(self.threads.len(), f64::NAN);
            first_arrival.clear();
            first_arrival.resize(self.p.processes(), f64::INFINITY);
        }
        let mut load_moves: Option<f64> = None;
        let spin_floor = before(start + self.shortest_spin_ns).max(1.0);
        // Per process, the earliest its barrier may be released: when the last of its running
        // threads arrives, each no sooner than predicted with the margin. A pipelined step may
        // wake its neighbour at any stage: no such bound.
        // `-inf`: no running thread (no release); NaN: no bound.
        let mut release_floor = std::mem::take(&mut self.release_floor);
        release_floor.clear();
        release_floor.resize(self.p.processes(), f64::NEG_INFINITY);
        let raise = |floor: &mut f64, at: f64| {
            if !floor.is_nan() {
                *floor = floor.max(at);
            }
        };
        for (t, th) in self.threads.iter().enumerate() {
            if len.epochs <= 1.0 {
                break;
            }
            if th.state != State::Run {
                continue;
            }
            let process = self.p.process_of(t as u32);
            if self.p.steps_of(t as u32)[th.step].p2p.is_some() {
                len.cap(spin_floor, StepBound::Spin);
                release_floor[process] = f64::NAN;
                continue;
            }
            let mut step_ns = 0.0;
            for e in th.work.entries.iter().chain(&th.work.epilogue) {
                let k = kind_index(e.kind);
                step_ns += e.remaining() as f64 * per_ref_ns(th, k, n);
            }
            if step_ns.is_nan() || step_ns <= 0.0 {
                len.cap(spin_floor, StepBound::Spin);
                raise(&mut release_floor[process], start);
                continue;
            }
            let arrival = th.clock.max(start) + FAST_FORWARD_MARGIN * step_ns;
            if past_arrivals {
                // The release is the last thread's arrival, which comes sooner than predicted
                // as the others leave the machine's queues: its earliest possible time.
                raise(&mut release_floor[process], th.clock.max(start) + self.unloaded_step_ns(t));
            } else {
                raise(&mut release_floor[process], arrival);
            }
            // The first-touch step's faults are not in the prediction: it keeps the bound.
            if past_arrivals && {
                let step = &self.p.steps_of(t as u32)[th.step];
                step.barrier_after && step.phase.is_some()
            } {
                // Past the arrival, before the thread could fall asleep (docs/simulator.md,
                // "Windows past arrivals"): the scheduler replays no nap of a thread that
                // arrives inside the window.
                arrive_ns[t] = th.clock.max(start) + step_ns;
                first_arrival[process] = first_arrival[process].min(arrival);
                len.cap(before(arrival + th.spin_limit_ns).max(1.0), StepBound::Arrival);
            } else {
                // Before the first arrival (or the end of a step without a barrier, where the
                // thread begins its next step or leaves, and of the first-touch step, whose
                // faults the prediction leaves out): until stop 48 the window ran on to the arrival
                // plus the spin (no thread sleeps before), while the solve still counted the
                // arrived threads (docs/simulator.md, "Fast-forward").
                len.cap(before(arrival).max(1.0), StepBound::Arrival);
            }
            // Where a walk's own load moves to another node: the window ends where the epoch
            // it moves in begins, and that epoch is the next step, alone, whose solve takes
            // its traffic on both sides of the move, as the epoch-by-epoch loop's does.
            if let Some(at) = self.walk_moves_load(t, start, start + len.epochs * epoch_ns, epoch_ns) {
                if len.cap(before(at).max(1.0), StepBound::LoadMove) {
                    load_moves = Some(len.epochs);
                }
            }
        }
        // Waiting threads (at a barrier, or for their pipeline predecessor) stop spinning and
        // sleep `spin_limit_ns` after they arrived, which changes what the scheduler sees. One that
        // falls asleep before its process's barrier may be released stays asleep until then:
        // it is a nap the scheduler replays (`Scheduler::epoch`). Any other ends the window at
        // the first boundary after it falls asleep. A process without running threads is
        // released by none.
        //
        // A release wakes the sleepers, which the scheduler may place on other CPUs: their
        // CPUs are busy again, and the background tasks the scheduler placed for the rest of
        // the window from the CPUs it saw at its start would be placed otherwise. So a window
        // that holds sleepers (napping, or asleep at its start) ends before their process's
        // barrier may be released.
        self.naps.clear();
        for (t, th) in self.threads.iter().enumerate() {
            if !matches!(th.state, State::Barrier(_) | State::P2pWait) {
                continue;
            }
            let asleep = th.clock + th.spin_limit_ns;
            let floor = release_floor[self.p.process_of(t as u32)];
            let floor = if floor == f64::NEG_INFINITY { f64::INFINITY } else { floor };
            // A NaN floor (a pipelined step runs) compares false: no nap, no bound.
            if asleep > start {
                if asleep < floor {
                    self.naps.push((t, asleep));
                } else {
                    len.cap(until(asleep), StepBound::Sleep);
                    continue;
                }
            }
            if floor < f64::INFINITY {
                len.cap(before(floor).max(1.0), StepBound::Release);
            }
        }
        if past_arrivals {
            // A window that holds an arrival ends before its barrier may be released: the
            // release begins steps and wakes sleepers, which only a window's boundary meets.
            for (&arrival, &floor) in first_arrival.iter().zip(&release_floor) {
                if arrival < start + len.epochs * epoch_ns && floor.is_finite() {
                    len.cap(before(floor).max(1.0), StepBound::Release);
                }
            }
        }
        self.first_arrival = first_arrival;
        self.arrive_ns = arrive_ns;
        self.release_floor = release_floor;
        let epochs = len.epochs.max(1.0);
        self.after_load_moved = load_moves == Some(epochs) && epochs > 1.0;
        let end = start + epoch_ns * epochs;
        self.naps.retain(|&(_, asleep)| asleep < end);
        (epochs as u64, len.by)
    }

    /// What thread `t`'s step would still take with no queue anywhere: every reference left
    /// at the idle latency of each node, weighted by its access mix, with its CPU share now.
    fn unloaded_step_ns(&self, t: usize) -> f64 {
        let th = &self.threads[t];
        let i = self.node_of_cpu[self.sched.cpu_of[t] as usize] as usize;
        let idle_ns: f64 = th.frac.iter().zip(&self.m.latency_ns[i]).map(|(f, l)| f * l).sum();
        let (compute, share) = (self.demands[t].compute_ns, self.share[t].max(1e-3));
        th.work
            .entries
            .iter()
            .chain(&th.work.epilogue)
            .map(|e| e.remaining() as f64 * (compute + idle_ns / self.mlp[kind_index(e.kind)]) / share)
            .sum()
    }

    /// Where one of thread `t`'s walks moves its load to another node inside the window
    /// (docs/simulator.md, "Fast-forward", windows end where a walk's load moves): the first
    /// such place before `end`, if any. A window's contention solve is made once, for the
    /// window's mix as an average; two kinds of move change the queues within it. A walk
    /// that reads one node for at least an epoch and waits there behind its own queue for at
    /// least `OWN_WAIT_MIN` of its latency sees that wait move with it where its run of pages
    /// on that node ends. And where a walk's chunk (a contiguous run of lines: a segment, or
    /// one chunk of a chunked segment) ends and its next chunk lies on another node, the
    /// thread turns with the others that walk the same structure (a stencil's halo planes, a
    /// transpose's slices), however small its own share of the queues.
    fn walk_moves_load(&self, t: usize, start: f64, end: f64, epoch_ns: f64) -> Option<f64> {
        let th = &self.threads[t];
        // An epilogue entry runs alone, at what a reference costs on its page's node.
        let (current, main) = current_entries(th);
        let clock = th.clock.max(start);
        let (home, shift) = (self.mem.home(), self.p.line_shift());
        let lines_per_page = 1u64 << shift;
        let mut first: Option<f64> = None;
        let mut chunk_moves: Option<f64> = None;
        // The main entries' pace from here (`pace_ns`: not the last step's mix, which a walk
        // that has just moved has left).
        let here_ns = pace_ns(th, current, home, shift, self.n);
        // Whether the thread waits behind its own queues for at least `OWN_WAIT_MIN` of its
        // latency to some node in the last solve: where its traffic was then, which its walk
        // may since have left (the solve is the one the window would keep). Asked once, and
        // only for a walk that may turn inside the window; without it the runs ahead are not
        // looked at (under a policy that spreads pages they are many).
        let cpu_node = self.node_of_cpu[self.sched.cpu_of[t] as usize] as usize;
        let latency_ns = self.cont.latency(t);
        let mut own_waits: Option<bool> = None;
        for e in current.iter().filter(|e| e.remaining() > 0) {
            let Some((line, _, in_chunk)) = e.peek_run_and_chunk(lines_per_page, u64::MAX) else { continue };
            let page = (line >> shift) as usize;
            let Some(&byte) = home.get(page) else { continue };
            let node = (byte & NODE_MASK) as usize;
            if node >= self.n {
                continue; // unplaced: first touches, on the exact path
            }
            let refs_per_ns = if main { e.remaining() as f64 / here_ns } else { 1.0 / th.cost[kind_index(e.kind) * self.n + node] };
            if refs_per_ns.is_nan() || refs_per_ns <= 0.0 {
                continue;
            }
            // Where the walk's chunk ends and its next one starts on another node, if the
            // chunk's rest lasts an epoch: a chunk end inside the window's first epoch is
            // one the epoch-by-epoch loop would not resolve either.
            if in_chunk < e.remaining() && in_chunk as f64 >= epoch_ns * refs_per_ns {
                let at = clock + in_chunk as f64 / refs_per_ns;
                let mut nodes = e
                    .lines_ahead([in_chunk - 1, in_chunk].into_iter())
                    .into_iter()
                    .flatten()
                    .map(|l| home.get((l >> shift) as usize).map(|&b| (b & NODE_MASK) as usize));
                if at < end
                    && matches!((nodes.next().flatten(), nodes.next().flatten()), (Some(a), Some(b)) if a != b && a < self.n && b < self.n)
                {
                    chunk_moves = Some(chunk_moves.map_or(at, |f: f64| f.min(at)));
                }
            }
            // Its pace on node `j` instead of `node`.
            let k = kind_index(e.kind);
            let rate_on = |j: usize| {
                let c = th.cost[k * self.n + j];
                if main {
                    e.remaining() as f64 / (here_ns + e.remaining() as f64 * (c - th.cost[k * self.n + node]))
                } else {
                    1.0 / c
                }
            };
            // How far its pages may reach in the window, within the chunk: at its fastest
            // pace on any node (the runs after a turn are read at their own nodes' pace).
            let fastest = (0..self.n).map(rate_on).filter(|r| r.is_finite() && *r > 0.0).fold(refs_per_ns, f64::max);
            let reach = (((end - clock) * fastest).ceil() as u64).min(in_chunk).min(e.remaining());
            let to_page_end = lines_per_page - (line & (lines_per_page - 1));
            if reach <= to_page_end {
                continue;
            }
            let to = (page + 1 + (reach - to_page_end).div_ceil(lines_per_page) as usize).min(home.len());
            let same = leading_equal_in(&home[(page + 1).min(to)..to], byte, NODE_MASK) as u64;
            let run = to_page_end + same * lines_per_page;
            if run >= reach
                || !*own_waits
                    .get_or_insert_with(|| (0..self.n).any(|j| self.cont.own_wait_ns(t, cpu_node, j) >= OWN_WAIT_MIN * latency_ns[j]))
            {
                continue;
            }
            // The first place where the walk's load moves: the end of a run that lasts an
            // epoch, or the start of one (the current run counted from here). Runs shorter
            // than an epoch on both sides of a turn (a page that a policy moved into
            // another node's run, pages interleaved page by page) move no load worth a
            // solve of its own and are read through; at most `RUNS_AHEAD` runs are looked
            // at. A move inside the window's first epoch makes that epoch a step of its own:
            // a longer window would solve for the runs' loads averaged over it, where the
            // epoch-by-epoch loop solves the move's epoch for both sides and the epochs after
            // it for the new node alone.
            let mut lasts = (run as f64) >= epoch_ns * refs_per_ns;
            let (mut at, mut ahead, mut next) = (clock + run as f64 / refs_per_ns, run, page + 1 + same as usize);
            let mut found = None;
            for _ in 0..RUNS_AHEAD {
                let Some(&next_byte) = home.get(next).filter(|_| next < to && ahead < reach) else { break };
                let next_node = (next_byte & NODE_MASK) as usize;
                if next_node >= self.n {
                    break; // unplaced: first touches, on the exact path
                }
                let next_same = leading_equal_in(&home[next + 1..to], next_byte, NODE_MASK);
                let next_run = (1 + next_same as u64) * lines_per_page;
                let next_rate = rate_on(next_node);
                if next_rate.is_nan() || next_rate <= 0.0 {
                    break;
                }
                let next_lasts = ahead + next_run >= reach || (next_run as f64) >= epoch_ns * next_rate;
                if lasts || next_lasts {
                    found = Some(at);
                    break;
                }
                (lasts, at, ahead, next) = (next_lasts, at + next_run as f64 / next_rate, ahead + next_run, next + 1 + next_same);
            }
            let Some(at) = found else { continue };
            first = Some(first.map_or(at, |f: f64| f.min(at)));
        }
        match (first, chunk_moves) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// A window past arrivals (docs/simulator.md, "Windows past arrivals"): each running
    /// thread predicted to reach its barrier inside `[start, end)` makes its references only
    /// up to its arrival, so its CPU share is the one over that part, not over the window (a
    /// background task on its CPU after it arrived, while it spins, takes nothing from its
    /// step; one before it takes from all of it). Each epoch weighs as in the epoch-by-epoch
    /// loop: whole epochs by their length, the one it arrives in (at its whole epoch's share)
    /// by the part of it the thread runs.
    pub(super) fn share_of_arrivals(&mut self, start: f64, end: f64, epoch_ns: f64) {
        for t in 0..self.threads.len() {
            // NaN (no arrival predicted) or at or past the end: the window's share holds.
            let arrive_ns = self.arrive_ns[t];
            if arrive_ns.is_nan() || arrive_ns >= end || self.states[t] != TaskState::Runnable {
                continue;
            }
            let last_start = start + ((arrive_ns - start) / epoch_ns).floor() * epoch_ns;
            let noise_ns = self.sched.noise_ns_on(t, start, last_start)
                + self.sched.noise_ns_on(t, last_start, last_start + epoch_ns).min(epoch_ns) * (arrive_ns - last_start) / epoch_ns;
            self.share[t] = self.sched.share_with(t, noise_ns / (arrive_ns - start));
        }
    }

    /// Take the policy's sampling period for this epoch. A thread's countdown starts (or
    /// restarts) when sampling is switched on or the period changes; a period shorter than
    /// one access samples every access.
    pub(super) fn update_sampling(&mut self, period_ns: Option<f64>) {
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

    /// Run the threads from `start` to `end`, a window of whole epochs. While the policy
    /// observes references one at a time (pages armed for hinting faults, access sampling,
    /// or per-node mappings whose faults it decides), a window of several epochs runs in
    /// lockstep, every thread one epoch at a time, as the epoch-by-epoch loop would: run
    /// thread after thread over the whole window, the first thread would take the hinting
    /// or mapping fault of every page it shares with the others, and a page-state machine
    /// would see each shared page as the first thread's (docs/simulator.md, "Fast-forward"). The window's other savings stay: one scheduler
    /// step, one contention solve, one round of services.
    pub(super) fn run_window(&mut self, drv: &mut Driver, start: f64, end: f64, epoch_ns: f64) -> Result<(), SimError> {
        let epochs = ((end - start) / epoch_ns).round() as u64;
        let observed = self.mem.armed_pages() > 0 || self.sample_period_ns.is_some() || self.maps.is_some();
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

    pub(super) fn run_epoch(&mut self, drv: &mut Driver, end: f64) -> Result<(), SimError> {
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
}

#[cfg(test)]
mod tests;
