//! The machine model: NUMA nodes, their memory and CPUs, the latency/distance matrices, the
//! interconnect and the operating-system costs the simulator charges.
//!
//! The canonical file format is one TOML table per machine with a `[[nodes]]` array (one table
//! per node, so `--set machine.nodes[2].mem_bw_gbps=40` addresses one node) and the
//! `nodes × nodes` matrices at top level. See `docs/machines.md`.

mod error;
mod interconnect;
mod measured;
pub mod presets;
mod published;
mod validate;
pub use validate::{limits, short as validate_short};

pub use error::MachineError;
pub use interconnect::{Interconnect, LinkId, LinkInfo};
pub use measured::{LoadedPoint, Measured, PinCheck};
pub use published::{Figure, Published};

use crate::ids::{CpuId, NodeId};
use serde::{Deserialize, Serialize};

/// Memory technology of a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum Tier {
    Dram,
    Mcdram,
    Hbm,
    Cxl,
}

impl Tier {
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Dram => "dram",
            Tier::Mcdram => "mcdram",
            Tier::Hbm => "hbm",
            Tier::Cxl => "cxl",
        }
    }
}

/// How cross-socket direct pairs share link capacity (docs/machines.md, "Interconnect model").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LinkSharing {
    /// Every direct node pair is its own link.
    NodePair,
    /// All cross-socket direct pairs between the same two sockets share one capacity.
    SocketPair,
}

/// One NUMA node.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Node {
    /// Package the node belongs to (a CPU-less node: the package it is attached to).
    pub socket: u32,
    /// Physical cores; 0 for a CPU-less memory node (HBM, MCDRAM, CXL).
    pub cores: u32,
    pub mem_bytes: u64,
    pub tier: Tier,
    /// Last-level cache serving the node's cores (0 = none).
    #[serde(default)]
    pub llc_bytes: u64,
    /// Sustainable bandwidth of the node's memory controllers, GB/s (10^9 B/s).
    pub mem_bw_gbps: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_peak_gbps: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_channels: Option<u32>,
}

/// Raw link-utilisation counter readings on an idle and a saturated link (percent).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkCounterRange {
    pub idle: f64,
    pub saturated: f64,
}

/// Inter-processor interrupt cost, microseconds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IpiCost {
    pub native: f64,
    pub guest: f64,
}

/// Measured OS page-operation costs of a source machine, milliseconds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PageOpCostsMs {
    pub migrate: f64,
    pub replicate: f64,
    pub coherency_fault: f64,
}

/// Operating-system costs the simulator charges. Every default is an assumption [A] documented
/// in docs/machines.md; tune them per machine with `--set machine.os_costs.NAME=...`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OsCosts {
    /// Minor fault that allocates and zeroes a fresh 4 KiB page.
    pub first_touch_fault_ns: f64,
    /// NUMA hinting fault: trap, PTE restore and the policy hook, excluding any migration.
    pub hint_fault_ns: f64,
    /// Fixed part of migrating one 4 KiB page (unmap, allocate, remap); the copy is added at
    /// the bandwidth of the slower of the two controllers (of the target for replicas).
    pub migrate_fixed_ns: f64,
    /// TLB shootdown charged to the migrating thread per migrated page.
    pub tlb_shootdown_ns: f64,
    /// Cache refill a thread pays after moving to another node.
    pub thread_migration_refill_ns: f64,
    /// Cost of unmapping one page for hinting (PTE change) when a policy decides it; the
    /// periodic scanner's own unmaps run in the background and are not charged.
    pub scan_unmap_ns: f64,
    /// Handling one access sample (the sampling interrupt and its handler recording the
    /// sample), charged to the sampled thread. Only policies that sample pay it.
    pub access_sample_ns: f64,
    /// Copy bandwidth of a whole-space move (`MoveSpace`, Linux's `migrate_pages(2)`), GB/s:
    /// the kernel copies the pages one by one in the mover's context, far below a
    /// controller's bandwidth; capped by the slower of the two controllers.
    pub move_space_copy_gbps: f64,
}

impl Default for OsCosts {
    fn default() -> Self {
        OsCosts {
            first_touch_fault_ns: 1_000.0,
            hint_fault_ns: 1_500.0,
            migrate_fixed_ns: 10_000.0,
            tlb_shootdown_ns: 2_000.0,
            thread_migration_refill_ns: 50_000.0,
            scan_unmap_ns: 20.0,
            access_sample_ns: 1_000.0,
            move_space_copy_gbps: 5.0,
        }
    }
}

/// Per-machine parameters of the simulator's core model (docs/machines.md, "Core
/// parameters"; docs/simulator.md, "The core model"). Every field is optional: absent, the
/// simulator's `[sim.core]` value applies.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CoreParams {
    /// Lines a thread keeps in flight for streaming (sequential) accesses: the core's
    /// line-fill buffers plus the lines the L2 hardware prefetcher has requested ahead of the
    /// demand stream. Derived by Little's law from a single-thread bandwidth and the idle
    /// latency: `bandwidth × latency / line size`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mlp_stream: Option<f64>,
    /// Where `mlp_stream` comes from (the published or measured figures it is derived from).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub mlp_stream_source: String,
    /// Core cycles one PAUSE instruction takes. An OpenMP runtime's barrier wait executes
    /// one per spin (the loop's load and branch overlap with it), so this turns libgomp's
    /// spin count into time under the simulator's `libgomp` wait policies (docs/scheduler.md,
    /// "Barrier waits: spin, then sleep").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause_cycles: Option<f64>,
    /// Where `pause_cycles` comes from.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub pause_cycles_source: String,
}

impl CoreParams {
    /// Lines in flight a thread may keep, at most [ours]: above any core's miss buffers and
    /// prefetch streams combined, and keeps the core model's costs finite.
    pub const MAX_MLP_STREAM: f64 = 256.0;

    /// Cycles per PAUSE, at most [ours]: ten times the longest published (about 140 on
    /// Skylake-class Intel cores), so a typo of a zero too many is still caught.
    pub const MAX_PAUSE_CYCLES: f64 = 10_000.0;

    /// `mlp_stream` by Little's law: lines in flight = bandwidth × latency / line size, from a
    /// single-thread streaming bandwidth (GB/s) and the idle latency (ns) of the same memory.
    pub fn mlp_from_littles_law(bandwidth_gbps: f64, latency_ns: f64, line_bytes: f64) -> f64 {
        bandwidth_gbps * latency_ns / line_bytes
    }

    /// Problems with the values, for the machine validator.
    pub fn check(&self) -> Result<(), String> {
        sourced_value("mlp_stream", self.mlp_stream, &self.mlp_stream_source, Self::MAX_MLP_STREAM, "lines in flight per thread")?;
        sourced_value("pause_cycles", self.pause_cycles, &self.pause_cycles_source, Self::MAX_PAUSE_CYCLES, "cycles per PAUSE")
    }
}

/// A `[core]` value in [1, `max`] and its source, which is not allowed without it.
fn sourced_value(key: &str, value: Option<f64>, source: &str, max: f64, what: &str) -> Result<(), String> {
    match value {
        Some(v) if !(v.is_finite() && (1.0..=max).contains(&v)) => {
            Err(format!("core.{key} = {}: {what} must be a finite number in [1, {max}]", validate::short(v)))
        }
        None if !source.is_empty() => Err(format!("core.{key}_source is set but core.{key} is not: give the value it is the source of")),
        _ => Ok(()),
    }
}

/// A machine description, as loaded from TOML (a preset or a user file).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Machine {
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    pub sockets: u32,
    /// Hardware threads per core enabled.
    pub smt: u32,
    pub clock_ghz: f64,
    pub page_sizes: Vec<u64>,
    /// Per-direction capacity of a direct link between nodes of different sockets, GB/s.
    pub link_bw_gbps: f64,
    /// Narrow direction (b -> a for a < b) of a cross-socket direct link; defaults to `link_bw_gbps`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_bw_narrow_gbps: Option<f64>,
    /// Per-direction capacity of a direct intra-socket link; 0 = not modelled (unlimited).
    pub intra_socket_link_bw_gbps: f64,
    pub link_sharing: LinkSharing,
    /// Idle load-to-use latency from CPUs of node i to memory of node j (CPU-less rows are 0).
    pub latency_ns: Vec<Vec<f64>>,
    /// Calibration target: latency when all cores load one node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ns_contended: Option<Vec<Vec<f64>>>,
    pub slit: Vec<Vec<u32>>,
    pub hops: Vec<Vec<u32>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_util_counter_pct: Option<LinkCounterRange>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_gflops_dp: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub l2_bytes_per_tile: Option<u64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub io_nodes: Vec<NodeId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipi_us: Option<IpiCost>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub costs_ms: Option<PageOpCostsMs>,
    #[serde(default)]
    pub auto_migration: bool,
    #[serde(default)]
    pub os_costs: OsCosts,
    /// Per-machine parameters of the simulator's core model (docs/machines.md, "Core
    /// parameters"); each one absent falls back to the `[sim.core]` value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub core: Option<CoreParams>,
    /// Published measurements of the modelled hardware (`numalab calibrate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub published: Option<Published>,
    /// Provenance and raw data of a measured machine (`numalab machine measure`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured: Option<Measured>,
    pub nodes: Vec<Node>,
}

impl Machine {
    /// Parse and validate a machine from TOML text. `origin` names the text in errors
    /// (a file path or `preset:NAME`).
    pub fn from_toml_str(text: &str, origin: &str) -> Result<Machine, MachineError> {
        let machine: Machine = toml::from_str(text).map_err(|e| MachineError::parse(origin, text, e))?;
        machine.validate().map_err(|problem| {
            // Name the line that sets the key when the file writes it.
            let origin = match crate::locate_line(text, &problem) {
                Some(l) => format!("{origin}:{l}"),
                None => origin.to_string(),
            };
            MachineError::Invalid { origin, problem }
        })?;
        Ok(machine)
    }

    /// Build from an already-parsed TOML tree (used after `--set` overrides).
    pub fn from_toml_value(value: toml::Value, origin: &str) -> Result<Machine, MachineError> {
        let machine: Machine =
            crate::from_toml_tree(value).map_err(|message| MachineError::Parse { origin: origin.to_string(), line: None, message })?;
        machine.validate().map_err(|problem| MachineError::Invalid { origin: origin.to_string(), problem })?;
        Ok(machine)
    }

    /// The machine as TOML, matrices one row per line. Every value of a validated machine is
    /// in range for TOML (docs/machines.md, "Validation"), so this cannot fail for one.
    pub fn to_toml_string(&self) -> String {
        let compact = toml::to_string(self).expect("a validated machine always serialises");
        let mut out = String::with_capacity(compact.len() + 256);
        for line in compact.lines() {
            match line.split_once(" = [[") {
                Some((key, rest)) if !key.contains(['[', '"']) && rest.ends_with("]]") => {
                    out.push_str(key);
                    out.push_str(" = [\n");
                    for row in rest[..rest.len() - 2].split("], [") {
                        out.push_str("    [");
                        out.push_str(row);
                        out.push_str("],\n");
                    }
                    out.push_str("]\n");
                }
                _ => {
                    out.push_str(line);
                    out.push('\n');
                }
            }
        }
        out
    }

    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// Logical CPUs (hardware threads) of a node.
    pub fn cpus_of_node(&self, node: NodeId) -> u32 {
        self.nodes[node as usize].cores * self.smt
    }

    pub fn total_cores(&self) -> u32 {
        self.nodes.iter().map(|n| n.cores).sum()
    }

    pub fn total_cpus(&self) -> u32 {
        self.total_cores() * self.smt
    }

    pub fn total_mem_bytes(&self) -> u64 {
        self.nodes.iter().map(|n| n.mem_bytes).sum()
    }

    /// Nodes that have CPUs, ascending.
    pub fn cpu_nodes(&self) -> Vec<NodeId> {
        (0..self.nodes.len() as NodeId).filter(|&n| self.nodes[n as usize].cores > 0).collect()
    }

    /// Nodes that have memory, ascending (memoryless nodes are never placement targets).
    pub fn memory_nodes(&self) -> Vec<NodeId> {
        (0..self.nodes.len() as NodeId).filter(|&n| self.nodes[n as usize].mem_bytes > 0).collect()
    }

    /// CPU numbering: node-major; within a node the first `cores` CPUs are the first hardware
    /// thread of each core, SMT siblings follow (as Linux enumerates them on most x86 servers).
    pub fn cpu_table(&self) -> CpuTable {
        let mut node_of_cpu = Vec::new();
        let mut first_cpu_of_node = Vec::new();
        let mut core_of_cpu = Vec::new();
        let mut core_base = 0u32;
        for (n, node) in self.nodes.iter().enumerate() {
            first_cpu_of_node.push(node_of_cpu.len() as CpuId);
            for sibling in 0..self.smt {
                for c in 0..node.cores {
                    let _ = sibling;
                    node_of_cpu.push(n as NodeId);
                    core_of_cpu.push(core_base + c);
                }
            }
            core_base += node.cores;
        }
        CpuTable { node_of_cpu, first_cpu_of_node, core_of_cpu }
    }

    /// The machine's own streaming lines in flight per thread (`[core] mlp_stream`), if it
    /// states one; the simulator uses its `[sim.core]` value otherwise.
    pub fn mlp_stream(&self) -> Option<f64> {
        self.core.as_ref().and_then(|c| c.mlp_stream)
    }

    /// The machine's own cycles per PAUSE instruction (`[core] pause_cycles`), if its file
    /// states them.
    pub fn pause_cycles(&self) -> Option<f64> {
        self.core.as_ref().and_then(|c| c.pause_cycles)
    }

    /// Base page size in bytes (the smallest listed).
    pub fn base_page_bytes(&self) -> u64 {
        self.page_sizes.iter().copied().min().unwrap_or(4096)
    }

    pub fn interconnect(&self) -> Interconnect {
        Interconnect::build(self)
    }

    /// Distance for placement fallbacks: SLIT, ties broken by node id by the caller.
    pub fn distance(&self, from: NodeId, to: NodeId) -> u32 {
        self.slit[from as usize][to as usize]
    }
}

/// CPU numbering derived from a machine.
#[derive(Clone, Debug)]
pub struct CpuTable {
    pub node_of_cpu: Vec<NodeId>,
    pub first_cpu_of_node: Vec<CpuId>,
    /// Physical core of each CPU; SMT siblings share one.
    pub core_of_cpu: Vec<u32>,
}

impl CpuTable {
    pub fn cpus(&self) -> usize {
        self.node_of_cpu.len()
    }
}

#[cfg(test)]
mod tests;
