//! A Linux-like scheduler: threads on CPUs, seeded background noise, idle and periodic load
//! balancing with the NUMA imbalance threshold. It creates the run-to-run variation real
//! machines show: a background task lands on a busy CPU, a CPU that goes idle at a barrier
//! pulls the displaced thread across nodes, and that thread's pages are now remote.

use crate::config::SchedConfig;
use numalab_core::rng::StreamRng;
use numalab_core::{CpuId, NodeId};
use rand::Rng;
use serde::Serialize;

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

/// Moves of one cause, within a node and across nodes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct CauseCount {
    pub in_node: u64,
    pub cross_node: u64,
}

/// Thread migrations by cause (metric `thread_migrations_by_cause`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct MigrationCounts {
    pub idle_balance: CauseCount,
    pub load_balance: CauseCount,
    pub wakeup: CauseCount,
    pub numa_move: CauseCount,
    pub numa_swap: CauseCount,
    pub cluster_move: CauseCount,
    pub cluster_swap: CauseCount,
    pub policy: CauseCount,
}

impl MigrationCounts {
    pub fn of(&self, cause: Cause) -> CauseCount {
        match cause {
            Cause::IdleBalance => self.idle_balance,
            Cause::LoadBalance => self.load_balance,
            Cause::Wakeup => self.wakeup,
            Cause::NumaMove => self.numa_move,
            Cause::NumaSwap => self.numa_swap,
            Cause::ClusterMove => self.cluster_move,
            Cause::ClusterSwap => self.cluster_swap,
            Cause::Policy => self.policy,
        }
    }
    fn slot(&mut self, cause: Cause) -> &mut CauseCount {
        match cause {
            Cause::IdleBalance => &mut self.idle_balance,
            Cause::LoadBalance => &mut self.load_balance,
            Cause::Wakeup => &mut self.wakeup,
            Cause::NumaMove => &mut self.numa_move,
            Cause::NumaSwap => &mut self.numa_swap,
            Cause::ClusterMove => &mut self.cluster_move,
            Cause::ClusterSwap => &mut self.cluster_swap,
            Cause::Policy => &mut self.policy,
        }
    }
    /// Every CPU change (Linux's `se.nr_migrations`).
    pub fn total(&self) -> u64 {
        Cause::ALL.iter().map(|&c| self.of(c).in_node + self.of(c).cross_node).sum()
    }
    pub fn cross_node(&self) -> u64 {
        Cause::ALL.iter().map(|&c| self.of(c).cross_node).sum()
    }
    pub fn count(&mut self, cause: Cause, cross: bool) {
        let c = self.slot(cause);
        if cross {
            c.cross_node += 1;
        } else {
            c.in_node += 1;
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Noise {
    cpu: CpuId,
    start_ns: f64,
    end_ns: f64,
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

pub struct Scheduler {
    cfg: SchedConfig,
    node_of_cpu: Vec<NodeId>,
    core_of_cpu: Vec<u32>,
    nodes: usize,
    pub cpu_of: Vec<CpuId>,
    pinned: bool,
    noise: Vec<Noise>,
    next_noise_ns: f64,
    next_balance_ns: f64,
    rng: StreamRng,
    pub migrations: MigrationCounts,
    /// Scratch: runnable threads per CPU.
    load: Vec<u32>,
    preferred: Vec<Option<NodeId>>,
}

impl Scheduler {
    pub fn new(
        cfg: SchedConfig,
        node_of_cpu: Vec<NodeId>,
        core_of_cpu: Vec<u32>,
        initial: Vec<CpuId>,
        pinned: bool,
        rng: StreamRng,
    ) -> Scheduler {
        let nodes = node_of_cpu.iter().map(|&n| n as usize + 1).max().unwrap_or(1);
        let cpus = node_of_cpu.len();
        let threads = initial.len();
        let mut s = Scheduler {
            next_balance_ns: cfg.balance_interval_ms * 1e6,
            cfg,
            node_of_cpu,
            core_of_cpu,
            nodes,
            cpu_of: initial,
            pinned,
            noise: Vec::new(),
            next_noise_ns: 0.0,
            rng,
            migrations: MigrationCounts::default(),
            load: vec![0; cpus],
            preferred: vec![None; threads],
        };
        s.next_noise_ns = s.draw_interarrival();
        s
    }

    fn draw_interarrival(&mut self) -> f64 {
        let rate_per_ns = self.cfg.noise_rate_per_cpu_hz * self.node_of_cpu.len() as f64 * 1e-9;
        if rate_per_ns <= 0.0 || self.cfg.noise_mean_us <= 0.0 {
            return f64::INFINITY;
        }
        let u: f64 = self.rng.random::<f64>();
        -(1.0 - u).ln() / rate_per_ns
    }

    pub fn node_of_thread(&self, t: u32) -> NodeId {
        self.node_of_cpu[self.cpu_of[t as usize] as usize]
    }

    fn recount(&mut self, states: &[TaskState]) {
        self.load.iter_mut().for_each(|l| *l = 0);
        for (t, st) in states.iter().enumerate() {
            if st.on_cpu() {
                self.load[self.cpu_of[t] as usize] += 1;
            }
        }
    }

    fn noise_on(&self, cpu: usize, at_ns: f64) -> bool {
        self.noise.iter().any(|n| n.cpu as usize == cpu && n.start_ns <= at_ns && n.end_ns > at_ns)
    }

    /// Advance to the epoch `[start, end)`: start background tasks, balance load. Returns the
    /// moves made; `share` receives each thread's CPU share for the epoch.
    pub fn epoch(&mut self, start: f64, end: f64, states: &[TaskState], share: &mut [f64], moves: &mut Vec<Move>) {
        moves.clear();
        self.noise.retain(|n| n.end_ns > start);
        self.recount(states);
        // New background tasks; one waking on a busy CPU goes to an idle CPU of the same node
        // if there is one (Linux wakes tasks on idle siblings).
        while self.next_noise_ns < end {
            let at = self.next_noise_ns;
            let cpus = self.node_of_cpu.len();
            let mut cpu = self.rng.random_range(0..cpus);
            let dur = -(1.0 - self.rng.random::<f64>()).ln() * self.cfg.noise_mean_us * 1e3;
            if self.load[cpu] > 0 {
                let node = self.node_of_cpu[cpu];
                if let Some(idle) = (0..cpus).find(|&c| self.node_of_cpu[c] == node && self.load[c] == 0 && !self.noise_on(c, at)) {
                    cpu = idle;
                }
            }
            self.noise.push(Noise { cpu: cpu as CpuId, start_ns: at, end_ns: at + dur });
            self.next_noise_ns = at + self.draw_interarrival();
        }
        if !self.pinned {
            if self.cfg.idle_balance {
                self.idle_balance(states, start, moves);
            }
            if start >= self.next_balance_ns {
                self.next_balance_ns = start + self.cfg.balance_interval_ms * 1e6;
                self.periodic_balance(states, start, moves);
            }
        }
        // Shares: time-slice with the other runnable threads and the noise on the CPU.
        self.recount(states);
        let len = end - start;
        let mut noise_frac = vec![0.0f64; self.node_of_cpu.len()];
        for n in &self.noise {
            let overlap = (n.end_ns.min(end) - n.start_ns.max(start)).max(0.0);
            noise_frac[n.cpu as usize] = (noise_frac[n.cpu as usize] + overlap / len).min(1.0);
        }
        // Busy SMT siblings share a core; the engine applies smt_share to compute only, so
        // here we only count who shares a CPU.
        // A thread blocked now (at a barrier) may be released during the epoch; it then
        // shares its CPU like a runnable thread, so it gets the share it would have.
        for (t, s) in share.iter_mut().enumerate() {
            let cpu = self.cpu_of[t] as usize;
            let k = (self.load[cpu] + u32::from(!states[t].on_cpu())) as f64;
            let o = noise_frac[cpu];
            *s = (1.0 - o) / k + o / (k + 1.0);
        }
    }

    /// Whether thread `t`'s core has another busy hardware thread.
    pub fn smt_busy(&self, t: u32) -> bool {
        let cpu = self.cpu_of[t as usize] as usize;
        let core = self.core_of_cpu[cpu];
        self.core_of_cpu.iter().enumerate().any(|(c, &k)| k == core && c != cpu && self.load[c] > 0)
    }

    fn busy(&self, cpu: usize, at: f64) -> u32 {
        self.load[cpu] + u32::from(self.noise_on(cpu, at))
    }

    fn node_load(&self, node: usize, at: f64) -> (u32, u32) {
        let mut load = 0;
        let mut cpus = 0;
        for c in 0..self.node_of_cpu.len() {
            if self.node_of_cpu[c] as usize == node {
                load += self.busy(c, at);
                cpus += 1;
            }
        }
        (load, cpus)
    }

    /// A queued (not running) thread of `cpu`: with two tasks on a CPU one waits, and Linux
    /// migrates only waiting tasks. The highest-numbered thread is taken [ours].
    fn movable_thread(&self, cpu: usize, states: &[TaskState]) -> Option<u32> {
        (0..self.cpu_of.len()).rev().find(|&t| states[t] == TaskState::Runnable && self.cpu_of[t] as usize == cpu).map(|t| t as u32)
    }

    fn do_move(&mut self, t: u32, to: usize, cause: Cause, at: f64, moves: &mut Vec<Move>) {
        let from = self.cpu_of[t as usize] as usize;
        let cross = self.node_of_cpu[from] != self.node_of_cpu[to];
        self.cpu_of[t as usize] = to as CpuId;
        self.load[from] -= 1;
        self.load[to] += 1;
        self.migrations.count(cause, cross);
        moves.push(Move { thread: t, from: from as CpuId, to: to as CpuId, cross_node: cross, cause, at_ns: at });
    }

    fn idle_balance(&mut self, states: &[TaskState], at: f64, moves: &mut Vec<Move>) {
        let cpus = self.node_of_cpu.len();
        for idle in 0..cpus {
            if self.busy(idle, at) > 0 {
                continue;
            }
            let node = self.node_of_cpu[idle] as usize;
            // Same node first, then the busiest other node if the NUMA threshold allows.
            let local = (0..cpus)
                .filter(|&c| self.node_of_cpu[c] as usize == node && self.load[c] > 0 && self.busy(c, at) >= 2)
                .max_by_key(|&c| (self.busy(c, at), std::cmp::Reverse(c)));
            let src = local.or_else(|| {
                let (dl, dc) = self.node_load(node, at);
                (0..cpus)
                    .filter(|&c| self.node_of_cpu[c] as usize != node && self.load[c] > 0 && self.busy(c, at) >= 2)
                    .filter(|&c| {
                        let (sl, sc) = self.node_load(self.node_of_cpu[c] as usize, at);
                        (sl as u64) * 100 * dc as u64 > (dl as u64 + 1) * self.cfg.imbalance_pct as u64 * sc as u64
                    })
                    .max_by_key(|&c| (self.busy(c, at), std::cmp::Reverse(c)))
            });
            if let Some(src) = src {
                if let Some(t) = self.movable_thread(src, states) {
                    self.do_move(t, idle, Cause::IdleBalance, at, moves);
                }
            }
        }
    }

    fn periodic_balance(&mut self, states: &[TaskState], at: f64, moves: &mut Vec<Move>) {
        let cpus = self.node_of_cpu.len();
        // Between nodes: busiest vs least loaded (per CPU), Linux's imbalance_pct rule.
        let loads: Vec<(u32, u32)> = (0..self.nodes).map(|n| self.node_load(n, at)).collect();
        let per_cpu = |n: usize| if loads[n].1 == 0 { f64::NAN } else { loads[n].0 as f64 / loads[n].1 as f64 };
        let nodes_with_cpus: Vec<usize> = (0..self.nodes).filter(|&n| loads[n].1 > 0).collect();
        if let (Some(&busiest), Some(&idlest)) = (
            nodes_with_cpus.iter().max_by(|&&a, &&b| per_cpu(a).total_cmp(&per_cpu(b)).then(b.cmp(&a))),
            nodes_with_cpus.iter().min_by(|&&a, &&b| per_cpu(a).total_cmp(&per_cpu(b)).then(a.cmp(&b))),
        ) {
            if busiest != idlest && per_cpu(busiest) * 100.0 > per_cpu(idlest) * self.cfg.imbalance_pct as f64 {
                let src = (0..cpus)
                    .filter(|&c| self.node_of_cpu[c] as usize == busiest && self.load[c] > 0 && self.busy(c, at) >= 2)
                    .max_by_key(|&c| (self.busy(c, at), std::cmp::Reverse(c)));
                let dst = (0..cpus).filter(|&c| self.node_of_cpu[c] as usize == idlest).min_by_key(|&c| (self.busy(c, at), c));
                if let (Some(src), Some(dst)) = (src, dst) {
                    if self.busy(dst, at) + 1 < self.busy(src, at) {
                        if let Some(t) = self.movable_thread(src, states) {
                            self.do_move(t, dst, Cause::LoadBalance, at, moves);
                        }
                    }
                }
            }
        }
        // Within each node: spread CPUs with two or more threads onto idle CPUs.
        for src in 0..cpus {
            while self.load[src] >= 2 {
                let node = self.node_of_cpu[src];
                let Some(dst) = (0..cpus).find(|&c| self.node_of_cpu[c] == node && self.busy(c, at) == 0) else { break };
                let Some(t) = self.movable_thread(src, states) else { break };
                self.do_move(t, dst, Cause::LoadBalance, at, moves);
            }
        }
    }

    /// A sleeping thread wakes at `at` (a barrier released). The skeleton keeps it on its CPU;
    /// `select_idle_sibling` placement is part of the faithful scheduler.
    pub fn wake(&mut self, _t: u32, _at: f64, _states: &[TaskState], _moves: &mut Vec<Move>) {}

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
        if self.pinned {
            return Err(Refusal::Pinned);
        }
        if t as usize >= self.cpu_of.len() || node as usize >= self.nodes {
            return Err(Refusal::NoSuchTarget);
        }
        self.recount(states);
        let cpus = self.node_of_cpu.len();
        let dst = match cpu {
            Some(c) if (c as usize) < cpus && self.node_of_cpu[c as usize] == node => c as usize,
            Some(_) => return Err(Refusal::NoSuchTarget),
            None => {
                (0..cpus).filter(|&c| self.node_of_cpu[c] == node).min_by_key(|&c| (self.busy(c, at), c)).ok_or(Refusal::NoSuchTarget)?
            }
        };
        if dst == self.cpu_of[t as usize] as usize {
            return Err(Refusal::AlreadyThere);
        }
        let from = self.cpu_of[t as usize];
        let cross = self.node_of_cpu[from as usize] != node;
        self.cpu_of[t as usize] = dst as CpuId;
        self.migrations.count(cause, cross);
        Ok(Move { thread: t, from, to: dst as CpuId, cross_node: cross, cause, at_ns: at })
    }

    /// Exchange the CPUs of two threads (a policy decision).
    pub fn swap(&mut self, a: u32, b: u32, cause: Cause, at: f64) -> Result<(Move, Move), Refusal> {
        if self.pinned {
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
        self.node_of_cpu.iter().filter(|&&n| n == node).count() as u32
    }

    /// Tasks on the node's CPUs at `at` (workload threads on a CPU and background tasks), as
    /// of the last epoch's states.
    pub fn nr_running(&self, node: NodeId, at: f64) -> u32 {
        (0..self.node_of_cpu.len()).filter(|&c| self.node_of_cpu[c] == node).map(|c| self.busy(c, at)).sum()
    }

    /// The workload thread current on `cpu` (the lowest-numbered one on it) [ours].
    pub fn current_thread(&self, cpu: CpuId, states: &[TaskState]) -> Option<u32> {
        (0..self.cpu_of.len()).find(|&t| states[t].on_cpu() && self.cpu_of[t] == cpu).map(|t| t as u32)
    }

    pub fn cpu_idle(&self, cpu: CpuId, at: f64) -> bool {
        self.busy(cpu as usize, at) == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sched(cfg: SchedConfig, initial: Vec<CpuId>) -> Scheduler {
        // 2 nodes x 2 CPUs.
        Scheduler::new(cfg, vec![0, 0, 1, 1], vec![0, 1, 2, 3], initial, false, numalab_core::rng::stream(1, "t", 0))
    }

    fn quiet() -> SchedConfig {
        SchedConfig { noise_rate_per_cpu_hz: 0.0, ..SchedConfig::default() }
    }

    #[test]
    fn an_idle_cpu_pulls_a_doubled_up_thread_on_its_node_first() {
        let mut s = sched(quiet(), vec![0, 0, 2, 3]);
        let mut share = vec![0.0; 4];
        let mut moves = Vec::new();
        s.epoch(0.0, 1000.0, &[TaskState::Runnable; 4], &mut share, &mut moves);
        assert_eq!(moves, vec![Move { thread: 1, from: 0, to: 1, cross_node: false, cause: Cause::IdleBalance, at_ns: 0.0 }]);
        assert_eq!(share, vec![1.0; 4]);
        assert_eq!(s.migrations.idle_balance.in_node, 1);
    }

    #[test]
    fn cross_node_pull_respects_the_imbalance_threshold() {
        // Node 0 has 3 threads on 2 CPUs, node 1 one idle CPU: 3*100*2 > (1+1)*117*2 -> pull.
        let mut s = sched(quiet(), vec![0, 0, 1, 2]);
        let mut share = vec![0.0; 4];
        let mut moves = Vec::new();
        s.epoch(0.0, 1000.0, &[TaskState::Runnable; 4], &mut share, &mut moves);
        assert_eq!(moves.len(), 1);
        assert!(moves[0].cross_node);
        assert_eq!(moves[0].to, 3);
        // Blocked threads free their CPUs: nothing to balance.
        let mut s = sched(quiet(), vec![0, 0, 2, 3]);
        s.epoch(0.0, 1000.0, &[TaskState::Runnable, TaskState::Sleeping, TaskState::Runnable, TaskState::Runnable], &mut share, &mut moves);
        assert!(moves.is_empty());
        assert_eq!(share[1], 0.5, "released mid-epoch, a blocked thread would share CPU 0 with thread 0");
    }

    #[test]
    fn pinned_threads_never_move_and_share_cpus() {
        let mut s = Scheduler::new(quiet(), vec![0, 0, 1, 1], vec![0, 1, 2, 3], vec![0, 0], true, numalab_core::rng::stream(1, "t", 0));
        let mut share = vec![0.0; 2];
        let mut moves = Vec::new();
        s.epoch(0.0, 1000.0, &[TaskState::Runnable; 2], &mut share, &mut moves);
        assert!(moves.is_empty());
        assert_eq!(share, vec![0.5, 0.5]);
    }

    #[test]
    fn noise_is_seeded_and_takes_cpu_time() {
        let cfg = SchedConfig { noise_rate_per_cpu_hz: 2e5, noise_mean_us: 5.0, idle_balance: false, ..SchedConfig::default() };
        let run = || {
            let mut s = sched(cfg.clone(), vec![0, 1, 2, 3]);
            let mut share = vec![0.0; 4];
            let mut moves = Vec::new();
            let mut total = 0.0;
            for e in 0..100 {
                s.epoch(e as f64 * 1e4, (e + 1) as f64 * 1e4, &[TaskState::Runnable; 4], &mut share, &mut moves);
                total += share.iter().sum::<f64>();
            }
            total
        };
        let a = run();
        assert_eq!(a, run());
        assert!(a < 400.0 * 0.99, "noise must steal time: {a}");
    }
}
