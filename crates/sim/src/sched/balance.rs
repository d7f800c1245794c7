//! Load balancing (docs/scheduler.md): two scheduling-domain levels, MC (the CPUs of one node,
//! which share a last-level cache) and NUMA (the whole machine, groups = nodes); periodic
//! balancing at per-domain intervals, newidle balancing, the cache-hot and locality vetoes and
//! their overrides after failed attempts, active balancing, and wake-up placement.

use super::{Cause, Move, Scheduler, TaskState};

/// Domain levels.
pub const MC: usize = 0;
pub const NUMA: usize = 1;

/// One CPU's view of one domain (`struct sched_domain`'s balancing fields).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DomainState {
    /// CPUs the domain spans (`span_weight`); 0 when the level does not exist.
    pub weight: u32,
    pub interval_ms: f64,
    pub next_ns: f64,
    /// Consecutive failed attempts (`nr_balance_failed`).
    pub failed: u32,
}

/// What a balancing attempt found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// No imbalance worth acting on.
    Balanced,
    /// An imbalance, but no task could be moved.
    Failed,
    Moved,
}

impl Scheduler {
    pub(super) fn domain_states(&self, cpu: usize) -> [DomainState; 2] {
        let node_cpus = self.cpus_of_node[self.node_of_cpu[cpu] as usize].len() as u32;
        let all = self.node_of_cpu.len() as u32;
        let numa = if self.cpus_of_node.iter().filter(|c| !c.is_empty()).count() > 1 { all } else { 0 };
        // Linux starts each domain's interval at its span in ms (sd->min_interval).
        let mk = |w: u32| DomainState { weight: w, interval_ms: w as f64, next_ns: w as f64 * 1e6, failed: 0 };
        [mk(node_cpus), mk(numa)]
    }

    /// `sd->cache_nice_tries`: 1 at MC, 2 at NUMA (`sd_init`).
    fn cache_nice_tries(level: usize) -> u32 {
        if level == NUMA {
            2
        } else {
            1
        }
    }

    /// `sd->imb_numa_nr` as docs/scheduler.md describes: a NUMA imbalance of up to
    /// `NUMA_IMBALANCE_MIN` tasks is allowed while the destination runs at most this many.
    fn imb_numa_nr(&self, node: usize) -> u32 {
        ((self.cpus_of_node[node].len() / 8) as u32).max(1)
    }

    /// The task running on `cpu` at `at`: a background task preempts workload threads (it
    /// woke up and won wake-up preemption); several threads take turns in slices of
    /// `max(sched_latency / k, min_granularity)` in the order they arrived on the CPU.
    /// Returns `None` when a background task (or nothing) runs.
    pub(super) fn running_thread(&self, cpu: usize, at: f64, states: &[TaskState]) -> Option<usize> {
        if self.noise.running_on(cpu, at).is_some() {
            return None;
        }
        let q = self.queue(cpu, states);
        match q.len() {
            0 => None,
            1 => Some(q[0]),
            k => Some(q[self.slot(at, k)]),
        }
    }

    /// Workload threads on a CPU in rotation order (arrival, then id).
    fn queue(&self, cpu: usize, states: &[TaskState]) -> Vec<usize> {
        let mut q: Vec<usize> = (0..self.cpu_of.len()).filter(|&t| states[t].on_cpu() && self.cpu_of[t] as usize == cpu).collect();
        q.sort_by(|&a, &b| self.arrived_ns[a].total_cmp(&self.arrived_ns[b]).then(a.cmp(&b)));
        q
    }

    fn slice_ns(&self, k: usize) -> f64 {
        (self.cfg.sched_latency_us * 1e3 / k as f64).max(self.cfg.min_granularity_us * 1e3)
    }

    fn slot(&self, at: f64, k: usize) -> usize {
        ((at / self.slice_ns(k)).floor() as u64 % k as u64) as usize
    }

    /// How long ago thread `t` last ran, at `at`.
    fn since_ran_ns(&self, t: usize, at: f64, states: &[TaskState]) -> f64 {
        let cpu = self.cpu_of[t] as usize;
        if let Some(n) = self.noise.running_on(cpu, at) {
            // Preempted when the background task started (if it ran then).
            return at - n.start_ns.max(self.arrived_ns[t]);
        }
        let q = self.queue(cpu, states);
        let k = q.len();
        let Some(p) = q.iter().position(|&x| x == t) else { return f64::INFINITY };
        if k <= 1 {
            return 0.0;
        }
        let s = self.slice_ns(k);
        let cycle = s * k as f64;
        let phase = at.rem_euclid(cycle);
        let cur = (phase / s).floor() as usize % k;
        if p == cur {
            return 0.0;
        }
        let end_of_p = (p + 1) as f64 * s;
        let ago = if p < cur { phase - end_of_p } else { phase + cycle - end_of_p };
        ago.min(at - self.arrived_ns[t]).max(0.0)
    }

    /// `can_migrate_task` for a move of `t` from its CPU to node `dst_node`, at a domain level
    /// whose failure count is `failed`.
    fn can_migrate(&self, t: usize, dst_node: usize, failed: u32, level: usize, at: f64, states: &[TaskState]) -> bool {
        if states[t] != TaskState::Runnable {
            return false;
        }
        let src = self.cpu_of[t] as usize;
        if self.running_thread(src, at, states) == Some(t) {
            return false;
        }
        let tries = Self::cache_nice_tries(level);
        // migrate_degrades_locality: not away from the preferred node.
        if let Some(p) = self.preferred[t] {
            let src_node = self.node_of_cpu[src] as usize;
            if p as usize == src_node && dst_node != src_node && failed <= tries {
                return false;
            }
        }
        // task_hot: ran within sysctl_sched_migration_cost.
        failed > tries || self.since_ran_ns(t, at, states) >= self.cfg.migration_cost_us * 1e3
    }

    /// The CPU a balance of `dst` at one domain level would pull from, and the thread it would
    /// pull from there, if any (`detach_tasks`: the waiting threads of the source, least
    /// recently arrived first). Changes nothing.
    fn pull_candidate(&self, dst: usize, level: usize, at: f64, states: &[TaskState]) -> Option<(usize, Option<usize>)> {
        let dst_node = self.node_of_cpu[dst] as usize;
        let failed = self.balance[dst][level].failed;
        let src = if level == MC { self.busiest_cpu_in_node(dst) } else { self.busiest_cpu_across_nodes(dst_node) }?;
        let t = self.queue(src, states).into_iter().find(|&t| self.can_migrate(t, dst_node, failed, level, at, states));
        Some((src, t))
    }

    /// Pull one task onto `dst` at one domain level; `cause` is `IdleBalance` for newidle
    /// balancing, `LoadBalance` for periodic balancing.
    pub(super) fn load_balance(
        &mut self,
        dst: usize,
        level: usize,
        cause: Cause,
        at: f64,
        states: &[TaskState],
        moves: &mut Vec<Move>,
    ) -> Outcome {
        let Some((src, candidate)) = self.pull_candidate(dst, level, at, states) else { return Outcome::Balanced };
        if let Some(t) = candidate {
            self.do_move(t as u32, dst, cause, at, moves);
            self.balance[dst][level].failed = 0;
            return Outcome::Moved;
        }
        let tries = Self::cache_nice_tries(level);
        // Only periodic balancing counts failures: newidle balancing runs so often that it
        // would wear the cache-hot and locality vetoes down (Linux's load_balance says so).
        if cause == Cause::LoadBalance {
            self.balance[dst][level].failed += 1;
        }
        // Active balancing: after repeated failures the running task itself is pushed over
        // (the stopper thread), overriding the locality veto.
        if self.balance[dst][level].failed > tries + 2 && cause == Cause::LoadBalance {
            if let Some(t) = self.running_thread(src, at, states) {
                if states[t] == TaskState::Runnable {
                    self.do_move(t as u32, dst, cause, at, moves);
                    self.balance[dst][level].failed = tries + 1;
                    return Outcome::Moved;
                }
            }
        }
        Outcome::Failed
    }

    /// MC level: the CPU of `dst`'s node with the most tasks, if moving one of its threads to
    /// `dst` reduces the imbalance (it has at least two more tasks than `dst`).
    fn busiest_cpu_in_node(&self, dst: usize) -> Option<usize> {
        let node = self.node_of_cpu[dst] as usize;
        self.cpus_of_node[node]
            .iter()
            .copied()
            .filter(|&c| c != dst && self.load[c] > 0 && self.nr(c) >= self.nr(dst) + 2)
            .max_by_key(|&c| (self.nr(c), std::cmp::Reverse(c)))
    }

    /// NUMA level (`find_busiest_group`, `calculate_imbalance`): groups are nodes; their load
    /// is their workload threads (background tasks add little PELT load). With spare capacity
    /// on the destination, pull from an overloaded node, or even out idle CPUs unless the
    /// difference is the allowed NUMA imbalance; otherwise pull only past `imbalance_pct`.
    /// Whether a node is overloaded or has spare capacity is decided by its task count: its
    /// workload threads, plus its running background tasks under `background_in_nr_running`
    /// (Linux's `sum_nr_running`, docs/scheduler.md, "Background tasks in a node's task count").
    fn busiest_cpu_across_nodes(&self, dst_node: usize) -> Option<usize> {
        let with_background = self.cfg.background_in_nr_running;
        let group = |n: usize| {
            let cs = &self.cpus_of_node[n];
            let load: u32 = cs.iter().map(|&c| self.load[c]).sum();
            let idle = cs.iter().filter(|&&c| self.idle(c)).count() as u32;
            let nr_running: u32 = if with_background { cs.iter().map(|&c| self.nr(c)).sum() } else { load };
            (load, cs.len() as u32, idle, nr_running)
        };
        let (l_d, c_d, idle_d, nr_d) = group(dst_node);
        let busiest = (0..self.cpus_of_node.len())
            .filter(|&n| n != dst_node && !self.cpus_of_node[n].is_empty())
            .map(|n| (n, group(n)))
            .filter(|(_, (l, _, _, _))| *l > 0)
            .max_by(|(a, (la, ca, _, _)), (b, (lb, cb, _, _))| (*la as u64 * *cb as u64).cmp(&(*lb as u64 * *ca as u64)).then(b.cmp(a)))?;
        let (b, (l_b, c_b, idle_b, nr_b)) = busiest;
        let pull = if nr_d < c_d {
            if nr_b > c_b {
                true
            } else {
                let imbalance = idle_d.saturating_sub(idle_b) / 2;
                // adjust_numa_imbalance: a small imbalance is allowed while lightly loaded.
                let allowed = nr_d < self.imb_numa_nr(dst_node) && imbalance <= 2;
                imbalance > 0 && !allowed
            }
        } else {
            nr_b > c_b && 100 * l_b as u64 * c_d as u64 > self.cfg.imbalance_pct as u64 * l_d as u64 * c_b as u64
        };
        if !pull {
            return None;
        }
        self.cpus_of_node[b].iter().copied().filter(|&c| self.load[c] > 0).max_by_key(|&c| (self.nr(c), std::cmp::Reverse(c)))
    }

    /// Newidle balancing of a CPU that just went idle (`sched_balance_newidle`): skipped when
    /// the CPU's average idle time is below `sysctl_sched_migration_cost` or no CPU has a task
    /// waiting; then level by level while the expected idle time covers the cost.
    pub(super) fn newidle_balance(&mut self, cpu: usize, at: f64, states: &[TaskState], moves: &mut Vec<Move>) {
        if let Some((t, level)) = self.newidle_pull(cpu, at, states) {
            self.do_move(t as u32, cpu, Cause::IdleBalance, at, moves);
            self.balance[cpu][level].failed = 0;
        }
    }

    /// The thread newidle balancing of `cpu` at `at` would pull, and at which domain level.
    /// Changes nothing: an attempt that finds no thread to pull leaves no trace (newidle
    /// balancing counts no failures and pushes no running task), which is what lets a
    /// fast-forward window pass a CPU going idle ([`Scheduler::epoch`]).
    pub(super) fn newidle_pull(&self, cpu: usize, at: f64, states: &[TaskState]) -> Option<(usize, usize)> {
        let avg_idle = self.avg_idle_ns[cpu];
        let overloaded = (0..self.node_of_cpu.len()).any(|c| self.nr(c) > 1);
        if avg_idle < self.cfg.migration_cost_us * 1e3 || !overloaded {
            return None;
        }
        let mut cost = 0.0;
        for (level, level_cost) in [(MC, self.cfg.newidle_cost_mc_us), (NUMA, self.cfg.newidle_cost_numa_us)] {
            if self.balance[cpu][level].weight == 0 {
                continue;
            }
            if avg_idle < cost + level_cost * 1e3 {
                break;
            }
            cost += level_cost * 1e3;
            if let Some((_, Some(t))) = self.pull_candidate(cpu, level, at, states) {
                return Some((t, level));
            }
        }
        None
    }

    /// Periodic balancing: each CPU balances each domain when its interval has passed; only
    /// the first idle CPU of a node (or its first CPU) balances the NUMA level for the node
    /// (`should_we_balance`). A balanced domain doubles its interval up to twice its span in
    /// ms; a busy CPU waits `busy_factor` times longer.
    pub(super) fn periodic_balance(&mut self, at: f64, states: &[TaskState], moves: &mut Vec<Move>) {
        for cpu in 0..self.node_of_cpu.len() {
            for level in [MC, NUMA] {
                let d = self.balance[cpu][level];
                if d.weight == 0 || at < d.next_ns {
                    continue;
                }
                let node = self.node_of_cpu[cpu] as usize;
                let balance_cpu = self.cpus_of_node[node].iter().copied().find(|&c| self.idle(c)).unwrap_or(self.cpus_of_node[node][0]);
                let outcome = if level == MC || cpu == balance_cpu {
                    self.load_balance(cpu, level, Cause::LoadBalance, at, states, moves)
                } else {
                    Outcome::Balanced
                };
                let d = &mut self.balance[cpu][level];
                d.interval_ms = match outcome {
                    Outcome::Moved => d.weight as f64,
                    _ => (d.interval_ms * 2.0).min(2.0 * d.weight as f64),
                };
                let busy = !self.idle(cpu);
                let factor = if busy { self.cfg.busy_factor } else { 1.0 };
                self.balance[cpu][level].next_ns = at + self.balance[cpu][level].interval_ms * factor * 1e6;
            }
        }
    }

    /// Wake-up placement (`select_idle_sibling`): the previous CPU if idle, else an idle CPU
    /// of the same node (last-level cache), else the previous CPU.
    pub fn wake(&mut self, t: u32, at: f64, states: &[TaskState], moves: &mut Vec<Move>) {
        if self.pinned {
            return;
        }
        self.recount(states);
        let prev = self.cpu_of[t as usize] as usize;
        // The woken thread itself is counted on its CPU already.
        let idle_for_t = |s: &Scheduler, c: usize| s.load[c] - u32::from(c == prev) == 0 && s.noise.running_on(c, at).is_none();
        if idle_for_t(self, prev) {
            return;
        }
        let node = self.node_of_cpu[prev] as usize;
        let n = self.cpus_of_node[node].len();
        let start = self.cpus_of_node[node].iter().position(|&c| c == prev).unwrap_or(0);
        let target = (1..n).map(|k| self.cpus_of_node[node][(start + k) % n]).find(|&c| idle_for_t(self, c));
        if let Some(c) = target {
            self.do_move(t, c, Cause::Wakeup, at, moves);
        }
    }

    /// For tests: a CPU's current balancing state at a level.
    #[cfg(test)]
    pub(super) fn domain(&self, cpu: numalab_core::CpuId, level: usize) -> DomainState {
        self.balance[cpu as usize][level]
    }
}
