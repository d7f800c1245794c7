//! Per-run metrics (docs/metrics.md) and cross-run summaries.

use crate::pingpong::IntervalHistogram;
use crate::sched::MigrationCounts;
use numalab_core::stats::{rsd_percent, RsdEstimator, Summary};
use serde::{Deserialize, Serialize};

mod one_epoch;
pub use one_epoch::OneEpochSteps;
pub(crate) use one_epoch::StepBound;

/// Event counters of a run, named as Linux names them where the quantity exists.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    pub first_touch_faults: u64,
    pub numa_pte_updates: u64,
    pub numa_hint_faults: u64,
    pub numa_hint_faults_local: u64,
    /// Pages migrated while handling a hinting fault.
    pub numa_pages_migrated: u64,
    /// Every page migration (hint faults, policy ticks, whole-space moves).
    pub page_migrations: u64,
    pub sched_move_numa: u64,
    pub sched_swap_numa: u64,
    /// Page migrations refused because the target node was full.
    pub pgmigrate_fail: u64,
    pub tlb_shootdowns: u64,
    pub replications: u64,
    pub replica_collapses: u64,
    pub access_samples: u64,
    pub refused_decisions: u64,
    /// References of a node without a suitable mapping, in runs with per-node mappings.
    pub mapping_faults: u64,
}

impl Counters {
    pub fn numa_counters(&self) -> NumaCounters {
        NumaCounters {
            numa_pte_updates: self.numa_pte_updates,
            numa_hint_faults: self.numa_hint_faults,
            numa_hint_faults_local: self.numa_hint_faults_local,
            numa_pages_migrated: self.numa_pages_migrated,
            sched_move_numa: self.sched_move_numa,
            sched_swap_numa: self.sched_swap_numa,
            pgmigrate_fail: self.pgmigrate_fail,
        }
    }
}

/// NUMA-balancing counters under Linux's names (`/proc/vmstat` and the `sched:*_numa`
/// tracepoints; docs/metrics.md).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NumaCounters {
    pub numa_pte_updates: u64,
    pub numa_hint_faults: u64,
    pub numa_hint_faults_local: u64,
    pub numa_pages_migrated: u64,
    pub sched_move_numa: u64,
    pub sched_swap_numa: u64,
    pub pgmigrate_fail: u64,
}

/// One interval of a run's timeline (docs/metrics.md, "Timeline"): what happened between the
/// previous point and `t_s`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TimelinePoint {
    /// End of the interval, simulated seconds from the start.
    pub t_s: f64,
    /// Length of the interval, seconds (`sim.metrics_interval_ms`, the last one shorter).
    pub interval_s: f64,
    pub accesses: u64,
    /// Share of the interval's accesses served locally (null: none).
    pub local_access_ratio: Option<f64>,
    /// Accesses served by each node in the interval.
    pub node_accesses: Vec<u64>,
    pub page_migrations: u64,
    pub replications: u64,
    pub hint_faults: u64,
    /// Cross-node thread migrations, every cause.
    pub thread_migrations: u64,
    /// Resident pages on each node at the end of the interval (homes and replicas).
    pub pages_per_node: Vec<u64>,
    /// Per application (address space) of a multi-program workload, in member order; empty
    /// (and absent from the JSON) for a single program (docs/metrics.md, "Timeline").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub apps: Vec<AppPoint>,
}

/// One application's interval of the timeline (docs/metrics.md, "Per application"): its
/// work and where its pages are, for the roofline with application points over time.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AppPoint {
    /// The mix member, `<PROG>.<k>` (e.g. `cg-like.0`).
    pub app: String,
    /// Floating-point operations of the interval (references × the step's flops per reference).
    pub flops: f64,
    /// Memory references of the interval.
    pub mem_refs: u64,
    /// `mem_refs × access_bytes` (the bytes one reference moves).
    pub bytes: f64,
    /// `flops / bytes`, flop/byte; null when the interval has no reference.
    pub ai_flop_per_byte: Option<f64>,
    /// `flops / interval_s / 1e9`.
    pub gflops: f64,
    /// The application's pages (home copies) on each node at the interval's end.
    pub pages_per_node: Vec<u64>,
    /// The same summed per memory tier (`machine.nodes[].tier`), by tier name.
    pub pages_per_tier: std::collections::BTreeMap<String, u64>,
}

/// What the engine did in one run, to explain what the run cost (docs/benchmarks.md, "Engine
/// counts in `bench --slowdown`"): the same for the same inputs and seed, like the results, but
/// not part of them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct EngineCounts {
    /// Steps of the epoch loop: one per epoch, fewer under fast-forward (docs/simulator.md,
    /// "Fast-forward").
    pub loop_steps: u64,
    /// Those of the steps that spanned more than one epoch (fast-forward windows).
    pub windows: u64,
    /// Contention solves, at step starts and barrier releases; the fast engine's other step
    /// starts reused the last one's latencies (docs/simulator.md, "Contention", reused solves).
    pub solves: u64,
    /// Calls that issued one thread's references: about one per running thread and step, and
    /// one more per reference that waited for the exact path in the order of time.
    pub thread_calls: u64,
    /// Proportional blocks the fast engine charged or tried (docs/simulator.md, "The fast
    /// engine"); 0 on the exact engine.
    pub fast_blocks: u64,
    /// The steps of one epoch (`loop_steps - windows`), by what kept each from being a longer
    /// window.
    pub one_epoch: OneEpochSteps,
}

impl std::ops::AddAssign for EngineCounts {
    /// Sums over runs (`numalab bench --slowdown --runs N`).
    fn add_assign(&mut self, other: Self) {
        self.loop_steps += other.loop_steps;
        self.windows += other.windows;
        self.solves += other.solves;
        self.thread_calls += other.thread_calls;
        self.fast_blocks += other.fast_blocks;
        self.one_epoch += other.one_epoch;
    }
}

/// Everything measured in one run. Field names are the `numalab.sim/2` JSON contract.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunMetrics {
    pub seed: u64,
    /// Simulated wall time until the last thread finished.
    pub exec_time_s: f64,
    /// Simulated time the run covered (the denominator of every `_per_s` rate); equal to
    /// `exec_time_s` since a run ends when its last thread does.
    pub sim_time_s: f64,
    /// Share of memory accesses served by the accessing CPU's own node (null: no accesses).
    pub local_access_ratio: Option<f64>,
    /// Relative standard deviation (sample, %) of accesses served per memory node; null when
    /// no node served any access.
    pub node_imbalance: Option<f64>,
    /// Mean over intervals of the most utilised link direction's utilisation (%); null on a
    /// machine without limited links.
    pub interconnect_load: Option<f64>,
    pub first_touch_faults: u64,
    pub hint_faults: u64,
    pub page_migrations: u64,
    /// Every change of CPU of a workload thread (like Linux's se.nr_migrations).
    pub thread_migrations: u64,
    pub tlb_shootdowns: u64,
    pub accesses: u64,
    /// Accesses served by each memory node.
    pub node_accesses: Vec<u64>,
    /// `access_matrix[i][j]`: accesses from CPUs of node i served by node j.
    pub access_matrix: Vec<Vec<u64>>,
    /// `write_matrix[i][j]`: the writes among them.
    pub write_matrix: Vec<Vec<u64>>,
    /// Mean utilisation of each node's memory controller over the run (0..1).
    pub controller_utilisation: Vec<f64>,
    pub thread_migrations_by_cause: MigrationCounts,
    /// Cross-node thread migrations whose thread's next cross-node migration took it back to
    /// the node it left.
    pub pingpong_returns: u64,
    /// Round-trip times of those returns.
    pub pingpong_intervals_s: IntervalHistogram,
    pub hint_faults_per_s: f64,
    pub page_migrations_per_s: f64,
    /// Cross-node thread migrations per simulated second, every cause.
    pub thread_migrations_per_s: f64,
    /// Linux's NUMA-balancing counters.
    pub numa: NumaCounters,
    /// Time each thread spent issuing accesses and computing (not waiting), seconds.
    pub thread_busy_s: BusySummary,
    /// Resident pages on each node at the end of the run (home copies and replicas).
    pub pages_per_node: Vec<u64>,
    /// Pages with a home at the end of the run (each counted once).
    pub placed_pages: u64,
    /// Extra read-only copies alive at the end of the run.
    pub replica_pages: u64,
    /// Pages no one touched, at the end of the run (pages freed at exit not included);
    /// `placed_pages + unplaced_pages + pages_freed_at_exit` is the program's page count.
    #[serde(default)]
    pub unplaced_pages: u64,
    /// Pages released when their program exited while others still ran (docs/simulator.md,
    /// "Program exit"): each held a home copy, which returned to its node's free memory.
    #[serde(default)]
    pub pages_freed_at_exit: u64,
    pub replications: u64,
    pub replica_collapses: u64,
    /// Access samples handed to the policy (only policies that sample have any).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub access_samples: u64,
    /// Decisions the simulator could not carry out (e.g. migrating to a full node).
    pub refused_decisions: u64,
    /// The policy's own counters by name (docs/metrics.md, "Policy counters"); empty (and
    /// absent from the JSON) for policies that keep none.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub policy_counters: std::collections::BTreeMap<String, u64>,
    /// Per program of a multi-program workload, in member order: when it finished
    /// (docs/metrics.md, "Per application"); empty (and absent from the JSON) for one program.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub apps: Vec<AppFinish>,
    /// Every whole-application move the policy took, in order (docs/metrics.md,
    /// "Application moves"); empty (and absent) for policies that move no whole application.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub app_moves: Vec<AppMoveRecord>,
    /// The run interval by interval, every `sim.metrics_interval_ms`.
    #[serde(default)]
    pub timeline: Vec<TimelinePoint>,
    /// What the engine did to simulate the run (`numalab bench --slowdown` reports it).
    /// Bookkeeping of the simulator, not a measurement of the program: not part of the JSON.
    #[serde(skip)]
    pub engine: EngineCounts,
    /// Slots of the fast engine's table of segments and escape mixtures at the end of the run,
    /// the most it held at once (docs/simulator.md, "The fast engine": a sweep frees slots for
    /// reuse). Bookkeeping, not part of the JSON.
    #[serde(skip)]
    pub segment_slots: u64,
}

/// One program of a mix: when its last thread finished.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AppFinish {
    /// The mix member, `<PROG>.<k>`.
    pub app: String,
    pub threads: u32,
    /// The program's pages (its footprint at the run's scale).
    pub pages: u64,
    /// Simulated seconds from the start of the run to the end of its last thread.
    pub finish_s: f64,
}

/// One whole-application move a policy took (docs/metrics.md, "Application moves").
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AppMoveRecord {
    /// 1 for the run's first move.
    pub order: u32,
    /// When the policy decided it, simulated seconds.
    pub t_s: f64,
    /// The policy's window index, where it counts windows.
    pub window: Option<u64>,
    /// The mix member moved (`space N` for a space that is not a mix member).
    pub app: String,
    /// `promote` (to the fast tier) or `rollback` (back to the slow tier).
    pub kind: String,
    pub to_node: u16,
    pub to_tier: Option<String>,
    /// The arithmetic intensity the policy predicted for the application when it chose it,
    /// flop/byte; null when it measured none.
    pub intensity_flop_per_byte: Option<f64>,
    /// The application's resident pages when the move was decided.
    pub resident_pages: u64,
    /// `applied`, `partial` or `refused: REASON`; null if no outcome came back.
    pub outcome: Option<String>,
    /// Pages moved, for a partial (or refused: 0) move; null for one applied in full (every
    /// placed page not yet on the target moved).
    pub moved_pages: Option<u64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct BusySummary {
    pub mean: f64,
    pub min: f64,
    pub max: f64,
}

impl BusySummary {
    pub fn of(v: &[f64]) -> BusySummary {
        let n = v.len().max(1) as f64;
        BusySummary {
            mean: v.iter().sum::<f64>() / n,
            min: v.iter().copied().fold(f64::INFINITY, f64::min).min(f64::MAX),
            max: v.iter().copied().fold(0.0, f64::max),
        }
    }
}

pub fn node_imbalance(node_accesses: &[u64], memory_nodes: &[u16]) -> Option<f64> {
    let x: Vec<f64> = memory_nodes.iter().map(|&n| node_accesses[n as usize] as f64).collect();
    rsd_percent(&x, RsdEstimator::Sample)
}

/// Cross-run summary: the full distribution of the execution time, the mean of every other
/// numeric field (`null` when a field is null in every run).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunsSummary {
    pub runs: usize,
    pub exec_time_s: Summary,
    pub local_access_ratio: Option<f64>,
    pub node_imbalance: Option<f64>,
    pub interconnect_load: Option<f64>,
    pub first_touch_faults: f64,
    pub hint_faults: f64,
    pub page_migrations: f64,
    pub thread_migrations: f64,
    pub tlb_shootdowns: f64,
    pub accesses: f64,
    pub replications: f64,
    pub refused_decisions: f64,
    pub sim_time_s: f64,
    pub pingpong_returns: f64,
    pub hint_faults_per_s: f64,
    pub page_migrations_per_s: f64,
    pub thread_migrations_per_s: f64,
}

fn mean_of(runs: &[RunMetrics], f: impl Fn(&RunMetrics) -> f64) -> f64 {
    runs.iter().map(f).sum::<f64>() / runs.len() as f64
}

fn mean_opt(runs: &[RunMetrics], f: impl Fn(&RunMetrics) -> Option<f64>) -> Option<f64> {
    let v: Vec<f64> = runs.iter().filter_map(f).collect();
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

impl RunsSummary {
    pub fn of(runs: &[RunMetrics]) -> Option<RunsSummary> {
        let times: Vec<f64> = runs.iter().map(|r| r.exec_time_s).collect();
        Some(RunsSummary {
            runs: runs.len(),
            exec_time_s: Summary::of(&times)?,
            local_access_ratio: mean_opt(runs, |r| r.local_access_ratio),
            node_imbalance: mean_opt(runs, |r| r.node_imbalance),
            interconnect_load: mean_opt(runs, |r| r.interconnect_load),
            first_touch_faults: mean_of(runs, |r| r.first_touch_faults as f64),
            hint_faults: mean_of(runs, |r| r.hint_faults as f64),
            page_migrations: mean_of(runs, |r| r.page_migrations as f64),
            thread_migrations: mean_of(runs, |r| r.thread_migrations as f64),
            tlb_shootdowns: mean_of(runs, |r| r.tlb_shootdowns as f64),
            accesses: mean_of(runs, |r| r.accesses as f64),
            replications: mean_of(runs, |r| r.replications as f64),
            refused_decisions: mean_of(runs, |r| r.refused_decisions as f64),
            sim_time_s: mean_of(runs, |r| r.sim_time_s),
            pingpong_returns: mean_of(runs, |r| r.pingpong_returns as f64),
            hint_faults_per_s: mean_of(runs, |r| r.hint_faults_per_s),
            page_migrations_per_s: mean_of(runs, |r| r.page_migrations_per_s),
            thread_migrations_per_s: mean_of(runs, |r| r.thread_migrations_per_s),
        })
    }
}

fn is_zero(x: &u64) -> bool {
    *x == 0
}
