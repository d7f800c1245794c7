//! Each epoch's contention solve and the cost tables built on it (docs/simulator.md, "Contention").

use super::{Thread, World};
use crate::config::EngineKind;
use crate::hot::kind_index;
use crate::sched::TaskState;
use numalab_core::ThreadId;
use numalab_workload::stream::Compute;

impl World<'_> {
    /// Solve the contention model for the coming epoch and build each thread's cost table.
    /// `window`: a window past arrivals, `[start, end)`, whose solve takes the threads that
    /// arrive inside it out of the population (`solve_blended`).
    pub(super) fn update_costs(&mut self, window: Option<(f64, f64)>) {
        for (t, th) in self.threads.iter().enumerate() {
            let compute_ns = self.compute_ns(t, th);
            let d = &mut self.demands[t];
            d.node = self.node_of_cpu[self.sched.cpu_of[t] as usize] as usize;
            let (mut w, mut inv_mlp, mut svc) = (0.0, 0.0, 0.0);
            for e in &th.work.entries {
                let r = e.remaining() as f64;
                let k = kind_index(e.kind);
                w += r;
                inv_mlp += r / self.mlp[k];
                svc += r * self.svc_mult[k];
            }
            // A thread with no reference left to make (a step it has no part in, released at
            // a barrier it reaches at once) loads no memory: it is no customer of the solve
            // made at the release (docs/simulator.md, "Barriers").
            let refs_left = w > 0.0 || th.work.epilogue.get(th.epilogue_idx..).is_some_and(|rest| rest.iter().any(|e| e.remaining() > 0));
            d.share = if self.states[t] == TaskState::Runnable && refs_left { self.share[t] } else { 0.0 };
            if w == 0.0 {
                (w, inv_mlp, svc) = (1.0, 1.0 / self.mlp[0], 1.0);
            }
            d.inv_mlp = inv_mlp / w;
            d.svc_mult = svc / w;
            d.compute_ns = compute_ns;
            d.frac.clone_from(&th.frac);
            d.write_frac = th.write_frac;
        }
        if let Some((start, end)) = window {
            if self.solve_blended(start, end) {
                return;
            }
        }
        // The fast engine reuses the last solve while every thread's demand stays within
        // `memory.demand_tolerance` of the demand it was solved for (docs/simulator.md,
        // "Contention"): the loaded latencies would move by about as much as the solve's own
        // tolerance, far less than the sampling noise of the demand estimate itself.
        let mem = &self.cfg.memory;
        let reuse = self.cfg.engine == EngineKind::Fast
            && crate::contention::solve_holds(&self.demands, &self.solved_for, mem.demand_tolerance, mem.population_tolerance);
        if reuse {
            // The latencies hold; the cost tables take this epoch's CPU shares (after a
            // blended solve, whose shares were emptied, every table its latencies again).
            if self.share != self.solved_share {
                self.solved_share.clone_from(&self.share);
                self.build_costs();
            }
            return;
        }
        self.solve_now();
        self.build_costs();
    }

    /// The contention solve for `self.demands`, recorded as the demands it was made for.
    fn solve_now(&mut self) {
        self.solved_for.clone_from(&self.demands);
        self.solved_share.clone_from(&self.share);
        // Threads with the same demand are one class of the solve; the fast engine merges
        // demands within the tolerance it reuses solves by, the exact engine only identical ones.
        let merge_tolerance = Some(if self.cfg.engine == EngineKind::Fast { self.cfg.memory.demand_tolerance } else { 0.0 });
        let extrapolate = self.cfg.engine == EngineKind::Fast && self.cfg.memory.solver_extrapolation;
        self.cont.solve(&self.demands, self.cfg.memory.solver_iterations, self.cfg.memory.solver_tolerance, merge_tolerance, extrapolate);
        self.solves += 1;
    }

    /// A window past arrivals (docs/simulator.md, "Windows past arrivals"): the running
    /// threads predicted to arrive at their barrier inside `[start, end)` leave the memory
    /// system's population at the first epoch boundary after their arrival, as in the
    /// epoch-by-epoch loop. One solve for each population the window holds (the first with
    /// every thread, then one after each boundary where threads leave); each running thread's
    /// cost of a reference is the one that makes as many references over its running part as
    /// the populations' costs do, each over its stretch: their harmonic mean, weighted by the
    /// stretches' lengths. False (nothing done) when no running thread arrives inside the
    /// window.
    fn solve_blended(&mut self, start: f64, end: f64) -> bool {
        let (n, threads) = (self.n, self.threads.len());
        let epoch_ns = self.cfg.epoch_us * 1e3;
        // (leave, thread) of each arriving thread, in the order they leave.
        let mut leaving: Vec<(f64, usize)> = (0..threads)
            .filter(|&t| self.demands[t].share > 0.0 && self.arrive_ns[t] < end)
            .map(|t| (start + ((self.arrive_ns[t] - start) / epoch_ns).ceil() * epoch_ns, t))
            .filter(|&(leave, _)| leave < end)
            .collect();
        if leaving.is_empty() {
            return false;
        }
        leaving.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let running: Vec<bool> = self.demands.iter().map(|d| d.share > 0.0).collect();
        // Each running thread's part of the window, and the references per ns it makes at
        // each (kind, node) summed over the stretches (`inv`, `cost` laid out).
        let part = |w: &World, t: usize| (w.threads[t].clock.max(start), if w.arrive_ns[t] < end { w.arrive_ns[t] } else { end });
        let mut inv = std::mem::take(&mut self.blend_inv);
        inv.clear();
        inv.resize(threads * 3 * n, 0.0);
        let mut shares_taken: Vec<(usize, f64)> = Vec::with_capacity(leaving.len());
        let mut next = 0;
        let mut from = start;
        while from < end {
            // Threads that left by `from` are out of this stretch's population.
            while next < leaving.len() && leaving[next].0 <= from {
                let t = leaving[next].1;
                shares_taken.push((t, self.demands[t].share));
                self.demands[t].share = 0.0;
                next += 1;
            }
            let to = leaving.get(next).map_or(end, |l| l.0.min(end));
            self.solve_now();
            for t in 0..threads {
                if !running[t] {
                    continue;
                }
                let (a, b) = part(self, t);
                let overlap = to.min(b) - from.max(a);
                if overlap <= 0.0 {
                    continue;
                }
                let share = self.share[t].max(1e-3);
                let compute = self.demands[t].compute_ns;
                let lat = self.cont.latency(t);
                for (row, &mlp) in inv[t * 3 * n..(t + 1) * 3 * n].chunks_exact_mut(n).zip(&self.mlp) {
                    for (x, &l) in row.iter_mut().zip(lat) {
                        *x += overlap * share / (compute + l / mlp);
                    }
                }
            }
            from = to;
        }
        for (t, share) in shares_taken {
            self.demands[t].share = share;
        }
        // The tables of the last population for every thread, then each running thread's own.
        self.build_costs();
        for t in 0..threads {
            let (a, b) = part(self, t);
            if !running[t] || b <= a {
                continue;
            }
            let th = &mut self.threads[t];
            // Never the source of another thread's copy, rebuilt at the next solve.
            th.cost_from = (f64::NAN, f64::NAN, u64::MAX);
            for (c, &x) in th.cost.iter_mut().zip(&inv[t * 3 * n..(t + 1) * 3 * n]) {
                *c = (b - a) / x;
            }
        }
        self.blend_inv = inv;
        // The tables are blended: the next reuse of this solve rebuilds them all.
        self.solved_share.clear();
        true
    }

    /// Each thread's ns per access by kind and memory node: its compute and the loaded latency
    /// of the last solve over its memory-level parallelism, stretched by its CPU share.
    fn build_costs(&mut self) {
        let n = self.n;
        for t in 0..self.threads.len() {
            let share = self.share[t].max(1e-3);
            // Only `update_costs` builds the tables, after the demands: this call's demand has
            // the compute (`compute_ns`), and nothing it depends on has changed since.
            let compute = self.demands[t].compute_ns;
            let th = &mut self.threads[t];
            // A background task or a neighbour changes a few threads' shares: only their
            // tables change (3 · nodes divisions each).
            if th.cost_from == (share, compute, self.solves) {
                continue;
            }
            th.cost_from = (share, compute, self.solves);
            // The threads of a class of the last solve take their leader's latencies, those
            // without population the first such thread's of their node (docs/simulator.md,
            // "Contention"), and most of them have the same share and compute: the same
            // operands give bitwise the same table, so the first such thread's is copied
            // rather than divided out again (the divisions are most of this function's time).
            let source = self.cont.latency_source(t, self.solved_for[t].node);
            let built = self.cost_built[source];
            if built != t && built < self.threads.len() {
                let from = &self.threads[built];
                if from.cost_from.2 == self.solves
                    && from.cost_from.0.to_bits() == share.to_bits()
                    && from.cost_from.1.to_bits() == compute.to_bits()
                    && self.cont.latency_source(built, self.solved_for[built].node) == source
                {
                    let (lo, hi) = self.threads.split_at_mut(t.max(built));
                    let (to, from) = if t < built { (&mut lo[t], &hi[0]) } else { (&mut hi[0], &lo[built]) };
                    to.cost.copy_from_slice(&from.cost);
                    continue;
                }
            }
            self.cost_built[source] = t;
            let th = &mut self.threads[t];
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
}
