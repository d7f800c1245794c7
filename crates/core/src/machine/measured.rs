//! Provenance and raw data of a machine file written by `numalab machine measure`
//! (docs/calibration.md, "Measuring your own machine"): the host and date the values were
//! measured on, which fields of the file are measured and which keep their import estimates,
//! and the measurements themselves (idle latency and bandwidth per node pair, the
//! loaded-latency curve, the pinning check). Informational: the simulator reads only the
//! ordinary fields the measurement filled in.

use serde::{Deserialize, Serialize};

/// `[measured]`: every value listed in `fields` was measured on this host at this date.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Measured {
    /// UTC date of the measurement, `YYYY-MM-DD`.
    pub date: String,
    pub hostname: String,
    /// `model name` of /proc/cpuinfo (empty when the kernel does not say).
    pub cpu_model: String,
    /// /proc/sys/kernel/osrelease.
    pub kernel_release: String,
    /// The program and version that measured (`numalab machine measure 0.1.0`).
    pub tool: String,
    /// A `--quick` measurement: small buffers and few repetitions, numbers less reliable.
    #[serde(default)]
    pub quick: bool,
    /// What backed the buffers: `hugetlb` (MAP_HUGETLB), `thp` (madvise(MADV_HUGEPAGE)) or
    /// `base` (base pages only).
    pub memory_backing: String,
    /// Linux node id of each node of the file, in order (the file numbers nodes densely).
    pub kernel_node_ids: Vec<u32>,
    /// Paths of the values of this file that were measured (`latency_ns[0][1]`,
    /// `nodes[0].mem_bw_gbps`, `published.latency_local_ns`, ...).
    pub fields: Vec<String>,
    /// The values that were not measured and keep their `machine import` estimate, one line
    /// each (field: how it was estimated).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub estimates: Vec<String>,
    /// Idle dependent-load latency, CPUs of node i (row) on memory of node j (column), ns;
    /// 0.0 where not measured (CPU-less rows, nodes left out with `--nodes`).
    pub chase_ns: Vec<Vec<f64>>,
    /// Streaming read, every CPU of node i on memory of node j, GB/s (0.0: not measured).
    pub read_gbps: Vec<Vec<f64>>,
    /// STREAM triad, every CPU of node i on memory of node j, GB/s as STREAM counts bytes
    /// (0.0: not measured).
    pub triad_gbps: Vec<Vec<f64>>,
    /// The loaded-latency curve of each measured CPU node with a spare CPU.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub loaded: Vec<LoadedPoint>,
    /// Where the measuring threads ran and where their memory was, as the kernel reported.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pinning: Vec<PinCheck>,
}

/// One point of a loaded-latency curve: a pointer chase on one CPU of `node` while the other
/// CPUs of the node stream reads from the node's memory at `intensity` (fraction of the time
/// each load thread reads; 0 = no load thread).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoadedPoint {
    pub node: u32,
    pub load_threads: u32,
    pub intensity: f64,
    /// Read bandwidth of the load threads while the chase ran, GB/s.
    pub bandwidth_gbps: f64,
    pub latency_ns: f64,
}

/// The pinning of one measurement as the kernel saw it: the CPUs its threads ran on
/// (`sched_getcpu`) and the node of sampled pages of its buffers (`move_pages` query).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PinCheck {
    /// Which measurement (`chase 0->1`, `triad 1->1`, ...), in the file's node numbers.
    pub what: String,
    /// Linux CPU ids the threads were pinned to.
    pub cpus_pinned: Vec<u32>,
    /// Linux CPU ids the threads reported running on.
    pub cpus_seen: Vec<u32>,
    /// Linux node id the memory was bound to (a team on several nodes: the first thread's;
    /// each thread's pages are counted against its own node).
    pub mem_node: u32,
    pub pages_checked: u64,
    /// Sampled pages the kernel reported on `mem_node`.
    pub pages_on_node: u64,
    /// What the kernel reported for the other sampled pages: a node id, or a negative errno.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pages_elsewhere: Vec<i32>,
}

impl PinCheck {
    /// Every thread ran where it was pinned and every sampled page is on the bound node.
    pub fn ok(&self) -> bool {
        self.cpus_seen.iter().all(|c| self.cpus_pinned.contains(c)) && self.pages_checked > 0 && self.pages_on_node == self.pages_checked
    }
}

impl Measured {
    /// Problems with the table, for the machine validator (`n` nodes).
    pub fn check(&self, n: usize) -> Result<(), String> {
        if self.date.len() != 10
            || !self.date.bytes().enumerate().all(|(i, b)| if i == 4 || i == 7 { b == b'-' } else { b.is_ascii_digit() })
        {
            return Err(format!("measured.date = {:?} must be a date YYYY-MM-DD", self.date));
        }
        if self.hostname.trim().is_empty() {
            return Err("measured.hostname must name the measured host".into());
        }
        if self.kernel_node_ids.len() != n {
            return Err(format!("measured.kernel_node_ids has {} entries; the machine has {n} nodes", self.kernel_node_ids.len()));
        }
        for (name, m) in [("chase_ns", &self.chase_ns), ("read_gbps", &self.read_gbps), ("triad_gbps", &self.triad_gbps)] {
            if m.len() != n {
                return Err(format!("measured.{name} has {} rows; the machine has {n} nodes", m.len()));
            }
            for (i, row) in m.iter().enumerate() {
                if row.len() != n {
                    return Err(format!("measured.{name} row {i} has {} entries; the machine has {n} nodes", row.len()));
                }
                if let Some(v) = row.iter().find(|v| !(v.is_finite() && **v >= 0.0)) {
                    return Err(format!("measured.{name} row {i}: {v} must be a finite number >= 0"));
                }
            }
        }
        for p in &self.loaded {
            if p.node as usize >= n {
                return Err(format!("measured.loaded names node {}, but the machine has {n} nodes", p.node));
            }
            let finite = [p.intensity, p.bandwidth_gbps, p.latency_ns].iter().all(|v| v.is_finite() && *v >= 0.0);
            if !finite || p.intensity > 1.0 {
                return Err(format!("measured.loaded point of node {}: values must be finite, >= 0, intensity <= 1", p.node));
            }
        }
        Ok(())
    }
}
