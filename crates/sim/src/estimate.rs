//! The work estimate made before a run: how many simulated references, epochs and
//! scheduler events a scenario will cost, and how much memory, so a command can refuse a
//! run that would take hours (or exhaust memory) before it starts. Pure arithmetic on the
//! compiled scenario; nothing is simulated. Limits: docs/simulator-limits.md.

use crate::Scenario;

/// Work units (references + thread-epochs + scheduler events) one run may need without
/// `--force`. The simulator handles about 10^8 units per second per core, so this is
/// about 15 minutes of one core.
pub const MAX_RUN_WORK_UNITS: f64 = 1e11;
/// Work units of all runs of one scenario together without `--force` (about 3 CPU-hours).
pub const MAX_WORK_UNITS: f64 = 1e12;
/// Memory one run may need, bytes (8 GiB).
pub const MAX_RUN_MEMORY_BYTES: f64 = 8.0 * (1u64 << 30) as f64;
/// Work units above which a command says on standard error that it will take a while.
pub const NOTE_WORK_UNITS: f64 = 1e9;

/// What one run of a scenario will cost (estimates, not promises).
#[derive(Clone, Debug, PartialEq)]
pub struct Estimate {
    pub threads: u32,
    pub pages: u64,
    /// Memory-level references of one run.
    pub refs: u64,
    /// Estimated simulated time of one run, seconds.
    pub sim_seconds: f64,
    /// Epochs of one run.
    pub epochs: f64,
    /// Background-noise tasks and scheduler ticks of one run.
    pub sched_events: f64,
    /// Work units of one run: refs + epochs × threads + scheduler events.
    pub work_units: f64,
    /// Memory one run needs, bytes.
    pub memory_bytes: f64,
}

impl Estimate {
    /// Estimate one run of `s`.
    pub fn of(s: &Scenario) -> Estimate {
        let m = &s.machine;
        let p = &s.program;
        let threads = p.threads.max(1);
        let refs = p.estimated_refs();
        let (flops, gap_ns) = p.estimated_compute();
        let cpu_nodes = m.cpu_nodes();
        let local_ns = cpu_nodes.first().map_or(100.0, |&n| m.latency_ns[n as usize][n as usize]).max(1.0);
        let mem_bw: f64 = m.nodes.iter().map(|n| n.mem_bw_gbps).sum::<f64>().max(1e-3);
        let busy = threads.min(m.total_cpus().max(1)) as f64;
        // Latency-bound time with streaming overlap, or bandwidth-bound time, whichever is longer.
        let mem_ns = refs as f64 * local_ns / s.sim.core.mlp_stream_on(m).max(1e-3) / busy;
        let bw_ns = refs as f64 * p.access_bytes as f64 / mem_bw;
        let compute_ns = (flops / (s.sim.core.flops_per_cycle * m.clock_ghz).max(1e-9) + gap_ns) / busy;
        let sim_seconds = (mem_ns.max(bw_ns) + compute_ns) * 1e-9;
        let epochs = sim_seconds * 1e6 / s.sim.epoch_us;
        let cpus = m.total_cpus() as f64;
        let sched_events = sim_seconds * cpus * (s.sim.sched.noise_rate_per_cpu_hz + s.sim.sched.tick_hz);
        let work_units = refs as f64 + epochs * threads as f64 + sched_events;
        // Page table (node, flags, counters) and per-thread state; the steps of the schedule.
        let memory_bytes = p.total_pages as f64 * 48.0 + threads as f64 * 64.0 * 1024.0 + p.steps.len() as f64 * 96.0;
        Estimate { threads, pages: p.total_pages, refs, sim_seconds, epochs, sched_events, work_units, memory_bytes }
    }

    /// `Err` with one sentence when `runs` runs exceed the limits.
    pub fn check(&self, runs: u32) -> Result<(), String> {
        let total = self.work_units * runs.max(1) as f64;
        if self.work_units.is_nan() || self.work_units > MAX_RUN_WORK_UNITS {
            return Err(format!(
                "one run is estimated at {:.2e} work units ({} threads, {:.2e} references, {:.2e} epochs, {:.1} simulated seconds), above the limit of {:.0e} per run; \
lower --scale or the workload's iterations, or pass --force",
                self.work_units, self.threads, self.refs as f64, self.epochs, self.sim_seconds, MAX_RUN_WORK_UNITS
            ));
        }
        if total.is_nan() || total > MAX_WORK_UNITS {
            return Err(format!(
                "the run is estimated at {:.2e} work units ({} threads, {:.2e} references and {:.2e} epochs per run, {} runs), above the limit of {:.0e}; \
lower --scale, --runs or the workload's iterations, or pass --force",
                total, self.threads, self.refs as f64, self.epochs, runs, MAX_WORK_UNITS
            ));
        }
        if self.memory_bytes.is_nan() || self.memory_bytes > MAX_RUN_MEMORY_BYTES {
            return Err(format!(
                "one run is estimated to need {:.1} GiB of memory, above the limit of {:.0} GiB; lower --scale or pass --force",
                self.memory_bytes / (1u64 << 30) as f64,
                MAX_RUN_MEMORY_BYTES / (1u64 << 30) as f64
            ));
        }
        Ok(())
    }
}
