//! A [`Topology`] as a numalab machine file (`topo --export`, `machine import`).
//!
//! sysfs gives node count, CPUs, memory, SLIT distances and (sometimes) packages, SMT, LLC size
//! and maximum frequency. Latency, bandwidth and, without cpufreq, the clock are not readable:
//! they are filled with stated assumptions and marked `# estimate: …` in the file.
//!
//! Hops: a pair is a direct link (1 hop) unless some third node `k` relays at no extra cost by
//! SLIT, `d(i,k) + d(k,j) − 10 ≤ d(i,j)` (SLIT includes the local 10 once per path); `hops` are
//! then shortest paths over the direct pairs. This makes the usual 2-socket 10/21 and SNC
//! 10/11/21 matrices fully connected and an 8-node 10/16/22 ring 2-hop at 22. The direct graph
//! is always connected: a relayed pair has both relay legs strictly shorter.

use crate::topology::Topology;
use numalab_core::machine::{LinkSharing, Machine, Node, OsCosts};
use numalab_core::Tier;
use std::collections::VecDeque;

/// The assumptions behind the estimated fields.
#[derive(Clone, Debug, PartialEq)]
pub struct ExportOptions {
    pub name: String,
    /// Local idle load-to-use latency assumed for every CPU node.
    pub local_latency_ns: f64,
    /// Memory-controller bandwidth assumed per node with memory.
    pub mem_bw_gbps: f64,
    /// Per-direction cross-socket link bandwidth assumed.
    pub link_bw_gbps: f64,
    /// Clock used when cpufreq is not readable.
    pub fallback_clock_ghz: f64,
}

impl Default for ExportOptions {
    fn default() -> Self {
        ExportOptions { name: "host".into(), local_latency_ns: 80.0, mem_bw_gbps: 20.0, link_bw_gbps: 20.0, fallback_clock_ghz: 2.0 }
    }
}

/// The machine and its TOML text with the estimate comments.
#[derive(Clone, Debug)]
pub struct Exported {
    pub machine: Machine,
    pub toml: String,
    /// One line per estimated or adjusted field (also in the TOML header).
    pub estimates: Vec<String>,
}

/// Direct-link matrix by the SLIT relay rule (module doc).
pub fn direct_links(slit: &[Vec<u32>]) -> Vec<Vec<bool>> {
    let n = slit.len();
    let mut direct = vec![vec![false; n]; n];
    for i in 0..n {
        for j in 0..n {
            if i == j {
                continue;
            }
            let relayed = (0..n).any(|k| k != i && k != j && slit[i][k] + slit[k][j] <= slit[i][j] + 10);
            direct[i][j] = !relayed;
        }
    }
    direct
}

/// Shortest paths over the direct pairs (BFS from each node).
pub fn hops_from_direct(direct: &[Vec<bool>]) -> Option<Vec<Vec<u32>>> {
    let n = direct.len();
    let mut hops = vec![vec![0u32; n]; n];
    for (s, row) in hops.iter_mut().enumerate() {
        let mut dist = vec![u32::MAX; n];
        dist[s] = 0;
        let mut q = VecDeque::from([s]);
        while let Some(u) = q.pop_front() {
            for v in 0..n {
                if direct[u][v] && dist[v] == u32::MAX {
                    dist[v] = dist[u] + 1;
                    q.push_back(v);
                }
            }
        }
        if dist.contains(&u32::MAX) {
            return None;
        }
        *row = dist;
    }
    Some(hops)
}

/// Build the machine. Errors are human-readable reasons (the topology cannot be expressed).
pub fn to_machine(topo: &Topology, opts: &ExportOptions) -> Result<Exported, String> {
    let n = topo.nodes.len();
    let mut estimates = Vec::new();
    let mut adjustments = Vec::new();

    // SLIT, made valid for the machine model: symmetric, 10 on the diagonal, ≥ 11 off it.
    let mut slit = vec![vec![10u32; n]; n];
    #[allow(clippy::needless_range_loop)] // i and j index two matrices symmetrically
    for i in 0..n {
        for j in 0..n {
            if i == j {
                if topo.nodes[i].distances[i] != 10 {
                    adjustments.push(format!("slit[{i}][{i}] was {}, set to 10", topo.nodes[i].distances[i]));
                }
                continue;
            }
            let (a, b) = (topo.nodes[i].distances[j], topo.nodes[j].distances[i]);
            let mut d = a.max(b);
            if a != b && i < j {
                adjustments.push(format!("SLIT is asymmetric between nodes {i} and {j} ({a} vs {b}); using {d}"));
            }
            if !(11..=254).contains(&d) {
                let clamped = d.clamp(11, 254);
                if i < j {
                    adjustments.push(format!("slit[{i}][{j}] = {d} is outside 11..=254; using {clamped}"));
                }
                d = clamped;
            }
            slit[i][j] = d;
        }
    }
    let direct = direct_links(&slit);
    let hops = hops_from_direct(&direct).ok_or("distance matrix leaves a node unreachable")?;

    // Packages: dense socket numbers in order of first appearance; CPU-less nodes join the
    // socket of their nearest CPU node.
    let mut packages: Vec<u32> = Vec::new();
    let mut node_socket: Vec<Option<u32>> = vec![None; n];
    let package_known = !topo.cpus.is_empty() && topo.cpus.iter().all(|c| c.package.is_some());
    for (i, node) in topo.nodes.iter().enumerate() {
        let Some(&first) = node.cpus.first() else {
            continue;
        };
        let pkg = if package_known { topo.cpu(first).and_then(|c| c.package).unwrap_or(0) } else { 0 };
        let s = match packages.iter().position(|&p| p == pkg) {
            Some(s) => s,
            None => {
                packages.push(pkg);
                packages.len() - 1
            }
        };
        node_socket[i] = Some(s as u32);
    }
    if !package_known {
        estimates.push("sockets: CPU package ids are not readable; every node is put on socket 0".into());
    }
    if packages.is_empty() {
        return Err("no node has CPUs".into());
    }
    for i in 0..n {
        if node_socket[i].is_none() {
            let nearest = (0..n).filter(|&j| !topo.nodes[j].cpus.is_empty()).min_by_key(|&j| (slit[i][j], j)).ok_or("no node has CPUs")?;
            node_socket[i] = node_socket[nearest];
        }
    }

    // SMT: hardware threads per core, if every node's CPU count divides by it.
    let smt = topo.cpus.iter().filter_map(|c| c.siblings.as_ref().map(|s| s.len() as u32)).max().unwrap_or(1).max(1);
    let smt = if topo.nodes.iter().all(|node| (node.cpus.len() as u32).is_multiple_of(smt)) { smt } else { 1 };
    if topo.cpus.iter().any(|c| c.siblings.is_none()) {
        estimates.push("smt: thread siblings are not readable; assumed 1".into());
    }

    let clock_ghz = match topo.cpus.iter().filter_map(|c| c.max_freq_khz).max() {
        Some(khz) => khz as f64 / 1e6,
        None => {
            estimates.push(format!("clock_ghz: cpufreq is not readable; assumed {}", opts.fallback_clock_ghz));
            opts.fallback_clock_ghz
        }
    };

    let ns_per_unit = opts.local_latency_ns / 10.0;
    estimates.push(format!(
        "latency_ns: {ns_per_unit} ns per SLIT unit (latency[i][j] = slit[i][j] x {ns_per_unit}, local {} ns); rows of CPU-less nodes are 0",
        opts.local_latency_ns
    ));
    let latency_ns: Vec<Vec<f64>> = (0..n)
        .map(|i| (0..n).map(|j| if topo.nodes[i].cpus.is_empty() { 0.0 } else { slit[i][j] as f64 * ns_per_unit }).collect())
        .collect();
    estimates.push("hops: a pair is direct unless a third node relays it at no extra SLIT cost (d(i,k) + d(k,j) - 10 <= d(i,j))".into());
    estimates.push(format!("mem_bw_gbps: {} GB/s per node with memory (not readable from sysfs)", opts.mem_bw_gbps));
    estimates.push(format!("link_bw_gbps: {} GB/s per direction (not readable from sysfs)", opts.link_bw_gbps));
    if topo.cpus.iter().any(|c| c.llc_bytes.is_none()) {
        estimates.push("llc_bytes: cache size is not readable for every CPU; 0 where missing".into());
    }
    estimates.push("os_costs: numalab defaults, not measured on this host".into());

    // Tier: the fastest kernel memory tier holding a CPU node is DRAM; CPU-less nodes in a
    // slower tier are taken as CXL-like expanders.
    let cpu_tier = topo.nodes.iter().filter(|node| !node.cpus.is_empty()).filter_map(|node| topo.tier_of(node.id)).min();
    let mut nodes = Vec::with_capacity(n);
    for (i, node) in topo.nodes.iter().enumerate() {
        let tier = match (topo.tier_of(node.id), cpu_tier) {
            (Some(t), Some(c)) if node.cpus.is_empty() && t > c => Tier::Cxl,
            _ => Tier::Dram,
        };
        if node.cpus.is_empty() {
            estimates.push(format!("nodes[{i}].tier: CPU-less node; `{}` inferred from the kernel memory tier", tier.as_str()));
        }
        let llc_bytes = node.cpus.first().and_then(|&c| topo.cpu(c)).and_then(|c| c.llc_bytes).unwrap_or(0);
        let cores = node.cpus.len() as u32 / smt;
        nodes.push(Node {
            socket: node_socket[i].unwrap_or(0),
            cores,
            mem_bytes: node.mem_total_bytes,
            tier,
            llc_bytes,
            mem_bw_gbps: if node.mem_total_bytes > 0 { opts.mem_bw_gbps } else { 0.0 },
            mem_peak_gbps: None,
            mem_channels: None,
        });
    }
    let mut page_sizes = vec![4096u64];
    page_sizes.extend(topo.huge_page_bytes.iter().copied().filter(|&b| b > 4096 && b.is_power_of_two()));
    let ids: Vec<String> = topo.nodes.iter().map(|node| node.id.to_string()).collect();
    let machine = Machine {
        name: opts.name.clone(),
        description: format!("imported from sysfs ({n} nodes; Linux node ids {})", ids.join(",")),
        sockets: packages.len() as u32,
        smt,
        clock_ghz,
        page_sizes,
        link_bw_gbps: opts.link_bw_gbps,
        link_bw_narrow_gbps: None,
        intra_socket_link_bw_gbps: 0.0,
        link_sharing: LinkSharing::NodePair,
        latency_ns,
        latency_ns_contended: None,
        slit,
        hops,
        link_util_counter_pct: None,
        peak_gflops_dp: None,
        l2_bytes_per_tile: None,
        io_nodes: Vec::new(),
        ipi_us: None,
        costs_ms: None,
        auto_migration: false,
        os_costs: OsCosts::default(),
        core: None,
        published: None,
        measured: None,
        nodes,
    };
    machine.validate().map_err(|e| format!("imported machine is invalid: {e}"))?;
    let toml = annotate(&machine.to_toml_string(), &estimates, &adjustments);
    Machine::from_toml_str(&toml, "sysfs import").map_err(|e| format!("exported TOML does not load back: {e}"))?;
    estimates.extend(adjustments);
    Ok(Exported { machine, toml, estimates })
}

/// Header with every estimate, plus an `# estimate:` line before each estimated field.
fn annotate(toml: &str, estimates: &[String], adjustments: &[String]) -> String {
    let mut out = String::from("# numalab machine imported from Linux sysfs.\n# Read from the host: nodes, CPUs, memory, SLIT distances");
    out.push_str(", and where present packages, SMT, LLC size, max frequency and memory tiers.\n");
    for e in estimates {
        out.push_str(&format!("# estimate: {e}\n"));
    }
    for a in adjustments {
        out.push_str(&format!("# adjusted: {a}\n"));
    }
    out.push('\n');
    for line in toml.lines() {
        let field = line.split('=').next().unwrap_or("").trim();
        let note = match field {
            "latency_ns" => Some("derived from SLIT, see header"),
            "hops" => Some("derived from SLIT by the relay rule, see header"),
            "link_bw_gbps" => Some("assumed, not readable from sysfs"),
            "mem_bw_gbps" => Some("assumed, not readable from sysfs"),
            _ if line.trim() == "[os_costs]" => Some("numalab defaults, not measured"),
            _ => None,
        };
        if let Some(note) = note {
            out.push_str(&format!("# estimate: {note}\n"));
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}
