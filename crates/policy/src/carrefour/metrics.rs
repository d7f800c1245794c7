//! Carrefour's global monitor: the interval's counters, the global metrics computed from them
//! and the gate that turns the three heuristics on and off (docs/policies/carrefour.md,
//! "Global metrics" and "Gate"; Dashti et al., "Traffic management: a holistic approach to
//! memory placement on NUMA systems", ASPLOS 2013).

use super::config::{CarrefourConfig, ReadRatioMetric};
use crate::decision::CacheRefills;
use numalab_core::stats::rsd_percent;
use numalab_core::NodeId;

/// Counters summed over the ticks of one interval.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct IntervalCounters {
    /// `d[i][j]`: accesses from CPUs of node i served by node j (reads and writes).
    pub d: Vec<Vec<u64>>,
    /// The writes among them; empty when the source cannot tell.
    pub writes: Vec<Vec<u64>>,
    /// `None` once any tick of the interval lacked them.
    pub refills: Option<CacheRefills>,
    /// Cycle-weighted IPC needs cycles; we keep the interval-weighted mean of the ticks'
    /// IPC. `None` once any tick lacked it.
    pub ipc: Option<f64>,
    pub interval_ns: u64,
    /// Ticks folded in (0 = nothing yet).
    pub ticks: u32,
}

impl IntervalCounters {
    /// Fold one tick's counters in.
    pub fn add(&mut self, d: &[Vec<u64>], writes: &[Vec<u64>], refills: Option<CacheRefills>, ipc: Option<f64>, interval_ns: u64) {
        let first = self.ticks == 0;
        add_matrix(&mut self.d, d);
        if first || !self.writes.is_empty() {
            if writes.is_empty() {
                self.writes.clear();
            } else {
                add_matrix(&mut self.writes, writes);
            }
        }
        self.refills = match (first, self.refills, refills) {
            (true, _, r) => r,
            (false, Some(a), Some(b)) => Some(CacheRefills { all: a.all + b.all, modified: a.modified + b.modified }),
            _ => None,
        };
        let total_ns = self.interval_ns + interval_ns;
        self.ipc = match (first, self.ipc, ipc) {
            (true, _, x) => x,
            (false, Some(a), Some(b)) if total_ns > 0 => Some((a * self.interval_ns as f64 + b * interval_ns as f64) / total_ns as f64),
            _ => None,
        };
        self.interval_ns = total_ns;
        self.ticks += 1;
    }
}

fn add_matrix(acc: &mut Vec<Vec<u64>>, m: &[Vec<u64>]) {
    if acc.len() < m.len() {
        acc.resize(m.len(), Vec::new());
    }
    for (row, src) in acc.iter_mut().zip(m) {
        if row.len() < src.len() {
            row.resize(src.len(), 0);
        }
        for (a, b) in row.iter_mut().zip(src) {
            *a += b;
        }
    }
}

/// The global metrics of one interval.
#[derive(Clone, Debug, PartialEq)]
pub struct GlobalMetrics {
    /// Local access ratio, %.
    pub lar: f64,
    /// Imbalance of the accesses served per memory node, % (relative standard deviation).
    pub imb: f64,
    /// Memory accesses per µs.
    pub maptu: f64,
    /// Modified-refill ratio, %; `None` = unsupported.
    pub dcmr: Option<f64>,
    /// Memory read ratio, %; `None` = reads and writes not told apart.
    pub mrr: Option<f64>,
    /// Memory use, %.
    pub mu: f64,
    /// `share[j] = floor(100 · T_j / Tot)`, indexed by node id.
    pub share: Vec<u32>,
    pub ipc: Option<f64>,
}

/// Compute the metrics; `None` when the interval is undefined (no traffic, or no time).
/// `memory_nodes` are the nodes the imbalance runs over (those with memory).
pub fn global_metrics(
    c: &IntervalCounters,
    memory_nodes: &[NodeId],
    mem_total_pages: u64,
    mem_free_pages: u64,
    estimator: numalab_core::stats::RsdEstimator,
) -> Option<GlobalMetrics> {
    let n = c.d.len();
    let served = |j: usize| c.d.iter().map(|row| row.get(j).copied().unwrap_or(0)).sum::<u64>();
    let t: Vec<u64> = (0..n).map(served).collect();
    let tot: u64 = t.iter().sum();
    if tot == 0 || c.interval_ns == 0 {
        return None;
    }
    let local: u64 = (0..n).map(|i| c.d[i].get(i).copied().unwrap_or(0)).sum();
    let t_mem: Vec<f64> = memory_nodes.iter().map(|&j| t.get(j as usize).copied().unwrap_or(0) as f64).collect();
    let imb = rsd_percent(&t_mem, estimator)?;
    let dcmr = c.refills.map(|r| if r.all == 0 { 0.0 } else { 100.0 * r.modified as f64 / r.all as f64 });
    let mrr = (!c.writes.is_empty()).then(|| {
        let wr: u64 = c.writes.iter().flatten().sum();
        // Reads and writes together are the accesses; none at all gives 0 (replication off).
        let rd = tot.saturating_sub(wr);
        if rd + wr == 0 {
            0.0
        } else {
            100.0 * rd as f64 / (rd + wr) as f64
        }
    });
    let mu =
        if mem_total_pages == 0 { 0.0 } else { 100.0 * mem_total_pages.saturating_sub(mem_free_pages) as f64 / mem_total_pages as f64 };
    Some(GlobalMetrics {
        lar: 100.0 * local as f64 / tot as f64,
        imb,
        maptu: tot as f64 / (c.interval_ns as f64 / 1e3),
        dcmr,
        mrr,
        mu,
        share: t.iter().map(|&x| (100 * x / tot) as u32).collect(),
        ipc: c.ipc,
    })
}

/// The three heuristic flags: replication, interleave, migration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Flags {
    pub r: bool,
    pub i: bool,
    pub m: bool,
}

impl Default for Flags {
    fn default() -> Self {
        Flags { r: true, i: true, m: true }
    }
}

/// What the gate made of an interval.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GateOutcome {
    /// Traffic too low (or IPC too high): flags unchanged, no decisions.
    Closed,
    /// Flags re-evaluated; `active` = at least one heuristic is on.
    Evaluated { active: bool },
    /// A required counter is unsupported: no metrics this interval, flags unchanged.
    NoMetrics,
}

/// The gate (comparisons exactly as the reference daemon makes them). `replication_possible`
/// is false where the driver cannot replicate (the live agent): R is then forced off.
pub fn gate(flags: &mut Flags, m: &GlobalMetrics, cfg: &CarrefourConfig, replication_possible: bool) -> GateOutcome {
    let ipc_closed = if cfg.ipc_gate {
        match m.ipc {
            Some(ipc) => ipc > cfg.ipc_max,
            None => return GateOutcome::NoMetrics,
        }
    } else {
        false
    };
    if m.maptu < cfg.maptu_min || ipc_closed {
        return GateOutcome::Closed;
    }
    // An unsupported read-ratio metric keeps replication off (reported, never read as 0).
    let read_ok = match cfg.read_ratio_metric {
        ReadRatioMetric::Dcmr => m.dcmr.is_some_and(|x| x <= cfg.dcmr_max),
        ReadRatioMetric::Mrr => m.mrr.is_some_and(|x| x >= cfg.mrr_min),
    };
    flags.r = cfg.enable_replication && replication_possible && m.mu <= cfg.replication_mem_use_max && read_ok;
    flags.i = cfg.enable_interleave && m.lar < cfg.interleave_lar_max && m.imb > cfg.interleave_imbalance_min;
    flags.m = cfg.enable_migration && m.lar < cfg.migration_lar_max;
    GateOutcome::Evaluated { active: flags.r || flags.i || flags.m }
}
