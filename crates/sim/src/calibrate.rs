//! `numalab calibrate`: built-in probes run on a simulated machine and set beside the published
//! measurements stored with the machine (docs/calibration.md).
//!
//! Every probe is an ordinary workload (docs/workloads.md) run through the simulator with the
//! `first-touch` policy and pinned threads; nothing here models memory itself. A probe runs
//! twice, with `n` and `2n` references per thread, and takes the difference: the per-reference
//! time of the steady state, free of the first-touch faults and of the start-up epoch.

use crate::contention::{Contention, Demand};
use crate::{run_one, Scenario, SimConfig, SimError};
use numalab_core::machine::{Figure, Machine};
use numalab_core::{CpuId, NodeId};
use numalab_workload::{compile, presets as wp, CompileOptions};
use serde::Serialize;
use std::sync::Arc;

/// Bytes of each STREAM array per thread, at most: the simulator has no cache model, so the
/// size only sets how many pages are first-touched. Smaller on machines whose nodes are small.
const ARRAY_BYTES_PER_THREAD: u64 = 4 << 20;
/// Bytes of the pointer-chase buffer, at most.
const CHASE_BYTES: u64 = 64 << 20;

/// `(bytes of one array per thread, bytes of the chase buffer)` for `machine`: small enough
/// that three arrays of every core of the largest node fit in a quarter of the smallest memory
/// node, whole pages.
fn probe_sizes(machine: &Machine) -> (u64, u64) {
    let page = machine.base_page_bytes();
    let smallest = machine.nodes.iter().map(|n| n.mem_bytes).filter(|&b| b > 0).min().unwrap_or(0);
    let cores = machine.nodes.iter().map(|n| n.cores as u64 * machine.smt as u64).max().unwrap_or(1).max(1);
    let array = (smallest / 4 / (3 * cores)).min(ARRAY_BYTES_PER_THREAD) / page * page;
    let chase = (smallest / 4).min(CHASE_BYTES) / page * page;
    (array.max(page), chase.max(page))
}
/// Waits between references of the loaded-latency sweep, ns (0 = no wait).
pub const LOADED_GAPS_NS: [f64; 9] = [0.0, 5.0, 10.0, 20.0, 40.0, 80.0, 160.0, 320.0, 640.0];

/// How long the probes run.
#[derive(Clone, Debug)]
pub struct ProbeOptions {
    /// References per thread of the shorter of the two runs of a probe (the longer has twice).
    pub refs_per_thread: u64,
    pub sim: SimConfig,
}

impl Default for ProbeOptions {
    /// The simulator's defaults with the scheduler's background noise off: the probes model
    /// measurements taken on an otherwise idle machine with pinned threads, and the noise's
    /// stolen CPU time would enter the loaded-latency sweep amplified by the MLP.
    fn default() -> Self {
        let mut sim = SimConfig::default();
        sim.sched.noise_rate_per_cpu_hz = 0.0;
        ProbeOptions { refs_per_thread: 200_000, sim }
    }
}

/// A simulated value beside its published figure.
#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    /// Field name of the figure in the machine's `[published]` table.
    pub figure: &'static str,
    pub simulated: f64,
    pub published: Option<f64>,
    /// `(simulated − published) / published`.
    pub rel_error: Option<f64>,
    pub source: Option<String>,
    /// The figure's known gap (the missing mechanism), if the machine file states one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gap: Option<String>,
    /// What the probe ran: threads and nodes.
    pub probe: String,
}

/// Idle latency of one CPU node → memory node pair.
#[derive(Clone, Debug, Serialize)]
pub struct PairLatency {
    pub cpu_node: NodeId,
    pub mem_node: NodeId,
    pub hops: u32,
    pub simulated_ns: f64,
    /// The preset's `latency_ns[i][j]`.
    pub preset_ns: f64,
}

/// One point of the loaded-latency sweep.
#[derive(Clone, Debug, Serialize)]
pub struct LoadedPoint {
    pub gap_ns: f64,
    pub bandwidth_gbps: f64,
    pub latency_ns: f64,
}

/// Contended latency seen from one CPU node while every core of the machine chases the memory
/// of one node (the condition of a machine file's `latency_ns_contended`).
#[derive(Clone, Debug, Serialize)]
pub struct ContendedRow {
    pub cpu_node: NodeId,
    pub hops: u32,
    /// Chasing threads on this node (one per core).
    pub threads: u32,
    pub simulated_ns: f64,
    /// The machine file's `latency_ns_contended[cpu_node][mem_node]`, when it states one
    /// (0.0 there means not measured, and is reported as absent).
    pub machine_ns: Option<f64>,
}

/// Everything `numalab calibrate` prints.
#[derive(Clone, Debug, Serialize)]
pub struct CalibrationReport {
    pub machine: String,
    /// The machine's documented tolerance, percent (absent: no published figures).
    pub tolerance_pct: Option<f64>,
    pub comparisons: Vec<Comparison>,
    pub pairs: Vec<PairLatency>,
    /// CPU node and memory node of the loaded-latency sweep, and its thread count.
    pub loaded_node: NodeId,
    pub loaded_threads: u32,
    pub loaded: Vec<LoadedPoint>,
    /// Memory node of the contended-latency probe, and its rows by CPU node.
    pub contended_node: NodeId,
    pub contended: Vec<ContendedRow>,
}

impl CalibrationReport {
    /// Figures whose relative error exceeds the tolerance, known gaps excepted.
    pub fn out_of_tolerance(&self) -> Vec<&Comparison> {
        let Some(tol) = self.tolerance_pct else { return Vec::new() };
        self.comparisons.iter().filter(|c| c.gap.is_none() && c.rel_error.is_some_and(|e| e.abs() * 100.0 > tol)).collect()
    }

    /// Known gaps that are within the tolerance after all: the stated gap no longer holds.
    pub fn closed_gaps(&self) -> Vec<&Comparison> {
        let Some(tol) = self.tolerance_pct else { return Vec::new() };
        self.comparisons.iter().filter(|c| c.gap.is_some() && c.rel_error.is_some_and(|e| e.abs() * 100.0 <= tol)).collect()
    }
}

/// The first hardware thread of every core of `node`.
fn cores_of(machine: &Machine, node: NodeId) -> Vec<CpuId> {
    let first = machine.cpu_table().first_cpu_of_node[node as usize];
    (0..machine.nodes[node as usize].cores).map(|c| first + c).collect()
}

fn triad_text(array_bytes: u64, threads: usize, home: Option<NodeId>, refs: u64) -> String {
    let mut t = format!("[workload]\nname = \"probe-triad\"\nthreads = {threads}\ninit = \"parallel_ft\"\npinned = true\n");
    let home = home.map(|n| format!("home = {n}\n")).unwrap_or_default();
    for r in ["a", "b", "c"] {
        t += &format!(
            "[[region]]\nname = \"{r}\"\nbytes = {}\nsharing = \"partitioned\"\ninit_by = \"owner\"\n{home}",
            array_bytes * threads as u64
        );
    }
    // STREAM triad a = b + s·c: two flops per element, three elements per iteration.
    t += &format!(
        "[[phase]]\nname = \"triad\"\nrefs = {refs}\nflops_per_access = 0.6666666666666666\n\
         accesses = [ {{ region = \"b\", who = \"owner\", pattern = \"seq\", share = 0.3333333333333333, read_frac = 1.0 }},\n\
         {{ region = \"c\", who = \"owner\", pattern = \"seq\", share = 0.3333333333333333, read_frac = 1.0 }},\n\
         {{ region = \"a\", who = \"owner\", pattern = \"seq\", share = 0.3333333333333334, read_frac = 0.0 }} ]\n"
    );
    t
}

fn chase_text(chase_bytes: u64, threads: usize, mem_node: NodeId, refs: u64) -> String {
    // Private: each thread chases its own block of the buffer (the blocks split `chase_bytes`).
    format!(
        "[workload]\nname = \"probe-chase\"\nthreads = {threads}\ninit = \"parallel_ft\"\npinned = true\n\
         [[region]]\nname = \"buf\"\nbytes = {}\nsharing = \"private\"\ninit_by = \"owner\"\nhome = {mem_node}\n\
         [[phase]]\nname = \"chase\"\nrefs = {refs}\n\
         accesses = [ {{ region = \"buf\", who = \"owner\", pattern = \"chase\", share = 1.0 }} ]\n",
        (chase_bytes / threads as u64).max(4096) * threads as u64
    )
}

fn loaded_text(array_bytes: u64, threads: usize, mem_node: NodeId, gap_ns: f64, refs: u64) -> String {
    let wait = if gap_ns > 0.0 { format!("gap = {{ us = {}, dist = \"const\" }}\n", gap_ns / 1000.0) } else { String::new() };
    format!(
        "[workload]\nname = \"probe-loaded\"\nthreads = {threads}\ninit = \"parallel_ft\"\npinned = true\n\
         [[region]]\nname = \"buf\"\nbytes = {}\nsharing = \"partitioned\"\ninit_by = \"owner\"\nhome = {mem_node}\n\
         [[phase]]\nname = \"load\"\nrefs = {refs}\n{wait}\
         accesses = [ {{ region = \"buf\", who = \"owner\", pattern = \"seq\", share = 1.0, read_frac = 1.0 }} ]\n",
        array_bytes * threads as u64
    )
}

/// Simulated seconds of one run of `text` with its threads pinned on `cpus`.
fn run_seconds(machine: &Arc<Machine>, text: &str, cpus: &[CpuId], sim: &SimConfig) -> Result<f64, SimError> {
    let file = wp::parse(text, "calibration probe").map_err(|e| SimError::Internal(e.to_string()))?;
    let mut program = compile(&file, "calibration probe", machine, &CompileOptions::default())
        .map_err(|e| SimError::Internal(format!("calibration probe on {}: {e}", machine.name)))?;
    program.initial_cpus = cpus.to_vec();
    program.pinned = true;
    let policy = numalab_policy::find("first-touch").map_err(|e| SimError::Policy(e.to_string()))?;
    let scenario =
        Scenario { machine: machine.clone(), program: Arc::new(program), policy, policy_config: Default::default(), sim: sim.clone() };
    scenario.check()?;
    Ok(run_one(&scenario, 1)?.exec_time_s)
}

/// Steady-state seconds per reference of one thread: `make(refs)` builds the probe for `refs`
/// references in all, run with `n` and `2n` per thread.
fn seconds_per_ref(machine: &Arc<Machine>, cpus: &[CpuId], opts: &ProbeOptions, make: impl Fn(u64) -> String) -> Result<f64, SimError> {
    let n = opts.refs_per_thread;
    let threads = cpus.len() as u64;
    let short = run_seconds(machine, &make(n * threads), cpus, &opts.sim)?;
    let long = run_seconds(machine, &make(2 * n * threads), cpus, &opts.sim)?;
    let dt = long - short;
    if dt <= 0.0 {
        return Err(SimError::Internal(format!("calibration probe on {}: the longer run was not longer", machine.name)));
    }
    Ok(dt / n as f64)
}

/// STREAM triad bandwidth of threads pinned on `cpus`, each on its own arrays (first-touched,
/// or all on `home`), GB/s as STREAM counts bytes (every array element read or written once;
/// one simulated reference moves one `access_bytes` line of one array).
pub fn stream_triad_gbps(machine: &Arc<Machine>, cpus: &[CpuId], home: Option<NodeId>, opts: &ProbeOptions) -> Result<f64, SimError> {
    let s = seconds_per_ref(machine, cpus, opts, |refs| triad_text(probe_sizes(machine).0, cpus.len(), home, refs))?;
    Ok(cpus.len() as f64 * 64.0 / s / 1e9)
}

/// Idle latency of a dependent pointer chase by one thread on `cpu` over memory of `mem_node`, ns.
pub fn chase_latency_ns(machine: &Arc<Machine>, cpu: CpuId, mem_node: NodeId, opts: &ProbeOptions) -> Result<f64, SimError> {
    chase_team_latency_ns(machine, &[cpu], mem_node, opts)
}

/// Latency of a dependent pointer chase by one thread on each of `cpus` at once, each over its
/// own part of a buffer on `mem_node`, ns: the steady-state time per reference of the run (its
/// last thread's) times `mlp_dependent`. With threads that see the same latency (one node's
/// cores), it is their loaded latency.
pub fn chase_team_latency_ns(machine: &Arc<Machine>, cpus: &[CpuId], mem_node: NodeId, opts: &ProbeOptions) -> Result<f64, SimError> {
    let s = seconds_per_ref(machine, cpus, opts, |refs| chase_text(probe_sizes(machine).1, cpus.len(), mem_node, refs))?;
    Ok(opts.sim.core.mlp_dependent * s * 1e9)
}

/// One point of the loaded-latency sweep: the threads on `cpus` stream reads from `mem_node`
/// with a wait of `gap_ns` after each reference. The latency follows from the core model
/// (docs/simulator.md): a reference takes `gap + L / MLP`, so `L = MLP · (t − gap)`.
pub fn loaded_point(
    machine: &Arc<Machine>,
    cpus: &[CpuId],
    mem_node: NodeId,
    gap_ns: f64,
    opts: &ProbeOptions,
) -> Result<LoadedPoint, SimError> {
    let s = seconds_per_ref(machine, cpus, opts, |refs| loaded_text(probe_sizes(machine).0, cpus.len(), mem_node, gap_ns, refs))?;
    let t_ns = s * 1e9;
    Ok(LoadedPoint {
        gap_ns,
        bandwidth_gbps: cpus.len() as f64 * 64.0 / t_ns,
        latency_ns: opts.sim.core.mlp_stream_on(machine) * (t_ns - gap_ns),
    })
}

/// Iterations of the contended-latency solve: it starts cold (the engine warm-starts each epoch
/// from the last), so it gets many steps to converge.
const CONTENDED_ITERATIONS: u32 = 5000;

/// Contended latency (docs/calibration.md, "Contended latency"): one thread on every core of
/// every CPU node follows a dependent chase over memory of `mem_node`, and the simulator's
/// contention model (docs/simulator.md, "Contention") is solved for those demands, as the engine
/// solves it every epoch: a chase keeps `mlp_dependent` lines in flight, its lines occupy the
/// controller for `access_bytes / bandwidth / random_efficiency`, and no compute comes between
/// them. Returns one row per CPU node (all threads of a node see the same latency).
pub fn contended_latency(machine: &Machine, mem_node: NodeId, sim: &SimConfig) -> Vec<ContendedRow> {
    let n = machine.node_count();
    let mut demands = Vec::new();
    for i in machine.cpu_nodes() {
        for _ in 0..machine.nodes[i as usize].cores {
            let mut frac = vec![0.0; n];
            frac[mem_node as usize] = 1.0;
            demands.push(Demand {
                node: i as usize,
                share: 1.0,
                compute_ns: 0.0,
                inv_mlp: 1.0 / sim.core.mlp_dependent,
                svc_mult: 1.0 / sim.memory.random_efficiency,
                frac,
                write_frac: 0.0,
            });
        }
    }
    let mut c = Contention::new(machine, &machine.interconnect(), 64, demands.len());
    c.solve(&demands, CONTENDED_ITERATIONS, 1e-9, None, false);
    let mut rows = Vec::new();
    let mut t = 0;
    for i in machine.cpu_nodes() {
        let threads = machine.nodes[i as usize].cores;
        let simulated_ns = c.latency(t)[mem_node as usize];
        t += threads as usize;
        let machine_ns = machine.latency_ns_contended.as_ref().map(|m| m[i as usize][mem_node as usize]).filter(|&v| v > 0.0);
        rows.push(ContendedRow { cpu_node: i, hops: machine.hops[i as usize][mem_node as usize], threads, simulated_ns, machine_ns });
    }
    rows
}

fn compare(figure: &'static str, simulated: f64, published: Option<&Figure>, probe: String) -> Comparison {
    Comparison {
        figure,
        simulated,
        published: published.map(|f| f.value),
        rel_error: published.map(|f| (simulated - f.value) / f.value),
        source: published.map(|f| f.source.clone()),
        gap: published.map(|f| f.gap.clone()).filter(|g| !g.is_empty()),
        probe,
    }
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

/// Run every probe on `machine`.
pub fn calibrate(machine: &Machine, opts: &ProbeOptions) -> Result<CalibrationReport, SimError> {
    let m = Arc::new(machine.clone());
    let cpu_nodes = m.cpu_nodes();
    let Some(&first) = cpu_nodes.first() else {
        return Err(SimError::Machine(format!("machine '{}' has no node with CPUs to run probes on", m.name)));
    };
    let published = m.published.as_ref();
    let mut comparisons = Vec::new();

    let all: Vec<CpuId> = cpu_nodes.iter().flat_map(|&n| cores_of(&m, n)).collect();
    let socket0 = m.nodes[first as usize].socket;
    let socket_nodes: Vec<NodeId> = cpu_nodes.iter().copied().filter(|&n| m.nodes[n as usize].socket == socket0).collect();
    let socket: Vec<CpuId> = socket_nodes.iter().flat_map(|&n| cores_of(&m, n)).collect();
    let one = [all[0]];
    let mut triads = vec![
        ("stream_triad_all_gbps", &all[..], None, format!("{} threads, one per core, on every CPU node", all.len())),
        ("stream_triad_socket_gbps", &socket[..], None, format!("{} threads on socket {socket0} (nodes {socket_nodes:?})", socket.len())),
        ("stream_triad_thread_gbps", &one[..], None, format!("1 thread on node {first}")),
    ];
    // The first CPU-less memory node (HBM, MCDRAM, CXL), loaded by the cores of its socket.
    let cpuless = m.memory_nodes().into_iter().find(|&n| m.nodes[n as usize].cores == 0);
    let cpuless_cpus: Vec<CpuId> = match cpuless {
        Some(n) => cpu_nodes
            .iter()
            .copied()
            .filter(|&c| m.nodes[c as usize].socket == m.nodes[n as usize].socket)
            .flat_map(|c| cores_of(&m, c))
            .collect(),
        None => Vec::new(),
    };
    let cpuless_one: Vec<CpuId> = cpuless_cpus.first().copied().into_iter().collect();
    if let Some(n) = cpuless {
        triads.push((
            "stream_triad_cpuless_gbps",
            &cpuless_cpus[..],
            Some(n),
            format!("{} threads of socket {} on CPU-less node {n}", cpuless_cpus.len(), m.nodes[n as usize].socket),
        ));
        if !cpuless_one.is_empty() {
            triads.push((
                "stream_triad_cpuless_thread_gbps",
                &cpuless_one[..],
                Some(n),
                format!("1 thread of socket {} on CPU-less node {n}", m.nodes[n as usize].socket),
            ));
        }
    }
    for (figure, cpus, home, probe) in triads {
        let gbps = stream_triad_gbps(&m, cpus, home, opts)?;
        let fig = published.and_then(|p| p.figures().into_iter().find(|(n, _)| *n == figure).and_then(|(_, f)| f.cloned()));
        comparisons.push(compare(figure, gbps, fig.as_ref(), probe));
    }

    let mut pairs = Vec::new();
    for &i in &cpu_nodes {
        let cpu = m.cpu_table().first_cpu_of_node[i as usize];
        for j in m.memory_nodes() {
            let ns = chase_latency_ns(&m, cpu, j, opts)?;
            pairs.push(PairLatency {
                cpu_node: i,
                mem_node: j,
                hops: m.hops[i as usize][j as usize],
                simulated_ns: ns,
                preset_ns: m.latency_ns[i as usize][j as usize],
            });
        }
    }
    let dram = |p: &&PairLatency| m.nodes[p.mem_node as usize].tier == numalab_core::machine::Tier::Dram;
    let local: Vec<f64> = pairs.iter().filter(|p| p.hops == 0).map(|p| p.simulated_ns).collect();
    comparisons.push(compare(
        "latency_local_ns",
        mean(&local),
        published.and_then(|p| p.latency_local_ns.as_ref()),
        format!("pointer chase, mean over {} CPU nodes on their own memory", local.len()),
    ));
    let remote: Vec<f64> =
        pairs.iter().filter(|p| p.hops == 1 && m.nodes[p.mem_node as usize].cores > 0).filter(dram).map(|p| p.simulated_ns).collect();
    if !remote.is_empty() {
        comparisons.push(compare(
            "latency_remote_ns",
            mean(&remote),
            published.and_then(|p| p.latency_remote_ns.as_ref()),
            format!("pointer chase, mean over {} one-hop pairs of CPU nodes", remote.len()),
        ));
    }

    let node_cpus = cores_of(&m, first);
    let loaded = LOADED_GAPS_NS.iter().map(|&g| loaded_point(&m, &node_cpus, first, g, opts)).collect::<Result<Vec<_>, _>>()?;

    // Contended latency: every core chases the first CPU node's memory.
    let contended = contended_latency(&m, first, &opts.sim);
    let total: u32 = contended.iter().map(|r| r.threads).sum();
    let local: Vec<&ContendedRow> = contended.iter().filter(|r| r.hops == 0).collect();
    comparisons.push(compare(
        "latency_contended_local_ns",
        mean(&local.iter().map(|r| r.simulated_ns).collect::<Vec<_>>()),
        published.and_then(|p| p.latency_contended_local_ns.as_ref()),
        format!("{total} threads, one per core, chase node {first}'s memory; seen from node {first}"),
    ));
    let one_hop: Vec<&ContendedRow> = contended.iter().filter(|r| r.hops == 1).collect();
    if !one_hop.is_empty() {
        comparisons.push(compare(
            "latency_contended_remote_ns",
            mean(&one_hop.iter().map(|r| r.simulated_ns).collect::<Vec<_>>()),
            published.and_then(|p| p.latency_contended_remote_ns.as_ref()),
            format!("the same; mean seen from the {} CPU nodes one hop away", one_hop.len()),
        ));
    }
    Ok(CalibrationReport {
        machine: m.name.clone(),
        tolerance_pct: published.map(|p| p.tolerance_pct),
        comparisons,
        pairs,
        loaded_node: first,
        loaded_threads: node_cpus.len() as u32,
        loaded,
        contended_node: first,
        contended,
    })
}
