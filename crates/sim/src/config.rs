//! Simulator tunables (`[sim]` table). Every default is an assumption [A] or a choice [ours]
//! documented in docs/simulator.md; none is fitted to a result except where marked calibrated.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SimConfig {
    /// Simulated time between contention / scheduler updates [ours].
    pub epoch_us: f64,
    pub core: CoreConfig,
    pub memory: MemoryConfig,
    pub sched: SchedConfig,
    /// Period of `on_tick` calls to the policy, milliseconds [ours].
    pub tick_ms: f64,
    /// Interval of the interconnect-load metric (docs/metrics.md, `interconnect_load`: 1 s).
    pub metrics_interval_ms: f64,
    /// How references are charged: `fast` (the default) charges uniform-random references by
    /// the expected share of each node, `exact` draws every one (docs/simulator.md, "The fast
    /// engine").
    pub engine: EngineKind,
    /// Longest window the fast engine advances in one step while nothing changes (no
    /// barrier, scheduler, noise, tick or scan event the epoch grid must meet); 0, or any
    /// value under two epochs, turns fast-forward off. The exact engine ignores it (docs/simulator.md, "Fast-forward";
    /// validated in docs/results/fast-forward.md) [ours].
    pub fast_forward_max_us: f64,
    /// Whether a fast-forward window runs its threads one epoch at a time while the policy
    /// observes references one at a time (armed pages, access sampling), so that the policy
    /// sees them in about the order of time instead of thread after thread
    /// (docs/simulator.md, "Fast-forward") [ours].
    pub fast_forward_lockstep: bool,
    /// Whether the fast engine runs a window (one epoch or several) in which pages are armed
    /// in the order of time instead: the thread whose clock is earliest runs to its next
    /// reference the exact path must take, which waits until no thread is behind it; lockstep
    /// (or thread after thread) where that does not apply (access sampling, per-node mappings,
    /// pipelined steps, the rest of a window after a decision beyond the faulting page)
    /// (docs/simulator.md, "Fast-forward", "In the order of time") [ours].
    pub fast_forward_time_order: bool,
    /// Whether a fast-forward window may pass barrier arrivals while the policy observes no
    /// reference (docs/simulator.md, "Fast-forward", "Windows past arrivals"): instead of
    /// ending before the first running thread's predicted arrival, the window ends before
    /// such a thread could fall asleep (its arrival, predicted with the margin, plus its spin)
    /// and before its barrier may be released (each thread's step with no queue anywhere);
    /// the threads that arrive inside it leave the solve's population at the epoch boundary
    /// after their predicted arrival, one solve per population, and each running thread's
    /// cost is the harmonic mean of the populations' costs over its running part, at its CPU
    /// share over that part. On by default since issue 9's stop 69 (docs/benchmarks.md,
    /// "Windows past arrivals"; docs/results/fast-vs-exact.md) [ours].
    pub fast_forward_past_arrivals: bool,
    /// Whether the exact engine runs an epoch in which pages are armed in the order of time,
    /// as the fast engine does (`fast_forward_time_order`), instead of thread after thread:
    /// thread after thread, the lowest-numbered threads took their hinting faults first in
    /// every epoch, and a policy that decides at a fault (AutoNUMA's task placement at the
    /// first fault after a barrier) saw them in that order (docs/simulator.md, "Fast-forward",
    /// "The exact engine in the order of time too"; docs/results/fast-vs-exact.md, "The
    /// reference in the order of time") [ours]. `false` gives the exact engine's results before issue 9's stop 56.
    pub exact_time_order: bool,
}

/// The two ways of charging references (docs/simulator.md, "The fast engine").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EngineKind {
    /// Every reference drawn and charged one by one (runs of a page at once): the reference.
    Exact,
    /// Uniform-random references over settled memory charged by expected per-node counts;
    /// steps of several entries in proportional blocks; steady stretches in one step. The
    /// default since issue 9's stop 59, when it agreed with the exact engine within the
    /// tolerances or the noise on every comparison (docs/results/fast-vs-exact.md).
    #[default]
    Fast,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            epoch_us: 50.0,
            core: CoreConfig::default(),
            memory: MemoryConfig::default(),
            sched: SchedConfig::default(),
            tick_ms: 1000.0,
            metrics_interval_ms: 1000.0,
            engine: EngineKind::Fast,
            fast_forward_max_us: 2000.0,
            fast_forward_lockstep: true,
            fast_forward_time_order: true,
            fast_forward_past_arrivals: true,
            exact_time_order: true,
        }
    }
}

/// How a core turns compute and memory latency into time.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CoreConfig {
    /// Sustained double-precision flops per cycle per core [A: a quarter of a 2-FMA AVX2 peak].
    pub flops_per_cycle: f64,
    /// Misses in flight for sequential-like streams (hardware prefetch) [A]; a machine file's
    /// `[core] mlp_stream` replaces it on that machine (docs/simulator.md, "The core model").
    pub mlp_stream: f64,
    /// Misses in flight for independent random accesses (line-fill buffers) [A].
    pub mlp_random: f64,
    /// Dependent accesses (pointer chase) overlap nothing.
    pub mlp_dependent: f64,
    /// Compute throughput of each of two busy SMT siblings, relative to a core alone [A].
    pub smt_share: f64,
    /// Core cycles one PAUSE instruction takes, where the machine file states none (`[core]
    /// pause_cycles`): what turns an OpenMP runtime's barrier spins into time under the
    /// `libgomp` wait policies [A: about 10 cycles, Intel's figure for its cores before
    /// Skylake; docs/scheduler.md, "Barrier waits: spin, then sleep"].
    pub pause_cycles: f64,
}

impl CoreConfig {
    /// Streaming lines in flight per thread on `machine`: the machine's own `[core]
    /// mlp_stream` when its file states one (derived from that hardware's single-thread
    /// bandwidth and latency, docs/machines.md, "Core parameters"), else `mlp_stream`.
    pub fn mlp_stream_on(&self, machine: &numalab_core::Machine) -> f64 {
        machine.mlp_stream().unwrap_or(self.mlp_stream)
    }

    /// Cycles per PAUSE on `machine`: its own `[core] pause_cycles` when its file states
    /// them, else `pause_cycles`.
    pub fn pause_cycles_on(&self, machine: &numalab_core::Machine) -> f64 {
        machine.pause_cycles().unwrap_or(self.pause_cycles)
    }
}

impl Default for CoreConfig {
    fn default() -> Self {
        CoreConfig { flops_per_cycle: 4.0, mlp_stream: 8.0, mlp_random: 4.0, mlp_dependent: 1.0, smt_share: 0.6, pause_cycles: 10.0 }
    }
}

/// Queueing at memory controllers and links.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MemoryConfig {
    /// Share of sustained bandwidth a controller delivers for random lines (row-buffer misses)
    /// [calibrated: amd48's contended local latency, 316.8 ns with 48 threads; see docs].
    pub random_efficiency: f64,
    /// Most approximate-MVA iterations per solve (warm-started from the previous one) [ours].
    pub solver_iterations: u32,
    /// A solve stops when no thread's throughput changes by more than this share [ours].
    pub solver_tolerance: f64,
    /// Whether the fast engine's solves extrapolate along the iteration's slowest mode
    /// (docs/simulator.md, "Contention": the same fixed point in about half the steps)
    /// [ours]. The exact engine never does.
    pub solver_extrapolation: bool,
    /// Demands within this of each other count as the same on the fast engine (absolute on
    /// access and write fractions, relative on the rest): a solve is skipped while no thread's
    /// demand moved by more than this since the last one, and threads whose demands are this
    /// close share one class of the solve [ours]. The exact engine merges only identical
    /// demands and never skips a solve.
    pub demand_tolerance: f64,
    /// The fast engine also reuses a solve while the machine's population of misses in
    /// flight moved by at most this share of the solved one, as when a background task takes
    /// part of one thread's CPU; the cost tables still take every thread's current CPU share
    /// (docs/simulator.md, "The fast engine") [ours]. 0: any change of a CPU share re-solves.
    pub population_tolerance: f64,
    /// Where each step's access mix for the contention solve comes from (docs/simulator.md,
    /// "Contention", "The demand: the references ahead").
    pub demand: DemandSource,
}

/// Where the contention solve takes each thread's access mix from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DemandSource {
    /// The nodes of the pages the thread's walks will reach in the coming step, sampled; a
    /// thread whose references do not all walk keeps the mix of its last epoch with traffic.
    #[default]
    Ahead,
    /// The references the thread made in the last epoch, one epoch behind its walks (the
    /// engines before this setting existed).
    LastEpoch,
}

impl Default for MemoryConfig {
    fn default() -> Self {
        MemoryConfig {
            random_efficiency: 0.78,
            solver_iterations: 200,
            solver_tolerance: 1e-4,
            solver_extrapolation: true,
            demand_tolerance: 1e-3,
            population_tolerance: 0.01,
            demand: DemandSource::Ahead,
        }
    }
}

/// The scheduler model and its background noise (docs/scheduler.md). Linux's defaults carry
/// their kernel names; assumptions are marked [A].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SchedConfig {
    /// Background tasks (kernel threads, daemons) arriving per CPU per second [A].
    pub noise_rate_per_cpu_hz: f64,
    /// Mean run time of one background task, microseconds [A].
    pub noise_mean_us: f64,
    /// Share of background tasks that are per-CPU kernel threads (run where they belong,
    /// preempting in place); the rest wake on an idle sibling [A].
    pub noise_bound_share: f64,
    /// NUMA-level `imbalance_pct` (Linux >= 5.10: 117; 5.0: 125).
    pub imbalance_pct: u32,
    /// Pull tasks onto CPUs that go idle (newidle balancing).
    pub idle_balance: bool,
    /// Count background tasks in a node's `sum_nr_running` when the NUMA level classifies
    /// nodes (overloaded, spare capacity), as Linux does since 5.5; off, only workload threads
    /// count (docs/scheduler.md, "Background tasks in a node's task count").
    pub background_in_nr_running: bool,
    /// `sysctl_sched_migration_cost`, microseconds (500): a task that ran more recently is
    /// cache-hot, and newidle balancing is skipped on a CPU idle for less on average.
    pub migration_cost_us: f64,
    /// `sd->busy_factor` (16): a busy CPU balances this many times less often.
    pub busy_factor: f64,
    /// `sysctl_sched_latency`, microseconds (6000): the period in which the tasks of a CPU
    /// each get a slice.
    pub sched_latency_us: f64,
    /// `sysctl_sched_min_granularity`, microseconds (750): the shortest slice.
    pub min_granularity_us: f64,
    /// Time one newidle balancing pass costs at the MC level, microseconds
    /// (`max_newidle_lb_cost`) [A].
    pub newidle_cost_mc_us: f64,
    /// The same at the NUMA level [A].
    pub newidle_cost_numa_us: f64,
    /// Cache refill paid by a thread moved within its node, as a share of the cross-node cost [A].
    pub intra_node_refill_share: f64,
    /// Scheduler tick rate, Hz (Linux CONFIG_HZ; Debian's kernels use 250).
    pub tick_hz: f64,
    /// How long a thread waiting at a barrier busy-waits before it sleeps under the `fixed`
    /// wait policy, microseconds [A] (docs/scheduler.md, "Barrier waits: spin, then sleep").
    pub barrier_spin_us: f64,
    /// How a barrier waiter's spin is given: `fixed` (`barrier_spin_us`, the default); as
    /// libgomp counts it, in spins of one PAUSE each (`libgomp`, `libgomp-active`,
    /// `libgomp-passive`: `OMP_WAIT_POLICY` unset, `active`, `passive`); or as the LLVM and
    /// Intel runtime times it (`llvm`, `llvm-active`, `llvm-passive`).
    pub wait_policy: WaitPolicy,
    /// libgomp's `GOMP_SPINCOUNT`: spins before a waiter sleeps, replacing the wait policy's
    /// own count (the throttled count, when a process has more threads than the machine has
    /// CPUs, stays the policy's, capped at this). Only the `libgomp` policies read it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gomp_spincount: Option<u64>,
    /// The LLVM and Intel runtime's `KMP_BLOCKTIME`, milliseconds: how long a waiter spins,
    /// replacing the wait policy's own time. Only the `llvm` policies read it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kmp_blocktime_ms: Option<f64>,
}

/// How long a thread that waits at a barrier spins before it sleeps (docs/scheduler.md,
/// "Barrier waits: spin, then sleep").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WaitPolicy {
    /// `sim.sched.barrier_spin_us`, whatever the machine or the process [A].
    #[default]
    Fixed,
    /// libgomp with `OMP_WAIT_POLICY` unset: 300,000 spins (100 when throttled).
    Libgomp,
    /// libgomp with `OMP_WAIT_POLICY=active`: 30,000,000,000 spins (1,000 when throttled).
    LibgompActive,
    /// libgomp with `OMP_WAIT_POLICY=passive`: no spin, the waiter sleeps at once.
    LibgompPassive,
    /// The LLVM and Intel runtime (libomp, libiomp5) with `KMP_BLOCKTIME` and
    /// `OMP_WAIT_POLICY` unset: 200 ms.
    Llvm,
    /// That runtime with `OMP_WAIT_POLICY=active`: its "infinite" blocktime.
    LlvmActive,
    /// That runtime with `OMP_WAIT_POLICY=passive`: no spin.
    LlvmPassive,
}

/// The LLVM runtime's `KMP_MAX_BLOCKTIME`, `INT_MAX` ms: a blocktime it takes as "infinite".
pub const KMP_MAX_BLOCKTIME_MS: f64 = i32::MAX as f64;

impl WaitPolicy {
    /// libgomp's spin counts under this policy (its `env.c`): the usual one and the throttled
    /// one, used when a process has more threads than CPUs it may run on. `None` for the
    /// policies that are not libgomp's.
    pub fn libgomp_spins(self, gomp_spincount: Option<u64>) -> Option<(u64, u64)> {
        let (usual, throttled) = match self {
            WaitPolicy::Fixed | WaitPolicy::Llvm | WaitPolicy::LlvmActive | WaitPolicy::LlvmPassive => return None,
            WaitPolicy::Libgomp => (300_000, 100),
            WaitPolicy::LibgompActive => (30_000_000_000, 1_000),
            WaitPolicy::LibgompPassive => (0, 0),
        };
        let usual = gomp_spincount.unwrap_or(usual);
        Some((usual, throttled.min(usual)))
    }

    /// The LLVM runtime's blocktime under this policy, ms: `KMP_BLOCKTIME` when given; else
    /// 200 (`KMP_DEFAULT_BLOCKTIME`), `KMP_MAX_BLOCKTIME` under `active`, none under
    /// `passive` (its `kmp.h`, `kmp_settings.cpp`). The same with more threads than CPUs: the
    /// runtime's default build (no monitor thread) then yields while it spins, which the model
    /// does not represent (docs/scheduler.md). `None` for the policies that are not that
    /// runtime's.
    pub fn llvm_blocktime_ms(self, kmp_blocktime_ms: Option<f64>) -> Option<f64> {
        let default_ms = match self {
            WaitPolicy::Llvm => 200.0,
            WaitPolicy::LlvmActive => KMP_MAX_BLOCKTIME_MS,
            WaitPolicy::LlvmPassive => 0.0,
            _ => return None,
        };
        Some(kmp_blocktime_ms.map_or(default_ms, |ms| ms.min(KMP_MAX_BLOCKTIME_MS)))
    }
}

impl Default for SchedConfig {
    fn default() -> Self {
        SchedConfig {
            noise_rate_per_cpu_hz: 50.0,
            noise_mean_us: 200.0,
            noise_bound_share: 0.5,
            imbalance_pct: 117,
            idle_balance: true,
            background_in_nr_running: false,
            migration_cost_us: 500.0,
            busy_factor: 16.0,
            sched_latency_us: 6000.0,
            min_granularity_us: 750.0,
            newidle_cost_mc_us: 5.0,
            newidle_cost_numa_us: 20.0,
            intra_node_refill_share: 0.25,
            tick_hz: 250.0,
            barrier_spin_us: 300.0,
            wait_policy: WaitPolicy::Fixed,
            gomp_spincount: None,
            kmp_blocktime_ms: None,
        }
    }
}

impl SimConfig {
    /// How long a thread of a process with `process_threads` threads spins at a barrier
    /// before it sleeps on `machine`, ns (docs/scheduler.md, "Barrier waits: spin, then
    /// sleep"). Under the `libgomp` policies: the spin count (the throttled one when the
    /// process has more threads than the machine has CPUs, libgomp's `do_spin`) times the
    /// cycles of one PAUSE, at the machine's clock; under the `llvm` ones, the blocktime.
    pub fn barrier_spin_ns(&self, machine: &numalab_core::Machine, process_threads: u32) -> f64 {
        let oversubscribed = process_threads > machine.total_cpus();
        let policy = self.sched.wait_policy;
        if let Some((usual, throttled)) = policy.libgomp_spins(self.sched.gomp_spincount) {
            let spins = if oversubscribed { throttled } else { usual };
            return spins as f64 * self.core.pause_cycles_on(machine) / machine.clock_ghz;
        }
        if let Some(ms) = policy.llvm_blocktime_ms(self.sched.kmp_blocktime_ms) {
            return ms * 1e6;
        }
        self.sched.barrier_spin_us * 1e3
    }

    /// Reject values that would make the simulation meaningless or unbounded, naming the key
    /// and its unit (ranges: docs/simulator-limits.md).
    pub fn validate(&self) -> Result<(), String> {
        let range = |k: &str, v: f64, lo: f64, hi: f64, unit: &str| {
            if v.is_finite() && v >= lo && v <= hi {
                Ok(())
            } else {
                Err(format!("sim.{k} = {v} {unit}: must be a finite number in [{lo}, {hi}]"))
            }
        };
        range("epoch_us", self.epoch_us, 1.0, 1e6, "µs")?;
        range("fast_forward_max_us", self.fast_forward_max_us, 0.0, 1e6, "µs")?;
        range("core.flops_per_cycle", self.core.flops_per_cycle, 1e-3, 1e4, "flops/cycle")?;
        range("core.mlp_stream", self.core.mlp_stream, 1e-3, 1e4, "misses")?;
        range("core.mlp_random", self.core.mlp_random, 1e-3, 1e4, "misses")?;
        range("core.mlp_dependent", self.core.mlp_dependent, 1e-3, 1e4, "misses")?;
        range("core.pause_cycles", self.core.pause_cycles, 1.0, numalab_core::machine::CoreParams::MAX_PAUSE_CYCLES, "cycles")?;
        range("tick_ms", self.tick_ms, 0.01, 1e7, "ms")?;
        range("metrics_interval_ms", self.metrics_interval_ms, 0.1, 1e7, "ms")?;
        range("sched.migration_cost_us", self.sched.migration_cost_us, 1.0, 1e7, "µs")?;
        range("sched.busy_factor", self.sched.busy_factor, 1.0, 1e3, "")?;
        range("sched.sched_latency_us", self.sched.sched_latency_us, 1.0, 1e7, "µs")?;
        range("sched.min_granularity_us", self.sched.min_granularity_us, 1.0, 1e7, "µs")?;
        range("sched.newidle_cost_mc_us", self.sched.newidle_cost_mc_us, 0.0, 1e6, "µs")?;
        range("sched.newidle_cost_numa_us", self.sched.newidle_cost_numa_us, 0.0, 1e6, "µs")?;
        range("sched.noise_bound_share", self.sched.noise_bound_share, 0.0, 1.0, "")?;
        range("sched.tick_hz", self.sched.tick_hz, 1.0, 1e5, "Hz")?;
        range("sched.barrier_spin_us", self.sched.barrier_spin_us, 0.0, 1e7, "µs")?;
        if let Some(ms) = self.sched.kmp_blocktime_ms {
            range("sched.kmp_blocktime_ms", ms, 0.0, KMP_MAX_BLOCKTIME_MS, "ms")?;
        }
        range("sched.noise_rate_per_cpu_hz", self.sched.noise_rate_per_cpu_hz, 0.0, 1e5, "Hz")?;
        range("sched.noise_mean_us", self.sched.noise_mean_us, 0.0, 1e6, "µs")?;
        range("sched.intra_node_refill_share", self.sched.intra_node_refill_share, 0.0, 1.0, "")?;
        range("memory.solver_tolerance", self.memory.solver_tolerance, 0.0, 1.0, "")?;
        range("memory.demand_tolerance", self.memory.demand_tolerance, 0.0, 1.0, "")?;
        range("memory.population_tolerance", self.memory.population_tolerance, 0.0, 1.0, "")?;
        if self.memory.solver_iterations > 100_000 {
            return Err(format!("sim.memory.solver_iterations = {}: at most 100000", self.memory.solver_iterations));
        }
        if !(self.core.smt_share > 0.0 && self.core.smt_share <= 1.0) {
            return Err(format!("sim.core.smt_share = {} must lie in (0, 1]", self.core.smt_share));
        }
        if !(self.memory.random_efficiency > 0.0 && self.memory.random_efficiency <= 1.0) {
            return Err(format!("sim.memory.random_efficiency = {} must lie in (0, 1]", self.memory.random_efficiency));
        }
        if self.memory.solver_tolerance.is_nan() || self.memory.solver_tolerance < 0.0 {
            return Err(format!("sim.memory.solver_tolerance = {} must not be negative", self.memory.solver_tolerance));
        }
        if self.memory.solver_iterations == 0 {
            return Err("sim.memory.solver_iterations must be at least 1".into());
        }
        if self.sched.noise_rate_per_cpu_hz < 0.0 || self.sched.noise_mean_us < 0.0 {
            return Err("sim.sched noise rate and duration must not be negative".into());
        }
        if self.sched.imbalance_pct < 100 {
            return Err(format!("sim.sched.imbalance_pct = {} must be at least 100", self.sched.imbalance_pct));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use numalab_core::Machine;

    fn preset(name: &str) -> Machine {
        numalab_core::machine::presets::load(name).unwrap()
    }

    fn with_policy(policy: WaitPolicy, spincount: Option<u64>) -> SimConfig {
        let mut cfg = SimConfig::default();
        cfg.sched.wait_policy = policy;
        cfg.sched.gomp_spincount = spincount;
        cfg
    }

    /// libgomp's counts (its `env.c`): unset 300,000 and throttled 100; active 3e10 and
    /// 1,000; passive none; `GOMP_SPINCOUNT` replaces the usual count and caps the throttled.
    #[test]
    fn libgomp_spin_counts_follow_the_runtime() {
        assert_eq!(WaitPolicy::Fixed.libgomp_spins(Some(5)), None);
        assert_eq!(WaitPolicy::Libgomp.libgomp_spins(None), Some((300_000, 100)));
        assert_eq!(WaitPolicy::LibgompActive.libgomp_spins(None), Some((30_000_000_000, 1_000)));
        assert_eq!(WaitPolicy::LibgompPassive.libgomp_spins(None), Some((0, 0)));
        assert_eq!(WaitPolicy::Libgomp.libgomp_spins(Some(50)), Some((50, 50)));
        assert_eq!(WaitPolicy::Libgomp.libgomp_spins(Some(1_000_000)), Some((1_000_000, 100)));
        assert_eq!(WaitPolicy::LibgompPassive.libgomp_spins(Some(1_000)), Some((1_000, 0)));
    }

    /// Worked examples (docs/scheduler.md, "Barrier waits: spin, then sleep"): on
    /// server-b-8n (140 cycles per PAUSE, 2.4 GHz, 80 CPUs) libgomp's 300,000 spins last
    /// 17.5 ms; a process of 81 threads is throttled to 100 spins; `fixed` ignores both.
    #[test]
    fn spin_time_is_spins_times_pause_at_the_clock() {
        let b = preset("server-b-8n");
        assert_eq!(b.total_cpus(), 80);
        let close = |got: f64, want: f64| assert!((got - want).abs() <= want * 1e-12, "{got} ns, want {want}");
        close(with_policy(WaitPolicy::Libgomp, None).barrier_spin_ns(&b, 80), 17.5e6);
        close(with_policy(WaitPolicy::Libgomp, None).barrier_spin_ns(&b, 81), 100.0 * 140.0 / 2.4);
        close(with_policy(WaitPolicy::LibgompActive, None).barrier_spin_ns(&b, 80), 3e10 * 140.0 / 2.4);
        assert_eq!(with_policy(WaitPolicy::LibgompPassive, None).barrier_spin_ns(&b, 80), 0.0);
        close(with_policy(WaitPolicy::Libgomp, Some(1_200)).barrier_spin_ns(&b, 80), 70_000.0);
        assert_eq!(with_policy(WaitPolicy::Fixed, Some(1_200)).barrier_spin_ns(&b, 81), 300_000.0);
        // A machine whose file states no PAUSE latency takes `sim.core.pause_cycles`.
        let amd = preset("amd48");
        assert_eq!(amd.pause_cycles(), None);
        let mut cfg = with_policy(WaitPolicy::Libgomp, None);
        close(cfg.barrier_spin_ns(&amd, 48), 300_000.0 * 10.0 / 2.2);
        cfg.core.pause_cycles = 40.0;
        close(cfg.barrier_spin_ns(&amd, 48), 300_000.0 * 40.0 / 2.2);
        // ... and a machine that states one keeps it.
        close(cfg.barrier_spin_ns(&b, 80), 17.5e6);
    }

    /// The LLVM and Intel runtime's blocktime (docs/scheduler.md, "Barrier waits: spin, then
    /// sleep"): 200 ms whatever the machine or the thread count, `KMP_BLOCKTIME` when given,
    /// `INT_MAX` ms under `active`, none under `passive`.
    #[test]
    fn llvm_blocktime_is_time_not_spins() {
        let b = preset("server-b-8n");
        let mut cfg = with_policy(WaitPolicy::Llvm, Some(5));
        assert_eq!(cfg.barrier_spin_ns(&b, 80), 200e6);
        assert_eq!(cfg.barrier_spin_ns(&preset("amd48"), 48), 200e6);
        assert_eq!(cfg.barrier_spin_ns(&b, 81), 200e6);
        cfg.sched.kmp_blocktime_ms = Some(1.5);
        assert_eq!(cfg.barrier_spin_ns(&b, 80), 1.5e6);
        cfg.sched.kmp_blocktime_ms = None;
        cfg.sched.wait_policy = WaitPolicy::LlvmActive;
        assert_eq!(cfg.barrier_spin_ns(&b, 81), KMP_MAX_BLOCKTIME_MS * 1e6);
        cfg.sched.wait_policy = WaitPolicy::LlvmPassive;
        assert_eq!(cfg.barrier_spin_ns(&b, 80), 0.0);
        assert_eq!(WaitPolicy::Libgomp.llvm_blocktime_ms(Some(3.0)), None);
        assert_eq!(WaitPolicy::Llvm.libgomp_spins(Some(3)), None);
        cfg.sched.kmp_blocktime_ms = Some(-1.0);
        assert!(cfg.validate().unwrap_err().starts_with("sim.sched.kmp_blocktime_ms = -1"));
    }

    #[test]
    fn wait_policy_reads_from_toml_and_refuses_unknown_names() {
        let cfg: SimConfig = toml::from_str("[sched]\nwait_policy = \"libgomp-passive\"\ngomp_spincount = 10").unwrap();
        assert_eq!(cfg.sched.wait_policy, WaitPolicy::LibgompPassive);
        assert_eq!(cfg.sched.gomp_spincount, Some(10));
        let err = toml::from_str::<SimConfig>("[sched]\nwait_policy = \"gomp\"").unwrap_err().to_string();
        assert!(err.contains("unknown variant `gomp`") && err.contains("libgomp-active") && err.contains("llvm-passive"), "{err}");
    }

    #[test]
    fn pause_cycles_out_of_range_is_refused_with_the_key() {
        for bad in [0.0, 0.5, 20_000.0, f64::NAN] {
            let mut cfg = SimConfig::default();
            cfg.core.pause_cycles = bad;
            let err = cfg.validate().unwrap_err();
            assert!(err.starts_with("sim.core.pause_cycles = "), "{err}");
        }
    }
}
