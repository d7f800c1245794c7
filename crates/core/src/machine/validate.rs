//! Consistency and range checks of a machine (docs/machines.md, "Validation"): a loader
//! rejects unknown fields, every number must be finite and inside a documented range, and
//! the matrices must be consistent with each other.

use super::Machine;

/// Upper bounds on what a machine may describe (docs/machines.md, "Validation"). They keep
/// every derived quantity finite and every simulation bounded; real machines sit far below.
pub mod limits {
    /// Physical cores on one node.
    pub const MAX_CORES_PER_NODE: u32 = 1024;
    /// Logical CPUs (cores × smt) on the whole machine.
    pub const MAX_CPUS: u32 = 4096;
    pub const MAX_SMT: u32 = 8;
    /// Bytes of memory on one node (1 PiB).
    pub const MAX_NODE_BYTES: u64 = 1 << 50;
    /// Bytes of a cache (llc_bytes, l2_bytes_per_tile) and of a page size (1 TiB).
    pub const MAX_CACHE_BYTES: u64 = 1 << 40;
    /// Load-to-use latency, ns (100 µs).
    pub const MAX_LATENCY_NS: f64 = 100_000.0;
    /// Memory and link bandwidth, GB/s.
    pub const MIN_BW_GBPS: f64 = 0.001;
    pub const MAX_BW_GBPS: f64 = 100_000.0;
    pub const MAX_CLOCK_GHZ: f64 = 100.0;
    /// Any one OS cost, ns (100 ms).
    pub const MAX_OS_COST_NS: f64 = 1e8;
}
use limits::*;

/// `v` is finite and lies in `[lo, hi]`; the error names the key and the unit.
fn in_range(key: &str, v: f64, lo: f64, hi: f64, unit: &str) -> Result<(), String> {
    if v.is_finite() && v >= lo && v <= hi {
        Ok(())
    } else {
        Err(format!("`{key}` = {} {unit}: must be a finite number in [{lo}, {hi}]", short(v)))
    }
}

/// A number as written by a person: `1e308`, not 309 digits.
pub fn short(v: f64) -> String {
    if v.is_finite() && v != 0.0 && (v.abs() >= 1e9 || v.abs() < 1e-4) {
        format!("{v:e}")
    } else {
        format!("{v}")
    }
}

impl Machine {
    /// Check the invariants a machine must satisfy; the error names the offending field.
    pub fn validate(&self) -> Result<(), String> {
        let n = self.nodes.len();
        if n == 0 {
            return Err("`nodes` is empty: a machine needs at least one node".into());
        }
        if n > 255 {
            return Err(format!("{n} nodes: at most 255 are supported"));
        }
        self.check_ranges()?;
        if let Some(c) = &self.core {
            c.check()?;
        }
        if let Some(p) = &self.published {
            p.check()?;
        }
        if let Some(m) = &self.measured {
            m.check(n)?;
        }
        if self.sockets == 0 {
            return Err("`sockets` must be at least 1".into());
        }
        if self.smt == 0 {
            return Err("`smt` must be at least 1".into());
        }
        if !is_positive(self.clock_ghz) {
            return Err(format!("`clock_ghz` = {} must be positive", self.clock_ghz));
        }
        if self.page_sizes.is_empty() || self.page_sizes.iter().any(|&p| p < 4096 || !p.is_power_of_two()) {
            return Err(format!("`page_sizes` = {:?}: need powers of two of at least 4096", self.page_sizes));
        }
        check_matrix_shape("latency_ns", &self.latency_ns, n)?;
        check_matrix_shape("slit", &self.slit, n)?;
        check_matrix_shape("hops", &self.hops, n)?;
        if let Some(c) = &self.latency_ns_contended {
            check_matrix_shape("latency_ns_contended", c, n)?;
        }
        for (i, node) in self.nodes.iter().enumerate() {
            if node.socket >= self.sockets {
                return Err(format!("nodes[{i}].socket = {} is not below `sockets` = {}", node.socket, self.sockets));
            }
            if !is_non_negative(node.mem_bw_gbps) || (node.mem_bytes > 0 && node.mem_bw_gbps <= 0.0) {
                return Err(format!("nodes[{i}].mem_bw_gbps = {} must be positive on a node with memory", node.mem_bw_gbps));
            }
            if let Some(peak) = node.mem_peak_gbps {
                if node.mem_bw_gbps > peak {
                    return Err(format!("nodes[{i}].mem_bw_gbps = {} exceeds mem_peak_gbps = {peak}", node.mem_bw_gbps));
                }
            }
        }
        for s in 0..self.sockets {
            if !self.nodes.iter().any(|node| node.socket == s && node.cores > 0) {
                return Err(format!("socket {s} has no node with CPUs"));
            }
        }
        if self.memory_nodes().is_empty() {
            return Err("no node has memory".into());
        }
        for i in 0..n {
            if self.slit[i][i] != 10 {
                return Err(format!("slit[{i}][{i}] = {} must be 10", self.slit[i][i]));
            }
            if self.hops[i][i] != 0 {
                return Err(format!("hops[{i}][{i}] = {} must be 0", self.hops[i][i]));
            }
            for j in 0..n {
                if self.slit[i][j] != self.slit[j][i] {
                    return Err(format!("slit is not symmetric at [{i}][{j}]"));
                }
                if i != j && !(11..=254).contains(&self.slit[i][j]) {
                    return Err(format!("slit[{i}][{j}] = {} must lie in 11..=254", self.slit[i][j]));
                }
                if self.hops[i][j] != self.hops[j][i] {
                    return Err(format!("hops is not symmetric at [{i}][{j}]"));
                }
                if i != j && self.hops[i][j] == 0 {
                    return Err(format!("hops[{i}][{j}] = 0 off the diagonal"));
                }
            }
            let cpu_node = self.nodes[i].cores > 0;
            let row = &self.latency_ns[i];
            if cpu_node {
                let local = row[i];
                if !is_positive(local) {
                    return Err(format!("latency_ns[{i}][{i}] = {local} must be positive on a CPU node"));
                }
                for (j, &l) in row.iter().enumerate() {
                    if l < local {
                        return Err(format!("latency_ns[{i}][{j}] = {l} is below the local latency {local}"));
                    }
                }
            } else if row.iter().any(|&l| l != 0.0) {
                return Err(format!("latency_ns row {i} must be all 0.0: node {i} has no CPUs"));
            }
        }
        let locals: Vec<f64> = (0..n).filter(|&i| self.nodes[i].cores > 0).map(|i| self.latency_ns[i][i]).collect();
        if locals.windows(2).any(|w| w[0] != w[1]) {
            return Err(format!("local latencies differ between CPU nodes: {locals:?}"));
        }
        check_hops_shortest_paths(&self.hops)?;
        for &io in &self.io_nodes {
            if io as usize >= n {
                return Err(format!("io_nodes names node {io}, but the machine has {n} nodes"));
            }
        }
        let cross_socket_direct = (0..n).any(|a| (0..n).any(|b| self.hops[a][b] == 1 && self.nodes[a].socket != self.nodes[b].socket));
        if cross_socket_direct && !is_positive(self.link_bw_gbps) {
            return Err("link_bw_gbps must be positive: the machine has cross-socket links".into());
        }
        if self.intra_socket_link_bw_gbps < 0.0 {
            return Err("intra_socket_link_bw_gbps must not be negative".into());
        }
        Ok(())
    }
}

impl Machine {
    /// Every number finite and inside its documented range (before the consistency checks,
    /// so those never see NaN or infinity).
    fn check_ranges(&self) -> Result<(), String> {
        if self.smt > MAX_SMT {
            return Err(format!("`smt` = {}: at most {MAX_SMT}", self.smt));
        }
        in_range("clock_ghz", self.clock_ghz, 0.01, MAX_CLOCK_GHZ, "GHz")?;
        in_range("link_bw_gbps", self.link_bw_gbps, 0.0, MAX_BW_GBPS, "GB/s")?;
        if self.link_bw_gbps != 0.0 && self.link_bw_gbps < MIN_BW_GBPS {
            return Err(format!(
                "`link_bw_gbps` = {} GB/s: must be 0 (no cross-socket links) or at least {MIN_BW_GBPS}",
                self.link_bw_gbps
            ));
        }
        if let Some(v) = self.link_bw_narrow_gbps {
            in_range("link_bw_narrow_gbps", v, MIN_BW_GBPS, MAX_BW_GBPS, "GB/s")?;
        }
        in_range("intra_socket_link_bw_gbps", self.intra_socket_link_bw_gbps, 0.0, MAX_BW_GBPS, "GB/s")?;
        if self.intra_socket_link_bw_gbps != 0.0 && self.intra_socket_link_bw_gbps < MIN_BW_GBPS {
            return Err(format!(
                "`intra_socket_link_bw_gbps` = {} GB/s: must be 0 (not modelled) or at least {MIN_BW_GBPS}",
                self.intra_socket_link_bw_gbps
            ));
        }
        if self.page_sizes.len() > 8 || self.page_sizes.iter().any(|&p| p > MAX_CACHE_BYTES) {
            return Err(format!("`page_sizes` = {:?}: at most 8 sizes of at most {MAX_CACHE_BYTES} bytes", self.page_sizes));
        }
        for (name, m) in [("latency_ns", Some(&self.latency_ns)), ("latency_ns_contended", self.latency_ns_contended.as_ref())] {
            for (i, row) in m.into_iter().flatten().enumerate() {
                for (j, &l) in row.iter().enumerate() {
                    in_range(&format!("{name}[{i}][{j}]"), l, 0.0, MAX_LATENCY_NS, "ns")?;
                }
            }
        }
        if let Some(r) = &self.link_util_counter_pct {
            in_range("link_util_counter_pct.idle", r.idle, 0.0, 100.0, "%")?;
            in_range("link_util_counter_pct.saturated", r.saturated, 0.0, 100.0, "%")?;
        }
        if let Some(g) = self.peak_gflops_dp {
            in_range("peak_gflops_dp", g, 1e-3, 1e9, "GFLOP/s")?;
        }
        if let Some(b) = self.l2_bytes_per_tile {
            if b > MAX_CACHE_BYTES {
                return Err(format!("`l2_bytes_per_tile` = {b} bytes: at most {MAX_CACHE_BYTES}"));
            }
        }
        if let Some(ipi) = &self.ipi_us {
            in_range("ipi_us.native", ipi.native, 0.0, 1e6, "µs")?;
            in_range("ipi_us.guest", ipi.guest, 0.0, 1e6, "µs")?;
        }
        if let Some(c) = &self.costs_ms {
            in_range("costs_ms.migrate", c.migrate, 0.0, 1e6, "ms")?;
            in_range("costs_ms.replicate", c.replicate, 0.0, 1e6, "ms")?;
            in_range("costs_ms.coherency_fault", c.coherency_fault, 0.0, 1e6, "ms")?;
        }
        let o = &self.os_costs;
        for (k, v) in [
            ("first_touch_fault_ns", o.first_touch_fault_ns),
            ("hint_fault_ns", o.hint_fault_ns),
            ("migrate_fixed_ns", o.migrate_fixed_ns),
            ("tlb_shootdown_ns", o.tlb_shootdown_ns),
            ("thread_migration_refill_ns", o.thread_migration_refill_ns),
            ("scan_unmap_ns", o.scan_unmap_ns),
            ("access_sample_ns", o.access_sample_ns),
        ] {
            in_range(&format!("os_costs.{k}"), v, 0.0, MAX_OS_COST_NS, "ns")?;
        }
        in_range("os_costs.move_space_copy_gbps", o.move_space_copy_gbps, MIN_BW_GBPS, MAX_BW_GBPS, "GB/s")?;
        let base = self.page_sizes.iter().copied().min().unwrap_or(4096);
        let mut cpus = 0u64;
        for (i, node) in self.nodes.iter().enumerate() {
            if node.cores > MAX_CORES_PER_NODE {
                return Err(format!("nodes[{i}].cores = {}: at most {MAX_CORES_PER_NODE}", node.cores));
            }
            cpus += node.cores as u64 * self.smt as u64;
            if node.mem_bytes > MAX_NODE_BYTES || (node.mem_bytes > 0 && node.mem_bytes < base) {
                return Err(format!(
                    "nodes[{i}].mem_bytes = {} bytes: must be 0 (no memory) or between one page ({base}) and {MAX_NODE_BYTES}",
                    node.mem_bytes
                ));
            }
            if node.llc_bytes > MAX_CACHE_BYTES {
                return Err(format!("nodes[{i}].llc_bytes = {} bytes: at most {MAX_CACHE_BYTES}", node.llc_bytes));
            }
            if node.mem_bytes > 0 {
                in_range(&format!("nodes[{i}].mem_bw_gbps"), node.mem_bw_gbps, MIN_BW_GBPS, MAX_BW_GBPS, "GB/s")?;
            } else {
                in_range(&format!("nodes[{i}].mem_bw_gbps"), node.mem_bw_gbps, 0.0, MAX_BW_GBPS, "GB/s")?;
            }
            if let Some(p) = node.mem_peak_gbps {
                in_range(&format!("nodes[{i}].mem_peak_gbps"), p, MIN_BW_GBPS, MAX_BW_GBPS, "GB/s")?;
            }
        }
        if cpus > MAX_CPUS as u64 {
            return Err(format!("the machine has {cpus} logical CPUs (cores × smt): at most {MAX_CPUS}"));
        }
        Ok(())
    }
}

fn check_matrix_shape<T>(name: &str, m: &[Vec<T>], n: usize) -> Result<(), String> {
    if m.len() != n {
        return Err(format!("`{name}` has {} rows; the machine has {n} nodes", m.len()));
    }
    for (i, row) in m.iter().enumerate() {
        if row.len() != n {
            return Err(format!("`{name}` row {i} has {} entries; the machine has {n} nodes", row.len()));
        }
    }
    Ok(())
}

/// `hops` must equal the shortest-path length over the pairs with `hops = 1` (BFS per node).
fn check_hops_shortest_paths(hops: &[Vec<u32>]) -> Result<(), String> {
    let n = hops.len();
    for s in 0..n {
        let mut dist = vec![u32::MAX; n];
        dist[s] = 0;
        let mut queue = std::collections::VecDeque::from([s]);
        while let Some(u) = queue.pop_front() {
            for v in 0..n {
                if hops[u][v] == 1 && dist[v] == u32::MAX {
                    dist[v] = dist[u] + 1;
                    queue.push_back(v);
                }
            }
        }
        for t in 0..n {
            if dist[t] != hops[s][t] {
                return Err(format!(
                    "hops[{s}][{t}] = {} but the shortest path over direct links is {}",
                    hops[s][t],
                    if dist[t] == u32::MAX { "unreachable".to_string() } else { dist[t].to_string() }
                ));
            }
        }
    }
    Ok(())
}

/// `x > 0`, false for NaN (which a plain negated comparison would let through).
fn is_positive(x: f64) -> bool {
    x > 0.0
}

fn is_non_negative(x: f64) -> bool {
    x >= 0.0
}
