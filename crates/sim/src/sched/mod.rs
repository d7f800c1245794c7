//! A model of the Linux CFS scheduler's placement of threads (docs/scheduler.md): run queues
//! with time slices, background tasks that preempt in place or wake on idle siblings,
//! newidle balancing gated by the CPU's average idle time, periodic balancing per scheduling
//! domain at growing intervals, cache-hot and locality vetoes with their failure overrides,
//! the NUMA imbalance allowance, and wake-up placement on an idle sibling. It creates the
//! run-to-run variation real machines show, at the rates they show it.

mod balance;
mod counts;
mod noise;
mod replay;
#[cfg(test)]
mod tests;

use crate::config::SchedConfig;
pub use counts::{CauseCount, MigrationCounts};
use noise::Noise;
use numalab_core::rng::StreamRng;
use numalab_core::{CpuId, NodeId};
pub use numalab_policy::MoveCause as Cause;
use numalab_policy::Refusal;

/// What a workload thread is doing, as the engine tells the scheduler at each epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskState {
    /// Has work: it runs or waits in its CPU's run queue.
    Runnable,
    /// Waits at a barrier but busy-waits (an OpenMP runtime spins before it sleeps): it holds
    /// its CPU, cannot be pulled, and its CPU is not idle.
    Spinning,
    /// Waits at a barrier asleep: its CPU is free; it is woken (and placed) at the release.
    Sleeping,
    Done,
}

impl TaskState {
    /// Occupies its CPU (counts in `nr_running`).
    pub fn on_cpu(self) -> bool {
        matches!(self, TaskState::Runnable | TaskState::Spinning)
    }
}

/// A completed move, for the engine to charge the cache refill.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Move {
    pub thread: u32,
    pub from: CpuId,
    pub to: CpuId,
    pub cross_node: bool,
    pub cause: Cause,
    pub at_ns: f64,
}

/// The wake-up's sibling search for a background task (`select_idle_sibling`): an idle CPU of
/// `cpu`'s node when `cpu` is busy (a thread on it, `load`, or a task `running` at `at`).
fn idle_sibling<'s>(
    load: &'s [u32],
    node_of_cpu: &'s [NodeId],
    cpus_of_node: &'s [Vec<usize>],
) -> impl Fn(usize, f64, &[noise::NoiseTask]) -> Option<usize> + 's {
    move |cpu: usize, at: f64, running: &[noise::NoiseTask]| {
        let busy = |c: usize| load[c] > 0 || running.iter().any(|n| n.cpu == c && n.start_ns <= at && n.end_ns > at);
        if !busy(cpu) {
            return None;
        }
        cpus_of_node[node_of_cpu[cpu] as usize].iter().copied().find(|&c| !busy(c))
    }
}

pub struct Scheduler {
    cfg: SchedConfig,
    node_of_cpu: Vec<NodeId>,
    core_of_cpu: Vec<u32>,
    cpus_of_node: Vec<Vec<usize>>,
    pub cpu_of: Vec<CpuId>,
    pinned: bool,
    /// Pinned, but the policy places the threads (`DynPolicy::moves_pinned_threads`): its
    /// moves and swaps are carried out, the balancer and wake-up placement stay off.
    policy_places: bool,
    noise: Noise,
    rng: StreamRng,
    pub migrations: MigrationCounts,
    preferred: Vec<Option<NodeId>>,
    /// Per CPU: workload threads on it (running, waiting or spinning), as of the last count.
    load: Vec<u32>,
    /// Per CPU: background tasks running at the epoch's start.
    noise_now: Vec<u32>,
    /// When the policy daemon finishes the work it was given (`run_daemon`).
    daemon_busy_until: f64,
    /// Per CPU: since when it is idle (`None` while busy), and its average idle time
    /// (`rq->avg_idle`).
    idle_since: Vec<Option<f64>>,
    avg_idle_ns: Vec<f64>,
    /// Per CPU and domain level: when it balances next, its interval, failed attempts.
    balance: Vec<[balance::DomainState; 2]>,
    /// Per thread: when it arrived on its CPU (its place in the CPU's rotation).
    arrived_ns: Vec<f64>,
    /// Per thread: the workload threads it time-slices its CPU with, itself included, as
    /// counted at the last window's start (`epoch`).
    partners: Vec<f64>,
}

impl Scheduler {
    pub fn new(
        cfg: SchedConfig,
        node_of_cpu: Vec<NodeId>,
        core_of_cpu: Vec<u32>,
        initial: Vec<CpuId>,
        pinned: bool,
        mut rng: StreamRng,
    ) -> Scheduler {
        let nodes = node_of_cpu.iter().map(|&n| n as usize + 1).max().unwrap_or(1);
        let cpus = node_of_cpu.len();
        let threads = initial.len();
        let cpus_of_node = (0..nodes).map(|n| (0..cpus).filter(|&c| node_of_cpu[c] as usize == n).collect()).collect();
        let noise = Noise::new(cfg.noise_rate_per_cpu_hz, cfg.noise_mean_us, cfg.noise_bound_share, cpus, &mut rng);
        let migration_cost_ns = cfg.migration_cost_us * 1e3;
        let mut s = Scheduler {
            cfg,
            node_of_cpu,
            core_of_cpu,
            cpus_of_node,
            cpu_of: initial,
            pinned,
            policy_places: false,
            noise,
            rng,
            migrations: MigrationCounts::default(),
            preferred: vec![None; threads],
            load: vec![0; cpus],
            noise_now: vec![0; cpus],
            partners: vec![1.0; threads],
            daemon_busy_until: 0.0,
            idle_since: vec![None; cpus],
            // Linux starts every run queue with avg_idle = 2 × sysctl_sched_migration_cost.
            avg_idle_ns: vec![2.0 * migration_cost_ns; cpus],
            balance: Vec::new(),
            arrived_ns: vec![0.0; threads],
        };
        s.balance = (0..cpus).map(|c| s.domain_states(c)).collect();
        s
    }

    pub fn node_of_thread(&self, t: u32) -> NodeId {
        self.node_of_cpu[self.cpu_of[t as usize] as usize]
    }

    /// Per CPU, the workload threads on it (running, waiting or spinning) in `states`.
    fn recount(&mut self, states: &[TaskState]) {
        self.load.iter_mut().for_each(|l| *l = 0);
        for (t, st) in states.iter().enumerate() {
            if st.on_cpu() {
                self.load[self.cpu_of[t] as usize] += 1;
            }
        }
    }

    /// Tasks on a CPU: workload threads and background tasks (`rq->nr_running`).
    fn nr(&self, cpu: usize) -> u32 {
        self.load[cpu] + self.noise_now[cpu]
    }

    fn idle(&self, cpu: usize) -> bool {
        self.nr(cpu) == 0
    }

    /// When the scheduler next has work it does at an epoch's start that a fast-forward window
    /// cannot replay (docs/simulator.md, "Fast-forward"): a periodic balance falls due. The
    /// window ends at the grid point at or after it, the first epoch start at which the
    /// epoch-by-epoch loop would balance. What background tasks change inside a window is
    /// replayed by [`Scheduler::epoch`], which ends the window early where a newidle balance
    /// would move a thread.
    pub fn next_event(&self) -> f64 {
        let mut due_ns = f64::INFINITY;
        if !self.pinned {
            // A plain comparison, not `f64::min`: the times are never NaN, and this loop over
            // every CPU's domains runs once per window.
            for d in self.balance.iter().flatten() {
                if d.weight > 0 && d.next_ns < due_ns {
                    due_ns = d.next_ns;
                }
            }
        }
        due_ns
    }

    /// Start the background tasks that arrive before `until`; an unbound one wakes on an idle
    /// CPU of its node if any, seen from the threads' CPUs as last counted.
    fn arrive(&mut self, until: f64) {
        let cpus = self.node_of_cpu.len();
        self.noise.arrive(until, &mut self.rng, cpus, idle_sibling(&self.load, &self.node_of_cpu, &self.cpus_of_node));
    }

    /// Fold whether CPU `c` is idle at `at` into its idle bookkeeping: a CPU that goes idle
    /// updates nothing yet; one that stops being idle folds the idle period into its average
    /// (Linux's update_avg, weight 1/8). Returns whether it just went idle.
    fn idle_transition(&mut self, c: usize, at: f64) -> bool {
        match (self.idle(c), self.idle_since[c]) {
            (true, None) => {
                self.idle_since[c] = Some(at);
                true
            }
            (false, Some(since)) => {
                let sample = (at - since).min(2.0 * self.cfg.migration_cost_us * 1e3 * 10.0);
                self.avg_idle_ns[c] += (sample - self.avg_idle_ns[c]) / 8.0;
                self.idle_since[c] = None;
                false
            }
            _ => false,
        }
    }

    /// Advance over the window `[start, end)` of whole epochs of `epoch_ns`: one epoch, or a
    /// fast-forward window (docs/simulator.md, "Fast-forward"). At `start`: start background
    /// tasks, fold idle transitions, balance load. Inside the window no thread changes its CPU,
    /// and only background tasks and the threads of `naps` change which CPUs are idle: each
    /// `(thread, at)` of `naps` waits (spinning) at `start` and goes to sleep at `at`. The
    /// window's inner epoch starts are replayed as the epoch-by-epoch loop would run them
    /// ([`Scheduler::replay_inner`]). Returns where the window ends: `end`, or the first inner
    /// epoch start at which the loop would move a thread or change a thread's CPU share, where
    /// the next window must begin. `share` receives each thread's CPU share over the window,
    /// `moves` the moves made at `start`.
    #[allow(clippy::too_many_arguments)]
    pub fn epoch(
        &mut self,
        start: f64,
        end: f64,
        epoch_ns: f64,
        states: &[TaskState],
        naps: &[(usize, f64)],
        share: &mut [f64],
        moves: &mut Vec<Move>,
    ) -> f64 {
        moves.clear();
        self.noise.expire(start);
        self.recount(states);
        let cpus = self.node_of_cpu.len();
        // The first epoch's new background tasks, placed before this start's balancing, as
        // the epoch-by-epoch loop places them.
        let first_end = (start + epoch_ns).min(end);
        self.arrive(first_end);
        for c in 0..cpus {
            self.noise_now[c] = u32::from(self.noise.running_on(c, start).is_some());
        }
        let newly_idle: Vec<usize> = (0..cpus).filter(|&c| self.idle_transition(c, start)).collect();
        if !self.pinned {
            if self.cfg.idle_balance {
                for c in newly_idle {
                    self.newidle_balance(c, start, states, moves);
                }
            }
            self.periodic_balance(start, states, moves);
        }
        self.recount(states);
        // Each thread's time-slicing partners, counted now: a window keeps them (a nap that
        // would change them ends it).
        for (t, k) in self.partners.iter_mut().enumerate() {
            *k = (self.load[self.cpu_of[t] as usize] + u32::from(!states[t].on_cpu())) as f64;
        }
        let end = if end > first_end { self.replay_inner(start, end, epoch_ns, states, naps, moves) } else { end };
        // Shares: time-slice with the other threads and the background tasks on the CPU.
        let len = end - start;
        let mut noise_frac = vec![0.0f64; cpus];
        for n in &self.noise.tasks {
            let overlap = (n.end_ns.min(end) - n.start_ns.max(start)).max(0.0);
            noise_frac[n.cpu] = (noise_frac[n.cpu] + overlap / len).min(1.0);
        }
        // A thread blocked now may be released during the epoch; it then shares its CPU like
        // a runnable thread, so it gets the share it would have.
        for (t, s) in share.iter_mut().enumerate() {
            *s = self.share_with(t, noise_frac[self.cpu_of[t] as usize]);
        }
        end
    }

    /// Thread `t`'s CPU share in the window just run (`epoch`) over a time in which background
    /// tasks hold its CPU for the fraction `noise_frac`: it time-slices with its partners and,
    /// while a background task runs there, with that task too.
    pub fn share_with(&self, t: usize, noise_frac: f64) -> f64 {
        let (k, o) = (self.partners[t], noise_frac.min(1.0));
        (1.0 - o) / k + o / (k + 1.0)
    }

    /// How long background tasks run on thread `t`'s CPU within `[from, to)` (summed over the
    /// tasks, which may overlap).
    pub fn noise_ns_on(&self, t: usize, from: f64, to: f64) -> f64 {
        let cpu = self.cpu_of[t] as usize;
        self.noise.tasks.iter().filter(|n| n.cpu == cpu).map(|n| (n.end_ns.min(to) - n.start_ns.max(from)).max(0.0)).sum()
    }

    /// Run a daemon's work (a policy's periodic decisions; docs/simulator.md, "Who pays for
    /// a policy's work"): an unbound task woken on `cpu` at `at` that runs for `dur_ns`. Like
    /// any unbound task it takes an idle CPU of that node if there is one, else shares `cpu`
    /// with what runs there. The daemon is one thread: work handed to it while it is still
    /// busy starts when the earlier work ends.
    pub fn run_daemon(&mut self, cpu: usize, at: f64, dur_ns: f64) {
        if dur_ns.is_nan() || dur_ns <= 0.0 {
            return;
        }
        let start = at.max(self.daemon_busy_until);
        let busy = |c: usize| self.load[c] > 0 || self.noise.running_on(c, start).is_some();
        let cpu = if busy(cpu) {
            self.cpus_of_node[self.node_of_cpu[cpu] as usize].iter().copied().find(|&c| !busy(c)).unwrap_or(cpu)
        } else {
            cpu
        };
        self.daemon_busy_until = start + dur_ns;
        self.noise.tasks.push(noise::NoiseTask { cpu, start_ns: start, end_ns: start + dur_ns });
    }

    /// Whether thread `t`'s core has another busy hardware thread.
    pub fn smt_busy(&self, t: u32) -> bool {
        let cpu = self.cpu_of[t as usize] as usize;
        let core = self.core_of_cpu[cpu];
        self.core_of_cpu.iter().enumerate().any(|(c, &k)| k == core && c != cpu && self.load[c] > 0)
    }

    fn do_move(&mut self, t: u32, to: usize, cause: Cause, at: f64, moves: &mut Vec<Move>) {
        let from = self.cpu_of[t as usize] as usize;
        let cross = self.node_of_cpu[from] != self.node_of_cpu[to];
        self.cpu_of[t as usize] = to as CpuId;
        self.load[from] -= 1;
        self.load[to] += 1;
        self.arrived_ns[t as usize] = at;
        self.migrations.count(cause, cross);
        moves.push(Move { thread: t, from: from as CpuId, to: to as CpuId, cross_node: cross, cause, at_ns: at });
    }

    /// Move a thread to `cpu` (which must be on `node`) or to the least busy CPU of `node`
    /// (a policy decision).
    pub fn move_thread(
        &mut self,
        t: u32,
        node: NodeId,
        cpu: Option<CpuId>,
        cause: Cause,
        states: &[TaskState],
        at: f64,
    ) -> Result<Move, Refusal> {
        if self.pinned && !self.policy_places {
            return Err(Refusal::Pinned);
        }
        if t as usize >= self.cpu_of.len() || node as usize >= self.cpus_of_node.len() {
            return Err(Refusal::NoSuchTarget);
        }
        self.recount(states);
        let dst = match cpu {
            Some(c) if (c as usize) < self.node_of_cpu.len() && self.node_of_cpu[c as usize] == node => c as usize,
            Some(_) => return Err(Refusal::NoSuchTarget),
            None => self.cpus_of_node[node as usize].iter().copied().min_by_key(|&c| (self.nr(c), c)).ok_or(Refusal::NoSuchTarget)?,
        };
        if dst == self.cpu_of[t as usize] as usize {
            return Err(Refusal::AlreadyThere);
        }
        let from = self.cpu_of[t as usize];
        let cross = self.node_of_cpu[from as usize] != node;
        self.cpu_of[t as usize] = dst as CpuId;
        self.arrived_ns[t as usize] = at;
        self.migrations.count(cause, cross);
        Ok(Move { thread: t, from, to: dst as CpuId, cross_node: cross, cause, at_ns: at })
    }

    /// Exchange the CPUs of two threads (a policy decision).
    pub fn swap(&mut self, a: u32, b: u32, cause: Cause, at: f64) -> Result<(Move, Move), Refusal> {
        if self.pinned && !self.policy_places {
            return Err(Refusal::Pinned);
        }
        if a as usize >= self.cpu_of.len() || b as usize >= self.cpu_of.len() {
            return Err(Refusal::NoSuchTarget);
        }
        let (ca, cb) = (self.cpu_of[a as usize], self.cpu_of[b as usize]);
        if a == b || ca == cb {
            return Err(Refusal::AlreadyThere);
        }
        let cross = self.node_of_cpu[ca as usize] != self.node_of_cpu[cb as usize];
        self.cpu_of.swap(a as usize, b as usize);
        self.arrived_ns[a as usize] = at;
        self.arrived_ns[b as usize] = at;
        self.migrations.count(cause, cross);
        self.migrations.count(cause, cross);
        Ok((
            Move { thread: a, from: ca, to: cb, cross_node: cross, cause, at_ns: at },
            Move { thread: b, from: cb, to: ca, cross_node: cross, cause, at_ns: at },
        ))
    }

    /// The node the balancer should keep `t` on (`numa_preferred_nid`).
    pub fn set_preferred(&mut self, t: u32, node: Option<NodeId>) {
        self.preferred[t as usize] = node;
    }

    pub fn preferred(&self, t: u32) -> Option<NodeId> {
        self.preferred[t as usize]
    }

    /// Let the policy move pinned threads (`DynPolicy::moves_pinned_threads`).
    pub fn let_policy_place(&mut self) {
        self.policy_places = true;
    }

    pub fn pinned(&self) -> bool {
        self.pinned
    }

    pub fn cpu_count(&self) -> usize {
        self.node_of_cpu.len()
    }

    pub fn node_of_cpu(&self, cpu: CpuId) -> NodeId {
        self.node_of_cpu[cpu as usize]
    }

    pub fn node_cpu_count(&self, node: NodeId) -> u32 {
        self.cpus_of_node.get(node as usize).map_or(0, |c| c.len() as u32)
    }

    /// Tasks on the node's CPUs (workload threads on a CPU and background tasks), as of the
    /// last epoch's count.
    pub fn nr_running(&self, node: NodeId, _at: f64) -> u32 {
        self.cpus_of_node.get(node as usize).map_or(0, |cs| cs.iter().map(|&c| self.nr(c)).sum())
    }

    /// The workload thread current on `cpu` (the lowest-numbered one on it) [ours].
    pub fn current_thread(&self, cpu: CpuId, states: &[TaskState]) -> Option<u32> {
        (0..self.cpu_of.len()).find(|&t| states[t].on_cpu() && self.cpu_of[t] == cpu).map(|t| t as u32)
    }

    pub fn cpu_idle(&self, cpu: CpuId, _at: f64) -> bool {
        self.idle(cpu as usize)
    }
}
