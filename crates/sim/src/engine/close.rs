//! Closing epochs, metrics intervals and the run: counters, timeline, metrics (docs/metrics.md).

use super::{State, World};
use crate::memory::{NODE_MASK, UNPLACED};
use crate::metrics::{node_imbalance, BusySummary, EngineCounts, RunMetrics, TimelinePoint};
use numalab_core::ThreadId;
use numalab_workload::stream::Compute;

impl World<'_> {
    /// Fold the epoch's counters into the metrics and the next demand estimate.
    pub(super) fn close_epoch(&mut self, end: f64) {
        let n = self.n;
        for t in 0..self.threads.len() {
            let i = self.node_of_cpu[self.sched.cpu_of[t] as usize] as usize;
            let th = &mut self.threads[t];
            // The next demand takes the fast engine's expected counts, not their integer
            // rounding: the rounding is bookkeeping, and its epoch-to-epoch jitter would
            // defeat the reuse of contention solves (docs/simulator.md, "The fast engine").
            let expected = th.fast.expected_shares(&th.acc, &th.wr, &mut th.frac);
            let (pending_refs, pending_writes) = th.fast.pending();
            // The expected counts wait to be made integer until the matrices are read (a
            // tick, the end of a metrics interval, the run's end) or the thread moves to
            // another node, which the counts are charged from: rounding them at every epoch
            // was a fifth of ua-like's time.
            if th.fast.has_carry() && th.fast.carry_node() != i {
                self.settle_thread(t);
            }
            let th = &mut self.threads[t];
            th.fast.carry(i);
            let total: u64 = th.acc.iter().sum::<u64>() + pending_refs;
            if total == 0 {
                continue;
            }
            let writes: u64 = th.wr.iter().sum::<u64>() + pending_writes;
            let flops_per_ref = match th.work.compute {
                Some(Compute::Flops(f)) => f,
                _ => 0.0,
            };
            self.space_counters.record(self.p.process_of(t as ThreadId), total, flops_per_ref);
            if expected.is_none() {
                for j in 0..n {
                    th.frac[j] = th.acc[j] as f64 / total as f64;
                }
            }
            th.write_frac = expected.unwrap_or(writes as f64 / total as f64);
            let (acc, wr) = (std::mem::take(&mut th.acc), std::mem::take(&mut th.wr));
            self.add_counts(i, &acc, &wr);
            let th = &mut self.threads[t];
            (th.acc, th.wr) = (acc, wr);
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

    /// Accesses and writes from CPU node `i` to each node, into the run's and the tick's
    /// matrices and the interval's link traffic.
    fn add_counts(&mut self, i: usize, acc: &[u64], wr: &[u64]) {
        let n = self.n;
        let ab = self.p.access_bytes as f64;
        for j in 0..n {
            let a = acc[j];
            if a == 0 {
                continue;
            }
            self.access_matrix[i * n + j] += a;
            self.tick_matrix[i * n + j] += a;
            let w = wr[j];
            self.write_matrix[i * n + j] += w;
            self.tick_write_matrix[i * n + j] += w;
            for &l in self.cont.route_rd(i, j) {
                self.link_bytes_interval[l as usize] += (a - w) as f64 * ab;
            }
            for &l in self.cont.route_wr(i, j) {
                self.link_bytes_interval[l as usize] += w as f64 * ab;
            }
        }
    }

    /// Thread `t`'s carried expected counts made integer and counted from the node they were
    /// carried on.
    fn settle_thread(&mut self, t: usize) {
        let (mut acc, mut wr) = (std::mem::take(&mut self.settled_acc), std::mem::take(&mut self.settled_wr));
        acc.iter_mut().chain(wr.iter_mut()).for_each(|x| *x = 0);
        let th = &mut self.threads[t];
        let i = th.fast.carry_node();
        th.fast.settle(&mut acc, &mut wr);
        self.add_counts(i, &acc, &wr);
        (self.settled_acc, self.settled_wr) = (acc, wr);
    }

    /// Every thread's carried expected counts made integer, before the matrices are read.
    pub(super) fn settle_carried(&mut self) {
        for t in 0..self.threads.len() {
            if self.threads[t].fast.has_carry() {
                self.settle_thread(t);
            }
        }
    }

    /// Close the metrics interval at `end`; `timeline` = record it as a point of the timeline.
    fn close_interval(&mut self, end: f64, timeline: bool) {
        self.settle_carried();
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

    pub(super) fn finish(mut self, seed: u64) -> RunMetrics {
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
            engine: EngineCounts { solves: self.solves, fast_blocks: self.threads.iter().map(|t| t.fast.blocks).sum(), ..self.counts },
            segment_slots: self.shares.slots() as u64,
            apps: Vec::new(),
            app_moves: Vec::new(),
            timeline: std::mem::take(&mut self.timeline),
        }
    }
}
